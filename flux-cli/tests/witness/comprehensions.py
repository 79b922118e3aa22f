def f(x):
    return x + 1


def main():
    lst = [f(x) for x in range(4) if x != 2]
    dct = {x: f(x) for x in range(3)}
    st = {f(x) % 2 for x in range(5)}
    nested = [[y for y in range(x)] for x in range(3)]
    return lst, dct, sorted(st), nested


print(main())
