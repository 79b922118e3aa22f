# Code compiled by exec (file "<string>"): dataclasses' generated __init__ and __eq__, a
# namedtuple's generated __new__, and functions the program execs. Each calls back into this
# file, so the depth of those calls shows whether the exec'd frame between was traced. All
# such code shares one file name, and 3.15's USDT names code by (file, name, line): the merge
# took a `__create_fn__` / `__init__` with a first line for a generator after the hook had
# reported the start of one without (cells: Point's), and dropped its calls from a complete
# trace. `Plain` and the second `made` are the ones with a first line.
from collections import namedtuple
from dataclasses import field, make_dataclass


class Unit:
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return self.name == other.name


def default_tags():
    return ["a"]


def point_post_init(self):
    self.norm = abs(self.x) + abs(self.y)


def plain_post_init(self):
    self.twice = callback(self.k)


# make_dataclass rather than class bodies with annotations: 3.14+ compiles those into an
# `__annotate__` of this file, and the 3.13 witness would differ from 3.15's for that alone.
Point = make_dataclass(
    "Point",
    [("x", int), ("y", int), ("unit", Unit), ("tags", list, field(default_factory=default_tags))],
    namespace={"__post_init__": point_post_init},
)
Frozen = make_dataclass("Frozen", [("k", int)], frozen=True)
Plain = make_dataclass(
    "Plain", [("k", int)], repr=False, eq=False, namespace={"__post_init__": plain_post_init}
)


def callback(v):
    return v * 2


CLOSURE = """
def maker(cb):
    def made(n):
        return cb(n) + 1
    return made
"""

SRC = """
def made(n):
    total = 0
    for i in range(n):
        total += cb(i)
    return total


def gen_made(n):
    for i in range(n):
        yield cb(i)
"""


class Tagged(namedtuple("Tagged", "a b")):
    def total(self):
        return self.a + self.b


def main():
    p = Point(1, -2, Unit("m"))
    q = Point(1, -2, Unit("m"))
    same = p == q
    fz = Frozen(3) == Frozen(3)
    pl = Plain(5).twice
    ns = {"cb": callback}
    exec(CLOSURE, ns)
    r0 = ns["maker"](callback)(1)
    exec(SRC, ns)
    r = ns["made"](3)
    g = sum(ns["gen_made"](2))
    t = Tagged(1, 2).total()
    return same, fz, pl, r0, r, g, t, p.norm


main()
