"""Tests of flux_hook.static_facts on small programs, on the interpreter running the suite.

Run: PY -m unittest discover -s flux-hook/tests (the agent's hook suite runs it on 3.11, 3.13,
3.14 and 3.15). Two properties are checked against the interpreter itself rather than against
hand-written expectations: the qualnames and first lines of the scopes with code objects equal
those of `compile()`'s code objects (on this file and on large stdlib modules), and every line
event a real run reports lies in a statement span of the scope whose code ran.
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HOOK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HOOK_DIR)
from flux_hook import static_facts  # noqa: E402

INLINED = sys.version_info >= (3, 12)

PROGRAM = textwrap.dedent(
    '''\
    import os, sys as system
    from json import loads as jl

    G = 1

    def deco(f):
        return f

    @deco
    @deco
    def outer(a, b=2, *args, c=0, **kw):
        """doc"""
        total = 0
        for i in range(a):
            if i % 2 == 0 and b:
                total += i
            elif i > 5:
                break
            else:
                continue
        else:
            total = -1
        while total > 100:
            total -= 1
        squares = [x * x for x in range(total) if x > a]
        gen = list(y + total for y in squares)
        if any((n := v) > 3 for v in squares):
            print(n)
        def inner(z):
            nonlocal total
            total += z
            return a + z
        f = lambda q: q + b
        try:
            val = jl("1")
        except (ValueError, KeyError) as e:
            val = None
        except Exception:
            raise
        finally:
            pass
        with open(os.devnull) as fh, open(os.devnull) as fh2:
            data = fh.read()
        r = (total
             if total > 0
             else inner(
                 1))
        return r, gen, f(1), data, val

    class C:
        attr = [i for i in range(3)]
        def m(self):
            global G
            G = 2
            return self.attr
        @staticmethod
        def s():
            def deep():
                return [j for j in range(2)]
            return deep
        class D:
            def n(self):
                return lambda: 1

    def m2(x):
        match x:
            case [a, *rest]:
                return a
            case {"k": v, **others}:
                return v
            case _:
                return None

    def gfun():
        global hoisted
        def hoisted():
            return 1
        return hoisted

    outer(8)
    C().m()
    C.s()()
    C.D().n()()
    m2([1, 2])
    m2({"k": 3})
    m2(5)
    gfun()()
    '''
)


def facts(src=PROGRAM, name="prog.py"):
    return static_facts.facts_for_source(src, name)


def fn(f, qualname):
    found = [x for x in f["functions"] if x["qualname"] == qualname]
    assert len(found) == 1, (qualname, [x["qualname"] for x in f["functions"]])
    return found[0]


def code_objects(code):
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            yield from code_objects(c)


class TestScopes(unittest.TestCase):
    def assert_matches_compile(self, src, name):
        f = static_facts.facts_for_source(src, name)
        mine = sorted(
            (x["qualname"], x["first_line"]) for x in f["functions"] if x["code"]
        )
        top = compile(src, name, "exec", dont_inherit=True)
        theirs = sorted((c.co_qualname, c.co_firstlineno) for c in code_objects(top))
        # The module's code object starts at line 1 whatever its first statement.
        self.assertEqual(mine, theirs, name)

    def test_qualnames_and_first_lines_equal_the_compilers(self):
        self.assert_matches_compile(PROGRAM, "prog.py")

    def test_qualnames_on_large_stdlib_modules(self):
        import argparse
        import ast
        import dataclasses
        import email._header_value_parser as hvp
        import inspect
        import typing

        for mod in (argparse, ast, dataclasses, hvp, inspect, typing):
            with open(mod.__file__, "rb") as fh:
                self.assert_matches_compile(fh.read(), mod.__file__)

    def test_function_entries(self):
        f = facts()
        outer = fn(f, "outer")
        self.assertEqual(
            (outer["def_line"], outer["first_line"], outer["body_line"], outer["last_line"]),
            (11, 9, 12, 48),
        )
        self.assertEqual(outer["decorators"], ["deco", "deco"])
        self.assertEqual(outer["params"], ["a", "b", "args", "c", "kw"])
        self.assertEqual(outer["kind"], "function")
        self.assertEqual(fn(f, "outer.<locals>.inner")["parent"], "outer")
        self.assertEqual(fn(f, "C.s.<locals>.deep")["parent"], "C.s")
        self.assertEqual(fn(f, "C.D.n.<locals>.<lambda>")["kind"], "lambda")
        self.assertEqual(fn(f, "hoisted")["parent"], "gfun", "global def: bare qualname")
        comp = fn(f, "outer.<locals>.<listcomp>")
        self.assertEqual(comp["code"], not INLINED)
        gens = [x for x in f["functions"] if x["qualname"] == "outer.<locals>.<genexpr>"]
        self.assertEqual([g["def_line"] for g in gens], [26, 27])
        self.assertTrue(all(g["code"] for g in gens))
        self.assertEqual(f["functions"][0]["qualname"], "<module>")
        self.assertEqual(len(f["sha256"]), 64)


class TestStatements(unittest.TestCase):
    def test_headers_and_multi_line_statements(self):
        outer = fn(facts(), "outer")
        spans = outer["statements"]
        # Multi-line assignment 44-47 is one span; `for` (14), `if` (15), `try:` (34) headers
        # are one line each; `except` headers (36, 38) have their own spans.
        for span in ([44, 47], [14, 14], [15, 15], [34, 34], [36, 36], [38, 38], [42, 42]):
            self.assertIn(span, spans)
        # Spans are disjoint and sorted.
        for a, b in zip(spans, spans[1:]):
            self.assertLess(a[1], b[0], (a, b))
        # The decorated def statement spans its decorators (module scope).
        self.assertIn([9, 11], fn(facts(), "<module>")["statements"])

    def test_every_line_event_lies_in_a_span_of_its_scope(self):
        f = facts()
        spans = {}
        for x in f["functions"]:
            spans.setdefault(x["qualname"], []).extend(x["statements"])
        seen = []

        def tracer(frame, event, arg):
            if frame.f_code.co_filename == "prog.py" and event == "line":
                seen.append((frame.f_code.co_qualname, frame.f_lineno))
            return tracer

        code = compile(PROGRAM, "prog.py", "exec", dont_inherit=True)
        sys.settrace(tracer)
        try:
            exec(code, {"__name__": "prog", "print": lambda *a: None})
        finally:
            sys.settrace(None)
        self.assertGreater(len(seen), 50)
        for qual, line in seen:
            self.assertTrue(
                any(a <= line <= b for a, b in spans.get(qual, [])),
                "line %d of %s is in no statement span %s" % (line, qual, spans.get(qual)),
            )


class TestLoopsBranchesHandlers(unittest.TestCase):
    def test_loops(self):
        loops = [l for l in facts()["loops"] if l["func"] == "outer"]
        self.assertEqual(
            [(l["kind"], l["line"], l["body"], l["body_first_line"], l["else"]) for l in loops],
            [("for", 14, [15, 20], 15, [22, 22]), ("while", 23, [24, 24], 24, None)],
        )
        nested = facts(
            "def f(xs):\n"
            "    for x in xs:\n"
            "        while x:\n"
            "            x -= 1\n"
            "            for y in range(x):\n"
            "                pass\n"
        )["loops"]
        self.assertEqual(
            [(l["line"], l["depth"], l["parent"]) for l in nested], [(2, 0, None), (3, 1, 2), (5, 2, 3)]
        )
        comp = [l for l in facts()["loops"] if l["kind"] == "comprehension"]
        self.assertIn(25, [l["line"] for l in comp])

    def test_branches(self):
        b = [(x["kind"], x["line"]) for x in facts()["branches"] if x["func"] in ("outer", "m2")]
        self.assertIn(("if", 15), b)
        self.assertIn(("and", 15), b)
        self.assertIn(("elif", 17), b)
        self.assertIn(("ifexp", 44), b)
        self.assertIn(("match", 66), b)
        m = [x for x in facts()["branches"] if x["kind"] == "match"][0]
        self.assertEqual(m["cases"], [67, 69, 71])
        elif_ = [x for x in facts()["branches"] if x["kind"] == "elif"][0]
        self.assertEqual((elif_["body_line"], elif_["else_line"]), (18, 20))

    def test_handlers(self):
        (h,) = facts()["handlers"]
        self.assertEqual((h["try_line"], h["body"], h["finally"], h["else"]), (34, [35, 35], [41, 41], None))
        self.assertEqual(
            [(x["line"], x["types"], x["name"]) for x in h["handlers"]],
            [(36, ["ValueError", "KeyError"], "e"), (38, ["Exception"], None)],
        )
        bare = facts("try:\n    pass\nexcept:\n    pass\n")["handlers"][0]["handlers"][0]
        self.assertEqual(bare["types"], [])


class TestNames(unittest.TestCase):
    def test_writes(self):
        f = facts()
        w = fn(f, "outer")["writes"]
        self.assertEqual(w["11"], ["a", "b", "args", "c", "kw"], "parameters at the def line")
        self.assertEqual(w["16"], ["total"], "augmented assignment")
        self.assertEqual(w["14"], ["i"], "for target")
        self.assertEqual(w["42"], ["fh", "fh2"], "with targets")
        self.assertEqual(w["36"], ["e"], "except ... as")
        self.assertEqual(w["27"], ["n"], "a walrus in a comprehension binds in the function")
        self.assertEqual(w["29"], ["inner"], "def binds its name")
        self.assertNotIn("x", sum(w.values(), []), "comprehension targets are not the function's")
        self.assertEqual(fn(f, "outer.<locals>.<listcomp>")["writes"], {"25": ["x"]})
        self.assertEqual(fn(f, "<module>")["writes"]["1"], ["os", "system"])
        self.assertEqual(fn(f, "<module>")["writes"]["2"], ["jl"])
        self.assertNotIn("54", fn(f, "C.m")["writes"], "a global is not a local write")
        self.assertEqual(fn(f, "m2")["writes"]["67"], ["a", "rest"])
        self.assertEqual(fn(f, "m2")["writes"]["69"], ["v", "others"])

    def test_reads_and_their_attribution(self):
        f = facts()
        outer = fn(f, "outer")
        self.assertEqual(outer["reads"]["16"], ["total", "i"], "augmented assignment reads")
        self.assertEqual(outer["reads"]["15"], ["i", "b"])
        self.assertIn("range", outer["free_reads"]["14"])
        # Reads of outer's locals from nested scopes: the listcomp's `a` (25), the genexpr's
        # `total` (26), inner's `total` and `a` (31, 32), the lambda's `b` (33).
        self.assertEqual(
            outer["nested_reads"],
            {"25": ["a"], "26": ["total"], "31": ["total"], "32": ["a"], "33": ["b"]},
        )
        comp = fn(f, "outer.<locals>.<listcomp>")
        self.assertEqual(comp["reads"], {"25": ["x"]})
        self.assertEqual(comp["free_reads"], {"25": ["a"]})
        self.assertEqual(fn(f, "outer.<locals>.inner")["nonlocals"], ["total"])
        # Class scopes are skipped when resolving: the method's `attr` is not C's local.
        self.assertEqual(fn(f, "C.m")["reads"], {"55": ["self"]})

    def test_read_counts_say_how_often_a_line_loads_a_name(self):
        f = facts("def f(n):\n    t = n + n * n\n    return t\n", "counts.py")
        g = fn(f, "f")
        self.assertEqual(g["reads"]["2"], ["n"])
        self.assertEqual(g["read_counts"], {"2": {"n": 3}}, "only names loaded more than once")

    def test_calls(self):
        outer = fn(facts(), "outer")
        self.assertEqual(outer["calls"]["42"], ["open", "open"])
        self.assertEqual(outer["calls"]["43"], ["fh.read"])
        self.assertEqual(outer["calls"]["46"], ["inner"])


class TestCommandLine(unittest.TestCase):
    def test_cli_prints_json_and_reports_bad_files(self):
        with tempfile.TemporaryDirectory() as d:
            good = os.path.join(d, "good.py")
            bad = os.path.join(d, "bad.py")
            with open(good, "w") as fh:
                fh.write("def f(x):\n    return x + 1\n")
            with open(bad, "w") as fh:
                fh.write("def f(:\n")
            env = dict(os.environ, PYTHONPATH=HOOK_DIR)
            p = subprocess.run(
                [sys.executable, "-m", "flux_hook.static_facts", good, bad],
                capture_output=True,
                text=True,
                env=env,
            )
            self.assertEqual(p.returncode, 1, p.stderr)
            out = json.loads(p.stdout)
            self.assertEqual(out["version"], 1)
            self.assertEqual(out["python"], "%d.%d" % sys.version_info[:2])
            self.assertEqual(fn(out["files"][good], "f")["reads"], {"2": ["x"]})
            self.assertIn("SyntaxError", out["errors"][bad])
            self.assertIn("bad.py", p.stderr)
            p = subprocess.run(
                [sys.executable, "-m", "flux_hook.static_facts"], capture_output=True, env=env
            )
            self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()
