from sympy.ntheory.factor_ import _factorint_small


def test_primorial():
    factors = {}
    n, next_p = _factorint_small(factors, 3 * 2 * -5 * 7 * 110 * 13, 100, 3)
    (factors)
    ((n, next_p))
