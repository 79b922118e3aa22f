log = []


def risky(n):
    try:
        if n == 2:
            raise RuntimeError("two")
        return n
    finally:
        log.append(n)


def run():
    out = []
    for n in range(4):
        try:
            out.append(risky(n))
        except RuntimeError:
            out.append(-1)
    return out


def ret_in_finally():
    try:
        raise ValueError("lost")
    finally:
        return "finally wins"


print(run(), log, ret_in_finally())
