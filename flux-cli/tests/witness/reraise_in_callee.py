# A handler that calls a helper re-raising the exception being handled with a bare `raise`
# outside any handler of its own (flask's `full_dispatch_request` calling
# `handle_user_exception`). The helper adds no traceback entry: the exception reaches the caller
# with the caller's own frame next in its traceback. It came out of the helper (`propagate`),
# it is no re-raise of the caller's own (issue 23.2); the helper re-raised it (3.11 reports no
# event for that bare `raise`: the hook infers it when the helper unwinds).


def helper(e, handle):
    if handle:
        return "handled " + type(e).__name__
    raise


def dispatch(x):
    return 1 // x


def full(x, handle):
    try:
        return dispatch(x)
    except ZeroDivisionError as e:
        return helper(e, handle)


def main():
    print(full(1, False))
    print(full(0, True))
    try:
        full(0, False)
    except ZeroDivisionError:
        print("propagated")


main()
