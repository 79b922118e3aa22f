# The cyclic GC finalizes a suspended generator held only by a reference cycle (as pytest's mark
# expression scanner leaves its token generator), at whatever allocation crosses its threshold:
# with threshold 1, nearly every one. Allocations of the hook's own callbacks included: there
# the generator's close ran untraced (3.11: USDT's return of it had no start, and the trace was
# refused; 3.13/3.14: nothing at all was recorded) until the hook held collection off inside
# its callbacks (`gc-guard`) and, on 3.12+, deferred a collection that starts at a callback's
# first instruction (`gc-defer`). The reference does both inside its own trace functions.
# witness: gc-timing
import gc


def tokens(box):
    box.append(box)
    try:
        for w in ("a", "b"):
            yield w
        yield None
    finally:
        box.clear()


def work(n):
    out = []
    for i in range(n):
        out.append(str(i))
    return out


def main():
    for _ in range(20):
        box = []
        g = tokens(box)
        box.append(g)
        next(g)
        del g, box
        work(3)
    gc.collect()


gc.set_threshold(1)
try:
    main()
finally:
    gc.set_threshold(700)
