def inner(n):
    for i in range(n):
        got = yield i
        if got:
            yield got * 10
    return n


def outer():
    r = yield from inner(2)
    r2 = yield from inner(1)
    return r + r2


def drive():
    g = outer()
    out = [next(g)]
    out.append(g.send(5))
    try:
        while True:
            out.append(next(g))
    except StopIteration as e:
        out.append(e.value)
    return out


print(drive())
