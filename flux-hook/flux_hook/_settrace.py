"""Back-end for Python 3.11: sys.settrace, in every thread started from Python.

One global trace function sees every frame start and resume ('call'). It returns:
- nothing for untargeted code unless every return is wanted (calls=all); then a small local
  function with f_trace_lines off, which only sees 'return' and 'exception' of that frame
  (cheaper than sys.setprofile, which would also fire for every C call);
- a full local function for targeted code (lines, locals, exceptions, return values).

3.11 has no 'handled' or 're-raise' events; they are inferred:
- handled: an exception event in the frame followed by a line event on the first line of an
  except clause body (from the file's AST);
- re-raise: the frame unwinds although its last exception was handled (a bare `raise`);
- how a frame ends: the opcode at f_lasti (RETURN_VALUE = return, YIELD_VALUE = yield unless an
  exception is pending and no value is carried, anything else = unwind).

Code the trace function runs is invisible to it (tracing is off inside it) but not to USDT: a
local's `__repr__`, an exception's `__str__`, the stdlib code of `register` (fnmatch,
posixpath) and `define` (json). Wherever that can happen — every event of targeted code, the
first sight of a code object, its definition — the time span is sent as
`["hx", t0, tid, t1]`, and the agent drops this thread's USDT events inside it. (Without USDT
entries, 3.11's returns of such code would otherwise close the program's activation of the same
function: a class's `__repr__` called by the hook while the program is in that `__repr__`.)
"""
import _thread
import dis
import gc
import inspect
import sys
import threading

from ._core import CLOCK, EXCLUDED, PLAIN, TARGET, FrameState, exc_typename, internal_error, jval

RETURN_VALUE = dis.opmap["RETURN_VALUE"]
YIELD_VALUE = dis.opmap["YIELD_VALUE"]
RESUME = dis.opmap.get("RESUME", -1)
SEND = dis.opmap.get("SEND", -1)
RETURN_GENERATOR = dis.opmap.get("RETURN_GENERATOR", -1)
GEN_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def starts_fresh(co, i):
    """Whether a generator/coroutine frame whose last instruction is at `i` of its code `co`
    has not run yet: at its `RESUME 0` (a first `next()`), or still at `RETURN_GENERATOR`
    (`throw()` or `close()` into an unstarted one). The merge's `unseen-starts` takes a start
    not marked fresh for the resumption of a frame started where nothing was traced."""
    op = co[i]
    return (op == RESUME and co[i + 1] == 0) or op == RETURN_GENERATOR


def start(hook):
    cfg = hook.cfg
    want_c = hook.calls in ("all", "entries")
    # calls=generators: activation starts of generator/coroutine code only (see _sysmon).
    gen_only = hook.calls == "generators"
    all_r = hook.calls == "all"
    # scope "targets": program records only inside extents of targeted code (tl.xd > 0).
    extents = hook.extents
    x_leave = hook.target_ended
    want_line = cfg.want_line
    want_vars = cfg.want_vars
    want_ret = cfg.want_return
    want_exc = cfg.want_exc
    # Dialect "swe-flux" (see _core.Config): tracer-only StopIterations, flagged inferences,
    # locals and the object at exceptions, modules.
    swe = cfg.swe
    checks = cfg.checks  # [tracing] predicates (flux_hook.checks), evaluated at line events
    trace_lines = want_line or want_vars or want_exc or checks is not None
    reraise_inferred = "reraise-inferred" if swe else "reraise"
    x_tail = hook.x_tail
    note_module = hook.note_module
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
    now = CLOCK[0]  # `frozen-clock`
    plain_exc = {}  # id(frame) -> f_lasti of the last exception seen in an untargeted frame
    # `gc-guard`: the cyclic GC runs when an allocation crosses its threshold, and the trace
    # functions allocate (every record). A collection started inside one runs the program's
    # finalizers there (a suspended generator's close, `__del__`), where settrace is
    # suspended: untraced, or inside an `hx` span dropped as the hook's own work. So the trace
    # functions hold automatic collection off while they run (unless the program turned it
    # off itself); the next allocation of the program's then collects, traced.
    gc_on, gc_off, gc_back = gc.isenabled, gc.disable, gc.enable

    def hx(t0):
        """The span since t0 ran code of the hook's (see the module doc)."""
        app('["hx",%d,%d,%d]' % (t0, tidf(), now()))

    def info_of(code, frame=None):
        info = codes.get(id(code))
        if info is None:
            t0 = now()
            info = register(code, frame)
            hx(t0)
        if info[3] is None:
            info[3] = code.co_code
        return info

    def define_b(info):
        t0 = now()
        define(info)
        hx(t0)

    def is_fresh(code, co, frame):
        if not (code.co_flags & GEN_FLAGS):
            return True
        return starts_fresh(co, frame.f_lasti)

    def emit_c(info, frame, line, fs=None, thrown=False, new=False):
        """fs: the frame state of targeted code. new: a fresh start of generator code (the
        merge's `fresh-frames`: a generator abandoned while suspended is freed without any
        event, and the next one may get its frame key). Dialect "swe-flux": the record also
        says whether gen.throw()/close() opened it (no tracer call event) and carries the
        locals changed since the frame's previous event (all of them for a fresh frame)."""
        if not info[4]:
            define_b(info)
        tail = ',"new"' if new else ""
        if swe and fs is not None:
            # Reprs run program code (`__repr__`) that only USDT sees: inside an `hx` span.
            t0 = now()
            changed = changed_locals(fs, frame) if want_vars else None
            hx(t0)
            started = '"throw"' if thrown else '"new"' if new else "null"
            tail = ',%s,%s' % (started, jval(changed))
        emit('["c",%d,%d,%d,%d,%d%s]' % (now(), tidf(), info[0], id(frame), line, tail))

    def plain_local(frame, event, arg):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            try:
                if event == "return":
                    info = codes[id(frame.f_code)]  # registered by gtrace (or at install)
                    co = info[3]
                    i = frame.f_lasti
                    op = co[i] if 0 <= i < len(co) else -1
                    if op == RETURN_VALUE:
                        how = "return"
                    elif op == YIELD_VALUE and not (arg is None and plain_exc.get(id(frame)) == i):
                        how = "yield"
                    else:
                        how = "unwind"
                    plain_exc.pop(id(frame), None)
                    if not info[4]:
                        define_b(info)
                    try:
                        tid = tl.tid
                    except AttributeError:
                        tid = tidf()
                    app('["r",%d,%d,%d,%d,%d,"%s",null,null]' % (now(), tid, info[0], id(frame), frame.f_lineno, how))
                    if len(buf) >= FN:
                        flush()
                elif event == "exception":
                    plain_exc[id(frame)] = frame.f_lasti
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("settrace(untargeted)")
        finally:
            if g:
                gc_back()
        return plain_local

    def x_enter():
        t0 = now()
        hook.target_started()
        hx(t0)

    def x_record(info, frame, p, kind, line=None, tail=""):
        """p: (id, type name, message) of the exception (the state never holds the object);
        tail: the dialect's extra fields (Hook.x_tail)."""
        if not info[4]:
            define(info)
        emit(
            '["x",%d,%d,%d,%d,%d,%s,%s,"%s"%s]'
            % (
                now(),
                tidf(),
                info[0],
                id(frame),
                frame.f_lineno if line is None else line,
                jval(p[1]),
                jval(p[2]),
                kind,
                tail,
            )
        )

    def state(code, frame):
        fs = states.get(id(frame))
        if fs is None or fs.code is not code:
            fs = states[id(frame)] = FrameState(code)
        return fs

    def target_local(frame, event, arg):
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            t0 = now()
            target_event(frame, event, arg)
            hx(t0)
            if len(buf) >= FN:
                flush()
        finally:
            if g:
                gc_back()
        return target_local

    def target_event(frame, event, arg):
        try:
            code = frame.f_code
            info = info_of(code)
            fs = state(code, frame)
            if event == "line":
                line = frame.f_lineno
                if want_exc:
                    hi = info[5]
                    if hi is None:
                        hi = info[5] = hook.handler_info(code.co_filename)
                    firsts, headers, bare = hi
                    if line in bare and fs.handled is not None:
                        # `bare-raise-message`: a bare `raise` about to re-raise the exception
                        # this frame handled (3.11 reports no event; it is inferred later) —
                        # its message as it is now: the handler may have changed it
                        # (flask's from_file sets `e.strerror`), and the frame holds only
                        # the message taken when it was caught.
                        e = sys.exc_info()[1]
                        if e is not None and id(e) == fs.handled[0]:
                            fs.handled = (fs.handled[0], fs.handled[1], exc_message(e))
                    hline = None
                    if line in headers or line in firsts:
                        if line in headers and fs.pending is None and fs.handled is not None:
                            # An except clause's header is reached with no exception event
                            # since the last one was handled: a bare `raise` of it, caught in
                            # this frame. Only the header says so: 3.11 runs it only to match
                            # an exception, while an except body's first line also runs again
                            # as a loop header or after a later line of a statement spanning
                            # several (17.1: those were invented re-raises).
                            fs.pending = fs.handled
                            fs.handled = None
                            x_record(info, frame, fs.pending, reraise_inferred, fs.prev_line)
                        hline = firsts.get(line)
                    if line not in headers:
                        fs.prev_line = line
                    p = fs.pending
                    if hline is not None and p is not None:
                        if not info[4]:
                            define(info)
                        emit(
                            '["h",%d,%d,%d,%d,%d,%s,%s]'
                            % (
                                now(),
                                tidf(),
                                info[0],
                                id(frame),
                                hline,
                                jval(p[1]),
                                jval(p[2]),
                            )
                        )
                        fs.handled = p
                        fs.pending = None
                if want_line:
                    changed = changed_locals(fs, frame) if want_vars else None
                    if not info[4]:
                        define(info)
                    emit(
                        '["l",%d,%d,%d,%d,%d,%s]'
                        % (now(), tidf(), info[0], id(frame), line, jval(changed))
                    )
                if checks is not None and line in checks.by_line:
                    if not info[4]:
                        define(info)
                    for rec in checks.records(frame, info[0], id(frame), line, tidf()):
                        emit(rec)
            elif event == "exception":
                exc = arg[1]
                if type(exc) is StopIteration and (arg[2] is None or info[3][frame.f_lasti] == SEND):
                    # 3.11 artefact: a generator that returned a value, ending a `for` loop or a
                    # `yield from`/await, reports its StopIteration to the tracer only (never
                    # raised by a frame: no traceback; 3.12+ does not raise it). Not an exception
                    # (SWE-Flux's tracer logs it: the dialect records it, flagged).
                    if swe and want_exc:
                        p = (id(exc), exc_typename(exc), exc_message(exc))
                        x_record(info, frame, p, "tracer-only", None, x_tail(fs, frame, exc, arg[2]))
                    return target_local
                if not fs.active:
                    # Resumed by gen.throw() without a call event: open the activation.
                    fs.active = True
                    if extents:
                        x_enter()
                    if want_c or extents or (gen_only and code.co_flags & GEN_FLAGS):
                        emit_c(info, frame, frame.f_lineno, fs, True)
                # Keep (id, type, message), not the exception: holding it would keep its
                # traceback's frames and locals alive (finalizers would run late).
                p = (id(exc), exc_typename(exc), exc_message(exc))
                if want_exc:
                    x_record(
                        info,
                        frame,
                        p,
                        hook.exc_kind(exc, frame, frame.f_lasti, arg[2]),
                        None,
                        x_tail(fs, frame, exc, arg[2]),
                    )
                fs.pending = p
                fs.handled = None
                fs.exc_lasti = frame.f_lasti
            elif event == "return":
                co = info[3]
                i = frame.f_lasti
                op = co[i] if 0 <= i < len(co) else -1
                exc = fs.pending
                if op == RETURN_VALUE:
                    how = "return"
                elif op == YIELD_VALUE and not (
                    arg is None and exc is not None and fs.exc_lasti == i
                ):
                    how = "yield"
                else:
                    how = "unwind"
                if how == "unwind":
                    if exc is None and fs.handled is not None:
                        # Left by a bare `raise` of the exception its handler caught.
                        exc = fs.handled
                        if want_exc:
                            x_record(info, frame, exc, reraise_inferred)
                    elif exc is None:
                        # Left by a bare `raise` outside any handler of its own: of the
                        # exception a caller is handling (flask's handle_user_exception), which
                        # is sys.exc_info() here. No event reported it (3.11).
                        e = sys.exc_info()[1]
                        if e is not None:
                            exc = (id(e), exc_typename(e), exc_message(e))
                            if want_exc:
                                x_record(info, frame, exc, reraise_inferred)
                    payload = [exc[1], exc[2]] if exc is not None else None
                elif want_ret:
                    payload = vrepr(arg)
                else:
                    payload = None
                changed = changed_locals(fs, frame) if want_vars else None
                if not info[4]:
                    define(info)
                emit(
                    '["r",%d,%d,%d,%d,%d,"%s",%s,%s]'
                    % (
                        now(),
                        tidf(),
                        info[0],
                        id(frame),
                        frame.f_lineno,
                        how,
                        jval(payload),
                        jval(changed),
                    )
                )
                if how == "yield":
                    fs.active = False
                    fs.pending = None
                else:
                    states.pop(id(frame), None)
                if extents:
                    x_leave()  # (inside target_local's hx span)
        except RecursionError:
            hook.recursion_hit = True
        except Exception:
            internal_error("settrace(targeted)")
        return target_local

    def gtrace(frame, event, arg):
        # (No shortcut before the gc-guard: 3.11 audits every read of `frame.f_code`, and the
        # audit event's arguments are a new tuple, which may start a collection. The shortcut
        # for untargeted frames outside every extent is the C part's, `c-fast-path`.)
        g = gc_on()  # `gc-guard` (above)
        if g:
            gc_off()
        try:
            try:
                code = frame.f_code
                info = codes.get(id(code))
                if info is None:
                    info = info_of(code, frame)
                k = info[1]
                if k == PLAIN:
                    if extents and not getattr(tl, "xd", 0):
                        return None
                    if want_c or (gen_only and code.co_flags & GEN_FLAGS):
                        new = ""
                        if code.co_flags & GEN_FLAGS:
                            co = info[3]
                            i = frame.f_lasti
                            if starts_fresh(co, i):
                                line, new = code.co_firstlineno, ',"new"'
                            else:
                                line = frame.f_lineno
                        else:
                            line = code.co_firstlineno
                        if not info[4]:
                            define_b(info)
                        try:
                            tid = tl.tid
                        except AttributeError:
                            tid = tidf()
                        app('["c",%d,%d,%d,%d,%d%s]' % (now(), tid, info[0], id(frame), line, new))
                        if len(buf) >= FN:
                            flush()
                    if all_r:
                        frame.f_trace_lines = False
                        return plain_local
                    return None
                if k == EXCLUDED:
                    return None
                if swe and info[6] is None:
                    note_module(info, frame)
                co = info[3]
                fresh = is_fresh(code, co, frame)
                fs = states.get(id(frame))
                if fresh or fs is None or fs.code is not code:
                    fs = states[id(frame)] = FrameState(code)
                fs.active = True
                if extents:
                    x_enter()
                if want_c or extents or (gen_only and code.co_flags & GEN_FLAGS):
                    # (The dialect keeps what settrace reports: module code starts at line 0.)
                    line = code.co_firstlineno if fresh and not swe else frame.f_lineno
                    emit_c(info, frame, line, fs, new=fresh and bool(code.co_flags & GEN_FLAGS))
                frame.f_trace_lines = trace_lines
                return target_local
            except RecursionError:
                hook.recursion_hit = True
            except Exception:
                internal_error("settrace(call)")
        finally:
            if g:
                gc_back()

    # Activations already running at install time (site, importlib): report their start now
    # and, when every return is wanted, give them the untargeted local tracer. (Not with scope
    # "tests": nothing is recorded before a test window, whose frames all start inside it.)
    if want_c and not hook.window:
        stack = []
        f = sys._getframe(1)
        while f is not None:
            stack.append(f)
            f = f.f_back
        for f in reversed(stack):
            info = info_of(f.f_code, f)
            if info[1] == EXCLUDED:
                continue
            emit_c(info, f, f.f_lineno)
            if all_r:
                f.f_trace_lines = False
                f.f_trace = plain_local

    # Threads. threading.settrace reaches only threading.Thread, from inside its bootstrap
    # (after Event.set and other calls of threading's own); a thread started with
    # `_thread.start_new_thread` was never traced, and USDT's returns of its code were taken
    # for the hook's own (17.2). Every thread started from Python goes through the function
    # below instead (threading's own alias included), and traces from its first frame.
    real_settrace = sys.settrace
    real_start = _thread.start_new_thread
    on = [False]  # tracing is on (scope "tests": inside a window)

    # `c-fast-path`: with scope "targets", the thread's trace function is gtrace wrapped by
    # flux_hook._fast311 (built for 3.11 and shipped beside this file by the agent), which
    # answers untargeted frame starts outside every extent in C and hands every other event
    # where 3.11's own sys.settrace would (see its source). Without the module, gtrace itself.
    tracer = gtrace
    fast_settrace = real_settrace
    add_audit_hook = sys.addaudithook
    # (Imported by install_hook; FLUX_HOOK_FAST311=off leaves it out, for measuring one path
    # against the other.)
    _fast311 = hook.fast311
    if _fast311 is not None:
        add_audit_hook = _fast311.addaudithook  # `c-audit-filter`
        if extents:
            if want_c and not all_r:
                # `c-plain-starts`: the starts of untargeted code inside an extent (a callee
                # question's every call) recorded in C, as gtrace records them.
                tracer = _fast311.Tracer(gtrace, codes, tl, PLAIN, buf, FN)
            else:
                tracer = _fast311.Tracer(gtrace, codes, tl, PLAIN)
            fast_settrace = _fast311.settrace
            # `extent-gate`: no trace function outside extents (see _fast311.c); the Tracer is
            # installed around frames of code that may be targeted.
            hook.gated = hook.gate_wanted and hook.gate_fits()
    gated = hook.gated
    key = object()  # the gate's capability: only the hook switches it off or pauses it

    def judge(code):
        """`extent-gate`: the verdict on a code object at its first frame outside every extent
        (the C part keeps it). The hook's own work: USDT may see it (another thread inside an
        extent)."""
        t0 = now()
        try:
            return hook.may_target(code)
        except Exception:
            internal_error("gate judge")
            return True
        finally:
            hx(t0)

    def own_settrace(func):
        """sys.settrace by the hook itself (not a loss: see the audit hook below): `gtrace`
        installs `tracer`. Gives the thread its extent depth first, which the C part reads
        (a thread without would send every frame start to gtrace)."""
        if "xd" not in tl.__dict__:
            tl.xd = 0
        tl.own = True
        try:
            if func is None:
                real_settrace(None)
            else:
                fast_settrace(tracer)
        finally:
            tl.own = False

    def strip_me(e, code):
        """Leave the hook's frame (running `code`) out of e's traceback: re-raised bare, e
        keeps the traceback as set (3.11 adds no entry for a re-raise), so the program's
        tracebacks read as untraced."""
        tb = e.__traceback__
        if tb is not None and tb.tb_frame.f_code is code:
            e.__traceback__ = tb.tb_next

    class Boot:
        """What a new thread runs: `f`, traced from its first frame. Its repr is f's, for
        `_thread` names it in "Exception ignored in thread started by: ..."."""

        __slots__ = ("f",)

        def __init__(self, f):
            self.f = f

        def __repr__(self):
            return repr(self.f)

        def __call__(self, *args, **kwargs):
            if gated:
                # The gate traces a new thread's targets; a thread started outside every
                # window is never traced, as with a trace function it would not get.
                if not on[0]:
                    _fast311.gate_pause(key, True)
            elif on[0]:
                own_settrace(gtrace)
            try:
                return self.f(*args, **kwargs)
            except BaseException as e:
                strip_me(e, Boot.__call__.__code__)
                raise

    def start_new_thread(function, args, kwargs=None):
        try:
            if callable(function):
                function = Boot(function)
            if kwargs is None:
                return real_start(function, args)
            return real_start(function, args, kwargs)
        except BaseException as e:
            strip_me(e, start_new_thread.__code__)
            raise

    start_new_thread.__doc__ = real_start.__doc__
    _thread.start_new_thread = start_new_thread
    if getattr(_thread, "start_new", None) is real_start:
        _thread.start_new = start_new_thread
    threading._start_new_thread = start_new_thread

    hook.own_tracer = tracer
    hook.watch_program_tracers(settrace_replaces_hook=True, add_hook=add_audit_hook)

    # Switching is the hook's work (`hx`: USDT sees own_settrace, Python code of the hook's).
    def stop():
        t0 = now()
        on[0] = hook.active = False
        if gated:
            _fast311.ungate(key)
        own_settrace(None)
        hx(t0)

    def pause():
        if not gated:
            stop()
            return
        t0 = now()
        on[0] = hook.active = False
        _fast311.gate_pause(key, True)
        hx(t0)

    def enable():
        t0 = now()
        on[0] = hook.active = True
        if gated:
            _fast311.gate_pause(key, False)
        else:
            own_settrace(gtrace)
        hx(t0)

    dropped = [0]  # the gate's Tracer switched off by a failing callback, at the last check

    def check():
        if hook.window and not hook.in_window:
            return
        if hook.recursion_hit:
            hook.lost(
                "RecursionError inside the trace function: events at the recursion limit may "
                "be missing"
            )
        if gated:
            # Outside extents no trace function is set; a failing callback switches the
            # Tracer off (counted by the C part), the gate puts it back at the next target.
            if not _fast311.gated():
                hook.lost(
                    "the program replaced the interpreter's frame evaluator (PEP 523): targets "
                    "run from then on are not traced"
                )
            if _fast311.gate_paused():
                hook.lost(
                    "the extent gate was paused in thread %d inside a test window: its targets "
                    "were not traced" % threading.get_native_id()
                )
                _fast311.gate_pause(key, False)
            n = _fast311.trace_dropped()
            if n != dropped[0]:
                dropped[0] = n
                hook.lost(
                    "the trace function failed and 3.11 switched it off (RecursionError inside "
                    "the trace function): records of that extent are missing"
                )
            return
        # A trace function that raises (RecursionError when a call is made at the recursion
        # limit: the tracer's own frame does not fit) makes 3.11 switch tracing off for the
        # thread without a word; so does another sys.settrace. Report it and trace again.
        if sys.gettrace() is not tracer:
            hook.lost(
                "sys.settrace was switched off in thread %d (RecursionError inside the trace "
                "function, or another tracer); records of that thread until now are missing"
                % threading.get_native_id()
            )
            own_settrace(gtrace)

    hook.stop_tracing = stop
    hook.pause_tracing = pause
    hook.check = check
    hook.enable_tracing = enable
    if gated:
        # Installed now, paused in this thread until the first window (a thread records
        # nothing before), so every code object's first frame is judged (`getitem-inline`).
        _fast311.gate(tracer, judge, key)
    if not hook.window:
        enable()
