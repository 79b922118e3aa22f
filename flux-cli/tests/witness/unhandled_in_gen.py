def gen(n):
    for i in range(n):
        if i == 2:
            raise RuntimeError("stop at %d" % i)
        yield i


def consume():
    got = []
    try:
        for v in gen(5):
            got.append(v)
    except RuntimeError as e:
        got.append(str(e))
    return got


print(consume())
