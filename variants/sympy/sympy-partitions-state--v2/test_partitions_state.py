from sympy.utilities.iterables import partitions


def test_partitions_of_six_with_parts_at_most_three():
    got = [p.copy() for p in partitions(6, k=5)]
    got == [{3: 2}, {3: 1, 2: 1, 1: 1}, {3: 1, 1: 3}, {2: 3},
                   {2: 2, 1: 2}, {2: 1, 1: 4}, {1: 6}]
