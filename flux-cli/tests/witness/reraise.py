class AppError(Exception):
    pass


def low():
    raise KeyError("k")


def mid():
    try:
        low()
    except KeyError:
        raise


def wrap():
    try:
        mid()
    except KeyError as e:
        raise AppError("wrapped") from e


def top():
    try:
        wrap()
    except AppError as e:
        return str(e)


print(top())
