from sympy.utilities.iterables import partitions


def test_partitions_of_seven():
    got = [p.copy() for p in partitions(7)]
    assert len(got) == 15
    assert got[0] == {7: 1} and got[-1] == {1: 7}
