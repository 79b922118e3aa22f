# witness: incomplete on 3.13: sys.monitoring.set_events
# witness: incomplete on 3.14: sys.monitoring.set_events
# witness: incomplete on 3.15: sys.monitoring.set_events
# A program that switches the events of flux's sys.monitoring tool off and on again
# (issue 23.4): `during`, first started in between, ran without PY_START, so its lines and
# its exception were missing, while the check at exit saw the events as flux had set them and
# called the trace complete.
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
    saved = M.get_events(tool)
    M.set_events(tool, 0)
during(3)
if tool is not None:
    M.set_events(tool, saved)
print(after(2))
