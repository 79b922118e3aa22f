# Generators abandoned while suspended (a short-circuited `any`, a `next` taken once) are
# closed when their last reference goes; on 3.12+ without running (a suspended yield outside
# any `try`), so no event says so. A new generator of the same code then often gets the freed
# one's address, and so its frame key: it is a fresh call, not a resumption of the old frame
# (3.13 took it for one: `fresh-frames`). They are temporaries here: a generator held in a
# traced frame's local is closed late on 3.11 (see the closing note of issue 17).


def first_word(text):
    words = (w for w in text.split() if w)
    return next(words)


def counter(n):
    i = 0
    while i < n:
        yield i
        i += 1


def scan(items, chars):
    hits = 0
    for item in items:
        if any(c in item for c in chars):
            hits += 1
        next(counter(3))
    return hits


print(scan(["abc", "xyz", "bcd", "aaa"], "ab"), [first_word(t) for t in ("x y", "z w", "q")])
