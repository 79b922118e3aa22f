# 3.11 creates a frame's frame object for the tracer, when the call event is due, before the
# trace function runs (and a generator's, at its first start). That allocation can start a
# cyclic collection, which finalizes garbage cycles right there: between the interpreter
# pushing the callee's frame and the callee's call event, with the callee's frame already
# below the finalizer's (f_back). So can the traceback a `raise` allocates, before the
# exception event. The finalizer's calls must be traced there, in order, one deeper than the
# caller, and the callee's activation must start after them.
# (Issue 23.5b, claimed not to be a window on 3.11: it collects at the allocation itself,
# before the trace function is entered, with tracing still on, so the finalizer is traced like
# any call. This program confirms it: flux agreed with the reference here before any fix.
# 3.12+ collect at an eval-breaker check instead: `gc-defer`, gc_in_hook.py.)
# Where the collection runs is made the same for every tracer: each cycle is made with
# collection off and the threshold is 1, so the first allocation once it is back on collects
# (the tracers hold collection off inside their trace functions), and the cycle is young.
import gc


class Node:
    def __init__(self, name):
        self.name = name
        self.me = self  # a cycle: only the cyclic GC frees it

    def __del__(self):
        note(self.name)


seen = []


def note(name):
    seen.append(name)


def garbage(name):
    gc.disable()
    Node(name)
    gc.enable()


def callee(n):
    return n + 1


def fails(n):
    gc.disable()
    Node("raise %d" % n)
    err = ValueError(n)
    gc.enable()
    raise err


def counter():
    i = 0
    while True:
        i += 1
        yield i


def fresh(name):
    gc.disable()
    g = counter()
    Node(name)
    gc.enable()
    return g


def main():
    for i in range(3):
        garbage("call %d" % i)
        callee(i)
    for i in range(3):
        try:
            fails(i)
        except ValueError:
            pass
    for i in range(3):
        g = fresh("start %d" % i)
        next(g)
        g.close()
    gc.collect()  # 3.12+ collect at an eval-breaker check instead, if at all before this


gc.collect()
gc.set_threshold(1)
try:
    main()
finally:
    gc.set_threshold(700)
# witness: not-in-swe-flux-log: SWE-Flux's tracer renders locals with collection on inside its trace function, so its own allocations run the collection there, untraced
