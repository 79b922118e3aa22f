#!/usr/bin/env python3
"""A parser in SWE-Flux's layout (written for flux's tests): per-invocation counts of a loop
body line of one function, and per-type counts of its exception events, from a trace log."""
import argparse
import json
import re
import sys
from collections import Counter

EVENT_RE = re.compile(
    r" (?P<file>/\S+):(?P<line>\d+) (?P<func>\S+) event=(?P<event>call|line|return|exception)\b"
)
EXC_RE = re.compile(r" event=exception exc=(?P<type>[A-Za-z_][\w.]*):")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-log", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--func", default="pkg.shapes.lookups")
    ap.add_argument("--body-line", type=int, default=32)
    a = ap.parse_args()
    counts, current, excs = [], None, Counter()
    for raw in open(a.trace_log, encoding="utf-8"):
        m = EVENT_RE.search(raw)
        if m is None or m.group("func") != a.func:
            continue
        ev, line = m.group("event"), int(m.group("line"))
        if ev == "call" and current is None:
            current = 0
        elif ev == "line" and line == a.body_line and current is not None:
            current += 1
        elif ev == "exception":
            excs[EXC_RE.search(raw).group("type")] += 1
        elif ev == "return" and current is not None:
            counts.append(current)
            current = None
    if not counts:
        raise SystemExit("ERROR: no invocation of %s in the trace" % a.func)
    answer = {
        "max_iterations": max(counts),
        "min_iterations": min(counts),
        "exception_type_counts": dict(sorted(excs.items())),
    }
    with open(a.out, "w") as fh:
        json.dump({"question_kind": "M2_Loops", "oracle_answer": answer}, fh, sort_keys=True)
    print(json.dumps(answer, sort_keys=True))


if __name__ == "__main__":
    main()
