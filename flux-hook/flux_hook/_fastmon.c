/* flux_hook._fastmon: the sys.monitoring back-end's hot callbacks in C (`c-monitoring`).
 *
 * Why: on 3.12+ with USDT (calls="generators", scope "targets") the hook's callbacks for
 * PY_START, PY_RESUME, PY_THROW and PY_UNWIND run for every generator start and resumption and
 * every frame an exception leaves, anywhere in the program; none of them can be switched off by
 * DISABLE for good. Inside an extent every one of them is a Python frame, and the interpreter's
 * USDT probes fire an entry and a return for each: on the 3.15 SymPy slice 5.76 M of its 11.9 M
 * probe hits were the hook's own frames, each a uprobe trap (~0.9 us) the merge then drops.
 * A C callback has no Python frame, so no probe fires for it, and it costs a fraction of one.
 *
 * What is answered here is exactly what the Python callbacks' fast paths answer (same records,
 * same return values); everything else (a code object not yet registered or defined, targeted
 * code, a frame whose line is unknown, a thread without its `tid`, an exception) is handed to
 * the Python callback unchanged, before anything was recorded. Nothing is decided here that
 * the Python back-end does not decide: `_sysmon.start` passes its state and its callbacks to
 * `setup`, and FLUX_HOOK_FASTMON=off takes the Python callbacks alone (the parity test).
 *
 * Each callback holds automatic collection off while it runs (`gc-guard`, as the Python
 * callbacks do): without it the 3.15 SymPy slice ended incomplete, generators closed by a
 * collection inside an extent with USDT returns and no PY_THROW reported, in every run. The
 * Python code they call (the Python callbacks when they fall back, the hook's flush through
 * `_sysmon.c_flush`) is in frames `gc-defer` knows as a callback's.
 *
 * Built for the stable ABI (Py_LIMITED_API 3.11, `_fastmon.abi3.so`) against any CPython 3.11+
 * headers: it uses only the stable ABI, and loads in 3.12, 3.13, 3.14 and 3.15 alike.
 */
#define Py_LIMITED_API 0x030B0000
#include <Python.h>
#include <stdint.h>

/* CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR */
#define GEN_FLAGS (0x20 | 0x80 | 0x200)

/* The back-end's state, set once by `setup` (one hook per process). */
static struct {
    PyObject *codes;      /* id(code) -> info list ([0] its id, [1] its kind, [4] defined) */
    PyObject *target_ids; /* set: id() of the targeted code objects set up so far */
    PyObject *xn;         /* [threads inside an extent] */
    PyObject *tl;         /* the hook's threading.local (`xd`, `tid`) */
    PyObject *buf;        /* the record buffer (a list) */
    PyObject *flush;      /* the hook's flush */
    PyObject *now;        /* the hook's clock (`frozen-clock`) */
    PyObject *disable;    /* sys.monitoring.DISABLE */
    PyObject *failed;     /* failed(where, exc): an error after a record was made */
    PyObject *py_start, *py_resume, *py_throw, *py_unwind; /* the Python callbacks */
    PyObject *py_audit;   /* the hook's Python audit function */
    Py_ssize_t flush_at;
    long plain;
    int return_generator; /* the RETURN_GENERATOR opcode of this interpreter */
    int extents, gen_only, want_c, all_r;
} S;

static PyObject *s_xd, *s_tid, *s_co_flags, *s_co_firstlineno, *s_co_code;

/* The info list of `code` (borrowed), or NULL: not registered (no error) or an error. */
static PyObject *
info_of(PyObject *code)
{
    PyObject *key = PyLong_FromVoidPtr(code);
    if (key == NULL)
        return NULL;
    PyObject *info = PyDict_GetItemWithError(S.codes, key);
    Py_DECREF(key);
    return info;
}

/* info[i] as a long; -1 with an error set when it is not one. */
static long
info_long(PyObject *info, Py_ssize_t i)
{
    PyObject *v = PyList_GetItem(info, i);
    return v == NULL ? -1 : PyLong_AsLong(v);
}

/* 1 when info[4] (its definition sent) is true, 0 when not, -1 on error. */
static int
defined(PyObject *info)
{
    PyObject *v = PyList_GetItem(info, 4);
    return v == NULL ? -1 : PyObject_IsTrue(v);
}

static long
code_long(PyObject *code, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(code, name);
    if (v == NULL)
        return -1;
    long r = PyLong_AsLong(v);
    Py_DECREF(v);
    return r;
}

/* getattr(tl, "xd", 0) as a truth value; -1 on error. */
static int
in_extent(void)
{
    PyObject *v = PyObject_GetAttr(S.tl, s_xd);
    if (v == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* xn[0]: threads inside an extent; -1 on error. */
static long
threads_in_extents(void)
{
    PyObject *v = PyList_GetItem(S.xn, 0);
    return v == NULL ? -1 : PyLong_AsLong(v);
}

/* 1 when id(code) is a set-up target, 0 when not, -1 on error. */
static int
is_target(PyObject *code)
{
    PyObject *key = PyLong_FromVoidPtr(code);
    if (key == NULL)
        return -1;
    int r = PySet_Contains(S.target_ids, key);
    Py_DECREF(key);
    return r;
}

/* Hand the event to the Python callback: what it returns (or raises) is the answer. */
static PyObject *
fall_back(PyObject *cb, PyObject *const *args, Py_ssize_t nargs)
{
    if (PyErr_Occurred()) {
        /* A lookup failed on the way: the Python callback meets the same and says so. */
        PyErr_Clear();
    }
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(tuple, i, args[i]);
    }
    PyObject *r = PyObject_Call(cb, tuple, NULL);
    Py_DECREF(tuple);
    return r;
}

/* After a record was appended an error cannot fall back (the record would be made twice): it
 * goes to the hook's `failed`, as the Python callbacks' `except` clauses send it to
 * internal_error (a RecursionError is noted instead). An exception that is not an Exception
 * (KeyboardInterrupt) propagates into the program, as from a Python callback. */
static PyObject *
after_record_error(const char *where)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *w = PyUnicode_FromString(where);
    PyObject *r = w == NULL ? NULL
                            : PyObject_CallFunctionObjArgs(S.failed, w, value ? value : Py_None, NULL);
    Py_XDECREF(w);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* The `c` record of the current frame (the one the event is about) with `line` (or the
 * frame's own line when line < 0): ["c",time,tid,code_id,frame_id,line(,"new")].
 * 1: appended; 0: not made, nothing changed (fall back); -1: an error after appending. */
static int
record_c(PyObject *info, long line, int fresh)
{
    PyObject *frame = (PyObject *)PyEval_GetFrame(); /* borrowed */
    if (frame == NULL)
        return 0;
    if (line < 0) {
        line = PyFrame_GetLineNumber((PyFrameObject *)frame);
        if (line < 0)
            return 0;
    }
    /* Only exact ints are written (as the Python callbacks' `%d` writes the integer): test code
     * can reach the hook's thread-local and registry, and an int subclass whose __str__ is
     * record text would write a forged record. Anything else goes to the Python callback. */
    PyObject *tid = PyObject_GetAttr(S.tl, s_tid);
    if (tid == NULL)
        return 0; /* a thread's first record: the Python callback asks for its id */
    PyObject *code_id = PyList_GetItem(info, 0);
    if (code_id == NULL || !PyLong_CheckExact(tid) || !PyLong_CheckExact(code_id)) {
        Py_DECREF(tid);
        return 0;
    }
    PyObject *t = PyObject_CallNoArgs(S.now);
    if (t == NULL || !PyLong_CheckExact(t)) {
        Py_XDECREF(t);
        Py_DECREF(tid);
        return 0;
    }
    PyObject *rec = PyUnicode_FromFormat("[\"c\",%S,%S,%S,%llu,%ld%s]", t, tid, code_id,
                                         (unsigned long long)(uintptr_t)frame, line,
                                         fresh ? ",\"new\"" : "");
    Py_DECREF(t);
    Py_DECREF(tid);
    if (rec == NULL)
        return 0;
    int r = PyList_Append(S.buf, rec);
    Py_DECREF(rec);
    if (r < 0)
        return 0;
    if (PyList_Size(S.buf) >= S.flush_at) {
        /* The flush is Python code (`_sysmon.c_flush`, a frame `gc-defer` knows), run inside
         * the callback's `gc-guard`. */
        PyObject *f = PyObject_CallNoArgs(S.flush);
        if (f == NULL)
            return -1;
        Py_DECREF(f);
    }
    return 1;
}

/* The answer of a record_c outcome: None once recorded, the Python callback when nothing was. */
static PyObject *
answer(int recorded, const char *where, PyObject *cb, PyObject *const *args, Py_ssize_t nargs)
{
    if (recorded > 0)
        Py_RETURN_NONE;
    if (recorded < 0)
        return after_record_error(where);
    return fall_back(cb, args, nargs);
}

/* PY_START(code, offset): `_sysmon.on_start`'s answers for untargeted code. */
static PyObject *
start_answer(PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return fall_back(S.py_start, args, nargs);
    PyObject *code = args[0];
    long flags = code_long(code, s_co_flags);
    if (flags < 0)
        return fall_back(S.py_start, args, nargs);
    int gen = (flags & GEN_FLAGS) != 0;
    PyObject *info = info_of(code);
    if (info == NULL)
        return fall_back(S.py_start, args, nargs);
    long kind = info_long(info, 1);
    if (kind != S.plain)
        return fall_back(S.py_start, args, nargs);
    if (S.extents && gen) {
        long n = threads_in_extents();
        if (n < 0)
            return fall_back(S.py_start, args, nargs);
        if (n == 0)
            Py_RETURN_NONE; /* outside every extent: a known untargeted generator's start */
    }
    if (!S.want_c) {
        if (!S.gen_only) {
            Py_INCREF(S.disable);
            return S.disable;
        }
        if (!gen)
            return fall_back(S.py_start, args, nargs); /* once a code: it is then DISABLEd */
    }
    if (S.extents) {
        int x = in_extent();
        if (x < 0)
            return fall_back(S.py_start, args, nargs);
        if (!x)
            Py_RETURN_NONE;
    }
    if (defined(info) != 1)
        return fall_back(S.py_start, args, nargs);
    long first = code_long(code, s_co_firstlineno);
    if (first < 0)
        return fall_back(S.py_start, args, nargs);
    return answer(record_c(info, first, gen), "PY_START", S.py_start, args, nargs);
}

/* The fast path PY_RESUME and PY_THROW share (`_sysmon._resume`'s). 1 with *info set: an
 * untargeted generator's `c` record is due inside an extent. 0 with *ans the answer otherwise:
 * None outside every extent (unless the code is a target's) or outside this thread's extent,
 * `other` for code that is no generator or when generators are not what is recorded (DISABLE
 * for PY_RESUME; None for PY_THROW, which cannot be disabled), or the Python callback `cb`
 * (what it returns, NULL if it raised) for anything the C part does not answer. */
static int
resumption(PyObject *cb, PyObject *other, Py_ssize_t want, PyObject *const *args,
           Py_ssize_t nargs, PyObject **info, PyObject **ans)
{
    if (nargs != want)
        goto fall;
    PyObject *code = args[0];
    if (S.extents) {
        long n = threads_in_extents();
        if (n < 0)
            goto fall;
        if (n == 0) {
            int t = is_target(code);
            if (t < 0)
                goto fall;
            if (!t)
                goto none; /* only a targeted generator's resumption counts there */
        }
    }
    *info = info_of(code);
    if (*info == NULL || S.want_c || info_long(*info, 1) != S.plain || defined(*info) != 1)
        goto fall;
    long flags = code_long(code, s_co_flags);
    if (flags < 0)
        goto fall;
    if (!(S.gen_only && (flags & GEN_FLAGS))) {
        Py_INCREF(other);
        *ans = other;
        return 0;
    }
    if (S.extents) {
        int x = in_extent();
        if (x < 0)
            goto fall;
        if (!x)
            goto none;
    }
    return 1;
none:
    Py_INCREF(Py_None);
    *ans = Py_None;
    return 0;
fall:
    *ans = fall_back(cb, args, nargs);
    return 0;
}

/* PY_RESUME(code, offset): `_sysmon.on_resume`'s fast path. */
static PyObject *
resume_answer(PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *info = NULL, *ans = NULL;
    if (!resumption(S.py_resume, S.disable, 2, args, nargs, &info, &ans))
        return ans;
    return answer(record_c(info, -1, 0), "PY_RESUME", S.py_resume, args, nargs);
}

/* 1 when the instruction before `offset` (bytes) in code.co_code is RETURN_GENERATOR: a throw
 * into a generator never started (its fresh start); 0 when not; -1 on error. */
static int
after_return_generator(PyObject *code, PyObject *offset)
{
    Py_ssize_t off = PyLong_AsSsize_t(offset);
    if (off == -1 && PyErr_Occurred())
        return -1;
    if (off < 2)
        return 0;
    PyObject *co = PyObject_GetAttr(code, s_co_code);
    if (co == NULL)
        return -1;
    int r = -1;
    if (PyBytes_Check(co) && off - 2 < PyBytes_Size(co))
        r = (unsigned char)PyBytes_AsString(co)[off - 2] == S.return_generator;
    Py_DECREF(co);
    return r;
}

/* PY_THROW(code, offset, exc): outside every extent only a target's counts; inside one, an
 * untargeted generator's is its `c` record, as `_sysmon.on_throw` → `_resume` make it. */
static PyObject *
throw_answer(PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *info = NULL, *ans = NULL;
    if (!resumption(S.py_throw, Py_None, 3, args, nargs, &info, &ans))
        return ans;
    int fresh = after_return_generator(args[0], args[1]);
    if (fresh < 0)
        return fall_back(S.py_throw, args, nargs);
    return answer(record_c(info, -1, fresh), "PY_THROW", S.py_throw, args, nargs);
}

/* The audit hook (`c-audit-filter`, as _fast311's on 3.11): only sys.settrace and
 * sys.setprofile reach the hook's Python audit function; every other audit event (the
 * program's, and the sys._getframe of the hook's own callbacks) costs no Python frame. */
static PyObject *
audit(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || S.py_audit == NULL || !PyUnicode_Check(args[0]))
        Py_RETURN_NONE;
    if (PyUnicode_CompareWithASCIIString(args[0], "sys.settrace") != 0
        && PyUnicode_CompareWithASCIIString(args[0], "sys.setprofile") != 0)
        Py_RETURN_NONE;
    PyObject *r = PyObject_CallFunctionObjArgs(S.py_audit, args[0], args[1], NULL);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static void keep(PyObject **slot, PyObject *v);

/* set_audit(f): the Python audit function `audit` passes the two events to. */
static PyObject *
set_audit(PyObject *mod, PyObject *f)
{
    keep(&S.py_audit, f);
    Py_RETURN_NONE;
}

/* PY_UNWIND(code, offset, exc): nothing to do outside every extent, nor for untargeted code
 * when not every return is wanted (a RecursionError is the Python callback's to note). */
static PyObject *
unwind_answer(PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return fall_back(S.py_unwind, args, nargs);
    if (S.extents) {
        long n = threads_in_extents();
        if (n == 0)
            Py_RETURN_NONE;
        if (n < 0)
            return fall_back(S.py_unwind, args, nargs);
    }
    if (S.all_r || PyObject_IsInstance(args[2], PyExc_RecursionError) != 0)
        return fall_back(S.py_unwind, args, nargs);
    PyObject *info = info_of(args[0]);
    if (info == NULL || info_long(info, 1) != S.plain)
        return fall_back(S.py_unwind, args, nargs);
    Py_RETURN_NONE;
}

/* `gc-guard`, as the Python callbacks hold it: automatic collection is off while a callback
 * runs (unless the program turned it off itself), for a collection run inside one (the frame
 * object a record asks for is an allocation) would run the program's finalizers where
 * sys.monitoring reports nothing and USDT everything. The program's next allocation collects. */
#define GUARDED(name, answer)                                                  \
    static PyObject *name(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) \
    {                                                                          \
        int was = PyGC_Disable();                                              \
        PyObject *r = answer(args, nargs);                                     \
        if (was)                                                               \
            PyGC_Enable();                                                     \
        return r;                                                              \
    }

GUARDED(on_start, start_answer)
GUARDED(on_resume, resume_answer)
GUARDED(on_throw, throw_answer)
GUARDED(on_unwind, unwind_answer)

static void
keep(PyObject **slot, PyObject *v)
{
    PyObject *old = *slot;
    Py_INCREF(v);
    *slot = v;
    Py_XDECREF(old);
}

/* setup(codes, target_ids, xn, tl, buf, flush_at, flush, now, disable, failed, plain,
 *       return_generator, extents, gen_only, want_c, all_r, py_start, py_resume, py_throw,
 *       py_unwind) */
static PyObject *
setup(PyObject *mod, PyObject *args)
{
    PyObject *codes, *target_ids, *xn, *tl, *buf, *flush, *now, *disable, *failed;
    PyObject *ps, *pr, *pt, *pu;
    Py_ssize_t flush_at;
    long plain;
    int return_generator, extents, gen_only, want_c, all_r;
    if (!PyArg_ParseTuple(args, "O!O!O!OO!nOOOOlippppOOOO:setup", &PyDict_Type, &codes,
                          &PySet_Type, &target_ids, &PyList_Type, &xn, &tl, &PyList_Type, &buf,
                          &flush_at, &flush, &now, &disable, &failed, &plain, &return_generator,
                          &extents, &gen_only, &want_c, &all_r, &ps, &pr, &pt, &pu))
        return NULL;
    if (PyList_Size(xn) < 1) {
        PyErr_SetString(PyExc_ValueError, "setup: xn must hold the count of threads in extents");
        return NULL;
    }
    keep(&S.codes, codes);
    keep(&S.target_ids, target_ids);
    keep(&S.xn, xn);
    keep(&S.tl, tl);
    keep(&S.buf, buf);
    keep(&S.flush, flush);
    keep(&S.now, now);
    keep(&S.disable, disable);
    keep(&S.failed, failed);
    keep(&S.py_start, ps);
    keep(&S.py_resume, pr);
    keep(&S.py_throw, pt);
    keep(&S.py_unwind, pu);
    S.flush_at = flush_at;
    S.plain = plain;
    S.return_generator = return_generator;
    S.extents = extents;
    S.gen_only = gen_only;
    S.want_c = want_c;
    S.all_r = all_r;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "Give the C callbacks the back-end's state."},
    {"on_start", (PyCFunction)(void (*)(void))on_start, METH_FASTCALL, "PY_START"},
    {"on_resume", (PyCFunction)(void (*)(void))on_resume, METH_FASTCALL, "PY_RESUME"},
    {"on_throw", (PyCFunction)(void (*)(void))on_throw, METH_FASTCALL, "PY_THROW"},
    {"on_unwind", (PyCFunction)(void (*)(void))on_unwind, METH_FASTCALL, "PY_UNWIND"},
    {"audit", (PyCFunction)(void (*)(void))audit, METH_FASTCALL, "The filtering audit hook."},
    {"set_audit", set_audit, METH_O, "The Python audit function `audit` calls."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastmon",
    "The sys.monitoring back-end's hot callbacks in C (flux_hook._sysmon).", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastmon(void)
{
    s_xd = PyUnicode_InternFromString("xd");
    s_tid = PyUnicode_InternFromString("tid");
    s_co_flags = PyUnicode_InternFromString("co_flags");
    s_co_firstlineno = PyUnicode_InternFromString("co_firstlineno");
    s_co_code = PyUnicode_InternFromString("co_code");
    if (!s_xd || !s_tid || !s_co_flags || !s_co_firstlineno || !s_co_code)
        return NULL;
    return PyModule_Create(&module);
}
