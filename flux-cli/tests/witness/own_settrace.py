# witness: incomplete on 3.11: the program called sys.settrace
# witness: incomplete on 3.13: installed a trace function that runs Python code
# witness: incomplete on 3.14: installed a trace function that runs Python code
# witness: incomplete on 3.15: installed a trace function that runs Python code
# 17.2: while the program has its own sys.settrace installed (then restores the previous one),
# 3.11's hook cannot see its calls, and no version sees what its trace function runs (3.15's
# USDT sees its calls, not its lines): the trace must say so, never be complete.
import sys

seen = []


def mine(frame, event, arg):
    if event == "call" and frame.f_code.co_filename == __file__:
        seen.append(frame.f_code.co_name)
    return None


def square(x):
    return x * x


def inner():
    return square(3) + square(4)


def main():
    old = sys.gettrace()
    sys.settrace(mine)
    try:
        v = inner()
    finally:
        sys.settrace(old)
    return v + square(2)


print(main(), seen)
