class Resource:
    def __init__(self, name, swallow=False):
        self.name = name
        self.swallow = swallow
        self.events = []

    def __enter__(self):
        self.events.append("enter")
        return self

    def __exit__(self, et, ev, tb):
        self.events.append("exit")
        return self.swallow


def use():
    with Resource("a") as r:
        r.events.append("body")
    with Resource("b", swallow=True) as s:
        raise KeyError("swallowed")
    try:
        with Resource("c") as t:
            raise IndexError("escapes")
    except IndexError:
        pass
    return r.events, s.events, t.events


print(use())
