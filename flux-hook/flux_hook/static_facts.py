"""python3 -m flux_hook.static_facts FILE... : static facts of Python source files, as JSON.

Why: extractors and the question generator need to know what the *source* says about the code
that ran -- which lines form one statement, where a loop's body starts, which names a line
reads and writes, which exception types an `except` names -- to state questions exactly and to
compute answers SWE-Flux computes from the AST (assignment-based definitions, statement-start
line normalisation, zero rows for functions that never ran). The hook runs this in the traced
process on the exact file that ran, with the interpreter that ran it; the CLI form serves
scouting and tests. Stdlib only, Python 3.11+.

Output of the CLI: one JSON object
    {"version": 1, "python": "3.11", "files": {PATH: FACTS, ...}, "errors": {PATH: MESSAGE}}
(exit status 1 if any file failed). `facts_for_source(source, filename)` returns one FACTS:

    file      the filename as given (the CLI makes it absolute)
    sha256    of the source bytes
    python    "MAJOR.MINOR" of the interpreter that computed the facts (comprehension frames
              and qualnames depend on it)
    lines     number of physical lines
    functions one entry per scope, in source order (module first):
      qualname    CPython's co_qualname (`C.m`, `f.<locals>.g`, `f.<locals>.<lambda>`,
                  `f.<locals>.<listcomp>`; `<module>` for the module)
      name        co_name
      kind        module | class | function | async_function | lambda | listcomp | setcomp |
                  dictcomp | genexpr, and for code objects the compiler adds beside a definition
                  (entries without statements or names): type_params (PEP 695's `<generic
                  parameters of NAME>`), type_param (a TypeVar's lazily evaluated bound or
                  default), type_value (a `type X = ...` value), annotate (PEP 649's
                  `__annotate__`, 3.14+)
      code        true when the scope runs as a code object (frame) of its own on this
                  interpreter: false for list/set/dict comprehensions on 3.12+ (PEP 709 inlines
                  them into their function's frame)
      def_line    the line of `def`/`class`/`lambda`/the comprehension (ast lineno)
      first_line  co_firstlineno: the first decorator's line for a decorated def, else def_line
      body_line   the first line of the body's first statement (the docstring, if any); for
                  lambdas and comprehensions, def_line
      last_line   the scope's last line (ast end_lineno)
      decorators  source text of each decorator expression, in order
      params      parameter names in order (`*args` as `args`, `**kw` as `kw`)
      parent      qualname of the enclosing scope (null for the module)
      statements  [start, end] line spans, sorted, one per statement of this scope; a compound
                  statement's span covers only its header (`if` test, `for` target and iterable,
                  `with` items, `def` decorators and signature, `try:`), and `except`, `case`
                  headers have spans of their own (a class body also has its `class` header, the
                  line its code reports first), so the spans are disjoint and a line of this
                  scope normalises to the start of the span that holds it (a line in none --
                  blank, comment, `else:` -- to itself). Lambdas and comprehensions have one span:
                  their whole expression.
      writes      {line: [names]} bound in this scope's own namespace at that line: assignment
                  and augmented-assignment targets, `for`/`with`/`except ... as` targets,
                  walrus targets (a walrus in a comprehension binds in the enclosing function,
                  PEP 572), import names, `def`/`class` names, match captures, and the
                  parameters at def_line
      deletes     {line: [names]} of `del name`
      reads       {line: [names]} loaded by this scope's own code at that line and resolved in
                  it (a local or parameter); augmented assignment reads its target
      free_reads  {line: [names]} loaded by this scope's own code that resolve to no local of
                  it (an enclosing function's local, a global or a builtin)
      read_counts {line: {name: n}} how many times this scope's own code loads a name of
                  `reads` at that line, where more than once (`x + x`: 2)
      nested_reads {line: [names]} loaded by nested scopes (comprehensions, lambdas, closures,
                  at any depth) that resolve to a local of *this* scope -- what SWE-Flux's def-use
                  attributes to the enclosing function
      calls       {line: [callee expression text]} of the calls this scope's own code makes,
                  keyed by the call expression's first line, in source order
      globals, nonlocals  names declared so
    loops     {func, kind (for | while | async_for | comprehension), line, header_end, end_line,
              body [first, last], body_first_line, else [first, last] | null, depth (enclosing
              loops in the same scope), parent (line of the innermost enclosing loop | null)}
    branches  {func, kind, line, end_line, ...}: `if`/`elif` (body_line, else_line | null),
              `ifexp` (body_line, else_line), `and`/`or` (operands), `match` (cases: the case
              lines), `comp_if` (a comprehension's `if`)
    handlers  {func, try_line, end_line, body [first, last], handlers: [{line, types: [source
              text of each type named; [] for a bare except], name | null, body [first, last]}],
              else [first, last] | null, finally [first, last] | null, star (except*)}

Lines are 1-based physical lines; in JSON objects they are string keys.
"""
import ast
import hashlib
import json
import os
import sys

PYTHON = "%d.%d" % sys.version_info[:2]
# PEP 709 (3.12): list, set and dict comprehensions no longer have frames of their own.
INLINED_COMPREHENSIONS = sys.version_info >= (3, 12)

COMPREHENSION_NAMES = {
    ast.ListComp: "listcomp",
    ast.SetComp: "setcomp",
    ast.DictComp: "dictcomp",
    ast.GeneratorExp: "genexpr",
}
FUNCTION_KINDS = ("function", "async_function", "lambda")
LOOP_NODES = (ast.For, ast.AsyncFor, ast.While)


class Scope:
    """One namespace: the module, a class body, a function, a lambda or a comprehension."""

    def __init__(self, kind, name, node, parent):
        self.kind = kind
        self.name = name
        self.node = node
        self.parent = parent
        self.qualname = qualname_of(kind, name, parent)
        self.bound = set()
        self.globals = set()
        self.nonlocals = set()
        self.writes = []  # (line, name)
        self.deletes = []
        self.loads = []  # (line, name), resolved later
        self.calls = []  # (line, text)
        self.statements = []  # (start, end)
        self.params = []
        self.decorators = []

    def is_function(self):
        return self.kind in FUNCTION_KINDS or self.kind in COMPREHENSION_NAMES.values()

    def has_code(self):
        if self.kind in ("listcomp", "setcomp", "dictcomp"):
            return not INLINED_COMPREHENSIONS
        return True

    def bind(self, line, name):
        self.bound.add(name)
        self.writes.append((line, name))


def qualname_of(kind, name, parent):
    """co_qualname as CPython's compiler sets it (compile.c, compiler_set_qualname)."""
    if parent is None or parent.kind == "module":
        return name
    if kind in ("function", "async_function", "class") and name in parent.globals:
        return name  # `global f` in the enclosing scope: the qualname is the bare name
    if parent.kind in FUNCTION_KINDS:
        return parent.qualname + ".<locals>." + name
    return parent.qualname + "." + name


def span_of(node):
    return [node.lineno, node.end_lineno or node.lineno]


def body_span(stmts):
    if not stmts:
        return None
    return [stmts[0].lineno, stmts[-1].end_lineno or stmts[-1].lineno]


def header_end(node):
    """Last line of a compound statement's header (see `statements` in the module doc)."""
    parts = []
    if isinstance(node, (ast.If, ast.While)):
        parts = [node.test]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        parts = [node.target, node.iter]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            parts.append(item.context_expr)
            if item.optional_vars is not None:
                parts.append(item.optional_vars)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts = [node.args] + ([node.returns] if node.returns else [])
    elif isinstance(node, ast.ClassDef):
        parts = list(node.bases) + [k.value for k in node.keywords]
    elif isinstance(node, ast.Match):
        parts = [node.subject]
    end = node.lineno
    for p in parts:
        e = getattr(p, "end_lineno", None)
        if e is not None and e > end:
            end = e
    return end


COMPOUND = (
    ast.If,
    ast.While,
    ast.For,
    ast.AsyncFor,
    ast.With,
    ast.AsyncWith,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Try,
    ast.Match,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


def line_map(pairs):
    """{str(line): [names in first-seen order, unique]} from (line, name) pairs."""
    out = {}
    for line, name in pairs:
        names = out.setdefault(str(line), [])
        if name not in names:
            names.append(name)
    return out


def load_counts(pairs):
    """{str(line): {name: n}} of the (line, name) loads that occur more than once."""
    counts = {}
    for line, name in pairs:
        counts[(line, name)] = counts.get((line, name), 0) + 1
    out = {}
    for (line, name), n in sorted(counts.items()):
        if n > 1:
            out.setdefault(str(line), {})[name] = n
    return out


def call_map(pairs):
    out = {}
    for line, text in pairs:
        out.setdefault(str(line), []).append(text)
    return out


class Collector(ast.NodeVisitor):
    """One pass over the tree: scopes with their bindings, loads, calls and statements, and the
    loops, branches and handlers of each scope."""

    def __init__(self, source_lines):
        self.source_lines = source_lines
        self.scopes = []
        self.scope = None
        self.loops = []
        self.loop_stack = []  # per scope: list of enclosing loop lines
        self.branches = []
        self.handlers = []

    # -- scopes -----------------------------------------------------------------------------

    def push(self, kind, name, node):
        s = Scope(kind, name, node, self.scope)
        self.scopes.append(s)
        self.scope = s
        self.loop_stack.append([])
        return s

    def pop(self):
        self.loop_stack.pop()
        self.scope = self.scope.parent

    def function_scope_for_walrus(self):
        s = self.scope
        while s.kind in COMPREHENSION_NAMES.values():
            s = s.parent
        return s

    def visit_Module(self, node):
        self.future_annotations = any(
            isinstance(st, ast.ImportFrom)
            and st.module == "__future__"
            and any(a.name == "annotations" for a in st.names)
            for st in node.body
        )
        m = self.push("module", "<module>", node)
        self.declarations(node.body)
        self.body(node.body)
        self.pop()
        if sys.version_info >= (3, 14) and not self.future_annotations and node.body:
            if any(simple_annassign(n) for st in node.body for n in walk_scope(st)):
                self.extra("annotate", "__annotate__", m, node.body[0].lineno, "__annotate__")

    def declarations(self, stmts):
        """`global`/`nonlocal` apply to the whole scope: record them before anything else so
        that qualnames of functions declared global come out right."""
        for st in stmts:
            if isinstance(st, SCOPE_NODES):
                continue
            for n in walk_scope(st):
                if isinstance(n, ast.Global):
                    self.scope.globals.update(n.names)
                elif isinstance(n, ast.Nonlocal):
                    self.scope.nonlocals.update(n.names)

    def body(self, stmts):
        for st in stmts:
            self.visit(st)

    def statement(self, node):
        if isinstance(node, COMPOUND):
            start = node.lineno
            if getattr(node, "decorator_list", None):
                start = min(d.lineno for d in node.decorator_list)
            self.scope.statements.append((start, header_end(node)))
        else:
            self.scope.statements.append(tuple(span_of(node)))

    def visit(self, node):
        if isinstance(node, ast.stmt):
            self.statement(node)
        return super().visit(node)

    def arguments(self, args, line):
        """Parameters bound at the def line of the current (new) scope."""
        names = [a.arg for a in getattr(args, "posonlyargs", [])]
        names += [a.arg for a in args.args]
        if args.vararg:
            names.append(args.vararg.arg)
        names += [a.arg for a in args.kwonlyargs]
        if args.kwarg:
            names.append(args.kwarg.arg)
        for n in names:
            self.scope.bind(line, n)
        self.scope.params = names

    def defaults_and_annotations(self, args, returns):
        for d in args.defaults:
            self.visit(d)
        for d in args.kw_defaults:
            if d is not None:
                self.visit(d)
        every = list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs)
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        for a in every:
            if a.annotation is not None:
                self.visit(a.annotation)
        if returns is not None:
            self.visit(returns)

    def visit_FunctionDef(self, node, kind="function"):
        for d in node.decorator_list:
            self.visit(d)
        self.defaults_and_annotations(node.args, node.returns)
        self.scope.bind(node.lineno, node.name)
        parent = self.scope
        s = self.push(kind, node.name, node)
        self.synthetic(node, parent, s)
        s.decorators = [source_text(d) for d in node.decorator_list]
        self.declarations(node.body)
        self.arguments(node.args, node.lineno)
        self.body(node.body)
        self.pop()

    def visit_AsyncFunctionDef(self, node):
        self.visit_FunctionDef(node, kind="async_function")

    def visit_Lambda(self, node):
        self.defaults_and_annotations(node.args, None)
        s = self.push("lambda", "<lambda>", node)
        s.statements.append(tuple(span_of(node)))
        self.arguments(node.args, node.lineno)
        self.visit(node.body)
        self.pop()

    def visit_ClassDef(self, node):
        for d in node.decorator_list:
            self.visit(d)
        for b in node.bases:
            self.visit(b)
        for k in node.keywords:
            self.visit(k.value)
        self.scope.bind(node.lineno, node.name)
        parent = self.scope
        s = self.push("class", node.name, node)
        self.synthetic(node, parent, s)
        s.decorators = [source_text(d) for d in node.decorator_list]
        # A class body's code reports its `class` line first (setting __module__, __qualname__).
        s.statements.append((node.lineno, header_end(node)))
        self.declarations(node.body)
        self.body(node.body)
        self.pop()

    def comprehension(self, node, elements):
        kind = COMPREHENSION_NAMES[type(node)]
        first = node.generators[0]
        # The first iterable is evaluated in the enclosing scope.
        self.visit(first.iter)
        s = self.push(kind, "<%s>" % kind, node)
        s.statements.append(tuple(span_of(node)))
        for i, gen in enumerate(node.generators):
            if i > 0:
                self.visit(gen.iter)
            self.visit(gen.target)
            self.loops.append(
                {
                    "func": s.qualname,
                    "kind": "comprehension",
                    "line": gen.target.lineno,
                    "header_end": gen.iter.end_lineno,
                    "end_line": node.end_lineno,
                    "body": span_of(node),
                    "body_first_line": node.lineno,
                    "else": None,
                    "depth": i,
                    "parent": None if i == 0 else node.generators[i - 1].target.lineno,
                }
            )
            for cond in gen.ifs:
                self.branches.append(
                    {
                        "func": s.qualname,
                        "kind": "comp_if",
                        "line": cond.lineno,
                        "end_line": cond.end_lineno,
                    }
                )
                self.visit(cond)
        for e in elements:
            self.visit(e)
        self.pop()

    def visit_ListComp(self, node):
        self.comprehension(node, [node.elt])

    visit_SetComp = visit_ListComp
    visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        self.comprehension(node, [node.key, node.value])

    # -- names ------------------------------------------------------------------------------

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            self.scope.loads.append((node.lineno, node.id))
        elif isinstance(node.ctx, ast.Store):
            self.scope.bind(node.lineno, node.id)
        else:
            self.scope.bound.add(node.id)
            self.scope.deletes.append((node.lineno, node.id))

    def visit_AugAssign(self, node):
        if isinstance(node.target, ast.Name):
            self.scope.loads.append((node.target.lineno, node.target.id))
            self.scope.bind(node.target.lineno, node.target.id)
        else:
            self.visit(node.target)
        self.visit(node.value)

    def visit_AnnAssign(self, node):
        self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)
            self.visit(node.target)
        elif not isinstance(node.target, ast.Name):
            self.visit(node.target)
        else:
            # `x: int` makes x local without binding it.
            self.scope.bound.add(node.target.id)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        target = self.function_scope_for_walrus()
        target.bind(node.target.lineno, node.target.id)

    def visit_Import(self, node):
        for a in node.names:
            name = a.asname or a.name.split(".")[0]
            self.scope.bind(node.lineno, name)

    def visit_ImportFrom(self, node):
        for a in node.names:
            if a.name != "*":
                self.scope.bind(node.lineno, a.asname or a.name)

    def visit_Global(self, node):
        pass

    visit_Nonlocal = visit_Global

    def visit_MatchAs(self, node):
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name is not None:
            self.scope.bind(node.lineno, node.name)

    def visit_MatchStar(self, node):
        if node.name is not None:
            self.scope.bind(node.lineno, node.name)

    def visit_MatchMapping(self, node):
        for k in node.keys:
            self.visit(k)
        for p in node.patterns:
            self.visit(p)
        if node.rest is not None:
            self.scope.bind(node.lineno, node.rest)

    def visit_TypeAlias(self, node):  # 3.12+
        self.synthetic(node, self.scope, None)
        self.visit(node.value)
        self.visit(node.name)

    def synthetic(self, node, parent, scope):
        """Code objects the compiler makes beside a definition, recorded as scopes without
        statements so that every code object of the file has an entry: PEP 695's
        `<generic parameters of NAME>`, its TypeVar bounds/defaults and type-alias values (3.12+),
        and PEP 649's `__annotate__` functions (3.14+)."""
        name = node.name.id if isinstance(node, getattr(ast, "TypeAlias", ())) else node.name
        params = getattr(node, "type_params", None) or []
        first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
        generic = None
        if params:
            generic = self.extra("type_params", "<generic parameters of %s>" % name, parent, first)
            for tp in params:
                for part in (getattr(tp, "bound", None), getattr(tp, "default_value", None)):
                    if part is not None:
                        self.extra("type_param", tp.name, generic, tp.lineno)
        if isinstance(node, getattr(ast, "TypeAlias", ())):
            self.extra("type_value", name, generic or parent, node.lineno)
            return
        if scope is None or sys.version_info < (3, 14):
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and has_annotations(node.args, node.returns):
            if sys.version_info < (3, 15):
                # 3.14 names it as a sibling of the function (its qualname's parent part).
                qual = qualname_of("annotate", "__annotate__", parent)
            elif generic is not None and parent.kind == "module":
                qual = "__annotate__"
            else:
                qual = scope.qualname + ".__annotate__"
            self.extra("annotate", "__annotate__", scope, node.lineno, qual)
        elif isinstance(node, ast.ClassDef) and not self.future_annotations:
            if any(simple_annassign(n) for st in node.body for n in walk_scope(st)):
                self.extra("annotate", "__annotate__", scope, node.lineno, scope.qualname + ".__annotate__")

    def extra(self, kind, name, parent, line, qualname=None):
        """A scope of a synthetic code object (no statements, names or calls of its own)."""
        s = Scope(kind, name, None, parent)
        if parent is not None and parent.kind == "type_params":
            # Type-parameter scopes are transparent for qualnames (compiler_set_qualname).
            grand = parent.parent
            s.qualname = name if grand is None or grand.kind == "module" else qualname_of(kind, name, grand)
        if qualname is not None:
            s.qualname = qualname
        s.first = line
        self.scopes.append(s)
        return s

    def visit_Call(self, node):
        self.scope.calls.append((node.lineno, source_text(node.func)))
        self.generic_visit(node)

    # -- control flow -----------------------------------------------------------------------

    def loop(self, node, kind):
        stack = self.loop_stack[-1]
        body = body_span(node.body)
        self.loops.append(
            {
                "func": self.scope.qualname,
                "kind": kind,
                "line": node.lineno,
                "header_end": header_end(node),
                "end_line": node.end_lineno,
                "body": body,
                "body_first_line": node.body[0].lineno,
                "else": body_span(node.orelse),
                "depth": len(stack),
                "parent": stack[-1] if stack else None,
            }
        )
        if kind == "while":
            self.visit(node.test)
        else:
            self.visit(node.target)
            self.visit(node.iter)
        stack.append(node.lineno)
        self.body(node.body)
        stack.pop()
        self.body(node.orelse)

    def visit_For(self, node):
        self.loop(node, "for")

    def visit_AsyncFor(self, node):
        self.loop(node, "async_for")

    def visit_While(self, node):
        self.loop(node, "while")

    def visit_If(self, node):
        text = self.source_lines[node.lineno - 1][node.col_offset :]
        self.branches.append(
            {
                "func": self.scope.qualname,
                "kind": "elif" if text.startswith("elif") else "if",
                "line": node.lineno,
                "end_line": node.end_lineno,
                "test_end": node.test.end_lineno,
                "body_line": node.body[0].lineno,
                "else_line": node.orelse[0].lineno if node.orelse else None,
            }
        )
        self.generic_visit(node)

    def visit_IfExp(self, node):
        self.branches.append(
            {
                "func": self.scope.qualname,
                "kind": "ifexp",
                "line": node.lineno,
                "end_line": node.end_lineno,
                "body_line": node.body.lineno,
                "else_line": node.orelse.lineno,
            }
        )
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        self.branches.append(
            {
                "func": self.scope.qualname,
                "kind": "and" if isinstance(node.op, ast.And) else "or",
                "line": node.lineno,
                "end_line": node.end_lineno,
                "operands": len(node.values),
            }
        )
        self.generic_visit(node)

    def visit_Match(self, node):
        self.branches.append(
            {
                "func": self.scope.qualname,
                "kind": "match",
                "line": node.lineno,
                "end_line": node.end_lineno,
                "cases": [c.pattern.lineno for c in node.cases],
            }
        )
        self.visit(node.subject)
        for c in node.cases:
            end = (c.guard or c.pattern).end_lineno
            self.scope.statements.append((c.pattern.lineno, end))
            self.visit(c.pattern)
            if c.guard is not None:
                self.visit(c.guard)
            self.body(c.body)

    def visit_Try(self, node, star=False):
        entry = {
            "func": self.scope.qualname,
            "try_line": node.lineno,
            "end_line": node.end_lineno,
            "body": body_span(node.body),
            "handlers": [],
            "else": body_span(node.orelse),
            "finally": body_span(node.finalbody),
            "star": star,
        }
        self.handlers.append(entry)
        self.body(node.body)
        for h in node.handlers:
            types = []
            if h.type is not None:
                elts = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
                types = [source_text(t) for t in elts]
                self.scope.statements.append((h.lineno, h.type.end_lineno))
                self.visit(h.type)
            else:
                self.scope.statements.append((h.lineno, h.lineno))
            if h.name is not None:
                self.scope.bind(h.lineno, h.name)
            entry["handlers"].append(
                {"line": h.lineno, "types": types, "name": h.name, "body": body_span(h.body)}
            )
            self.body(h.body)
        self.body(node.orelse)
        self.body(node.finalbody)

    def visit_TryStar(self, node):
        self.visit_Try(node, star=True)


SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef) + tuple(
    COMPREHENSION_NAMES
)


def walk_scope(node):
    """The nodes of `node` that belong to the same scope (not inside nested defs, lambdas,
    classes or comprehensions)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, SCOPE_NODES):
                todo.append(c)


def simple_annassign(node):
    return isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.simple


def has_annotations(args, returns):
    every = list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs)
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return returns is not None or any(a.annotation is not None for a in every)


def source_text(node):
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every expression of 3.11+
        return "<%s>" % type(node).__name__


def resolve(scope, name):
    """The scope whose local `name` is when read in `scope`: itself, an enclosing function
    (class bodies are skipped, as Python does), or None for a global or builtin."""
    if name in scope.globals:
        return None
    if name in scope.bound and name not in scope.nonlocals:
        return scope
    s = scope.parent
    while s is not None:
        if s.kind == "module":
            return None
        if s.is_function() and name in s.bound and name not in s.nonlocals:
            if name in s.globals:
                return None
            return s
        s = s.parent
    return None


def public_qualname(scope):
    return "<module>" if scope.kind == "module" else scope.qualname


def facts_for_source(source, filename):
    """The facts of one source text (bytes or str) under `filename` (see the module doc)."""
    raw = source if isinstance(source, bytes) else source.encode("utf-8")
    tree = ast.parse(raw, filename=filename)
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()
    c = Collector(lines)
    c.visit(tree)
    nested = {id(s): [] for s in c.scopes}
    reads = {id(s): [] for s in c.scopes}
    free = {id(s): [] for s in c.scopes}
    for s in c.scopes:
        for line, name in s.loads:
            owner = resolve(s, name)
            if owner is s:
                reads[id(s)].append((line, name))
            else:
                free[id(s)].append((line, name))
                if owner is not None:
                    nested[id(owner)].append((line, name))
    functions = []
    for s in c.scopes:
        node = s.node
        if node is None:
            functions.append(
                {
                    "qualname": s.qualname,
                    "name": s.name,
                    "kind": s.kind,
                    "code": True,
                    "def_line": s.first,
                    "first_line": s.first,
                    "body_line": s.first,
                    "last_line": s.first,
                    "decorators": [],
                    "params": [],
                    "parent": None if s.parent is None else public_qualname(s.parent),
                    "statements": [],
                    "writes": {},
                    "deletes": {},
                    "reads": {},
                    "free_reads": {},
                    "nested_reads": {},
                    "calls": {},
                    "globals": [],
                    "nonlocals": [],
                }
            )
            continue
        if s.kind == "module":
            def_line, first_line, last_line = 1, 1, max(len(lines), 1)
            body_line = node.body[0].lineno if node.body else 1
        else:
            def_line = node.lineno
            decos = getattr(node, "decorator_list", [])
            first_line = min([d.lineno for d in decos] + [def_line])
            last_line = node.end_lineno or def_line
            body = getattr(node, "body", None)
            body_line = body[0].lineno if isinstance(body, list) and body else def_line
        functions.append(
            {
                "qualname": s.qualname if s.kind != "module" else "<module>",
                "name": s.name,
                "kind": s.kind,
                "code": s.has_code(),
                "def_line": def_line,
                "first_line": first_line,
                "body_line": body_line,
                "last_line": last_line,
                "decorators": s.decorators,
                "params": s.params,
                "parent": None if s.parent is None else public_qualname(s.parent),
                "statements": [list(p) for p in sorted(set(s.statements))],
                "writes": line_map(
                    sorted((p for p in s.writes if p[1] not in s.globals), key=lambda p: p[0])
                ),
                "deletes": line_map(s.deletes),
                "reads": line_map(sorted(reads[id(s)], key=lambda p: p[0])),
                "free_reads": line_map(sorted(free[id(s)], key=lambda p: p[0])),
                "nested_reads": line_map(sorted(nested[id(s)], key=lambda p: p[0])),
                "read_counts": load_counts(reads[id(s)]),
                "calls": call_map(s.calls),
                "globals": sorted(s.globals),
                "nonlocals": sorted(s.nonlocals),
            }
        )
    return {
        "file": filename,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "python": PYTHON,
        "lines": len(lines),
        "functions": functions,
        "loops": sorted(c.loops, key=lambda l: (l["line"], l["depth"])),
        "branches": sorted(c.branches, key=lambda b: b["line"]),
        "handlers": sorted(c.handlers, key=lambda h: h["try_line"]),
    }


def facts_for_file(path):
    with open(path, "rb") as fh:
        return facts_for_source(fh.read(), path)


def main(argv):
    if not argv:
        sys.stderr.write("usage: python3 -m flux_hook.static_facts FILE...\n")
        return 2
    out = {"version": 1, "python": PYTHON, "files": {}, "errors": {}}
    for path in argv:
        path = os.path.abspath(path)
        try:
            out["files"][path] = facts_for_file(path)
        except (OSError, SyntaxError, ValueError) as e:
            out["errors"][path] = "%s: %s" % (type(e).__name__, e)
            sys.stderr.write("flux_hook.static_facts: %s: %s\n" % (path, e))
    sys.stdout.write(json.dumps(out, separators=(",", ":"), sort_keys=False) + "\n")
    sys.stdout.flush()
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
