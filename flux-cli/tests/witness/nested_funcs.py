def outer(n):
    def middle(m):
        def inner(k):
            return k * 2
        return inner(m) + 1
    vals = []
    for i in range(n):
        vals.append(middle(i))
    return vals


print(outer(3))
