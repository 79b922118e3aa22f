def div(a, b):
    try:
        q = a // b
    except ZeroDivisionError:
        q = None
    else:
        q = q + 1
    finally:
        a = 0
    return q


def lookup(d, k):
    try:
        v = d[k]
    except (KeyError, TypeError) as e:
        return "missing " + type(e).__name__
    else:
        return v


print(div(7, 2), div(1, 0), lookup({"a": 1}, "a"), lookup({}, "b"), lookup({}, []))
