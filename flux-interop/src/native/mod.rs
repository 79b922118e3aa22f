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
//!   per invocation with the dead definitions for `invocation_def_use_pairs` +
//!   `invocation_dead_defs` + `tracked_variables`;
//! - `caught_exception_kinds` → `caught_types`; `exception_type_counts` → `exception_counts`;
//!   `exception_events` → `exception_events` (each event of the target's frames, `handled`
//!   when its activation goes on to a later line), and grouped per invocation for their
//!   `invocations` of exception records;
//! - `function_call_order`, `callee_sequence` → `call_sequence` of the tracked functions; `invocation_counts` →
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

mod params;
mod predicates;
mod prose;
use params::*;
pub use predicates::{labelled_predicates, predicates, prose_predicate};
pub(crate) use prose::is_dotted_name;
use prose::*;

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
    ("callee_sequence", "call_sequence"),
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
    ("exception_events", "exception_events"),
    ("invocations", "exception_events"),
    (
        "invocation_dead_defs+invocation_def_use_pairs+tracked_variables",
        "def_use_pairs",
    ),
    (
        "dead_defs+observed_def_use_pairs+tracked_variables",
        "def_use_pairs",
    ),
    ("callers+invocation_count", "callers"),
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
    // a `src/` layout's module may be named with its directory (`src.pkg.mod.C.f`)
    let src_module = format!("src.{module}");
    names
        .iter()
        .filter_map(|n| {
            n.strip_prefix(src_module.as_str())
                .or_else(|| n.strip_prefix(module))?
                .strip_prefix('.')
        })
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
    let lower = text.to_ascii_lowercase().replace('`', "");
    let full = format!("{module}.{qual}").to_ascii_lowercase();
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
    let mut modules: Vec<String> = files(q).iter().filter_map(|f| module_of(f)).collect();
    // the test file's own functions, in the module pytest imports it as (`testcase`)
    if let Some(stem) = q.eval.test_file().strip_suffix(".py") {
        modules.push(stem.to_string());
    }
    let lower = q.text.to_ascii_lowercase();
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
        "these variables",
        "the local variables",
        "local variable",
        "loop variable",
        "variable names",
        "local names",
        "binding for",
        "the local ",
    ];
    let lower = q.text.to_ascii_lowercase();
    for ph in PHRASES {
        let Some(i) = lower.find(ph) else { continue };
        let rest = &q.text[i + ph.len()..];
        let end = sentence_end(rest);
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

/// Where the sentence that starts `rest` ends: its first `.` or `?` before a space or line
/// break that is not a numbered list item's (`… time: 1. `a` 2. `b``).
fn sentence_end(rest: &str) -> usize {
    let b = rest.as_bytes();
    (0..b.len())
        .find(|&i| {
            let stop = matches!(b[i], b'.' | b'?')
                && b.get(i + 1).is_none_or(|c| *c == b' ' || *c == b'\n');
            if !stop || b[i] == b'?' {
                return stop;
            }
            let digits = b[..i]
                .iter()
                .rev()
                .take_while(|c| c.is_ascii_digit())
                .count();
            let before = i.checked_sub(digits + 1).map(|j| b[j]);
            !((1..=2).contains(&digits)
                && before.is_none_or(|c| c.is_ascii_whitespace() || c == b':'))
        })
        .unwrap_or(rest.len())
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
    /// Where sources are: the root and the modules' root; modules named as the code runs
    /// them (`__name__`), as their tracer names frames (`testcase.ProbeDict.items` for a
    /// method of the test file pytest imports as `testcase`).
    fn located(&self, p: &mut Map<String, Value>) {
        p.insert("root".into(), json!(self.q.eval.root));
        p.insert("module_root".into(), json!(self.t.module_root));
        p.insert("module_names".into(), json!("runtime"));
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
        "def_use_pairs" if key.contains("invocation_") || key.contains("dead_defs") => {
            def_use_per_invocation(&c, &mut p, &mut answer)?
        }
        "def_use_pairs" => def_use_params(&c, &mut p)?,
        "caught_types" => caught_params(&c, &mut p),
        "exception_counts" => exception_counts_params(&c, &mut p)?,
        "exception_info" => exception_info_params(&c, &mut p, &mut answer)?,
        "exception_events" if key == "invocations" => {
            exceptions_per_invocation(&c, &mut p, &mut answer)?
        }
        "exception_events" => exception_events_params(&c, &mut p),
        "call_sequence" => call_params(&c, &mut p, &mut answer)?,
        "invocation_counts" if class_bodies(text, &ev).len() > 1 => {
            classes_counts_params(&c, &mut p, class_bodies(text, &ev))
        }
        "invocation_counts" if class_scope(text).is_some() => class_counts_params(&c, &mut p)?,
        "invocation_counts" => module_counts_params(&c, &mut p)?,
        "covered_functions" => covered_functions_params(&c, &mut p)?,
        "callers" => {
            // their tracer's `call` events: a generator's resumptions are calls too
            c.located(&mut p);
            p.insert("count".into(), json!("calls"));
        }
        "line_counts" => line_counts_params(&c, &mut p)?,
        "predicate_report" => predicate_params(&c, &mut p, &mut answer)?,
        _ => unreachable!("every rule's extractor is handled"),
    }
    // The target is the `function` of the extractors that take one (`raising_tests` takes it
    // as what exceptions escape from).
    let takes_function = flux_extract::extractors()
        .iter()
        .find(|e| e.name == name)
        .is_some_and(|e| e.params.iter().any(|d| d.name == "function"));
    if !takes_function {
        p.remove("function");
    }
    Ok(ExtractorSpec {
        name: name.to_string(),
        params: p,
        answer,
    })
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
