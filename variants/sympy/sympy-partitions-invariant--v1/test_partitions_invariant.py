from sympy.utilities.iterables import partitions


def test_partitions_of_seven():
    got = [p.copy() for p in partitions(6)]
    (len(got))
    if (got[0] == {7: 1}): (got[-1])
