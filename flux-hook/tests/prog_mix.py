import contextlib

def deco(f):
    return f

@deco
def decorated(a):
    return a * 2

def suppress():
    with contextlib.suppress(KeyError):
        raise KeyError("k")
    return "after"

def finret():
    try:
        raise ValueError("lost")
    finally:
        return "finally wins"

def chain():
    try:
        {}["missing"]
    except KeyError as e:
        raise RuntimeError("wrapped") from e

def gen_raises():
    yield 1
    raise IndexError("gen")

def consume():
    out = []
    try:
        for x in gen_raises():
            out.append(x)
    except IndexError:
        out.append("caught")
    return out

def nested_handlers():
    try:
        try:
            raise ValueError("inner")
        except ValueError:
            raise
    except ValueError as e:
        return "outer caught"

def loop_try(n):
    total = 0
    for i in range(n):
        try:
            if i % 2:
                raise ZeroDivisionError(i)
            total += i
        except ZeroDivisionError:
            total -= 1
    return total

class K:
    def __init__(self, v):
        self.v = v
    def get(self):
        return self.v

def main():
    decorated(2)
    suppress()
    finret()
    try:
        chain()
    except RuntimeError:
        pass
    consume()
    nested_handlers()
    loop_try(4)
    K(3).get()
    (lambda q: q + 1)(1)

main()
