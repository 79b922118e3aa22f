def search(xs, want):
    i = 0
    while i < len(xs):
        if xs[i] == want:
            break
        i += 1
    else:
        return None
    return i


def primes(limit):
    out = []
    for n in range(2, limit):
        for d in range(2, n):
            if n % d == 0:
                break
        else:
            out.append(n)
    return out


print(search([1, 2, 3], 2), search([1], 5), primes(12))
