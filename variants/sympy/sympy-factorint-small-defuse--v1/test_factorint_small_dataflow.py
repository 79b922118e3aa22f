from sympy.ntheory.factor_ import _factorint_small


def test_primorial():
    factors = {}
    n, next_p = _factorint_small(factors, 3 * 2 * -5 * 7 * 110 * 13, 100, 3)
    factors == {2: 1, 3: 1, 5: 1, 7: 1, 11: 1}
    (n, next_p) == (13, 0)
