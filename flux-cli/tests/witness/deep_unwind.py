def a(n):
    if n == 0:
        raise KeyError("deep")
    return a(n - 1)


def b():
    try:
        return a(4)
    finally:
        pass


def gen():
    yield 1
    b()
    yield 2


def top():
    out = []
    try:
        for v in gen():
            out.append(v)
    except KeyError as e:
        out.append(repr(e))
    return out


print(top())
