# targets: tag, Box
# Context managers under every scope (17.3): a generator resumed after its `with` body (the
# `finally` of a @contextmanager) is the same frame whatever the scope. Targeted: `tag`, `Box`.
from contextlib import contextmanager


@contextmanager
def tag(name, out):
    out.append("<" + name)
    try:
        yield name.upper()
    finally:
        out.append(name + ">")


class Box:
    def __init__(self, out):
        self.out = out

    def __enter__(self):
        self.out.append("[")
        return self

    def __exit__(self, et, ev, tb):
        self.out.append("]")
        return et is KeyError


def fill(out):
    with tag("a", out) as a:
        out.append(a)
        with Box(out):
            with tag("b", out) as b:
                out.append(b)
    return out


def test_nested():
    assert fill([]) == ["<a", "A", "[", "<b", "B", "b>", "]", "a>"]


def test_exception_through_with():
    out = []
    try:
        with tag("c", out):
            raise ValueError("inside")
    except ValueError as e:
        out.append(str(e))
    with Box(out):
        raise KeyError("swallowed")
    assert out == ["<c", "c>", "inside", "[", "]"]
