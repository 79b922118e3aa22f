# 17.1: an except body whose first line runs again (a loop header; a statement spanning several
# lines) is no re-raise; a real bare `raise` caught by an outer handler of the frame still is.
def total(items):
    n = 0
    try:
        raise ValueError("v")
    except ValueError:
        for x in items:
            n += x
    return n


def spans():
    try:
        raise KeyError("k")
    except KeyError:
        y = max(1,
                2)
    return y


def bare(k):
    try:
        try:
            raise KeyError(k)
        except KeyError:
            for _ in range(2):
                pass
            raise
    except KeyError as e:
        while k:
            k -= 1
        return str(e)


def loops():
    out = []
    for i in range(3):
        try:
            if i % 2:
                raise IndexError(i)
        except IndexError:
            for j in range(i):
                out.append(j)
    return out


print(total([1, 2, 3]), spans(), bare(2), loops())
