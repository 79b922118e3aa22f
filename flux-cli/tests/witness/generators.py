def count(n):
    i = 0
    while i < n:
        yield i
        i += 1
    return "done"


def squares(n):
    for x in count(n):
        yield x * x


total = 0
for s in squares(4):
    total += s
print(total, list(count(2)))
