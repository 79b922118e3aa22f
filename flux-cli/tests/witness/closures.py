def counter(start):
    n = start

    def step(by=1):
        nonlocal n
        n += by
        return n

    return step


def make_adders():
    return [lambda x, i=i: x + i for i in range(3)]


c = counter(10)
c()
c(5)
print(c(), [f(1) for f in make_adders()])
