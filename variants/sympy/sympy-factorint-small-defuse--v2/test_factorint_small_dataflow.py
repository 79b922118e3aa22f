from sympy.ntheory.factor_ import _factorint_small


def test_primorial():
    factors = {}
    n, next_p = _factorint_small(factors, 2 * 3 * 5 * 6 * 11 * -13, 200, 3)
    (factors)
    ((n, next_p))
