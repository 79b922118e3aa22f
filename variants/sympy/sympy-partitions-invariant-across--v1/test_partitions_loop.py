from sympy.utilities.iterables import partitions


def parts(*args, **kwargs):
    return [p.copy() for p in partitions(*args, **kwargs)]


def test_five():
    assert len(parts(5)) == 7


def test_six_at_most_two_parts():
    assert parts(6, m=2) == [{6: 1}, {5: 1, 1: 1}, {4: 1, 2: 1}, {3: 2}]


def test_seven_parts_at_most_three():
    assert len(parts(7, k=3)) == 8


def test_one():
    (parts(2))


def test_eight_two_parts_at_most_four():
    (parts(8, m=9, k=4))
