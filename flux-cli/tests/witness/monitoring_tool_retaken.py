# witness: incomplete on 3.13: sys.monitoring.free_tool_id
# witness: incomplete on 3.14: sys.monitoring.free_tool_id
# witness: incomplete on 3.15: sys.monitoring.free_tool_id
# A program that frees flux's sys.monitoring tool id and takes it again under flux's name,
# restoring its events (issue 23.4): freeing clears the tool's callbacks (3.14+), so nothing
# after it was recorded, while the check at exit saw the tool's name and events as flux had
# set them and called the trace complete.
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
    M.free_tool_id(tool)
    M.use_tool_id(tool, "flux-hook")
    M.set_events(tool, saved)
during(3)
print(after(2))
