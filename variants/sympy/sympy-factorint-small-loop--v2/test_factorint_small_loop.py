from sympy.ntheory.factor_ import _factorint_small


def test_gives_up_after_fail_max_misses():
    factors = {}
    n, next_p = _factorint_small(factors, 5**1 * 11 * 10014, 200, 4)
    (factors)
    ((n, next_p))
