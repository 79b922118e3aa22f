import functools


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        result = fn(*args, **kwargs)
        return result
    return wrapper


def repeat(times):
    def deco(fn):
        @functools.wraps(fn)
        def inner(x):
            v = x
            for _ in range(times):
                v = fn(v)
            return v
        return inner
    return deco


@logged
def add(a, b=1):
    return a + b


@repeat(3)
def inc(x):
    return x + 1


print(add(2), add(2, b=5), inc(0), add.__name__)
