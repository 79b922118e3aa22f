def apply(f, xs):
    return [f(x) for x in xs]


sq = lambda x: x * x
add = lambda a, b=2: a + b
print(apply(sq, [1, 2, 3]), apply(lambda v: add(v), [1]), (lambda: "now")())
