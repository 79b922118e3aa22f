# frozen: its fixtures were recorded with the hook before 23787ef, which did not report a program's own tracer as a loss: it pins rule `unmatched-returns` for code the hook did not see; cargo xtask record-merge-corpus leaves them.
# 17.2: the program installs its own sys.settrace (and restores the previous one): on 3.11 the
# hook sees nothing meanwhile, so USDT's returns of what ran then cannot be placed.
import sys


def traced(n):
    return n + 1


def mine(frame, event, arg):
    return None


old = sys.gettrace()
sys.settrace(mine)
traced(1)
sys.settrace(old)
traced(2)
