//! The native instance of a SWE-Flux instance: their question asked of flux's own extractor.
//!
//! `flux import swe-flux` writes, beside the instance their parser answers, one whose gold comes
//! from a flux extractor, wherever one expresses the question. The mapping is data, never
//! per-instance code: their answer shape (the template's top-level keys) chooses the extractor;
//! its parameters come from `eval.sh` (`TRACE_FILE`, `TRACE_FUNC`, `TEST_ID`) and from the
//! question's text, read for the few facts each extractor needs (the target `module.qualname`,
//! which invocation, loop header and body lines, the line and occurrence of a state question,
//! the tracked functions and variables); the answer's layout comes from `[extractor.answer]`
//! bindings. Where their question fixes a definition that no flux extractor has, the mapping
//! says so and no native instance is written: [`native_extractor`] returns why.
//!
//! Rules, by shape (the [`RULES`] table, one line each in `docs/swe-flux-interop.md`):
//! - `loop_iteration_count` → `loop_iterations` (iterations = executions of the body's first
//!   line, their definition);
//! - `max_iterations`+`min_iterations` → `loop_stats` over every invocation, zero-iteration
//!   ones included (per entry into the loop for their "loop activation", per `call` event when
//!   a generator's resumptions are invocations);
//! - `executed_path` → `executed_path` of the Nth invocation, lines normalised to their
//!   statement when the question says so;
//! - `covered_lines` → `covered_lines` (with the target's local functions when the question
//!   keeps `<target>.<locals>.` frames);
//! - `observed_state` → `state_at` (the Nth execution of a line in one invocation, or over
//!   all of them);
//! - `unique_values`, `value_history`, `temporal_value_history` → `unique_values` /
//!   `value_history` of one variable after a line executes;
//! - `observed_def_use_pairs` → `def_use_pairs` over every invocation, definitions from the AST;
//! - `caught_exception_kinds` → `caught_types`; `exception_type_counts` → `exception_counts`;
//! - `function_call_order` → `call_sequence` of the tracked functions; `invocation_counts` →
//!   `invocation_counts` of the module's functions; `covered_functions` → `covered_functions`
//!   of the tracked set;
//! - `line_execution_counts` → `line_counts` over the question's inclusive line range,
//!   zero-filled, every invocation (normalised to statements when it says so);
//! - `invariant_report` → `predicate_report` of the candidate predicates the question lists with
//!   their observation lines, evaluated by the hook on the target frame's live locals
//!   ([`predicates`] gives the `[tracing] predicates`); their one-predicate shape
//!   (`is_invariant_always_held`, `total_iterations_observed`, `violating_iteration_count`) is
//!   the same report's first item, bound by `[extractor.answer]`.
use crate::evalsh::EvalSh;
use crate::evidence::{dotted_tokens, fold, Evidence};
use flux_instance::ExtractorSpec;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// What the mapping reads: their `eval.sh`, their question, their template, their parser.
#[derive(Clone, Copy)]
pub struct Question<'a> {
    pub eval: &'a EvalSh,
    pub text: &'a str,
    pub template: &'a Value,
    /// Their `parser.py`, when their store keeps it: the executable definition of the answer,
    /// whose constants are read before the prose ([`crate::evidence`]).
    pub parser: Option<&'a str>,
}

/// The shapes the mapping knows, by their template's top-level keys (sorted, `+`-joined),
/// and the flux extractor each maps to.
pub const RULES: &[(&str, &str)] = &[
    ("loop_iteration_count", "loop_iterations"),
    ("max_iterations+min_iterations", "loop_stats"),
    ("total_iterations", "loop_stats"),
    ("executed_path", "executed_path"),
    ("executed_line_sequence", "executed_path"),
    ("covered_lines", "covered_lines"),
    ("observed_state", "state_at"),
    ("unique_values", "unique_values"),
    ("value_history", "value_history"),
    ("temporal_value_history", "value_history"),
    ("observed_def_use_pairs", "def_use_pairs"),
    ("caught_exception_kinds", "caught_types"),
    ("exception_type_counts", "exception_counts"),
    ("exception_types", "exception_counts"),
    ("function_call_order", "call_sequence"),
    ("invocation_counts", "invocation_counts"),
    ("covered_functions", "covered_functions"),
    ("invariant_report", "predicate_report"),
    ("line_execution_counts", "line_counts"),
    (
        "is_invariant_always_held+total_iterations_observed+violating_iteration_count",
        "predicate_report",
    ),
    ("exception_message+exception_type", "exception_info"),
    ("nth_iteration+value+variable", "iteration_value"),
    ("state_snapshots", "state_snapshots"),
    (
        "always_executed+never_executed+sometimes_executed",
        "line_classes",
    ),
    ("crashing_tests+safe_tests", "raising_tests"),
];

/// The template's top-level keys, sorted and `+`-joined (`max_iterations+min_iterations`).
pub fn shape_key(template: &Value) -> String {
    let mut keys: Vec<&str> = template
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys.join("+")
}

/// `src/jinja2/ext.py` → `jinja2.ext` (a `src/` layout's prefix dropped, `__init__` folded).
pub fn module_of(file: &str) -> Option<String> {
    let f = file.trim_start_matches("./");
    let f = f.strip_suffix(".py")?;
    let f = f.strip_prefix("src/").unwrap_or(f);
    let f = f.strip_suffix("/__init__").unwrap_or(f);
    (!f.is_empty()).then(|| f.replace('/', "."))
}

/// The spans of the text between backticks.
fn backticked(text: &str) -> Vec<&str> {
    let parts: Vec<&str> = text.split('`').collect();
    parts
        .iter()
        .enumerate()
        .filter(|(i, p)| i % 2 == 1 && !p.is_empty() && !p.contains('\n'))
        .map(|(_, p)| *p)
        .collect()
}

pub(crate) fn is_dotted_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|c| {
            !c.is_empty()
                && (c.chars().all(|x| x.is_alphanumeric() || x == '_')
                    && !c.starts_with(|x: char| x.is_ascii_digit())
                    || matches!(
                        c,
                        "<locals>"
                            | "<listcomp>"
                            | "<setcomp>"
                            | "<dictcomp>"
                            | "<genexpr>"
                            | "<lambda>"
                    ))
        })
}

/// The integers of `s` in order (`line 1039` → 1039).
fn ints(s: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            cur.push(c);
        } else if !cur.is_empty() {
            if let Ok(n) = cur.parse() {
                out.push(n);
            }
            cur.clear();
        }
    }
    out
}

/// The number of the first `line N` within `window` characters after each occurrence of
/// `phrase` (case-insensitive), first occurrence first.
fn line_after(text: &str, phrase: &str, window: usize) -> Option<u32> {
    let lower = text.to_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(phrase) {
        let at = from + i + phrase.len();
        let end = floor_char(&lower, (at + window).min(lower.len()));
        let tail = &lower[at..end];
        if let Some(j) = tail.find("line ") {
            if let Some(n) = ints(&tail[j + 5..]).first() {
                if tail[j + 5..]
                    .trim_start()
                    .starts_with(|c: char| c.is_ascii_digit())
                {
                    return u32::try_from(*n).ok();
                }
            }
        }
        from = at;
    }
    None
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

const ORDINALS: &[(&str, u32)] = &[
    ("first", 1),
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
    ("sixth", 6),
    ("seventh", 7),
    ("eighth", 8),
    ("ninth", 9),
    ("tenth", 10),
];

/// The question counts a line's executions over the whole test, not within one invocation: it
/// says so ("across all invocations", "across the complete execution of the named test",
/// "counts executions of line N rather than invocations"), or it asks for the Nth execution and
/// names no invocation to count it in.
fn counts_across_invocations(text: &str, occurrence: Option<u32>, invocation: Option<u32>) -> bool {
    mentions(
        text,
        &[
            "across all invocations",
            "across invocations",
            "globally",
            "across the complete",
            "across the whole",
            "across the entire",
            "across the test",
            "rather than invocations",
            "rather than per invocation",
            "not per invocation",
            "regardless of invocation",
        ],
    ) || (occurrence.is_some() && invocation.is_none())
}

/// `N` of `the Nth <noun>` / `<noun> N` / `the second <noun>` in the text, the first found.
fn ordinal_of(text: &str, noun: &str) -> Option<u32> {
    let lower = text.to_lowercase().replace(['*', '`'], "");
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == ';')
        .filter(|w| !w.is_empty())
        .collect();
    for (i, w) in words.iter().enumerate() {
        if !w.trim_end_matches(['.', ':']).starts_with(noun) {
            continue;
        }
        if i > 0 {
            let prev = words[i - 1];
            if let Some((_, n)) = ORDINALS.iter().find(|(o, _)| *o == prev) {
                return Some(*n);
            }
            let digits: String = prev.chars().take_while(char::is_ascii_digit).collect();
            let suffix = &prev[digits.len()..];
            if !digits.is_empty() && ["st", "nd", "rd", "th"].contains(&suffix) {
                return digits.parse().ok();
            }
        }
        if let Some(next) = words.get(i + 1) {
            let n = next
                .trim_start_matches('#')
                .trim_end_matches(['.', ':', '?', '!']);
            if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) {
                return n.parse().ok();
            }
        }
    }
    None
}

fn mentions(text: &str, any: &[&str]) -> bool {
    let lower = text.to_lowercase();
    any.iter().any(|p| lower.contains(p))
}

/// What every rule needs: the target (module, qualname), the file, where modules are rooted.
struct Target {
    module: String,
    qualname: String,
    file: String,
    module_root: String,
}

fn trace_var<'a>(eval: &'a EvalSh, name: &str) -> &'a str {
    eval.exports
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

fn trace_funcs(eval: &EvalSh) -> Vec<String> {
    trace_var(eval, "TRACE_FUNC")
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Their rule: an entry equals the dotted name, is a dotted prefix or suffix of it, or its last
/// component.
fn func_rule(entry: &str, dotted: &str) -> bool {
    let last = dotted.rsplit('.').next().unwrap_or(dotted);
    dotted == entry
        || entry == last
        || dotted
            .strip_prefix(entry)
            .is_some_and(|r| r.starts_with('.'))
        || dotted.strip_suffix(entry).is_some_and(|r| r.ends_with('.'))
}

/// The Python files the question can be about: `TRACE_FILE` if it is one, and every backticked
/// `*.py` path under it.
fn files(q: &Question) -> Vec<String> {
    let tf = trace_var(q.eval, "TRACE_FILE");
    let mut out = Vec::new();
    if tf.ends_with(".py") {
        out.push(tf.to_string());
    }
    for b in backticked(q.text) {
        // TRACE_FILE is a substring of the traced path, absolute ("/testbed/" takes every file
        // under the root) or relative
        let under =
            b.contains(tf) || format!("{}/{b}", q.eval.root.trim_end_matches('/')).contains(tf);
        if b.ends_with(".py") && !b.contains(' ') && under && !out.iter().any(|f| f == b) {
            out.push(b.to_string());
        }
    }
    out
}

/// The target: the first `module.qualname` whose module is one of the question's files and
/// that `TRACE_FUNC` matches, among their parser's constants (its target role first), then the
/// question's backticked names, then its names without backticks.
fn target(q: &Question, ev: &Evidence) -> Result<Target, String> {
    let funcs = trace_funcs(q.eval);
    let mut names: Vec<&str> = ev.target_names();
    names.extend(backticked(q.text));
    names.extend(dotted_tokens(q.text));
    for file in files(q) {
        let Some(module) = module_of(&file) else {
            continue;
        };
        for &b in &names {
            // a `src/` layout's module named with its directory (`src.pkg.mod.f`)
            let Some(qual) = b
                .strip_prefix(&format!("{module}."))
                .or_else(|| b.strip_prefix(&format!("src.{module}.")))
            else {
                continue;
            };
            if !is_dotted_name(qual) || qual.ends_with(".<locals>") {
                continue;
            }
            if funcs.is_empty() || funcs.iter().any(|f| func_rule(f, b)) {
                let qual = qualified(&module, qual, &names);
                let module_root = if file.starts_with("src/") {
                    format!("{}/src", q.eval.root)
                } else {
                    q.eval.root.clone()
                };
                return Ok(Target {
                    module,
                    qualname: qual.to_string(),
                    file,
                    module_root,
                });
            }
        }
    }
    Err("the question names no `module.qualname` of TRACE_FILE that TRACE_FUNC matches".into())
}

/// `qual` with its class when it is a bare name and another candidate of the module names the
/// same function inside a class: a run before Python 3.11 named frames `module.co_name`, so
/// their parser's constant can say `pkg.mod.run` for `pkg.mod.Session.run`, which the prose
/// names in full.
fn qualified<'a>(module: &str, qual: &'a str, names: &[&'a str]) -> &'a str {
    if qual.contains('.') {
        return qual;
    }
    let tail = format!(".{qual}");
    names
        .iter()
        .filter_map(|n| n.strip_prefix(module)?.strip_prefix('.'))
        .find(|q| q.ends_with(&tail) && is_dotted_name(q) && !q.contains("<locals>"))
        .unwrap_or(qual)
}

/// `qual` with `<locals>` before its last name when the prose calls it a nested function ("the
/// nested helper function `pkg.mod.C.m._helper`"): Python's qualname of a function defined in
/// another is `C.m.<locals>._helper`, which their questions spell without `<locals>`.
fn nested_qualname(text: &str, module: &str, qual: &str) -> String {
    let Some((parent, last)) = qual.rsplit_once('.') else {
        return qual.to_string();
    };
    let lower = text.to_lowercase().replace('`', "");
    let full = format!("{module}.{qual}").to_lowercase();
    let nested = lower.match_indices(&full).any(|(i, _)| {
        let before = &lower[floor_char(&lower, i.saturating_sub(40))..i];
        [
            "nested helper",
            "nested function",
            "inner function",
            "local function",
            "closure",
        ]
        .iter()
        .any(|w| before.contains(w))
    });
    if nested && !qual.contains("<locals>") {
        format!("{parent}.<locals>.{last}")
    } else {
        qual.to_string()
    }
}

/// The functions the question tracks, as qualnames, in order, once each: the backticked
/// `module.qualname`s (of the question's modules, matched by `TRACE_FUNC`) of the passage that
/// follows the first phrase introducing them ("Track calls to exactly these functions: ...",
/// "Tracked functions (only these three): ...", "the following tracked set ...: - ...").
fn tracked(q: &Question, ev: &Evidence) -> Vec<String> {
    const PHRASES: &[&str] = &[
        "track calls to",
        "tracked functions",
        "tracked function set",
        "function identities",
        "following tracked",
        "tracked set",
        "these functions",
    ];
    let funcs = trace_funcs(q.eval);
    let modules: Vec<String> = files(q).iter().filter_map(|f| module_of(f)).collect();
    let lower = q.text.to_lowercase();
    let from_parser = ev.tracked();
    let passage: Vec<String> = if !from_parser.is_empty() {
        from_parser
    } else {
        let Some(at) = PHRASES.iter().filter_map(|p| lower.find(p)).min() else {
            return Vec::new();
        };
        let rest = &q.text[at..];
        // The passage ends at the first sentence end that is not a dot inside a name nor a
        // list item's number ("1. `a` 2. `b`").
        let item = |i: usize| {
            let num = rest[..i]
                .rsplit(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap_or("");
            let next = rest[i + 2..]
                .split(char::is_whitespace)
                .next()
                .unwrap_or("")
                .trim_matches(['`', '.', ',', ';', ':']);
            (1..=2).contains(&num.len()) && next.contains('.') && is_dotted_name(next)
        };
        let end = rest
            .match_indices(". ")
            .find(|(i, _)| !item(*i))
            .map_or(rest.len(), |(i, _)| i);
        // An aside's names ("(… for example `m.g`)") only when the passage has no others.
        let outside = without_asides(&rest[..end]);
        let names = dotted_tokens(&outside);
        let names = if names.is_empty() {
            dotted_tokens(&rest[..end])
        } else {
            names
        };
        names.into_iter().map(str::to_string).collect()
    };
    let mut out: Vec<String> = Vec::new();
    for b in passage.iter().map(String::as_str) {
        let Some(qual) = modules
            .iter()
            .find_map(|m| b.strip_prefix(&format!("{m}.")))
        else {
            continue;
        };
        if is_dotted_name(qual)
            && (funcs.is_empty() || funcs.iter().any(|f| func_rule(f, b)))
            && !out.iter().any(|x| x == qual)
        {
            out.push(qual.to_string());
        }
    }
    out
}

const PY_KEYWORDS: &[&str] = &[
    "def", "for", "while", "if", "elif", "else", "return", "yield", "in", "is", "not", "and", "or",
    "try", "except", "raise", "with", "as", "lambda", "class", "import", "from", "pass", "break",
    "continue", "global", "nonlocal", "del", "assert", "async", "await", "None", "True", "False",
];

fn is_identifier(b: &str) -> bool {
    b.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && b.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !PY_KEYWORDS.contains(&b)
        // their tracer's event names, backticked in questions
        && !["line", "call", "return", "exception"].contains(&b)
}

/// The local variables the question names: the backticked identifiers of the sentence that
/// follows the first of its phrases naming them (`Track only these local variable names:
/// `a`, `b`.`, `the local variable `x``, `the binding for `head``), in order, once each. A
/// parenthetical aside is not part of the list when the sentence names one outside it ("the
/// local variable `name` (the string assembled inside `parse_test`)"), and a bold heading
/// (`**…`) after the list ends it.
fn variables(q: &Question, ev: &Evidence) -> Vec<String> {
    let from_parser = ev.variables();
    if !from_parser.is_empty() {
        return from_parser;
    }
    // the answer's own keys ("sorted by `variable`") are no locals
    let keys = template_keys(q.template);
    let mut names = prose_variables(q);
    names.retain(|n| !keys.contains(n));
    names
}

/// Every key of a template, at any depth.
fn template_keys(t: &Value) -> Vec<String> {
    match t {
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(template_keys(v)))
            .collect(),
        Value::Array(a) => a.iter().flat_map(template_keys).collect(),
        _ => Vec::new(),
    }
}

/// The locals the prose names (see [`variables`]).
fn prose_variables(q: &Question) -> Vec<String> {
    const PHRASES: &[&str] = &[
        "tracked variables",
        "outer-function locals",
        "target-frame locals",
        "local variable names",
        "these local variables",
        "the local variables",
        "local variable",
        "loop variable",
        "variable names",
        "local names",
        "binding for",
        "the local ",
    ];
    let lower = q.text.to_lowercase();
    for ph in PHRASES {
        let Some(i) = lower.find(ph) else { continue };
        let rest = &q.text[i + ph.len()..];
        let end = [". ", ".\n", "? ", "?\n"]
            .iter()
            .filter_map(|e| rest.find(e))
            .min()
            .unwrap_or(rest.len());
        let mut sentence = &rest[..end];
        // a heading after the list ("`key`, `value` **Def and use rules** (…)")
        if let Some(first) = sentence.find('`') {
            if let Some(h) = sentence[first..].find("**") {
                sentence = &sentence[..first + h];
            }
        }
        let outside = names_in(&without_asides(sentence));
        if !outside.is_empty() {
            return outside;
        }
        let all = names_in(sentence);
        if !all.is_empty() {
            return all;
        }
    }
    // "the three-variable state tuple `(i, input_messages, text_content)`": its names
    backticked(q.text)
        .into_iter()
        .find(|b| is_tuple_of_names(b))
        .map(|b| {
            b.trim_matches(|c| c == '(' || c == ')')
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The backticked identifiers of `text`, in order, once each.
fn names_in(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for b in backticked(text) {
        if is_identifier(b) && !out.iter().any(|x| x == b) {
            out.push(b.to_string());
        }
    }
    out
}

/// `text` with its parenthesised asides (nested too) left out.
/// Parentheses inside backticks are code, not asides: `` `repr((a, b))` `` is left whole.
fn without_asides(text: &str) -> String {
    let mut depth = 0usize;
    let mut code = false;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '`' if depth == 0 => {
                code = !code;
                out.push(c);
            }
            _ if code => out.push(c),
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Where `unique_values` / `value_history` observe (`lines`, `at`, `event`, `line_mode`): "each
/// line event at L1 and each return event at L2", or one observed line (their parser's, "the
/// statement that begins on line N", "after line N", "line event for line N", "every execution
/// of line N"), read after it runs unless the prose says before, per execution of the statement
/// when the prose names the statement or normalises lines to statements.
fn observation_point(text: &str, ev: &Evidence, p: &mut Map<String, Value>) -> Result<(), String> {
    let unquoted = text.replace('`', "");
    let at_line = line_after(&unquoted, "line event at", 20);
    let at_return = line_after(&unquoted, "return event at", 20);
    if let (Some(l), Some(r)) = (at_line, at_return) {
        // "each line event at L1 (the state it shows) and each return at L2"
        p.insert("lines".into(), json!([l, r]));
        p.insert("event".into(), json!("line_and_return"));
        p.insert("at".into(), json!("before"));
        return Ok(());
    }
    if ev.observed_line().is_none() {
        if let Some(lines) = listed_event_lines(&unquoted) {
            // "at each line event on (source) lines 134 and 136": the state each shows
            let before = lines.iter().any(|l| observed_before(text, *l));
            p.insert("lines".into(), json!(lines));
            p.insert("at".into(), json!(if before { "before" } else { "after" }));
            if statement_lines(text) {
                p.insert("line_mode".into(), json!("statement"));
            }
            return Ok(());
        }
    }
    let line = ev
        .observed_line()
        .or_else(|| statement_named(text))
        .or_else(|| line_after(text, "after", 60))
        .or_else(|| line_after(&unquoted, "line event for", 20))
        .or(at_line)
        .or_else(|| line_after(&unquoted, "every execution of", 40))
        .or_else(|| line_after(&unquoted, "each execution of", 40));
    let Some(line) = line else {
        if every_line_event(&unquoted) {
            // "at every (Python) line event in the target function's own frame": the state
            // each line event shows (before its line runs), no other event
            p.insert("event".into(), json!("line"));
            p.insert("at".into(), json!("before"));
            return Ok(());
        }
        if mentions(
            text,
            &[
                "every distinct value",
                "every value each",
                "each distinct value",
                "from the moment it is first assigned",
                "all observation points",
                "values taken by",
                "before every source line",
            ],
        ) {
            // no observation line: every value the locals hold, read wherever one changes
            p.insert("event".into(), json!("change"));
            return Ok(());
        }
        return Err("the question names no observation line".into());
    };
    p.insert("lines".into(), json!([line]));
    let before = observed_before(text, line);
    p.insert("at".into(), json!(if before { "before" } else { "after" }));
    if statement_named(text).is_some() || statement_lines(text) {
        // "after each execution of the statement that begins on line N and ends on line M":
        // one observation per run of the statement, read when it completes (its continuation
        // lines are not executions of their own)
        p.insert("line_mode".into(), json!("statement"));
    }
    Ok(())
}

/// Two or more observation lines listed after the line events they name ("each Python
/// executed-line event on absolute, 1-based source lines 134 and 136", "line events at lines
/// 10, 12 or 15", "line events … for which the current absolute line is 108 or 109"); a range
/// ("between lines 12 and 30", "from line 12") is not a list.
fn listed_event_lines(unquoted: &str) -> Option<Vec<u32>> {
    let lower = unquoted.to_lowercase();
    lower.match_indices("line event").find_map(|(i, _)| {
        let end = floor_char(&lower, (i + 160).min(lower.len()));
        let words: Vec<&str> = lower[i + "line event".len()..end]
            .split_whitespace()
            .collect();
        words.iter().enumerate().find_map(|(k, w)| {
            let range = k > 0 && ["between", "from", "through"].contains(&words[k - 1]);
            if !matches!(*w, "line" | "lines") || range {
                return None;
            }
            let mut out: Vec<u32> = Vec::new();
            for w in words[k + 1..]
                .iter()
                .skip_while(|w| matches!(**w, "is" | "are"))
            {
                let w = w.trim_end_matches([',', '.', ';', ':', ')']);
                match w {
                    "and" | "or" => continue,
                    _ if !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()) => {
                        out.push(w.parse().ok()?)
                    }
                    _ => break,
                }
            }
            (out.len() >= 2).then_some(out)
        })
    })
}

/// The question observes the frame at every `line` event, wherever it is ("at every Python line
/// event in the target function's own frame", "on each line event of the frame", "all line
/// events of the target's frame"), named by no line.
fn every_line_event(unquoted: &str) -> bool {
    let lower = unquoted.to_lowercase();
    // "the state of the target function's own frame immediately before each executed source
    // line begins"
    if [
        "before each executed source line",
        "before every executed source line",
        "before an executed source line",
    ]
    .iter()
    .any(|p| lower.contains(p))
    {
        return true;
    }
    ["every", "each", "all"].iter().any(|q| {
        lower.match_indices(q).any(|(i, _)| {
            if lower[..i].ends_with(|c: char| c.is_alphanumeric()) {
                return false;
            }
            let end = floor_char(&lower, (i + 40).min(lower.len()));
            let tail = &lower[i + q.len()..end];
            let words: Vec<&str> = tail.split_whitespace().take(3).collect();
            let event_at = words.iter().position(|w| w.starts_with("line"));
            match event_at {
                Some(k) => {
                    words.get(k + 1).is_some_and(|w| w.starts_with("event"))
                        && words[..k].iter().all(|w| *w == "python")
                }
                None => false,
            }
        })
    })
}

/// The question observes line `line`'s state *before* it runs ("on each `line` event for line
/// 384, immediately before the return statement beginning there executes", "just before line
/// 384 executes"), not after it ("after line N", "just before line N+1 executes" observes N
/// after it ran).
fn observed_before(text: &str, line: u32) -> bool {
    let lower = text.to_lowercase().replace('`', "");
    let there = lower.match_indices("before the").any(|(i, _)| {
        let end = floor_char(&lower, (i + 80).min(lower.len()));
        let tail = &lower[i..end];
        [
            "beginning there",
            "there executes",
            "on that line",
            "at that line",
            "on the reported line",
        ]
        .iter()
        .any(|p| tail.contains(p))
    });
    there
        || [
            format!("before line {line} executes"),
            format!("before line {line} runs"),
            format!("before line {line} is executed"),
        ]
        .iter()
        .any(|p| lower.contains(p.as_str()))
}

/// The class scope's options from the prose: every code object when it asks for them ("every
/// code object", comprehensions not excluded), the nested classes' methods ("classes nested
/// within `C`").
fn class_scope_options(text: &str, p: &mut Map<String, Value>) {
    let excluded = |word: &str| {
        near(
            text,
            word,
            &["exclude", "not counted", "are not", "do not count"],
        )
    };
    let comprehensions = ["comprehension", "generator expression", "genexpr"]
        .iter()
        .any(|w| mentions(text, &[w]) && !excluded(w));
    let every_code_object = mentions(
        text,
        &[
            "every code object",
            "all code objects",
            "each code object",
            "code objects defined",
            "code objects of",
            "code objects in",
        ],
    );
    if every_code_object || comprehensions {
        // "every code object of the class, comprehensions included" (not "exclude
        // ... comprehension frames")
        p.insert("code_objects".into(), json!(true));
    }
    if mentions(
        text,
        &[
            "classes nested within",
            "nested classes",
            "classes nested in",
        ],
    ) {
        // "including definitions in classes nested within `C`"
        p.insert("methods".into(), json!(true));
    }
    excluded_dunders(text, p);
}

/// The line of "the statement beginning on / that begins on / starting on line N" (the
/// statement whose first line is N), the first the prose names.
fn statement_named(text: &str) -> Option<u32> {
    [
        "statement beginning on",
        "statement begins on",
        "statement that begins",
        "statement which begins",
        "statement starting on",
        "statement starting at",
        "statement that starts",
    ]
    .iter()
    .find_map(|phrase| line_after(text, phrase, 30))
}

/// The question normalises lines to their statement's first line (not the physical line a
/// sub-expression starts on).
fn statement_lines(text: &str) -> bool {
    mentions(
        text,
        &[
            "enclosing python statement",
            "innermost enclosing",
            "where the statement begins",
            "where its innermost",
            "statement begins",
            "statement or expression begins",
            "statement's starting line",
            "starting line of its statement",
            "starting line of the statement",
            "statement starts",
        ],
    ) && !raw_lines(text)
}

/// Whether the prose keeps each event's own line where statement words would otherwise
/// normalise it ("report the line where the particular executed statement or expression
/// begins, rather than a later closing or continuation-only line", "do not normalize an event
/// on an executable continuation line back to the statement's first line").
fn raw_lines(text: &str) -> bool {
    mentions(
        text,
        &[
            "sub-expression or statement begins",
            "physical line",
            "do not normalize",
            "do not normalise",
            "continuation-only line",
        ],
    )
}

/// Whether one of `bs` is said within 60 characters before or 120 after an occurrence of `a`
/// (case-insensitive).
fn near(text: &str, a: &str, bs: &[&str]) -> bool {
    let lower = text.to_lowercase();
    lower.match_indices(a).any(|(i, _)| {
        let end = floor_char(&lower, (i + a.len() + 120).min(lower.len()));
        let start = floor_char(&lower, i.saturating_sub(60));
        bs.iter().any(|b| lower[start..end].contains(b))
    })
}

/// The def-use conventions a question's prose fixes beyond flux's defaults, as extractor
/// parameters: reads inside comprehensions and generator expressions out of the outer frame's
/// uses ("excluded", "do not count", "are not uses"), nested-function reads of outer locals in
/// or out, uses counted per load ("each load", "every occurrence ... counts"), and a `for`
/// header's iterable used once per entry into the loop.
fn def_use_conventions(text: &str) -> Vec<(&'static str, bool_or_str::V)> {
    use bool_or_str::V;
    let mut out = Vec::new();
    let near = |a: &str, bs: &[&str]| near(text, a, bs);
    const OUT: &[&str] = &[
        "excluded",
        "exclude",
        "are not uses",
        "do not count",
        "does not count",
        "don't count",
        "not counted",
        "ignored",
        "ignore",
    ];
    if near("comprehension", OUT) || near("generator expression", OUT) {
        out.push(("comprehension_uses", V::B(false)));
    }
    const IN: &[&str] = &[
        "included",
        "count as uses",
        "counts as a use",
        "are uses",
        "include",
    ];
    if near("nested function", IN) || near("closure", IN) || near("inner function", IN) {
        out.push(("closure_uses", V::B(true)));
    } else if near("nested function", OUT) || near("lambda", OUT) || near("closure", OUT) {
        out.push(("closure_uses", V::B(false)));
    }
    if mentions(
        text,
        &[
            "each load",
            "every load",
            "per load",
            "each occurrence of the name",
            "every occurrence of the name",
            "each read counts",
            "each syntactic read",
            "each ast load",
        ],
    ) {
        out.push(("use_count", V::S("load")));
    }
    // "for `for item in collection`, the iterable expression uses `collection` once when the
    // loop is entered" (not at every iteration's return to the header)
    if near(
        "iterable",
        &[
            " once when",
            " once per",
            " once at",
            " once on",
            " only once",
        ],
    ) || mentions(
        text,
        &["once per loop entry", "once when the loop is entered"],
    ) {
        out.push(("iterable_uses", V::S("entry")));
    }
    out
}

mod bool_or_str {
    /// A parameter value the prose sets.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum V {
        B(bool),
        S(&'static str),
    }

    impl serde::Serialize for V {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self {
                V::B(b) => s.serialize_bool(*b),
                V::S(x) => s.serialize_str(x),
            }
        }
    }
}

/// A candidate predicate written in prose, as the Python expression it unambiguously means
/// (`None` when it is not one of these forms, or is Python already):
/// - `A occurs in B` / `A appears in B` / `A is contained in B` → `(A) in (B)`;
/// - `A does not occur in B` → `(A) not in (B)`;
/// - `A is at least B` → `(A) >= (B)`, `at most` → `<=`, `is greater than` → `>`, `is less
///   than` → `<`, `equals` / `is equal to` → `==`, `is not equal to` / `differs from` → `!=`;
/// - `A is non-negative` → `(A) >= 0`, `is positive` → `(A) > 0`, `is empty` → `len(A) == 0`,
///   `is non-empty` / `is not empty` → `len(A) > 0`.
///
/// The operands are taken verbatim (backticks dropped); an operand holding another of these
/// phrases is ambiguous and left alone.
pub fn prose_predicate(text: &str) -> Option<String> {
    let t = fold(&text.replace('`', ""));
    const BINARY: &[(&str, &str)] = &[
        (" does not occur in ", "not in"),
        (" does not appear in ", "not in"),
        (" occurs in ", "in"),
        (" appears in ", "in"),
        (" is contained in ", "in"),
        (" is at least ", ">="),
        (" is at most ", "<="),
        (" is greater than or equal to ", ">="),
        (" is less than or equal to ", "<="),
        (" is strictly greater than ", ">"),
        (" is strictly less than ", "<"),
        (" is greater than ", ">"),
        (" is less than ", "<"),
        (" is not equal to ", "!="),
        (" differs from ", "!="),
        (" is equal to ", "=="),
        (" equals ", "=="),
    ];
    const UNARY: &[(&str, &str)] = &[
        (" is non-negative", "({}) >= 0"),
        (" is nonnegative", "({}) >= 0"),
        (" is positive", "({}) > 0"),
        (" is non-empty", "len({}) > 0"),
        (" is nonempty", "len({}) > 0"),
        (" is not empty", "len({}) > 0"),
        (" is empty", "len({}) == 0"),
    ];
    let found: Vec<(usize, &str, &str)> = BINARY
        .iter()
        .filter_map(|(ph, op)| t.find(ph).map(|i| (i, *ph, *op)))
        .collect();
    if let [(i, ph, op)] = found[..] {
        let (a, b) = (
            t[..i].trim(),
            t[i + ph.len()..].trim().trim_end_matches('.'),
        );
        if !a.is_empty() && !b.is_empty() {
            return Some(format!("({a}) {op} ({b})"));
        }
        return None;
    }
    if !found.is_empty() {
        // " is greater than or equal to " also holds " is greater than ": the longest wins.
        let (i, ph, op) = found.iter().max_by_key(|(_, ph, _)| ph.len())?;
        let (a, b) = (
            t[..*i].trim(),
            t[i + ph.len()..].trim().trim_end_matches('.'),
        );
        let others = BINARY
            .iter()
            .filter(|(p2, _)| {
                !ph.contains(p2.trim()) && (a.contains(p2.trim()) || b.contains(p2.trim()))
            })
            .count();
        return (others == 0 && !a.is_empty() && !b.is_empty())
            .then(|| format!("({a}) {op} ({b})"));
    }
    for (ph, form) in UNARY {
        if let Some(a) = t.trim_end_matches('.').strip_suffix(ph) {
            let a = a.trim();
            if !a.is_empty() {
                return Some(form.replace("{}", a));
            }
        }
    }
    None
}

/// The class whose directly defined methods a call-count question tracks (`... defined
/// directly in the body of class \`RFC2616Policy\``), as a qualname.
fn class_scope(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let at = [
        "directly in the body of class",
        "defined directly in class",
        "contained in the body of class",
        "in the body of class",
    ]
    .iter()
    .find_map(|p| lower.find(p).map(|i| i + p.len()))?;
    let rest = &text[at..];
    let open = rest.find('`')?;
    if open > 4 {
        return None;
    }
    let close = rest[open + 1..].find('`')?;
    let name = &rest[open + 1..open + 1 + close];
    is_dotted_name(name).then(|| name.to_string())
}

/// The inclusive line range a question names: `from 365 through 389`, `lines 12 to 30`,
/// `from line 7 through line 9` (the first such pair).
fn line_range(text: &str) -> Option<(u32, u32)> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    let num = |w: &str| w.trim_end_matches(['.', ';', ':']).parse::<u32>().ok();
    for (i, w) in words.iter().enumerate() {
        if !["through", "to", "thru"].contains(w) || i == 0 {
            continue;
        }
        let from = num(words[i - 1]);
        let to = words.get(i + 1).and_then(|x| num(x)).or_else(|| {
            (words.get(i + 1) == Some(&"line"))
                .then(|| words.get(i + 2).and_then(|x| num(x)))
                .flatten()
        });
        if let (Some(a), Some(b)) = (from, to) {
            if a <= b {
                return Some((a, b));
            }
        }
    }
    None
}

/// The candidate predicates of an invariant question and the line each is observed at, in the
/// question's order: every backticked span followed, before the next span that is not an event
/// name, by `line N` (`- \`len(x) > 0\` — a \`line\` event at line 91.`, `\`bool(a)\` at line
/// 67;`). Spans naming the target, its file or an event are not candidates.
fn candidate_predicates(text: &str) -> Vec<(String, u32)> {
    let quoted = quoted_candidates(text);
    if !quoted.is_empty() {
        return quoted;
    }
    let points = numbered_points(text);
    let parts: Vec<&str> = text.split('`').collect();
    let mut out: Vec<(String, u32)> = Vec::new();
    let mut i = 1;
    while i < parts.len() {
        let span = parts[i];
        if span.is_empty()
            || span.contains('\n')
            || span.ends_with(".py")
            || PY_KEYWORDS.contains(&span)
            || ["line", "call", "return", "exception"].contains(&span)
        {
            i += 2;
            continue;
        }
        // The prose after the span, through event-name spans (`a \`line\` event at line 91`).
        let mut after = String::new();
        let mut j = i + 1;
        while j < parts.len() {
            after.push_str(parts[j]);
            match parts.get(j + 1) {
                Some(next) if ["line", "call", "return", "exception"].contains(next) => {
                    after.push_str(next);
                    j += 2;
                }
                _ => break,
            }
        }
        let head = after.trim_start_matches([' ', '\u{2014}', '-', ':', ',']);
        let window = &head[..floor_char(head, head.len().min(40))];
        // "`p` — at observation point 1 only" (the points numbered in a list of their own)
        if let Some(k) = window.find("observation point ") {
            let n = ints(&window[k..]).first().copied();
            let named = is_dotted_name(span) && span.contains('.');
            if let (false, Some(l)) = (named, n.and_then(|n| points.get(&n))) {
                out.push((span.to_string(), *l));
                i += 2;
                continue;
            }
        }
        // "`p` — a `line` event at line 91", "`p` at line 67;", "- `p`: line 176."
        let at = window
            .find("at line ")
            .map(|k| (k, k + 8))
            .or_else(|| window.starts_with("line ").then_some((0, 5)));
        if let Some((k, from)) = at {
            let digits: String = window[from..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            // Not a sentence away, and not the target's dotted name.
            let near = !window[..k].contains(['.', ';', '?']);
            let named = is_dotted_name(span) && span.contains('.');
            if let (true, false, Ok(n)) = (near, named, digits.parse::<u32>()) {
                out.push((span.to_string(), n));
            }
        }
        i += 2;
    }
    out
}

/// Candidates listed as quoted strings with their line (`- "len(value) > 0" observed at line
/// 795 (\`event=line\`)`, jinja filters_do_urlize_m7_invariants, dev): the text between the
/// item's opening quote and the quote before "observed at line" / "at line" (a candidate may
/// hold quotes of its own: `"nofollow is False or "nofollow" in rel_parts"`).
fn quoted_candidates(text: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for ph in ["\" observed at line ", "\" at line "] {
        for (k, _) in text.match_indices(ph) {
            let Some(start) = text[..k].rfind("- \"") else {
                continue;
            };
            let expr = &text[start + 3..k];
            let line = ints(&text[k + ph.len()..]).first().copied();
            if let (false, Some(l)) = (expr.is_empty() || expr.contains("- \""), line) {
                if let Ok(l) = u32::try_from(l) {
                    out.push((expr.to_string(), l));
                }
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    out
}

/// Observation points numbered in a list of their own (`1. **Line 150, \`line\` event** —
/// …`, `2. Line 167 …`): number → line.
fn numbered_points(text: &str) -> BTreeMap<u64, u32> {
    let mut out = BTreeMap::new();
    for (k, _) in text.match_indices(". ") {
        let num: String = text[..k]
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect();
        let Ok(n) = num.chars().rev().collect::<String>().parse::<u64>() else {
            continue;
        };
        let after = text[k + 2..].trim_start_matches(['*', ' ']);
        if let Some(rest) = after
            .strip_prefix("Line ")
            .or_else(|| after.strip_prefix("line "))
        {
            if let Some(l) = ints(rest).first().and_then(|l| u32::try_from(*l).ok()) {
                out.entry(n).or_insert(l);
            }
        }
    }
    out
}

/// Whether a candidate reads as Python rather than prose: no two words side by side that are
/// not keywords or operators (`name starts with l underscore` is prose; `x is not None`,
/// `a in b` are Python). Strings are skipped.
fn reads_as_python(expr: &str) -> bool {
    const OPS: &[&str] = &[
        "and", "or", "not", "in", "is", "if", "else", "for", "lambda",
    ];
    let mut plain = String::new();
    let mut quote: Option<char> = None;
    for c in expr.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                plain.push_str(" 0 ");
            }
            None => plain.push(c),
        }
    }
    let words: Vec<&str> = plain.split_whitespace().collect();
    let word = |w: &str| w.chars().all(|c| c.is_alphanumeric() || c == '_') && !OPS.contains(&w);
    !words.windows(2).any(|p| word(p[0]) && word(p[1]))
}

/// The one candidate of a single-predicate question (`did the candidate predicate \`p\` hold
/// at every iteration? ... An iteration is one execution ... at line 39`): the first backticked
/// span after "candidate predicate", observed at the first `line N` after "an iteration is".
fn single_predicate(text: &str, ev: &Evidence) -> Option<(String, u32)> {
    let lower = text.to_lowercase();
    let at = lower.find("candidate predicate")? + "candidate predicate".len();
    let rest = &text[at..];
    let open = rest.find('`')?;
    // The span must follow the phrase in its sentence ("the candidate predicate `p`", "evaluate
    // this one candidate predicate verbatim against the target frame's locals: `p`").
    if rest[..open].contains(['.', '?']) || open > 200 {
        return None;
    }
    let close = rest[open + 1..].find('`')?;
    let expr = rest[open + 1..open + 1 + close].trim();
    if PY_KEYWORDS.contains(&expr) {
        return None;
    }
    // "An iteration is one execution ... at line 39", "An iteration observation is one Python
    // line event ... at absolute line 667", "Observe the target frame at each Python `line`
    // execution event for absolute, 1-based source line 134"
    // "An outer-loop observation is each execution of the line event for absolute, 1-based
    // source line 171", "For every execution of absolute, 1-based line 110", "at every
    // execution of the line-373 `if …` statement"; else their parser's observed line
    let line = line_after(text, "an iteration is", 300)
        .or_else(|| line_after(text, "observation point", 300))
        .or_else(|| any_line_after(text, "iteration observation is", 120))
        .or_else(|| any_line_after(text, "execution event for", 80))
        .or_else(|| any_line_after(text, "observation is", 120))
        .or_else(|| any_line_after(text, "every execution of", 40))
        .or_else(|| hyphenated_line(text))
        .or_else(|| ev.observed_line())?;
    (!expr.is_empty() && !expr.contains('\n')).then(|| (expr.to_string(), line))
}

/// The line of "the line-373 `if …` statement" (the first `line-N` the text names).
fn hyphenated_line(text: &str) -> Option<u32> {
    let lower = text.to_lowercase();
    lower.match_indices("line-").find_map(|(i, _)| {
        let digits: String = lower[i + 5..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// The number of the first `line N` within `window` characters after the first occurrence of
/// `phrase` (case-insensitive), passing `line` words not followed by a number ("one Python line
/// event ... at absolute line 667").
fn any_line_after(text: &str, phrase: &str, window: usize) -> Option<u32> {
    let lower = text.to_lowercase().replace('`', "");
    let at = lower.find(phrase)? + phrase.len();
    let tail = &lower[at..floor_char(&lower, (at + window).min(lower.len()))];
    tail.match_indices("line ").find_map(|(j, _)| {
        let after = &tail[j + 5..];
        after
            .starts_with(|c: char| c.is_ascii_digit())
            .then(|| ints(after).first().and_then(|n| u32::try_from(*n).ok()))
            .flatten()
    })
}

/// The `[tracing] predicates` a native invariant instance needs: each candidate of the question
/// at its observation lines, in frames of the target only (their question excludes nested
/// functions, comprehensions and callees).
pub fn predicates(q: &Question) -> Result<Vec<flux_trace::config::Predicate>, String> {
    Ok(labelled_predicates(q)?
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

/// [`predicates`], each with the question's own text of it (what its answer reports it as).
pub fn labelled_predicates(
    q: &Question,
) -> Result<Vec<(flux_trace::config::Predicate, String)>, String> {
    let folded = fold(q.text);
    let ev = Evidence::new(q.parser);
    let q = &Question {
        text: &folded,
        ..*q
    };
    let t = target(q, &ev)?;
    let mut found = candidate_predicates(q.text);
    if found.is_empty() {
        found.extend(single_predicate(q.text, &ev));
    }
    // Their parser's candidates (its constants) decide which predicates; the prose gives the
    // line of one whose constant has none.
    let theirs = ev.predicates();
    if !theirs.is_empty() {
        let prose = std::mem::take(&mut found);
        for (expr, line) in theirs {
            let line = line.or_else(|| prose.iter().find(|(e, _)| *e == expr).map(|(_, l)| *l));
            match line {
                Some(l) => found.push((expr, l)),
                None => {
                    return Err(format!(
                        "their parser's candidate `{expr}` has no observation line"
                    ))
                }
            }
        }
    }
    let mut out: Vec<(flux_trace::config::Predicate, String)> = Vec::new();
    for (text, line) in found {
        let expr = prose_predicate(&text).unwrap_or_else(|| text.clone());
        if !reads_as_python(&expr) {
            return Err(format!(
                "the candidate `{text}` is prose flux does not compile to Python"
            ));
        }
        match out.iter_mut().find(|(p, _)| p.expr == expr) {
            Some((p, _)) if !p.lines.contains(&line) => p.lines.push(line),
            Some(_) => {}
            None => out.push((
                flux_trace::config::Predicate {
                    expr,
                    lines: vec![line],
                    function: Some(t.qualname.clone()),
                },
                text,
            )),
        }
    }
    if out.is_empty() {
        return Err("the question lists no candidate predicates with observation lines".into());
    }
    Ok(out)
}

/// Where an extractor's answer parts come from (`[extractor.answer]`).
type Answer = BTreeMap<String, String>;

/// What every rule's parameters are read from: the question (prose folded), their parser's
/// constants, the target, the answer's shape, and what all rules share.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    q: &'a Question<'a>,
    ev: &'a Evidence,
    t: &'a Target,
    key: &'a str,
    text: &'a str,
    invocation: Option<u32>,
    occurrence: Option<u32>,
    statements: bool,
}

impl Ctx<'_> {
    /// Where sources are: the root and the modules' root.
    fn located(&self, p: &mut Map<String, Value>) {
        p.insert("root".into(), json!(self.q.eval.root));
        p.insert("module_root".into(), json!(self.t.module_root));
    }
}

/// The extractor (name, parameters, answer bindings) that asks `q` natively, or why none does.
pub fn native_extractor(q: &Question) -> Result<ExtractorSpec, String> {
    let key = shape_key(q.template);
    let Some((_, name)) = RULES.iter().find(|(k, _)| *k == key) else {
        return Err(format!(
            "no flux extractor is mapped for the answer shape `{key}`"
        ));
    };
    // The prose folded (line breaks are spaces), their parser's constants beside it.
    let folded = fold(q.text);
    let ev = Evidence::new(q.parser);
    let q = &Question {
        text: &folded,
        ..*q
    };
    let mut t = target(q, &ev)?;
    let text = q.text;
    t.qualname = nested_qualname(text, &t.module, &t.qualname);
    let mut p = Map::new();
    p.insert("function".into(), json!(t.qualname));
    if t.file.ends_with(".py") {
        p.insert("file".into(), json!(t.file));
    }
    let invocation = ev.invocation().or_else(|| ordinal_of(text, "invocation"));
    let occurrence = ev.occurrence().or_else(|| ordinal_of(text, "time"));
    // Lines normalised to their statement: the question says so, or their parser maps lines
    // through the AST's statements.
    let statements = statement_lines(text) || ev.normalises_statements();
    let c = Ctx {
        q,
        ev: &ev,
        t: &t,
        key: &key,
        text,
        invocation,
        occurrence,
        statements,
    };
    let mut answer = Answer::new();
    // A rule may answer with another extractor than its shape's (`state_at` at the return).
    let mut name: &str = name;
    match name {
        "loop_iterations" | "loop_stats" => loop_params(&c, name, &mut p)?,
        "iteration_value" => iteration_params(&c, &mut p)?,
        "state_snapshots" => snapshot_params(&c, &mut p)?,
        "line_classes" => line_classes_params(&c, &mut p),
        "executed_path" => {
            path_params(&c, &mut p)?;
            if key == "executed_line_sequence" {
                // the path as a bare list of lines
                answer.insert("/executed_line_sequence".into(), "/executed_path".into());
                answer.insert(
                    "/executed_line_sequence/*".into(),
                    "/executed_path/*/line".into(),
                );
            }
        }
        "covered_lines" => covered_lines_params(&c, &mut p)?,
        "state_at" if ev.observed_line().is_none() && at_the_return(text) => {
            // "the program point at function return": the locals at the Nth invocation's normal
            // return, one row per local
            snapshot_params(&c, &mut p)?;
            p.insert("rows".into(), json!("variables"));
            p.entry("invocation")
                .or_insert(json!(invocation.unwrap_or(1)));
            answer.insert("/observed_state".into(), "/state_snapshots".into());
            name = "state_snapshots";
        }
        "state_at" => state_at_params(&c, &mut p)?,
        "raising_tests" => raising_params(&c, &mut p, &mut answer),
        "unique_values" | "value_history" => values_params(&c, &mut p, &mut answer)?,
        "def_use_pairs" => def_use_params(&c, &mut p)?,
        "caught_types" => caught_params(&c, &mut p),
        "exception_counts" => exception_counts_params(&c, &mut p)?,
        "exception_info" => exception_info_params(&c, &mut p, &mut answer)?,
        "call_sequence" => call_params(&c, &mut p, &mut answer)?,
        "invocation_counts" if class_bodies(text, &ev).len() > 1 => {
            classes_counts_params(&c, &mut p, class_bodies(text, &ev))
        }
        "invocation_counts" if class_scope(text).is_some() => class_counts_params(&c, &mut p)?,
        "invocation_counts" => module_counts_params(&c, &mut p)?,
        "covered_functions" => covered_functions_params(&c, &mut p)?,
        "line_counts" => line_counts_params(&c, &mut p)?,
        "predicate_report" => predicate_params(&c, &mut p, &mut answer)?,
        _ => unreachable!("every rule's extractor is handled"),
    }
    Ok(ExtractorSpec {
        name: name.to_string(),
        params: p,
        answer,
    })
}

/// The question observes the frame at its return ("at the return point", "the program point
/// at function return", "reaches a normal return").
fn at_the_return(text: &str) -> bool {
    mentions(
        text,
        &[
            "at the return point",
            "at function return",
            "normal return",
            "at each return",
        ],
    )
}

/// `raising_tests`: the tests in which an exception propagates out of the target ("raises an
/// exception out of `f`", "propagates out of the target function"), sorted by id when the
/// prose sorts them; each crashing test with its type when their rows are objects.
fn raising_params(c: &Ctx, p: &mut Map<String, Value>, answer: &mut Answer) {
    p.insert("escapes".into(), json!(c.t.qualname));
    if mentions(
        c.text,
        &["lexicographic", "sorted()", "ascending order by test id"],
    ) {
        p.insert("order".into(), json!("sorted"));
    }
    if c.q
        .template
        .pointer("/crashing_tests/0")
        .is_some_and(Value::is_object)
    {
        answer.insert("/crashing_tests".into(), "/crashes".into());
    }
}

/// What a values question records when it is not a local's own repr: a call in a sentence that
/// records or constructs it ("record Python `repr(async_func.__name__)`", "construct this
/// five-item Python tuple: `(invocation_number, …, len(html), …)`"), `repr(name)` of a bare
/// name being the local's repr itself.
fn computed_value(text: &str) -> Option<&str> {
    let lower = text.to_lowercase();
    let mut at = 0;
    for sentence in lower.split_inclusive(". ") {
        let (from, to) = (at, at + sentence.len());
        at = to;
        if !["record", "construct"].iter().any(|w| sentence.contains(w)) {
            continue;
        }
        let found = backticked(&text[from..to]).into_iter().find(|b| {
            // `repr(x)`, and `repr((a, b))` (the repr of a tuple of locals, what flux's
            // `variables` observe), are the locals' own reprs
            let own_repr = b
                .strip_prefix("repr(")
                .and_then(|r| r.strip_suffix(')'))
                .is_some_and(|r| is_identifier(r) || is_tuple_of_names(r));
            let call = b.char_indices().any(|(i, c)| {
                c == '(' && b[..i].ends_with(|p: char| p.is_alphanumeric() || p == '_')
            });
            // `repr()`, `str()`: the function named, not an expression of locals
            let mention = b.ends_with("()") && is_identifier(&b[..b.len() - 2]);
            call && !own_repr && !mention
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// `(a, b)`, `(a,)`: a tuple display of plain names.
fn is_tuple_of_names(text: &str) -> bool {
    let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) else {
        return false;
    };
    let names: Vec<&str> = inner.split(',').map(str::trim).collect();
    let names = match names.split_last() {
        Some((last, rest)) if last.is_empty() && !rest.is_empty() => rest,
        _ => &names[..],
    };
    inner.contains(',') && names.iter().all(|n| is_identifier(n))
}

/// `caught_types`: one handler's catches when the prose names its line ("caught by the
/// function's `except InvalidTokenError` clause whose `except` keyword begins at absolute,
/// 1-based line 104", "the `except` clause at line N", "the handler on line N").
fn caught_params(c: &Ctx, p: &mut Map<String, Value>) {
    let line = [
        "keyword begins at",
        "except clause at",
        "except clause on",
        "handler at",
        "handler on",
    ]
    .iter()
    .find_map(|ph| any_line_after(c.text, ph, 40));
    if let Some(l) = line {
        p.insert("line".into(), json!(l));
    }
}

/// Whether a question that names no invocation asks about every one of them ("across the
/// entire pytest run", "whenever at least one … frame is active", "around every invocation …
/// this question aggregates all of them").
fn every_invocation(text: &str) -> bool {
    mentions(
        text,
        &[
            "across the entire",
            "whenever at least one",
            "every invocation",
            "all invocations",
            "aggregates all of them",
        ],
    )
}

/// the loop rules (`loop_iterations`, `loop_stats`): the header, what counts.
fn loop_params(c: &Ctx, name: &str, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        ev,
        text,
        invocation,
        ..
    } = *c;
    let header = loop_header(ev, text)?;
    p.insert("header".into(), json!(header));
    p.insert("count".into(), json!("body_line"));
    if name == "loop_stats" {
        if mentions(text, &["loop activation"]) {
            // "a loop activation is one complete execution of that `for` statement"
            p.insert("per".into(), json!("entry"));
        } else if mentions(text, &["as a separate invocation", "each resumption"]) {
            // a generator's every `call` event is an invocation of its own
            p.insert("per".into(), json!("call"));
        }
    }
    if name == "loop_iterations" {
        p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
    } else {
        p.insert("invocations".into(), json!("all"));
    }
    Ok(())
}

/// The loop's header line: their parser's, or "header … line N".
fn loop_header(ev: &Evidence, text: &str) -> Result<u32, String> {
    ev.header_line()
        .or_else(|| line_after(text, "header", 60))
        .ok_or_else(|| "the question names no loop header line".to_string())
}

/// `iteration_value`: the loop (its header), which iteration (their parser's
/// `REQUESTED_ITERATION`, or "at iteration N" / "the Nth iteration"), counted by executions of
/// the body's first line (the body line the prose names, else the first), the loop variable,
/// read before that iteration's first body line runs unless the prose reads it at the end.
fn iteration_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        invocation,
        ..
    } = *c;
    let header = loop_header(ev, text)?;
    p.insert("header".into(), json!(header));
    p.insert("count".into(), json!("body_line"));
    let body = ev.body_line().or_else(|| {
        [
            "body's first line",
            "first line of the loop body",
            "first body line",
        ]
        .iter()
        .find_map(|ph| line_after(&text.replace('`', ""), ph, 20))
    });
    if let Some(b) = body.filter(|b| *b > header) {
        p.insert("body_line".into(), json!(b));
    }
    let nth = ev
        .iteration()
        .or_else(|| ordinal_of(text, "iteration"))
        .ok_or("the question names no iteration")?;
    p.insert("iteration".into(), json!(nth));
    p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
    let vars = variables(q, ev);
    let [var] = &vars[..] else {
        return Err(format!(
            "the question names {} loop variables, not one: {vars:?}",
            vars.len()
        ));
    };
    p.insert("variable".into(), json!(var));
    if mentions(
        text,
        &[
            "at the end of the iteration",
            "at the end of that iteration",
            "at the end of iteration",
            "after the iteration completes",
        ],
    ) {
        p.insert("at".into(), json!("after"));
    }
    Ok(())
}

/// `state_snapshots`: the locals, where they are observed ("at the return point" / "reaches a
/// normal return" → each normal return, else as `unique_values`), one row per variable when
/// their rows are `{invocation, variable, value}`.
fn snapshot_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        invocation,
        ..
    } = *c;
    let vars = variables(q, ev);
    if vars.is_empty() {
        return Err("the question names no variable".into());
    }
    p.insert("variables".into(), json!(vars));
    if at_the_return(text) {
        p.insert("event".into(), json!("return"));
    } else {
        observation_point(text, ev, p)?;
    }
    let row = q.template.pointer("/state_snapshots/0");
    if row.is_some_and(|r| r.get("variable").is_some() && r.get("value").is_some()) {
        p.insert("rows".into(), json!("variables"));
    }
    if let (Some(n), false) = (invocation, every_invocation(text)) {
        p.insert("invocation".into(), json!(n));
    }
    Ok(())
}

/// `line_classes`: over the function's invocations when the prose classifies lines by them
/// ("seen in every invocation", "in at least one but not all invocations"), else over the
/// tests (those running it when it says so); statement lines when it normalises.
fn line_classes_params(c: &Ctx, p: &mut Map<String, Value>) {
    let text = c.text;
    if mentions(
        text,
        &[
            "in every invocation",
            "in each invocation",
            "all invocations",
            "every invocation of",
        ],
    ) && !mentions(text, &["in every test", "in all tests", "every test that"])
    {
        p.insert("over".into(), json!("invocations"));
    } else if mentions(
        text,
        &["tests in which", "tests that run", "tests that call"],
    ) {
        p.insert("tests".into(), json!("running"));
    }
    if c.statements {
        p.insert("line_mode".into(), json!("statement"));
    }
}

/// `executed_path`: the invocation and the line mode.
fn path_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        invocation,
        statements,
        ..
    } = *c;
    // A cross-function path: the lines of the tracked functions' frames while the target runs.
    let fs = tracked(q, ev);
    if fs.len() > 1 {
        p.insert("functions".into(), json!(fs));
    }
    match invocation {
        // "whenever at least one wrapper frame is active … across the entire pytest run"
        None if every_invocation(text) => {
            p.insert("all_invocations".into(), json!(true));
        }
        _ => {
            p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
        }
    }
    if statements {
        p.insert("line_mode".into(), json!("statement"));
    }
    c.located(p);
    Ok(())
}

/// `covered_lines`: nested frames and the line mode.
fn covered_lines_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        t,
        text,
        statements,
        ..
    } = *c;
    if text.contains(&format!("{}.{}.<locals>.", t.module, t.qualname)) {
        // "frames of local functions lexically defined inside that method"
        p.insert("nested".into(), json!(true));
    }
    if statements {
        p.insert("line_mode".into(), json!("statement"));
    }
    Ok(())
}

/// `state_at`: the observed line, its Nth execution and where it is counted, the locals.
fn state_at_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        invocation,
        occurrence,
        ..
    } = *c;
    let line = ev
        .observed_line()
        .or_else(|| statement_named(text))
        .or_else(|| line_after(text, "after", 40))
        .ok_or("the question names no observed line")?;
    p.insert("line".into(), json!(line));
    if counts_across_invocations(text, occurrence, invocation) {
        p.insert("across_invocations".into(), json!(true));
    } else {
        p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
    }
    if let Some(n) = occurrence {
        p.insert("occurrence".into(), json!(n));
    }
    if statement_lines(text) || mentions(text, &["multi-line assignment", "count it once"]) {
        // one execution per run of the statement, read when it completes
        p.insert("line_mode".into(), json!("statement"));
    }
    let mut vars = variables(q, ev);
    vars.sort();
    p.insert("variables".into(), json!(vars));
    Ok(())
}

/// `unique_values` / `value_history`: the locals, where they are observed, which invocations.
fn values_params(c: &Ctx, p: &mut Map<String, Value>, answer: &mut Answer) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        key,
        text,
        invocation,
        occurrence,
        ..
    } = *c;
    if let Some(expr) = computed_value(text) {
        return Err(format!(
            "the question records `{expr}`, a value computed from locals, not a local's repr"
        ));
    }
    let vars = variables(q, ev);
    let Some(var) = vars.first() else {
        return Err("the question names no variable".into());
    };
    if vars.len() > 1 && key == "unique_values" {
        // the unique values of a tuple of locals: the repr of `(a, b)`; or, "combined
        // into one set", the values each of them holds
        p.insert("variables".into(), json!(vars));
        if mentions(
            text,
            &[
                "combined into one",
                "pooled",
                "union of",
                "taken by either",
                "across both variables",
            ],
        ) {
            p.insert("combine".into(), json!("union"));
        }
    } else {
        p.insert("variable".into(), json!(var));
    }
    observation_point(text, ev, p)?;
    let every = mentions(
        text,
        &[
            "for each invocation",
            "every invocation",
            "all invocations",
            "across all",
        ],
    );
    if !every {
        if let Some(n) = invocation {
            p.insert("invocation".into(), json!(n));
        }
    }
    if let Some(n) = occurrence {
        p.insert("occurrence".into(), json!(n));
    }
    if key == "temporal_value_history" {
        answer.insert("/temporal_value_history".into(), "/value_history".into());
        answer.insert(
            "/temporal_value_history/*".into(),
            "/value_history/*/value".into(),
        );
    }
    Ok(())
}

/// `def_use_pairs`: every invocation, their conventions.
fn def_use_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        statements,
        ..
    } = *c;
    p.insert("all_invocations".into(), json!(true));
    p.insert("definitions".into(), json!("ast"));
    if statements {
        p.insert("line_mode".into(), json!("statement"));
    }
    let vars = variables(q, ev);
    if !vars.is_empty() {
        p.insert("variables".into(), json!(vars));
    }
    for (param, value) in def_use_conventions(text) {
        p.insert(param.into(), json!(value));
    }
    Ok(())
}

/// `exception_counts`: their tracer's events, the order of `exception_types`.
fn exception_counts_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx { key, text, .. } = *c;
    // their answer counts their tracer's `exception` events (settrace's): a bare
    // `raise`, which CPython re-raises without calling the tracer and flux infers, is
    // not one ("a bare re-raise ... does not count as another observation")
    p.insert("events".into(), json!("reported"));
    if key == "exception_types"
        && mentions(
            text,
            &[
                "first-occurrence order",
                "first occurrence order",
                "order of first occurrence",
                "order of their first",
                "do not sort",
                "not sorted",
            ],
        )
    {
        // "emit the list in chronological first-occurrence order; do not sort it"
        p.insert("order".into(), json!("first_seen"));
    }
    Ok(())
}

/// `exception_info`: the exception that propagates out of the target.
fn exception_info_params(
    c: &Ctx,
    p: &mut Map<String, Value>,
    answer: &mut Answer,
) -> Result<(), String> {
    let Ctx { t, occurrence, .. } = *c;
    // their flat shape: the exception that propagates out of the target
    p.remove("function");
    p.insert("escapes".into(), json!(t.qualname));
    if let Some(n) = occurrence {
        p.insert("occurrence".into(), json!(n));
    }
    answer.insert("/exception_type".into(), "/exception/type".into());
    answer.insert("/exception_message".into(), "/exception/message".into());
    Ok(())
}

/// `call_sequence`: the tracked functions and which calls are entries.
fn call_params(c: &Ctx, p: &mut Map<String, Value>, answer: &mut Answer) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        t,
        text,
        invocation,
        ..
    } = *c;
    let mut fs = tracked(q, ev);
    // "Do not include `call` events for `main` itself": their parser tracks the target to find
    // the invocation, the answer leaves its own call out.
    let short = t.qualname.rsplit('.').next().unwrap_or(&t.qualname);
    let without_self = [
        format!("do not include `call` events for `{short}` itself"),
        format!("do not include call events for {short} itself"),
        format!("do not include `{short}` itself"),
        format!("excluding `{short}` itself"),
    ]
    .iter()
    .any(|ph| mentions(text, &[ph.to_lowercase().as_str()]));
    if without_self {
        fs.retain(|f| *f != t.qualname);
    }
    if fs.is_empty() {
        return Err("the question lists no tracked functions".into());
    }
    p.insert("functions".into(), json!(fs));
    if invocation.is_none() && every_invocation(text) {
        // "around every invocation of `Command.run` … this question aggregates all of them"
        p.insert("all_invocations".into(), json!(true));
    } else {
        p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
    }
    if mentions(text, &["nested", "transitive"]) {
        p.insert("transitive".into(), json!(true));
    }
    if !without_self
        && (fs.contains(&t.qualname)
            || mentions(
                text,
                &[
                    "invocation itself",
                    "itself.",
                    "target's initial entry",
                    "target's own call",
                ],
            ))
    {
        // the target is one of the tracked functions: its own call is the first entry
        p.insert("include_self".into(), json!(true));
    }
    if mentions(
        text,
        &[
            "each resumption",
            "every resumption",
            "resumptions count",
            "resumption counts",
            "its resumptions",
            "frame resumes",
        ],
    ) {
        // a generator's every `call` event, its own resumptions too
        p.insert("resumptions".into(), json!(true));
    }
    if mentions(
        text,
        &[
            "during that lifetime",
            "during its lifetime",
            "even when the target frame is suspended",
            "while the target frame is suspended",
            "while it is suspended",
        ],
    ) {
        // every call from the invocation's start to its completion, wherever made from
        // (callbacks run while a coroutine awaits)
        p.insert("lifetime".into(), json!(true));
    }
    p.remove("file");
    c.located(p);
    answer.insert("/function_call_order".into(), "/call_sequence".into());
    Ok(())
}

/// `invocation_counts` over a class.
fn class_counts_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx { text, .. } = *c;
    // "every function defined directly in the body of class `C`"
    p.remove("function");
    p.insert("class".into(), json!(class_scope(text)));
    p.insert("count".into(), json!("calls"));
    class_scope_options(text, p);
    c.located(p);
    Ok(())
}

/// The classes whose bodies a call-count question scopes ("an immediate child of either the
/// `Slot` class body or the `Downloader` class body"), or their parser's `TRACKED_CLASSES`.
fn class_bodies(text: &str, ev: &Evidence) -> Vec<String> {
    let theirs = ev.classes();
    if !theirs.is_empty() {
        return theirs;
    }
    let mut out: Vec<String> = Vec::new();
    for (i, _) in text.match_indices("` class body") {
        let Some(open) = text[..i].rfind('`') else {
            continue;
        };
        let name = &text[open + 1..i];
        if is_dotted_name(name) && !out.iter().any(|x| x == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// `invocation_counts` over the methods of several classes.
fn classes_counts_params(c: &Ctx, p: &mut Map<String, Value>, classes: Vec<String>) {
    p.remove("function");
    p.insert("classes".into(), json!(classes));
    p.insert("count".into(), json!("calls"));
    excluded_dunders(c.text, p);
    c.located(p);
}

/// `invocation_counts` over the module.
fn module_counts_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx { text, .. } = *c;
    p.remove("function");
    p.insert("module".into(), json!(true));
    p.insert("count".into(), json!("calls"));
    if mentions(
        text,
        &["methods of every class", "all methods", "every method"],
    ) {
        p.insert("methods".into(), json!(true));
    }
    if mentions(text, &["properties"]) {
        p.insert(
            "exclude_decorated".into(),
            json!(["property", "setter", "deleter"]),
        );
    }
    excluded_dunders(text, p);
    c.located(p);
    Ok(())
}

/// Dunder methods are left out of a call-count question's members when a sentence naming
/// them excludes them ("Exclude nested functions, closures, …, `__init__`, dunder methods").
fn excluded_dunders(text: &str, p: &mut Map<String, Value>) {
    let lower = text.to_lowercase();
    let excludes = lower.split(". ").any(|sentence| {
        (sentence.contains("dunder") || sentence.contains("magic method"))
            && ["exclud", "not count", "ignor", "leave out"]
                .iter()
                .any(|w| sentence.contains(w))
    });
    if excludes {
        p.insert("exclude_dunder".into(), json!(true));
    }
}

/// `covered_functions`: the tracked functions.
fn covered_functions_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx { q, ev, .. } = *c;
    p.remove("function");
    let fs = tracked(q, ev);
    if fs.is_empty() {
        return Err("the question lists no tracked functions".into());
    }
    p.insert("functions".into(), json!(fs));
    c.located(p);
    Ok(())
}

/// `line_counts`: the range, the line mode, the invocation.
fn line_counts_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        text, invocation, ..
    } = *c;
    match line_range(text) {
        Some((from, to)) => {
            p.insert("from".into(), json!(from));
            p.insert("to".into(), json!(to));
        }
        // "from the first AST body statement (the docstring) through the function's
        // `end_lineno`": line_counts' own `body` range
        None if mentions(
            text,
            &[
                "first ast body statement",
                "function body",
                "the body of",
                "body scope",
            ],
        ) => {}
        None => return Err("the question names no line range".into()),
    }
    if mentions(text, &["innermost enclosing"])
        || mentions(text, &["statement begins"]) && !raw_lines(text)
    {
        // "attribute an event on a continuation line to ... where its innermost
        // enclosing statement begins"
        p.insert("line_mode".into(), json!("statement"));
    }
    if !mentions(
        text,
        &["every invocation", "all invocations", "across every"],
    ) {
        if let Some(n) = invocation {
            p.insert("invocation".into(), json!(n));
        }
    }
    Ok(())
}

/// `predicate_report`: the candidates, flattened for their one-predicate shape.
fn predicate_params(
    c: &Ctx,
    p: &mut Map<String, Value>,
    answer: &mut Answer,
) -> Result<(), String> {
    let Ctx { q, key, .. } = *c;
    let (exprs, labels): (Vec<String>, Vec<String>) = labelled_predicates(q)?
        .into_iter()
        .map(|(p, text)| (p.expr, text))
        .unzip();
    if key != "invariant_report" {
        // their one-predicate shape: the report's only item, flattened
        if exprs.len() != 1 {
            return Err("the question does not name exactly one candidate predicate".into());
        }
        for (to, from) in [
            (
                "/is_invariant_always_held",
                "/invariant_report/0/held_always",
            ),
            (
                "/total_iterations_observed",
                "/invariant_report/0/observations",
            ),
            (
                "/violating_iteration_count",
                "/invariant_report/0/violations",
            ),
        ] {
            answer.insert(to.into(), from.into());
        }
    }
    if exprs != labels {
        // a candidate given in prose is reported in the question's words
        p.insert("labels".into(), json!(labels));
    }
    p.insert("predicates".into(), json!(exprs));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An eval.sh and questions in their style, written for these tests.
    fn eval(func: &str) -> EvalSh {
        let text = format!(
            "ROOT_DIR=\"${{1:-/testbed}}\"\nTEST_ID=\"pkg_qa/x/files/testcase.py::T::test_a\"\n\
             export TRACE_ON=\"1\"\nexport TRACE_FILE=\"src/pkg/mod.py\"\nexport TRACE_FUNC=\"{func}\"\n\
             pytest -rA -s \"$TEST_ID\"\npython pkg_qa/x/files/parser.py --trace-log L --out O\n"
        );
        crate::evalsh::parse(&text).unwrap()
    }

    /// The predicates a question about `func` names (they must parse).
    fn preds(func: &str, text: &str, template: &Value) -> Vec<flux_trace::config::Predicate> {
        let e = eval(func);
        predicates(&Question {
            eval: &e,
            text,
            template,
            parser: None,
        })
        .unwrap()
    }

    fn map(func: &str, text: &str, template: Value) -> Result<ExtractorSpec, String> {
        native_extractor(&Question {
            eval: &eval(func),
            text,
            template: &template,
            parser: None,
        })
    }

    #[test]
    fn a_loop_question_maps_to_loop_iterations_of_the_nth_invocation() {
        let q = "During that test run, consider the second invocation of `pkg.mod.C.run` in \
                 `src/pkg/mod.py`. How many iterations does the `for` loop whose header begins at \
                 line 40 execute? Iteration N is the Nth time line 41 executes.";
        let x = map("C.run", q, json!({"loop_iteration_count": "int"})).unwrap();
        assert_eq!(x.name, "loop_iterations");
        assert_eq!(x.params["function"], "C.run");
        assert_eq!(x.params["invocation"], 2);
        assert_eq!(x.params["header"], 40);
        assert_eq!(x.params["count"], "body_line");
        assert_eq!(x.params["file"], "src/pkg/mod.py");
    }

    #[test]
    fn their_definitions_choose_the_extractors_options() {
        let q = "Consider `pkg.mod.f`. A loop activation is one complete execution of the `for` \
                 statement whose header begins on line 12. Report the maximum and minimum.";
        let t = json!({"max_iterations": "int", "min_iterations": "int"});
        let x = map("f", q, t).unwrap();
        assert_eq!(
            (x.name.as_str(), &x.params["per"]),
            ("loop_stats", &json!("entry"))
        );
        let q = "What are the values of the local variables `b` and `a` immediately after the \
                 statement beginning on line 9 has executed for the 3rd time during the test run? \
                 Count completed executions globally across all invocations of `pkg.mod.f`.";
        let t = json!({"observed_state": [{"value": "str", "variable": "str"}]});
        let x = map("f", q, t).unwrap();
        assert_eq!(x.name, "state_at");
        assert_eq!(x.params["across_invocations"], true);
        assert_eq!(x.params["occurrence"], 3);
        assert_eq!(x.params["line"], 9);
        assert_eq!(x.params["variables"], json!(["a", "b"]));
        let q = "Consider `pkg.mod.f`: the ordered history of local variable `acc` immediately \
                 after line 7 has executed for the first time during each invocation.";
        let x = map("f", q, json!({"temporal_value_history": ["str"]})).unwrap();
        let q = "For all invocations of `pkg.mod.f`, what observed def-use pairs occur for \
                 exactly these outer-function locals: `element`, `feed_uri`? Only accesses of \
                 its frame count; its nested `check` function is excluded.";
        let du = map(
            "f",
            q,
            json!({"observed_def_use_pairs": [{"variable": "str"}]}),
        )
        .unwrap();
        assert_eq!(du.params["variables"], json!(["element", "feed_uri"]));
        assert_eq!(x.name, "value_history");
        assert_eq!(
            x.answer["/temporal_value_history/*"],
            "/value_history/*/value"
        );
        assert!(x.params.get("invocation").is_none(), "every invocation");
    }

    #[test]
    fn what_cannot_be_mapped_says_why() {
        let e = map("f", "Consider `pkg.mod.f`.", json!({"monotonicity": "str"})).unwrap_err();
        assert!(
            e.contains("no flux extractor is mapped for the answer shape `monotonicity`"),
            "{e}"
        );
        let e = map(
            "g",
            "Consider `pkg.mod.f`.",
            json!({"loop_iteration_count": "int"}),
        )
        .unwrap_err();
        assert!(e.contains("TRACE_FUNC matches"), "{e}");
        let e = map(
            "f",
            "Consider `pkg.mod.f` and its loop.",
            json!({"loop_iteration_count": "int"}),
        )
        .unwrap_err();
        assert!(e.contains("no loop header"), "{e}");
    }

    #[test]
    fn an_invariant_question_maps_to_predicate_report_with_its_observation_points() {
        // Both of their ways of listing candidates, written for this test.
        let q = "For the exact target frame `pkg.mod.C.run` in `src/pkg/mod.py`, evaluate the \
                 following candidate predicates verbatim:\n\n- `bool(args) and opts.list` \u{2014} \
                 a `line` event at line 91.\n- `len(x) % 4 != 0` \u{2014} a `line` event at line \
                 95.\n- `len(y) > 2` \u{2014} a `line` event at line 95.\n\nLine numbers are \
                 absolute. Return exactly `{\"invariant_report\": [...]}`.";
        let t = json!({"invariant_report": [{"held_always": "bool", "observations": "int",
            "predicate": "str", "violations": "int"}]});
        let x = map("C.run", q, t.clone()).unwrap();
        assert_eq!(x.name, "predicate_report");
        assert_eq!(
            x.params["predicates"],
            json!(["bool(args) and opts.list", "len(x) % 4 != 0", "len(y) > 2"])
        );
        let ps = preds("C.run", q, &t);
        assert_eq!(ps[0].lines, vec![91]);
        assert_eq!(ps[2].lines, vec![95]);
        assert_eq!(ps[0].function.as_deref(), Some("C.run"));
        let q = "Aggregate over all direct invocations of `pkg.mod.f` in `src/pkg/mod.py`. \
                 Evaluate these candidate predicates verbatim at their respective observation \
                 lines: `bool(attrs)` at line 67; `host.startswith('.')` at line 63; \
                 `req_host is None` at line 52. Each line number is absolute.";
        let ps = preds("f", q, &t);
        let got: Vec<(&str, u32)> = ps.iter().map(|p| (p.expr.as_str(), p.lines[0])).collect();
        assert_eq!(
            got,
            vec![
                ("bool(attrs)", 67),
                ("host.startswith('.')", 63),
                ("req_host is None", 52)
            ]
        );
        let e = map("f", "Consider `pkg.mod.f`: does `x` hold?", t).unwrap_err();
        assert!(e.contains("no candidate predicates"), "{e}");
    }

    #[test]
    fn a_line_count_question_maps_to_line_counts_over_its_range() {
        let q = "Aggregate the results over all invocations made by all of those methods. For \
                 `pkg.mod.C.f` in `src/pkg/mod.py`, report the total execution count for every \
                 physical source line in its body, namely every absolute 1-based line from 365 \
                 through 389 inclusive. For a multi-line statement, attribute an event on a \
                 continuation line to the line where its innermost enclosing Python AST \
                 statement begins.";
        let t = json!({"line_execution_counts": [{"count": "int", "line": "int"}]});
        let x = map("C.f", q, t.clone()).unwrap();
        assert_eq!(x.name, "line_counts");
        assert_eq!(
            (&x.params["from"], &x.params["to"]),
            (&json!(365), &json!(389))
        );
        assert_eq!(x.params["line_mode"], "statement");
        assert!(x.params.get("invocation").is_none());
        assert_eq!(line_range("from line 7 through line 9"), Some((7, 9)));
        assert_eq!(line_range("lines 12 to 30."), Some((12, 30)));
        assert_eq!(line_range("the line where it begins"), None);
        let e = map("C.f", "Report counts for `pkg.mod.C.f`.", t).unwrap_err();
        assert!(e.contains("no line range"), "{e}");
    }

    #[test]
    fn a_one_predicate_question_maps_to_the_first_item_of_predicate_report() {
        let q = "For all loop iterations observed across every invocation of `pkg.mod.f` in \
                 `src/pkg/mod.py`, did the candidate predicate\n`(len(current.name) + level) % 13 \
                 != 0`\nhold at every iteration?\n\nAn iteration is one execution, in the target \
                 function's own frame, of the `if any(...)` statement whose expression begins at \
                 line 39.";
        let t = json!({"is_invariant_always_held": "bool", "total_iterations_observed": "int",
                       "violating_iteration_count": "int"});
        let x = map("f", q, t.clone()).unwrap();
        assert_eq!(x.name, "predicate_report");
        assert_eq!(
            x.params["predicates"],
            json!(["(len(current.name) + level) % 13 != 0"])
        );
        assert_eq!(
            x.answer["/violating_iteration_count"],
            "/invariant_report/0/violations"
        );
        let ps = preds("f", q, &t);
        assert_eq!(ps[0].lines, vec![39]);
        // No observation line: not mapped.
        let q = "Consider `pkg.mod.f`. Candidate predicate (verbatim):\n    a in b\nHeld means...";
        assert!(map("f", q, t).is_err());
    }

    #[test]
    fn class_scoped_call_counts_and_body_ranges_are_read() {
        let q =
            "The primary target is `pkg.mod.P.fresh`, defined in `src/pkg/mod.py`. The tracked \
                 scope is every synchronous or asynchronous function defined directly in the body \
                 of class `P` in that file.";
        let t = json!({"invocation_counts": [{"count": "int", "file": "str", "func": "str"}]});
        let x = map("pkg.mod.P", q, t).unwrap();
        assert_eq!(x.params["class"], "P");
        assert!(x.params.get("module").is_none());
        let q = "For `pkg.mod.f`, report the line events for every physical line in the function \
                 body: the inclusive range from the first AST body statement (the docstring) \
                 through the function's AST `end_lineno`.";
        let t = json!({"line_execution_counts": [{"count": "int", "line": "int"}]});
        let x = map("f", q, t).unwrap();
        assert!(x.params.get("from").is_none() && x.params.get("line_mode").is_none());
    }

    #[test]
    fn ordinals_lines_and_modules_are_read_from_prose() {
        assert_eq!(ordinal_of("the 21st invocation?", "invocation"), Some(21));
        assert_eq!(
            ordinal_of("consider the second invocation of", "invocation"),
            Some(2)
        );
        assert_eq!(ordinal_of("For invocation 1 only", "invocation"), Some(1));
        assert_eq!(
            ordinal_of("for **invocation 7**: the", "invocation"),
            Some(7)
        );
        assert_eq!(ordinal_of("every invocation", "invocation"), None);
        assert_eq!(
            line_after(
                "the `for` loop whose header begins at line 1039 execute",
                "header",
                60
            ),
            Some(1039)
        );
        assert_eq!(line_after("no header here", "header", 60), None);
        assert_eq!(
            module_of("src/jinja2/ext.py").as_deref(),
            Some("jinja2.ext")
        );
        assert_eq!(
            module_of("fastapi/_compat/__init__.py").as_deref(),
            Some("fastapi._compat")
        );
        assert_eq!(
            shape_key(&json!({"min_iterations": "int", "max_iterations": "int"})),
            "max_iterations+min_iterations"
        );
    }
}
