# Scope "run" ends at the hook's own atexit handler, which is registered before the program
# runs and so runs last: the program's atexit handlers (and what they call, an exception one
# of them handles included) are part of the trace on every interpreter, in LIFO order.
import atexit


def tally(xs):
    total = 0
    for x in xs:
        total += x
    return total


def flush(name, xs):
    try:
        if not xs:
            raise LookupError(name)
        return tally(xs)
    except LookupError:
        return -1


def first():
    flush("first", [1, 2, 3])


def second():
    flush("second", [])


atexit.register(first)
atexit.register(second)
print(tally([4, 5]))
