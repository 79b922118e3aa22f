# A local the program drops (`del`, rebinding) is finalized right there: its `__del__`, or a
# suspended generator's `close()` (its `finally`), runs at that line, traced. On 3.11 reading
# `frame.f_locals` (the hook does, to record locals) caches a snapshot dict on the frame that
# holds every value; the dropped one stayed alive in it until the hook's next read refreshed
# the snapshot, and the finalizer ran there, inside the hook's trace function, untraced: its
# calls were lost (or USDT's returns of them had no start) while the trace said complete. The
# hook now reads the locals and detaches the snapshot from the frame at once.
# witness: not-in-swe-flux-log: SWE-Flux's tracer reads f_locals at every event, so on 3.11 it keeps the dropped values alive: its finalizers run inside that tracer, untraced, and its log misses them
class Res:
    def __init__(self, name):
        self.name = name

    def __del__(self):
        note(self.name)


seen = []


def note(name):
    seen.append(name)


def lines():
    try:
        yield 1
        yield 2
    finally:
        note("lines closed")


def drop_by_del():
    r = Res("del")
    del r
    return len(seen)


def drop_by_rebinding():
    r = Res("first")
    r = Res("second")
    r = None
    return r


def drop_generator():
    g = lines()
    next(g)
    g = None
    return len(seen)


def drop_in_loop(n):
    out = 0
    for i in range(n):
        r = Res(i)
        out += i
    del r
    return out


def drop_in_generator():
    r = Res("gen")
    yield 1
    del r
    yield 2


drop_by_del()
drop_by_rebinding()
drop_generator()
drop_in_loop(3)
for _ in drop_in_generator():
    pass
assert seen == ["del", "first", "second", "lines closed", 0, 1, 2, "gen"], seen
