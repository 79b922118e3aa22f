import sys, time


def spin():
    return 1


deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    spin()
