"""The sys.monitoring back-end's C callbacks (`flux_hook/_fastmon.c`, `c-monitoring`): what they
answer against what the Python callbacks answer. They run on the hook as the agent ships it
(FLUX_TEST_EXPECT_FASTMON=1, the C part built; 3.12+).

Run: PY -m unittest discover -s flux-hook/tests
"""
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from test_hook import HookTestCase  # noqa: E402

# Generators started and resumed inside and outside the extent, a generator expression, a
# generator closed unfinished (PY_THROW), one thrown into, one thrown into before it started (a
# fresh start), exceptions leaving untargeted frames inside the extent (PY_UNWIND), a thread:
# each of what the C callbacks answer themselves.
PROGRAM = """\
import threading

def helper(n):
    if n == 2:
        raise KeyError(n)
    return [n] * 2

def gen(n):
    for i in range(n):
        yield i

def deep(n):
    return helper(n)

def target(n):
    total = 0
    for i in gen(n):
        try:
            total += sum(deep(i))
        except KeyError:
            total += 100
    total += sum(x for x in gen(3))
    g = gen(5)
    next(g)
    g.close()
    h = gen(4)
    next(h)
    try:
        h.throw(ValueError("in"))
    except ValueError:
        total += 1
    k = gen(2)
    try:
        k.throw(ValueError("fresh"))
    except ValueError:
        total += 1
    return total

def test_same():
    assert sum(gen(3)) == 3
    try:
        deep(2)
    except KeyError:
        pass
    assert target(4) == 113
    t = threading.Thread(target=target, args=(3,))
    t.start()
    t.join()
"""


def expect_fastmon(test):
    if sys.version_info < (3, 12):
        test.skipTest("sys.monitoring is 3.12+")
    if os.environ.get("FLUX_TEST_EXPECT_FASTMON") != "1":
        test.skipTest("runs on the hook as the agent ships it (FLUX_TEST_EXPECT_FASTMON=1)")


class TestFastmon(HookTestCase):
    def normal(self, calls, env):
        """The records of PROGRAM traced with scope `targets` under `calls`, their times,
        threads, frame ids and reprs' addresses left out (frames numbered in order of
        appearance)."""
        r = self.run_pytest("test_m.py", PROGRAM, calls,
                            {"files": ["test_m.py"], "functions": ["target"], "scope": "targets"},
                            env=env)
        codes, frames, count, out = r.codes(), {}, itertools.count(), []
        for x in r.records():
            if x[0] in ("c", "r", "l", "x", "h"):
                # A frame's id is its address, which a later frame may reuse, and the C
                # callbacks allocate otherwise than the Python ones: frames are told apart by
                # (id, code), and an ended activation's id is free again.
                f = frames.setdefault((x[4], x[3]), next(count))
                if x[0] == "r" and x[6] in ("return", "unwind"):
                    del frames[(x[4], x[3])]
                rec = [x[0], codes[x[3]][4], f] + x[5:]
                text = re.sub(r" at 0x[0-9a-f]+", " at ADDR", json.dumps(rec).replace(r.tmp, "TMP"))
                out.append(json.loads(text))
            elif x[0] in ("xo", "xc", "ts", "te", "wo", "wc", "lost"):
                out.append([x[0]])
        return out

    def test_the_c_callbacks_record_what_the_python_callbacks_record(self):
        # `c-monitoring` answers only what the Python callbacks' fast paths answer and hands
        # the rest to them: the same records with it and without (FLUX_HOOK_FASTMON=off), in
        # the mode 3.15 runs with USDT (calls="generators") and in the hook-only one.
        expect_fastmon(self)
        for calls in ("generators", "entries"):
            with self.subTest(calls=calls):
                python = self.normal(calls, {"FLUX_HOOK_FASTMON": "off"})
                c = self.normal(calls, {})
                names = {x[1] for x in c if x[0] == "c"}
                self.assertIn("target", names)
                self.assertIn("gen", names, "no generator start or resumption was recorded")
                self.assertEqual(c, python)

    def test_the_shipped_hook_uses_the_c_callbacks(self):
        # What the parity test compares is only a comparison if the C callbacks were in use:
        # the program asks sys.monitoring which callback flux's tool has for PY_RESUME.
        expect_fastmon(self)
        src = (
            "import sys\n"
            "from flux_hook import _core\n"
            "M = sys.monitoring\n"
            "tool = next(t for t in range(6) if M.get_tool(t) == 'flux-hook')\n"
            "cb = M.register_callback(tool, M.events.PY_RESUME, None)\n"
            "M.register_callback(tool, M.events.PY_RESUME, cb)\n"
            "print(type(cb).__name__, getattr(cb, '__module__', None))\n"
        )
        config = {"files": ["x.py"], "functions": ["f"], "scope": "targets"}
        for env, want in (({}, "builtin_function_or_method flux_hook._fastmon"),
                          ({"FLUX_HOOK_FASTMON": "off"}, "function flux_hook._sysmon")):
            with self.subTest(env=env):
                r = harness.run(self, src, calls="generators", config=config, env=env)
                self.assertEqual(r.proc.stdout.strip(), want, r.proc.stderr)

    def test_a_forged_id_is_not_written_as_text(self):
        # As `_fast311`'s (stop 46): test code can reach the hook's thread-local and registry,
        # and an int subclass whose __str__ is record text would, formatted with str(), write a
        # forged record into the stream. Only exact ints are written; anything else goes to the
        # Python callback, which formats with %d.
        expect_fastmon(self)
        src = textwrap.dedent("""\
            import json, sys, threading, time
            from opcode import opmap
            from flux_hook import _fastmon as f
            class Forged(int):
                def __str__(self):
                    return '1,1,1,1]\\n["xc",1,1'
            def gen():
                yield 1
            calls = []
            tl = threading.local()
            tl.xd, tl.tid = 1, Forged(7)
            buf = []
            code = gen.__code__
            codes = {id(code): [7, 1, code, None, True, None, None]}
            def py(*a):
                calls.append(len(a))
            f.setup(codes, set(), [1], tl, buf, 100, lambda: None, time.monotonic_ns,
                    sys.monitoring.DISABLE, lambda w, e: None, 1, opmap["RETURN_GENERATOR"],
                    True, True, False, False, py, py, py, py)
            f.on_resume(code, 0)
            codes[id(code)][0] = Forged(7)
            tl.tid = 7
            f.on_resume(code, 0)
            codes[id(code)][0] = 7
            f.on_resume(code, 0)
            print(json.dumps({"calls": calls, "buf": buf}))
            """)
        env = dict(os.environ, PYTHONPATH=harness.HOOK_DIR)
        p = subprocess.run(harness.PYTHON + ["-c", src], capture_output=True, text=True, env=env,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual(out["calls"], [2, 2], out)
        self.assertEqual(len(out["buf"]), 1, out)
        self.assertNotIn("xc", out["buf"][0], out)
        self.assertEqual(json.loads(out["buf"][0])[2:4], [7, 7], out)


if __name__ == "__main__":
    unittest.main()
