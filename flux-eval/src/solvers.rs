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
//!      the body in textual order (with the function itself first for `function` keys);
//!      `call_graph` becomes `{function: [called names]}`; every other leaf is zero, `""`,
//!      `false`, `null` or an empty list.

use serde_json::{json, Map, Value};
use std::path::Path;

use crate::prompt::{list_py_files, mentioned_files, resolve, source_root_for};
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

const KEYWORDS: &[&str] = &[
    "if", "elif", "while", "for", "return", "and", "or", "not", "in", "is", "print", "def", "class",
    "lambda", "with", "assert", "yield", "await", "except", "raise", "del", "global", "nonlocal",
    "import", "from", "as", "pass", "else", "try", "finally", "async", "break", "continue",
];

fn candidate_names(inst: &Instance) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let last = s.rsplit(['.', ':']).next().unwrap_or(s).trim();
        if !last.is_empty()
            && last.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !last.starts_with(|c: char| c.is_ascii_digit())
            && !out.iter().any(|o| o == last)
        {
            out.push(last.to_string());
        }
    };
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
            while i < bytes.len() && (bytes[i].is_alphanumeric() || bytes[i] == '_' || bytes[i] == '.') {
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

/// Find `def name(` in `text` and return its body.
pub fn find_function(file: &str, text: &str, name: &str) -> Option<FuncInfo> {
    let lines: Vec<&str> = text.lines().collect();
    let pat1 = format!("def {name}(");
    let (idx, def) = lines.iter().enumerate().find(|(_, l)| {
        let t = l.trim_start();
        t.starts_with(&pat1) || t.strip_prefix("async ").is_some_and(|r| r.starts_with(&pat1))
    })?;
    let base = indent(def);
    let mut body = Vec::new();
    // Skip continuation lines of a multi-line signature: the body starts after the line ending in ':'.
    let mut j = idx;
    while j < lines.len() && !lines[j].trim_end().ends_with(':') {
        j += 1;
    }
    for (k, l) in lines.iter().enumerate().skip(j + 1) {
        let t = l.trim();
        if t.is_empty() {
            continue;
        }
        if indent(l) <= base {
            break;
        }
        if t.starts_with('#') {
            continue;
        }
        body.push((k + 1, l.to_string()));
    }
    Some(FuncInfo { file: file.to_string(), name: name.to_string(), def_line: idx + 1, body })
}

/// Names called in the body, in textual order (with repeats), e.g. `self.f(x)` → `self.f`.
pub fn called_names(f: &FuncInfo) -> Vec<String> {
    let mut out = Vec::new();
    for (_, l) in &f.body {
        let code = l.split('#').next().unwrap_or("");
        let cs: Vec<char> = code.chars().collect();
        let mut i = 0;
        let mut in_str: Option<char> = None;
        while i < cs.len() {
            let c = cs[i];
            if let Some(q) = in_str {
                if c == '\\' {
                    i += 2;
                    continue;
                }
                if c == q {
                    in_str = None;
                }
                i += 1;
                continue;
            }
            if c == '"' || c == '\'' {
                in_str = Some(c);
                i += 1;
                continue;
            }
            if c.is_alphabetic() || c == '_' {
                let s = i;
                while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_' || cs[i] == '.') {
                    i += 1;
                }
                let w: String = cs[s..i].iter().collect();
                let mut k = i;
                while k < cs.len() && cs[k] == ' ' {
                    k += 1;
                }
                if k < cs.len() && cs[k] == '(' && !KEYWORDS.contains(&w.as_str()) && !w.ends_with('.') {
                    out.push(w);
                }
                continue;
            }
            i += 1;
        }
    }
    out
}

/// Locate the target function of an instance in its source (or its test files).
pub fn target_function(inst: &Instance, source_root: Option<&Path>) -> Option<FuncInfo> {
    let names = candidate_names(inst);
    let mut texts: Vec<(String, String)> = Vec::new();
    if let Some(root) = source_root_for(inst, source_root) {
        let files = list_py_files(&root);
        let mut wanted: Vec<String> = inst.tracing_files.clone();
        wanted.extend(mentioned_files(&inst.question));
        for w in wanted {
            if let Some(f) = resolve(&w, &files) {
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
pub fn static_baseline_answer(inst: &Instance, source_root: Option<&Path>) -> Value {
    let f = target_function(inst, source_root);
    fill(&inst.template, "", f.as_ref())
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

fn fill(t: &Value, key: &str, f: Option<&FuncInfo>) -> Value {
    let k = key.to_ascii_lowercase();
    match t {
        Value::Object(m) => {
            if k == "call_graph" {
                let mut g = Map::new();
                if let Some(f) = f {
                    let mut calls = called_names(f);
                    let mut seen = Vec::new();
                    calls.retain(|c| if seen.contains(c) { false } else { seen.push(c.clone()); true });
                    g.insert(f.name.clone(), json!(calls));
                }
                return Value::Object(g);
            }
            Value::Object(m.iter().map(|(kk, v)| (kk.clone(), fill(v, kk, f))).collect())
        }
        Value::Array(a) => {
            let Some(f) = f else { return json!([]) };
            match a.first() {
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
                                            _ => fill(ev, ek, None),
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
                    let mut v = called_names(f);
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
