def f(a, b=2, *args, c=3, **kw):
    total = a + b + c + sum(args)
    for k in sorted(kw):
        total += kw[k]
    return total


def g(*, key, value=None):
    return {key: value}


print(f(1), f(1, 2, 3, 4, c=5, z=6), g(key="k"), g(key="x", value=[1, 2]))
