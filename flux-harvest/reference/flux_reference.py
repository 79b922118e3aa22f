"""flux's third witness: a plain `sys.settrace` reference that re-derives a gold answer.

`flux harvest --check --witness reference` and `flux gen` (issue 23.1) run an instance's exact
test command in its image with this file as a pytest plugin, convert what it writes into a
`flux_trace::Trace` (flux-trace's `reference` module) and apply the instance's own extractor and
template to it. It shares no code with flux's hook (`flux-hook/`): it knows nothing of USDT, of
the hook's records, frame states or classification. It follows the definitions the hook's
README documents (which events, what a raise is, how values are rendered) and the settrace
reference of the witness corpus (`flux-cli/tests/reference/reference.py`); where a definition
is the same, it is written here again, not imported. The static facts of the targeted files
(statement spans, loops, handlers: pure AST, no runtime) are the one thing taken from flux:
`static_facts.py` (a copy of `flux_hook/static_facts.py`) computes them at exit.

    PYTHONPATH=<dir of this file>  PYTEST_PLUGINS=flux_reference
    FLUX_REFERENCE_CONFIG='<the instance's [tracing] table as JSON>'
    FLUX_REFERENCE_OUT=<a directory>   FLUX_REFERENCE_MAX_RECORDS=<n> (default 20,000,000)

What it traces: every Python frame of every thread started from Python, inside each test's
`pytest_runtest_protocol` (the test windows of flux's scopes `tests` and `targets`; with
`targets` nothing is narrowed to the targets' extents: whatever a question's definition depends
on inside its tests, the callees of the target included, is traced). Scope `run`, the dialect
`swe-flux` and `module_functions` are refused (a `lost` record). Lines, values, exceptions and
handlers are recorded for targeted code (the config's `files` and `functions`, as flux targets
them), calls and returns for every frame.

Output: `<FLUX_REFERENCE_OUT>/reference-<pid>.jsonl`, one JSON array per line, in the order the
events happened in the process (threads interleave):

    ["hello", 1, pid, python_version]
    ["C", ref, co_filename, co_name, co_qualname, co_firstlineno, targeted]
    ["c", tid, ref, fid, line, start]      start: fresh | resume | unseen
    ["r", tid, fid, line, how, value, locals, exc]    how: return | yield | unwind
    ["l", tid, fid, line, locals]
    ["x", tid, fid, line, exc_type, message, kind, origin]   kind: raise | reraise | propagate | thrown
    ["h", tid, fid, except_line, exc_type, message]
    ["k", tid, fid, line, expr, result]    result: true | false | ["error", exc_type]
    ["ts", tid, nodeid]   ["te", tid, nodeid, outcome]
    ["F", co_filename, facts]
    ["lost", reason]
    ["end", n]                              n: records before it

- `fid`: the reference's number of a frame object, the same for every activation of one
  generator frame. `start`: `fresh` (the frame starts: co_firstlineno), `resume` (a frame it saw
  suspend resumes: f_lineno), `unseen` (a generator or coroutine frame started where nothing
  was traced — before the window — resumes: it is no call of the code it runs under). Fresh is
  read from the frame: its last instruction is at or before the code's first `RESUME 0` (3.11+
  put it after RETURN_GENERATOR; `throw()` into an unstarted generator stops before it). It
  holds no frame: a suspended one is known again by its address and code.
- `how`: the opcode at f_lasti: RETURN_VALUE/RETURN_CONST return; YIELD_VALUE (and 3.12-3.14's
  RESUME after it) yield, unless an exception was reported at that very instruction with no line
  since (thrown in, not handled); else unwind. `value` ([repr, type]) of targeted code's
  returns and yields, `exc` ([type, message]) of its unwinds, else null.
- `locals` ({name: [repr, type]} or null): the locals of a targeted frame whose repr or type
  changed since its previous event (its first line event carries all of them), at line and
  return events; dunder names are skipped, at most `limits.locals` names are considered, in
  `f_locals` order (flux-hook README, "Wire protocol").
- `kind` of an exception event of targeted code, decided here in this order: `propagate` when
  a frame this one called has just unwound (the thread's latest unwinding return) with this
  very exception (by address and type: its latest exception event's, or — a bare `raise`
  outside its own handlers reports nothing — the one being handled), or is the entry after
  this frame's in the exception's traceback; `thrown` when it is the activation's first
  event after its `call`, at the instruction the activation started at (no
  line ran: `throw()`/`close()` put it in at the `yield`); `reraise` when its traceback already
  has entries beyond this frame's (raised before: `raise e`), or a bare `raise` of the
  exception being handled (3.11 reports no event: a `raise` statement without an exception of
  the frame's `raise` lines, from the AST); else `raise`. `origin`: [file, qualname, line] of
  the innermost entry of its traceback. A StopIteration without a traceback, or on 3.11 at a
  SEND (the end of a `yield from`/`await`), is no exception.
- `h`: the first line of an `except` body runs right after the lines of its header with an
  exception pending in the frame (`except_line`: the header's). An `except X: stmt` on one line
  counts when the frame has an exception pending (the hook's documented rule: a failed match
  cannot be told by line events).
- `k`: each `[tracing] predicates` entry whose `lines` hold the line (of its `function` if
  given), evaluated before the line runs with the frame's globals and locals.
- `ts`/`te`: pytest's `logstart`/`logfinish` of each test; outcome passed, failed, skipped, or
  error (setup or teardown failed).

Values: flux's rendering as the hook's README documents it (limits.repr, limits.depth), written
here again. It holds no object of the program's (exceptions and frames are known by address
and type, never kept), so finalizers run when they would untraced.
"""
import atexit
import builtins
import dis
import fnmatch
import gc
import json
import os
import re
import reprlib
import sys
import threading
import _thread

import pytest

_CFG = json.loads(os.environ.get("FLUX_REFERENCE_CONFIG") or "{}")
# The records' serializer, bound at import: a test that patches `json.dumps` (fastapi's
# test_dump_json_fast_path asserts it is never called) must not see the witness's own calls.
_DUMPS = json.JSONEncoder(separators=(",", ":")).encode
_OUT = os.environ.get("FLUX_REFERENCE_OUT") or "."
_MAX = int(os.environ.get("FLUX_REFERENCE_MAX_RECORDS") or 20_000_000)
_ME = os.path.abspath(__file__)
_ME_DIR = os.path.dirname(_ME)

_LIMITS = _CFG.get("limits") or {}
_L = int(_LIMITS.get("repr", 200))
_NLOCALS = int(_LIMITS.get("locals", 50))
_DEPTH = int(_LIMITS.get("depth", 3))
_EVENTS = set(_CFG.get("events", ["line", "call", "return", "exception", "variables"]))
_WANT_LINE = "line" in _EVENTS
_WANT_VARS = "variables" in _EVENTS
_WANT_RET = "return" in _EVENTS
_WANT_EXC = "exception" in _EVENTS
_FILES = [str(f) for f in _CFG.get("files", [])]
_FUNCS = [str(f) for f in _CFG.get("functions", [])]
_GEN = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_V = sys.version_info[:2]
_YIELD_OPS = {dis.opmap["YIELD_VALUE"]}
if (3, 12) <= _V < (3, 15):
    _YIELD_OPS.add(dis.opmap["RESUME"])
_RETURN_OPS = {dis.opmap[n] for n in ("RETURN_VALUE", "RETURN_CONST") if n in dis.opmap}
_RESUME = dis.opmap["RESUME"]
# 3.11 reports the StopIteration that ends a `yield from`/`await` to tracers at its SEND.
_SEND = dis.opmap.get("SEND", -1) if _V == (3, 11) else -2


# --- output -----------------------------------------------------------------------------------
class _Out:
    def __init__(self):
        self.pid = None
        self.fh = None
        self.buf = []
        self.n = 0
        self.written = 0
        self.over = False
        self.lock = threading.Lock()

    def add(self, rec):
        if self.pid != os.getpid():
            self._open()
        if self.n >= _MAX:
            if not self.over:
                self.over = True
                self.buf.append(_DUMPS(["lost", "over %d records" % _MAX]))
                self.n += 1
                _stop()
            return
        self.buf.append(_DUMPS(rec))
        self.n += 1
        if len(self.buf) >= 8192:
            self.flush()

    def _open(self):
        # A forked child writes a file of its own (flux_trace::reference refuses more than one).
        self.pid = os.getpid()
        self.buf = []
        self.n = 0
        self.written = 0
        self.lock = threading.Lock()  # a fork may have copied it held by another thread
        self.fh = open(os.path.join(_OUT, "reference-%d.jsonl" % self.pid), "w", encoding="utf-8")
        self.buf.append(_DUMPS(["hello", 1, self.pid, "%d.%d.%d" % sys.version_info[:3]]))

    # The buffer is one list, never replaced: another thread may hold it between its look-up
    # and its append. A flush takes the first k records and deletes them under the lock; what
    # other threads append meanwhile (a write releases the GIL) stays for the next flush.
    def _write(self):
        buf = self.buf
        k = len(buf)
        if k:
            recs = buf[:k]
            del buf[:k]
            self.written += k
            self.fh.write("\n".join(recs) + "\n")

    def flush(self):
        with self.lock:
            if self.fh is None or self.pid != os.getpid():
                return
            self._write()
            self.fh.flush()

    def close(self):
        with self.lock:
            if self.fh is None or self.pid != os.getpid():
                return
            self._write()
            # The records written before it, `hello` not counted (as flux_trace::reference).
            self.fh.write(_DUMPS(["end", self.written - 1]) + "\n")
            self.fh.close()
            self.fh = None


_out = _Out()


def _clean(s):
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")
    except Exception:
        return "<unprintable>"


# --- values: flux's rendering (flux-hook/README.md, "Wire protocol": Reprs) -----------------
_RL = max(_L, 8)
_RN = max(_RL // 2, 6)


class _Repr(reprlib.Repr):
    """reprlib with the limits from the config: nesting to limits.depth, N = max(limit // 2, 6)
    items of a container, strings and bytes cut to the limit before their repr, dicts in
    insertion order, ints and other objects by their own full repr (or `<repr failed: T>`)."""

    def __init__(self):
        reprlib.Repr.__init__(self)
        self.maxlevel = max(_DEPTH, 1)
        self.maxtuple = self.maxlist = self.maxarray = self.maxdict = _RN
        self.maxset = self.maxfrozenset = self.maxdeque = _RN
        self.maxstring = self.maxlong = self.maxother = _RL + 16

    def repr_str(self, x, level):
        return builtins.repr(x[:_RL])

    def repr_bytes(self, x, level):
        return builtins.repr(x[:_RL])

    def repr_int(self, x, level):
        try:
            return builtins.repr(x)
        except Exception:
            return "<repr failed: int>"

    def repr_dict(self, x, level):
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        parts = []
        for i, k in enumerate(x):
            if i >= self.maxdict:
                parts.append("...")
                break
            parts.append("%s: %s" % (self.repr1(k, level - 1), self.repr1(x[k], level - 1)))
        return "{%s}" % ", ".join(parts)

    def repr_instance(self, x, level):
        try:
            return builtins.repr(x)
        except Exception:
            return "<repr failed: %s>" % type(x).__name__


_reprer = _Repr()
_SCALARS = (int, float, bool, type(None))


def _cut(s):
    return s if len(s) <= _L else s[: max(_L - 3, 0)] + "..."


def _flat(v, t):
    """A list, tuple or dict of plain scalars (and strings within the limit) that the bounded
    repr would print whole: printed by repr() (the same text)."""
    if len(v) > _RN:
        return None
    items = v.items() if t is dict else ((None, x) for x in v)
    for k, x in items:
        for y in (k, x) if t is dict else (x,):
            ty = type(y)
            if ty is str:
                if len(y) > _L:
                    return None
            elif ty not in _SCALARS:
                return None
    try:
        return repr(v)
    except Exception:
        return None


# The documented rule for values (flux-gen's values note): a memory address in a repr
# (`<Foo object at 0x7f3a…>`) shows as `0x?`, since it changes from run to run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _scrub(s):
    return _ADDRESS.sub(" at 0x?", s) if " at 0x" in s else s


def _raw(v):
    """[repr, type] as the documented rendering gives it, memory addresses as they are: what
    "changed since the frame's previous event" compares (a local rebound to another object of
    the same class has changed even though both show as `0x?`)."""
    t = type(v)
    if t in _SCALARS:
        try:
            s = repr(v)
        except Exception:
            s = "<repr failed: %s>" % t.__name__
        return [_cut(s), t.__name__]
    if t is str:
        s = repr(v[: _L + 1])
    else:
        s = _flat(v, t) if t in (list, tuple, dict) else None
        if s is None:
            try:
                s = _reprer.repr(v)
            except Exception:
                s = "<repr failed: %s>" % t.__name__
    return [_cut(s), t.__name__]


def _shown(raw):
    """A rendering as a gold answer shows it: addresses as `0x?`."""
    return [_clean(_scrub(raw[0])), _clean(raw[1])]


def _render(v):
    return _shown(_raw(v))


def _typename(e):
    t = type(e)
    mod = getattr(t, "__module__", None)
    qn = getattr(t, "__qualname__", t.__name__)
    return _clean(qn if mod in (None, "builtins") else "%s.%s" % (mod, qn))


def _message(e):
    try:
        m = str(e)
    except Exception:
        m = "<str failed: %s>" % type(e).__name__
    return _clean(_cut(m))


def _changed(st, frame):
    """{name: [repr, type]} of the frame's locals changed since its previous event, or None."""
    if not _WANT_VARS:
        return None
    try:
        items = list(frame.f_locals.items())
    except Exception:
        return None
    out = None
    n = 0
    snap = st.snap
    for name, v in items:
        if not isinstance(name, str) or (name[:2] == "__" and name[-2:] == "__"):
            continue
        if n >= _NLOCALS:
            break
        n += 1
        r = _raw(v)
        if snap.get(name) != r:
            snap[name] = r
            if out is None:
                out = {}
            out[name] = _shown(r)
    return out


# --- targeting (flux's config: files as path suffixes or globs, functions as qualnames) -------
def _file_matches(fn):
    if not _FILES or not fn:
        return False
    names = [fn]
    if not fn.startswith("/") and not fn.startswith("<"):
        names.append(os.path.abspath(fn))
    for name in names:
        for f in _FILES:
            if any(c in f for c in "*?["):
                if fnmatch.fnmatchcase(name, f):
                    return True
                continue
            if name == f:
                return True
            suffix = f[2:] if f.startswith("./") else f.lstrip("/")
            if name.endswith("/" + suffix):
                return True
    return False


def _func_matches(q):
    return not _FUNCS or any(q == f or q.startswith(f + ".") for f in _FUNCS)


class _Code:
    __slots__ = ("ref", "targeted", "gen", "start", "code", "file_ok")


_codes = {}  # id(code) -> _Code (the code object kept alive with it)
_next_ref = [1]
_ran_files = set()  # targeted files whose code ran


def _code(code):
    c = _codes.get(id(code))
    if c is not None and c.code is code:
        return c
    c = _Code()
    c.code = code
    c.ref = _next_ref[0]
    _next_ref[0] += 1
    fn = code.co_filename
    c.file_ok = _file_matches(fn)
    c.targeted = c.file_ok and _func_matches(code.co_qualname)
    c.gen = bool(code.co_flags & _GEN)
    c.start = -1
    if c.gen:
        for ins in dis.get_instructions(code):
            if ins.opcode == _RESUME and ins.arg == 0:
                c.start = ins.offset
                break
    _codes[id(code)] = c
    _out.add(["C", c.ref, _clean(fn), _clean(code.co_name), _clean(code.co_qualname),
              code.co_firstlineno, 1 if c.targeted else 0])
    if c.file_ok:
        _ran_files.add(fn)
    return c


# --- handlers and bare raises, from the AST of a file ---------------------------------------
_handlers = {}  # filename -> ({first body line: (except line, last header line)}, bare raise lines)


def _source_facts(filename):
    m = _handlers.get(filename)
    if m is None:
        import ast
        import linecache

        firsts, bare = {}, set()
        try:
            tree = ast.parse("".join(linecache.getlines(filename)), filename)
            for node in ast.walk(tree):
                if isinstance(node, ast.ExceptHandler) and node.body:
                    first = node.body[0].lineno
                    firsts[first] = (node.lineno, first - 1)
                elif isinstance(node, ast.Raise) and node.exc is None:
                    bare.add(node.lineno)
        except Exception:
            pass
        m = _handlers[filename] = (firsts, bare)
    return m


# --- predicates ---------------------------------------------------------------------------------
_PREDS = {}  # line -> [(text, code, function or None)]
for _p in _CFG.get("predicates") or []:
    _text = str(_p.get("expr", ""))
    _pc = compile(_text, "<flux predicate>", "eval")
    for _ln in _p.get("lines", []):
        _PREDS.setdefault(int(_ln), []).append((_text, _pc, _p.get("function")))


def _checks(tid, fid, frame, line):
    q = frame.f_code.co_qualname
    for text, pc, func in _PREDS.get(line, ()):
        if func is not None and func != q:
            continue
        try:
            res = True if eval(pc, frame.f_globals, frame.f_locals) else False
        except Exception as e:
            res = ["error", _typename(e)]
        _out.add(["k", tid, fid, line, text, res])


# --- per thread and per frame -------------------------------------------------------------------
class _Thread:
    __slots__ = ("tid", "unwound")

    def __init__(self):
        self.tid = threading.get_native_id()
        # (id(frame), id(its caller), {ids of the exception}) of the latest unwinding return
        self.unwound = None


_tl = threading.local()


def _here():
    t = getattr(_tl, "t", None)
    if t is None:
        t = _tl.t = _Thread()
    return t


class _Frame:
    __slots__ = ("fid", "code", "snap", "prev_line", "exc_lasti", "exc_id", "pending", "bare",
                 "opened", "suspended")

    def __init__(self, fid, code):
        self.fid = fid
        self.code = code
        self.snap = {}  # name -> [repr, type] at the frame's previous event
        self.prev_line = None
        self.exc_lasti = None  # f_lasti of the latest exception event, no line since
        self.exc_id = None  # _key() of the exception of its latest exception event
        self.pending = None  # (type, message) of an exception not yet handled here
        self.bare = None  # a bare `raise` line ran: (line, type, message)
        self.opened = None  # f_lasti at the activation's call, until its first line
        self.suspended = False


_frames = {}  # id(frame) -> _Frame, from its start to its last return (suspended ones too)
_next_fid = [1]
_on = [False]


def _emit_x(th, frame, st, line, ty, msg, kind, origin):
    _out.add(["x", th.tid, st.fid, line, ty, msg, kind, origin])
    st.pending = (ty, msg)


def _flush_bare(th, frame, st):
    if st.bare is not None:
        line, ty, msg = st.bare
        st.bare = None
        _emit_x(th, frame, st, line, ty, msg, "reraise", None)


def _key(e):
    """An exception known without holding it: its address and its type's. The address alone
    is not enough: a GeneratorExit that closed a generator (`all(... for ...)` stopping early)
    dies, and the exception raised next may be allocated where it was (a SymPy raise taken for
    a propagation)."""
    return (id(e), id(type(e)))


def _origin(tb):
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    co = tb.tb_frame.f_code
    line = tb.tb_lineno
    return [_clean(co.co_filename), _clean(co.co_qualname), line if type(line) is int and line > 0 else 0]


def _op(frame):
    co = frame.f_code.co_code
    i = frame.f_lasti
    return co[i] if 0 <= i < len(co) else -1


def _how(frame, st):
    op = _op(frame)
    if op in _RETURN_OPS:
        return "return"
    if op in _YIELD_OPS and st.exc_lasti != frame.f_lasti:
        return "yield"
    return "unwind"


def _local(frame, event, arg):
    if not _on[0]:
        return None
    g = gc.isenabled()
    if g:
        gc.disable()
    try:
        return _local_event(frame, event, arg)
    finally:
        if g:
            gc.enable()


def _local_event(frame, event, arg):
    st = _frames.get(id(frame))
    if st is None or st.code is not frame.f_code:
        return None  # started before the window (or in another tracer's time): not ours
    c = _codes[id(frame.f_code)]
    th = _here()
    t = c.targeted
    if event == "line":
        line = frame.f_lineno
        if t:
            _flush_bare(th, frame, st)
            firsts, bare = _source_facts(frame.f_code.co_filename)
            h = firsts.get(line)
            if h is not None and st.pending is not None and _WANT_EXC:
                one_line = h[0] > h[1]
                after_header = st.prev_line is not None and h[0] <= st.prev_line <= h[1]
                if one_line or after_header:
                    e = sys.exc_info()[1]
                    ty, msg = (_typename(e), _message(e)) if e is not None else st.pending
                    _out.add(["h", th.tid, st.fid, h[0], ty, msg])
                    st.pending = None
            if _WANT_LINE:
                _out.add(["l", th.tid, st.fid, line, _changed(st, frame)])
            if _PREDS:
                _checks(th.tid, st.fid, frame, line)
            if line in bare:
                e = sys.exc_info()[1]
                if e is not None:
                    st.bare = (line, _typename(e), _message(e))
        st.prev_line = line
        st.exc_lasti = None
        st.opened = None
    elif event == "exception":
        e = arg[1]
        tb = arg[2]
        if type(e) is StopIteration and (tb is None or _op(frame) == _SEND):
            return _local  # a `yield from`/await ending, reported by CPython; never raised
        if t:
            _flush_bare(th, frame, st)
            u = th.unwound
            nxt = tb.tb_next if tb is not None else None
            came_out = u is not None and u[1] == id(frame) and (
                _key(e) in u[2] or (nxt is not None and id(nxt.tb_frame) == u[0])
            )
            if came_out:
                kind = "propagate"
            elif c.gen and st.opened == frame.f_lasti:
                kind = "thrown"
            elif tb is not None and tb.tb_next is not None:
                kind = "reraise"
            else:
                kind = "raise"
            if _WANT_EXC:
                _emit_x(th, frame, st, frame.f_lineno, _typename(e), _message(e), kind, _origin(tb))
        th.unwound = None
        st.exc_id = _key(e)
        st.exc_lasti = frame.f_lasti
        st.opened = None
    elif event == "return":
        if t:
            _flush_bare(th, frame, st)
        how = _how(frame, st)
        value = exc = locs = None
        if t:
            if how == "unwind":
                p = st.pending
                e = sys.exc_info()[1]
                exc = [p[0], p[1]] if p is not None else (
                    [_typename(e), _message(e)] if e is not None else None)
            elif _WANT_RET:
                value = _render(arg)
            locs = _changed(st, frame)
        _out.add(["r", th.tid, st.fid, frame.f_lineno, how, value, locs, exc])
        if how == "unwind":
            # This frame, the frame its exception goes to, and that exception by address (alive
            # while it propagates): the one of its latest exception event, or the one a caller
            # is handling, which a bare `raise` outside the frame's own handlers re-raises with
            # no event and no traceback entry (flask's handle_user_exception).
            b = frame.f_back
            h = sys.exc_info()[1]
            ids = {st.exc_id, _key(h) if h is not None else None} - {None}
            th.unwound = (id(frame), id(b) if b is not None else None, ids)
        if how == "yield":
            st.suspended = True
            st.exc_lasti = st.pending = st.bare = None
        else:
            _frames.pop(id(frame), None)
    return _local


def _global(frame, event, arg):
    if event != "call" or not _on[0]:
        return None
    code = frame.f_code
    if code.co_filename == _ME:
        return None
    g = gc.isenabled()
    if g:
        gc.disable()
    try:
        c = _code(code)
        th = _here()
        st = _frames.get(id(frame))
        if c.gen and frame.f_lasti > c.start:
            if st is not None and st.code is code and st.suspended:
                start = "resume"
                st.suspended = False
            else:
                start = "unseen"
                st = None
        else:
            start = "fresh"
            st = None
        if st is None:
            st = _frames[id(frame)] = _Frame(_next_fid[0], code)
            _next_fid[0] += 1
        st.opened = frame.f_lasti
        line = code.co_firstlineno if start == "fresh" else frame.f_lineno
        _out.add(["c", th.tid, c.ref, st.fid, line, start])
        frame.f_trace_lines = c.targeted
        return _local
    finally:
        if g:
            gc.enable()


# --- switching it on and off: each test's protocol ------------------------------------------
_real_settrace = sys.settrace
_real_start = _thread.start_new_thread


def _start_new_thread(function, args, kwargs=None):
    """Every thread started from Python (threading's included) is traced from its first frame
    while a window is open."""

    def boot(*a, **k):
        if _on[0]:
            _real_settrace(_global)
        return function(*a, **k)

    return _real_start(boot, args, kwargs or {})


def _stop():
    _on[0] = False
    _real_settrace(None)
    threading.settrace(None)


_outcomes = {}
_refused = []
if _CFG.get("scope", "run") == "run":
    _refused.append('scope "run" (the reference traces test windows)')
if _CFG.get("dialect", "flux") != "flux":
    _refused.append("dialect %r" % _CFG.get("dialect"))
if _CFG.get("module_functions"):
    _refused.append("module_functions")


def _window(item, nextitem):
    """Each test's protocol (logstart, setup, call, teardown, logfinish) is a window: pluggy
    resumes this wrapper from the frame that started it, so whatever starts inside ends
    inside."""
    if _refused or _out.over:
        return (yield)
    _on[0] = True
    threading.settrace(_global)
    _real_settrace(_global)
    try:
        return (yield)
    finally:
        if sys.gettrace() is not _global:
            _out.add(["lost", "sys.settrace was replaced during a test (by the program?)"])
        _stop()
        _out.flush()


try:
    pytest_runtest_protocol = pytest.hookimpl(wrapper=True)(_window)
except TypeError:  # pluggy < 1.1
    pytest_runtest_protocol = pytest.hookimpl(hookwrapper=True)(_window)


def pytest_runtest_logstart(nodeid, location):
    if _refused:
        return
    _outcomes[nodeid] = "passed"
    _out.add(["ts", threading.get_native_id(), _clean(nodeid)])


def pytest_runtest_logreport(report):
    cur = _outcomes.get(report.nodeid, "passed")
    if report.when == "call":
        new = "failed" if report.failed else "skipped" if report.skipped else "passed"
        if cur == "passed":
            cur = new
    elif report.failed:
        cur = "error"
    elif report.skipped and cur == "passed":
        cur = "skipped"
    _outcomes[report.nodeid] = cur


def pytest_runtest_logfinish(nodeid, location):
    if _refused:
        return
    _out.add(["te", threading.get_native_id(), _clean(nodeid), _outcomes.pop(nodeid, "passed")])


def _finish():
    _stop()
    if _CFG.get("facts", True) and _ran_files and not _refused:
        sys.path.insert(0, _ME_DIR)
        try:
            import static_facts
        except Exception as e:
            _out.add(["lost", "static facts: %s" % e])
        else:
            for fn in sorted(_ran_files):
                try:
                    _out.add(["F", _clean(fn), static_facts.facts_for_file(fn)])
                except (OSError, SyntaxError, ValueError, RecursionError):
                    continue
    _out.close()


_TRACER_CODES = frozenset(
    f.__code__ for f in (_global, _local, _local_event, _window, _changed, _render)
)
_deferred = [False]


def _gc_defer(phase, info):
    """3.12+ runs a scheduled collection at the next eval-breaker check, which may be a trace
    function's first instruction, before its guard: such a collection is deferred (everything
    frozen for its length, then thawed), so that a later one, in the program's context, runs its
    finalizers traced."""
    if phase == "start":
        if gc.get_freeze_count():
            return
        f = sys._getframe(1)
        for _ in range(8):
            if f is None:
                return
            if f.f_code in _TRACER_CODES:
                gc.freeze()
                _deferred[0] = True
                return
            f = f.f_back
    elif _deferred[0]:
        _deferred[0] = False
        gc.unfreeze()


def _seed_random(seed=0):
    """flux's determinism policy (flux-hook/README.md, "Determinism"): the `random` module's
    generator seeded with 0, and 0 the default seed of `random.Random()` and `Random.seed()`
    (their defaults changed, no wrapper). PYTHONHASHSEED=0 comes from the environment."""
    import random

    init = random.Random.__init__
    if init.__defaults__ == (None,):
        init.__defaults__ = (seed,)
    sd = random.Random.seed
    if sd.__defaults__ == (None, 2):
        sd.__defaults__ = (seed, 2)
    random.seed(seed)


def _install():
    _seed_random()
    os.makedirs(_OUT, exist_ok=True)
    _out._open()
    if _refused:
        _out.add(["lost", "refused: " + "; ".join(_refused)])
    if sys.version_info >= (3, 12):
        gc.callbacks.append(_gc_defer)
    atexit.register(_finish)
    _thread.start_new_thread = _start_new_thread
    threading._start_new_thread = _start_new_thread


_install()
