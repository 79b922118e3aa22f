"""Back-end for Python >= 3.12: sys.monitoring (PEP 669).

Global events: PY_START (always: it is how targeted code objects are found; untargeted code gets
DISABLE when no calls are wanted), PY_RESUME / PY_THROW when calls are wanted, PY_RETURN /
PY_YIELD when every return is wanted (calls=all), PY_UNWIND, RAISE and RERAISE.
Local events on targeted code objects only: LINE, JUMP (settrace's line events at backward
jumps within a line), PY_RETURN, PY_YIELD, PY_RESUME.
"""
import gc
import sys
from opcode import opmap
import types

from ._core import (
    CLOCK,
    EXCLUDED,
    PLAIN,
    TARGET,
    FrameState,
    exc_typename,
    internal_error,
    jval,
    no_first_line,
)


def _pick_tool(M):
    # 4 and 3 have no assigned role; PROFILER_ID (2) is what cProfile takes on 3.12+, and a
    # program under test that profiles itself must keep working.
    for tool in (4, 3, M.PROFILER_ID, M.COVERAGE_ID, M.DEBUGGER_ID, 5):
        if M.get_tool(tool) is None:
            M.use_tool_id(tool, "flux-hook")
            return tool
    raise RuntimeError("no free sys.monitoring tool id")


# What changes a tool's events, callbacks or id (`clear_tool_id`: 3.14+). The hook calls the
# originals; the program, for flux's tool, goes through `guard`'s wrappers.
_CHANGERS = ("set_events", "set_local_events", "register_callback", "free_tool_id",
             "use_tool_id", "clear_tool_id")


def guard(hook, tool, M, owned):
    """Issue 23.4: a program that changes flux's tool (its events, local events, callbacks or
    id) loses events, and may put everything back before the next check: switched off and on,
    freed and taken again under flux's name, a callback replaced and restored. Each function of
    sys.monitoring that can change a tool is wrapped: called for flux's tool (`tool`, while the
    hook holds it: `owned[0]`) by anyone but the hook (which calls `M`'s originals), the change
    is a loss (`lost`), then the call goes on unchanged. Other tool ids (coverage's, a
    profiler's) are the program's own business."""
    mon = sys.monitoring

    def mine(a):
        return owned[0] and a and type(a[0]) is int and a[0] == tool

    def report(what):
        try:
            hook.lost(
                "the program called sys.monitoring.%s on flux's tool %d: events of what ran "
                "after it may be missing" % (what, tool)
            )
        except Exception:
            pass

    def set_events(*a):
        before = M.get_events(tool) if mine(a) else None
        r = M.set_events(*a)
        if before is not None and M.get_events(tool) != before:
            report("set_events(%d, %d) (events were %d)" % (tool, a[1], before))
        return r

    def set_local_events(*a):
        before = None
        if mine(a) and len(a) == 3:
            try:
                before = M.get_local_events(tool, a[1])
            except Exception:
                pass
        r = M.set_local_events(*a)
        if before is not None and M.get_local_events(tool, a[1]) != before:
            report("set_local_events for %s (local events were %d)" % (getattr(a[1], "co_qualname", "?"), before))
        return r

    def register_callback(*a):
        r = M.register_callback(*a)
        if mine(a) and len(a) == 3 and r is not a[2]:
            report("register_callback(%d, %d, ...), replacing flux's callback" % (tool, a[1]))
        return r

    def free_tool_id(*a):
        r = M.free_tool_id(*a)
        if mine(a):
            report("free_tool_id(%d)" % tool)
        return r

    def clear_tool_id(*a):
        r = M.clear_tool_id(*a)
        if mine(a):
            report("clear_tool_id(%d)" % tool)
        return r

    def use_tool_id(*a):
        r = M.use_tool_id(*a)
        if mine(a):
            report("use_tool_id(%d, ...), taking it again after it was freed" % tool)
        return r

    wrappers = {
        "set_events": set_events,
        "set_local_events": set_local_events,
        "register_callback": register_callback,
        "free_tool_id": free_tool_id,
        "clear_tool_id": clear_tool_id,
        "use_tool_id": use_tool_id,
    }
    for name in _CHANGERS:
        if hasattr(mon, name):
            w = wrappers[name]
            w.__name__ = w.__qualname__ = name
            w.__doc__ = getattr(mon, name).__doc__
            setattr(mon, name, w)


def start(hook):
    # The hook's own calls go to the originals (a copy of the module's namespace): the
    # program's, to `guard`'s wrappers.
    mon = sys.monitoring
    M = types.SimpleNamespace(**{k: getattr(mon, k) for k in dir(mon) if not k.startswith("__")})
    E = M.events
    tool = _pick_tool(M)
    cfg = hook.cfg
    want_c = hook.calls in ("all", "entries")
    all_r = hook.calls == "all"
    NEW = ',"new"'  # the `c` record's `started` field: a fresh start of generator code
    # calls=generators (3.15 with USDT): USDT's entry probe also fires when a generator or
    # coroutine object is *created*, indistinguishably from its first resumption, so the hook
    # reports the activation starts of exactly those code objects and nothing else ...
    gen_only = hook.calls == "generators"
    GENMASK = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
    RETURN_GENERATOR = opmap["RETURN_GENERATOR"]
    # `gc-guard`: the cyclic GC runs when an allocation crosses its threshold, and the
    # callbacks allocate (every record). A collection started inside one runs the program's
    # finalizers there (a suspended generator's close, `__del__`), where no event is
    # reported: its calls would be missing from the hook's records (3.15: USDT's return of
    # them has no start). So the callbacks hold automatic collection off while they run
    # (unless the program turned it off itself); the program's next allocation collects.
    gc_on, gc_off, gc_back = gc.isenabled, gc.disable, gc.enable
    # ... and of code objects whose first instruction has no line: USDT says line 0 for them,
    # which names no code object (a closure-using method and a generator of the same name).
    # Unless the agent leaves them to USDT (FLUX_HOOK_LEAVE=lineless; it decides: scope
    # "targets"): then such code is only *defined* and the agent names its line-0 entries (by
    # the line of their USDT return when several share a name), for in a SymPy suite every call
    # of a closure (its cache wrapper) would cost a callback outside the extents: a quarter of
    # the run. A name shared with a generator without a first line is then a problem the agent
    # reports, never a guess.
    lineless = {}  # id(code) -> no_first_line(code); codes stay alive in hook.codes
    report_lineless = "lineless" not in hook.leave
    # Generator expressions are reported as every generator is (issue 28): USDT fires no entry
    # when throw()/close() resumes one (an abandoned genexpr closed while PY_THROW is on), and
    # cannot tell its start from its resumptions.

    def gen_start(code):
        if code.co_flags & GENMASK:
            return True
        if not report_lineless:
            return False
        r = lineless.get(id(code))
        if r is None:
            r = lineless[id(code)] = no_first_line(code)
        return r

    CodeType = type(start.__code__)

    def define_gens(roots):
        """calls=generators: send the C records of the generator code objects among `roots`
        and nested in them (their co_consts, recursively). USDT's entry at a generator's
        creation names such a code; one that is created and never started is never seen by the
        hook, and the agent must still know it is a generator's to leave the entry out."""
        todo = list(roots)
        while todo:
            c = todo.pop()
            if c.co_flags & GENMASK:
                info = codes.get(id(c)) or register(c)
                if info[1] != EXCLUDED and not info[4]:
                    define(info)
            todo += [x for x in c.co_consts if type(x) is CodeType]  # inlined: no frame

    def code_roots(objs):
        """Code objects of the functions among objs, and of those in classes among them."""
        out = []
        for v in objs:
            f = getattr(v, "__func__", v)  # classmethod / staticmethod / bound method
            c = getattr(f, "__code__", None)
            if type(c) is CodeType:
                out.append(c)
            elif isinstance(v, type):
                try:
                    members = list(vars(v).values())
                except TypeError:
                    continue
                for m in members:
                    m = getattr(m, "__func__", m)
                    c = getattr(m, "__code__", None)
                    if type(c) is CodeType:
                        out.append(c)
        return out

    # scope "targets": program records only inside extents of targeted code (tl.xd > 0).
    extents = hook.extents
    xn = hook.xcount  # [threads inside an extent]
    target_ids = set()  # id() of the targeted code objects set up so far
    x_enter = hook.target_started
    x_leave = hook.target_ended
    want_line = cfg.want_line
    want_vars = cfg.want_vars
    want_ret = cfg.want_return
    want_exc = cfg.want_exc
    codes = hook.codes
    register = hook.register
    define = hook.define
    emit = hook.emit
    buf = hook.buf
    app = buf.append
    FN = hook.flush_records
    flush = hook.flush
    tl = hook.tl
    states = hook.states
    tidf = hook.tid
    vrepr = hook.vrepr
    changed_locals = hook.changed_locals
    exc_message = hook.exc_message
    swe = cfg.swe
    getframe = sys._getframe
    now = CLOCK[0]  # `frozen-clock`
    DISABLE = M.DISABLE
    set_local_events = M.set_local_events

    local_ev = E.PY_RETURN | E.PY_YIELD
    checks = cfg.checks  # [tracing] predicates (flux_hook.checks), evaluated at line events
    if want_line or want_vars or want_exc or checks is not None:
        local_ev |= E.LINE | E.JUMP
    if not want_c:
        local_ev |= E.PY_RESUME
    instrumented = []

    def setup_target(info):
        info[3] = True
        target_ids.add(id(info[2]))
        set_local_events(tool, info[2], local_ev)
        instrumented.append(info[2])

    def emit_c(info, f, line, new=""):
        """new: `,"new"` for a fresh start of generator code (the merge's `fresh-frames`: a
        generator abandoned while suspended is freed without any event, and the next one may
        get its frame key)."""
        if not info[4]:
            define(info)
        emit('["c",%d,%d,%d,%d,%d%s]' % (now(), tidf(), info[0], id(f), line, new))

    # Scope "targets": inside an extent every Python call the hook makes fires the probes (a
    # trap and an event the agent drops, ~1.5 us), so the records of targeted starts and ends
    # are made here inline, and the extent is opened after and closed before the hook's other
    # work (`Hook.extent_open` / `extent_close`).
    def x_start(info, f, line, new=""):
        """A targeted activation starts or resumes: its `c` record, in its thread's extent."""
        if not info[4]:
            define(info)
        try:
            tid = tl.tid
        except AttributeError:
            tid = tidf()
        t = now()
        rec = '["c",%d,%d,%d,%d,%d%s]' % (t, tid, info[0], id(f), line, new)
        d = getattr(tl, "xd", 0)
        if d:
            tl.xd = d + 1
            app(rec)
            if len(buf) >= FN:
                flush()
        else:
            x_enter(rec, t, tid)

    def x_end(rec):
        """A targeted activation returned, yielded or unwound: its record, then (leaving the
        outermost) the extent closes."""
        d = getattr(tl, "xd", 0)
        if d > 1:
            tl.xd = d - 1
            app(rec)
            if len(buf) >= FN:
                flush()
        else:
            x_leave(rec)

    def on_start(code, off):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            if extents and not xn[0] and code.co_flags & GENMASK:
                # Outside every extent (scope "targets"): a known untargeted generator's start
                # records nothing.
                info = codes.get(id(code))
                if info is not None and info[1] == PLAIN:
                    return None
            try:
                info = codes.get(id(code))
                if info is None:
                    info = register(code, getframe(1))
                    if gen_only:
                        define_gens((code,))
                k = info[1]
                if k == PLAIN:
                    if not want_c:
                        # This runs at every generator start (3.15 + USDT), and each hook frame
                        # costs two USDT events: no helper calls.
                        if not gen_only:
                            return DISABLE
                        if not code.co_flags & GENMASK:
                            r = lineless.get(id(code))
                            if r is None:
                                r = lineless[id(code)] = no_first_line(code)
                            if not r:
                                # Defined once (its first start; DISABLE after): USDT names
                                # code only by (file, name, line), and the agent names its
                                # entries by qualified name from the definition (`Node.positive`,
                                # not `positive`; issue 28).
                                if not info[4]:
                                    define(info)
                                return DISABLE
                            if not report_lineless:
                                if not info[4]:
                                    define(info)  # for the agent to name its line-0 entries
                                return DISABLE
                    if extents and not getattr(tl, "xd", 0):
                        return None
                    if not info[4]:
                        define(info)
                    try:
                        tid = tl.tid
                    except AttributeError:
                        tid = tidf()
                    app('["c",%d,%d,%d,%d,%d%s]' % (now(), tid, info[0], id(getframe(1)), code.co_firstlineno, NEW if code.co_flags & GENMASK else ""))
                    if len(buf) >= FN:
                        flush()
                    return None
                if k == EXCLUDED:
                    return DISABLE
                if info[3] is None:
                    setup_target(info)
                f = getframe(1)
                if swe and info[6] is None:
                    hook.note_module(info, f)
                states[id(f)] = FrameState(code)
                new = NEW if code.co_flags & GENMASK else ""
                if extents:
                    x_start(info, f, code.co_firstlineno, new)
                elif want_c or (gen_only and gen_start(code)):
                    emit_c(info, f, code.co_firstlineno, new)
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("PY_START")
        finally:
            if g:
                gc_back()

    def _resume(code, depth, allow_disable, new=""):
        info = codes.get(id(code)) or register(code, getframe(depth))
        k = info[1]
        if k == PLAIN:
            if not want_c and not (gen_only and code.co_flags & GENMASK):
                return DISABLE if allow_disable else None
            if extents and not getattr(tl, "xd", 0):
                return None
            f = getframe(depth)
            emit_c(info, f, f.f_lineno, new)
            return None
        if k == EXCLUDED:
            return DISABLE if allow_disable else None
        if info[3] is None:
            setup_target(info)
        f = getframe(depth)
        if swe and info[6] is None:
            hook.note_module(info, f)
        fs = states.get(id(f))
        if fs is None or fs.code is not code:
            fs = states[id(f)] = FrameState(code)
        fs.active = True
        if extents:
            x_start(info, f, f.f_lineno, new)
        elif want_c or (gen_only and code.co_flags & GENMASK):
            emit_c(info, f, f.f_lineno, new)
        return None

    def on_resume(code, off):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            if extents and not xn[0] and id(code) not in target_ids:
                return None  # outside every extent, only a targeted generator's resumption counts
            try:
                # Fast path (3.15 with USDT: every resumption of a generator anywhere comes here):
                # one Python frame, for USDT fires an entry and a return for each frame the hook
                # runs, and the agent must then drop them.
                info = codes.get(id(code))
                if info is not None and info[1] == PLAIN and info[4] and not want_c:
                    if not (gen_only and code.co_flags & GENMASK):
                        return DISABLE
                    if extents and not getattr(tl, "xd", 0):
                        return None
                    f = getframe(1)
                    try:
                        tid = tl.tid
                    except AttributeError:
                        tid = tidf()
                    app('["c",%d,%d,%d,%d,%d]' % (now(), tid, info[0], id(f), f.f_lineno))
                    if len(buf) >= FN:
                        flush()
                    return None
                return _resume(code, 2, True)
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("PY_RESUME")
        finally:
            if g:
                gc_back()

    def on_throw(code, off, exc):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            if extents and not xn[0] and id(code) not in target_ids:
                return None
            try:
                # throw()/close() into an unstarted generator fires PY_THROW (no PY_START) just
                # after its RETURN_GENERATOR: a fresh start, marked as PY_START's are (the merge's
                # `unseen-starts` takes an unmarked one for a resumption).
                co = code.co_code
                new = NEW if off >= 2 and co[off - 2] == RETURN_GENERATOR else ""
                _resume(code, 2, False, new)
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("PY_THROW")
        finally:
            if g:
                gc_back()

    def _end(code, value, how, depth, allow_disable):
        info = codes.get(id(code)) or register(code)
        k = info[1]
        if k == PLAIN:
            if not all_r:
                return DISABLE if allow_disable else None
            if extents and not getattr(tl, "xd", 0):
                return None
            f = getframe(depth)
            if not info[4]:
                define(info)
            try:
                tid = tl.tid
            except AttributeError:
                tid = tidf()
            app('["r",%d,%d,%d,%d,%d,"%s",null,null]' % (now(), tid, info[0], id(f), f.f_lineno, how))
            if len(buf) >= FN:
                flush()
            return None
        if k == EXCLUDED:
            return DISABLE if allow_disable else None
        f = getframe(depth)
        fs = states.get(id(f))
        if fs is None or fs.code is not code:
            fs = FrameState(code)
        payload = None
        if how == "unwind":
            payload = [exc_typename(value), exc_message(value)]
        elif want_ret:
            payload = vrepr(value)
        changed = changed_locals(fs, f) if want_vars else None
        if not info[4]:
            define(info)
        try:
            tid = tl.tid
        except AttributeError:
            tid = tidf()
        rec = '["r",%d,%d,%d,%d,%d,"%s",%s,%s]' % (
            now(),
            tid,
            info[0],
            id(f),
            f.f_lineno,
            how,
            "null" if payload is None else jval(payload),
            "null" if changed is None else jval(changed),
        )
        if how == "yield":
            fs.active = False
            fs.pending = None
        else:
            states.pop(id(f), None)
        if extents:
            x_end(rec)
        else:
            emit(rec)
        return None

    def on_return(code, off, rv):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            try:
                info = codes.get(id(code))
                if info is not None and info[1] == PLAIN and all_r and info[4]:
                    # Hot path: an untargeted return with calls=all.
                    if extents and not getattr(tl, "xd", 0):
                        return None
                    try:
                        tid = tl.tid
                    except AttributeError:
                        tid = tidf()
                    f = getframe(1)
                    app('["r",%d,%d,%d,%d,%d,"return",null,null]' % (now(), tid, info[0], id(f), f.f_lineno))
                    if len(buf) >= FN:
                        flush()
                    return None
                return _end(code, rv, "return", 2, True)
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("PY_RETURN")
        finally:
            if g:
                gc_back()

    def on_yield(code, off, rv):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            try:
                return _end(code, rv, "yield", 2, True)
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("PY_YIELD")
        finally:
            if g:
                gc_back()

    def on_unwind(code, off, exc):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            if extents and not xn[0]:
                return None  # no targeted frame runs: nothing to close, nothing recorded
            try:
                if isinstance(exc, RecursionError):
                    # At the recursion limit the hook's own callback frames may not fit: a callback
                    # that could not start leaves no record. Reported by check() (no calls here).
                    hook.recursion_hit = True
                info = codes.get(id(code)) or register(code)
                k = info[1]
                if k == TARGET:
                    f = getframe(1)
                    fs = states.get(id(f))
                    if (
                        want_exc
                        and fs is not None
                        and fs.code is code
                        and (fs.pending is None or fs.pending[0] != id(exc))
                    ):
                        # Left by an exception this frame never reported (cannot happen with
                        # RAISE/RERAISE on, kept for safety): report it as a re-raise.
                        _x(info, f, fs, exc, "reraise")
                    _end(code, exc, "unwind", 2, False)
                elif k == PLAIN and all_r:
                    _end(code, exc, "unwind", 2, False)
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("PY_UNWIND")
        finally:
            if g:
                gc_back()

    def _x(info, f, fs, exc, kind):
        # The frame state keeps (id, type, message) of the exception, never the object: holding
        # it would keep its traceback's frames and locals alive (finalizers would run late).
        p = (id(exc), exc_typename(exc), exc_message(exc))
        if not info[4]:
            define(info)
        emit(
            '["x",%d,%d,%d,%d,%d,%s,%s,"%s"%s]'
            % (
                now(),
                tidf(),
                info[0],
                id(f),
                f.f_lineno,
                jval(p[1]),
                jval(p[2]),
                kind,
                hook.x_tail(fs, f, exc),
            )
        )
        fs.pending = p
        fs.handled = None

    def _state(code, f):
        fs = states.get(id(f))
        if fs is None or fs.code is not code:
            fs = states[id(f)] = FrameState(code)
        return fs

    def on_raise(code, off, exc):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            try:
                info = codes.get(id(code)) or register(code)
                if info[1] != TARGET:
                    return
                if type(exc) is StopIteration and exc.__traceback__ is None:
                    # A generator or coroutine returned (a value) into this frame's `for`, `yield
                    # from` or `await`: CPython reports the StopIteration it never raised in a frame
                    # (no traceback). Not an exception, as on 3.11 (and settrace's view).
                    return
                f = getframe(1)
                fs = _state(code, f)
                _x(info, f, fs, exc, hook.exc_kind(exc, f, off))
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("RAISE")
        finally:
            if g:
                gc_back()

    def on_reraise(code, off, exc):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            try:
                info = codes.get(id(code)) or register(code)
                if info[1] != TARGET:
                    return
                f = getframe(1)
                fs = _state(code, f)
                if fs.pending is not None and fs.pending[0] == id(exc):
                    # Re-raised by the cleanup of a finally/with/unmatched except: no new event.
                    return
                # A handled exception raised again (bare `raise` in its handler).
                _x(info, f, fs, exc, "reraise")
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("RERAISE")
        finally:
            if g:
                gc_back()

    def on_line(code, line):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            try:
                info = codes.get(id(code)) or register(code)
                if info[1] != TARGET:
                    return DISABLE
                return _line(info, code, line, getframe(1))
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("LINE")
        finally:
            if g:
                gc_back()

    # settrace's line events, which 3.11's back-end records and which a line-count answer
    # means, are LINE's plus one at every backward jump to an instruction of the same line (a
    # loop on one line, 3.12+'s inlined comprehensions): LINE alone counts such a line once.
    jump_lines = {}  # id(code) -> {instruction offset: line}

    def on_jump(code, src, dst):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            try:
                if dst >= src:
                    return DISABLE
                m = jump_lines.get(id(code))
                if m is None:
                    m = jump_lines[id(code)] = {}
                    for start, end, ln in code.co_lines():
                        for o in range(start, end, 2):
                            m[o] = ln
                line = m.get(dst)
                if line is None or m.get(src) != line:
                    return DISABLE  # another line: LINE fires for it
                info = codes.get(id(code)) or register(code)
                if info[1] != TARGET:
                    return DISABLE
                return _line(info, code, line, getframe(1))
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("JUMP")
        finally:
            if g:
                gc_back()

    def _line(info, code, line, f):
        """The line record (and handler entry) of a line event of targeted frame f."""
        fs = _state(code, f)
        p = fs.pending
        if p is not None and want_exc:
            hi = info[5]
            if hi is None:
                hi = info[5] = hook.handler_info(code.co_filename)
            hline = hi[0].get(line)
            if hline is not None:
                if not info[4]:
                    define(info)
                emit(
                    '["h",%d,%d,%d,%d,%d,%s,%s]'
                    % (
                        now(),
                        tidf(),
                        info[0],
                        id(f),
                        hline,
                        jval(p[1]),
                        jval(p[2]),
                    )
                )
                fs.handled = p
                fs.pending = None
        if want_line:
            changed = changed_locals(fs, f) if want_vars else None
            if not info[4]:
                define(info)
            emit(
                '["l",%d,%d,%d,%d,%d,%s]'
                % (now(), tidf(), info[0], id(f), line, jval(changed))
            )
        if checks is not None and line in checks.by_line:
            if not info[4]:
                define(info)
            for rec in checks.records(f, info[0], id(f), line, tidf()):
                emit(rec)
        return None

    # `c-monitoring`: flux_hook._fastmon (shipped beside this file by the agent; imported by
    # install_hook unless FLUX_HOOK_FASTMON=off) answers the four callbacks that run for every
    # generator and every unwound frame in C, handing anything else to the ones above. A C
    # callback is no Python frame: inside an extent no USDT event fires for it (two per Python
    # callback, the merge dropping them), and outside it costs a fraction of one.
    fast = hook.fastmon
    c_start, c_resume, c_throw, c_unwind = on_start, on_resume, on_throw, on_unwind

    def c_flush():
        """The flush of a C callback's full buffer: a frame of `cb_codes`, so that a collection
        starting in it is deferred (`gc-defer`) as one in a Python callback is. (The C callback
        has no frame of its own; a collection run there would run the program's finalizers
        while sys.monitoring reports nothing, and USDT everything: seen on the 3.15 slice as
        generators closed with a return and no start.)"""
        flush()

    def c_failed(where, exc):
        """An error in a C callback after it made its record (the buffer's flush)."""
        if isinstance(exc, RecursionError):
            hook.recursion_hit = True
            return
        try:
            raise exc
        except Exception:
            internal_error(where)

    if fast is not None:
        fast.setup(codes, target_ids, xn, tl, buf, FN, c_flush, now, DISABLE, c_failed, PLAIN,
                   RETURN_GENERATOR, extents, gen_only, want_c, all_r, on_start, on_resume,
                   on_throw, on_unwind)
        c_start, c_resume, c_throw, c_unwind = fast.on_start, fast.on_resume, fast.on_throw, fast.on_unwind

    reg = M.register_callback
    callbacks = (
        (E.PY_START, c_start),
        (E.PY_RESUME, c_resume),
        (E.PY_THROW, c_throw),
        (E.PY_RETURN, on_return),
        (E.PY_YIELD, on_yield),
        (E.PY_UNWIND, c_unwind),
        (E.RAISE, on_raise),
        (E.RERAISE, on_reraise),
        (E.LINE, on_line),
        (E.JUMP, on_jump),
    )
    for ev, cb in callbacks:
        reg(tool, ev, cb)

    glob = E.PY_START | E.PY_UNWIND
    if want_c or gen_only:
        glob |= E.PY_RESUME | E.PY_THROW
    if all_r:
        glob |= E.PY_RETURN | E.PY_YIELD
    if want_exc:
        glob |= E.RAISE | E.RERAISE

    # Activations already running at install time (site, importlib): report their start now
    # so that their returns are balanced.
    if want_c:
        stack = []
        f = getframe(1)
        while f is not None:
            stack.append(f)
            f = f.f_back
        for f in reversed(stack):
            info = register(f.f_code)
            if info[1] != EXCLUDED:
                emit_c(info, f, f.f_lineno)

    def stop():
        hook.active = False
        owned[0] = False
        M.set_events(tool, 0)
        for code in instrumented:
            try:
                set_local_events(tool, code, 0)
            except Exception:
                pass
        for ev in (
            E.PY_START,
            E.PY_RESUME,
            E.PY_THROW,
            E.PY_RETURN,
            E.PY_YIELD,
            E.PY_UNWIND,
            E.RAISE,
            E.RERAISE,
            E.LINE,
            E.JUMP,
        ):
            reg(tool, ev, None)
        if gc_defer in gc.callbacks:
            gc.callbacks.remove(gc_defer)
        M.free_tool_id(tool)

    def pause():
        """Outside a test window (scope "tests"): no events at all, targeted code included."""
        hook.active = False
        M.set_events(tool, 0)
        for code in instrumented:
            set_local_events(tool, code, 0)

    def enable():
        hook.active = True
        for code in instrumented:
            set_local_events(tool, code, local_ev)
        M.set_events(tool, glob)

    def check():
        if hook.window and not hook.in_window:
            return
        if hook.recursion_hit:
            hook.lost(
                "RecursionError: events at the recursion limit may be missing (a hook callback "
                "could not run there)"
            )
        if M.get_tool(tool) != "flux-hook" or M.get_events(tool) != glob:
            hook.lost("sys.monitoring tool %d was taken or its events changed by someone else" % tool)
        # What the wrappers cannot see (a change made from C): flux's callbacks and local events
        # as the hook set them. Registering ours again returns what was there (and repairs it).
        for ev, cb in callbacks:
            if reg(tool, ev, cb) is not cb:
                hook.lost("the callback of flux's sys.monitoring tool %d for event %d was replaced by someone else" % (tool, ev))
        for code in instrumented:
            if M.get_local_events(tool, code) != local_ev:
                hook.lost(
                    "the local events of flux's sys.monitoring tool %d on %s were changed by "
                    "someone else" % (tool, code.co_qualname)
                )
                set_local_events(tool, code, local_ev)

    # `gc-defer`: a collection an allocation scheduled runs at the next eval-breaker check,
    # which may be a callback's first instruction, before its guard. A collection that starts
    # with a callback's frame on the stack is deferred: everything is frozen for its length and
    # thawed into the oldest generation after, so a later collection, in the program's own
    # context, runs those finalizers. (Not when the program froze objects itself.)
    cb_codes = frozenset(
        f.__code__
        for f in (on_start, on_resume, on_throw, on_return, on_yield, on_unwind, on_raise,
                  on_reraise, on_line, on_jump, c_flush, c_failed)
    )
    deferred = [False]

    def gc_defer(phase, info):
        if phase == "start":
            if gc.get_freeze_count():
                return
            f = getframe(1)
            for _ in range(8):
                if f is None:
                    return
                if f.f_code in cb_codes:
                    gc.freeze()
                    deferred[0] = True
                    return
                f = f.f_back
        elif deferred[0]:
            deferred[0] = False
            gc.unfreeze()

    gc.callbacks.append(gc_defer)

    hook.stop_tracing = stop
    hook.pause_tracing = pause
    hook.enable_tracing = enable
    hook.check = check
    if gen_only:
        # Modules that ran before the hook was installed (site, os, codecs...) are never
        # started again: their generators are found from what they define.
        roots = []
        for m in list(sys.modules.values()):
            try:
                roots.extend(code_roots(list(vars(m).values())))
            except TypeError:
                continue
        define_gens(roots)
    if fast is not None:

        def add_audit_hook(f):
            """`c-audit-filter`: only sys.settrace/sys.setprofile reach `f`."""
            fast.set_audit(f)
            sys.addaudithook(fast.audit)

        hook.watch_program_tracers(settrace_replaces_hook=False, add_hook=add_audit_hook)
    else:
        hook.watch_program_tracers(settrace_replaces_hook=False)
    owned = [True]  # flux holds `tool` (until stop frees it)
    guard(hook, tool, M, owned)
    if not hook.window:
        hook.active = True
        M.set_events(tool, glob)
