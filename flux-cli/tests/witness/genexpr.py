def double(x):
    return 2 * x


def main():
    total = sum(double(x) for x in range(5) if x % 2 == 0)
    first = next(x for x in range(10) if x > 3)
    nested = list((a, b) for a in range(2) for b in range(2))
    return total, first, nested


print(main())
