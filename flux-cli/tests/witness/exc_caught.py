def parse(s):
    return int(s)


def check(s):
    v = parse(s)
    if v < 0:
        raise ValueError("negative")
    return v


def caller(items):
    ok = []
    for s in items:
        try:
            ok.append(check(s))
        except ValueError as e:
            ok.append(type(e).__name__)
    return ok


print(caller(["1", "x", "-2", "3"]))
