/* flux_hook._fast311: the 3.11 back-end's global trace function, with its `c-fast-path`.
 *
 * Why: on 3.11 sys.settrace calls the hook's Python trace function at the start of every frame
 * of the program, whatever the scope. With scope "targets" the answer for nearly all of them is
 * None (untargeted code outside every extent), and calling a Python function to say so is what
 * a SymPy suite part pays for the hook (a 3.65x run on 3.11 against 1.6x on 3.15).
 *
 * `Tracer(gtrace, codes, tl, plain)` wraps the hook's own global function `gtrace`; `settrace`
 * installs it as the thread's C trace function (PyEval_SetTrace). A frame start ('call') of code
 * the hook registered as untargeted (`codes[id(code)][1] == plain`) while the thread is outside
 * every extent (`tl.xd` false) is answered here, without Python; so is, with `c-plain-starts`, the
 * start of untargeted code inside an extent when the hook reports every start
 * (calls="entries"): the record gtrace would append, appended here. Every other event goes exactly
 * where CPython 3.11's own sys.settrace trampoline (Python/sysmodule.c, trace_trampoline) sends
 * it: a start to `gtrace`, anything else to the frame's local trace function (f_trace), with the
 * same locals sync around the call and the same handling of what it returns or raises (as in
 * Debian bookworm's 3.11.2, whose images flux builds). Nothing
 * else is decided here: what is traced stays the Python hook's.
 *
 * Built against CPython 3.11's headers (the frame object's layout is the 3.11 ABI's); the hook
 * falls back to the pure Python path when it cannot import this module.
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <Python.h>
#include <frameobject.h>
#include <opcode.h>
#include <string.h>
#include <time.h>
#include "internal/pycore_frame.h"
#include "internal/pycore_pystate.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "_fast311 is for CPython 3.11 only"
#endif

typedef struct {
    PyObject_HEAD
    PyObject *gtrace; /* the hook's global trace function */
    PyObject *codes;  /* id(code) -> info list (info[0]: its id; info[1]: its kind; info[4]:
                         its definition sent) */
    PyObject *tl;     /* the hook's threading.local (`xd`: targeted activations running; `tid`) */
    long plain;       /* the kind of untargeted code */
    PyObject *buf;    /* `c-plain-starts`: the hook's record buffer (a list), or NULL */
    Py_ssize_t flush_at; /* the buffer's length at which the hook flushes it */
} Tracer;

static PyObject *whatstrings[8];
static PyObject *xd_name;
static PyObject *tid_name;

/* CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR */
#define GEN_FLAGS (0x20 | 0x80 | 0x200)

static int
tracer_traverse(Tracer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->gtrace);
    Py_VISIT(self->codes);
    Py_VISIT(self->tl);
    Py_VISIT(self->buf);
    return 0;
}

static int
tracer_clear(Tracer *self)
{
    Py_CLEAR(self->gtrace);
    Py_CLEAR(self->codes);
    Py_CLEAR(self->tl);
    Py_CLEAR(self->buf);
    return 0;
}

static void
tracer_dealloc(Tracer *self)
{
    PyObject_GC_UnTrack(self);
    tracer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Tracer(gtrace, codes, tl, plain[, buf, flush_at]): with `buf` (the hook's record list) and
 * `flush_at`, `c-plain-starts` is on. */
static int
tracer_init(Tracer *self, PyObject *args, PyObject *kwds)
{
    PyObject *gtrace, *codes, *tl, *buf = NULL;
    long plain;
    Py_ssize_t flush_at = 0;
    if (!PyArg_ParseTuple(args, "OO!Ol|O!n", &gtrace, &PyDict_Type, &codes, &tl, &plain,
                          &PyList_Type, &buf, &flush_at)) {
        return -1;
    }
    Py_XINCREF(buf);
    Py_XSETREF(self->buf, buf);
    self->flush_at = flush_at;
    Py_INCREF(gtrace);
    Py_INCREF(codes);
    Py_INCREF(tl);
    Py_XSETREF(self->gtrace, gtrace);
    Py_XSETREF(self->codes, codes);
    Py_XSETREF(self->tl, tl);
    self->plain = plain;
    return 0;
}

/* Called as a Python trace function (a program that saved sys.gettrace() and set it back with
 * sys.settrace): behave as the wrapped function does. */
static PyObject *
tracer_call(Tracer *self, PyObject *args, PyObject *kwds)
{
    if (self->gtrace == NULL) {
        PyErr_SetString(PyExc_TypeError, "an uninitialised Tracer (Tracer.__new__ without __init__)");
        return NULL;
    }
    return PyObject_Call(self->gtrace, args, kwds);
}

/* Times a callback failed and the trace function was switched off (read by trace_dropped). */
static long long trace_dropped;

enum start { START_HOOK, START_OUTSIDE, START_INSIDE };

/* What a frame start is to the fast path: untargeted code outside every extent
 * (START_OUTSIDE: nothing to do), untargeted code inside one (START_INSIDE: `*info` is its info
 * list, borrowed), or anything else, for gtrace (START_HOOK). */
static enum start
classify(Tracer *t, PyCodeObject *code, PyObject **info)
{
    PyObject *key = PyLong_FromVoidPtr((void *)code);
    if (key == NULL) {
        PyErr_Clear();
        return START_HOOK;
    }
    *info = PyDict_GetItemWithError(t->codes, key); /* borrowed */
    Py_DECREF(key);
    if (*info == NULL) {
        PyErr_Clear();
        return START_HOOK; /* not registered yet: gtrace registers it */
    }
    if (!PyList_CheckExact(*info) || PyList_GET_SIZE(*info) < 5) {
        return START_HOOK;
    }
    PyObject *kind = PyList_GET_ITEM(*info, 1);
    if (!PyLong_CheckExact(kind) || PyLong_AsLong(kind) != t->plain) {
        PyErr_Clear();
        return START_HOOK;
    }
    /* The extent depth is the hook's int; anything else (test code can reach the hook's
     * thread-local) goes to gtrace: its truth could run Python code here, which could empty
     * or free `*info` under us (test_a_hostile_extent_depth_or_definition_flag_is_no_crash). */
    PyObject *xd = PyObject_GetAttr(t->tl, xd_name);
    if (xd == NULL) {
        PyErr_Clear();
        return START_HOOK; /* gtrace reads it too, and fails loudly */
    }
    if (!PyLong_CheckExact(xd)) {
        Py_DECREF(xd);
        return START_HOOK;
    }
    int overflow = 0;
    int outside = PyLong_AsLongAndOverflow(xd, &overflow) == 0 && overflow == 0;
    Py_DECREF(xd);
    return outside ? START_OUTSIDE : START_INSIDE;
}

/* Where a start of generator code `code` at `frame` begins, as gtrace says it: a fresh start
 * (the frame at its `RESUME 0`, or still at `RETURN_GENERATOR` for a throw()/close() into an
 * unstarted one: `starts_fresh` of _settrace.py) at the code's first line, marked `new`; a
 * resumption at the frame's line. Returns 0 when gtrace must say it: the code's bytes not yet
 * read (info[3]), no last instruction, or no line. */
static int
generator_start(PyFrameObject *frame, PyObject *info, int *line, const char **new)
{
    PyObject *co = PyList_GET_ITEM(info, 3);
    int lasti = PyFrame_GetLasti(frame);
    if (!PyBytes_CheckExact(co) || lasti < 0 || lasti + 1 >= PyBytes_GET_SIZE(co)) {
        return 0;
    }
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(co);
    if ((b[lasti] == RESUME && b[lasti + 1] == 0) || b[lasti] == RETURN_GENERATOR) {
        *new = ",\"new\"";
        return 1;
    }
    *line = PyFrame_GetLineNumber(frame);
    return *line >= 0;
}

/* `c-plain-starts`: append the record gtrace appends for the start of untargeted code inside
 * an extent (`["c",ts,tid,code_id,frame_id,line]` and `,"new"` for a fresh start of generator
 * code, the clock CLOCK_MONOTONIC as the hook's `time.monotonic_ns`). Returns 1 when it did;
 * 0 leaves the start to gtrace: code whose definition the agent has not had, a generator
 * `generator_start` cannot place, a thread whose id the hook has not read yet, or a buffer
 * due for its flush. Nothing here allocates an object the cyclic GC tracks (an int, a str,
 * the list's own storage), so no collection can start here (the `gc-guard`'s concern). */
static int
record_start(Tracer *t, PyFrameObject *frame, PyCodeObject *code, PyObject *info)
{
    if (t->buf == NULL || PyList_GET_SIZE(t->buf) + 1 >= t->flush_at) {
        return 0;
    }
    int line = code->co_firstlineno;
    const char *new = "";
    if (PyList_GET_ITEM(info, 4) != Py_True) {
        return 0; /* not defined yet, or not the hook's bool: gtrace's to judge */
    }
    if ((code->co_flags & GEN_FLAGS) && !generator_start(frame, info, &line, &new)) {
        return 0;
    }
    /* The thread id and the code id are formatted as the C integers they hold, never by their
     * str(): test code can reach the hook's objects, and an int subclass's __str__ would write
     * any text into the record stream (gtrace's `%d` takes the integer too). Anything but an
     * exact int goes to gtrace (test_a_plain_start_with_a_forged_id_is_not_written_as_text). */
    PyObject *tid = PyObject_GetAttr(t->tl, tid_name);
    if (tid == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *cid = PyList_GET_ITEM(info, 0);
    long long tid_v = PyLong_CheckExact(tid) ? PyLong_AsLongLong(tid) : -1;
    long long cid_v = PyLong_CheckExact(cid) ? PyLong_AsLongLong(cid) : -1;
    Py_DECREF(tid);
    if (tid_v < 0 || cid_v < 0) {
        PyErr_Clear();
        return 0;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned long long ts = (unsigned long long)now.tv_sec * 1000000000ULL + now.tv_nsec;
    PyObject *rec = PyUnicode_FromFormat("[\"c\",%llu,%lld,%lld,%zu,%d%s]", ts, tid_v, cid_v,
                                         (size_t)frame, line, new);
    if (rec == NULL) {
        PyErr_Clear();
        return 0;
    }
    int err = PyList_Append(t->buf, rec);
    Py_DECREF(rec);
    if (err < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* CPython 3.11's call_trampoline, and the hook's `gc-guard` around all of it: the callback runs
 * with tracing suspended, and an allocation there that crosses the GC's threshold before the
 * callback's own guard holds collection off would collect while nothing traces: the program's
 * finalizers (a suspended generator's close, `__del__`) would run unseen by the hook yet seen
 * by USDT, inside a target's extent a return with no start (the 3.11 slice, once).
 * With collection held off until the callback is done, the program's next allocation
 * collects, traced (test_a_collection_in_a_target_closes_an_outside_generator_traced, which
 * CPython's own trampoline fails). */
static PyObject *
call_trampoline(PyObject *callback, PyFrameObject *frame, int what, PyObject *arg)
{
    int gc_was = PyGC_Disable();
    PyObject *result = NULL;
    /* As 3.11's: discard earlier changes to the frame's fast locals, if it has them as a
     * dict, then call, write the dict back, and add the frame to a failure's traceback. */
    if (!frame->f_fast_as_locals || PyFrame_FastToLocalsWithError(frame) >= 0) {
        PyObject *stack[3];
        stack[0] = (PyObject *)frame;
        stack[1] = whatstrings[what];
        stack[2] = (arg != NULL) ? arg : Py_None;
        result = PyObject_Vectorcall(callback, stack, 3, NULL);
        PyFrame_LocalsToFast(frame, 1);
        if (result == NULL) {
            PyTraceBack_Here(frame);
        }
    }
    if (gc_was) {
        PyGC_Enable();
    }
    return result;
}

/* CPython 3.11's trace_trampoline, with the fast path in front of a frame start. */
static int
trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    Tracer *t = (Tracer *)obj;
    PyObject *callback;
    if (what == PyTrace_CALL) {
        PyObject *info = NULL;
        PyCodeObject *code = PyFrame_GetCode(frame);
        int start = classify(t, code, &info);
        int done = start == START_OUTSIDE
                   || (start == START_INSIDE && record_start(t, frame, code, info));
        Py_DECREF(code);
        if (done) {
            return 0;
        }
        callback = t->gtrace;
    }
    else {
        callback = frame->f_trace;
    }
    if (callback == NULL || what < 0 || what > 7) {
        return 0;
    }
    PyObject *result = call_trampoline(callback, frame, what, arg);
    if (result == NULL) {
        trace_dropped++;
        PyEval_SetTrace(NULL, NULL);
        Py_CLEAR(frame->f_trace);
        return -1;
    }
    if (result != Py_None) {
        Py_XSETREF(frame->f_trace, result);
    }
    else {
        Py_DECREF(result);
    }
    return 0;
}

static PyTypeObject TracerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flux_hook._fast311.Tracer",
    .tp_basicsize = sizeof(Tracer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The hook's global trace function with its c-fast-path.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)tracer_init,
    .tp_dealloc = (destructor)tracer_dealloc,
    .tp_traverse = (traverseproc)tracer_traverse,
    .tp_clear = (inquiry)tracer_clear,
    .tp_call = (ternaryfunc)tracer_call,
};

/* settrace(tracer): install `tracer` (a Tracer) as this thread's trace function; None removes
 * it. Like sys.settrace, this raises the "sys.settrace" audit event. */
static PyObject *
fast_settrace(PyObject *module, PyObject *tracer)
{
    if (tracer == Py_None) {
        PyEval_SetTrace(NULL, NULL);
    }
    else if (PyObject_TypeCheck(tracer, &TracerType)) {
        /* Tracer.__new__ without __init__ leaves its fields NULL, which trace() reads: refused
         * (test_an_uninitialised_tracer_is_refused_not_a_crash). */
        Tracer *t = (Tracer *)tracer;
        if (t->gtrace == NULL || t->codes == NULL || t->tl == NULL) {
            PyErr_SetString(PyExc_TypeError,
                            "settrace() of an uninitialised Tracer (Tracer.__new__ without __init__)");
            return NULL;
        }
        PyEval_SetTrace(trace, tracer);
    }
    else {
        PyErr_SetString(PyExc_TypeError, "settrace() takes a Tracer or None");
        return NULL;
    }
    if (PyErr_Occurred()) {
        return NULL; /* an audit hook refused it */
    }
    Py_RETURN_NONE;
}

/* The audit hook's filter (`c-audit-filter`): the hook's Python audit function cares about
 * sys.settrace and sys.setprofile only, yet 3.11 calls an audit hook for every audited event,
 * and the trace function's own reads of `frame.f_code` are audited: a Python call (and, to
 * USDT, a return of the hook's to drop) for most frame starts the hook sees. Here only those
 * two events reach it, with the arguments CPython would pass it and tracing suspended as CPython
 * suspends it for a Python audit hook. */
static int
audit_filter(const char *event, PyObject *args, void *hook)
{
    if (strcmp(event, "sys.settrace") != 0 && strcmp(event, "sys.setprofile") != 0) {
        return 0;
    }
    /* As CPython calls a Python audit hook: with tracing suspended (no `__cantrace__`). */
    PyThreadState *ts = PyThreadState_Get();
    PyThreadState_EnterTracing(ts);
    PyObject *r = PyObject_CallFunction((PyObject *)hook, "sO", event, args);
    PyThreadState_LeaveTracing(ts);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* addaudithook(f): sys.addaudithook(f) for those two events only. Like any audit hook, f is
 * kept for the life of the process. */
static PyObject *
fast_addaudithook(PyObject *module, PyObject *hook)
{
    if (!PyCallable_Check(hook)) {
        PyErr_SetString(PyExc_TypeError, "addaudithook() takes a callable");
        return NULL;
    }
    Py_INCREF(hook);
    if (PySys_AddAuditHook(audit_filter, hook) < 0) {
        Py_DECREF(hook);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- `extent-gate` ---------------------------------------------------------------------
 * With scope "targets" a trace function outside every extent only answers "nothing here", yet
 * while any C trace function is set, 3.11 runs every instruction of the thread through its
 * tracing dispatch, deoptimised, and makes a frame object per frame: the 3.11 slice runs 1.60x
 * its untraced time with the hook attached and its target never running. The gate keeps the
 * thread's trace function off outside extents. It is the interpreter's frame evaluator (PEP
 * 523: every frame start and resumption, a generator's included, passes through it), which
 * installs the Tracer as the thread's trace function right before a frame of code that may be
 * targeted runs, and removes it when that frame's evaluation ends (returned, yielded or
 * unwound). Inside, the Tracer and gtrace see exactly what they see with a global trace
 * function: the frame's start is its first event. A frame that starts while any trace
 * function is set (inside an extent, inside the hook's own callbacks, or the program's own
 * tracer) passes through untouched.
 *
 * Which code may be targeted is the hook's `judge(code)` (its file and qualname, as `register`
 * decides, without registering), asked once per code object and kept in the code's co_extra
 * slot (PEP 523's per-code scratch space). It runs with the judge's own frames passed through,
 * and collection held off (no program finalizer runs unseen inside it).
 *
 * The switch sets the thread's trace function as PyEval_SetTrace does, without its
 * "sys.settrace" audit event: the program's audit hooks see nothing of the gate's (the hook's
 * own audit hook would take every switch for the program's).
 *
 * Not seen by the gate (so the hook refuses to gate such a config, or reports the trace lost,
 * `getitem-inline`): 3.11's BINARY_SUBSCR_GETITEM runs a class's `__getitem__` inline without
 * the frame evaluator (fixed in 3.12).
 */
static PyObject *gate_tracer; /* the Tracer the gate installs, or NULL: no gate */
static PyObject *gate_judge;  /* judge(code) -> bool */
static Py_ssize_t gate_extra = -1;
static _Thread_local int gate_paused;  /* this thread records nothing now (outside a window) */
static _Thread_local int gate_judging; /* the judge is running in this thread */

#define VERDICT_NO ((void *)1)
#define VERDICT_YES ((void *)2)

static void
verdict_free(void *v)
{
    (void)v; /* the verdicts are tags, not allocations */
}

/* Install `func`/`obj` as the thread's C trace function (NULL, NULL: none), as
 * _PyEval_SetTrace does, without the audit event. */
static void
gate_switch(PyThreadState *ts, Py_tracefunc func, PyObject *obj)
{
    PyObject *old = ts->c_traceobj;
    ts->c_tracefunc = NULL;
    ts->c_traceobj = NULL;
    _PyThreadState_UpdateTracingState(ts);
    Py_XINCREF(obj);
    Py_XDECREF(old);
    ts->c_traceobj = obj;
    ts->c_tracefunc = func;
    _PyThreadState_UpdateTracingState(ts);
}

/* Whether frames of `code` may be targeted: its verdict, or the judge's at first sight. Any
 * failure says yes (gtrace then decides, at the cost of tracing a frame for nothing). */
static int
may_target(PyCodeObject *code)
{
    void *v = NULL;
    if (_PyCode_GetExtra((PyObject *)code, gate_extra, &v) < 0) {
        PyErr_Clear();
        v = NULL;
    }
    if (v == VERDICT_YES || v == VERDICT_NO) {
        return v == VERDICT_YES;
    }
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* a frame thrown into holds its exception here */
    int gc_was = PyGC_Disable();
    gate_judging = 1;
    PyObject *r = PyObject_CallOneArg(gate_judge, (PyObject *)code);
    gate_judging = 0;
    if (gc_was) {
        PyGC_Enable();
    }
    int yes = 1;
    if (r == NULL) {
        PyErr_Clear();
    }
    else {
        yes = r != Py_False;
        Py_DECREF(r);
    }
    if (_PyCode_SetExtra((PyObject *)code, gate_extra, yes ? VERDICT_YES : VERDICT_NO) < 0) {
        PyErr_Clear();
    }
    PyErr_Restore(et, ev, tb);
    return yes;
}

static PyObject *
gate_eval(PyThreadState *ts, struct _PyInterpreterFrame *f, int throwflag)
{
    PyObject *tracer = gate_tracer;
    if (ts->c_tracefunc != NULL || gate_judging || tracer == NULL || !may_target(f->f_code)
        || gate_paused) {
        return _PyEval_EvalFrameDefault(ts, f, throwflag);
    }
    Py_INCREF(tracer);
    gate_switch(ts, trace, tracer);
    PyObject *r = _PyEval_EvalFrameDefault(ts, f, throwflag);
    /* Off again unless something else is installed now (the program's tracer: reported by the
     * hook's audit hook). */
    if (ts->c_tracefunc == trace && ts->c_traceobj == tracer) {
        gate_switch(ts, NULL, NULL);
    }
    Py_DECREF(tracer);
    return r;
}

/* The object the hook passed to gate(): switching the gate off or pausing it takes it. Test
 * code can import this module; without the key it cannot quietly stop the gate (the hook's
 * check also reports an evaluator replaced or a window's thread paused). */
static PyObject *gate_key;

static int
gate_key_is(PyObject *key)
{
    if (gate_key == NULL || key != gate_key) {
        PyErr_SetString(PyExc_PermissionError, "the extent gate is the flux hook's");
        return 0;
    }
    return 1;
}

/* gate(tracer, judge, key): make the gate the interpreter's frame evaluator, installing
 * `tracer` (a Tracer) around frames `judge` may target, paused in the calling thread (the hook
 * resumes it at its first window). Refused when another evaluator is installed, or once
 * gated without the same key. */
static PyObject *
fast_gate(PyObject *module, PyObject *args)
{
    PyObject *tracer, *judge, *key;
    if (!PyArg_ParseTuple(args, "O!OO", &TracerType, &tracer, &judge, &key)) {
        return NULL;
    }
    if (gate_key != NULL && !gate_key_is(key)) {
        return NULL;
    }
    Tracer *t = (Tracer *)tracer;
    if (t->gtrace == NULL || t->codes == NULL || t->tl == NULL) {
        PyErr_SetString(PyExc_TypeError, "gate() of an uninitialised Tracer (Tracer.__new__ without __init__)");
        return NULL;
    }
    if (!PyCallable_Check(judge)) {
        PyErr_SetString(PyExc_TypeError, "gate() takes a callable judge");
        return NULL;
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction now = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (now != _PyEval_EvalFrameDefault && now != gate_eval) {
        PyErr_SetString(PyExc_RuntimeError, "another frame evaluator (PEP 523) is installed");
        return NULL;
    }
    if (gate_extra < 0) {
        gate_extra = _PyEval_RequestCodeExtraIndex(verdict_free);
        if (gate_extra < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no co_extra slot left for the gate's verdicts");
            return NULL;
        }
    }
    Py_INCREF(tracer);
    Py_INCREF(judge);
    Py_INCREF(key);
    Py_XSETREF(gate_tracer, tracer);
    Py_XSETREF(gate_judge, judge);
    Py_XSETREF(gate_key, key);
    gate_paused = 1;
    _PyInterpreterState_SetEvalFrameFunc(interp, gate_eval);
    Py_RETURN_NONE;
}

/* ungate(key): the default frame evaluator back (if the gate's is installed); the gate's Tracer
 * off in this thread if the gate installed it. */
static PyObject *
fast_ungate(PyObject *module, PyObject *key)
{
    if (!gate_key_is(key)) {
        return NULL;
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == gate_eval) {
        _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    }
    PyThreadState *ts = PyThreadState_Get();
    if (gate_tracer != NULL && ts->c_tracefunc == trace && ts->c_traceobj == gate_tracer) {
        gate_switch(ts, NULL, NULL);
    }
    Py_CLEAR(gate_tracer);
    Py_CLEAR(gate_judge);
    Py_CLEAR(gate_key);
    Py_RETURN_NONE;
}

/* gated(): whether the gate is the interpreter's frame evaluator (the program may replace it:
 * a loss the hook reports). */
static PyObject *
fast_gated(PyObject *module, PyObject *unused)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    return PyBool_FromLong(gate_tracer != NULL
                           && _PyInterpreterState_GetEvalFrameFunc(interp) == gate_eval);
}

/* gate_pause(key, flag): this thread's targets open nothing while paused (outside a test
 * window). Pausing also takes the gate's Tracer off this thread. */
static PyObject *
fast_gate_pause(PyObject *module, PyObject *args)
{
    PyObject *key, *flag;
    if (!PyArg_ParseTuple(args, "OO", &key, &flag) || !gate_key_is(key)) {
        return NULL;
    }
    int on = PyObject_IsTrue(flag);
    if (on < 0) {
        return NULL;
    }
    gate_paused = on;
    PyThreadState *ts = PyThreadState_Get();
    if (on && gate_tracer != NULL && ts->c_tracefunc == trace && ts->c_traceobj == gate_tracer) {
        gate_switch(ts, NULL, NULL);
    }
    Py_RETURN_NONE;
}

/* gate_paused(): whether the gate is paused in this thread. */
static PyObject *
fast_gate_paused(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(gate_paused);
}

/* trace_dropped(): times a failing callback switched a Tracer off (3.11 drops the trace
 * function then; the hook reports the extent lost). */
static PyObject *
fast_trace_dropped(PyObject *module, PyObject *unused)
{
    return PyLong_FromLongLong(trace_dropped);
}

static PyMethodDef methods[] = {
    {"settrace", fast_settrace, METH_O, "Install a Tracer as this thread's trace function."},
    {"addaudithook", fast_addaudithook, METH_O,
     "sys.addaudithook for the events sys.settrace and sys.setprofile only."},
    {"gate", fast_gate, METH_VARARGS, "Make the extent gate the frame evaluator."},
    {"ungate", fast_ungate, METH_O, "The default frame evaluator back (the hook's key)."},
    {"gated", fast_gated, METH_NOARGS, "Whether the gate is the frame evaluator."},
    {"gate_pause", fast_gate_pause, METH_VARARGS,
     "Pause (True) or resume the gate in this thread (the hook's key)."},
    {"gate_paused", fast_gate_paused, METH_NOARGS, "Whether the gate is paused in this thread."},
    {"trace_dropped", fast_trace_dropped, METH_NOARGS, "Times a failing callback dropped a Tracer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fast311", NULL, -1, methods,
};

PyMODINIT_FUNC
PyInit__fast311(void)
{
    static const char *names[8] = {
        "call", "exception", "line", "return", "c_call", "c_exception", "c_return", "opcode",
    };
    for (int i = 0; i < 8; i++) {
        if (whatstrings[i] == NULL) {
            whatstrings[i] = PyUnicode_InternFromString(names[i]);
            if (whatstrings[i] == NULL) {
                return NULL;
            }
        }
    }
    if (xd_name == NULL && (xd_name = PyUnicode_InternFromString("xd")) == NULL) {
        return NULL;
    }
    if (tid_name == NULL && (tid_name = PyUnicode_InternFromString("tid")) == NULL) {
        return NULL;
    }
    if (PyType_Ready(&TracerType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&TracerType);
    if (PyModule_AddObject(m, "Tracer", (PyObject *)&TracerType) < 0) {
        Py_DECREF(&TracerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
