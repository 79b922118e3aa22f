# witness: incomplete on 3.13: sys.monitoring.register_callback
# witness: incomplete on 3.14: sys.monitoring.register_callback
# witness: incomplete on 3.15: sys.monitoring.register_callback
# A program that replaces the LINE callback of flux's sys.monitoring tool and puts it back
# (issue 23.4): the lines of `during` in between were missing, while the check at exit saw
# the tool's name and events as flux had set them and called the trace complete.
import sys

M = getattr(sys, "monitoring", None)  # 3.12+; on 3.11 the program only runs its functions


def flux_tool():
    """The tool id flux's hook took (none under the settrace reference)."""
    if M is None:
        return None
    for i in range(6):
        if M.get_tool(i) == "flux-hook":
            return i
    return None


def during(n):
    total = 0
    for i in range(n):
        total += i
    try:
        raise ValueError(n)
    except ValueError:
        total += 1
    return total


def after(n):
    return during(n) + 1


tool = flux_tool()
if tool is not None:
    old = M.register_callback(tool, M.events.LINE, None)
during(3)
if tool is not None:
    M.register_callback(tool, M.events.LINE, old)
print(after(2))
