"""Invariant predicates (`[tracing] predicates`) evaluated in the traced process, and the static
facts of the targeted files: the two record kinds the hook adds for extractors.

Why in the traced process: a predicate such as `len(stack) == depth` needs the live values of a
frame's locals, not their bounded reprs; and the facts of a file must be those of the exact file
that ran, computed by the interpreter that ran it.

Records (see README.md, "Wire protocol"):
    ["k", ts, tid, code_id, frame_key, line, expr, result]   result: true | false | ["error", exc_type]
    ["F", co_filename, {facts}]                               flux_hook.static_facts of a targeted file

A predicate is compiled once (a syntax error stops the hook at start: exit 97 with the message,
as for any bad config) and evaluated, each time one of its lines is about to run in a targeted
frame (of its `function` if given), with the frame's globals and locals; its truth value is
`bool(result)`. An exception it raises is recorded, never propagated into the program.
Evaluation runs program code (`__eq__`, `__len__`, properties): the back-ends call `records`
inside the spans that mark the hook's own work.
"""
import json
import time


class Checks:
    """The predicates of a config, indexed by line."""

    def __init__(self, specs, typename, now=time.monotonic_ns):
        # line -> [(expr text, code object, function or None)]
        self.by_line = {}
        self.typename = typename
        self.now = now  # the hook's clock (`frozen-clock`)
        # Set by the hook (Python < 3.13): detaches the frame's f_locals snapshot after the
        # predicates read it (_core.locals_detacher).
        self.detach = None
        for spec in specs:
            if not isinstance(spec, dict):
                raise ValueError("a predicate is an object {expr, lines, function}, not %r" % (spec,))
            unknown = set(spec) - {"expr", "lines", "function"}
            if unknown:
                raise ValueError("unknown field(s) in a predicate: %s" % sorted(unknown))
            text = str(spec.get("expr", ""))
            lines = spec.get("lines", [])
            if not text or not isinstance(lines, list) or not lines:
                raise ValueError("a predicate needs `expr` and a non-empty list of `lines`: %r" % (spec,))
            try:
                code = compile(text, "<flux predicate>", "eval")
            except SyntaxError as e:
                raise ValueError("predicate %r does not compile: %s" % (text, e.msg))
            func = spec.get("function")
            for ln in lines:
                self.by_line.setdefault(int(ln), []).append((text, code, func))

    def records(self, frame, code_id, frame_key, line, tid):
        """The `k` records of the predicates at `line` for `frame` (a targeted frame about to
        run `line`), in config order."""
        out = []
        qualname = frame.f_code.co_qualname
        loc = None
        for text, code, func in self.by_line.get(line, ()):
            if func is not None and func != qualname:
                continue
            try:
                if loc is None:
                    loc = frame.f_locals
                res = "true" if eval(code, frame.f_globals, loc) else "false"
            except Exception as e:  # noqa: BLE001 - the record says what was raised
                res = json.dumps(["error", self.typename(e)])
            out.append(
                '["k",%d,%d,%d,%d,%d,%s,%s]'
                % (self.now(), tid, code_id, frame_key, line, json.dumps(text), res)
            )
        if loc is not None and self.detach is not None:
            self.detach(frame, loc)
        return out


def facts_records(files):
    """The `F` records of `files` (co_filename values); a file that cannot be read or parsed
    is left out (extractors that need its facts then say the trace has none)."""
    from . import static_facts

    out = []
    for fn in sorted(files):
        try:
            facts = static_facts.facts_for_file(fn)
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        out.append('["F",%s,%s]' % (json.dumps(fn), json.dumps(facts, separators=(",", ":"))))
    return out
