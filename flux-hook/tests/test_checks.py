"""Unit tests of flux_hook.checks: predicates on live frames and the facts records.

Run: PY -m unittest discover -s flux-hook/tests (with the rest of the hook's suite).
"""
import json
import os
import sys
import tempfile
import unittest

HOOK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HOOK_DIR)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flux_hook import checks  # noqa: E402
from flux_hook._core import exc_typename  # noqa: E402


def frame_of_f(items, depth):
    """A live frame of `f` with locals `items`, `depth` and `stack`."""
    stack = list(items)
    del items
    return sys._getframe(), stack


class TestChecks(unittest.TestCase):
    def test_predicates_see_live_values_and_errors_are_recorded(self):
        c = checks.Checks(
            [
                {"expr": "len(stack) == depth", "lines": [3, 7]},
                {"expr": "stack[5] > 0", "lines": [3]},
                {"expr": "depth > 0", "lines": [3], "function": "nope"},
            ],
            exc_typename,
        )
        frame, stack = frame_of_f([1, 2], 2)
        recs = [json.loads(r) for r in c.records(frame, 11, 22, 3, 7)]
        self.assertEqual([r[0] for r in recs], ["k", "k"], "the `nope` predicate is not for f")
        self.assertEqual(recs[0][2:], [7, 11, 22, 3, "len(stack) == depth", True])
        self.assertEqual(recs[1][6:], ["stack[5] > 0", ["error", "IndexError"]])
        stack.append(3)  # live values: the predicate sees the change
        (r,) = [json.loads(x) for x in c.records(frame, 11, 22, 7, 7)]
        self.assertEqual(r[7], False)
        self.assertEqual(c.records(frame, 11, 22, 4, 7), [])

    def test_bad_predicates_are_refused_with_their_text(self):
        for spec, want in [
            ({"expr": "x ==", "lines": [1]}, "does not compile"),
            ({"expr": "x", "lines": []}, "non-empty list"),
            ({"expr": "x", "lines": [1], "where": 2}, "unknown field"),
            ("x > 0", "is an object"),
        ]:
            with self.assertRaises(ValueError) as e:
                checks.Checks([spec], exc_typename)
            self.assertIn(want, str(e.exception))


class TestFactsRecords(unittest.TestCase):
    def test_facts_of_readable_files_only(self):
        with tempfile.TemporaryDirectory() as d:
            good = os.path.join(d, "m.py")
            with open(good, "w") as fh:
                fh.write("def f(x):\n    return x\n")
            bad = os.path.join(d, "bad.py")
            with open(bad, "w") as fh:
                fh.write("def (:\n")
            recs = checks.facts_records([good, bad, os.path.join(d, "gone.py")])
            self.assertEqual(len(recs), 1)
            kind, fn, facts = json.loads(recs[0])
            self.assertEqual((kind, fn, facts["file"]), ("F", good, good))
            self.assertEqual([x["qualname"] for x in facts["functions"]], ["<module>", "f"])
            recs[0].encode("ascii")


LOOP = """\
def f(n):
    acc = []
    for i in range(n):
        acc.append(i)
    return acc

f(3)
"""


class TestUnderTheHook(unittest.TestCase):
    """The back-end of this interpreter evaluates predicates at line events and sends the facts
    of the targeted files at exit."""

    def run_loop(self, predicates):
        import harness

        r = harness.run(self, LOOP, config={"files": ["prog.py"], "predicates": predicates})
        self.assertEqual(r.proc.returncode, 0, r.proc.stderr)
        return r

    def test_predicates_are_evaluated_before_their_line_runs_on_live_values(self):
        r = self.run_loop(
            [
                {"expr": "len(acc) == i", "lines": [4]},
                {"expr": "i < 2", "lines": [4], "function": "f"},
                {"expr": "acc[i] >= 0", "lines": [4]},
                {"expr": "True", "lines": [4], "function": "g"},
            ]
        )
        ks = [e for e in r.events(file_suffix="prog.py") if e[0] == "k"]
        got = [(e[1], e[5], e[6], e[7]) for e in ks]
        want = []
        for i in range(3):
            want += [
                ("f", 4, "len(acc) == i", True),
                ("f", 4, "i < 2", i < 2),
                ("f", 4, "acc[i] >= 0", ["error", "IndexError"]),
            ]
        self.assertEqual(got, want)
        # Each check follows the line event of its line, in the same frame.
        evs = r.events(file_suffix="prog.py")
        for j, e in enumerate(evs):
            if e[0] == "k":
                prev = [x for x in evs[:j] if x[0] == "l"][-1]
                self.assertEqual((prev[4], prev[5]), (e[4], e[5]))

    def test_no_predicates_no_checks_and_the_facts_of_targeted_files_at_exit(self):
        r = self.run_loop([])
        recs = r.records()
        self.assertFalse([x for x in recs if x[0] == "k"])
        fs = [x for x in recs if x[0] == "F"]
        self.assertEqual(len(fs), 1, "one F record: prog.py (the hook's own files are not targeted)")
        self.assertTrue(fs[0][1].endswith("/prog.py"))
        self.assertEqual([x["qualname"] for x in fs[0][2]["functions"]], ["<module>", "f"])
        self.assertEqual(r.main[-1][0], "bye")

    def test_facts_false_sends_no_static_facts(self):
        # SWE-Flux's parser reads its log only: the ast work at exit (0.1-1 s per large file)
        # is skipped when the config says nothing reads the facts.
        import harness

        r = harness.run(self, LOOP, config={"files": ["prog.py"], "facts": False})
        recs = r.records()
        self.assertFalse([x for x in recs if x[0] == "F"])
        self.assertTrue([x for x in recs if x[0] == "l"], "still traced")
        self.assertEqual(r.main[-1][0], "bye")

    def test_a_predicate_that_does_not_compile_stops_the_hook_with_its_text(self):
        import harness

        r = harness.run(self, LOOP, config={"files": ["prog.py"], "predicates": [{"expr": "i <", "lines": [4]}]})
        self.assertEqual(r.proc.returncode, 97)
        self.assertIn("'i <' does not compile", r.proc.stderr)


if __name__ == "__main__":
    unittest.main()
