"""The third witness: a plain `sys.settrace` reference tracer for flux's witness corpus.

It shares no code with flux's hook (`flux-hook/`) and none of its bookkeeping: it knows nothing
of USDT, of the hook's frame states or of its records. `flux-cli/tests/witness.rs` runs every
corpus program under it and under `flux trace`, and asserts that both report the same
call/return/line/exception/handled sequence of the program's own file, thread by thread.

    python reference.py OUT FILE FUNCTIONS -- prog.py [args...]
    python reference.py OUT FILE FUNCTIONS -- -m pytest [args...]

OUT: where the events go (JSON lines, written at exit). FILE: the program's file as a path
suffix (`/name.py`); only frames of code from it are recorded. FUNCTIONS: comma-separated
qualnames targeted as flux's config `functions` does (a qualname or one nested in it; empty =
every function of FILE): lines, exceptions and handlers are recorded for those only, calls and
returns for every frame of FILE. Under pytest, events say whether they ran inside a test's
`pytest_runtest_protocol` (`win`) and inside an activation of targeted code in their thread
(`ext`, counting nested and resumed ones; `xn` numbers these extents in the thread), which is
what flux's `scope = "tests"` and `"targets"` record.

What each event means (one JSON object per line, in the thread's order):
- `call`: a frame of FILE starts (`resume: false`, `line` = the code's first line) or a
  suspended generator/coroutine frame resumes, `gen.throw()`/`close()` included (`resume:
  true`, `line` = where it resumes). A frame is the same while the reference holds it: it keeps
  a reference to every suspended frame until its last return.
- `return`: the activation ends; `how` = `return` (the instruction is a return), `yield` (a
  yield or await suspension: `YIELD_VALUE`, or 3.12-3.14's `RESUME` after it, unless an
  exception was reported at that very instruction with no line since: thrown in and not
  handled), else `unwind`.
- `line`: settrace's line event.
- `exception`: settrace's exception event (an exception raised in the frame or arriving from a
  callee), `kind` = `raise` (an exception object reported for the first time: raised here, by
  a C function called here), `propagate` (the exception with which a frame this one called
  has just unwound), `thrown` (put into a generator or coroutine by `throw()`/`close()`: the
  activation's first event after its `call`, at the very instruction it resumed at, with no
  line between; a context manager's `__exit__` throwing a `with` body's exception in, or a new
  one), `reraise` (an exception object seen before: `raise e`, a stored one), plus a bare
  `raise` statement of FILE executed (settrace reports none: its exception is the one being
  handled, `sys.exc_info()`). A StopIteration with no traceback (CPython's report of a
  `yield from`/`await` ending, never raised by a frame) is not an exception.
- `handled`: the first line of an `except` body runs right after its header's lines (`line` =
  the header's); the exception is the one being handled. An `except X: stmt` on one line cannot
  be told from a failed match by line events: the reference stops with an error if one runs.
- `d`: the activation's depth: how many activations (of any code) are open below it in its
  thread, counted from the reference's own call and return events. (Not f_back links: a
  `throw()` into a generator delegating with `yield from` resumes the inner generator with the
  outer's frame linked below it but never resumed, so no activation of it is open.)

What it cannot see, and leaves to flux's own tests: processes other than the first (no fork
support), code run before it installs (none of FILE), threads started from C, and a program's
own `sys.settrace`/`setprofile` (which would replace the reference; flux must report it as a
loss on every version, which `own_settrace.py` checks).

It keeps every suspended frame and every exception it saw alive (frames to know them again,
exceptions because built-in ones take no weak references): finalizers of what they hold run
late. The corpus has none that print.
"""
import atexit
import dis
import gc
import json
import os
import runpy
import sys
import threading
import _thread

OUT, FILE, FUNCS = sys.argv[1], sys.argv[2], [f for f in sys.argv[3].split(",") if f]
assert sys.argv[4] == "--", "usage: reference.py OUT FILE FUNCTIONS -- prog.py|-m module ..."
ME = os.path.abspath(__file__)
EVENTS = []
REPR_LIMIT = 200  # flux's default `limits.repr`, which cuts exception messages too
YIELD_OPS = {"YIELD_VALUE"} | ({"RESUME"} if (3, 12) <= sys.version_info[:2] < (3, 15) else set())
RETURN_OPS = {"RETURN_VALUE", "RETURN_CONST"}
_GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR

_mine = {}  # code -> recorded (of FILE)?
_target = {}  # code -> targeted?
_handlers = {}  # filename -> ({first body line: (header line, last header line)}, bare raise lines)
_states = {}  # id(frame) -> FrameInfo of a running or suspended frame of FILE
# Exceptions seen so far, by identity. Built-in exceptions take no weak references: they are
# kept alive (and what their tracebacks hold, finalizers included, until exit).
_seen = {}
_tl = threading.local()
_window = [False]
_real_settrace = sys.settrace
RUNPY = runpy.run_path.__code__.co_filename


def _recorded(code):
    r = _mine.get(code)
    if r is None:
        r = _mine[code] = code.co_filename.endswith(FILE)
    return r


def _targeted(code):
    r = _target.get(code)
    if r is None:
        q = code.co_qualname
        r = _target[code] = _recorded(code) and (
            not FUNCS or any(q == f or q.startswith(f + ".") for f in FUNCS)
        )
    return r


def _source_facts(filename):
    """(first line of an except body -> (header line, last header line), bare `raise` lines)
    of a file, from its AST."""
    m = _handlers.get(filename)
    if m is None:
        import ast

        firsts, bare = {}, set()
        with open(filename, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename)
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler):
                first = node.body[0].lineno
                firsts[first] = (node.lineno, first - 1)
            elif isinstance(node, ast.Raise) and node.exc is None:
                bare.add(node.lineno)
        m = _handlers[filename] = (firsts, bare)
    return m


def _typename(e):
    t = type(e)
    if t.__module__ == "builtins":
        return t.__qualname__
    return "%s.%s" % (t.__module__, t.__qualname__)


def _message(e):
    try:
        m = str(e)
    except Exception:
        m = "<str failed: %s>" % type(e).__name__
    return m if len(m) <= REPR_LIMIT else m[: REPR_LIMIT - 3] + "..."


class _Thread:
    __slots__ = ("tid", "depth", "xd", "xn", "unwound", "prog")

    def __init__(self):
        self.tid = threading.get_native_id()
        self.depth = 0  # activations open in this thread (of any code) since the reference began
        self.xd = 0  # running activations of targeted code (scope "targets")
        self.xn = 0  # extents so far: the times xd left 0
        self.unwound = None  # (the exception, id(caller)) of the latest unwind
        self.prog = None  # the program's own trace function in this thread


def _here():
    t = getattr(_tl, "t", None)
    if t is None:
        t = _tl.t = _Thread()
    return t


class _Frame:
    """What the reference knows of one running (or suspended) frame."""

    __slots__ = ("held", "prev_line", "exc_lasti", "exc", "bare", "opened")

    def __init__(self):
        self.opened = None  # f_lasti at its activation's `call`, until its first line event
        self.held = None  # the frame itself while it is suspended (so it stays the same object)
        self.prev_line = None  # the line of its previous line event
        self.exc_lasti = None  # f_lasti of its latest exception event, with no line since
        self.exc = None  # the exception of that event
        self.bare = None  # a bare `raise` line ran: (line, its exception)


_frames = {}  # id(frame) -> _Frame, from its start (or first sight) to its last return


def _emit(th, frame, ev, **kw):
    code = frame.f_code
    rec = {
        "tid": th.tid,
        "ev": ev,
        "q": code.co_qualname,
        "line": frame.f_lineno,
        "d": th.depth,
        "target": _targeted(code),
        "win": _window[0],
        "ext": th.xd > 0,
        "xn": th.xn,
    }
    rec.update(kw)
    EVENTS.append(rec)


def _exception(th, frame, e, line, kind):
    _emit(th, frame, "exception", line=line, exc=_typename(e), msg=_message(e), kind=kind)


def _flush_bare(th, frame, st):
    """A bare `raise` ran on the frame's previous line: its exception, before what follows."""
    if st.bare is not None:
        line, e = st.bare
        st.bare = None
        _exception(th, frame, e, line, "reraise")
        st.exc = e


def _how(code, frame, st):
    i = frame.f_lasti
    op = dis.opname[code.co_code[i]] if 0 <= i < len(code.co_code) else ""
    if op in RETURN_OPS:
        return "return"
    if op in YIELD_OPS and st.exc_lasti != i:
        return "yield"
    return "unwind"


def _local(frame, event, arg):
    code = frame.f_code
    th = _here()
    st = _frames.get(id(frame))
    if st is None:
        st = _frames[id(frame)] = _Frame()
    t = _targeted(code)
    if event == "line":
        line = frame.f_lineno
        if t:
            _flush_bare(th, frame, st)
            firsts, bare = _source_facts(code.co_filename)
            h = firsts.get(line)
            if h is not None:
                if h[0] > h[1]:
                    sys.stderr.write(
                        "reference: an `except X: stmt` on one line ran (%s:%d): cannot tell "
                        "a match from a failed one\n" % (code.co_filename, line)
                    )
                    os._exit(3)
                if st.prev_line is not None and h[0] <= st.prev_line <= h[1]:
                    e = sys.exc_info()[1]
                    _emit(th, frame, "handled", line=h[0], exc=_typename(e), msg=_message(e))
            _emit(th, frame, "line")
            if line in bare and sys.exc_info()[1] is not None:
                st.bare = (line, sys.exc_info()[1])
        st.prev_line = line
        st.exc_lasti = None
        st.opened = None
    elif event == "exception":
        e = arg[1]
        if type(e) is StopIteration and arg[2] is None:
            return _local  # a `yield from`/await ending, reported by CPython; never raised
        if t:
            _flush_bare(th, frame, st)
            u = th.unwound
            if u is not None and u[0] is e and u[1] == id(frame):
                kind = "propagate"
            elif st.opened == frame.f_lasti and code.co_flags & _GEN_FLAGS:
                kind = "thrown"
            elif id(e) in _seen:
                kind = "reraise"
            else:
                kind = "raise"
            _exception(th, frame, e, frame.f_lineno, kind)
        _seen[id(e)] = e
        st.opened = None
        st.exc_lasti = frame.f_lasti
        st.exc = e
    elif event == "return":
        if t:
            _flush_bare(th, frame, st)
        how = _how(code, frame, st)
        if _recorded(code):
            _emit(th, frame, "return", how=how)
            if t:
                th.xd -= 1
        th.depth -= 1
        if how == "unwind":
            # The exception it unwinds with: its latest exception event's, or, with none since
            # (a bare `raise` outside its own handlers reports nothing), the one a caller is
            # handling, which that `raise` re-raises.
            e = st.exc if st.exc is not None else sys.exc_info()[1]
            th.unwound = (e, id(frame.f_back) if frame.f_back else None)
        if how == "yield" and _recorded(code):
            st.held = frame
            st.exc_lasti = st.exc = st.bare = None
        else:
            _frames.pop(id(frame), None)
    return _local


def _global(frame, event, arg):
    if event != "call":
        return None
    code = frame.f_code
    if code.co_filename in (ME, RUNPY):
        # The reference's own frames, and runpy's that run the program: `python prog.py` under
        # flux has none below the program's `<module>` (its atexit handlers run at depth 0).
        return None
    th = _here()
    if _recorded(code):
        st = _frames.get(id(frame))
        resume = st is not None and st.held is not None
        if resume:
            st.held = None  # running again: the frame stays alive by itself
        else:
            st = _frames[id(frame)] = _Frame()
        if _targeted(code):
            if th.xd == 0:
                th.xn += 1
            th.xd += 1
        th.depth += 1
        st.opened = frame.f_lasti
        _emit(th, frame, "call", line=frame.f_lineno if resume else code.co_firstlineno, resume=resume)
        frame.f_trace_lines = _targeted(code)
    else:
        th.depth += 1
        _frames[id(frame)] = _Frame()
        frame.f_trace_lines = False
    return _local


def _gc_guarded(tracer):
    """The trace functions run with automatic collection held off: a collection started in one
    (they allocate) would run the program's finalizers there, untraced. The program's next
    allocation collects instead, traced. (flux's hook does the same: its `gc-guard`.)"""
    on, off, back = gc.isenabled, gc.disable, gc.enable

    def trace(frame, event, arg):
        if not on():
            return tracer(frame, event, arg)
        off()
        try:
            return tracer(frame, event, arg)
        finally:
            back()

    return trace


_TRACER_CODES = {_local.__code__, _global.__code__}
_local = _gc_guarded(_local)  # (`_local` and `_global` return the guarded `_local`.)
_global = _gc_guarded(_global)
_TRACER_CODES.add(_local.__code__)
_deferred = [False]


def _gc_defer(phase, info):
    """3.12+ runs a scheduled collection at the next eval-breaker check, which may be a trace
    function's first instruction, before its guard: such a collection is deferred (everything
    frozen for its length, then thawed into the oldest generation), so that a later one, in
    the program's context, runs its finalizers traced. (flux's hook does the same: `gc-defer`.)"""
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


if sys.version_info >= (3, 12):
    gc.callbacks.append(_gc_defer)


# --- every thread ------------------------------------------------------------------------------
_real_start = _thread.start_new_thread


def _start_new_thread(function, args, kwargs=None):
    """Every thread started from Python (threading's included) is traced from its first frame."""

    def boot(*a, **k):
        _real_settrace(_global)
        return function(*a, **k)

    return _real_start(boot, args, kwargs or {})


def _dump():
    # Registered before the program runs, so the last atexit handler: the program's own
    # handlers ran traced before it (flux's scope "run" ends at its hook's handler likewise).
    _real_settrace(None)
    threading.settrace(None)
    with open(OUT, "w") as fh:
        for rec in EVENTS:
            fh.write(json.dumps(rec) + "\n")


def main():
    rest = sys.argv[5:]
    atexit.register(_dump)
    _thread.start_new_thread = _start_new_thread
    # (threading's own threads: 3.11 starts them through this alias, 3.13+ through
    # `_thread.start_joinable_thread`, and their bootstrap installs threading's trace hook.)
    threading._start_new_thread = _start_new_thread
    threading.settrace(_global)
    if rest[:2] == ["-m", "pytest"]:
        import pytest

        class Window:
            """Inside each test's `pytest_runtest_protocol` (flux's scope "tests")."""

            @pytest.hookimpl(wrapper=True)
            def pytest_runtest_protocol(self, item, nextitem):
                _window[0] = True
                try:
                    return (yield)
                finally:
                    _window[0] = False

        sys.argv = ["pytest"] + rest[2:]
        _real_settrace(_global)
        code = pytest.main(rest[2:], plugins=[Window()])
        sys.exit(int(code))
    sys.argv = rest
    sys.path[0] = os.path.dirname(os.path.abspath(rest[0]))
    _real_settrace(_global)
    runpy.run_path(rest[0], run_name="__main__")


main()
