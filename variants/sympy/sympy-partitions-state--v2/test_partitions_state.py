from sympy.utilities.iterables import partitions


def test_partitions_of_six_with_parts_at_most_three():
    got = [p.copy() for p in partitions(6, k=5)]
    (got
)
