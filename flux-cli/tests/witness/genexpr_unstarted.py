# Generator expressions and generators created and never iterated (3.15's USDT fires an entry
# at creation, and the hook never sees code that never runs), or iterated later by a callee; one
# of them (os.walk) from a module imported before the hook was installed, one a method.
import os


class Lazy:
    def __init__(self, it):
        self.it = it

    def items(self):
        yield from self.it

    def first(self):
        return next(iter(self.it), None)


def never(xs):
    unused = (x * 2 for x in xs)
    lazy = Lazy(x + 1 for x in xs)
    walker = os.walk("/nonexistent")
    its = lazy.items()
    n = len(xs)
    return n


def gen_fn(xs):
    for x in xs:
        yield x


def later(xs):
    lazy = Lazy(x + 1 for x in xs)
    g = gen_fn(xs)
    total = 0
    total += lazy.first()
    return total


print(never([1, 2, 3]), later([4, 5]))
