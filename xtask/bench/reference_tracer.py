"""A plain `sys.settrace` tracer that writes SWE-Flux's trace log: flux's independent witness for
`flux trace --format swe-flux-log`, and the baseline of `cargo xtask bench harvest` (never a
source of gold answers).

It behaves as SWE-Flux's tracer and conftest are documented to (the rules, one by one, are in
flux_trace::sweflux_log; this file is written from those rules, not from their code):
- on at each test's setup (a plain `pytest_runtest_setup` hook: after pytest's tryfirst
  setup hooks, before fixtures are set up), off at its teardown (`pytest_runtest_teardown`),
  in the thread that ran the setup; one `[TRACE][START]` line each time it goes on;
- one trace function for every frame of that thread; it logs only frames whose file name
  contains TRACE_FILE and whose `<module>.<qualname>` a TRACE_FUNC entry equals, prefixes or
  suffixes at a dot, or names the last component of;
- an event kind outside TRACE_EVENTS is skipped before anything else; otherwise the frame's
  locals (sorted, `_` names left out unless TRACE_NO_UNDERSCORE=0, each `repr()` cut to
  TRACE_LIMIT characters plus `...`, at most TRACE_MAXLOCALS then a `'...'` entry) are diffed
  with its last snapshot (none at its first event, nor after a `return` or `exception` event);
- `call` logs the changed locals, `line` only when some changed (every line with
  TRACE_LOG_ALL_LINES=1), `exception` adds `exc=<Type>: <repr>`, `return` adds `retval=<repr>`
  and all the locals (only the changed ones with TRACE_FULL_LOCALS_ON_RETURN=0);
- lines `<YYYY-MM-DD HH:MM:SS.mmm> <file>:<line> <module>.<qualname> event=<e> ... locals=<dict>`
  (no time with TRACE_TIME other than 1) go to TRACE_OUT (appended), else to stdout.

Two ways to configure it:
- SWE-Flux's variables (TRACE_ON=1, TRACE_FILE, TRACE_FUNC, TRACE_EVENTS, TRACE_OUT,
  TRACE_LIMIT, TRACE_MAXLOCALS, TRACE_NO_UNDERSCORE, TRACE_TIME, TRACE_LOG_ALL_LINES,
  TRACE_FULL_LOCALS_ON_RETURN), with their defaults;
- for the bench, FLUX_REF_CONFIG (an instance's `[tracing]` table as JSON): its `files` are
  substrings (or globs) of the file name, its `functions` qualnames (a function and what is
  nested in it), every event kind, the limits' `repr` and `locals` (default 500 and 200); the
  log goes to FLUX_REF_LOG/reference-<pid>.log; and, as flux's harvests do, every Python call
  anywhere is logged too (`call` lines of unmatched frames carry no locals).

Enabled with `PYTHONPATH=<dir of this file>` and `PYTEST_PLUGINS=reference_tracer`.
Standard library only (plus pytest, which loads it).
"""
import fnmatch
import json
import os
import sys
import threading
from datetime import datetime


def _int(raw, default):
    try:
        return int(str(raw).strip())
    except (TypeError, ValueError):
        return default


def _names(raw):
    return {x.strip() for x in str(raw).strip().split(",") if x.strip()}


class _Config:
    def __init__(self, env):
        bench = env.get("FLUX_REF_CONFIG")
        self.bench = bench is not None
        if self.bench:
            d = json.loads(bench) if bench else {}
            lim = d.get("limits", {}) or {}
            self.on = True
            self.files = [str(f) for f in d.get("files", [])]
            self.funcs = set(str(f) for f in d.get("functions", []))
            self.events = {"call", "line", "return", "exception"}
            self.out = None
            self.log_dir = env.get("FLUX_REF_LOG", "") or "."
            self.limit = int(lim.get("repr", 500))
            self.max_locals = int(lim.get("locals", 200))
            self.no_underscore = True
            self.with_time = True
            self.all_lines = False
            self.full_on_return = True
            self.shown_file = ",".join(self.files)
        else:
            self.on = env.get("TRACE_ON") == "1"
            f = env.get("TRACE_FILE", "").strip().replace("\\", "/")
            self.files = [f] if f else []
            self.funcs = _names(env.get("TRACE_FUNC", ""))
            self.events = _names(env.get("TRACE_EVENTS", "line")) or {"line"}
            self.out = env.get("TRACE_OUT", "").strip() or None
            self.log_dir = None
            self.limit = _int(env.get("TRACE_LIMIT", "500"), 500)
            self.max_locals = _int(env.get("TRACE_MAXLOCALS", "200"), 200)
            self.no_underscore = env.get("TRACE_NO_UNDERSCORE", "1").strip() != "0"
            self.with_time = env.get("TRACE_TIME", "1").strip() == "1"
            self.all_lines = env.get("TRACE_LOG_ALL_LINES", "0").strip() == "1"
            self.full_on_return = env.get("TRACE_FULL_LOCALS_ON_RETURN", "1").strip() != "0"
            self.shown_file = f

    def file_matches(self, filename):
        if not self.files:
            return True
        for f in self.files:
            if any(c in f for c in "*?["):
                if fnmatch.fnmatchcase(filename, f):
                    return True
            elif f in filename:
                return True
        return False

    def func_matches(self, name, qualname):
        if not self.funcs:
            return True
        if self.bench:
            return any(qualname == t or qualname.startswith(t + ".") for t in self.funcs)
        last = name.rpartition(".")[2]
        for t in self.funcs:
            if name == t or name.startswith(t + ".") or name.endswith("." + t) or t == last:
                return True
        return False


_cfg = _Config(os.environ)
_lock = threading.Lock()
_out = None
_out_pid = None
_on = False
_thread = None
_last = {}  # id(frame) -> the last snapshot logged for it
_match = {}  # code object -> (logged?, "<module>.<qualname>")


def _stream():
    global _out, _out_pid
    pid = os.getpid()
    if _out is not None and _out_pid == pid:
        return _out
    path = _cfg.out
    if _cfg.log_dir is not None:
        path = os.path.join(_cfg.log_dir, "reference-%d.log" % pid)
    if path is None:
        _out = sys.stdout
    else:
        d = os.path.dirname(os.path.abspath(path))
        if d:
            os.makedirs(d, exist_ok=True)
        _out = open(path, "a", buffering=1, encoding="utf-8")
    _out_pid = pid
    return _out


def _write(text):
    with _lock:
        if _cfg.with_time:
            text = datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " " + text
        _stream().write(text + "\n")


def _repr(v):
    try:
        s = repr(v)
    except Exception as e:
        s = "<repr error: %s: %s>" % (type(e).__name__, e)
    if _cfg.limit >= 0 and len(s) > _cfg.limit:
        s = s[: _cfg.limit] + "..."
    return s


def _snapshot(frame):
    snap = {}
    n = 0
    loc = frame.f_locals
    for k in sorted(loc):
        if _cfg.no_underscore and k.startswith("_"):
            continue
        snap[k] = _repr(loc[k])
        n += 1
        if _cfg.max_locals and n >= _cfg.max_locals:
            snap["..."] = "<truncated locals: first %d>" % _cfg.max_locals
            break
    return snap


def _target(frame):
    code = frame.f_code
    m = _match.get(code)
    if m is None:
        mod = frame.f_globals.get("__name__", "")
        qual = getattr(code, "co_qualname", code.co_name)
        name = "%s.%s" % (mod, qual) if mod else qual
        ok = _cfg.file_matches(code.co_filename.replace("\\", "/")) and _cfg.func_matches(name, qual)
        m = _match[code] = (ok, name)
    return m


def _tracer(frame, event, arg):
    if event not in _cfg.events:
        return _tracer
    ok, name = _target(frame)
    head = "%s:%d %s event=%s" % (frame.f_code.co_filename.replace("\\", "/"), frame.f_lineno, name, event)
    if not ok:
        if _cfg.bench and event == "call":
            _write(head + " locals={}")
        return _tracer
    key = id(frame)
    snap = _snapshot(frame)
    prev = _last.get(key)
    if prev:
        diff = {k: v for k, v in snap.items() if k not in prev or prev[k] != v}
    else:
        diff = snap
    _last[key] = snap
    if event == "exception":
        et, ev, _tb = arg
        _write("%s exc=%s: %s locals=%r" % (head, getattr(et, "__name__", str(et)), _repr(ev), diff))
    elif event == "return":
        _write("%s retval=%s locals=%r" % (head, _repr(arg), snap if _cfg.full_on_return else diff))
    elif event == "call" or diff or (_cfg.all_lines and event == "line"):
        _write("%s locals=%r" % (head, diff))
    if event in ("return", "exception"):
        _last.pop(key, None)
    return _tracer


def pytest_runtest_setup(item):
    global _on, _thread
    if not _cfg.on or _on:
        return
    _on = True
    _thread = threading.get_ident()
    funcs = sorted(_cfg.funcs) if _cfg.funcs else "ALL"
    _write(
        "[TRACE][START] pid=%d TRACE_OUT=%r TRACE_FILE=%r TRACE_FUNCS=%s TRACE_EVENTS=%s"
        % (os.getpid(), _cfg.out, _cfg.shown_file, funcs, sorted(_cfg.events))
    )
    sys.settrace(_tracer)


def pytest_runtest_teardown(item, nextitem):
    global _on
    if threading.get_ident() == _thread:
        sys.settrace(None)
    _on = False
    _last.clear()
    with _lock:
        if _out is not None and _out is not sys.stdout:
            _out.flush()


def pytest_unconfigure(config):
    with _lock:
        if _out is not None:
            _out.flush()
