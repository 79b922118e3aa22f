def inner():
    try:
        yield 1
        yield 2
    except ValueError as e:
        yield "inner caught " + str(e)
    return "inner done"


def outer():
    r = yield from inner()
    yield r


def main():
    g = outer()
    out = [next(g), g.throw(ValueError("v")), next(g)]
    try:
        g.throw(TypeError("t"))
    except TypeError as e:
        out.append("escaped " + str(e))
    return out


print(main())
