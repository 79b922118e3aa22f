//! Reference solvers that need no model.
//!
//! * `oracle`: answers with the harvested `oracle_answer` (scores 100% by construction; a check
//!   of the scorer and of the answer layout).
//! * `static-baseline`: answers from the source text alone, without running anything, to show
//!   what shallow static reading reaches. Heuristics:
//!   1. The target function is the first of: `[tracing] functions` (last dotted component),
//!      backticked identifiers in the question, identifiers followed by `(` in the question,
//!      that has a `def NAME(` in the named source files (or the test files).
//!   2. Its body is the lines indented deeper than the `def` up to the first dedent; blank and
//!      comment-only lines are dropped.
//!   3. The template is filled key by key: a list of objects with a `line` field (executed
//!      paths) becomes one element per body line in source order with `file`/`func`/`line`
//!      set; a list of ints under a key containing `line` becomes the body line numbers; a list
//!      of strings under a key containing `call`/`callee`/`function` becomes the names called in
//!      the body in textual order (with the function itself first for `function` keys); a list
//!      of objects with a `function` field under a `call…` key (`call_sequence`, `callees`)
//!      becomes one element per call (with its line), or per distinct callee with its count;
//!      `call_graph` becomes `{function: [called names]}`; every other leaf is zero, `""`,
//!      `false`, `null` or an empty list.
//!   4. Rows of per-test answers (a list of objects with a `test` field) become one row per
//!      test the question names, in its order, each filled as the function-level answer.
//!   5. When the question counts only functions defined under a directory (the extractor's
//!      `within`, as generated instances have), a call counts when it resolves statically
//!      to a definition there (`crate::context::resolve_call`), named by its qualname, and
//!      the body's comprehensions and lambdas count as calls of `f.<locals>.<listcomp>` etc.;
//!      callee sets (`callees`) are sorted, each once.

use serde_json::{json, Map, Value};
use std::path::Path;

use crate::prompt::{list_py_files, mentioned_files, resolve_all};
use flux_score::Instance;

/// The oracle's answer (None when not harvested).
pub fn oracle_answer(inst: &Instance) -> Option<Value> {
    inst.oracle.clone()
}

/// A function found in the source.
#[derive(Debug, Clone)]
pub struct FuncInfo {
    pub file: String,
    pub name: String,
    pub def_line: usize,
    /// (line number, text) of the non-blank, non-comment body lines.
    pub body: Vec<(usize, String)>,
}

fn candidate_names(inst: &Instance) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        // `pkg.mod:Class.meth` → `Class.meth`; keep dotted qualnames whole.
        let q = s
            .rsplit(':')
            .next()
            .unwrap_or(s)
            .trim()
            .trim_end_matches("()");
        if !q.is_empty()
            && q.split('.').all(|p| {
                !p.is_empty()
                    && (p == "<locals>" || p.chars().all(|c| c.is_alphanumeric() || c == '_'))
                    && !p.starts_with(|c: char| c.is_ascii_digit())
            })
            && !out.iter().any(|o| o == q)
        {
            out.push(q.to_string());
        }
    };
    if let Some(f) = &inst.extractor_function {
        push(f);
    }
    for f in &inst.tracing_functions {
        push(f);
    }
    for (i, part) in inst.question.split('`').enumerate() {
        if i % 2 == 1 {
            push(part.trim_end_matches("()"));
        }
    }
    let q = &inst.question;
    let bytes: Vec<char> = q.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_alphabetic() || bytes[i] == '_' {
            let s = i;
            while i < bytes.len()
                && (bytes[i].is_alphanumeric() || bytes[i] == '_' || bytes[i] == '.')
            {
                i += 1;
            }
            if i < bytes.len() && bytes[i] == '(' {
                let w: String = bytes[s..i].iter().collect();
                push(&w);
            }
        } else {
            i += 1;
        }
    }
    out
}

fn indent(l: &str) -> usize {
    l.len() - l.trim_start().len()
}

/// The line range `[start, end)` of the block opened by line `idx` (indented deeper than it).
fn block_end(lines: &[&str], idx: usize) -> usize {
    let base = indent(lines[idx]);
    let mut j = idx;
    // A multi-line header ends at the line ending in ':'.
    while j < lines.len() && !lines[j].trim_end().ends_with(':') {
        j += 1;
    }
    let mut end = j + 1;
    for (k, l) in lines.iter().enumerate().skip(j + 1) {
        if l.trim().is_empty() {
            continue;
        }
        if indent(l) <= base {
            break;
        }
        end = k + 1;
    }
    end.min(lines.len())
}

fn header_matches(line: &str, name: &str, class: bool) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix("async ").unwrap_or(t);
    let rest = if class {
        t.strip_prefix("class ")
    } else {
        t.strip_prefix("def ")
    };
    rest.and_then(|r| r.strip_prefix(name))
        .is_some_and(|r| r.starts_with('(') || (class && r.starts_with(':')))
}

/// Find a function by qualified name (`Add.flatten`, `outer.<locals>.inner`, `f`) in `text`:
/// each dotted component is looked up inside the previous one's block (a class or a def);
/// failing that, the first `def LAST(` anywhere.
pub fn find_function(file: &str, text: &str, qualname: &str) -> Option<FuncInfo> {
    let lines: Vec<&str> = text.lines().collect();
    let parts: Vec<&str> = qualname
        .split('.')
        .filter(|p| !p.is_empty() && *p != "<locals>")
        .collect();
    let last = *parts.last()?;
    let nested = || -> Option<usize> {
        let (mut lo, mut hi) = (0usize, lines.len());
        let mut found = None;
        for (n, part) in parts.iter().enumerate() {
            let is_last = n + 1 == parts.len();
            let idx = (lo..hi).find(|&k| {
                header_matches(lines[k], part, false)
                    || (!is_last && header_matches(lines[k], part, true))
            })?;
            found = Some(idx);
            lo = idx + 1;
            hi = block_end(&lines, idx);
        }
        found
    };
    let idx =
        nested().or_else(|| (0..lines.len()).find(|&k| header_matches(lines[k], last, false)))?;
    let end = block_end(&lines, idx);
    let mut body = Vec::new();
    let mut j = idx;
    while j < lines.len() && !lines[j].trim_end().ends_with(':') {
        j += 1;
    }
    let mut in_doc: Option<&str> = None;
    let mut first_stmt = true;
    for (k, l) in lines.iter().enumerate().take(end).skip(j + 1) {
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(q) = in_doc {
            if t.contains(q) {
                in_doc = None;
            }
            continue;
        }
        if first_stmt {
            first_stmt = false;
            // A docstring is not executed code.
            let t2 = t.trim_start_matches(['r', 'u', 'R', 'U']);
            if let Some(q) = ["\"\"\"", "'''"].into_iter().find(|q| t2.starts_with(q)) {
                if !t2[3..].contains(q) {
                    in_doc = Some(q);
                }
                continue;
            }
        }
        body.push((k + 1, l.to_string()));
    }
    Some(FuncInfo {
        file: file.to_string(),
        name: qualname.to_string(),
        def_line: idx + 1,
        body,
    })
}

/// Names called in the body, in textual order (with repeats), e.g. `self.f(x)` → `self.f`.
pub fn called_names(f: &FuncInfo) -> Vec<String> {
    calls_with_lines(f).into_iter().map(|(_, n)| n).collect()
}

/// `(line, name)` of every call in the body, in textual order (strings and comments are not
/// code: [`crate::pysrc::calls_in_code`] on each line's code).
pub fn calls_with_lines(f: &FuncInfo) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (ln, l) in &f.body {
        for code in crate::pysrc::code_of(l.trim_start()) {
            out.extend(
                crate::pysrc::calls_in_code(&code)
                    .into_iter()
                    .map(|n| (*ln, n)),
            );
        }
    }
    out
}

/// Locate the target function of an instance in its source (or its test files).
/// `source` is the instance's located source directory, if any.
pub fn target_function(inst: &Instance, source: Option<&Path>) -> Option<FuncInfo> {
    let names = candidate_names(inst);
    let mut texts: Vec<(String, String)> = Vec::new();
    if let Some(root) = source {
        let files = list_py_files(root);
        let mut wanted: Vec<String> = inst.tracing_files.clone();
        wanted.extend(mentioned_files(&inst.question));
        for w in wanted {
            for f in resolve_all(&w, &files) {
                if texts.iter().any(|(x, _)| *x == f) {
                    continue;
                }
                if let Ok(t) = std::fs::read_to_string(root.join(&f)) {
                    texts.push((f, t));
                }
            }
        }
    }
    for tf in &inst.test_files {
        if let Ok(t) = std::fs::read_to_string(inst.dir.join(tf)) {
            texts.push((tf.clone(), t));
        }
    }
    for n in &names {
        for (f, t) in &texts {
            if let Some(fi) = find_function(f, t, n) {
                return Some(fi);
            }
        }
    }
    None
}

/// The static baseline's answer for an instance.
pub fn static_baseline_answer(inst: &Instance, source: Option<&Path>) -> Value {
    let f = target_function(inst, source);
    let calls = f.as_ref().map(|f| baseline_calls(inst, source, f));
    let ctx = Fill {
        f: f.as_ref(),
        calls: calls.unwrap_or_default(),
        tests: question_tests(inst),
    };
    fill(&inst.template, "", &ctx)
}

/// Nothing to fill from: every leaf its default.
const EMPTY: Fill<'static> = Fill {
    f: None,
    calls: Vec::new(),
    tests: Vec::new(),
};

/// What the template is filled from.
struct Fill<'a> {
    f: Option<&'a FuncInfo>,
    /// `(line, callee)` of the body's calls, in textual order ([`baseline_calls`]).
    calls: Vec<(usize, String)>,
    /// The tests the question names, in its order (rows of per-test answers).
    tests: Vec<String>,
}

/// The body's calls as the answer names them. When the question counts only functions
/// defined under a directory (the extractor's `within`: a generated instance), a call counts
/// when it resolves statically ([`crate::context::resolve_call`]) to a definition there, and
/// is named by that definition's qualname (`self.m` → `Class.m`, `Class(...)` →
/// `Class.__init__`); else every call, as written.
fn baseline_calls(inst: &Instance, source: Option<&Path>, f: &FuncInfo) -> Vec<(usize, String)> {
    let calls = calls_with_lines(f);
    let within = inst.extractor_params.get("within").and_then(Value::as_str);
    let (Some(within), Some(root)) = (within, source) else {
        return calls;
    };
    let names: Vec<String> = calls.iter().map(|(_, n)| n.clone()).collect();
    let resolved = crate::context::resolve_calls(root, &f.file, &f.name, &names);
    let mut out: Vec<(usize, String)> = calls
        .into_iter()
        .zip(resolved)
        .filter_map(|((ln, _), r)| {
            let (file, qual) = r?;
            file.starts_with(within).then_some((ln, qual))
        })
        .collect();
    // Comprehensions, generator expressions and lambdas of the body run in frames of their
    // own, named `f.<locals>.<listcomp>`: calls of functions defined where `f` is.
    if f.file.starts_with(within) {
        for (ln, l) in &f.body {
            for code in crate::pysrc::code_of(l.trim_start()) {
                for kind in nested_scopes(&code) {
                    out.push((*ln, format!("{}.<locals>.{kind}", f.name)));
                }
            }
        }
        out.sort_by_key(|(ln, _)| *ln);
    }
    out
}

/// The nested scopes one line's code (strings blanked) creates, in textual order: `<lambda>`
/// per `lambda`, and per comprehension (a `for` inside brackets) `<listcomp>`, `<setcomp>`,
/// `<dictcomp>` or `<genexpr>`.
pub fn nested_scopes(code: &str) -> Vec<&'static str> {
    let cs: Vec<char> = code.chars().collect();
    let word_at = |i: usize, w: &str| {
        let n = w.len();
        i + n <= cs.len()
            && cs[i..i + n].iter().copied().eq(w.chars())
            && (i == 0 || !(cs[i - 1].is_alphanumeric() || cs[i - 1] == '_'))
            && cs
                .get(i + n)
                .is_none_or(|c| !(c.is_alphanumeric() || *c == '_'))
    };
    // (bracket, a `:` seen at its depth, a comprehension already counted)
    let mut stack: Vec<(char, bool, bool)> = Vec::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        match c {
            '(' | '[' | '{' => stack.push((c, false, false)),
            ')' | ']' | '}' => {
                stack.pop();
            }
            ':' => {
                if let Some(top) = stack.last_mut() {
                    top.1 = true;
                }
            }
            _ if word_at(i, "lambda") => {
                out.push("<lambda>");
                // A lambda's `:` is not a dict's.
                let mut k = i;
                while k < cs.len() && cs[k] != ':' {
                    k += 1;
                }
                i = k + 1;
                continue;
            }
            _ if word_at(i, "for") => {
                if let Some(top) = stack.last_mut() {
                    if !top.2 {
                        top.2 = true;
                        out.push(match (top.0, top.1) {
                            ('[', _) => "<listcomp>",
                            ('{', true) => "<dictcomp>",
                            ('{', false) => "<setcomp>",
                            _ => "<genexpr>",
                        });
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Test ids the question names in backticks (`path::Class::test`), each once, in order; else
/// the extractor's `test`.
fn question_tests(inst: &Instance) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, part) in inst.question.split('`').enumerate() {
        let t = part.trim();
        if i % 2 == 1 && t.contains("::") && !t.contains(' ') && !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    }
    if out.is_empty() {
        if let Some(t) = inst.extractor_params.get("test").and_then(Value::as_str) {
            out.push(t.to_string());
        }
    }
    out
}

fn default_leaf(ty: &str) -> Value {
    match ty.split('|').next().unwrap_or("").trim() {
        "int" | "integer" => json!(0),
        "float" | "number" => json!(0.0),
        "str" | "string" => json!(""),
        "bool" | "boolean" => json!(false),
        "list" | "array" => json!([]),
        "dict" | "object" => json!({}),
        _ => Value::Null,
    }
}

fn fill(t: &Value, key: &str, ctx: &Fill) -> Value {
    let k = key.to_ascii_lowercase();
    let f = ctx.f;
    match t {
        Value::Object(m) => {
            if k == "call_graph" {
                let mut g = Map::new();
                if let Some(f) = f {
                    let mut calls: Vec<String> = ctx.calls.iter().map(|(_, n)| n.clone()).collect();
                    let mut seen = Vec::new();
                    calls.retain(|c| {
                        if seen.contains(c) {
                            false
                        } else {
                            seen.push(c.clone());
                            true
                        }
                    });
                    g.insert(f.name.clone(), json!(calls));
                }
                return Value::Object(g);
            }
            Value::Object(
                m.iter()
                    .map(|(kk, v)| (kk.clone(), fill(v, kk, ctx)))
                    .collect(),
            )
        }
        Value::Array(a) => {
            // Per-test rows (`[{"test": "str", ...}]`): one per test the question names, each
            // filled as the function-level answer.
            if let Some(Value::Object(em)) = a.first() {
                if em.contains_key("test") && !ctx.tests.is_empty() {
                    return Value::Array(
                        ctx.tests
                            .iter()
                            .map(|t| {
                                Value::Object(
                                    em.iter()
                                        .map(|(ek, ev)| {
                                            let v = if ek == "test" {
                                                json!(t)
                                            } else {
                                                fill(ev, ek, ctx)
                                            };
                                            (ek.clone(), v)
                                        })
                                        .collect(),
                                )
                            })
                            .collect(),
                    );
                }
            }
            let Some(f) = f else { return json!([]) };
            match a.first() {
                // Call sequences and callee counts: the calls of the body.
                Some(Value::Object(em)) if k.contains("call") && em.contains_key("function") => {
                    let mut rows: Vec<(usize, String, usize)> = Vec::new();
                    for (ln, name) in ctx.calls.iter().cloned() {
                        if em.contains_key("count") {
                            if let Some(r) = rows.iter_mut().find(|r| r.1 == name) {
                                r.2 += 1;
                                continue;
                            }
                        }
                        rows.push((ln, name, 1));
                    }
                    Value::Array(
                        rows.into_iter()
                            .map(|(ln, name, count)| {
                                Value::Object(
                                    em.iter()
                                        .map(|(ek, ev)| {
                                            let v = match ek.as_str() {
                                                "function" | "callee" | "name" => json!(name),
                                                "line" | "lineno" => json!(ln),
                                                "count" => json!(count),
                                                "file" | "filename" | "path" => json!(f.file),
                                                _ => fill(ev, ek, &EMPTY),
                                            };
                                            (ek.clone(), v)
                                        })
                                        .collect(),
                                )
                            })
                            .collect(),
                    )
                }
                Some(Value::Object(em)) if em.contains_key("line") => Value::Array(
                    f.body
                        .iter()
                        .map(|(ln, _)| {
                            Value::Object(
                                em.iter()
                                    .map(|(ek, ev)| {
                                        let v = match ek.as_str() {
                                            "line" | "lineno" => json!(ln),
                                            "file" | "filename" | "path" => json!(f.file),
                                            "func" | "function" | "qualname" => json!(f.name),
                                            _ => fill(ev, ek, &EMPTY),
                                        };
                                        (ek.clone(), v)
                                    })
                                    .collect(),
                            )
                        })
                        .collect(),
                ),
                Some(Value::String(ty)) if ty.starts_with("int") && k.contains("line") => {
                    json!(f.body.iter().map(|(ln, _)| *ln).collect::<Vec<_>>())
                }
                Some(Value::String(ty))
                    if ty.starts_with("str") && (k.contains("call") || k.contains("function")) =>
                {
                    let mut v: Vec<String> = ctx.calls.iter().map(|(_, n)| n.clone()).collect();
                    if k == "callees" {
                        // A callee set: by name, each once.
                        v.sort();
                        v.dedup();
                    }
                    if k.contains("function") {
                        v.insert(0, f.name.clone());
                    }
                    json!(v)
                }
                _ => json!([]),
            }
        }
        Value::String(ty) => default_leaf(ty),
        Value::Number(_) => json!(0),
        Value::Bool(_) => json!(false),
        Value::Null => Value::Null,
    }
}
