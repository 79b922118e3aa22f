def echo():
    received = []
    try:
        while True:
            try:
                v = yield len(received)
                received.append(v)
            except ValueError as e:
                received.append("caught " + str(e))
    finally:
        received.append("closed")


def main():
    g = echo()
    out = [next(g), g.send("a"), g.throw(ValueError("x")), g.send("b")]
    g.close()
    return out


print(main())
