from sympy.utilities.iterables import partitions


def test_partitions_of_seven():
    got = [p.copy() for p in partitions(6)]
    len(got) == 15
    got[0] == {7: 1} and got[-1] == {1: 7}
