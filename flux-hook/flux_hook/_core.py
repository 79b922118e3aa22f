"""Shared machinery of the in-process hook: config, targeting, bounded reprs, the socket writer.

Everything here is pure stdlib. The tracing back-ends (`_sysmon` for Python >= 3.12,
`_settrace` for 3.11) build their callbacks on top of the `Hook` object defined here.
"""
import ast
import atexit
import builtins
import fnmatch
import itertools
import json
import opcode
import os
import reprlib
import socket
import sys
import threading
import time
import _thread

# `frozen-clock`: the clock every record is stamped with, taken when the hook is imported, before
# the program runs. A program may replace `time.monotonic_ns` — freezegun sets it in the `time`
# module and in every loaded module whose attribute holds it — and records stamped with its
# clock come out of order (python-dateutil's and humanize's tests under `freeze_time`). Held in
# a tuple, which no such patcher looks into; called as `CLOCK[0]()` (no Python frame).
CLOCK = (time.monotonic_ns,)

# Code kinds, stored in Hook.codes[id(code)] = [code_id, kind, code, extra...]
EXCLUDED = 0  # flux_hook's own code: never recorded
PLAIN = 1  # untargeted: calls only (depending on FLUX_HOOK_CALLS)
TARGET = 2  # targeted: lines, locals, values, exceptions

# Protocol constants, written in Rust too (flux-merge's protocol.rs and plan.rs): its tests
# (tests/protocol_doc.rs) check that both sides agree.
# What FLUX_HOOK_CALLS may say (flux_merge::plan::HookCalls).
CALLS = ("all", "entries", "none", "generators")
# What FLUX_HOOK_LEAVE may name, in the order the hello echoes them (flux_merge::plan::Leave).
LEAVE = ("lineless",)
# The exit status of a process whose hook cannot go on: the agent gone, a bad FLUX_HOOK_* setting
# (flux_merge::protocol::HOOK_EXIT; a harvest names it).
EXIT_CODE = 97

# Traits of a code object in its C record (flux_merge::protocol::CODE_*).
CODE_GEN = 1  # generator, coroutine or async generator
CODE_NO_FIRST_LINE = 2  # its first instruction has no line (MAKE_CELL, 3.15's genexpr RESUME...)
CODE_TARGET = 4  # targeted by the config (scope "targets": the hook reports its starts)

# Types whose repr() is C code all the way (no Python frame, no probe fires): rendered as is.
_C_REPR = frozenset((int, float, bool, type(None), str, bytes, complex))



def no_first_line(code):
    """Whether the code's first instruction has no line (MAKE_CELL, COPY_FREE_VARS, 3.15's
    generator-expression RESUME): 3.15's USDT entry of a fresh frame then says line 0, which
    cannot tell such code objects of the same name apart, so the hook reports their starts."""
    first = next(iter(code.co_lines()), None)
    return first is None or first[0] != 0 or first[2] is None


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, check_circular=False).encode
# The C string encoder of json: no Python frames (none to trace), much faster than _dumps.
from json.encoder import encode_basestring_ascii as jstr  # noqa: E402

from .checks import Checks, facts_records  # noqa: E402


def jval(x):
    """JSON of the hook's payload shapes: None, str, [str, str], {str: [str, str] | None}
    (None: a local that disappeared, dialect "swe-flux")."""
    if x is None:
        return "null"
    t = type(x)
    if t is list:
        return "[%s,%s]" % (jstr(x[0]), jstr(x[1]))
    if t is dict:
        return "{%s}" % ",".join(
            [
                "%s:null" % jstr(k) if v is None else "%s:[%s,%s]" % (jstr(k), jstr(v[0]), jstr(v[1]))
                for k, v in x.items()
            ]
        )
    if t is str:
        return jstr(x)
    return _dumps(x)


GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
# The instructions an exception is reported at when `throw()`/`close()` put it into a generator
# or coroutine: the `yield` it was suspended at, or, unstarted, its RETURN_GENERATOR (3.11: the
# frame's f_lasti; 3.12+: RAISE's offset). No other exception is ever reported there.
THROWN_AT = frozenset(
    opcode.opmap[n] for n in ("YIELD_VALUE", "RETURN_GENERATOR") if n in opcode.opmap
)
# A `raise` statement (bare or not). Cleanup re-raises (RERAISE) are never reported as raises.
RAISE_AT = frozenset([opcode.opmap["RAISE_VARARGS"]])
# An `import` statement's instruction: importlib's Python frames it runs are removed from the
# traceback of what they raise (`import-frames` in classify_raise).
IMPORT_NAME = opcode.opmap["IMPORT_NAME"]
# A call: `__import__(name)` runs importlib's Python frames as an `import` does, and CPython
# removes them from the traceback too (PyImport_ImportModuleLevelObject).
CALL_AT = frozenset(
    opcode.opmap[n]
    for n in ("CALL", "CALL_KW", "CALL_FUNCTION_EX", "PRECALL")
    if n in opcode.opmap
)


def exc_origin(tb):
    """Where an exception was raised, from its traceback: `[co_filename, co_qualname,
    tb_lineno]` of its innermost entry as JSON text (`null` without a traceback). Read from the
    exception itself, it holds whether or not the frame that raised it was traced."""
    if tb is None:
        return "null"
    while tb.tb_next is not None:
        tb = tb.tb_next
    co = tb.tb_frame.f_code
    line = tb.tb_lineno
    return "[%s,%s,%d]" % (
        jstr(clean(co.co_filename)),
        jstr(clean(co.co_qualname)),
        line if type(line) is int and line > 0 else 0,
    )

PKG_DIR = os.path.dirname(os.path.abspath(__file__))
HOOK_DIR = os.path.dirname(PKG_DIR)


def connect_unix(s, path):
    """Connect `s` to the Unix socket at `path`, however deep: a path longer than `sun_path`
    (107 bytes) is reached through an O_PATH handle on its directory, as the agent binds it."""
    if len(os.fsencode(path)) <= 107:
        s.connect(path)
        return
    d, name = os.path.split(path)
    fd = os.open(d, os.O_PATH | os.O_DIRECTORY)
    try:
        s.connect("/proc/self/fd/%d/%s" % (fd, name))
    finally:
        os.close(fd)


def agent_gone(reason):
    """The agent cannot receive records: never drop them silently, stop the process."""
    try:
        sys.stderr.write("flux-hook: agent gone: %s\n" % (reason,))
        sys.stderr.flush()
    except Exception:
        pass
    _real_exit(EXIT_CODE)


def internal_error(where):
    """A bug in the hook must not turn into silently missing records."""
    import traceback

    try:
        sys.stderr.write("flux-hook: internal error in %s\n" % where)
        traceback.print_exc()
        sys.stderr.flush()
    except Exception:
        pass
    _real_exit(98)


_real_exit = os._exit
# Python < 3.8 (only reached to say "unsupported") has no native thread ids.
_native_id = getattr(threading, "get_native_id", threading.get_ident)


class Config:
    def __init__(self, raw):
        d = json.loads(raw) if raw else {}
        if not isinstance(d, dict):
            raise ValueError("FLUX_HOOK_CONFIG must be a JSON object")
        known = {"files", "functions", "module_functions", "events", "limits", "tests", "scope",
                 "predicates", "dialect", "facts"}
        unknown = set(d) - known
        if unknown:
            raise ValueError("unknown field(s) in FLUX_HOOK_CONFIG: %s" % sorted(unknown))
        self.files = [str(f) for f in d.get("files", [])]
        self.functions = [str(f) for f in d.get("functions", [])]
        # SWE-Flux's TRACE_FUNC: matched on `<module>.<qualname>` (module_function_matches).
        self.module_functions = [str(f) for f in d.get("module_functions", [])]
        self.events = set(d.get("events", ["line", "call", "return", "exception", "variables"]))
        bad = self.events - {"line", "call", "return", "exception", "variables"}
        if bad:
            raise ValueError("unknown event(s) in FLUX_HOOK_CONFIG: %s" % sorted(bad))
        lim = d.get("limits", {}) or {}
        self.repr_limit = int(lim.get("repr", 200))
        self.locals_limit = int(lim.get("locals", 50))
        self.depth = int(lim.get("depth", 3))
        self.tests = bool(d.get("tests", True))
        # The static facts (`F` records) of targeted files, computed at exit (ast): off when no
        # reader of the trace needs them (SWE-Flux's parser reads its log only).
        self.facts = bool(d.get("facts", True))
        # "tests": record only inside pytest's test protocols (see Hook.window_open).
        self.scope = str(d.get("scope", "run"))
        if self.scope not in ("run", "tests", "targets"):
            raise ValueError("scope must be run, tests or targets, not %r" % self.scope)
        if self.scope != "run" and not self.tests:
            raise ValueError('scope "%s" needs the test boundaries (tests = true)' % self.scope)
        # "swe-flux": record targeted code as SWE-Flux's settrace tracer sees it (plain reprs,
        # every name, deleted names, locals and the object at exceptions, modules; see
        # flux_trace::config::Dialect).
        dialect = str(d.get("dialect", "flux"))
        if dialect not in ("flux", "swe-flux"):
            raise ValueError("dialect must be flux or swe-flux, not %r" % dialect)
        self.swe = dialect == "swe-flux"
        # [tracing] predicates: compiled here, so a bad one is a bad config (exit 97).
        preds = d.get("predicates", [])
        if not isinstance(preds, list):
            raise ValueError("predicates must be a list")
        self.checks = Checks(preds, exc_typename, CLOCK[0]) if preds else None
        self.want_line = "line" in self.events
        self.want_return = "return" in self.events
        self.want_exc = "exception" in self.events
        self.want_vars = "variables" in self.events
        self._globs = [f for f in self.files if "*" in f or "?" in f or "[" in f]
        self._suffixes = [f for f in self.files if f not in self._globs]
        self._func_prefixes = tuple(f + "." for f in self.functions)
        self._funcs = set(self.functions)

    def file_matches(self, filename):
        if not self.files or not filename:
            return False
        names = [filename]
        if not filename.startswith("/") and not filename.startswith("<"):
            names.append(os.path.abspath(filename))
        for name in names:
            for s in self._suffixes:
                if name == s:
                    return True
                s2 = s.lstrip("/") if not s.startswith("./") else s[2:]
                if name.endswith("/" + s2):
                    return True
            for g in self._globs:
                if fnmatch.fnmatchcase(name, g):
                    return True
        return False

    def qualname_matches(self, qualname):
        if not self.functions:
            return True
        return qualname in self._funcs or qualname.startswith(self._func_prefixes)

    def module_function_matches(self, dotted):
        """SWE-Flux's rule for a TRACE_FUNC entry t on `<module>.<qualname>`: equal, a dotted
        prefix (`pkg.mod` of `pkg.mod.C.f`), a dotted suffix (`C.f`), or t is its last
        component. Empty: every function."""
        if not self.module_functions:
            return True
        last = dotted.rsplit(".", 1)[-1]
        for t in self.module_functions:
            if (dotted == t or t == last or dotted.startswith(t + ".")
                    or dotted.endswith("." + t)):
                return True
        return False


class BoundedRepr(reprlib.Repr):
    """reprlib with limits from the config; never calls user code other than __repr__."""

    def __init__(self, limit, depth):
        reprlib.Repr.__init__(self)
        self.limit = max(limit, 8)
        self.maxlevel = max(depth, 1)
        n = max(self.limit // 2, 6)
        self.maxtuple = self.maxlist = self.maxarray = self.maxdict = n
        self.maxset = self.maxfrozenset = self.maxdeque = n
        self.maxstring = self.maxlong = self.maxother = self.limit + 16

    def repr_str(self, x, level):
        return builtins.repr(x[: self.limit])

    def repr_bytes(self, x, level):
        return builtins.repr(x[: self.limit])

    def repr_int(self, x, level):
        try:
            return builtins.repr(x)
        except Exception:
            return "<repr failed: int>"

    def repr_dict(self, x, level):
        # Insertion order, like repr(); reprlib would sort the keys.
        n = len(x)
        if n == 0:
            return "{}"
        if level <= 0:
            return "{...}"
        newlevel = level - 1
        r1 = self.repr1
        pieces = []
        for i, key in enumerate(x):
            if i >= self.maxdict:
                pieces.append("...")
                break
            pieces.append("%s: %s" % (r1(key, newlevel), r1(x[key], newlevel)))
        return "{%s}" % (", ".join(pieces),)

    def repr_instance(self, x, level):
        try:
            return builtins.repr(x)
        except Exception:
            return "<repr failed: %s>" % type(x).__name__


def module_name(frame):
    """`__name__` of the frame's globals (SWE-Flux's module of a frame), "" if unreadable."""
    try:
        m = frame.f_globals.get("__name__", "")
        return m if type(m) is str else str(m)
    except Exception:
        return ""


def runs_python(f):
    """Whether calling f runs Python code of its own (a function, a bound method, an instance
    of a class with a Python `__call__`), rather than C (cProfile's profiler, a C tracer)."""
    try:
        if hasattr(f, "__code__"):
            return True
        return hasattr(getattr(type(f), "__call__", None), "__code__")
    except Exception:
        return True


def clean(s):
    """A str that encodes to UTF-8: lone surrogates (undecodable file names, odd messages) would
    become JSON escapes that strict parsers (serde_json) reject."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")
    except Exception:
        return "<unprintable>"


def exc_typename(e):
    t = type(e)
    mod = getattr(t, "__module__", None)
    qn = getattr(t, "__qualname__", t.__name__)
    if mod in (None, "builtins"):
        return clean(qn)
    return clean("%s.%s" % (mod, qn))


# Types whose repr cannot change while the object lives (a same-id, same-type local between two
# events of a frame is the same object: it was bound all along, so its address was not reused).
_STABLE_REPR = frozenset(
    [str, int, float, bool, type(None), bytes, complex, type, type(len), type(agent_gone),
     type(os), range]
)


getrefcount = sys.getrefcount


def locals_detacher(lost):
    """`detach(frame, loc)` for Python < 3.13, where `frame.f_locals` of a function's frame is a
    snapshot dict cached on the frame (refreshed by each read): once read, it holds every
    value the frame had then. A value the program then drops (`del x`, a rebinding) stays
    alive in it, and is finalized (`__del__`, a suspended generator's `close()`) only when the
    next read refreshes the snapshot: inside the hook, untraced, its calls lost while the trace
    says complete (23.5a). So whoever reads a frame's locals (changed_locals, the checks)
    detaches the snapshot right after: PyFrame_LocalsToFast(frame, 0) writes the values it
    just read back (the very same objects) and clears the frame's "locals were copied" flag,
    so 3.11's trace trampoline, which merges the dict back into the frame after the trace
    function (deleting every local absent from it), leaves the frame alone; then the dict is
    emptied. Nothing the frame still holds is finalized by that; what it dropped is finalized
    when it drops it, as without the hook.
    Not for module or class bodies (their f_locals is their namespace, not a snapshot); and not
    when the program itself holds the dict (`d = locals()`): emptying it would change what the
    program sees, and refreshing it can finalize what it drops inside the hook: a loss.
    None on 3.13+ (PEP 667: f_locals is a proxy onto the frame, no snapshot)."""
    if sys.version_info >= (3, 13):
        return None
    import ctypes

    # A function object of the hook's own (`pythonapi.X` is shared with the program). No
    # argtypes: their converters are calls that fail at the recursion limit with an
    # ArgumentError, after which 3.11 switched tracing off; py_object(frame) fails there with
    # a plain RecursionError, which the back-ends catch (`recursion_hit`).
    l2f = ctypes.pythonapi["PyFrame_LocalsToFast"]
    l2f.restype = None
    pyo = ctypes.py_object

    def detach(frame, loc):
        if not frame.f_code.co_flags & 1:  # CO_OPTIMIZED: a function's frame
            return
        # The references to an unshared snapshot: the frame's, the caller's name, this
        # parameter, getrefcount's argument.
        if getrefcount(loc) > 4:
            lost(
                "the program holds the locals() dict of %s (Python < 3.13): reading the frame's "
                "locals refreshes it, so a value it drops can be finalized inside the hook, "
                "untraced" % frame.f_code.co_qualname
            )
            return
        l2f(pyo(frame), 0)
        loc.clear()

    detach.l2f = l2f
    detach.pyo = pyo
    return detach


class FrameState:
    """Per-frame state of a targeted frame (keyed by id(frame))."""

    __slots__ = ("code", "vars", "active", "pending", "handled", "exc_lasti", "prev_line")

    def __init__(self, code):
        self.code = code
        self.vars = {}
        self.active = True
        # Exceptions as (id, type name, message), never the object (see _x / x_record).
        self.pending = None  # exception seen in this frame, not (yet) known to be handled
        self.handled = None  # exception caught by a handler of this frame (for bare re-raise)
        self.exc_lasti = None  # 3.11: f_lasti of the last exception event
        self.prev_line = None  # 3.11: last line executed outside except-clause headers



def semaphore_cells(want):
    """For each (file name, file offset) in `want`, the 2-byte cell at that offset of the
    file's writable mapping in this process (a USDT semaphore), or None when none holds it."""
    import ctypes

    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and "w" in parts[1]:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                maps.append((os.path.basename(parts[5].strip()), lo, hi, int(parts[2], 16)))
    cells = []
    for name, off in want:
        for base, lo, hi, moff in maps:
            if base == name and moff <= off < moff + (hi - lo):
                cells.append(ctypes.c_uint16.from_address(lo + off - moff))
                break
        else:
            cells.append(None)
    return cells


class Hook:
    """The writer plus code registry; one per process (re-initialised in a forked child)."""

    def __init__(self, sock_path, calls, config, mode, leave=frozenset()):
        self.sock_path = sock_path
        self.calls = calls
        # FLUX_HOOK_LEAVE: starts the agent decided to name from USDT itself (calls=generators):
        # "lineless" (code whose first instruction has no line).
        self.leave = leave
        self.cfg = config
        self.mode = mode
        self.lock = threading.Lock()
        self.define_lock = threading.Lock()
        self.buf = []
        self.flush_records = 2048
        self.flusher = None  # ident of the thread inside flush()
        self.sent = 0
        self.closed = False
        self.sock = None
        self.codes = {}
        self.file_kinds = {}  # co_filename -> EXCLUDED / TARGET (file matches) / PLAIN
        self.code_ids = itertools.count(1)
        self.states = {}
        self.handler_lines = {}  # filename -> {first line of an except body: except line}
        self.tl = threading.local()
        self.reprer = BoundedRepr(config.repr_limit, config.depth)
        self.pid = os.getpid()
        self.stop_tracing = None  # set by the back-end
        self.check = None  # set by the back-end: detects a tracer switched off
        self.lost_reasons = set()
        self.recursion_hit = False  # a RecursionError hit the hook: records may be missing
        self.facts_sent = False  # the F records of this connection (send_facts)
        # scope "tests": tracing (and the USDT semaphores) on only inside test windows.
        self.window = config.scope in ("tests", "targets")
        # scope "targets": inside windows, only inside extents of targeted code (see
        # extent_open); the semaphores are up only while some thread is inside one.
        self.extents = config.scope == "targets"
        self.xthreads = 0
        # The same count in a list cell the back-ends read without a method or thread-local
        # lookup: while it is 0 no thread is inside an extent, and callbacks return at once.
        self.xcount = [0]
        self.xlock = threading.Lock()
        self.in_window = False
        self.enable_tracing = None  # set by the back-end
        self.pause_tracing = None  # set by the back-end
        self.semaphores = []  # [ctypes.c_uint16 in this process, the kernel's count]
        self.foreign = []  # (probe, ctypes.c_uint16): semaphores of probes not attached
        self.active = False  # the back-end is tracing (scope "tests": inside a window)
        self.own_tracer = None  # the back-end's own sys.settrace function (3.11)
        # flux_hook._fast311 (3.11, where shipped and not FLUX_HOOK_FAST311=off): imported by
        # install_hook before anything is traced, for an import runs Python code USDT sees.
        self.fast311 = None
        self.gated = False  # `extent-gate` (3.11, scope "targets"): set by the back-end
        self.gate_wanted = False
        self.getitem_seen = False  # `getitem-inline`: reported by check_tracing
        # flux_hook._fastmon (3.12+, where shipped and not FLUX_HOOK_FASTMON=off): the same.
        self.fastmon = None
        # Python < 3.13: detaches the f_locals snapshot of a frame whose locals were read.
        self.detach = self.l2f = self.pyo = None
        if config.want_vars or config.checks is not None:
            self.detach = locals_detacher(self.lost)
            if self.detach is not None:
                self.l2f = self.detach.l2f
                self.pyo = self.detach.pyo
            if config.checks is not None:
                config.checks.detach = self.detach
        self.connect()

    # ---- transport -------------------------------------------------------------------
    def connect(self):
        self.pid = os.getpid()
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connect_unix(s, self.sock_path)
        except OSError as e:
            agent_gone("cannot connect to %s: %s" % (self.sock_path, e))
        # The agent checks who connected (its PID namespace, from /proc) and says so with one
        # byte; until then this process waits, so it cannot exit before the check. (A short
        # program that ended first was refused: the witness runs lost 7 of 176 traces so under
        # load.) Closed instead: the agent refused this process.
        try:
            ack = s.recv(1)
        except OSError as e:
            agent_gone("no word from the agent at %s: %s" % (self.sock_path, e))
        if ack != b"\x06":
            agent_gone("the agent at %s refused this process" % (self.sock_path,))
        self.sock = s
        # Formatted by hand: json's Python code would be traced in a forked child (3.11).
        hello = (
            '{"hello":1,"pid":%d,"python":"%d.%d.%d","mode":"%s","calls":"%s","scope":"%s","leave":[%s],"gen_starts":"marked","clock":"monotonic_ns"}\n'
            % ((self.pid,) + tuple(sys.version_info[:3]) + (self.mode, self.calls, self.cfg.scope,
               ",".join('"%s"' % x for x in sorted(self.leave, key=LEAVE.index))))
        )
        self._send(hello.encode("ascii"))

    def _send(self, data):
        try:
            self.sock.sendall(data)
        except OSError as e:
            agent_gone("write failed: %s" % (e,))

    # The buffer is one list that is never replaced: appends need no lock (list.append is
    # atomic), a flush takes the first n records under the lock (copy, then delete the slice),
    # so records appended meanwhile by other threads stay for the next flush.
    def emit(self, line):
        buf = self.buf
        buf.append(line)
        if len(buf) >= self.flush_records:
            self.flush()

    def flush(self):
        if self.foreign:
            self.check_foreign()
        if os.getpid() != self.pid:
            # Forked without Python's fork hooks (fork() from C): the buffer mixes the parent's
            # unsent records with the child's. Drop it, reconnect, and say so.
            self.after_fork_child()
            self.lost(
                "process %d was forked from C (no os.fork hooks): its records before this point "
                "are missing" % self.pid
            )
        me = threading.get_ident()
        if self.flusher == me:
            # Re-entered from this very flush (a signal handler or finalizer running traced
            # code during sendall): keep the records for the next flush.
            return
        with self.lock:
            self.flusher = me
            try:
                buf = self.buf
                n = len(buf)
                if n == 0:
                    return
                recs = buf[:n]
                del buf[:n]
                if self.closed:
                    return
                self.sent += n
                recs.append("")
                self._send("\n".join(recs).encode("ascii"))
            finally:
                self.flusher = None

    def lost(self, reason):
        """Records were (possibly) lost: say so in the stream and on stderr, once per reason."""
        if reason in self.lost_reasons:
            return
        self.lost_reasons.add(reason)
        try:
            sys.stderr.write("flux-hook: records lost: %s\n" % reason)
        except Exception:
            pass
        self.emit('["lost",%d,%d,%s]' % (CLOCK[0](), self.tid(), jstr(clean(reason))))

    # ---- test windows (scope "tests") ------------------------------------------------
    def take_semaphores(self, spec, zero=True):
        """Find the USDT semaphores named by FLUX_HOOK_SEMAPHORES ("<file name>:<file offset
        hex>,..."; the agent attached with them) in this process, keeping the kernel's counts,
        and (`zero`: scopes with windows) zero them until a test window opens. CPython tests a
        probe's semaphore before firing it: at zero the probe costs nothing."""
        want = []
        for item in spec.split(","):
            name, _, off = item.strip().rpartition(":")
            if name:
                want.append((name, int(off, 16)))
        for (name, off), c in zip(want, semaphore_cells(want)):
            if c is None:
                raise RuntimeError("no writable mapping of %s holds file offset %#x" % (name, off))
            self.semaphores.append([c, c.value])
            if zero:
                c.value = 0

    def take_foreign_semaphores(self, spec):
        """FLUX_HOOK_FOREIGN_SEMAPHORES ("<probe>=<file name>:<file offset hex>,..."): the
        semaphores of the interpreter's probes this run does not attach. One up is another
        tracer's probe in this process, and CPython then runs otherwise (3.11 sends every
        instruction through its tracing path while `line`'s is up): checked at every flush and
        at exit (`check_foreign`)."""
        want, probes = [], []
        for item in spec.split(","):
            probe, _, rest = item.strip().partition("=")
            name, _, off = rest.rpartition(":")
            if name:
                want.append((name, int(off, 16)))
                probes.append(probe)
        self.foreign = [(p, c) for p, c in zip(probes, semaphore_cells(want)) if c is not None]

    def check_foreign(self):
        """Report (once a probe) a foreign semaphore found up: the run is not the one flux
        would reproduce, so its trace must not give gold."""
        for probe, c in self.foreign:
            v = c.value
            if v:
                self.lost(
                    "another tracer attached the interpreter's %s probe in this process (its "
                    "semaphore is %d): the program does not run as it does traced by flux alone"
                    % (probe, v)
                )

    def window_open(self):
        """A test protocol starts: record from here (the `wo` record first, so everything
        recorded in the window comes after it)."""
        self.emit('["wo",%d,%d]' % (CLOCK[0](), self.tid()))
        self.in_window = True
        if not self.extents:
            for s in self.semaphores:
                s[0].value = s[1]
        self.enable_tracing()

    def window_close(self):
        """The test protocol ended: stop recording (the `wc` record last)."""
        self.pause_tracing()
        if getattr(self.tl, "xd", 0):
            # A targeted generator suspended inside its extent at the end of the test.
            self.tl.xd = 0
            self.extent_close()
        self.xthreads = 0
        self.xcount[0] = 0
        for s in self.semaphores:
            s[0].value = 0
        self.in_window = False
        self.emit('["wc",%d,%d]' % (CLOCK[0](), self.tid()))

    # ---- target extents (scope "targets") --------------------------------------------
    # The back-ends count, per thread (`tl.xd`), the targeted activations running in it: at
    # 0 -> 1 they call extent_open, at 1 -> 0 extent_close. USDT sees only what runs inside.
    def target_started(self, first=None, ts=None, tid=None):
        """A targeted activation starts or resumes in this thread. `first`: its record, sent
        right after `xo` when this opens the extent; `ts` (that record's) and `tid` spare the
        clock and thread lookups."""
        tl = self.tl
        d = getattr(tl, "xd", 0)
        tl.xd = d + 1
        if not d:
            self.extent_open(first, ts, tid)
        elif first is not None:
            self.emit(first)

    def target_ended(self, last=None):
        """A targeted activation returned, yielded or unwound in this thread (one that started
        before the window, and so was never counted, changes nothing). `last`: its record,
        sent before `xc` when this closes the extent."""
        tl = self.tl
        d = getattr(tl, "xd", 0)
        if d == 1:
            tl.xd = 0
            self.extent_close(last)
            return
        if d > 1:
            tl.xd = d - 1
        if last is not None:
            self.emit(last)

    # Opening, everything is sent before the probes go on, and closing, they go off before
    # anything is sent: the hook's own Python calls then fire no probe (each would cost a trap
    # and an event the agent drops) except the returns of the calls that switched them.
    def extent_open(self, first=None, ts=None, tid=None):
        """This thread enters targeted code (`xo` and `first` first, then the probes go on)."""
        if ts is None:
            ts = CLOCK[0]()
        self.emit('["xo",%d,%d]' % (ts, self.tid() if tid is None else tid))
        if first is not None:
            self.emit(first)
        with self.xlock:
            self.xthreads += 1
            self.xcount[0] = self.xthreads
            if self.xthreads == 1:
                for s in self.semaphores:
                    s[0].value = s[1]

    def extent_close(self, last=None):
        """This thread left targeted code (the probes go off when no thread is inside, then
        `last` and `xc`)."""
        with self.xlock:
            self.xthreads -= 1
            if self.xthreads <= 0:
                self.xthreads = 0
                for s in self.semaphores:
                    s[0].value = 0
            self.xcount[0] = self.xthreads
        if last is not None:
            self.emit(last)
        self.emit('["xc",%d,%d]' % (CLOCK[0](), self.tid()))

    def check_tracing(self):
        """Called at test boundaries and at exit: report (and repair) a tracer that was
        switched off behind the hook's back."""
        if self.getitem_seen:
            self.lost(
                "a targeted __getitem__ under the extent gate: Python 3.11 can run it inline "
                "without the gate (BINARY_SUBSCR_GETITEM), so its activations may be missing"
            )
        if self.check is not None:
            self.check()
        if self.active:
            self.check_program_tracers()

    # ---- the program's own tracers -------------------------------------------------------
    # A trace or profile function the program installs runs Python code that no tracer sees:
    # CPython runs it with tracing off (3.11's settrace, 3.12+'s sys.monitoring callbacks
    # alike), and on 3.11 the program's sys.settrace also replaces the hook's in its thread.
    # Its calls (3.11, 3.13, 3.14), or its lines and values (3.15, whose USDT probes still see
    # its calls), would be missing from a trace that says nothing (17.2): it is a loss. An audit
    # hook sees every sys.settrace / sys.setprofile (the C ones included); it runs untraced (no
    # `__cantrace__`), so the program's own tracer never sees a frame of the hook's.
    def watch_program_tracers(self, settrace_replaces_hook, add_hook=sys.addaudithook):
        """Install the audit hook. settrace_replaces_hook: the back-end traces with
        sys.settrace (3.11), which any program call of it replaces in its thread. add_hook:
        how (3.11's C part passes a filter that lets only the two events below reach it)."""
        tl = self.tl

        def audit(event, args):
            if event != "sys.settrace" and event != "sys.setprofile":
                return
            if not self.active or getattr(tl, "own", False):
                return
            try:
                if event == "sys.settrace" and settrace_replaces_hook:
                    self.lost(
                        "the program called sys.settrace in thread %d: its own tracer replaces "
                        "flux's there, and calls until flux's is back are not traced"
                        % _native_id()
                    )
                else:
                    # Called before the change: the function now installed, or the one a new
                    # thread of threading installs (its bootstrap calls sys.settrace/setprofile).
                    self.check_program_tracers()
            except Exception:
                pass  # an audit hook that raises would fail the program's call

        add_hook(audit)

    def check_program_tracers(self):
        """Report a trace or profile function of the program's that runs Python code, installed
        in this thread or for new threads."""
        for what, f in (
            ("trace", sys.gettrace()),
            ("profile", sys.getprofile()),
            ("trace", threading.gettrace()),
            ("profile", threading.getprofile()),
        ):
            if f is None or f is self.own_tracer or not runs_python(f):
                continue
            self.lost(
                "the program installed a %s function that runs Python code (%s) in thread %d: "
                "what it runs is not traced" % (what, clean(type(f).__name__), _native_id())
            )

    def finish(self):
        """Normal end of the process: stop tracing, flush, say bye."""
        try:
            self.check_tracing()
        except Exception:
            pass
        if self.stop_tracing is not None:
            try:
                self.stop_tracing()
            except Exception:
                pass
        # The kernel decrements the semaphores when the agent detaches: give back its counts.
        for s in self.semaphores:
            s[0].value = s[1]
        if self.closed:
            return
        self.check_foreign()
        self.send_facts()
        self.flush()
        if self.flusher == threading.get_ident():
            return  # os._exit from a signal handler inside our own flush: cannot say bye safely
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self._send(('["bye",%d]\n' % self.sent).encode("ascii"))
            try:
                self.sock.close()
            except OSError:
                pass

    def send_facts(self):
        """The `F` records of the targeted files whose code ran, once per connection (a forked
        child sends its own). Computing them runs Python (ast), after tracing stopped: on 3.11
        USDT still sees those frames, so they are the hook's own work (`hx`)."""
        if self.facts_sent or not self.cfg.facts:
            return
        self.facts_sent = True
        files = [fn for fn, k in list(self.file_kinds.items()) if k == TARGET]
        if not files:
            return
        t0 = CLOCK[0]()
        try:
            recs = facts_records(files)
        except Exception:
            internal_error("static facts")
            recs = []
        self.buf.append('["hx",%d,%d,%d]' % (t0, self.tid(), CLOCK[0]()))
        self.buf.extend(recs)

    # fork handling: the parent flushes before the fork, the child reconnects with a new hello.
    def before_fork(self):
        try:
            self.flush()
        except Exception:
            pass

    def after_fork_child(self):
        self.lock = threading.Lock()
        self.define_lock = threading.Lock()
        self.flusher = None
        del self.buf[:]  # the parent flushed before the fork; the rest is the parent's
        self.sent = 0
        try:
            self.sock.close()
        except Exception:
            pass
        if self.closed:
            return
        self.tl.tid = _native_id()
        # Code definitions must be re-sent on the new connection.
        for info in self.codes.values():
            info[4] = False
        parent = self.pid
        self.connect()
        if self.window and self.in_window:
            # Forked inside a test window (os.fork, multiprocessing's fork start method): the
            # child's stream has no window of its own, so everything it records would lie
            # outside every window (rule `test-windows`) and vanish without a word. Not
            # followed: said, so the trace is incomplete rather than silently without the
            # child's calls (issue 23.3).
            self.lost(
                "process %d was forked by process %d inside a test window: flux does not "
                "follow a child forked inside a test window (scope %s), its calls are missing"
                % (self.pid, parent, self.cfg.scope)
            )
            self.flush()

    # ---- helpers for the back-ends ---------------------------------------------------
    def tid(self):
        tl = self.tl
        try:
            return tl.tid
        except AttributeError:
            t = tl.tid = _native_id()
            return t

    def register(self, code, frame=None):
        """The info list of a code object: [code_id, kind, code, back-end slot, C record sent,
        (except-body first lines, except lines) of its file or None, module or None].

        With `module_functions`, targeted code is narrowed to what they match on
        `<module>.<qualname>`, the module being the `__name__` of `frame`'s globals (the
        frame that runs the code, as SWE-Flux's tracer reads it); registered without a frame,
        code of a targeted file stays targeted (a superset: readers pick)."""
        key = id(code)
        info = self.codes.get(key)
        if info is not None:
            return info
        fk = self.file_kind(code.co_filename)
        module = None
        if fk == TARGET and not self.cfg.qualname_matches(code.co_qualname):
            kind = PLAIN
        elif fk == TARGET and self.cfg.module_functions and frame is not None:
            module = module_name(frame)
            if self.cfg.module_function_matches(module + "." + code.co_qualname):
                kind = TARGET
            else:
                kind, module = PLAIN, None
        else:
            kind = fk
        if kind == TARGET and self.gated and code.co_name == "__getitem__":
            self.getitem_inline()
        # No lock here: this also runs for the hook's own frames while the lock is held (3.11
        # traces the flush called by os.fork). next() on a count and setdefault are atomic.
        return self.codes.setdefault(key, [next(self.code_ids), kind, code, None, False, None, module])

    def file_kind(self, fn):
        """EXCLUDED (the hook's own), TARGET (the file matches) or PLAIN, per file once: USDT
        sees every Python frame the hook runs (fnmatch, posixpath), and a module's code objects
        all come here."""
        fk = self.file_kinds.get(fn)
        if fk is None:
            if fn.startswith(PKG_DIR + os.sep) or fn == os.path.join(HOOK_DIR, "sitecustomize.py"):
                fk = EXCLUDED
            elif self.cfg.file_matches(fn):
                fk = TARGET
            else:
                fk = PLAIN
            self.file_kinds[fn] = fk
        return fk

    def may_target(self, code):
        """`extent-gate` (3.11): whether frames of `code` may be targeted, as `register` would
        say without a frame (a superset with `module_functions`), without registering it."""
        if self.file_kind(code.co_filename) != TARGET:
            return False
        if not self.cfg.qualname_matches(code.co_qualname):
            return False
        if self.gated and code.co_name == "__getitem__":
            self.getitem_inline()
        return True

    def gate_fits(self):
        """`extent-gate`: whether the config's targets can be gated: named functions, none of
        them a `__getitem__` (`getitem-inline`), and no SWE-Flux `module_functions`."""
        cfg = self.cfg
        if not cfg.functions or cfg.module_functions:
            return False
        return not any("__getitem__" in f.split(".") for f in cfg.functions)

    def getitem_inline(self):
        """`getitem-inline`: 3.11 runs a class's `__getitem__` for `x[k]` inline once the call
        site is specialised, without the frame evaluator, so the gate may miss a targeted one's
        frames (a config naming one is never gated; one targeted as a nested name is this).
        Noted here, reported by check_tracing: the gate's judge can run while the hook's own
        flush holds its lock, and reporting emits."""
        self.getitem_seen = True

    def define(self, info):
        """Send the C record of a code object (once per connection), before its first use."""
        code = info[2]
        # The last line and the traits let the agent tell apart code objects that USDT names
        # alike ((file, name, line) only): a generator's entries from a same-named function's.
        last = code.co_firstlineno
        for _s, _e, ln in code.co_lines():
            if ln is not None and ln > last:
                last = ln
        traits = (
            (CODE_GEN if code.co_flags & GEN_FLAGS else 0)
            | (CODE_NO_FIRST_LINE if no_first_line(code) else 0)
            | (CODE_TARGET if info[1] == TARGET else 0)
        )
        fn, name, qn = code.co_filename, code.co_name, code.co_qualname
        try:
            (fn + name + qn).encode("utf-8")
        except UnicodeEncodeError:
            fn, name, qn = clean(fn), clean(name), clean(qn)
        # C-level formatting (jstr is json's C encoder): no Python frames for USDT to see.
        rec = '["C",%d,%s,%s,%s,%d,%d,%d%s]' % (
            info[0],
            jstr(fn),
            jstr(name),
            jstr(qn),
            code.co_firstlineno,
            last,
            traits,
            "" if info[6] is None else "," + jstr(clean(info[6])),
        )
        with self.define_lock:
            if info[4]:
                return
            self.buf.append(rec)
            info[4] = True

    def note_module(self, info, frame):
        """Dialect "swe-flux": the module (`__name__` of the frame's globals) of targeted code,
        taken at its first frame, before its C record is sent."""
        if info[6] is None:
            info[6] = module_name(frame)

    def plain_repr(self, v):
        """SWE-Flux's repr: the full repr() cut to limits.repr characters, `...` appended;
        with the type's __name__ (of an exception: what its `exc=` shows). An object's own
        `__repr__` runs with the probes quiet (see `quietly`)."""
        try:
            s = repr(v) if type(v) in _C_REPR else self.quietly(repr, v)
        except Exception as e:
            try:
                s = "<repr error: %s: %s>" % (type(e).__name__, e)
            except Exception:
                s = "<repr error: %s>" % type(e).__name__
        lim = self.cfg.repr_limit
        if lim >= 0 and len(s) > lim:
            s = s[:lim] + "..."
        return [clean(s), clean(type(v).__name__)]

    def x_tail(self, fs, frame, exc, tb=None):
        """The end of an `x` record: in dialect "swe-flux", the locals changed before the
        exception and the exception object (else nulls); then where it was raised
        (`exc_origin` of `tb`, else of the exception's own traceback; `exc` None: unknown)."""
        origin = "null" if exc is None else exc_origin(exc.__traceback__ if tb is None else tb)
        if not self.cfg.swe:
            return ",null,null,%s" % origin
        changed = self.changed_locals(fs, frame) if self.cfg.want_vars else None
        return ",%s,%s,%s" % (jval(changed), jval(self.plain_repr(exc)), origin)

    def exc_kind(self, exc, frame, at, tb=None):
        """classify_raise, with `thrown` told apart: an exception reported at the instruction a
        generator was suspended at (`at`: 3.11's f_lasti, 3.12+'s RAISE offset) was put there
        by `throw()`/`close()` (a `@contextmanager`'s `__exit__` throwing a `with` body's
        exception), not raised by the frame's own code. One that came out of a generator it
        delegates to (`yield from`, `await`) stays `propagate`; so does one a callee re-raised
        with a bare `raise` (no `raise` statement of this frame runs)."""
        kind = self.classify_raise(exc, frame, tb)
        if kind == "propagate":
            return kind
        co = frame.f_code.co_code
        op = co[at] if 0 <= at < len(co) else -1
        if frame.f_code.co_flags & GEN_FLAGS and op in THROWN_AT:
            return "thrown"
        if kind == "reraise" and op not in RAISE_AT:
            # The traceback's next entry is this very frame (it raised or got this exception
            # before), yet no `raise` of its own runs: a callee re-raised it with a bare `raise`,
            # which adds no traceback entry (flask's handle_user_exception). It came out of the
            # callee.
            t = exc.__traceback__ if tb is None else tb
            if t is not None and t.tb_next is not None and t.tb_next.tb_frame is frame:
                return "propagate"
        return kind

    def vrepr(self, v):
        if self.cfg.swe:
            return self.plain_repr(v)
        t = type(v)
        lim = self.cfg.repr_limit
        if t is int or t is float or t is bool or v is None:
            try:
                s = repr(v)
            except Exception:  # an int too long to print
                s = "<repr failed: %s>" % t.__name__
            if len(s) > lim:
                s = s[: max(lim - 3, 0)] + "..."
            return [s, t.__name__]
        if t is str:
            s = repr(v[: lim + 1])
        else:
            s = None
            if t is list or t is tuple or t is dict:
                s = self.flat_repr(v, t)
            if s is None:
                try:
                    s = self.quietly(self.reprer.repr, v)
                except Exception:
                    s = "<repr failed: %s>" % t.__name__
        if len(s) > lim:
            s = s[: max(lim - 3, 0)] + "..."
        return [clean(s), clean(t.__name__)]

    def quietly(self, f, v):
        """f(v) for rendering work: it runs Python code (reprlib, the object's own __repr__:
        thousands of frames for a SymPy expression, pydantic models in fastapi's locals), which
        the probes would see (17.13): while no other thread can run, their semaphores are
        lowered, so it costs no trap and leaves no event for the agent to drop."""
        sems = self.semaphores
        if not sems or _thread._count() or len(threading._active) != 1 or threading._limbo:
            return f(v)
        saved = [c[0].value for c in sems]
        for c in sems:
            c[0].value = 0
        try:
            return f(v)
        finally:
            for c, old in zip(sems, saved):
                c[0].value = old

    def flat_repr(self, v, t):
        """The repr of a list, tuple or dict of scalars (int, float, bool, None, str of at most
        the limit) that BoundedRepr would print, by the C repr (no Python frame per element),
        or None when it would print something else (nested, too many items, a subclass)."""
        n = len(v)
        if n > self.reprer.maxlist:
            return None
        items = v.items() if t is dict else ((None, x) for x in v)
        lim = self.cfg.repr_limit
        for k, x in items:
            for y in (k, x) if t is dict else (x,):
                ty = type(y)
                if ty is str:
                    if len(y) > lim:
                        return None
                elif not (ty is int or ty is float or ty is bool or y is None):
                    return None
        try:
            return repr(v)
        except Exception:  # an int too long to print: BoundedRepr says so per element
            return None

    def exc_message(self, e):
        try:
            m = str(e)
        except Exception:
            m = "<str failed: %s>" % type(e).__name__
        lim = self.cfg.repr_limit
        if len(m) > lim:
            m = m[: max(lim - 3, 0)] + "..."
        return clean(m)

    def changed_locals(self, fs, frame):
        """{name: [repr, type]} of locals whose repr/type changed since the frame's last event."""
        try:
            loc = frame.f_locals
            items = list(loc.items())
        except Exception:
            return None
        l2f = self.l2f
        if l2f is not None:
            # locals_detacher's detach, inlined (every event of a targeted frame): the frame's
            # reference, `loc`, getrefcount's argument.
            if frame.f_code.co_flags & 1:
                if getrefcount(loc) == 3:
                    l2f(self.pyo(frame), 0)
                    loc.clear()
                else:
                    self.detach(frame, loc)  # shared: a loss
        if self.cfg.swe:
            return self._changed_swe(fs, items)
        old = fs.vars
        out = None
        n = 0
        lim = self.cfg.locals_limit
        for name, v in items:
            if not isinstance(name, str) or (name[:2] == "__" and name[-2:] == "__"):
                continue
            if n >= lim:
                break
            n += 1
            t = type(v)
            prev = old.get(name)
            if prev is not None and prev[2] == id(v) and prev[3] is t and t in _STABLE_REPR:
                continue  # the very same immutable object: same repr, no need to compute it
            rv = self.vrepr(v)
            if prev is None or prev[0] != rv[0] or prev[1] != rv[1]:
                if out is None:
                    out = {}
                out[name] = rv
            # Only the id is kept, never the object: an extra reference would show in
            # sys.getrefcount and delay finalizers.
            old[name] = (rv[0], rv[1], id(v), t)
        return out

    def _changed_swe(self, fs, items):
        """changed_locals for dialect "swe-flux": every name (dunders too), plain reprs, and
        names gone since the last event as None."""
        old = fs.vars
        out = None
        n = 0
        lim = self.cfg.locals_limit
        seen = set()
        whole = True
        for name, v in items:
            if not isinstance(name, str):
                continue
            if n >= lim:
                whole = False
                break
            n += 1
            seen.add(name)
            t = type(v)
            prev = old.get(name)
            if prev is not None and prev[2] == id(v) and prev[3] is t and t in _STABLE_REPR:
                continue
            rv = self.plain_repr(v)
            if prev is None or prev[0] != rv[0] or prev[1] != rv[1]:
                if out is None:
                    out = {}
                out[name] = rv
            old[name] = (rv[0], rv[1], id(v), t)
        if whole and len(seen) != len(old):
            for name in [k for k in old if k not in seen]:
                del old[name]
                if out is None:
                    out = {}
                out[name] = None
        return out

    def handler_info(self, filename):
        """(first line of an except-clause body -> except line, set of except lines, set of
        the lines of bare `raise` statements)."""
        m = self.handler_lines.get(filename)
        if m is not None:
            return m
        m = {}
        bare = set()
        try:
            import linecache

            src = "".join(linecache.getlines(filename))
            if src:
                tree = ast.parse(src, filename)
                for node in ast.walk(tree):
                    if isinstance(node, ast.ExceptHandler) and node.body:
                        m[node.body[0].lineno] = node.lineno
                    elif isinstance(node, ast.Raise) and node.exc is None:
                        bare.add(node.lineno)
        except Exception:
            pass
        m = (m, frozenset(m.values()), frozenset(bare))
        self.handler_lines[filename] = m
        return m

    def classify_raise(self, exc, frame, tb=None):
        """'raise' when the exception originates in frame (or a C function it called),
        'propagate' when it comes from a Python callee, 'reraise' when frame raises an exception
        object that had been raised before (bare `raise`, `raise e`, a stored exception).
        tb: the traceback as passed to a 3.11 trace function (exc.__traceback__ is not set yet
        there); its head is this frame's entry, tb_next where the exception was before."""
        if tb is None:
            tb = exc.__traceback__
        if tb is None or tb.tb_next is None:
            # `import-frames`: an ImportError at an `import` came out of importlib's Python
            # frames (`_find_and_load`), which CPython removes from its traceback; so did a
            # missing module's at a call (`__import__("x")`): "No module named" is importlib's
            # (C's own lookup says "import of x halted").
            if isinstance(exc, ImportError) and (
                _at_import(frame) or _imported_by_call(exc, frame)
            ):
                return "propagate"
            return "raise"
        nxt = tb.tb_next.tb_frame
        if nxt is frame:
            return "reraise"
        back = nxt.f_back
        if back is frame:
            return "propagate"
        if back is None and nxt.f_code.co_flags & GEN_FLAGS:
            # A generator/coroutine frame that just finished has no f_back on 3.11 and 3.14+
            # (3.12/3.13 keep it): it was resumed by this frame.
            return "propagate"
        # `import-frames`: the entry after this frame's is code this frame called through
        # frames the traceback no longer shows (an imported module's code raising: importlib's
        # frames between them are removed; a library rewriting tracebacks, as jinja2 does).
        for _ in range(64):
            if back is None:
                break
            back = back.f_back
            if back is frame:
                return "propagate"
        return "reraise"


def _imported_by_call(exc, frame):
    """Whether `exc` is importlib's missing-module error out of a call `frame` is making
    (`__import__(name)`, whose importlib frames CPython removed from the traceback)."""
    try:
        if not (isinstance(exc, ModuleNotFoundError) and str(exc).startswith("No module named")):
            return False
        co = frame.f_code.co_code
        i = frame.f_lasti
        return 0 <= i < len(co) and co[i] in CALL_AT
    except Exception:
        return False


def _at_import(frame):
    """Whether `frame` is executing an `import` statement's instruction."""
    try:
        co = frame.f_code.co_code
        i = frame.f_lasti
        return 0 <= i < len(co) and co[i] == IMPORT_NAME
    except Exception:
        return False


def seed_randomness(spec):
    """The determinism policy (17.4): a gold answer is a function of the program, so two runs
    of it must take the same path. `spec` is FLUX_HOOK_SEED: an integer (default 0) that seeds
    the `random` module's generator and becomes the default seed of every `random.Random` the
    program creates without one (SymPy's assumption system shuffles with such a generator of
    its own, `sympy.core.random._assumptions_rng`, seeded from os.urandom at import), or `off`.

    Done by changing the defaults of `Random.__init__` and `Random.seed` (`x=None`, `a=None`
    become the seed), not by wrapping them: no frame of the hook's runs in the program's calls.
    An explicit `Random(None)` / `seed(None)` still reads the OS; `SystemRandom`, `os.urandom`,
    `secrets`, numpy's generators, time and addresses (`id()`-ordered sets) are not covered.
    Hash randomisation cannot be changed from inside a running interpreter: the agent sets
    PYTHONHASHSEED=0 in the environment it starts the program with."""
    if spec == "off":
        return
    seed = int(spec)
    import random

    init = random.Random.__init__
    if init.__defaults__ == (None,):
        init.__defaults__ = (seed,)
    sd = random.Random.seed
    if sd.__defaults__ == (None, 2):
        sd.__defaults__ = (seed, 2)
    random.seed(seed)


HOOK = None


def install_hook():
    """Install the hook in this process, from the FLUX_HOOK_* environment. Idempotent."""
    global HOOK
    if HOOK is not None:
        return HOOK
    fast311 = fastmon = None
    sock_path = os.environ.get("FLUX_HOOK_SOCKET")
    if not sock_path:
        return None
    calls = os.environ.get("FLUX_HOOK_CALLS", "all").strip() or "all"
    if calls not in CALLS:
        sys.stderr.write("flux-hook: bad FLUX_HOOK_CALLS=%r (%s)\n" % (calls, "|".join(CALLS)))
        _real_exit(EXIT_CODE)
    leave = frozenset(x for x in os.environ.get("FLUX_HOOK_LEAVE", "").split(",") if x)
    if not leave <= set(LEAVE):
        sys.stderr.write("flux-hook: bad FLUX_HOOK_LEAVE=%r (%s)\n" % (",".join(sorted(leave)), ",".join(LEAVE)))
        _real_exit(EXIT_CODE)
    try:
        cfg = Config(os.environ.get("FLUX_HOOK_CONFIG", ""))
    except Exception as e:
        sys.stderr.write("flux-hook: bad FLUX_HOOK_CONFIG: %s\n" % e)
        _real_exit(EXIT_CODE)
    try:
        seed_randomness(os.environ.get("FLUX_HOOK_SEED", "0").strip() or "0")
    except ValueError:
        sys.stderr.write("flux-hook: bad FLUX_HOOK_SEED=%r (an integer, or off)\n" % os.environ["FLUX_HOOK_SEED"])
        _real_exit(EXIT_CODE)
    if sys.version_info >= (3, 12):
        from . import _sysmon as backend

        mode = "monitoring"
        # Its C part (`c-monitoring`), imported here for the same reason as _fast311's below.
        if os.environ.get("FLUX_HOOK_FASTMON", "on") != "off":
            try:
                from . import _fastmon as fastmon
            except ImportError:
                fastmon = None
    elif sys.version_info >= (3, 11):
        from . import _settrace as backend

        mode = "settrace"
        # The C part, while nothing is traced yet: the import and the environment's lookup run
        # Python code (importlib, os.environ) that USDT would see as the program's.
        if os.environ.get("FLUX_HOOK_FAST311", "on") != "off":
            try:
                from . import _fast311 as fast311
            except ImportError:
                fast311 = None
    else:
        # An older interpreter started by the program (its environment is inherited): it runs
        # untraced, and its stream says so instead of the program being stopped.
        backend = None
        mode = "unsupported"
    hook = Hook(sock_path, calls, cfg, mode, leave)
    hook.fast311 = fast311
    # `extent-gate` (3.11, scope "targets"): FLUX_HOOK_GATE=off keeps the global trace
    # function, for measuring one against the other.
    hook.gate_wanted = os.environ.get("FLUX_HOOK_GATE", "on") != "off"
    hook.fastmon = fastmon
    if backend is None:
        HOOK = hook
        atexit.register(hook.finish)
        hook.lost("Python %d.%d is not supported (3.11+): this process is not traced" % sys.version_info[:2])
        hook.flush()
        return hook
    HOOK = hook
    atexit.register(hook.finish)
    os.register_at_fork(before=hook.before_fork, after_in_child=hook.after_fork_child)

    def _exit_with_flush(status, _real=_real_exit):
        # os._exit skips atexit (multiprocessing children, pytest-xdist workers): flush first.
        try:
            hook.finish()
        except BaseException:
            pass
        _real(status)

    os._exit = _exit_with_flush
    spec = os.environ.get("FLUX_HOOK_SEMAPHORES", "")
    if spec and hook.window:
        try:
            hook.take_semaphores(spec)
        except Exception as e:
            sys.stderr.write("flux-hook: FLUX_HOOK_SEMAPHORES=%r: %s\n" % (spec, e))
            _real_exit(EXIT_CODE)
    elif spec:
        # Scope "run": only to quiet the probes while the hook renders values (vrepr); without
        # them (no /proc) rendering is merely visible to the probes, as before.
        try:
            hook.take_semaphores(spec, zero=False)
        except Exception:
            hook.semaphores = []
    foreign = os.environ.get("FLUX_HOOK_FOREIGN_SEMAPHORES", "")
    if foreign:
        try:
            hook.take_foreign_semaphores(foreign)
        except Exception:
            hook.foreign = []
    backend.start(hook)
    return hook
