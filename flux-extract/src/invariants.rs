//! Invariants: over observed values, S7 (`invariants_in_test`) and M7
//! (`invariants_across_tests`); over predicates the hook evaluates in the traced process on live
//! values (`[tracing] predicates`), S7/M7 (`predicate_report`).
use crate::common::{all_invocations, in_test_order, Ix};
use crate::{ExtractError, Params};
use flux_trace::query::Invocation;
use flux_trace::{Kind, TraceIndex, Value as Observed};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) const INVARIANTS_IN_TEST: &str = "\
The observations of `variable` are its values right after each execution of line `line` in \
every invocation of `function` (restricted to `test` if given; same definition as `state_at`; \
executions where it is unbound are skipped), in trace order. Over them: `observations` = their \
number; `types` = the distinct type names, sorted; `single_type` = exactly one type; \
`non_negative` = every value is an int or float whose repr parses as a number >= 0; `constant` \
= every repr is equal; `monotonic` = \"constant\" if constant, else \"non_decreasing\" / \
\"non_increasing\" if every value is an int or float and each is >= / <= the previous, else \
\"none\". Answer: {\"invariants\": {...}}.";

pub(crate) const INVARIANTS_ACROSS_TESTS: &str = "\
As `invariants_in_test`, over the observations of every test (observations outside tests are \
ignored). `observations`, `types`, `single_type`, `non_negative` and `constant` are computed over \
all observations together; `monotonic` is decided per test and combined: \"constant\" if every \
test's sequence is constant, \"non_decreasing\" if each is constant or non_decreasing, likewise \
\"non_increasing\", else \"none\". `tests` lists the tests with at least one observation, in \
start order. Answer: {\"invariants\": {...}, \"tests\": [...]}.";

/// Observed values of `variable` after each execution of `line`, with their test.
fn observations(
    ix: &Ix<'_>,
    invs: &[Invocation],
    line: u32,
    variable: &str,
) -> Result<Vec<(String, Observed)>, ExtractError> {
    let mut out: Vec<(usize, String, Observed)> = Vec::new();
    for inv in invs {
        // One pass over the frame: the variable's current value, and the `line` event at
        // `line` (if any) whose effects the next `line`/`return` event shows.
        let mut current: Option<&Observed> = None;
        let mut waiting: Option<usize> = None;
        for &i in &inv.events {
            let e = ix.event(i);
            if let Some((_, v)) = e.detail().locals.iter().rev().find(|(n, _)| n == variable) {
                current = Some(v);
            }
            if matches!(e.ev, Kind::Line | Kind::Return) {
                if let (Some(at), Some(v)) = (waiting.take(), current) {
                    out.push((at, ix.event(at).test.to_string(), v.clone()));
                }
                if e.ev == Kind::Line && e.line == line {
                    waiting = Some(i);
                }
            }
        }
        if let Some(at) = waiting {
            return Err(ExtractError::NotObserved(format!(
                "no event of the frame follows the execution of line {} (the trace ends)",
                ix.event(at).line
            )));
        }
    }
    // Trace order across invocations (a generator's lines interleave with other frames).
    out.sort_by_key(|(i, _, _)| *i);
    Ok(out.into_iter().map(|(_, t, v)| (t, v)).collect())
}

fn number(v: &Observed) -> Option<f64> {
    if v.ty == "int" || v.ty == "float" {
        v.repr.parse::<f64>().ok().filter(|x| !x.is_nan())
    } else {
        None
    }
}

fn monotonic(vals: &[&Observed]) -> &'static str {
    if vals.windows(2).all(|w| w[0].repr == w[1].repr) {
        return "constant";
    }
    let nums: Option<Vec<f64>> = vals.iter().map(|v| number(v)).collect();
    let Some(nums) = nums else {
        return "none";
    };
    if nums.windows(2).all(|w| w[1] >= w[0]) {
        "non_decreasing"
    } else if nums.windows(2).all(|w| w[1] <= w[0]) {
        "non_increasing"
    } else {
        "none"
    }
}

fn record(vals: &[&Observed], monotonic: &str) -> Value {
    let mut types: Vec<&str> = vals.iter().map(|v| v.ty.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    json!({
        "observations": vals.len(),
        "single_type": types.len() == 1,
        "types": types,
        "non_negative": vals.iter().all(|v| number(v).is_some_and(|x| x >= 0.0)),
        "constant": vals.windows(2).all(|w| w[0].repr == w[1].repr),
        "monotonic": monotonic,
    })
}

fn inv_params(p: &Params) -> Result<(&str, u32, &str), ExtractError> {
    Ok((p.str("function")?, p.line("line")?, p.str("variable")?))
}

pub(crate) fn invariants_in_test(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let (function, line, variable) = inv_params(p)?;
    let invs = all_invocations(ix, p, function)?;
    let obs = observations(ix, &invs, line, variable)?;
    if obs.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "`{variable}` is never bound after line {line} of `{function}`"
        )));
    }
    let vals: Vec<&Observed> = obs.iter().map(|(_, v)| v).collect();
    Ok(json!({ "invariants": record(&vals, monotonic(&vals)) }))
}

pub(crate) fn invariants_across_tests(
    ix: &TraceIndex<'_>,
    p: &Params,
) -> Result<Value, ExtractError> {
    let (function, line, variable) = inv_params(p)?;
    let invs = all_invocations(ix, p, function)?;
    let obs = observations(ix, &invs, line, variable)?;
    let mut tests = Vec::new();
    let mut all: Vec<&Observed> = Vec::new();
    let mut kinds: Vec<&str> = Vec::new();
    for test in ix.test_ids() {
        let vals: Vec<&Observed> = obs
            .iter()
            .filter(|(tt, _)| *tt == test)
            .map(|(_, v)| v)
            .collect();
        if vals.is_empty() {
            continue;
        }
        kinds.push(monotonic(&vals));
        all.extend(&vals);
        tests.push(test);
    }
    if all.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "`{variable}` is never bound after line {line} of `{function}` inside a test"
        )));
    }
    let combined = if kinds.iter().all(|k| *k == "constant") {
        "constant"
    } else if kinds
        .iter()
        .all(|k| matches!(*k, "constant" | "non_decreasing"))
    {
        "non_decreasing"
    } else if kinds
        .iter()
        .all(|k| matches!(*k, "constant" | "non_increasing"))
    {
        "non_increasing"
    } else {
        "none"
    };
    Ok(json!({ "invariants": record(&all, combined), "tests": tests }))
}

pub(crate) const PREDICATE_REPORT: &str = "\
Invariant predicates evaluated by the hook in the traced process, on the live locals of a \
targeted frame, each time a `line` event of a chosen line is about to execute (`[tracing] \
predicates`: `{expr, lines}`; the hook records a `check` event per evaluation: its truth value, \
or the exception the expression raised). For each predicate of `predicates` (default: every \
predicate the trace evaluated in `function`), over the evaluations in frames of `function` \
(`test`, `file` filter; `lines` keeps only evaluations at those lines): `observations` = \
their number, `violations` = how many were false, `errors` = how many raised, `held_always` = \
at least one observation and neither violations nor errors, `violating_tests` = the tests with \
a violation or error, in start order. With `labels` (one per predicate of `predicates`, in its \
order) an item's `predicate` is its label. Items are sorted by `predicate`. Answer: \
{\"invariant_report\": [{\"predicate\", \"observations\", \"violations\", \"errors\", \
\"held_always\", \"violating_tests\"}, ...]}.";

pub(crate) fn predicate_report(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = crate::common::invocations(ix, p, function)?;
    let lines = p.opt_line_list("lines")?;
    #[derive(Default)]
    struct Tally {
        observations: usize,
        violations: usize,
        errors: usize,
        violating: BTreeSet<String>,
    }
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    if let Some(ps) = p.opt_str_list("predicates")? {
        for pr in ps {
            tally.entry(pr).or_default();
        }
    }
    let fixed = p.contains("predicates");
    for inv in &invs {
        for &i in &inv.events {
            let e = ix.event(i);
            if e.ev != Kind::Check || lines.as_ref().is_some_and(|ls| !ls.contains(&e.line)) {
                continue;
            }
            let t = match tally.get_mut(e.detail().predicate.as_str()) {
                Some(t) => t,
                None if fixed => continue,
                None => tally.entry(e.detail().predicate.to_string()).or_default(),
            };
            t.observations += 1;
            let held = e.detail().value.as_ref().map(|v| v.repr.as_str()) == Some("True");
            if e.detail().exc.is_some() {
                t.errors += 1;
            } else if !held {
                t.violations += 1;
            }
            if !held && !e.test.is_empty() {
                t.violating.insert(e.test.to_string());
            }
        }
    }
    if tally.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "the trace has no predicate evaluations in `{function}` (give `[tracing] \
             predicates` and `predicates`)"
        )));
    }
    let labels: BTreeMap<String, String> = match p.opt_str_list("labels")? {
        Some(ls) => {
            let ps = p.opt_str_list("predicates")?.unwrap_or_default();
            if ls.len() != ps.len() {
                return Err(ExtractError::BadParamType {
                    param: "labels".into(),
                    expected: format!("one label per predicate of `predicates` ({})", ps.len()),
                    got: format!("{} labels", ls.len()),
                });
            }
            ps.into_iter().zip(ls).collect()
        }
        None => BTreeMap::new(),
    };
    let order = ix.test_ids();
    let mut tally: Vec<(String, Tally)> = tally
        .into_iter()
        .map(|(pr, t)| (labels.get(&pr).cloned().unwrap_or(pr), t))
        .collect();
    tally.sort_by(|a, b| a.0.cmp(&b.0));
    let report: Vec<Value> = tally
        .into_iter()
        .map(|(pr, t)| {
            json!({
                "predicate": pr,
                "observations": t.observations,
                "violations": t.violations,
                "errors": t.errors,
                "held_always": t.observations > 0 && t.violations == 0 && t.errors == 0,
                "violating_tests": in_test_order(&order, &t.violating),
            })
        })
        .collect();
    Ok(json!({ "invariant_report": report }))
}

#[cfg(test)]
mod tests;
