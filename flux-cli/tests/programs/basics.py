def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)

def gen(k):
    for i in range(k):
        yield i * 2

def boom():
    raise ValueError("x")

def catcher():
    try:
        boom()
    except ValueError:
        return "caught"

fact(5)
list(gen(3))
catcher()
