def find(xs, target):
    for i, x in enumerate(xs):
        if x == target:
            return i
    return -1


def scan(xs):
    out = []
    for x in xs:
        if x < 0:
            continue
        if x > 100:
            break
        out.append(x)
    return out


print(find([3, 5, 7], 5), find([1], 9), scan([1, -2, 3, 200, 4]))
