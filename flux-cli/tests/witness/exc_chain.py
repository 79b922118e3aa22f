def level3(x):
    return 10 // x


def level2(x):
    return level3(x) + 1


def level1(x):
    try:
        return level2(x)
    except ZeroDivisionError as e:
        try:
            raise LookupError("no result") from e
        except LookupError as e2:
            return "handled " + str(e2)


print(level1(2), level1(0))
