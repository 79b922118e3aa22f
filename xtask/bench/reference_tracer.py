"""A reference `sys.settrace` tracer in the style of SWE-Flux's, used only as a baseline by
`cargo xtask bench harvest` (never for gold answers).

What it does, as SWE-Flux's tracer does (see /work/shared/notes/benchmark-formats.md):
- `sys.settrace` in the test's thread only, turned on per test by pytest setup/teardown hooks
  (on before the test's setup, off after its teardown);
- configured from the same tracing config as flux (`FLUX_REF_CONFIG`: the JSON `[tracing]`
  table — files, functions, events, limits): a file is targeted when an entry is a substring of
  the code's filename (or matches it as a glob), a function when its qualname is an entry or
  nested in one; no functions = every function of the targeted files;
- records a `call` event for every Python call everywhere; in targeted code also `line`,
  `return` (with `retval=`) and `exception` (with `exc=`) events, with the locals diffed per
  frame (full on call/return, changed ones on other events), each repr cut to `limits.repr`
  characters (full `repr()` first, then cut, as theirs does), at most `limits.locals` locals;
- writes log lines like theirs to `FLUX_REF_LOG` (a directory; one file per process,
  `reference-<pid>.log`):
  `<timestamp> <abs file>:<lineno> <module>.<qualname> event=<e> [exc=<Type>: <repr> | retval=<repr>] locals={<name: repr>, ...}`

Enabled with `PYTHONPATH=<dir of this file>` and `PYTEST_PLUGINS=reference_tracer`.
Standard library only (plus pytest, which loads it).
"""
import fnmatch
import json
import os
import sys
import threading
import time

import pytest

_EVENTS_ALL = ("line", "call", "return", "exception", "variables")


class _Config:
    def __init__(self, raw):
        d = json.loads(raw) if raw else {}
        self.files = [str(f) for f in d.get("files", [])]
        self.functions = [str(f) for f in d.get("functions", [])]
        self.events = set(d.get("events", _EVENTS_ALL))
        lim = d.get("limits", {}) or {}
        # SWE-Flux's defaults when the config sets none: 500 characters, 200 locals.
        self.repr_limit = int(lim.get("repr", 500))
        self.locals_limit = int(lim.get("locals", 200))
        self._globs = [f for f in self.files if any(c in f for c in "*?[")]
        self._subs = [f for f in self.files if f not in self._globs]
        self._prefixes = tuple(f + "." for f in self.functions)
        self._funcs = set(self.functions)

    def targeted(self, code):
        fn = code.co_filename
        if not any(s in fn for s in self._subs) and not any(
            fnmatch.fnmatchcase(fn, g) for g in self._globs
        ):
            return False
        if not self.functions:
            return True
        q = getattr(code, "co_qualname", code.co_name)
        return q in self._funcs or q.startswith(self._prefixes)


_cfg = _Config(os.environ.get("FLUX_REF_CONFIG", ""))
_log_dir = os.environ.get("FLUX_REF_LOG", "")
_out = None
_out_pid = None
_targets = {}  # code object -> targeted?
_last = {}  # id(frame) -> {name: repr} as last logged


def _file():
    global _out, _out_pid
    pid = os.getpid()
    if _out is None or _out_pid != pid:
        path = os.path.join(_log_dir or ".", "reference-%d.log" % pid)
        _out = open(path, "a", buffering=1 << 20, encoding="utf-8", errors="backslashreplace")
        _out_pid = pid
    return _out


def _repr(v):
    try:
        s = repr(v)
    except Exception as e:  # a broken __repr__ must not break the test
        s = "<repr failed: %s>" % type(e).__name__
    lim = _cfg.repr_limit
    return s if len(s) <= lim else s[:lim] + "..."


def _locals(frame):
    out = {}
    n = 0
    for k, v in frame.f_locals.items():
        if n >= _cfg.locals_limit:
            break
        out[k] = _repr(v)
        n += 1
    return out


def _write(frame, event, extra, shown):
    code = frame.f_code
    mod = frame.f_globals.get("__name__", "?")
    q = getattr(code, "co_qualname", code.co_name)
    fn = os.path.abspath(code.co_filename) if not code.co_filename.startswith("<") else code.co_filename
    _file().write(
        "%.6f %s:%d %s.%s event=%s%s locals={%s}\n"
        % (
            time.time(),
            fn,
            frame.f_lineno,
            mod,
            q,
            event,
            extra,
            ", ".join("%s: %s" % kv for kv in shown.items()),
        )
    )


def _local(frame, event, arg):
    """The local trace function of a targeted frame: lines, returns, exceptions."""
    want_vars = "variables" in _cfg.events
    key = id(frame)
    if event == "line":
        if want_vars:
            now = _locals(frame)
            prev = _last.get(key, {})
            changed = {k: v for k, v in now.items() if prev.get(k) != v}
            _last[key] = now
        else:
            changed = {}
        if "line" in _cfg.events:
            _write(frame, "line", "", changed)
    elif event == "return":
        now = _locals(frame) if want_vars else {}
        _last.pop(key, None)
        if "return" in _cfg.events:
            _write(frame, "return", " retval=" + _repr(arg), now)
    elif event == "exception":
        if "exception" in _cfg.events:
            et, ev, _tb = arg
            now = _locals(frame) if want_vars else {}
            prev = _last.get(key, {})
            changed = {k: v for k, v in now.items() if prev.get(k) != v}
            _last[key] = now
            _write(frame, "exception", " exc=%s: %s" % (et.__name__, _repr(ev)), changed)
    return _local


def _global(frame, event, arg):
    """The global trace function: a call event for every Python call; local tracing in targets."""
    if event != "call":
        return None
    code = frame.f_code
    t = _targets.get(code)
    if t is None:
        t = _targets[code] = _cfg.targeted(code)
    if t:
        now = _locals(frame) if "variables" in _cfg.events else {}
        _last[id(frame)] = now
        _write(frame, "call", "", now)
        return _local
    _write(frame, "call", "", {})
    return None


_test_thread = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    global _test_thread
    _test_thread = threading.get_ident()
    sys.settrace(_global)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if threading.get_ident() == _test_thread:
        sys.settrace(None)
    _last.clear()
    if _out is not None:
        _out.flush()


def pytest_unconfigure(config):
    if _out is not None:
        _out.flush()
