//! Answer comparison with SWE-Flux semantics.
//!
//! The gold (`expected`) drives the walk: every key of an expected object must be present in
//! the answer (extra keys are ignored), lists must have equal length and match in order unless
//! their JSON pointer is declared order-insensitive (then they match as multisets, using the
//! same leniency for each element). Scalars are compared leniently:
//!
//! * numbers: equal within 1e-6 absolute or relative;
//! * stringified scalars: `"3"` vs `3`, `"True"` vs `true`, `"None"` vs `null`;
//! * `|||` in a gold string separates accepted alternatives;
//! * `<class 'ValueError'>` vs `ValueError`;
//! * paths: one is a suffix of the other at a `/` component boundary
//!   (`/abs/site-packages/pkg/mod.py` vs `pkg/mod.py`);
//! * dotted identifiers: one is a suffix of the other at a `.` boundary
//!   (`sympy.core.add.Add.flatten` vs `Add.flatten`).
//!
//! The first mismatch is returned with its JSON pointer, the expected and the got value.

use serde_json::Value;
use std::fmt;

/// Tolerance for numbers, absolute or relative.
pub const FLOAT_TOL: f64 = 1e-6;

/// Why an answer does not match the gold.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// JSON pointer of the first difference ("" is the root).
    pub path: String,
    pub expected: Value,
    pub got: Value,
    pub message: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(
            f,
            "at {path}: {}: expected {}, got {}",
            self.message,
            short(&self.expected),
            short(&self.got)
        )
    }
}

/// Compact JSON text, cut to a readable length.
pub fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 160 {
        let cut: String = s.chars().take(157).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// Options of a comparison: the order-insensitive JSON-pointer patterns of the instance.
///
/// A pattern is a JSON pointer whose segments may be `*` (any key or index), e.g.
/// `/calls/*/callees`. A pattern without a leading `/` is a bare key name and matches any list
/// stored under that key, wherever it is.
#[derive(Debug, Clone, Default)]
pub struct CompareOptions {
    pub order_insensitive: Vec<String>,
}

impl CompareOptions {
    fn is_order_insensitive(&self, path: &[String]) -> bool {
        self.order_insensitive
            .iter()
            .any(|p| pattern_matches(p, path))
    }
}

fn pattern_matches(pattern: &str, path: &[String]) -> bool {
    let Some(rest) = pattern.strip_prefix('/') else {
        return !pattern.is_empty() && path.last().is_some_and(|k| k == pattern);
    };
    let segs: Vec<String> = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split('/').map(unescape_pointer).collect()
    };
    segs.len() == path.len() && segs.iter().zip(path).all(|(s, p)| s == "*" || s == p)
}

fn unescape_pointer(s: &str) -> String {
    s.replace("~1", "/").replace("~0", "~")
}

fn escape_pointer(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn pointer(path: &[String]) -> String {
    path.iter()
        .map(|s| format!("/{}", escape_pointer(s)))
        .collect()
}

/// Compare an answer against the gold; `Ok(())` when it passes.
pub fn compare(expected: &Value, got: &Value, opts: &CompareOptions) -> Result<(), Mismatch> {
    let mut path = Vec::new();
    cmp(expected, got, opts, &mut path)
}

/// True when `got` matches `expected` under all the rules.
pub fn matches(expected: &Value, got: &Value, opts: &CompareOptions) -> bool {
    compare(expected, got, opts).is_ok()
}

fn mismatch(
    path: &[String],
    expected: &Value,
    got: &Value,
    message: impl Into<String>,
) -> Mismatch {
    Mismatch {
        path: pointer(path),
        expected: expected.clone(),
        got: got.clone(),
        message: message.into(),
    }
}

fn cmp(
    expected: &Value,
    got: &Value,
    opts: &CompareOptions,
    path: &mut Vec<String>,
) -> Result<(), Mismatch> {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            for (k, ev) in e {
                path.push(k.clone());
                let r = match g.get(k) {
                    Some(gv) => cmp(ev, gv, opts, path),
                    None => Err(mismatch(
                        path,
                        ev,
                        &Value::Null,
                        format!("missing key {k:?}"),
                    )),
                };
                path.pop();
                r?;
            }
            Ok(())
        }
        (Value::Object(_), _) => Err(mismatch(path, expected, got, "expected an object")),
        (Value::Array(e), Value::Array(g)) => {
            if e.len() != g.len() {
                return Err(mismatch(
                    path,
                    expected,
                    got,
                    format!(
                        "list length differs ({} expected, {} got)",
                        e.len(),
                        g.len()
                    ),
                ));
            }
            if opts.is_order_insensitive(path) {
                multiset(e, g, opts, path)
            } else {
                for (i, (ev, gv)) in e.iter().zip(g).enumerate() {
                    path.push(i.to_string());
                    let r = cmp(ev, gv, opts, path);
                    path.pop();
                    r?;
                }
                Ok(())
            }
        }
        (Value::Array(_), _) => Err(mismatch(path, expected, got, "expected a list")),
        _ => {
            if scalar_eq(expected, got) {
                Ok(())
            } else {
                Err(mismatch(path, expected, got, "value differs"))
            }
        }
    }
}

/// Multiset comparison: a perfect matching between expected and got elements under the lenient
/// element comparison (lenient equality is not transitive, so this is a bipartite matching).
fn multiset(
    e: &[Value],
    g: &[Value],
    opts: &CompareOptions,
    path: &mut Vec<String>,
) -> Result<(), Mismatch> {
    path.push("*".to_string());
    let (matched, unmatched) = max_matching(e, g, |a, b| cmp(a, b, opts, path).is_ok());
    path.pop();
    if matched == e.len() {
        return Ok(());
    }
    let first = unmatched.first().copied().unwrap_or(0);
    path.push(first.to_string());
    let m = mismatch(
        path,
        e.get(first).unwrap_or(&Value::Null),
        &Value::Null,
        format!(
            "order-insensitive list: {} of {} expected items have no match in the answer",
            e.len() - matched,
            e.len()
        ),
    );
    path.pop();
    Err(m)
}

/// Maximum bipartite matching (Kuhn) between `left` and `right` under `eq`.
/// Returns the size of the matching and the indices of unmatched left elements.
/// Exactly equal pairs are paired first so that large lists of scalars stay cheap.
pub fn max_matching<F>(left: &[Value], right: &[Value], mut eq: F) -> (usize, Vec<usize>)
where
    F: FnMut(&Value, &Value) -> bool,
{
    use std::collections::HashMap;
    let mut right_of: Vec<Option<usize>> = vec![None; left.len()];
    let mut left_of: Vec<Option<usize>> = vec![None; right.len()];
    // Exact pairs first.
    let mut by_text: HashMap<String, Vec<usize>> = HashMap::new();
    for (j, r) in right.iter().enumerate() {
        by_text.entry(r.to_string()).or_default().push(j);
    }
    for (i, l) in left.iter().enumerate() {
        if let Some(js) = by_text.get_mut(&l.to_string()) {
            if let Some(j) = js.pop() {
                right_of[i] = Some(j);
                left_of[j] = Some(i);
            }
        }
    }
    let rest_l: Vec<usize> = (0..left.len()).filter(|&i| right_of[i].is_none()).collect();
    let rest_r: Vec<usize> = (0..right.len()).filter(|&j| left_of[j].is_none()).collect();
    // Kuhn on the remainder.
    let adj: Vec<Vec<usize>> = rest_l
        .iter()
        .map(|&i| {
            rest_r
                .iter()
                .copied()
                .filter(|&j| eq(&left[i], &right[j]))
                .collect()
        })
        .collect();
    let mut owner: Vec<Option<usize>> = vec![None; right.len()];
    fn augment(
        u: usize,
        adj: &[Vec<usize>],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for &j in &adj[u] {
            if seen[j] {
                continue;
            }
            seen[j] = true;
            if owner[j].is_none_or(|w| augment(w, adj, seen, owner)) {
                owner[j] = Some(u);
                return true;
            }
        }
        false
    }
    let mut extra = 0;
    for u in 0..rest_l.len() {
        let mut seen = vec![false; right.len()];
        if augment(u, &adj, &mut seen, &mut owner) {
            extra += 1;
        }
    }
    let mut matched_rest = vec![false; rest_l.len()];
    for w in owner.iter().flatten() {
        matched_rest[*w] = true;
    }
    let unmatched = rest_l
        .iter()
        .zip(&matched_rest)
        .filter(|(_, m)| !**m)
        .map(|(i, _)| *i)
        .collect();
    (left.len() - rest_l.len() + extra, unmatched)
}

/// Lenient equality of two scalars (or of a scalar and anything).
pub fn scalar_eq(expected: &Value, got: &Value) -> bool {
    match expected {
        Value::String(s) if s.contains("|||") => s
            .split("|||")
            .any(|alt| scalar_eq_one(&Value::String(alt.trim().to_string()), got)),
        _ => scalar_eq_one(expected, got),
    }
}

fn scalar_eq_one(expected: &Value, got: &Value) -> bool {
    match (expected, got) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Number(_), Value::Number(_)) => num_eq(expected, got),
        (Value::String(a), Value::String(b)) => str_eq(a, b),
        (Value::String(s), other) | (other, Value::String(s)) => stringified_eq(s, other),
        _ => false,
    }
}

fn num_eq(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x == y;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => float_eq(x, y),
        _ => false,
    }
}

/// Floats equal within [`FLOAT_TOL`], absolute or relative.
pub fn float_eq(x: f64, y: f64) -> bool {
    if x == y {
        return true;
    }
    if !x.is_finite() || !y.is_finite() {
        return false;
    }
    let d = (x - y).abs();
    d <= FLOAT_TOL || d <= FLOAT_TOL * x.abs().max(y.abs())
}

/// A string against a non-string scalar: `"3"` vs 3, `"True"` vs true, `"None"` vs null.
fn stringified_eq(s: &str, other: &Value) -> bool {
    let t = s.trim();
    match other {
        Value::Bool(b) => match t.to_ascii_lowercase().as_str() {
            "true" => *b,
            "false" => !*b,
            _ => false,
        },
        Value::Null => matches!(t, "None" | "null" | "NULL" | "none"),
        Value::Number(n) => {
            if let (Ok(i), Some(j)) = (t.parse::<i64>(), n.as_i64()) {
                return i == j;
            }
            match (t.parse::<f64>(), n.as_f64()) {
                (Ok(x), Some(y)) => float_eq(x, y),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Strip a `<class '...'>` wrapper and surrounding whitespace.
fn unwrap_class(s: &str) -> &str {
    let t = s.trim();
    for (pre, post) in [("<class '", "'>"), ("<class \"", "\">")] {
        if let Some(inner) = t.strip_prefix(pre).and_then(|r| r.strip_suffix(post)) {
            return inner.trim();
        }
    }
    t
}

fn str_eq(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (a, b) = (unwrap_class(a), unwrap_class(b));
    if a == b {
        return true;
    }
    if a.is_empty() || b.is_empty() {
        return false;
    }
    // Both spell numbers: compare as numbers ("1.0" vs "1").
    if let (Ok(x), Ok(y)) = (a.parse::<f64>(), b.parse::<f64>()) {
        return float_eq(x, y);
    }
    if (a.contains('/') || b.contains('/')) && is_file_path(a) && is_file_path(b) {
        return path_suffix_eq(a, b);
    }
    if is_dotted_ident(a) && is_dotted_ident(b) {
        return component_suffix(a, b, '.');
    }
    false
}

/// A path whose last component is a file name with an extension (`mod.py`, `_x.cpython-311.so`):
/// only such strings get path leniency, so that `"1/2"` (a repr) never matches `"2"`.
fn is_file_path(s: &str) -> bool {
    let last = s.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let Some((stem, ext)) = last.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && !ext.is_empty()
        && ext.starts_with(|c: char| c.is_ascii_alphabetic())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && !s.contains(char::is_whitespace)
}

fn path_suffix_eq(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.trim_start_matches("./").trim_end_matches('/').to_string();
    let (a, b) = (norm(a), norm(b));
    if a.is_empty() || b.is_empty() {
        return false;
    }
    component_suffix(&a, &b, '/')
}

/// One string is the other or a suffix of it at a `sep` boundary.
fn component_suffix(a: &str, b: &str, sep: char) -> bool {
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let short = short.trim_start_matches(sep);
    if short.is_empty() {
        return false;
    }
    if long == short {
        return true;
    }
    long.strip_suffix(short)
        .is_some_and(|head| head.ends_with(sep))
}

/// `a.b.C`, `Foo.<locals>.bar`, `<lambda>`, `__init__`: identifiers joined by dots.
fn is_dotted_ident(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let p = part.trim_start_matches('<').trim_end_matches('>');
            !p.is_empty()
                && !p.starts_with(|c: char| c.is_ascii_digit())
                && p.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
}
