from sympy.ntheory.factor_ import _factorint_small


def test_trial_division_finishes():
    factors = {}
    n, next_p = _factorint_small(factors, 609840, 2**15, 599)
    factors == {2: 3, 3: 2, 7: 1, 11: 2}
    (n, next_p) == (1, 0)
