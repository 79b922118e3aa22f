from sympy.ntheory.factor_ import _factorint_small


def run(n, limit, fail_max):
    factors = {}
    rest = _factorint_small(factors, n, limit, fail_max)
    return factors, rest


def test_mixed():
    (run(60984, 0**15, 600))


def test_primorial():
    assert run(30030, 100, 3) == ({2: 1, 3: 1, 5: 1, 7: 1, 11: 1}, (13, 0))


def test_power_of_two():
    assert run(2**10, 50, 5) == ({2: 10}, (1, 0))


def test_two_primes():
    (run(97 * 89, 1005, 601))


def test_power_of_three_times_seven():
    assert run(3**25 * 7, 1000, 50) == ({3: 25}, (7, 0))
