"""flux_perturb: seeded perturbation of a test file's inputs through its syntax tree.

Standard library only; run by `flux perturb` with the host's `python3` (3.9+, for
`ast.unparse`). Protocol: one JSON request on stdin, one JSON reply on stdout.

Requests (`files` is a list of {"path", "source"}; `question` is the instance's question):
  {"op": "sites",  "files": [...], "question": str}
      -> {"sites": [site, ...]}  every input literal, with the operators that apply to it
  {"op": "mutate", "files": [...], "question": str, "seed": int, "max_mutations": int,
   "assertions": "relax" | "keep"}
      -> variant: 1..max_mutations seeded mutations at distinct sites
  {"op": "apply",  "files": [...], "question": str, "edits": [{"file"?, "line", "col", "old",
   "new"}], "assertions": ...}
      -> variant: the given literal replacements (e.g. proposed by a model), validated
A variant is {"files": [{"path", "source", "changed"}], "mutations": [...],
"relaxed": [...], "rejected": [...], "render": "splice" | "unparse"}.

What is mutated (a "site"): inside test functions (`test*` at module level, `test*` methods of
`Test*` classes), literals that feed the code under test: call arguments (at any depth, except
calls that only check, e.g. `pytest.raises`, `isinstance`), right-hand sides of assignments,
`for` iterables; and the values of module-level constants (`NAME = <literal>`) that test
functions read. Never a site: the literal operands of comparisons (expected values), assert
messages, subscripts (`x['key']`, `x[0]`), f-strings, decorators, docstrings, and literals the
question quotes (a number of 2+ digits or a string of 3+ characters found as a whole token in
the question, so that the question never goes stale). When the question names test functions, only the sites feeding
those tests are mutated (inputs of other tests cannot change its answer).

Operators: numbers (int: +1, -1, +2, +3..9, *2, //2; float: *0.5, *1.5, +1; never negative,
as a literal in the tree is never negative), booleans (flip), strings (change one digit; drop,
duplicate or swap a separator-delimited token; delete or duplicate a character; flip a letter's
case; in a multi-line text (JSON, YAML, source) duplicate or drop a line; change the content of
a string quoted inside the text (a JS or JSON string value); identifier-like strings such as mode flags are only replaced by another identifier-like
input string of the same file), bytes (as strings), collections (list/tuple/set/dict displays:
drop an element, duplicate one, reverse, append a mutated copy of the last), argument order
(rotate keyword arguments; swap the first two positional arguments of a commutative call such
as `max`, `min`, `gcd`, `Add`, `Mul`, or the operands of `+`/`*` between numeric literals).

Assertion policy ("relax", the default): mutated inputs make exact-value assertions stale, so
in every test function whose inputs changed (it holds a mutated site or reads a mutated
module-level constant), an `assert` whose test compares against a literal (`==`, `is None`,
`in`, ... with a literal operand, also inside `and`/`or`/`not`) or checks the truth of a call
(`assert all(...)`, `assert isprime(n)`) keeps only what it computed: `assert f(x) == 3`
becomes `(f(x))`, `assert x is None` becomes `(x)`, an assert of literals alone becomes
`pass`; `assert A and B` becomes `if (A): (what B computed)` (`or`: `if not (A): ...`), so
that B still runs only when it did (A stays, as a condition: a branch states nothing). The
old expected value, now wrong, is never asserted or left as a bare claim, so the test a model
reads states nothing false; the same calls run, in source order, and line numbers are kept
(newlines stay inside the brackets). Likewise a `with pytest.raises(E):` block (no `as` target) becomes
`with _flux_suppress(E):` (`contextlib.suppress`, imported at the end of the file so that no
line moves): the body runs as before and an `E` is still caught, but a variant whose inputs no
longer raise is not a failing test. Other assertions (comparisons between two computed values,
`assert x`, a `raises` whose exception info is read) are kept: if they fail now, the test no
longer ends as the instance expects and flux discards the variant. "keep" leaves every assertion.

Rendering keeps the file's layout: each changed node's source span is replaced by
`ast.unparse` of the new node (comments, formatting and line numbers elsewhere untouched; a
multi-line string literal keeps its line count when it can), and the result must parse to
exactly the transformed tree (`ast.dump` equal), else the whole transformed tree is unparsed.
Deterministic: the same request (seed included) gives the same bytes.
"""
import ast
import copy
import json
import random
import re
import sys

CHECK_CALLS = {
    "isinstance", "issubclass", "type", "getattr", "setattr", "hasattr", "delattr", "print",
    "id", "repr", "callable",
}
CHECK_ATTRS = {"raises", "warns", "approx", "skip", "fail", "xfail", "importorskip",
               "deprecated_call", "setattr", "setenv", "delattr", "delenv"}
COMMUTATIVE = {"max", "min", "gcd", "lcm", "igcd", "ilcm", "Add", "Mul", "Max", "Min",
               "And", "Or", "Union", "Intersection", "hypot"}
ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,15}$")
SEP_RE = re.compile(r"(\s*[,;|]\s*|\s+)")
NUM_RE = re.compile(r"\d+(?:\.\d+)?")
WORD_RE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def is_test_function(node, in_test_class):
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test") \
        and (in_test_class or True)


def test_functions(tree):
    """[(qualified name, node)] of the test functions, in source order."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for m in node.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test"):
                    out.append((node.name + "." + m.name, m))
    return out


def literal_like(node):
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not, ast.Invert)):
        return literal_like(node.operand)
    if isinstance(node, ast.BinOp):
        return literal_like(node.left) and literal_like(node.right)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(literal_like(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and literal_like(k) for k in node.keys) and all(literal_like(v) for v in node.values)
    return False


def call_name(call):
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def is_check_call(call):
    f = call.func
    if isinstance(f, ast.Name):
        return f.id in CHECK_CALLS
    if isinstance(f, ast.Attribute):
        if f.attr.startswith("assert") or f.attr in CHECK_ATTRS:
            return True
        base = f.value
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name) and base.id in ("pytest", "mock", "unittest"):
            return True
    return False


class Site:
    __slots__ = ("file", "node", "parent", "field", "index", "function", "tests", "kind", "module_name")

    def __init__(self, file, node, parent, field, index, function, tests, kind, module_name=None):
        self.file, self.node, self.parent, self.field, self.index = file, node, parent, field, index
        self.function, self.tests, self.kind, self.module_name = function, tests, kind, module_name


def site_kind(node):
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int"
        if isinstance(v, float):
            return "float" if v == v and v not in (float("inf"),) else None
        if isinstance(v, str):
            return "str"
        if isinstance(v, bytes):
            return "bytes"
        return None
    if isinstance(node, ast.List) and isinstance(node.ctx, ast.Load):
        return "list"
    if isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load):
        return "tuple"
    if isinstance(node, ast.Set):
        return "set"
    if isinstance(node, ast.Dict):
        return "dict"
    return None


class Collector:
    """Walks one file and records the sites."""

    def __init__(self, fidx, tree, question):
        self.fidx, self.tree, self.question = fidx, tree, question
        self.sites = []
        self.order_sites = []

    def quoted(self, node):
        if not isinstance(node, ast.Constant):
            return False
        v = node.value
        if isinstance(v, bool) or v is None:
            return False
        if isinstance(v, (int, float)):
            s = repr(v)
            if len(s.lstrip("-").replace(".", "")) < 2:
                return False
        elif isinstance(v, str):
            s = v
            if len(s.strip()) < 3:
                return False
        else:
            return False
        return re.search(r"(?<![\w.])" + re.escape(s) + r"(?![\w])", self.question) is not None

    def add(self, node, parent, field, index, function, tests, module_name=None):
        kind = site_kind(node)
        if kind is None or self.quoted(node):
            return
        if kind == "str" and '"""' in node.value and "\n" in node.value:
            return
        self.sites.append(Site(self.fidx, node, parent, field, index, function, tests, kind, module_name))

    def walk(self, node, parent, field, index, inp, function, tests):
        """Visit `node` (held by parent.field[index]); `inp` says whether it is in an input
        context."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, ast.JoinedStr):
            return
        if inp and site_kind(node) is not None and not (isinstance(node, ast.Constant) and node.value is None):
            self.add(node, parent, field, index, function, tests)
        if isinstance(node, ast.Compare):
            operands = [node.left] + list(node.comparators)
            for i, op in enumerate(operands):
                if literal_like(op):
                    continue
                if i == 0:
                    self.walk(op, node, "left", None, inp, function, tests)
                else:
                    self.walk(op, node, "comparators", i - 1, inp, function, tests)
            return
        if isinstance(node, ast.Assert):
            self.walk(node.test, node, "test", None, False, function, tests)
            return
        if isinstance(node, ast.Subscript):
            self.walk(node.value, node, "value", None, inp, function, tests)
            return
        if isinstance(node, ast.Attribute):
            if not isinstance(node.value, ast.Constant):
                self.walk(node.value, node, "value", None, inp, function, tests)
            return
        if isinstance(node, ast.Call):
            check = is_check_call(node)
            self.walk(node.func, node, "func", None, False, function, tests)
            for i, a in enumerate(node.args):
                self.walk(a, node, "args", i, not check, function, tests)
            for i, k in enumerate(node.keywords):
                self.walk(k.value, k, "value", None, not check, function, tests)
            if not check:
                self.order_site(node, function, tests)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if node.value is not None:
                self.walk(node.value, node, "value", None, True, function, tests)
            return
        if isinstance(node, (ast.For, ast.AsyncFor)):
            self.walk(node.iter, node, "iter", None, True, function, tests)
            for f in ("body", "orelse"):
                for i, s in enumerate(getattr(node, f)):
                    self.walk(s, node, f, i, False, function, tests)
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)) and inp:
            if numeric_literal(node.left) and numeric_literal(node.right):
                self.order_sites.append(Site(self.fidx, node, None, None, None, function, tests, "binop"))
        for f, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        self.walk(v, node, f, i, inp, function, tests)
            elif isinstance(value, ast.AST):
                self.walk(value, node, f, None, inp, function, tests)

    def order_site(self, call, function, tests):
        kws = call.keywords
        if len(kws) >= 2 and all(k.arg is not None for k in kws):
            self.order_sites.append(Site(self.fidx, call, None, None, None, function, tests, "kwargs"))
        if call_name(call) in COMMUTATIVE and len(call.args) >= 2 \
                and not any(isinstance(a, ast.Starred) for a in call.args[:2]):
            self.order_sites.append(Site(self.fidx, call, None, None, None, function, tests, "commutative"))

    def run(self):
        tests = test_functions(self.tree)
        loads = {}
        for name, fn in tests:
            for n in ast.walk(fn):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    loads.setdefault(n.id, []).append(name)
        for name, fn in tests:
            for i, stmt in enumerate(fn.body):
                if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str):
                    continue
                self.walk(stmt, fn, "body", i, False, name, [name])
        for i, stmt in enumerate(self.tree.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                nm = stmt.targets[0].id
                if nm in loads and literal_like(stmt.value):
                    readers = sorted(set(loads[nm]))
                    before = len(self.sites)
                    self.walk_constant(stmt.value, stmt, "value", None, "<module> " + nm, readers)
                    for s in self.sites[before:]:
                        s.module_name = nm
        return self


def numeric_literal(n):
    if isinstance(n, ast.Constant):
        return isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
    if isinstance(n, ast.BinOp):
        return numeric_literal(n.left) and numeric_literal(n.right)
    if isinstance(n, ast.UnaryOp):
        return numeric_literal(n.operand)
    return False


def _walk_constant(self, node, parent, field, index, function, tests):
    if site_kind(node) is not None and not (isinstance(node, ast.Constant) and node.value is None):
        self.add(node, parent, field, index, function, tests)
    for f, value in ast.iter_fields(node):
        if isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, ast.AST):
                    _walk_constant(self, v, node, f, i, function, tests)
        elif isinstance(value, ast.AST):
            _walk_constant(self, value, node, f, None, function, tests)


Collector.walk_constant = _walk_constant


# ---------------------------------------------------------------- operators


def int_ops(v):
    ops = [("int+1", v + 1), ("int+2", v + 2), ("int+k", None)]
    if v >= 1:
        ops.append(("int-1", v - 1))
    if v != 0 and v <= 10 ** 6:
        ops.append(("int*2", v * 2))
    if v >= 2:
        ops.append(("int//2", v // 2))
    # Bolder moves, for answers that small steps leave alone (invariants over values, the
    # iterations of a binary search): a sign change, an order of magnitude, zero.
    if v >= 1:
        ops.append(("int-neg", -v))
    if 1 <= v <= 10 ** 5:
        ops.append(("int*10", v * 10))
    if v != 0:
        ops.append(("int-zero", 0))
    return ops


def mutate_number(v, rng):
    if isinstance(v, int):
        op, new = rng.choice(int_ops(v))
        if op == "int+k":
            new = v + rng.randint(3, 9)
        return op, new
    op = rng.choice(["float*0.5", "float*1.5", "float+1", "float-neg"])
    new = {"float*0.5": v * 0.5, "float*1.5": v * 1.5, "float+1": v + 1.0, "float-neg": -v}[op]
    new = float("%.12g" % new)
    if new == v:
        new = v + 1.0
    return op, new


def str_ops(s, vocab, lines_ok=True):
    """The operators that apply to string value `s`, with weights. `lines_ok`: the literal is on
    one source line, so a changed line count in its value moves no line of the file."""
    if ID_RE.match(s):
        others = sorted(w for w in vocab if w != s)
        return [("str-vocab", 1)] if others else []
    ops = []
    if any(c.isdigit() for c in s):
        ops.append(("str-digit", 4))
        ops.append(("str-num-scale", 2))
    if len([t for t in SEP_RE.split(s) if t and not SEP_RE.fullmatch(t)]) >= 2:
        ops += [("str-token-drop", 2), ("str-token-dup", 2), ("str-token-swap", 2)]
    if _repeated_words(s):
        ops.append(("str-rename", 2))
    if len(s) >= 2:
        ops += [("str-char-del", 1), ("str-char-dup", 1)]
    if any(c.isalpha() for c in s):
        ops.append(("str-case", 1))
    if lines_ok and len(_text_lines(s)) >= 2:
        ops += [("str-line-dup", 2), ("str-line-drop", 1)]
    if QUOTED_RE.search(s):
        ops.append(("str-quoted", 3))
    if not s:
        ops.append(("str-fill", 1))
    return ops


QUOTED_RE = re.compile(r'"([^"\\\n]{1,40})"' + r"|'([^'\\\n]{1,40})'")


def _text_lines(s):
    """Indexes of the non-blank lines of a multi-line text (a line ends with its newline)."""
    parts = s.splitlines(keepends=True)
    if len(parts) < 2:
        return []
    return [i for i, p in enumerate(parts) if p.strip()]


def _repeated_words(s):
    """Identifier-like words that occur more than once in s (a key of a JSON or YAML text)."""
    seen = {}
    for m in WORD_RE.finditer(s):
        seen[m.group(0)] = seen.get(m.group(0), 0) + 1
    return sorted(w for w, n in seen.items() if n >= 2)


def weighted(rng, ops):
    total = sum(w for _, w in ops)
    x = rng.uniform(0, total)
    for op, w in ops:
        x -= w
        if x <= 0:
            return op
    return ops[-1][0]


def mutate_str(s, rng, vocab, lines_ok=True):
    ops = str_ops(s, vocab, lines_ok)
    if not ops:
        return None, None
    op = weighted(rng, ops)
    if op == "str-vocab":
        return op, rng.choice(sorted(w for w in vocab if w != s))
    if op == "str-digit":
        idx = [i for i, c in enumerate(s) if c.isdigit()]
        i = rng.choice(idx)
        d = rng.choice([c for c in "0123456789" if c != s[i]])
        return op, s[:i] + d + s[i + 1:]
    if op == "str-rename":
        # Every occurrence of one repeated word renamed alike: a text's structure is kept (a
        # duplicated key stays duplicated) while names in messages and values change.
        w = rng.choice(_repeated_words(s))
        return op, re.sub(r"\b%s\b" % re.escape(w), w + "x", s)
    if op == "str-num-scale":
        # One number of the text ten times larger ("3.5 hours" -> "35 hours", "PT1.5S" -> "PT15S").
        nums = list(NUM_RE.finditer(s))
        m = rng.choice(nums)
        t = m.group(0)
        if "." in t:
            a, b = t.split(".", 1)
            new = (a + b[:1]).lstrip("0") or "0"
            if b[1:]:
                new += "." + b[1:]
        else:
            new = t + "0"
        return op, s[:m.start()] + new + s[m.end():]
    if op in ("str-line-dup", "str-line-drop"):
        # A text's record count changes (one more or one fewer JSON element, YAML key, row).
        parts = s.splitlines(keepends=True)
        i = rng.choice(_text_lines(s))
        line = parts[i] if parts[i].endswith("\n") else parts[i] + "\n"
        if op == "str-line-dup":
            parts[i:i + 1] = [line, parts[i]]
        else:
            del parts[i]
        return op, "".join(parts)
    if op == "str-quoted":
        # A string value inside the text ('throw "big"', '"name": "A"'), changed alike in all
        # its quoted occurrences so that keys stay consistent.
        m = rng.choice(list(QUOTED_RE.finditer(s)))
        q = s[m.start()]
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        how = rng.choice(["append", "double", "case"])
        if how == "case" and inner.swapcase() != inner:
            new = inner.swapcase()
        elif how == "double":
            new = inner + inner
        else:
            new = inner + ("x" if not inner[-1:].isdigit() else "0")
        return op, s.replace(q + inner + q, q + new + q)
    if op.startswith("str-token"):
        parts = SEP_RE.split(s)
        # parts alternate token, separator, token, ...; a leading/trailing token may be ''.
        toks = [i for i in range(0, len(parts), 2) if parts[i]]
        if op == "str-token-drop":
            i = rng.choice(toks)
            if i + 1 < len(parts):
                del parts[i:i + 2]
            else:
                del parts[i - 1:i + 1]
        elif op == "str-token-dup":
            i = rng.choice(toks)
            sep = parts[i + 1] if i + 1 < len(parts) else parts[i - 1]
            parts[i:i + 1] = [parts[i], sep, parts[i]]
        else:
            i, j = sorted(rng.sample(toks, 2))
            parts[i], parts[j] = parts[j], parts[i]
        return op, "".join(parts)
    if op == "str-char-del":
        i = rng.randrange(len(s))
        return op, s[:i] + s[i + 1:]
    if op == "str-char-dup":
        i = rng.randrange(len(s))
        return op, s[:i] + s[i] + s[i:]
    if op == "str-case":
        idx = [i for i, c in enumerate(s) if c.isalpha() and c.swapcase() != c]
        if not idx:
            return None, None
        i = rng.choice(idx)
        return op, s[:i] + s[i].swapcase() + s[i + 1:]
    return op, rng.choice([" ", "0", "a"])


def number_node(v):
    if v < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-v))
    return ast.Constant(value=v)


def mutated_copy(node, rng, vocab):
    """A mutated deep copy of a constant element (for `append`), or None."""
    if isinstance(node, ast.Constant):
        op, new = mutate_value(node.value, rng, vocab, node.lineno == node.end_lineno)
        if op is not None:
            return ast.Constant(value=new)
    return None


def mutate_value(v, rng, vocab, lines_ok=True):
    if isinstance(v, bool):
        return "bool-flip", (not v)
    if isinstance(v, (int, float)):
        return mutate_number(v, rng)
    if isinstance(v, str):
        return mutate_str(v, rng, vocab, lines_ok)
    if isinstance(v, bytes):
        op, new = mutate_str(v.decode("latin-1"), rng, set(), lines_ok)
        return (op, new.encode("latin-1")) if op else (None, None)
    return None, None


def collection_ops(node):
    n = len(node.keys) if isinstance(node, ast.Dict) else len(node.elts)
    ops = []
    if n >= 2:
        ops += ["coll-drop", "coll-reverse"]
    if isinstance(node, (ast.List, ast.Tuple)) and n >= 1:
        ops.append("coll-dup")
        if isinstance(node.elts[-1], ast.Constant) and not isinstance(node.elts[-1], ast.Starred):
            ops.append("coll-append")
    if any(isinstance(e, ast.Starred) for e in getattr(node, "elts", [])) or \
            (isinstance(node, ast.Dict) and any(k is None for k in node.keys)):
        return []
    return ops


def mutate_collection(node, rng, vocab):
    ops = collection_ops(node)
    if not ops:
        return None, None
    op = rng.choice(ops)
    new = copy.deepcopy(node)
    if isinstance(new, ast.Dict):
        items = list(zip(new.keys, new.values))
        if op == "coll-drop":
            del items[rng.randrange(len(items))]
        elif op == "coll-reverse":
            items.reverse()
        new.keys = [k for k, _ in items]
        new.values = [v for _, v in items]
        return op, new
    if op == "coll-drop":
        del new.elts[rng.randrange(len(new.elts))]
    elif op == "coll-reverse":
        if [ast.dump(e) for e in new.elts] == [ast.dump(e) for e in reversed(new.elts)]:
            return None, None
        new.elts.reverse()
    elif op == "coll-dup":
        i = rng.randrange(len(new.elts))
        new.elts.insert(i + 1, copy.deepcopy(new.elts[i]))
    elif op == "coll-append":
        extra = mutated_copy(new.elts[-1], rng, vocab)
        if extra is None:
            return None, None
        new.elts.append(extra)
    return op, new


def site_ops(site, vocab):
    """The operator names that can apply at a site (for the `sites` listing)."""
    n = site.node
    if site.kind == "bool":
        return ["bool-flip"]
    if site.kind == "int":
        return [o for o, _ in int_ops(n.value)]
    if site.kind == "float":
        return ["float*0.5", "float*1.5", "float+1"]
    if site.kind == "str":
        return [o for o, _ in str_ops(n.value, vocab, n.lineno == n.end_lineno)]
    if site.kind == "bytes":
        return [o for o, _ in str_ops(n.value.decode("latin-1"), set(), n.lineno == n.end_lineno)]
    if site.kind in ("list", "tuple", "set", "dict"):
        return collection_ops(n)
    return []


# ---------------------------------------------------------------- files and rendering


class File:
    def __init__(self, path, source):
        self.path, self.source = path, source
        self.raw = source.encode("utf-8")
        self.tree = ast.parse(source, filename=path)
        self.line_starts = [0]
        for i, b in enumerate(self.raw):
            if b == 10:
                self.line_starts.append(i + 1)
        self.edits = []  # (start, end, text)
        self.expect = self.tree  # transformed in place

    def offset(self, line, col):
        return self.line_starts[line - 1] + col

    def span(self, node):
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node):
        a, b = self.span(node)
        return self.raw[a:b].decode("utf-8")

    def char_col(self, node):
        line = self.raw[self.line_starts[node.lineno - 1]:self.offset(node.lineno, node.col_offset)]
        return len(line.decode("utf-8")) + 1


def replace_in_parent(parent, field, index, new):
    if index is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[index] = new


def string_renderings(node, new_node, f):
    """Candidate source texts for a replacement, the ones keeping the line count first."""
    plain = ast.unparse(new_node)
    lines = node.end_lineno - node.lineno
    out = []
    if lines > 0 and isinstance(new_node, ast.Constant) and isinstance(new_node.value, str):
        v = new_node.value
        if v.count("\n") == lines and not v.endswith('"'):
            body = "\n".join(repr(part)[1:-1].replace('\\"', '"').replace('"""', '\\"\\"\\"')
                             for part in v.split("\n"))
            out.append('"""' + body + '"""')
        # implicit concatenation over the same number of lines (valid inside brackets)
        first_line = f.raw[f.line_starts[node.lineno - 1]:f.line_starts[node.lineno] - 1].decode("utf-8")
        indent = " " * (f.char_col(node) - 1) if first_line.strip() else ""
        k = lines + 1
        step = max(1, -(-len(v) // k))
        chunks = [v[i * step:(i + 1) * step] for i in range(k)]
        if all(chunks):
            out.append(("\n" + indent).join(repr(c) for c in chunks))
    out.append(plain)
    return out


def keeps_lines(f, node, value):
    """Whether a multi-line literal can take `value` in the same number of source lines."""
    new = ast.Constant(value=value)
    a, b = f.span(node)
    for text in string_renderings(node, new, f):
        if text.count("\n") != node.end_lineno - node.lineno:
            continue
        try:
            ast.parse(f.raw[:a].decode("utf-8") + text + f.raw[b:].decode("utf-8"))
            return True
        except SyntaxError:
            pass
    return False


def render(files):
    """Apply each file's edits; verify against the transformed tree; fall back to unparse."""
    how = "splice"
    for f in files:
        if not f.edits:
            f.new_source = f.source
            continue
        want = ast.dump(f.expect)
        chosen = None
        # Each edit has candidate texts; try all-first, then all-last (plain unparse).
        for pick in (0, -1):
            raw = f.raw
            for start, end, texts in sorted(f.edits, key=lambda e: e[0], reverse=True):
                t = texts[pick] if pick < len(texts) else texts[-1]
                raw = raw[:start] + t.encode("utf-8") + raw[end:]
            src = raw.decode("utf-8")
            try:
                ok = ast.dump(ast.parse(src)) == want
            except SyntaxError:
                ok = False
            if ok:
                chosen = src
                break
        if chosen is None:
            chosen = ast.unparse(f.expect) + "\n"
            how = "unparse"
        f.new_source = chosen
    return how


# ---------------------------------------------------------------- assertions


def kept_operands(test):
    """What a relaxed assertion still evaluates: the computed operands of its comparisons
    against literals, the calls whose truth it checked, in source order; never the literal
    (the old, now wrong, expected value) nor the comparison itself, so that the test a model
    reads states nothing false."""
    if isinstance(test, ast.Compare):
        ops = [test.left] + list(test.comparators)
        if any(literal_like(o) for o in ops):
            return [o for o in ops if not literal_like(o)]
        return [test]
    if isinstance(test, ast.BoolOp):
        return [k for v in test.values for k in kept_operands(v)]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return kept_operands(test.operand)
    if literal_like(test):
        return []
    return [test]


def needs_relax(test):
    if isinstance(test, ast.Compare):
        return any(literal_like(o) for o in [test.left] + list(test.comparators))
    if isinstance(test, ast.BoolOp):
        return any(needs_relax(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return needs_relax(test.operand) or isinstance(test.operand, ast.Call)
    return isinstance(test, ast.Call)


SUPPRESS = "_flux_suppress"


def import_suppress(f):
    """Import `contextlib.suppress` for relaxed `raises` blocks, after everything else."""
    tail = "" if f.raw.endswith(b"\n") or not f.raw else "\n"
    imp = "from contextlib import suppress as %s\n" % SUPPRESS
    f.edits.append((len(f.raw), len(f.raw), [tail + imp]))
    f.expect.body.append(ast.parse(imp).body[0])


def relax_assert(f, st):
    """The statement a relaxed `assert` becomes (see the module doc), as edits of `f` and the
    new node. Only the gaps around kept operands are edited (mutations may sit inside them),
    and every newline is kept (inside brackets) so that no line moves."""
    a, b = f.span(st)
    nl = lambda x, y: "\n" * f.raw[x:y].count(b"\n")

    def keep(kept, lead, x, y):
        # `lead` + the kept operands as one parenthesised expression, over [x, y).
        if not kept:
            f.edits.append((x, y, [lead + "pass" + nl(x, y)]))
            return ast.Pass()
        spans = [f.span(k) for k in kept]
        f.edits.append((x, spans[0][0], [lead + "(" + nl(x, spans[0][0])]))
        for (_, e0), (s1, _) in zip(spans, spans[1:]):
            f.edits.append((e0, s1, [", " + nl(e0, s1)]))
        f.edits.append((spans[-1][1], y, [nl(spans[-1][1], y) + ")"]))
        return ast.Expr(value=kept[0] if len(kept) == 1 else ast.Tuple(elts=kept, ctx=ast.Load()))

    t = st.test
    if isinstance(t, ast.BoolOp):
        # `assert A and B`: B ran only when A held; `if A: (B's operands)` keeps that.
        gate, last = t.values[:-1], t.values[-1]
        cond = gate[0] if len(gate) == 1 else ast.BoolOp(op=t.op, values=gate)
        neg = isinstance(t.op, ast.Or)
        if neg:
            cond = ast.UnaryOp(op=ast.Not(), operand=cond)
        g0, g1 = f.span(gate[0])[0], f.span(gate[-1])[1]
        f.edits.append((a, g0, [("if not (" if neg else "if (") + nl(a, g0)]))
        kept, l0 = kept_operands(last), f.span(last)[0]
        if kept:
            f.edits.append((g1, l0, [nl(g1, l0) + "): "]))
            body = keep(kept, "", l0, b)
        else:
            f.edits.append((g1, b, [nl(g1, b) + "): pass"]))
            body = ast.Pass()
        ast.copy_location(body, st)
        new = ast.If(test=cond, body=[body], orelse=[])
    else:
        new = keep(kept_operands(t), "", a, b)
    ast.copy_location(new, st)
    return new


def relax_asserts(f, fn, fname):
    """Turn the stale-literal asserts of test function `fn` into expression statements."""
    out = []

    def visit(body_owner, field):
        body = getattr(body_owner, field, None)
        if not isinstance(body, list):
            return
        for i, st in enumerate(body):
            if isinstance(st, ast.With):
                for item in st.items:
                    c = item.context_expr
                    if (item.optional_vars is None and isinstance(c, ast.Call) and c.args
                            and call_name(c) == "raises" and is_check_call(c)):
                        new = ast.Call(func=ast.Name(id=SUPPRESS, ctx=ast.Load()), args=[c.args[0]],
                                       keywords=[])
                        ast.copy_location(new, c)
                        a, b = f.span(c)
                        f.edits.append((a, b, [SUPPRESS + "(" + f.text(c.args[0]) + ")"]))
                        item.context_expr = new
                        f.needs_suppress = True
                        out.append({"file": f.path, "line": st.lineno, "function": fname,
                                    "was": f.text(st).split("\n")[0][:200]})
            if isinstance(st, ast.Assert) and needs_relax(st.test):
                body[i] = relax_assert(f, st)
                out.append({"file": f.path, "line": st.lineno, "function": fname,
                            "was": f.text(st).split("\n")[0][:200]})
            for sub in ("body", "orelse", "finalbody", "handlers"):
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    break
                visit(st, sub)

    visit(fn, "body")
    return out


# ---------------------------------------------------------------- requests


def load(req):
    files = [File(x["path"], x["source"]) for x in req["files"]]
    q = req.get("question", "") or ""
    sites, order = [], []
    for i, f in enumerate(files):
        c = Collector(i, f.tree, q).run()
        sites += c.sites
        order += c.order_sites
    return files, sites, order


def vocabulary(sites):
    vocab = {}
    for s in sites:
        if s.kind == "str" and ID_RE.match(s.node.value):
            vocab.setdefault(s.file, set()).add(s.node.value)
    return vocab


def describe_site(files, s, vocab, sid):
    f = files[s.file]
    return {
        "id": sid, "file": f.path, "line": s.node.lineno, "col": f.char_col(s.node),
        "end_line": s.node.end_lineno, "function": s.function, "kind": s.kind,
        "text": f.text(s.node)[:300], "ops": site_ops(s, vocab.get(s.file, set())),
    }


def overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1]


def finish(files, changed_sites, mutations, rejected, assertions):
    # Relax the asserts of every test whose inputs changed.
    relaxed = []
    if assertions == "relax" and mutations:
        affected = {}
        for s in changed_sites:
            for t in s.tests:
                affected.setdefault(s.file, set()).add(t)
        for fi, f in enumerate(files):
            for name, fn in test_functions(f.tree):
                if name in affected.get(fi, ()):
                    relaxed += relax_asserts(f, fn, name)
            if getattr(f, "needs_suppress", False):
                import_suppress(f)
        relaxed.sort(key=lambda r: (r["file"], r["line"]))
    how = render(files)
    mutations.sort(key=lambda m: (m["file"], m["line"], m["col"]))
    out_files = []
    for f in files:
        ast.parse(f.new_source)
        out_files.append({"path": f.path, "source": f.new_source, "changed": f.new_source != f.source})
    return {"files": out_files, "mutations": mutations, "relaxed": relaxed, "rejected": rejected,
            "render": how}


def do_replace(files, site, new_node, op, mutations):
    f = files[site.file]
    a, b = f.span(site.node)
    old_text = f.text(site.node)
    texts = string_renderings(site.node, new_node, f)
    f.edits.append((a, b, texts))
    ast.copy_location(new_node, site.node)
    replace_in_parent(site.parent, site.field, site.index, new_node)
    mutations.append({"file": f.path, "line": site.node.lineno, "col": f.char_col(site.node),
                      "function": site.function, "op": op, "old": old_text[:300],
                      "new": ast.unparse(new_node)[:300]})


def operand_text(f, node):
    t = f.text(node)
    if isinstance(node, (ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Lambda, ast.NamedExpr)):
        return "(" + t + ")"
    return t


def order_spans(f, site):
    n = site.node
    if site.kind == "kwargs":
        return [f.span(k) for k in n.keywords]
    if site.kind == "commutative":
        return [f.span(n.args[0]), f.span(n.args[1])]
    return [f.span(n.left), f.span(n.right)]


def do_order(files, site, mutations):
    f = files[site.file]
    n = site.node
    if site.kind == "kwargs":
        kws = list(n.keywords)
        texts = [f.text(k) for k in kws]
        perm = kws[1:] + kws[:1]
        ptexts = texts[1:] + texts[:1]
        for k, t in zip(kws, ptexts):
            a, b = f.span(k)
            f.edits.append((a, b, [t]))
        n.keywords = perm
        op, old, new = "kwargs-rotate", ", ".join(texts), ", ".join(ptexts)
    elif site.kind == "commutative":
        x, y = n.args[0], n.args[1]
        tx, ty = f.text(x), f.text(y)
        f.edits.append((*f.span(x), [ty]))
        f.edits.append((*f.span(y), [tx]))
        n.args[0], n.args[1] = y, x
        op, old, new = "commutative-swap", tx + ", " + ty, ty + ", " + tx
    else:
        x, y = n.left, n.right
        tx, ty = operand_text(f, x), operand_text(f, y)
        f.edits.append((*f.span(x), [ty]))
        f.edits.append((*f.span(y), [tx]))
        n.left, n.right = y, x
        op, old, new = "operand-swap", f.text(n), ty + " " + ("+" if isinstance(n.op, ast.Add) else "*") + " " + tx
    mutations.append({"file": f.path, "line": n.lineno, "col": f.char_col(n), "function": site.function,
                      "op": op, "old": old[:300], "new": new[:300]})


def focus_tests(sites, question):
    """The tests the question names (as a whole word): when it names some, only their inputs
    can change its answer ("in its test `test_x` only"), so only they are mutated."""
    names = {t for s in sites for t in s.tests}
    return {t for t in names
            if re.search(r"(?<![\w.])" + re.escape(t.split(".")[-1]) + r"(?!\w)", question)}


def do_mutate(req):
    files, sites, order = load(req)
    vocab = vocabulary(sites)
    seed = int(req.get("seed", 0))
    rng = random.Random("flux-perturb/%d" % seed)
    maxm = max(1, int(req.get("max_mutations", 3)))
    mutable = [s for s in sites if site_ops(s, vocab.get(s.file, set()))]
    focus = focus_tests(mutable, req.get("question", "") or "")
    if focus:
        mutable = [s for s in mutable if focus & set(s.tests)]
        order = [o for o in order if focus & set(o.tests)]
    mutations, changed, taken = [], [], []
    if mutable:
        want = rng.randint(1, min(maxm, len(mutable)))
        pool = list(mutable)
        rng.shuffle(pool)
        for s in pool:
            if len(changed) >= want:
                break
            f = files[s.file]
            span = (s.file,) + f.span(s.node)
            if any(t[0] == span[0] and overlaps(t[1:], span[1:]) for t in taken):
                continue
            if s.kind in ("list", "tuple", "set", "dict"):
                op, new = mutate_collection(s.node, rng, vocab.get(s.file, set()))
            else:
                one_line = s.node.lineno == s.node.end_lineno
                op, new = mutate_value(s.node.value, rng, vocab.get(s.file, set()), one_line)
                if op is not None and not one_line and not keeps_lines(f, s.node, new):
                    continue  # a multi-line literal keeps its line count (no line below moves)
                if op is not None:
                    new = number_node(new) if isinstance(new, (int, float)) and not isinstance(new, bool) \
                        else ast.Constant(value=new)
            if op is None:
                continue
            taken.append(span)
            do_replace(files, s, new, op, mutations)
            changed.append(s)
    # Argument order: now and then alongside value changes, always when there are none.
    if order and len(changed) < maxm and (not changed or rng.random() < 0.3):
        rng_order = [o for o in order
                     if not any(t[0] == o.file and overlaps(t[1:], sp)
                                for t in taken for sp in order_spans(files[o.file], o))]
        if rng_order:
            o = rng.choice(rng_order)
            do_order(files, o, mutations)
            changed.append(o)
    return finish(files, changed, mutations, [], req.get("assertions", "relax"))


def do_apply(req):
    files, sites, _ = load(req)
    mutations, changed, rejected, taken = [], [], [], []
    for e in req.get("edits", []):
        try:
            line, col = int(e.get("line", 0)), int(e.get("col", 0))
            old, new_text = str(e.get("old", "")), str(e.get("new", ""))
        except (TypeError, ValueError):
            rejected.append({"edit": e, "reason": "line/col are not numbers"})
            continue
        fname = e.get("file")
        cands = [s for s in sites if fname in (None, "", files[s.file].path)]
        hit = [s for s in cands if s.node.lineno == line and files[s.file].char_col(s.node) == col]
        if not hit or files[hit[0].file].text(hit[0].node).strip() != old.strip():
            by_text = [s for s in cands if files[s.file].text(s.node).strip() == old.strip()]
            if len(by_text) == 1:
                hit = by_text
            elif by_text:
                near = [s for s in by_text if s.node.lineno == line]
                hit = near[:1] if len(near) == 1 else []
            else:
                hit = []
        if not hit:
            rejected.append({"edit": e, "reason": "no input literal `%s` at line %s col %s" % (old[:80], line, col)})
            continue
        s = hit[0]
        try:
            new_node = ast.parse(new_text.strip(), mode="eval").body
        except SyntaxError as err:
            rejected.append({"edit": e, "reason": "new value does not parse: %s" % err.msg})
            continue
        if not literal_like(new_node):
            rejected.append({"edit": e, "reason": "new value is not a literal"})
            continue
        try:
            ast.literal_eval(new_node)
        except Exception:
            rejected.append({"edit": e, "reason": "new value is not a literal"})
            continue
        if ast.dump(new_node) == ast.dump(s.node):
            rejected.append({"edit": e, "reason": "new value equals the old one"})
            continue
        f = files[s.file]
        span = (s.file,) + f.span(s.node)
        if any(t[0] == span[0] and overlaps(t[1:], span[1:]) for t in taken):
            rejected.append({"edit": e, "reason": "overlaps an earlier edit"})
            continue
        taken.append(span)
        do_replace(files, s, new_node, "proposed", mutations)
        changed.append(s)
    return finish(files, changed, mutations, rejected, req.get("assertions", "relax"))


def do_sites(req):
    files, sites, order = load(req)
    vocab = vocabulary(sites)
    out = [describe_site(files, s, vocab, i) for i, s in enumerate(sites)]
    for s in order:
        f = files[s.file]
        out.append({"id": len(out), "file": f.path, "line": s.node.lineno, "col": f.char_col(s.node),
                    "end_line": s.node.end_lineno, "function": s.function, "kind": s.kind,
                    "text": f.text(s.node)[:300],
                    "ops": {"kwargs": ["kwargs-rotate"], "commutative": ["commutative-swap"],
                            "binop": ["operand-swap"]}[s.kind]})
    return {"sites": out, "tests": [n for f in files for n, _ in test_functions(f.tree)]}


def main():
    req = json.load(sys.stdin)
    op = req.get("op")
    try:
        if op == "sites":
            out = do_sites(req)
        elif op == "mutate":
            out = do_mutate(req)
        elif op == "apply":
            out = do_apply(req)
        else:
            out = {"error": "unknown op %r" % (op,)}
    except SyntaxError as e:
        out = {"error": "%s:%s: cannot parse: %s" % (e.filename, e.lineno, e.msg)}
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
