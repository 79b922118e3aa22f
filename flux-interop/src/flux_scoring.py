"""flux's scoring rules in pure Python (written by `flux export --format inspect` beside
flux_task.py): a port of flux-score's comparison, partial credit, call-graph edge F1 and
failure classes, and of flux eval's reading of a reply, so that a dataset exported by flux is
scored without the flux binary. `score(gold, answer, order_insensitive)` gives, for one
answer, what `flux score --format json` reports for its instance: `pass`, `partial`,
`reason`, `path`, `fields`, `failure` and `call_graph`.

The rules (flux-score's compare.rs):
* the gold drives the walk: every key of a gold object must be in the answer (extra keys are
  ignored); lists have the gold's length and match in order, unless their JSON pointer is
  order-insensitive (a pattern of the instance, `*` any segment, a bare name any list under
  that key): then they match as multisets (a maximum bipartite matching);
* numbers are equal within 1e-6, absolute or relative; `"3"` is 3, `"True"` is true, `"None"`
  is null; `|||` in a gold string separates accepted alternatives; `<class 'X'>` is `X`;
  file paths match by a suffix at a `/`, dotted names by a suffix at a `.`;
* partial credit: a list scores its multiset F1, an object the mean of its gold keys, a
  scalar 1 or 0; a call graph (`{"call_graph": {caller: [callees]}}`) scores its edge F1 and
  passes at F1 >= the threshold (1.0 by default).

JSON objects are walked in sorted key order, as flux (serde_json) walks them: the first
difference reported, and sums of floats, are the same. Only the standard library is used.
"""

import json
import math
import re

FLOAT_TOL = 1e-6
I64 = (-(2**63), 2**63 - 1)

# Rust's char::is_whitespace (Unicode White_Space), which str.strip() does not quite match.
_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + (
    "\u2028\u2029\u202f\u205f\u3000"
)
_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = re.compile(
    r"[+-]?(inf|infinity|nan|([0-9]+|[0-9]+\.[0-9]*|[0-9]*\.[0-9]+)(e[+-]?[0-9]+)?)\Z",
    re.IGNORECASE,
)
_USIZE = re.compile(r"\+?[0-9]+\Z")


def _trim(s):
    return s.strip(_WS)


def _kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "num"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "obj"
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def _is_i64(v):
    return isinstance(v, int) and not isinstance(v, bool) and I64[0] <= v <= I64[1]


def _parse_i64(s):
    if not _INT.match(s):
        return None
    n = int(s)
    return n if I64[0] <= n <= I64[1] else None


def _parse_f64(s):
    return float(s) if _FLOAT.match(s) else None


# --- JSON text as serde_json writes it (messages quote values with it) -------------------


def _float_text(x):
    """A float as serde_json prints it (zmij: shortest round-trip digits; fixed notation for
    decimal exponents -5..=15, else `d.ddde+N` / `d.ddde-N`)."""
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    m, _, e = repr(abs(x)).partition("e")
    exp = int(e) if e else 0
    whole, _, frac = m.partition(".")
    digits = (whole + frac).lstrip("0")
    # the decimal point sits after `point` digits of `digits`
    point = len(whole) + exp if whole != "0" else exp - (len(frac) - len(frac.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    n = len(digits)
    if 0 <= point - n and point <= 16:
        return sign + digits + "0" * (point - n) + ".0"
    if 0 < point <= 16:
        return sign + digits[:point] + "." + digits[point:]
    if -5 < point <= 0:
        return sign + "0." + "0" * -point + digits
    mant = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{sign}{mant}e{point - 1:+d}"


def to_text(v):
    """Compact JSON text of `v` with sorted keys, as serde_json's `to_string`."""
    k = _kind(v)
    if k == "num":
        return _float_text(v) if isinstance(v, float) else str(v)
    if k == "list":
        return "[" + ",".join(to_text(x) for x in v) + "]"
    if k == "obj":
        items = (json.dumps(key, ensure_ascii=False) + ":" + to_text(v[key]) for key in sorted(v))
        return "{" + ",".join(items) + "}"
    return json.dumps(v, ensure_ascii=False)


def short(v):
    s = to_text(v)
    return s[:157] + "..." if len(s) > 160 else s


def _debug_str(s):
    """A string as Rust's `{:?}` writes it."""
    out = []
    for c in s:
        if c in "\\\"":
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c == "\0":
            out.append("\\0")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append("\\u{%x}" % ord(c))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


# --- comparison (compare.rs) -------------------------------------------------------------


class Mismatch(Exception):
    def __init__(self, path, expected, got, message):
        super().__init__(message)
        self.path, self.expected, self.got, self.message = path, expected, got, message

    def __str__(self):
        at = self.path or "/"
        return f"at {at}: {self.message}: expected {short(self.expected)}, got {short(self.got)}"


def _pattern_matches(pattern, path):
    if not pattern.startswith("/"):
        return pattern != "" and bool(path) and path[-1] == pattern
    rest = pattern[1:]
    segs = [] if rest == "" else [s.replace("~1", "/").replace("~0", "~") for s in rest.split("/")]
    return len(segs) == len(path) and all(s == "*" or s == p for s, p in zip(segs, path))


def _pointer(path):
    return "".join("/" + s.replace("~", "~0").replace("/", "~1") for s in path)


def _mismatch(path, expected, got, message):
    return Mismatch(_pointer(path), expected, got, message)


def compare(expected, got, order_insensitive=()):
    """None when `got` matches the gold `expected`, else the first Mismatch."""
    try:
        _cmp(expected, got, list(order_insensitive), [])
    except Mismatch as m:
        return m
    return None


def matches(expected, got, order_insensitive=()):
    return compare(expected, got, order_insensitive) is None


def _cmp(e, g, oi, path):
    ke, kg = _kind(e), _kind(g)
    if ke == "obj":
        if kg != "obj":
            raise _mismatch(path, e, g, "expected an object")
        for k in sorted(e):
            path.append(k)
            if k in g:
                _cmp(e[k], g[k], oi, path)
            else:
                raise _mismatch(path, e[k], None, f"missing key {_debug_str(k)}")
            path.pop()
        return
    if ke == "list":
        if kg != "list":
            raise _mismatch(path, e, g, "expected a list")
        if len(e) != len(g):
            raise _mismatch(
                path, e, g, f"list length differs ({len(e)} expected, {len(g)} got)"
            )
        if any(_pattern_matches(p, path) for p in oi):
            _multiset(e, g, oi, path)
        else:
            for i, (ev, gv) in enumerate(zip(e, g)):
                path.append(str(i))
                _cmp(ev, gv, oi, path)
                path.pop()
        return
    if not scalar_eq(e, g):
        raise _mismatch(path, e, g, "value differs")


def _ok(e, g, oi, path):
    try:
        _cmp(e, g, oi, list(path))
        return True
    except Mismatch:
        return False


def _multiset(e, g, oi, path):
    star = path + ["*"]
    matched, unmatched = max_matching(e, g, lambda a, b: _ok(a, b, oi, star))
    if matched == len(e):
        return
    first = unmatched[0] if unmatched else 0
    raise _mismatch(
        path + [str(first)],
        e[first] if first < len(e) else None,
        None,
        f"order-insensitive list: {len(e) - matched} of {len(e)} expected items have no "
        "match in the answer",
    )


def max_matching(left, right, eq):
    """Kuhn's maximum matching, exactly equal pairs first (flux's order): (size, unmatched)."""
    right_of = [None] * len(left)
    left_of = [None] * len(right)
    by_text = {}
    for j, r in enumerate(right):
        by_text.setdefault(to_text(r), []).append(j)
    for i, l in enumerate(left):
        js = by_text.get(to_text(l))
        if js:
            j = js.pop()
            right_of[i], left_of[j] = j, i
    rest_l = [i for i in range(len(left)) if right_of[i] is None]
    rest_r = [j for j in range(len(right)) if left_of[j] is None]
    adj = [[j for j in rest_r if eq(left[i], right[j])] for i in rest_l]
    owner = [None] * len(right)

    def augment(u, seen):
        # iterative depth-first search for an augmenting path from u
        stack = [(u, iter(adj[u]))]
        trail = []
        while stack:
            v, it = stack[-1]
            for j in it:
                if seen[j]:
                    continue
                seen[j] = True
                if owner[j] is None:
                    trail.append((v, j))
                    for vv, jj in trail:
                        owner[jj] = vv
                    return True
                trail.append((v, j))
                stack.append((owner[j], iter(adj[owner[j]])))
                break
            else:
                stack.pop()
                if trail:
                    trail.pop()
        return False

    extra = sum(1 for u in range(len(rest_l)) if augment(u, [False] * len(right)))
    matched_rest = [False] * len(rest_l)
    for w in owner:
        if w is not None:
            matched_rest[w] = True
    unmatched = [i for i, m in zip(rest_l, matched_rest) if not m]
    return len(left) - len(rest_l) + extra, unmatched


def scalar_eq(expected, got):
    if isinstance(expected, str) and "|||" in expected:
        return any(scalar_eq_one(_trim(alt), got) for alt in expected.split("|||"))
    return scalar_eq_one(expected, got)


def scalar_eq_one(e, g):
    ke, kg = _kind(e), _kind(g)
    if ke == "null" and kg == "null":
        return True
    if ke == "bool" and kg == "bool":
        return e == g
    if ke == "num" and kg == "num":
        return _num_eq(e, g)
    if ke == "str" and kg == "str":
        return _str_eq(e, g)
    if ke == "str" and kg not in ("list", "obj"):
        return _stringified_eq(e, g)
    if kg == "str" and ke not in ("list", "obj"):
        return _stringified_eq(g, e)
    return False


def _num_eq(a, b):
    if _is_i64(a) and _is_i64(b):
        return a == b
    return float_eq(float(a), float(b))


def float_eq(x, y):
    if x == y:
        return True
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    d = abs(x - y)
    return d <= FLOAT_TOL or d <= FLOAT_TOL * max(abs(x), abs(y))


def _stringified_eq(s, other):
    t = _trim(s)
    k = _kind(other)
    if k == "bool":
        low = t.lower() if t.isascii() else None
        return (low == "true" and other) or (low == "false" and not other)
    if k == "null":
        return t in ("None", "null", "NULL", "none")
    if k == "num":
        i = _parse_i64(t)
        if i is not None and _is_i64(other):
            return i == other
        x = _parse_f64(t)
        return x is not None and float_eq(x, float(other))
    return False


def _unwrap_class(s):
    t = _trim(s)
    for pre, post in (("<class '", "'>"), ('<class "', '">')):
        if t.startswith(pre) and t[len(pre) :].endswith(post):
            return _trim(t[len(pre) : len(t) - len(post)])
    return t


def _str_eq(a, b):
    if a == b:
        return True
    a, b = _unwrap_class(a), _unwrap_class(b)
    if a == b:
        return True
    if a == "" or b == "":
        return False
    x, y = _parse_f64(a), _parse_f64(b)
    if x is not None and y is not None:
        return float_eq(x, y)
    if ("/" in a or "/" in b) and _is_file_path(a) and _is_file_path(b):
        return _path_suffix_eq(a, b)
    if _is_dotted_ident(a) and _is_dotted_ident(b):
        return _component_suffix(a, b, ".")
    return False


def _is_ascii_alpha(c):
    return c.isascii() and c.isalpha()


def _is_file_path(s):
    last = s.rstrip("/").rsplit("/", 1)[-1]
    if "." not in last:
        return False
    stem, ext = last.rsplit(".", 1)
    return (
        stem != ""
        and ext != ""
        and _is_ascii_alpha(ext[0])
        and all(c.isascii() and c.isalnum() for c in ext)
        and not any(c in _WS for c in s)
    )


def _trim_start(s, prefix):
    while prefix and s.startswith(prefix):
        s = s[len(prefix) :]
    return s


def _path_suffix_eq(a, b):
    a, b = _trim_start(a, "./").rstrip("/"), _trim_start(b, "./").rstrip("/")
    if a == "" or b == "":
        return False
    return _component_suffix(a, b, "/")


def _component_suffix(a, b, sep):
    long, short_ = (a, b) if len(a.encode()) >= len(b.encode()) else (b, a)
    short_ = short_.lstrip(sep)
    if short_ == "":
        return False
    if long == short_:
        return True
    return long.endswith(short_) and long[: len(long) - len(short_)].endswith(sep)


def _is_dotted_ident(s):
    if s == "":
        return False
    for part in s.split("."):
        p = part.lstrip("<").rstrip(">")
        if p == "" or (p[0].isascii() and p[0].isdigit()):
            return False
        if not all(c.isalnum() or c == "_" for c in p):
            return False
    return True


# --- partial credit (partial.rs) ---------------------------------------------------------


def partial(gold, answer, order_insensitive=()):
    """Score of `answer` against `gold` in [0, 1]."""
    kg, ka = _kind(gold), _kind(answer)
    if kg == "obj" and ka == "obj":
        if not gold:
            return 1.0
        total = 0.0
        for k in sorted(gold):
            total += partial(gold[k], answer[k], order_insensitive) if k in answer else 0.0
        return total / len(gold)
    if kg == "list" and ka == "list":
        return list_f1(gold, answer, order_insensitive)
    if kg in ("obj", "list") or ka in ("obj", "list"):
        return 0.0
    return 1.0 if scalar_eq(gold, answer) else 0.0


def list_f1(g, a, order_insensitive=()):
    if not g and not a:
        return 1.0
    m, _ = max_matching(g, a, lambda x, y: matches(x, y, order_insensitive))
    return 2.0 * m / (len(g) + len(a))


def fields(gold, answer, order_insensitive=()):
    """Per top-level field scores (an answer that is not an object scores 0 on each)."""
    if _kind(gold) != "obj":
        return {}
    ans = answer if _kind(answer) == "obj" else {}
    return {
        k: partial(gold[k], ans[k], order_insensitive) if k in ans else 0.0 for k in sorted(gold)
    }


# --- call graphs (callgraph.rs) ----------------------------------------------------------


def is_call_graph(v):
    g = v.get("call_graph") if _kind(v) == "obj" else None
    return _kind(g) == "obj" and all(_kind(x) == "list" for x in g.values())


def _edges(v):
    out = []
    g = v.get("call_graph") if _kind(v) == "obj" else None
    if _kind(g) != "obj":
        return out
    for caller in sorted(g):
        callees = g[caller] if _kind(g[caller]) == "list" else []
        for c in callees:
            e = [caller, c if isinstance(c, str) else to_text(c)]
            if e not in out:
                out.append(e)
    return out


def score_edges(gold, answer):
    """(tp, fp, fn) of the answer's edges against the gold's."""
    g, a = _edges(gold), _edges(answer)
    tp, _ = max_matching(g, a, lambda x, y: scalar_eq(x[0], y[0]) and scalar_eq(x[1], y[1]))
    return tp, len(a) - tp, len(g) - tp


def _ratio(a, b):
    return 1.0 if b == 0 else a / b


# --- failure classes (failure.rs) --------------------------------------------------------

IDENTITY = (
    "line", "lineno", "file", "filename", "path", "func", "function", "qualname", "callee",
    "caller", "variable", "name", "def_line", "use_line", "test", "exception", "type", "event",
    "header",
)


def _is_count_key(k):
    k = "".join(c.lower() if c.isascii() else c for c in k)
    return any(w in k for w in ("count", "iterations", "number", "total", "times"))


def _identity(v):
    if _kind(v) == "obj":
        ident = {k: x for k, x in v.items() if k in IDENTITY}
        return ident if ident else v
    return v


def _classify_lists(g, a):
    gi, ai = [_identity(x) for x in g], [_identity(x) for x in a]
    if any(not any(matches(y, x) for y in gi) for x in ai):
        return "wrong_path"
    if len(gi) == len(ai) and all(matches(x, y) for x, y in zip(gi, ai)):
        return "right_path_wrong_values"
    if len(ai) < len(gi) and all(matches(x, y) for x, y in zip(gi, ai)):
        return "stopped_early"
    return "aggregation"


def classify(gold, answer, mismatch_path):
    segs = [s.replace("~1", "/").replace("~0", "~") for s in mismatch_path.split("/")[1:]]
    g, a, last_key = gold, answer, ""
    for s in segs:
        kg, ka = _kind(g), _kind(a)
        if kg == "list" and ka == "list":
            return _classify_lists(g, a)
        ng = na = None
        found = False
        if kg == "obj" and ka == "obj":
            found = s in g and s in a
            if found:
                ng, na = g[s], a[s]
        elif kg == "list" and ka == "list":
            pass  # unreachable, as in flux
        if not found:
            return "format"
        last_key, g, a = s, ng, na
    kg, ka = _kind(g), _kind(a)
    if kg == "list" and ka == "list":
        return _classify_lists(g, a)
    if kg in ("list", "obj") or ka in ("list", "obj"):
        return "format"
    if kg == "num" and _is_count_key(last_key):
        gv = float(g)
        if ka == "num":
            av = float(a)
        elif ka == "str":
            av = _parse_f64(_trim(a))
        else:
            av = None
        if av is not None and av < gv:
            return "stopped_early"
        if av is not None and av > gv:
            return "aggregation"
        return "wrong_value"
    return "wrong_value"


# --- one instance (lib.rs's score_loaded) ------------------------------------------------


def score(gold, answer, order_insensitive=(), call_graph_threshold=1.0):
    """What `flux score` reports for one instance with gold `gold` and answer `answer` (None:
    no answer): a dict with `pass`, `partial`, `reason`, `path`, `fields`, `failure` and, for a
    call graph, `call_graph`."""
    r = {"pass": False, "partial": 0.0, "reason": None, "path": None, "fields": None,
         "failure": None, "call_graph": None}
    if answer is None:
        r.update(reason="no answer", failure="format")
        return r
    if is_call_graph(gold):
        tp, fp, fn = score_edges(gold, answer)
        p, rc = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
        f1 = 0.0 if p + rc == 0 else 2 * p * rc / (p + rc)
        r["call_graph"] = {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": rc, "f1": f1}
        r["partial"] = f1
        if f1 + 1e-12 >= call_graph_threshold:
            r["pass"] = True
            return r
        r["failure"] = "wrong_path" if fp > 0 else "stopped_early" if fn > 0 else "wrong_value"
        r["reason"] = (
            f"call graph F1 {f1:.3f} < {call_graph_threshold:.3f} (P {p:.3f}, R {rc:.3f}; "
            f"{fn} missing, {fp} extra edges)"
        )
        r["path"] = "/call_graph"
        return r
    oi = list(order_insensitive)
    f = fields(gold, answer, oi)
    r["partial"] = partial(gold, answer, oi)
    r["fields"] = f or None
    m = compare(gold, answer, oi)
    if m is None:
        r.update({"pass": True, "partial": 1.0})
        return r
    r.update(
        failure=classify(gold, answer, m.path), reason=str(m), path=m.path or "/"
    )
    return r


# --- reading a reply (flux-eval's parse.rs) ----------------------------------------------


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def _finite(text):
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"{text}: number out of range")
    return x


def _loads(text):
    # as serde_json: no NaN/Infinity, no number out of a double's range
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)


def _balanced_end(text, start):
    """Length of the balanced {...} at text[start] (JSON strings honoured), or None."""
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                return i + 1 - start
    return None


def _strip_fences(text):
    open_ = text.find("```")
    if open_ < 0:
        return text
    after = text[open_ + 3 :]
    nl = after.find("\n")
    body = after[nl + 1 :] if nl >= 0 else after
    close = body.find("```")
    if close >= 0 and "{" in body[:close]:
        return body[:close]
    return text


def extract_json(text):
    """The first JSON object of a reply, as flux eval takes it (a code fence's content, else
    the first balanced object that parses); None when there is none."""
    t = _strip_fences(text)
    try:
        v = _loads(_trim(t))
        if isinstance(v, dict):
            return v
    except ValueError:
        pass
    start = 0
    while True:
        s = t.find("{", start)
        if s < 0:
            return None
        n = _balanced_end(t, s)
        if n is not None:
            try:
                return _loads(t[s : s + n])
            except ValueError:
                pass
        start = s + 1
