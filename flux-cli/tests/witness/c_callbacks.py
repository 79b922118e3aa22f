import functools


def key(s):
    return (len(s), s)


def is_odd(n):
    return n % 2 == 1


def triple(n):
    return n * 3


def plus(a, b):
    return a + b


words = sorted(["ccc", "a", "bb", "aa"], key=key)
odds = list(filter(is_odd, range(6)))
tripled = list(map(triple, odds))
total = functools.reduce(plus, tripled, 0)
print(words, odds, tripled, total)
