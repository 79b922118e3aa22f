class Bag:
    def __init__(self, items):
        self.items = items

    def values(self):
        k = 2
        return [(lambda: v * k)() for v in self.items]

    def __iter__(self):
        return iter(self.items)


class Stream:
    def __init__(self, n):
        self.n = n

    def values(self):
        n = self.n
        yield from (lambda: range(n))()

    def __iter__(self):
        i = 0
        while i < self.n:
            yield i
            i += 1


b = Bag([1, 2])
s = Stream(2)
print(b.values(), list(s.values()), list(b), list(s), b.values())
