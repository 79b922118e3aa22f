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


if __name__ == "__main__":
    unittest.main()
