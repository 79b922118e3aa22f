from contextlib import contextmanager


@contextmanager
def tag(name, out):
    out.append("<" + name + ">")
    try:
        yield name.upper()
    finally:
        out.append("</" + name + ">")


def main():
    out = []
    with tag("a", out) as a:
        out.append(a)
        with tag("b", out) as b:
            out.append(b)
    try:
        with tag("c", out):
            raise ValueError("inside")
    except ValueError as e:
        out.append(str(e))
    return out


print(main())
