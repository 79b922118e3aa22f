from sympy.ntheory.factor_ import _factorint_small


def test_primorial():
    factors = {}
    n, next_p = _factorint_small(factors, 2 * 3 * 5 * 7 * 11 * 13, 100, 3)
    assert factors == {2: 1, 3: 1, 5: 1, 7: 1, 11: 1}
    assert (n, next_p) == (13, 0)
