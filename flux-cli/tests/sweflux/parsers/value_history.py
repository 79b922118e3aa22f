#!/usr/bin/env python3
"""A parser in SWE-Flux's layout (written for flux's tests): the history of one local's values in
one function's frames, from the `locals=` dicts of a trace log (ast.literal_eval)."""
import argparse
import ast
import json
import re

EVENT_RE = re.compile(r" (?P<func>\S+) event=(?P<event>call|line|return|exception)\b")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-log", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--func", default="pkg.shapes.counter")
    ap.add_argument("--var", default="total")
    a = ap.parse_args()
    history = []
    for raw in open(a.trace_log, encoding="utf-8"):
        m = EVENT_RE.search(raw)
        if m is None or m.group("func") != a.func or " locals=" not in raw:
            continue
        loc = ast.literal_eval(raw.rsplit(" locals=", 1)[1])
        if a.var in loc and (not history or history[-1] != loc[a.var]):
            history.append(loc[a.var])
    if not history:
        raise SystemExit("ERROR: %s never seen in %s" % (a.var, a.func))
    with open(a.out, "w") as fh:
        json.dump({"question_kind": "S3_ProgramState", "oracle_answer": {"value_history": history}}, fh)
    print(json.dumps(history))


if __name__ == "__main__":
    main()
