"""End-to-end tests of flux-hook: real interpreter ($FLUX_TEST_PYTHON), real Unix socket.

Run: PY -m unittest discover -s flux-hook/tests
"""
import json
import os
import subprocess
import sys
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

VERSION = harness.interp_version()


def seq(run, *, names=None, kinds="crlxh"):
    """(kind, qualname, line[, how]) of the program's records, in stream order."""
    out = []
    for e in run.events(file_suffix="prog.py"):
        k, name = e[0], e[1]
        if k not in kinds or (names is not None and name not in names):
            continue
        if k == "r":
            out.append((k, name, e[5], e[6]))
        elif k == "x":
            out.append((k, name, e[5], e[6], e[8]))
        elif k == "h":
            out.append((k, name, e[5], e[6]))
        else:
            out.append((k, name, e[5]))
    return out


def check_balanced(test, run, conn=None):
    """Every 'c' is closed by exactly one 'r' of the same frame on the same thread, LIFO."""
    stacks = {}
    for r in run.records(conn):
        if r[0] == "c":
            stacks.setdefault(r[2], []).append((r[3], r[4]))
        elif r[0] == "r":
            st = stacks.get(r[2])
            test.assertTrue(st, "return without call: %r" % (r,))
            test.assertEqual(st.pop(), (r[3], r[4]), "unbalanced return %r" % (r,))
    for tid, st in stacks.items():
        test.assertEqual(st, [], "activations never closed on thread %s" % tid)


class HookTestCase(unittest.TestCase):
    def run_ok(self, source, **kw):
        r = harness.run(self, source, **kw)
        self.assertEqual(r.proc.returncode, 0, r.proc.stderr)
        self.assertTrue(r.conns, "no connection; stderr: %s" % r.proc.stderr)
        hello = r.main[0]
        self.assertEqual(hello["hello"], 1)
        self.assertEqual(hello["mode"], "monitoring" if VERSION >= (3, 12) else "settrace")
        bye = r.main[-1]
        self.assertEqual(bye[0], "bye")
        self.assertEqual(bye[1], len(r.main) - 2, "bye must count the records")
        return r

    def run_pytest(self, name, src, calls, config, env=None, rc=0):
        """Run pytest on one test file `name` holding `src` under the hook (its plugin loaded)
        with `calls` and `config`; pytest must exit with `rc`."""
        r = harness.run(self, "", args=["-m", "pytest", "-q", "-p", "no:cacheprovider", name],
                        extra_files={name: src}, calls=calls, config=config,
                        env=dict(env or {}, PYTEST_PLUGINS="flux_hook.pytest_plugin"))
        self.assertEqual(r.proc.returncode, rc, r.proc.stdout + r.proc.stderr)
        return r


FACT = """\
def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)

print(fact(3))
"""


class TestCalls(HookTestCase):
    def test_recursive_factorial_exact_sequence(self):
        r = self.run_ok(FACT)
        self.assertEqual(r.proc.stdout, "6\n")
        self.assertEqual(
            seq(r, names={"fact"}),
            [
                ("c", "fact", 1),
                ("l", "fact", 2),
                ("l", "fact", 4),
                ("c", "fact", 1),
                ("l", "fact", 2),
                ("l", "fact", 4),
                ("c", "fact", 1),
                ("l", "fact", 2),
                ("l", "fact", 3),
                ("r", "fact", 3, "return"),
                ("r", "fact", 4, "return"),
                ("r", "fact", 4, "return"),
            ],
        )
        ev = [e for e in r.events(file_suffix="prog.py") if e[1] == "fact"]
        self.assertEqual([e[7] for e in ev if e[0] == "r"], [["1", "int"], ["2", "int"], ["6", "int"]])
        # First line event of each frame carries the argument, later ones only changes.
        self.assertEqual([e[6] for e in ev if e[0] == "l"][:2], [{"n": ["3", "int"]}, None])
        check_balanced(self, r)

    def test_line_events_are_settraces_a_loop_on_one_line_included(self):
        # The witness's settrace reference found 3.12+ counting a line once where settrace (and
        # 3.11's back-end) count it at every iteration: a loop on one line, an inlined
        # comprehension. The expected lines are the interpreter's own settrace's, untraced.
        body = """\
        def f(xs):
            t = 0
            for x in xs: t += x
            n = 0
            while n < 2: n += 1
            return [x * 2 for x in xs], t
        """
        import textwrap
        body = textwrap.dedent(body)
        probe = body + textwrap.dedent("""\
        import sys
        out = []
        def tr(frame, ev, arg):
            if frame.f_code.co_name == "f":
                if ev == "line":
                    out.append(frame.f_lineno)
                return tr
        sys.settrace(tr)
        f([1, 2, 3])
        sys.settrace(None)
        print(out)
        """)
        want = subprocess.run(harness.PYTHON + ["-c", probe], capture_output=True,
                              text=True, check=True).stdout.strip()
        r = self.run_ok(body + "f([1, 2, 3])\n", config={"files": ["prog.py"], "functions": ["f"]})
        self.assertEqual(str([x[2] for x in seq(r, kinds="l", names={"f"})]), want)

    def test_calls_all_is_balanced_and_covers_untargeted_code(self):
        r = self.run_ok(FACT + "import json\njson.dumps({'a': [1]})\n", files=["nothing_matches.py"])
        names = {c[4] for c in r.codes().values()}
        self.assertIn("fact", names)
        self.assertIn("JSONEncoder.encode", names)
        self.assertEqual([k for k in seq(r) if k[0] in "lxh"], [])
        # Untargeted returns carry no value.
        self.assertTrue(all(e[7] is None for e in r.events() if e[0] == "r" and e[6] != "unwind"))
        check_balanced(self, r)

    def test_calls_entries_records_every_call_and_only_targeted_returns(self):
        r = self.run_ok(FACT + "import json\njson.dumps([1])\n", calls="entries",
                        config={"files": ["prog.py"], "functions": ["fact"]})
        self.assertEqual(r.main[0]["calls"], "entries")
        ev = r.events()
        self.assertIn("JSONEncoder.encode", [e[1] for e in ev if e[0] == "c"])
        self.assertEqual({e[1] for e in ev if e[0] == "r"}, {"fact"})
        self.assertEqual(seq(r, kinds="cr"), [
            ("c", "<module>", 1),
            ("c", "fact", 1), ("c", "fact", 1), ("c", "fact", 1),
            ("r", "fact", 3, "return"), ("r", "fact", 4, "return"), ("r", "fact", 4, "return"),
        ])

    def test_calls_none_records_only_targeted_returns(self):
        r = self.run_ok(FACT, calls="none", config={"files": ["prog.py"], "functions": ["fact"]})
        ev = r.events()
        self.assertEqual([e for e in ev if e[0] == "c"], [])
        self.assertEqual(seq(r, kinds="rl"), [
            ("l", "fact", 2), ("l", "fact", 4), ("l", "fact", 2), ("l", "fact", 4),
            ("l", "fact", 2), ("l", "fact", 3),
            ("r", "fact", 3, "return"), ("r", "fact", 4, "return"), ("r", "fact", 4, "return"),
        ])

    def test_calls_generators_records_only_generator_activation_starts(self):
        src = GEN + "import json\njson.dumps([1])\n"
        r = self.run_ok(src, calls="generators", config={"files": ["prog.py"], "functions": ["outer"]})
        self.assertEqual(r.main[0]["calls"], "generators")
        cs = [e for e in r.events() if e[0] == "c"]
        self.assertNotIn("JSONEncoder.encode", [e[1] for e in cs])
        self.assertEqual([(e[1], e[5]) for e in cs if e[1] in ("gen", "outer")], [
            ("outer", 6), ("gen", 1), ("outer", 7), ("gen", 3), ("outer", 7), ("gen", 3),
        ])
        # Returns only for targeted code (outer), with values.
        self.assertEqual(seq(r, kinds="r"), [
            ("r", "outer", 7, "yield"), ("r", "outer", 7, "yield"), ("r", "outer", 8, "return"),
        ])

    def test_function_filter_and_nested_functions(self):
        src = """\
        def outer(x):
            def inner(y):
                return y + 1
            return inner(x) * 2

        def other():
            return 0

        other()
        outer(1)
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["outer"]})
        self.assertEqual(seq(r, kinds="lr", names={"outer", "outer.<locals>.inner"}), [
            ("l", "outer", 2), ("l", "outer", 4),
            ("l", "outer.<locals>.inner", 3),
            ("r", "outer.<locals>.inner", 3, "return"),
            ("r", "outer", 4, "return"),
        ])
        # other() is still recorded as a call (calls=all) but without lines or values.
        self.assertIn(("c", "other", 6), seq(r, kinds="c"))
        self.assertIn(("r", "other", 7, "return"), seq(r, kinds="r", names={"other"}))
        self.assertTrue(all(e[7] is None for e in r.events() if e[1] == "other" and e[0] == "r"))

    def test_module_functions_narrow_targets_by_swe_fluxs_rule_on_module_and_qualname(self):
        # SWE-Flux's TRACE_FUNC on `<module>.<qualname>` (the script's module is __main__):
        # `outer` (last component) targets outer but not outer.<locals>.inner, `C.m` (dotted
        # suffix) only that method, `__main__.h` (exact) h; other() and C.n are plain code:
        # their calls are recorded, never their lines or locals. (The swe-flux log once
        # targeted every function of TRACE_FILE and repr'd all their locals: fastapi's
        # get_openapi timed out.)
        src = """\
        def outer(x):
            def inner(y):
                return y + 1
            return inner(x) * 2

        class C:
            def m(self):
                return 1
            def n(self):
                return 2

        def h():
            return 3

        def other():
            return 0

        other(); outer(1); C().m(); C().n(); h()
        """
        cfg = {"files": ["prog.py"], "module_functions": ["outer", "C.m", "__main__.h"],
               "dialect": "swe-flux"}
        r = self.run_ok(src, config=cfg)
        lined = {e[1] for e in r.events(file_suffix="prog.py") if e[0] == "l"}
        self.assertEqual(lined, {"outer", "C.m", "h"})
        calls = {e[1] for e in r.events(file_suffix="prog.py") if e[0] == "c"}
        self.assertTrue({"other", "outer.<locals>.inner", "C.n"} <= calls, calls)
        # A dotted prefix of the module targets all of it, nested functions included.
        r = self.run_ok(src, config=dict(cfg, module_functions=["__main__"]))
        lined = {e[1] for e in r.events(file_suffix="prog.py") if e[0] == "l"}
        self.assertTrue({"outer", "outer.<locals>.inner", "C.m", "C.n", "h", "other"} <= lined)

    def test_event_subset_line_only(self):
        src = """\
        def f(a):
            b = a + 1
            if b:
                raise KeyError(b)

        try:
            f(1)
        except KeyError:
            pass
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["f"], "events": ["line"],
                                     "tests": False})
        ev = [e for e in r.events(file_suffix="prog.py") if e[1] == "f"]
        self.assertEqual([(e[0], e[5]) for e in ev], [("c", 1), ("l", 2), ("l", 3), ("l", 4), ("r", 4)])
        self.assertTrue(all(e[6] is None for e in ev if e[0] == "l"))  # no "variables"
        r_ = ev[-1]
        self.assertEqual((r_[6], r_[7], r_[8]), ("unwind", ["KeyError", "2"], None))

    def test_glob_file_pattern(self):
        r = self.run_ok(FACT, config={"files": ["*/pro?.py"], "functions": ["fact"]})
        self.assertEqual(len([x for x in seq(r, kinds="l")]), 6)


GEN = """\
def gen(k):
    for i in range(k):
        yield i
    return 'done'

def outer():
    x = yield from gen(2)
    return x

print(list(outer()))
"""


class TestGenerators(HookTestCase):
    def test_yield_from_activations(self):
        r = self.run_ok(GEN, config={"files": ["prog.py"], "functions": ["gen", "outer"]})
        self.assertEqual(r.proc.stdout, "[0, 1]\n")
        self.assertEqual(seq(r, kinds="crx", names={"gen", "outer"}), [
            ("c", "outer", 6),
            ("c", "gen", 1),
            ("r", "gen", 3, "yield"),
            ("r", "outer", 7, "yield"),
            ("c", "outer", 7),
            ("c", "gen", 3),
            ("r", "gen", 3, "yield"),
            ("r", "outer", 7, "yield"),
            ("c", "outer", 7),
            ("c", "gen", 3),
            ("r", "gen", 4, "return"),
            ("r", "outer", 8, "return"),
        ])
        ev = r.events(file_suffix="prog.py")
        gen_keys = {e[4] for e in ev if e[1] == "gen"}
        self.assertEqual(len(gen_keys), 1, "one frame_key for all activations of a generator")
        self.assertEqual([e[7] for e in ev if e[0] == "r" and e[1] == "gen"],
                         [["0", "int"], ["1", "int"], ["'done'", "str"]])
        check_balanced(self, r)

    def test_throw_and_close(self):
        src = """\
        def g():
            try:
                yield 1
            except KeyError:
                yield 2
            yield 3

        it = g()
        next(it)
        print(it.throw(KeyError))
        try:
            it.throw(ValueError("v"))
        except ValueError:
            pass
        it2 = g()
        next(it2)
        it2.close()
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["g"]})
        self.assertEqual(r.proc.stdout, "2\n")
        got = seq(r, kinds="crxh", names={"g"})
        self.assertEqual(got, [
            ("c", "g", 1), ("r", "g", 3, "yield"),
            # throw() and close() put the exception in at the yield: "thrown", not raised by g.
            ("c", "g", 3), ("x", "g", 3, "KeyError", "thrown"), ("h", "g", 4, "KeyError"),
            ("r", "g", 5, "yield"),
            ("c", "g", 5), ("x", "g", 5, "ValueError", "thrown"), ("r", "g", 5, "unwind"),
            ("c", "g", 1), ("r", "g", 3, "yield"),
            ("c", "g", 3), ("x", "g", 3, "GeneratorExit", "thrown"), ("r", "g", 4, "unwind"),
        ])
        check_balanced(self, r)

    def test_coroutine_await(self):
        src = """\
        class Tick:
            def __await__(self):
                yield "tick"
                return 5

        async def co():
            x = await Tick()
            return x + 1

        c = co()
        print(c.send(None))
        try:
            c.send(None)
        except StopIteration as e:
            print(e.value)
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["co"]})
        self.assertEqual(r.proc.stdout, "tick\n6\n")
        self.assertEqual(seq(r, kinds="crxh", names={"co"}), [
            ("c", "co", 6), ("r", "co", 7, "yield"), ("c", "co", 7), ("r", "co", 8, "return"),
        ])
        ev = [e for e in r.events(file_suffix="prog.py") if e[1] == "co" and e[0] == "r"]
        self.assertEqual([e[7] for e in ev], [["'tick'", "str"], ["6", "int"]])
        check_balanced(self, r)


EXC = """\
def boom():
    raise ValueError("bad")

def passthru():
    boom()

def catcher():
    try:
        passthru()
    except ValueError as e:
        return "caught " + str(e)

def rethrow():
    try:
        boom()
    except ValueError:
        raise

def fin():
    try:
        boom()
    finally:
        done = 1

def nomatch():
    try:
        boom()
    except KeyError:
        return "no"

def driver():
    out = [catcher()]
    for f in (rethrow, fin, nomatch):
        try:
            f()
        except ValueError as e:
            out.append(f.__name__)
    return out

print(driver())
"""


class TestExceptions(HookTestCase):
    def test_exception_records(self):
        r = self.run_ok(EXC, config={"files": ["prog.py"], "functions": [
            "boom", "passthru", "catcher", "rethrow", "fin", "nomatch", "driver"]})
        self.assertEqual(r.proc.stdout, "['caught bad', 'rethrow', 'fin', 'nomatch']\n")
        got = [x for x in seq(r, kinds="xhr") if x[1] not in ("driver", "<module>") or x[0] != "r"]
        B = [("x", "boom", 2, "ValueError", "raise"), ("r", "boom", 2, "unwind")]
        self.assertEqual(got, [
            *B,
            ("x", "passthru", 5, "ValueError", "propagate"), ("r", "passthru", 5, "unwind"),
            ("x", "catcher", 9, "ValueError", "propagate"), ("h", "catcher", 10, "ValueError"),
            ("r", "catcher", 11, "return"),
            *B,
            ("x", "rethrow", 15, "ValueError", "propagate"), ("h", "rethrow", 16, "ValueError"),
            ("x", "rethrow", 17, "ValueError", "reraise"), ("r", "rethrow", 17, "unwind"),
            ("x", "driver", 35, "ValueError", "propagate"), ("h", "driver", 36, "ValueError"),
            *B,
            ("x", "fin", 21, "ValueError", "propagate"), ("r", "fin", 23, "unwind"),
            ("x", "driver", 35, "ValueError", "propagate"), ("h", "driver", 36, "ValueError"),
            *B,
            ("x", "nomatch", 27, "ValueError", "propagate"), ("r", "nomatch", 28, "unwind"),
            ("x", "driver", 35, "ValueError", "propagate"), ("h", "driver", 36, "ValueError"),
        ])
        ev = r.events(file_suffix="prog.py")
        unwinds = [e for e in ev if e[0] == "r" and e[6] == "unwind"]
        self.assertEqual(len(unwinds), len({(e[3], e[4], e[2]) for e in unwinds}))
        self.assertTrue(all(e[7] == ["ValueError", "bad"] for e in unwinds))
        # The frame that finished normally after catching returns its value.
        self.assertIn(["'caught bad'", "str"], [e[7] for e in ev if e[1] == "catcher" and e[0] == "r"])
        check_balanced(self, r)

    def test_exception_type_names_and_uncaught_exit(self):
        src = """\
        class MyError(Exception):
            pass

        def f():
            raise MyError("m")

        f()
        """
        r = harness.run(self, src, config={"files": ["prog.py"]})
        self.assertEqual(r.proc.returncode, 1)
        self.assertIn("MyError: m", r.proc.stderr)
        xs = [e for e in r.events(file_suffix="prog.py") if e[0] == "x"]
        self.assertEqual([(e[1], e[6], e[7], e[8]) for e in xs], [
            ("f", "__main__.MyError", "m", "raise"),
            ("<module>", "__main__.MyError", "m", "propagate"),
        ])
        self.assertEqual(r.main[-1][0], "bye")
        check_balanced(self, r)


    def test_handler_whose_first_line_repeats_is_no_reraise(self):
        # 17.1: on 3.11 the first line of an except body executing again (a loop header, a
        # statement spanning several lines) was taken for a bare `raise` caught in the frame:
        # an invented `x reraise` + `h` pair each time. A real bare `raise` is still seen.
        src = """\
        def loop(items):
            n = 0
            try:
                raise ValueError("v")
            except ValueError:
                for x in items:
                    n += x
            return n

        def multi():
            try:
                raise KeyError("k")
            except KeyError:
                y = max(1,
                        2)
            return y

        def bare():
            try:
                try:
                    raise KeyError("k")
                except KeyError:
                    for _ in range(2):
                        pass
                    raise
            except KeyError:
                for _ in range(2):
                    pass
            return 3

        print(loop([1, 2, 3]), multi(), bare())
        """
        r = self.run_ok(src)
        self.assertEqual(r.proc.stdout, "6 2 3\n")
        self.assertEqual(seq(r, kinds="xh"), [
            ("x", "loop", 4, "ValueError", "raise"), ("h", "loop", 5, "ValueError"),
            ("x", "multi", 12, "KeyError", "raise"), ("h", "multi", 13, "KeyError"),
            ("x", "bare", 21, "KeyError", "raise"), ("h", "bare", 22, "KeyError"),
            ("x", "bare", 25, "KeyError", "reraise"), ("h", "bare", 26, "KeyError"),
        ])

    def test_a_bare_raise_reports_the_message_its_handler_gave_the_exception(self):
        # `bare-raise-message`: flask's Config.from_file catches an OSError, sets its strerror
        # and re-raises it bare; on 3.11 (no event for a bare raise) the re-raise was reported
        # with the message it had when it was caught, so the gold's message was stale.
        src = """\
        def load():
            try:
                raise OSError(2, "No such file")
            except OSError as e:
                e.strerror = "Unable to load (%s)" % e.strerror
                raise

        def caller():
            try:
                load()
            except OSError as e:
                return str(e)

        print(caller())
        """
        r = self.run_ok(src)
        self.assertEqual(r.proc.stdout, "[Errno 2] Unable to load (No such file)\n")
        xs = [e for e in r.events(file_suffix="prog.py") if e[0] == "x"]
        new = "[Errno 2] Unable to load (No such file)"
        self.assertEqual([(e[1], e[6], e[7], e[8]) for e in xs], [
            ("load", "FileNotFoundError", "[Errno 2] No such file", "raise"),
            ("load", "FileNotFoundError", new, "reraise"),
            ("caller", "FileNotFoundError", new, "propagate"),
        ])
        unwinds = [e for e in r.events(file_suffix="prog.py") if e[0] == "r" and e[6] == "unwind"]
        self.assertEqual([e[7] for e in unwinds], [["FileNotFoundError", new]])

    def test_an_exception_out_of_an_import_propagates_into_the_importer(self):
        # `import-frames`: CPython removes importlib's frames from an import's traceback, so
        # a module's code raising while imported was reported as a re-raise in the importer,
        # and a missing module's ModuleNotFoundError (raised in `_find_and_load`) as raised
        # there (flask's CertParamType.convert: the witness's reference saw it propagate).
        src = """\
        def f():
            try:
                import badmod
            except ZeroDivisionError:
                return "caught"

        def g():
            try:
                import no_such_module_xyz
            except ModuleNotFoundError:
                return "missing"

        def h():
            try:
                raise ImportError("own")
            except ImportError:
                return "own"

        def k():
            # packaging's _get_manylinux_module: a call of the builtin, not an `import`
            try:
                return __import__("no_such_module_abc")
            except ModuleNotFoundError:
                return "called"

        def m():
            try:
                raise ModuleNotFoundError("No module named 'mine'")
            except ModuleNotFoundError:
                return "mine"

        print(f(), g(), h(), k(), m())
        """
        r = self.run_ok(src, extra_files={"badmod.py": "x = 1\ny = x / 0\n"})
        self.assertEqual(r.proc.stdout, "caught missing own called mine\n")
        xs = [e for e in r.events(file_suffix="prog.py") if e[0] == "x"]
        self.assertEqual([(e[1], e[6], e[8]) for e in xs], [
            ("f", "ZeroDivisionError", "propagate"),
            ("g", "ModuleNotFoundError", "propagate"),
            ("h", "ImportError", "raise"),
            ("k", "ModuleNotFoundError", "propagate"),
            ("m", "ModuleNotFoundError", "raise"),
        ])


class TestMixedSemantics(HookTestCase):
    """prog_mix.py: decorators, with-suppress, return in finally, raise from, generator raising
    into a for loop, bare raise caught by an outer handler of the same frame, loops of
    try/except, classes, lambdas. The same sequence is expected on every interpreter."""

    def test_mixed_program(self):
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prog_mix.py")) as fh:
            src = fh.read()
        r = self.run_ok(src)
        got = [x for x in seq(r, kinds="crxh") if x[1] != "<module>"]
        self.maxDiff = None
        self.assertEqual(got, EXPECTED_MIX)
        check_balanced(self, r)


EXPECTED_MIX = [
    ('c', 'deco', 3),
    ('r', 'deco', 4, 'return'),
    ('c', 'K', 60),
    ('r', 'K', 63, 'return'),
    ('c', 'main', 66),
    ('c', 'decorated', 6),
    ('r', 'decorated', 8, 'return'),
    ('c', 'suppress', 10),
    ('x', 'suppress', 12, 'KeyError', 'raise'),
    ('r', 'suppress', 13, 'return'),
    ('c', 'finret', 15),
    ('x', 'finret', 17, 'ValueError', 'raise'),
    ('r', 'finret', 19, 'return'),
    ('c', 'chain', 21),
    ('x', 'chain', 23, 'KeyError', 'raise'),
    ('h', 'chain', 24, 'KeyError'),
    ('x', 'chain', 25, 'RuntimeError', 'raise'),
    ('r', 'chain', 25, 'unwind'),
    ('x', 'main', 71, 'RuntimeError', 'propagate'),
    ('h', 'main', 72, 'RuntimeError'),
    ('c', 'consume', 31),
    ('c', 'gen_raises', 27),
    ('r', 'gen_raises', 28, 'yield'),
    ('c', 'gen_raises', 28),
    ('x', 'gen_raises', 29, 'IndexError', 'raise'),
    ('r', 'gen_raises', 29, 'unwind'),
    ('x', 'consume', 34, 'IndexError', 'propagate'),
    ('h', 'consume', 36, 'IndexError'),
    ('r', 'consume', 38, 'return'),
    ('c', 'nested_handlers', 40),
    ('x', 'nested_handlers', 43, 'ValueError', 'raise'),
    ('h', 'nested_handlers', 44, 'ValueError'),
    ('x', 'nested_handlers', 45, 'ValueError', 'reraise'),
    ('h', 'nested_handlers', 46, 'ValueError'),
    ('r', 'nested_handlers', 47, 'return'),
    ('c', 'loop_try', 49),
    ('x', 'loop_try', 54, 'ZeroDivisionError', 'raise'),
    ('h', 'loop_try', 56, 'ZeroDivisionError'),
    ('x', 'loop_try', 54, 'ZeroDivisionError', 'raise'),
    ('h', 'loop_try', 56, 'ZeroDivisionError'),
    ('r', 'loop_try', 58, 'return'),
    ('c', 'K.__init__', 61),
    ('r', 'K.__init__', 62, 'return'),
    ('c', 'K.get', 63),
    ('r', 'K.get', 64, 'return'),
    ('c', 'main.<locals>.<lambda>', 78),
    ('r', 'main.<locals>.<lambda>', 78, 'return'),
    ('r', 'main', 78, 'return'),
]


class TestLosses(HookTestCase):
    def test_recursion_limit_is_reported_as_a_loss(self):
        src = """\
        def rec(n):
            return rec(n + 1)

        try:
            rec(0)
        except RecursionError:
            print("caught")
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["rec"]})
        self.assertEqual(r.proc.stdout, "caught\n")
        self.assertIn("flux-hook: records lost:", r.proc.stderr)
        lost = [x for x in r.records() if x[0] == "lost"]
        self.assertTrue(lost)
        self.assertIn("RecursionError", lost[0][3])


class TestExit(HookTestCase):
    def test_sys_exit_unwinds_and_says_bye(self):
        src = """\
        import sys

        def leave():
            sys.exit(3)

        leave()
        """
        r = harness.run(self, src, config={"files": ["prog.py"]})
        self.assertEqual(r.proc.returncode, 3, r.proc.stderr)
        self.assertEqual(r.main[-1], ["bye", len(r.main) - 2])
        self.assertEqual(seq(r, kinds="xr", names={"leave", "<module>"}), [
            ("x", "leave", 4, "SystemExit", "raise"), ("r", "leave", 4, "unwind"),
            ("x", "<module>", 6, "SystemExit", "propagate"), ("r", "<module>", 6, "unwind"),
        ])
        check_balanced(self, r)


class TestDeterminism(HookTestCase):
    def test_unseeded_random_generators_are_seeded(self):
        # 17.4: SymPy's assumption system shuffles with a random.Random() of its own, seeded
        # from the OS: every run of a test touching symbols took another path. Under the hook
        # the module generator and every Random() made without a seed start from FLUX_HOOK_SEED
        # (default 0), exactly as if the program had seeded them; an explicit seed is kept.
        src = """\
        import random
        r = random.Random()
        r2 = random.Random()
        print(random.random(), r.random(), r2.random(), random.Random(5).random())
        """
        want = subprocess.run(harness.PYTHON + ["-c", "import random; random.seed(0); "
                              "print(random.random(), random.Random(0).random(), "
                              "random.Random(0).random(), random.Random(5).random())"],
                              capture_output=True, text=True, check=True).stdout
        a = self.run_ok(src)
        b = self.run_ok(src)
        self.assertEqual(a.proc.stdout, want)
        self.assertEqual(b.proc.stdout, want)
        seven = self.run_ok(src, env={"FLUX_HOOK_SEED": "7"}).proc.stdout
        self.assertNotEqual(seven, want)
        self.assertEqual(seven, self.run_ok(src, env={"FLUX_HOOK_SEED": "7"}).proc.stdout)
        off = {self.run_ok(src, env={"FLUX_HOOK_SEED": "off"}).proc.stdout for _ in range(2)}
        self.assertEqual(len(off), 2, "with FLUX_HOOK_SEED=off the OS seeds them")
        bad = harness.run(self, src, env={"FLUX_HOOK_SEED": "zero"})
        self.assertEqual(bad.proc.returncode, 97)
        self.assertIn("bad FLUX_HOOK_SEED", bad.proc.stderr)


class TestLocals(HookTestCase):
    def test_changed_locals_limits_and_failed_repr(self):
        src = """\
        class Bad:
            def __repr__(self):
                raise RuntimeError("no")

        def f(a, b):
            s = "x" * 500
            nested = [[[[[1]]]]]
            bad = Bad()
            a = a + 1
            return a

        f(1, {"k": (1, 2)})
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["f"],
                                     "limits": {"repr": 20, "locals": 4, "depth": 2}})
        ls = [e for e in r.events(file_suffix="prog.py") if e[0] == "l"]
        self.assertEqual([e[5] for e in ls], [6, 7, 8, 9, 10])
        self.assertEqual(ls[0][6], {"a": ["1", "int"], "b": ["{'k': (1, 2)}", "dict"]})
        self.assertEqual(ls[1][6], {"s": ["'xxxxxxxxxxxxxxxx...", "str"]})
        self.assertEqual(len(ls[1][6]["s"][0]), 20)
        self.assertEqual(ls[2][6], {"nested": ["[[[...]]]", "list"]})
        self.assertEqual(ls[3][6], None)  # 'bad' is the 5th local: over the limit of 4
        self.assertEqual(ls[4][6], {"a": ["2", "int"]})
        r2 = self.run_ok(src, config={"files": ["prog.py"], "functions": ["f"]})
        ls = [e for e in r2.events(file_suffix="prog.py") if e[0] == "l"]
        self.assertEqual(ls[3][6], {"bad": ["<repr failed: Bad>", "Bad"]})

    def test_reading_locals_keeps_no_dropped_value_alive(self):
        # Issue 23.5a: before 3.13 `frame.f_locals` is a snapshot cached on the frame; the hook
        # read it and the snapshot kept a dropped local alive, so its `__del__` ran at the
        # hook's next read, untraced. It must run where the program drops it, traced, and the
        # frame's locals (cells, a predicate's read) must be what they were.
        src = """\
        class D:
            def __del__(self):
                print("del")

        def f(a):
            x = D()
            z = [a]
            def inner():
                return z
            del x
            z.append(2)
            return a, inner()

        print(f(5))
        """
        preds = [{"expr": "a == 5", "lines": [10, 11]}]
        r = self.run_ok(src, config={"files": ["prog.py"], "predicates": preds})
        self.assertEqual(r.proc.stdout, "del\n(5, [5, 2])\n")
        s = seq(r, kinds="cl")
        i = s.index(("l", "f", 10))
        self.assertEqual(s[i + 1], ("c", "D.__del__", 2), s)
        self.assertEqual(s[i + 3], ("l", "f", 11), s)
        self.assertEqual([x for x in r.records() if x[0] == "lost"], [])
        ks = [x[7] for x in r.records() if x[0] == "k"]
        self.assertEqual(ks, [True, True])

    def test_a_locals_dict_the_program_holds_is_a_loss_before_3_13(self):
        # Emptying it would change what the program sees; refreshing it (every read) can
        # finalize a value the program dropped inside the hook.
        src = """\
        def f():
            held = locals()
            y = 1
            return sorted(held)

        print(f())
        """
        r = self.run_ok(src)
        lost = [x[3] for x in r.records() if x[0] == "lost"]
        if VERSION >= (3, 13):
            self.assertEqual(lost, [])
            return
        self.assertEqual(len(lost), 1, lost)
        self.assertIn("the program holds the locals() dict of f", lost[0])


    def test_program_code_the_hook_runs_lies_in_an_internal_span(self):
        # 3.11 only (the settrace back-end): USDT sees the `__repr__` the hook calls for a local
        # and has no entry to bracket it with; the hook reports the span as its own work.
        if sys.version_info >= (3, 12):
            self.skipTest("the sys.monitoring back-end is bracketed by USDT entries")
        src = """\
        import time

        class Slow:
            def __repr__(self):
                global seen
                seen = time.monotonic_ns()
                return "Slow()"

        def f():
            s = Slow()
            return 1

        f()
        print(seen)
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["f"]})
        seen = int(r.proc.stdout.split()[-1])
        spans = [(x[1], x[3]) for x in r.records() if x[0] == "hx"]
        self.assertTrue(spans, "no hx record")
        self.assertTrue(all(a <= b for a, b in spans), spans)
        self.assertTrue(any(a <= seen <= b for a, b in spans), (seen, spans))


class TestFlatRepr(unittest.TestCase):
    def test_the_c_repr_of_flat_containers_is_exactly_the_bounded_one(self):
        # 17.13: lists, tuples and dicts of scalars are rendered by the C repr (no Python frame
        # per element for the probes to see); it must print what BoundedRepr prints, or decline.
        sys.path.insert(0, harness.HOOK_DIR)
        from flux_hook import _core

        class Cfg:
            repr_limit, depth, locals_limit = 200, 3, 50

        h = object.__new__(_core.Hook)
        h.cfg = Cfg()
        h.reprer = _core.BoundedRepr(200, 3)
        values = [
            [], (), {}, [1], (1,), (1, 2.5, None, True, "a'b"), {"k": 1, 2: [3][0], None: "x"},
            list(range(100)), list(range(101)), ["x" * 200], ["x" * 201], [[1]], [1, [2]],
            {"a": {"b": 1}}, [float("nan"), -0.0, 1e300], [10 ** 50], (False,),
        ]
        for v in values:
            flat = h.flat_repr(v, type(v))
            if flat is not None:
                self.assertEqual(flat, h.reprer.repr(v), v)
        self.assertIsNone(h.flat_repr(list(range(101)), list))
        self.assertIsNone(h.flat_repr(["x" * 201], list))
        self.assertIsNone(h.flat_repr([[1]], list))
        self.assertEqual(h.flat_repr((1,), tuple), "(1,)")


class TestText(HookTestCase):
    def test_non_ascii_and_lone_surrogates(self):
        src = """\
        def f():
            word = "d\u00e9j\u00e0"
            raise ValueError("bad \\udc80")

        try:
            f()
        except ValueError:
            pass
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["f"]})
        ev = r.events(file_suffix="prog.py")
        self.assertIn({"word": ["'d\u00e9j\u00e0'", "str"]}, [e[6] for e in ev if e[0] == "l"])
        xs = [e for e in ev if e[0] == "x"]
        self.assertEqual(xs[0][7], "bad \\udc80")  # backslashreplace: valid UTF-8, strict JSON


class TestCoexistence(HookTestCase):
    def test_cprofile_in_the_program_still_works(self):
        src = """\
        import cProfile, pstats, io

        def f(n):
            return n + 1

        pr = cProfile.Profile()
        pr.enable()
        f(1)
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).print_stats()
        print("profiled" if "prog.py" in out.getvalue() else "missing")
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["f"]})
        self.assertEqual(r.proc.stdout, "profiled\n")
        self.assertEqual(seq(r, kinds="cr", names={"f"}), [("c", "f", 3), ("r", "f", 4, "return")])
        self.assertEqual([x for x in r.records() if x[0] == "lost"], [])


class TestThreadsAndProcesses(HookTestCase):
    def test_threads(self):
        src = """\
        import threading

        def work(n):
            total = 0
            for i in range(n):
                total += i
            return total

        ts = [threading.Thread(target=work, args=(k,)) for k in (3, 4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(work(2))
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["work"]})
        ev = [e for e in r.events(file_suffix="prog.py") if e[1] == "work"]
        tids = {e[3] for e in ev}
        self.assertEqual(len(tids), 3)
        rets = sorted(e[7][0] for e in ev if e[0] == "r")
        self.assertEqual(rets, ["1", "3", "6"])
        for tid in tids:
            self.assertEqual([e[0] for e in ev if e[3] == tid][0], "c")
        check_balanced(self, r)

    def test_raw_thread_is_traced(self):
        # 17.2: a thread started with _thread.start_new_thread (not threading) ran untraced on
        # 3.11. Its calls are recorded on every interpreter; an exception it lets escape is
        # reported by _thread exactly as untraced (no hook frame in the traceback).
        src = """\
        import _thread
        import sys
        import time
        import traceback

        done = []

        def square(x):
            return x * x

        def work(n):
            total = 0
            for i in range(n):
                total += square(i)
            done.append(total)

        def boom():
            raise ValueError("in thread")

        def report(u):
            files = [f.filename.rsplit("/", 1)[-1] for f in traceback.extract_tb(u.exc_traceback)]
            # (3.11 names the function in `object`; 3.15 in the message itself.)
            msg = u.err_msg if u.object is None else "%s %r" % (u.err_msg, u.object)
            done.append((msg.split(" at 0x")[0], files))

        sys.unraisablehook = report
        _thread.start_new_thread(work, (4,))
        _thread.start_new_thread(boom, ())
        while len(done) < 2:
            time.sleep(0.001)
        print(sorted(done, key=str))
        """
        r = self.run_ok(src)
        self.assertEqual(
            r.proc.stdout,
            "[('Exception ignored in thread started by <function boom', ['prog.py']), 14]\n",
        )
        self.assertNotIn("lost", [x[0] for x in r.records()])
        ev = r.events(file_suffix="prog.py")
        by_tid = {}
        for e in ev:
            by_tid.setdefault(e[3], []).append(e)
        work = [t for t, es in by_tid.items() if any(e[1] == "work" for e in es)]
        self.assertEqual(len(work), 1)
        w = [(e[0], e[1]) for e in by_tid[work[0]] if e[0] in "cr"]
        self.assertEqual(w, [("c", "work")] + [("c", "square"), ("r", "square")] * 4 + [("r", "work")])
        boom = [t for t, es in by_tid.items() if any(e[1] == "boom" for e in es)]
        self.assertEqual(len(boom), 1)
        self.assertEqual([(e[0], e[1], e[5]) for e in by_tid[boom[0]] if e[0] in "xr" and e[1] == "boom"],
                         [("x", "boom", 18), ("r", "boom", 18)])
        check_balanced(self, r)

    def test_monitoring_changes_to_flux_tool_are_a_loss_other_tools_are_not(self):
        # Issue 23.4: a program that switched flux's sys.monitoring tool off and on again lost
        # the events in between while the trace said complete. Its own tool id (coverage's) is
        # its business: no loss.
        if VERSION < (3, 12):
            self.skipTest("sys.monitoring is 3.12+")
        src = """\
        import sys
        M = sys.monitoring

        def square(x):
            return x * x

        M.use_tool_id(M.COVERAGE_ID, "mine")
        M.register_callback(M.COVERAGE_ID, M.events.PY_START, lambda code, off: None)
        M.set_events(M.COVERAGE_ID, M.events.PY_START)
        M.set_events(M.COVERAGE_ID, 0)
        M.free_tool_id(M.COVERAGE_ID)
        print(square(2))
        flux = [i for i in range(6) if M.get_tool(i) == "flux-hook"][0]
        saved = M.get_events(flux)
        M.set_events(flux, saved)  # no change: no loss
        M.set_events(flux, 0)
        v = square(3)
        M.set_events(flux, saved)
        print(v)
        """
        r = self.run_ok(src)
        self.assertEqual(r.proc.stdout, "4\n9\n")
        lost = [x[3] for x in r.records() if x[0] == "lost"]
        self.assertEqual(len(lost), 2, lost)
        self.assertTrue(all("sys.monitoring.set_events" in x and "flux's tool" in x for x in lost), lost)

    def test_program_own_tracers_are_a_loss_never_silence(self):
        # 17.2: while the program's own sys.settrace replaced the hook's (3.11), its calls were
        # missing from a trace that said nothing. A trace or profile function of the program's
        # runs Python code no tracer sees, on every version (3.12+: sys.monitoring callbacks
        # do not fire inside it): a `lost` record names it. A C profiler (cProfile) is no loss.
        src = """\
        import sys
        import threading

        seen = []

        def mine(frame, event, arg):
            if event == "call":
                seen.append(frame.f_code.co_name)
            return None

        def square(x):
            return x * x

        def main():
            old = sys.gettrace()
            sys.settrace(mine)
            try:
                v = square(3)
            finally:
                sys.settrace(old)
            return v + square(2)

        print(main(), seen)
        """
        r = self.run_ok(src)
        self.assertEqual(r.proc.stdout, "13 ['square']\n")
        lost = [x for x in r.records() if x[0] == "lost"]
        self.assertEqual(len(lost), 1, lost)
        self.assertIn("records lost", r.proc.stderr)
        if VERSION < (3, 12):
            self.assertIn("the program called sys.settrace in thread", lost[0][3])
        else:
            self.assertIn("installed a trace function that runs Python code (function)", lost[0][3])
        # A profile function, installed for new threads too, and never removed.
        r = self.run_ok("""\
        import sys, threading
        calls = []
        def prof(frame, event, arg):
            calls.append(event)
        threading.setprofile(prof)
        t = threading.Thread(target=len, args=((),))
        t.start()
        t.join()
        print(bool(calls))
        """)
        self.assertEqual(r.proc.stdout, "True\n")
        lost = [x[3] for x in r.records() if x[0] == "lost"]
        self.assertTrue(lost, r.main)
        self.assertTrue(all("installed a profile function that runs Python code" in m for m in lost), lost)

    def test_many_threads_lose_nothing(self):
        src = """\
        import threading

        def leaf(i):
            return i

        def work():
            for i in range(20000):
                leaf(i)

        ts = [threading.Thread(target=work) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        """
        r = self.run_ok(src, config={"files": ["nothing.py"]})
        leafs = [e for e in r.events(file_suffix="prog.py") if e[1] == "leaf"]
        self.assertEqual(len(leafs), 8 * 20000 * 2)
        check_balanced(self, r)

    def test_fork_reconnects(self):
        src = """\
        import os

        def child_work():
            return 42

        pid = os.fork()
        if pid == 0:
            child_work()
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent done")
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["child_work"]})
        self.assertEqual(len(r.conns), 2)
        child = [c for c in r.conns if c[0]["pid"] != r.main[0]["pid"]]
        self.assertEqual(len(child), 1)
        child = child[0]
        self.assertEqual(child[-1][0], "bye")
        self.assertEqual(child[-1][1], len(child) - 2)
        self.assertEqual([e[0] for e in r.events(child, file_suffix="prog.py") if e[1] == "child_work"],
                         ["c", "l", "r"])
        self.assertEqual([e for e in r.events(file_suffix="prog.py") if e[1] == "child_work"], [])

    def test_fork_from_c_is_detected_and_reported(self):
        src = """\
        import ctypes, os

        def child_work():
            return 42

        pid = ctypes.CDLL(None).fork()  # libc fork(): no Python at-fork hooks
        if pid == 0:
            child_work()
            os._exit(0)
        os.waitpid(pid, 0)
        """
        r = self.run_ok(src, config={"files": ["prog.py"], "functions": ["child_work"]})
        self.assertEqual(len(r.conns), 2)
        child = [c for c in r.conns if c[0]["pid"] != r.main[0]["pid"]][0]
        self.assertEqual(child[-1], ["bye", len(child) - 2])
        lost = [x for x in child if isinstance(x, list) and x[0] == "lost"]
        self.assertEqual(len(lost), 1)
        self.assertIn("forked from C", lost[0][3])

    def test_subprocess_gets_its_own_connection(self):
        src = """\
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        """
        r = self.run_ok(src)
        self.assertEqual(len(r.conns), 2)
        self.assertNotEqual(r.conns[0][0]["pid"], r.conns[1][0]["pid"])


class TestAgentGone(unittest.TestCase):
    def test_no_agent_exits_97(self):
        e = dict(os.environ, PYTHONPATH=harness.HOOK_DIR, FLUX_HOOK_SOCKET="/nonexistent/sock")
        p = subprocess.run(harness.PYTHON + ["-c", "print('hi')"], env=e, capture_output=True, text=True)
        self.assertEqual(p.returncode, 97)
        self.assertIn("flux-hook: agent gone:", p.stderr)
        self.assertEqual(p.stdout, "")

    def test_agent_closing_mid_run_exits_97(self):
        import socket
        import threading

        tmp = harness.mkdtemp(self)
        path = os.path.join(tmp, "s")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(1)

        def accept_and_close():
            c, _ = srv.accept()
            c.sendall(b"\x06")
            c.recv(100)
            c.close()

        t = threading.Thread(target=accept_and_close)
        t.start()
        e = dict(os.environ, PYTHONPATH=harness.HOOK_DIR, FLUX_HOOK_SOCKET=path, FLUX_HOOK_CALLS="all",
                 FLUX_HOOK_CONFIG="{}")
        code = "import time\ndef f(): pass\ntime.sleep(0.5)\nfor i in range(300000): f()\nprint('end')"
        p = subprocess.run(harness.PYTHON + ["-c", code], env=e, capture_output=True, text=True, timeout=60)
        t.join()
        srv.close()
        self.assertEqual(p.returncode, 97, p.stderr)
        self.assertIn("flux-hook: agent gone: write failed", p.stderr)

    def test_without_socket_nothing_happens_and_sitecustomize_is_chained(self):

        other = harness.mkdtemp(self)
        with open(os.path.join(other, "sitecustomize.py"), "w") as fh:
            fh.write("import builtins\nbuiltins.CHAINED = True\n")
        e = dict(os.environ, PYTHONPATH=harness.HOOK_DIR + os.pathsep + other)
        e.pop("FLUX_HOOK_SOCKET", None)
        code = "import sys, builtins; print(builtins.CHAINED, 'flux_hook' in sys.modules, sys.gettrace())"
        p = subprocess.run(harness.PYTHON + ["-c", code], env=e, capture_output=True, text=True)
        self.assertEqual(p.stdout, "True False None\n", p.stderr)


def records_its_startup_on_monitoring(test):
    """Known on 3.12+ (found when these tests first ran there, with pytest from the wheelhouse,
    issue 29): with calls = "all" the sys.monitoring back-end records calls of the import frames
    around its own start-up (`<frozen site>` execsitecustomize, `_find_and_load`, ...) before any
    window or extent opens. The merge's test-windows / target-extents rules drop them, counted,
    but the hook's scope promises none. An unexpected success fails the suite: drop the marker
    with the fix."""
    return unittest.expectedFailure(test) if sys.version_info >= (3, 12) else test


@unittest.skipUnless(harness.pythonpath_has("pytest"), harness.MISSING + "pytest is not importable by $FLUX_TEST_PYTHON")
class TestPytest(HookTestCase):
    def test_test_boundaries_and_outcomes(self):
        test_src = """\
        import pytest

        def add(a, b):
            return a + b

        def test_ok():
            assert add(1, 2) == 3

        def test_fail():
            assert add(1, 1) == 3

        @pytest.mark.skip(reason="no")
        def test_skip():
            pass

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture")

        def test_error(broken):
            pass
        """
        r = self.run_pytest("test_x.py", test_src, "none",
                            {"files": ["test_x.py"], "functions": ["add"]}, rc=1)
        recs = r.records()
        self.assertEqual(recs[-1][0], "bye")
        bounds = [(x[0], x[3]) + tuple(x[4:]) for x in recs if x[0] in ("ts", "te")]
        self.assertEqual(bounds, [
            ("ts", "test_x.py::test_ok"), ("te", "test_x.py::test_ok", "passed"),
            ("ts", "test_x.py::test_fail"), ("te", "test_x.py::test_fail", "failed"),
            ("ts", "test_x.py::test_skip"), ("te", "test_x.py::test_skip", "skipped"),
            ("ts", "test_x.py::test_error"), ("te", "test_x.py::test_error", "error"),
        ])
        codes = r.codes()
        rets = [(codes[x[3]][4], x[7]) for x in recs if x[0] == "r"]
        self.assertEqual(rets, [("add", ["3", "int"]), ("add", ["2", "int"])])
        # add() runs inside its test's boundaries.
        order = [x[0] for x in recs if x[0] in ("ts", "te", "r")]
        self.assertEqual(order[:6], ["ts", "r", "te", "ts", "r", "te"])
        # The plugin's own code is never recorded.
        self.assertFalse(any("flux_hook" in c[2] for c in codes.values()))

    @records_its_startup_on_monitoring
    def test_scope_tests_records_only_inside_test_windows(self):
        test_src = """\
        def helper(n):
            return n * 2

        AT_IMPORT = helper(21)

        def test_one():
            assert helper(1) == 2

        def test_two():
            for i in range(3):
                helper(i)
        """
        r = self.run_pytest("test_y.py", test_src, "all",
                            {"files": ["test_y.py"], "scope": "tests"})
        self.assertEqual(r.main[0]["scope"], "tests")
        recs = r.records()
        codes = r.codes()
        inside, windows, seen = False, 0, []
        for x in recs:
            if x[0] == "wo":
                self.assertFalse(inside, "nested window")
                inside, windows = True, windows + 1
                depth = 0
            elif x[0] == "wc":
                self.assertTrue(inside)
                self.assertEqual(depth, 0, "an activation of the window is still open at its close")
                inside = False
            elif x[0] in ("c", "r", "l", "x", "h", "ts", "te"):
                self.assertTrue(inside, "recorded outside a window: %r" % (x,))
                if x[0] in ("c", "r", "l"):
                    c = codes[x[3]]
                    if x[0] == "c":
                        depth += 1
                    elif x[0] == "r":
                        depth -= 1
                        self.assertGreaterEqual(depth, 0, "a return of a frame started before the window")
                    if c[2].endswith("test_y.py") and x[0] == "c":
                        seen.append(c[4])
        self.assertFalse(inside)
        self.assertEqual(windows, 2)
        # helper(21) at import (collection) is outside every window.
        self.assertEqual(seen, ["test_one", "helper", "test_two", "helper", "helper", "helper"])

    def test_a_frozen_clock_does_not_stamp_the_hooks_records(self):
        # `frozen-clock`, found generating python-dateutil and humanize: freezegun replaces
        # time.monotonic_ns in the time module and in every loaded module holding it, and the
        # hook, which looked it up at each record, stamped the test's records (ts, te, xc, ...)
        # with the frozen time: "records out of program order", the trace refused. This test
        # patches the clock as freezegun does (every module attribute that is the real function)
        # inside a test, then calls the target.
        test_src = """\
        import sys
        import time

        def target(n):
            try:
                raise ValueError(n)
            except ValueError:
                return n + 1

        def freeze():
            real = time.monotonic_ns
            fake = lambda: 1418606493004003000
            for mod in list(sys.modules.values()):
                for name in dir(mod):
                    try:
                        if getattr(mod, name) is real:
                            setattr(mod, name, fake)
                    except Exception:
                        pass
            return fake

        def test_frozen():
            fake = freeze()
            assert time.monotonic_ns is fake
            assert target(1) == 2
        """
        r = harness.run(self, "", args=["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_f.py"],
                        extra_files={"test_f.py": test_src}, calls="entries",
                        config={"files": ["test_f.py"], "functions": ["target"], "scope": "targets"},
                        env={"PYTEST_PLUGINS": "flux_hook.pytest_plugin"})
        self.assertEqual(r.proc.returncode, 0, r.proc.stdout + r.proc.stderr)
        recs = r.records()
        te = [x for x in recs if x[0] == "te"]
        ts = [x for x in recs if x[0] == "ts"]
        self.assertEqual(len(te), 1, recs)
        stamped = [x for x in recs if x[0] in ("ts", "te", "c", "x", "r", "l", "xc", "wo", "wc", "hx")]
        frozen = [x for x in stamped if 1418606493004003000 in x]
        self.assertEqual(frozen, [], "records stamped with the program's frozen clock")
        self.assertLess(ts[0][1], te[0][1])

    @records_its_startup_on_monitoring
    def test_scope_targets_traces_targets_in_new_threads(self):
        # Targets running in threads the program starts (with _thread and with threading) are
        # traced under scope "targets", and nothing outside their extents is: each thread
        # gets its extent depth before its first frame (own_settrace), which 3.11's C part
        # reads to answer untargeted frame starts.
        test_src = """\
        import _thread
        import threading
        import time

        def helper(n):
            return n * 2

        def target(n):
            return helper(n) + 1

        def test_threads():
            done = []
            _thread.start_new_thread(lambda: done.append(helper(1) + target(2)), ())
            t = threading.Thread(target=lambda: done.append(target(3)))
            t.start()
            t.join()
            while len(done) < 2:
                time.sleep(0.001)
            assert sorted(done) == [7, 7]
        """
        r = self.run_pytest("test_t.py", test_src, "all",
                            {"files": ["test_t.py"], "functions": ["target"], "scope": "targets"})
        recs = r.records()
        self.assertNotIn("lost", [x[0] for x in recs])
        self.assertNotIn("err", [x[0] for x in recs])
        codes = r.codes()
        seen = {}
        open_in = set()
        for x in recs:
            if x[0] == "xo":
                open_in.add(x[2])
            elif x[0] == "xc":
                open_in.discard(x[2])
            elif x[0] in ("c", "r"):
                self.assertIn(x[2], open_in, "recorded outside an extent: %r" % (x,))
                if x[0] == "c":
                    seen.setdefault(x[2], []).append(codes[x[3]][4])
        # Two threads of the program, each: its target's activation and the helper it calls
        # (the helper called outside it, in the raw thread, is not recorded).
        self.assertEqual(sorted(seen.values()), [["target", "helper"], ["target", "helper"]])

    @records_its_startup_on_monitoring
    def test_scope_targets_records_only_inside_target_extents(self):
        test_src = """\
        def helper(n):
            return n * 2

        def target(n):
            if n > 1:
                target(n - 1)
            return helper(n) + 1

        def gen():
            yield target(1)
            yield helper(5)

        AT_IMPORT = target(3)

        def test_one():
            assert helper(1) == 2
            assert target(2) == 5

        def test_two():
            for v in gen():
                helper(v)
        """
        r = self.run_pytest("test_z.py", test_src, "all",
                            {"files": ["test_z.py"], "functions": ["target"], "scope": "targets"})
        self.assertEqual(r.main[0]["scope"], "targets")
        recs = r.records()
        codes = r.codes()
        in_window, extent, seen, extents = False, False, [], 0
        for x in recs:
            if x[0] == "wo":
                in_window = True
            elif x[0] == "wc":
                self.assertFalse(extent, "an extent is still open at the window's close")
                in_window = False
            elif x[0] == "xo":
                self.assertTrue(in_window, "an extent outside a test window")
                self.assertFalse(extent, "nested extents in one thread")
                extent, depth, extents = True, 0, extents + 1
            elif x[0] == "xc":
                self.assertTrue(extent)
                self.assertEqual(depth, 0, "an activation of the extent is still open at its close")
                extent = False
            elif x[0] in ("c", "r", "l", "x", "h"):
                self.assertTrue(extent, "recorded outside an extent: %r" % (x,))
                c = codes[x[3]]
                if x[0] == "c":
                    depth += 1
                    seen.append(c[4])
                elif x[0] == "r":
                    depth -= 1
        self.assertFalse(extent)
        # test_one: target(2) -> target(1), helper x2; test_two: target(1) inside gen, not the
        # generator or the helper calls around it. Nothing of target(3) at import.
        self.assertEqual(seen, ["target", "target", "helper", "helper", "target", "helper"])
        self.assertEqual(extents, 2)
        traits = {c[4]: c[7] for c in codes.values()}
        self.assertEqual(traits["target"] & 4, 4, "the target's C record says it is targeted")
        self.assertEqual(traits["helper"] & 4, 0)


class TestOverhead(unittest.TestCase):
    def test_measure_overhead(self):
        """Prints the per-call cost of calls=all against an untraced run (not asserted)."""
        code = (
            "import time\n"
            "def f(n):\n    return n + 1\n"
            "t = time.perf_counter()\n"
            "for i in range(1000000):\n    f(i)\n"
            "print(time.perf_counter() - t)\n"
        )
        e = dict(os.environ, PYTHONPATH=harness.HOOK_DIR)
        e.pop("FLUX_HOOK_SOCKET", None)
        p = subprocess.run(harness.PYTHON + ["-c", code], env=e, capture_output=True, text=True)
        base = float(p.stdout)
        res = {}
        for calls in ("all", "entries", "none"):
            r = harness.run(self, code, calls=calls, config={"files": ["nomatch.py"]})
            self.assertEqual(r.proc.returncode, 0, r.proc.stderr)
            res[calls] = float(r.proc.stdout)
        sys.stderr.write(
            "\n[overhead %d.%d] 1M calls untraced %.3fs; " % (VERSION + (base,))
            + "; ".join("calls=%s %.3fs (+%.0f ns/call)" % (k, v, (v - base) * 1e3) for k, v in res.items())
            + "\n"
        )


if __name__ == "__main__":
    unittest.main()
