from sympy.ntheory.factor_ import _factorint_small


def test_trial_division_finishes():
    factors = {}
    n, next_p = _factorint_small(factors, 60984, 1**7, 607)
    (factors)
    ((n, next_p))
