"""Code for tests/sweflux_log.rs: what SWE-Flux's tracer sees that a plain trace may not."""
import contextlib


class Broken:
    def __repr__(self):
        raise ValueError("no repr")


class Base:
    def describe(self, x):
        return "base:%s" % (x,)


class Shape(Base):
    def __init__(self, name, sides):
        self.name = name
        self.sides = sides

    def __repr__(self):
        return "Shape(%r, %d)" % (self.name, self.sides)

    def describe(self, x):
        head = super().describe(x)
        return head + ":" + self.name


def lookups(keys, table):
    found = []
    missing = 0
    for k in keys:
        try:
            found.append(table[k])
        except KeyError as err:
            missing += 1
            last = err
        else:
            _hidden = k
    del found[:0]
    return found, missing


def wide(n):
    a0, a1, a2, a3, a4, a5 = range(6)
    long_text = "x" * n
    nested = {"k%d" % i: list(range(i)) for i in range(n // 10)}
    bad = Broken()
    uni = "é\u2028\ttab"
    return len(long_text) + len(nested) + a5


def counter(limit):
    total = 0
    try:
        while total < limit:
            got = yield total
            total += got or 1
    except GeneratorExit:
        total = -1
        raise
    finally:
        done = True
    return total


@contextlib.contextmanager
def guarded(log):
    log.append("enter")
    try:
        yield len(log)
    except RuntimeError as e:
        log.append("caught:%s" % e)
    finally:
        log.append("exit")


def reraiser(v):
    try:
        if v < 0:
            raise ValueError(v)
        return v
    except ValueError:
        v = abs(v)
        raise


def depth(n):
    if n == 0:
        raise LookupError("bottom")
    return depth(n - 1)


def chain(values):
    squares = [v * v for v in values if v % 2]
    pairs = dict((v, str(v)) for v in values)
    fn = lambda q: q + 1  # noqa: E731
    return sum(map(fn, squares)), pairs


async def leaf(n):
    return n * 2


async def root(n):
    a = await leaf(n)
    b = await leaf(a)
    return a + b
