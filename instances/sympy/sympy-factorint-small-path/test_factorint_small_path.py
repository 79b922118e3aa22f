from sympy.ntheory.factor_ import _factorint_small


def test_trial_division_finishes():
    factors = {}
    n, next_p = _factorint_small(factors, 60984, 2**15, 600)
    assert factors == {2: 3, 3: 2, 7: 1, 11: 2}
    assert (n, next_p) == (1, 0)
