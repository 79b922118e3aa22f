//! Data flow: S4 (`def_use_pairs`), M4 (`def_use_across_tests`), and the small tokenizer
//! [`uses_from_source`] that finds the names a source line reads.
use crate::common::{all_invocations, in_test_order, pick_invocation, test_ids, Norm};
use crate::{ExtractError, Params};
use flux_trace::query::Invocation;
use flux_trace::{Kind, Trace};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub(crate) const DEF_USE_PAIRS: &str = "\
Runtime def-use pairs of local variables along the executed path of the Nth invocation of \
`function`, with counts. We only observe *changes* of locals, so: a variable is *defined* at the \
def line for the arguments of the frame's first call, and at line L when the frame's next event \
after a `line` event at L reports it changed (so an assignment that leaves the repr unchanged is \
not observed and the earlier definition stays current; `del` is not observed). A line L *uses* \
the names given for it by `uses` (a map from absolute line, as a string, to names; the harvest \
computes it from the AST) or, if only `source` is given, by `uses_from_source`. Each time a \
`line` event at L occurs, every name it uses that has a current definition at line D yields one \
occurrence of the pair (name, D, L); uses are taken before the line's own definitions, so \
`x += 1` pairs the previous definition of x and then defines x at its line. Answer: \
{\"observed_def_use_pairs\": [{\"variable\", \"def_line\", \"use_line\", \"count\"}, ...]} \
sorted by variable, def_line, use_line.";

pub(crate) const DEF_USE_ACROSS_TESTS: &str = "\
Every def-use pair (definition as `def_use_pairs`) observed in any invocation of `function` \
inside a test, optionally only those of `variable`, with the tests in which it is observed (in \
start order), sorted by variable, def_line, use_line. Answer: {\"def_use_pairs\": \
[{\"variable\", \"def_line\", \"use_line\", \"tests\": [...]}, ...]}.";

type Uses = HashMap<u32, Vec<String>>;

fn uses_param(p: &Params) -> Result<Uses, ExtractError> {
    if let Some(v) = p.get("uses") {
        let Value::Object(m) = v else {
            return Err(ExtractError::BadParam {
                param: "uses".into(),
                expected: "an object mapping line numbers to lists of names",
                got: v.to_string(),
            });
        };
        let mut out = Uses::new();
        for (k, names) in m {
            let line: u32 = k.parse().map_err(|_| ExtractError::BadParam {
                param: "uses".into(),
                expected: "line numbers as keys",
                got: format!("{k:?}"),
            })?;
            let list = names
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|n| n.as_str().map(String::from))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| ExtractError::BadParam {
                    param: "uses".into(),
                    expected: "a list of names for each line",
                    got: names.to_string(),
                })?;
            out.insert(line, list);
        }
        return Ok(out);
    }
    if let Some(src) = p.opt_str("source")? {
        let first = p.opt_line("source_first_line")?.unwrap_or(1);
        return Ok(uses_from_source(src, first).into_iter().collect());
    }
    Err(ExtractError::MissingParam {
        param: "uses (or source)".into(),
    })
}

/// (variable, def line, use line) → occurrences, for one invocation.
fn pairs(t: &Trace, inv: &Invocation, uses: &Uses) -> BTreeMap<(String, u32, u32), usize> {
    let mut out = BTreeMap::new();
    let mut last_def: HashMap<&str, u32> = HashMap::new();
    let def_line = inv.first_call(t).map(|e| e.line).unwrap_or(0);
    let mut current: Option<u32> = None;
    let mut first_call = true;
    for &i in &inv.events {
        let e = &t.events[i];
        // Changes reported here happened while `current` executed (the call's arguments are
        // defined at the def line).
        let at = if e.ev == Kind::Call && first_call {
            first_call = false;
            def_line
        } else {
            current.unwrap_or(def_line)
        };
        for (name, _) in &e.locals {
            last_def.insert(name.as_str(), at);
        }
        if e.ev == Kind::Line {
            if let Some(names) = uses.get(&e.line) {
                for n in names {
                    if let Some(&d) = last_def.get(n.as_str()) {
                        *out.entry((n.clone(), d, e.line)).or_insert(0) += 1;
                    }
                }
            }
            current = Some(e.line);
        }
    }
    out
}

pub(crate) fn def_use_pairs(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let uses = uses_param(p)?;
    let (_, inv) = pick_invocation(t, p, function)?;
    let norm = Norm::new(t, p, &inv)?;
    let list: Vec<Value> = pairs(t, &inv, &uses)
        .into_iter()
        .map(|((v, d, u), c)| {
            json!({"variable": v, "def_line": norm.apply(d), "use_line": norm.apply(u), "count": c})
        })
        .collect();
    Ok(json!({ "observed_def_use_pairs": list }))
}

pub(crate) fn def_use_across_tests(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let uses = uses_param(p)?;
    let only = p.opt_str("variable")?;
    let invs = all_invocations(t, p, function)?;
    let norm = Norm::new(t, p, &invs[0])?;
    let mut found: BTreeMap<(String, u32, u32), BTreeSet<String>> = BTreeMap::new();
    for inv in invs.iter().filter(|i| !i.test.is_empty()) {
        for (key, _) in pairs(t, inv, &uses) {
            if only.is_none_or(|v| v == key.0) {
                found.entry(key).or_default().insert(inv.test.clone());
            }
        }
    }
    let order = test_ids(t);
    let list: Vec<Value> = found
        .into_iter()
        .map(|((v, d, u), tests)| {
            json!({"variable": v, "def_line": norm.apply(d), "use_line": norm.apply(u),
                   "tests": in_test_order(&order, &tests)})
        })
        .collect();
    Ok(json!({ "def_use_pairs": list }))
}

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The names each line of `src` reads, by absolute line (`first_line` is the number of the
/// first line of `src`), in order of first appearance. A heuristic per physical line, for use
/// when no AST-derived use sets are available:
/// - identifiers that are not keywords, not attributes (after `.`), not keyword arguments
///   (`name=` inside parentheses) and not inside string literals or comments;
/// - minus plain assignment targets: names before a top-level `=` that are not subscripted,
///   not inside `[...]` and not followed by `.` or `[`; augmented assignments (`x += 1`) read
///   their target; `for` targets (between `for` and ` in`), names after `as`, and whole
///   `def`/`class`/`import`/`from`/`global`/`nonlocal` lines are not uses.
///
/// Known gaps: names inside f-string braces are missed; comprehension variables (their own
/// frame in Python 3.11) and lambda parameters are reported as uses.
pub fn uses_from_source(src: &str, first_line: u32) -> BTreeMap<u32, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut in_triple: Option<&str> = None;
    for (idx, raw) in src.lines().enumerate() {
        let line_no = first_line.saturating_add(u32::try_from(idx).unwrap_or(u32::MAX));
        // Blank out strings and comments, keeping positions.
        let mut code = String::with_capacity(raw.len());
        let chars: Vec<char> = raw.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if let Some(q) = in_triple {
                if raw[char_offset(raw, i)..].starts_with(q) {
                    in_triple = None;
                    code.push_str("   ");
                    i += 3;
                } else {
                    code.push(' ');
                    i += 1;
                }
                continue;
            }
            let c = chars[i];
            let rest = &raw[char_offset(raw, i)..];
            if rest.starts_with("\"\"\"") || rest.starts_with("'''") {
                in_triple = Some(if c == '"' { "\"\"\"" } else { "'''" });
                code.push_str("\"\"\"");
                i += 3;
            } else if c == '#' {
                break;
            } else if c == '"' || c == '\'' {
                code.push('"');
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                code.push('"');
                i += 1;
            } else {
                code.push(c);
                i += 1;
            }
        }
        let names = line_uses(&code);
        if !names.is_empty() {
            out.insert(line_no, names);
        }
    }
    out
}

fn char_offset(s: &str, char_idx: usize) -> usize {
    s.char_indices()
        .nth(char_idx)
        .map(|(b, _)| b)
        .unwrap_or(s.len())
}

struct Tok {
    name: String,
    /// Enclosing bracket characters, innermost last.
    brackets: Vec<char>,
    after_dot: bool,
    /// Next non-space characters (up to two).
    next: String,
    prev_word: Option<String>,
    /// Index of the top-level assignment segment the token is in.
    segment: usize,
}

fn line_uses(code: &str) -> Vec<String> {
    let trimmed = code.trim_start();
    let first_word: String = trimmed
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if matches!(
        first_word.as_str(),
        "def" | "class" | "import" | "from" | "global" | "nonlocal"
    ) || trimmed.starts_with("async def")
    {
        return Vec::new();
    }
    let chars: Vec<char> = code.chars().collect();
    let mut toks: Vec<Tok> = Vec::new();
    let mut brackets: Vec<char> = Vec::new();
    let mut segment = 0;
    let mut prev_word: Option<String> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            let before = chars[..start].iter().rev().find(|c| !c.is_whitespace());
            let next: String = chars[i..]
                .iter()
                .filter(|c| !c.is_whitespace())
                .take(2)
                .collect();
            toks.push(Tok {
                name: name.clone(),
                brackets: brackets.clone(),
                after_dot: before == Some(&'.'),
                next,
                prev_word: prev_word.clone(),
                segment,
            });
            prev_word = Some(name);
            continue;
        }
        if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        match c {
            '(' | '[' | '{' => brackets.push(c),
            ')' | ']' | '}' => {
                brackets.pop();
            }
            '=' if brackets.is_empty() => {
                let prev = if i > 0 { chars[i - 1] } else { ' ' };
                let next = chars.get(i + 1).copied().unwrap_or(' ');
                let augmented = "=!<>+-*/%&|^@:".contains(prev);
                if !augmented && next != '=' {
                    segment += 1;
                }
            }
            _ => {}
        }
        if !c.is_whitespace() {
            prev_word = None;
        }
        i += 1;
    }
    let is_for = first_word == "for" || trimmed.starts_with("async for");
    let mut in_for_target = false;
    let mut out: Vec<String> = Vec::new();
    for t in &toks {
        if t.name == "for" && t.brackets.is_empty() && is_for {
            in_for_target = true;
            continue;
        }
        if t.name == "in" && in_for_target && t.brackets.is_empty() {
            in_for_target = false;
            continue;
        }
        if KEYWORDS.contains(&t.name.as_str()) || t.after_dot {
            continue;
        }
        if t.prev_word.as_deref() == Some("as") {
            continue;
        }
        let subscripted = t.next.starts_with('.') || t.next.starts_with('[');
        let in_subscript = t.brackets.contains(&'[');
        if in_for_target && !subscripted && !in_subscript {
            continue;
        }
        // keyword argument `name=` inside a call
        if t.brackets.last() == Some(&'(') && t.next.starts_with('=') && !t.next.starts_with("==") {
            continue;
        }
        // plain assignment target
        if t.segment < segment && !subscripted && !in_subscript {
            continue;
        }
        if !out.contains(&t.name) {
            out.push(t.name.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::uses_from_source;
    use crate::testkit::TraceBuilder;
    use crate::{extract, params};
    use serde_json::json;

    /// def f(a):          # 1
    ///     b = a + 1      # 2  uses a
    ///     b += a         # 3  uses b, a
    ///     c = b          # 4  uses b
    ///     c = b          # 5  uses b; c unchanged → no new def of c observed
    ///     return c       # 6  uses c
    /// f(1): call{a:1} 2 3{b:2} 4{b:3} 5{c:3} 6 return.
    /// Pairs: (a,1,2) (a,1,3) (b,2,3) (b,3,4) (b,3,5) (c,4,6) — c's def stays at 4 because
    /// line 5 leaves its repr unchanged (documented limitation).
    fn one() -> flux_trace::Trace {
        TraceBuilder::new()
            .test("t.py::test_one")
            .call("f", 1, &[("a", "1")])
            .line(2, &[])
            .line(3, &[("b", "2")])
            .line(4, &[("b", "3")])
            .line(5, &[("c", "3")])
            .line(6, &[])
            .ret("3")
            .end("passed")
            .test("t.py::test_two")
            .call("f", 1, &[("a", "5")])
            .line(2, &[])
            .line(3, &[("b", "6")])
            .line(4, &[("b", "11")])
            .line(5, &[("c", "11")])
            .line(6, &[])
            .ret("11")
            .end("passed")
            .build()
    }

    fn uses() -> serde_json::Value {
        json!({"2": ["a"], "3": ["b", "a"], "4": ["b"], "5": ["b"], "6": ["c"]})
    }

    #[test]
    fn def_use_pairs_along_the_path() {
        let t = one();
        let p = params(json!({"function": "f", "uses": uses()})).unwrap();
        assert_eq!(
            extract(&t, "def_use_pairs", &p).unwrap(),
            json!({"observed_def_use_pairs": [
                {"variable": "a", "def_line": 1, "use_line": 2, "count": 1},
                {"variable": "a", "def_line": 1, "use_line": 3, "count": 1},
                {"variable": "b", "def_line": 2, "use_line": 3, "count": 1},
                {"variable": "b", "def_line": 3, "use_line": 4, "count": 1},
                {"variable": "b", "def_line": 3, "use_line": 5, "count": 1},
                {"variable": "c", "def_line": 4, "use_line": 6, "count": 1},
            ]})
        );
    }

    #[test]
    fn def_use_from_source_matches_the_hand_made_uses() {
        let src = "def f(a):\n    b = a + 1\n    b += a\n    c = b\n    c = b\n    return c\n";
        let t = one();
        let p = params(json!({"function": "f", "source": src})).unwrap();
        let q = params(json!({"function": "f", "uses": uses()})).unwrap();
        assert_eq!(
            extract(&t, "def_use_pairs", &p).unwrap(),
            extract(&t, "def_use_pairs", &q).unwrap()
        );
        let p = params(json!({"function": "f"})).unwrap();
        let err = extract(&t, "def_use_pairs", &p).unwrap_err().to_string();
        assert!(
            err.contains("missing required parameter `uses (or source)`"),
            "{err}"
        );
    }

    #[test]
    fn def_use_across_tests_lists_tests_per_pair() {
        let t = one();
        let p = params(json!({"function": "f", "uses": uses(), "variable": "c"})).unwrap();
        assert_eq!(
            extract(&t, "def_use_across_tests", &p).unwrap(),
            json!({"def_use_pairs": [{"variable": "c", "def_line": 4, "use_line": 6,
                   "tests": ["t.py::test_one", "t.py::test_two"]}]})
        );
    }

    #[test]
    fn tokenizer_separates_reads_from_targets() {
        let src = "\
x = y + z  # comment w
a[i] = f(k=v, s='q r')
for p, q in items:
obj.attr = other.thing
with open(path) as fh:
n += 1
import os
if a == b and not c:
s = \"\"\"doc
still doc u\"\"\" + t
";
        let u = uses_from_source(src, 10);
        let get = |l: u32| u.get(&l).cloned().unwrap_or_default();
        assert_eq!(get(10), vec!["y", "z"]);
        assert_eq!(get(11), vec!["a", "i", "f", "v"]);
        assert_eq!(get(12), vec!["items"]);
        assert_eq!(get(13), vec!["obj", "other"]);
        assert_eq!(get(14), vec!["open", "path"]);
        assert_eq!(get(15), vec!["n"]);
        assert_eq!(get(16), Vec::<String>::new());
        assert_eq!(get(17), vec!["a", "b", "c"]);
        assert_eq!(get(18), Vec::<String>::new());
        assert_eq!(get(19), vec!["t"]);
    }
}
