//! Program state: S3 (`state_at`, `unique_values`, `value_history`, `state_snapshots`) and M3
//! (`state_across_tests`).
use crate::common::{all_invocations, facts_of, line_positions, pick_invocation, Ix};
use crate::{ExtractError, Params};
use flux_trace::query::Invocation;
use flux_trace::{Kind, TraceIndex, Value as Observed};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub(crate) const STATE_AT: &str = "\
The values of local variables right after line `line` executes for the Mth time (`occurrence`, \
default 1) in the Nth invocation of `function`: the frame's locals (the call's arguments updated \
by every change the frame's later events report) at the frame's next `line` or `return` event \
after that `line` event; with `at = \"before\"`, at that `line` event itself (the state just \
before the line runs, as SWE-Flux's parsers read it). Values are the tracer's bounded `repr` \
strings. `variables` names them in answer order (an error if one is unbound then); without it \
every bound local is reported, sorted by name. With `across_invocations = true` the Mth \
execution is counted over every selected invocation of `function` together, in trace order \
(SWE-Flux's \"the Nth time the statement executes during the test\"; `invocation` is then \
not given). With `line_mode = \"statement\"` an execution is one run of the statement that \
starts at `line` (static facts; Python 3.11 reports a multi-line statement's first line again \
when it completes), read after its last line event. Answer: {\"observed_state\": [{\"variable\": V, \"value\": REPR}, ...]} \
(`render = \"str\"`: what `str()` gives, where the repr says: a string's text; any other \
object is an error).";

pub(crate) const STATE_ACROSS_TESTS: &str = "\
For every test in which line `line` of `function` executes at least `occurrence` (default 1) \
times, the value (repr) of `variable` right after that execution (same definition as \
`state_at`, `at` included; executions are counted across the test's invocations in order). \
Tests are in start order; tests that do not reach the line are omitted. Answer: \
{\"observed_states\": [{\"test\": T, \"value\": REPR}, ...]}.";

const OBSERVATIONS: &str = "\
Observations are taken in every selected invocation of `function` (all of them, or the Nth with \
`invocation`; `test`, `file` filter), in trace order. `event` says where: `line` (default) at \
each `line` event of the frame at one of `lines` (every `line` event of the frame when `lines` \
is absent), reading the state `at` = `before` (default: the state that event shows, before the \
line runs) or `after` (at the frame's next `line`/`return` event); `return` at each normal \
return of the frame (neither an unwind nor a suspension), optionally only returns at `lines`, \
reading the final state; `change` at every event of the frame that reports one of the variables \
changed; `line_and_return` at both the `line` events and the normal returns (at `lines`, when \
given: SWE-Flux's \"each line event at L1 and each return at L2\"). With `line_mode = \
\"statement\"` (static facts) a line event is one of its statement's (the span holding it, \
named by its first line, which `lines` then name): one execution of a statement is one \
observation however many line events it reports (3.11 reports a multi-line statement's lines \
and its first line again when it completes), and `at = \"after\"` reads the state at the \
frame's first event outside it (SWE-Flux's \"after each execution of the statement that \
begins on line N and ends on line M\"). `occurrence` keeps only the Mth observation of each invocation. The value observed is \
the repr of `variable`, or with `variables` the repr of the tuple of their reprs \
(`(a, b)`, `(a,)` for one); an observation where one is unbound is skipped.";

pub(crate) const UNIQUE_VALUES: &str = "\
The distinct values observed (the observation convention), sorted in Unicode \
code-point order (Python's sorted() of the strings), or in order of first observation with \
`order = \"first_seen\"`. Answer: {\"unique_values\": [REPR, ...], \"observations\": N}.";

pub(crate) const VALUE_HISTORY: &str = "\
The values observed (the observation convention), in order, one entry per observation (with \
`dedupe_consecutive`, an entry \
equal to the previous one of the same invocation is dropped); `step` numbers the entries from 1. \
Answer: {\"value_history\": [{\"step\": K, \"value\": REPR, \"invocation\": N, \"test\": T, \
\"line\": L}, ...]}.";

pub(crate) const STATE_SNAPSHOTS: &str = "\
At each observation (the observation convention), the state of \
`variables` (every bound local when absent; unbound ones are left out). `occurrences` keeps the \
observations of each invocation at those places (from 1; `occurrence` keeps one); \
`point_label` names each observation's program point, `{line}`, `{nth}` (its place in its \
invocation) and `{invocation}` filled in (SWE-Flux's `line_58_exec_3`: `line_{line}_exec_{nth}`), \
and rows by variable then come in the points' order. Answer: \
{\"state_snapshots\": [{\"line\": L, \"invocation\": N, \"test\": T, \"state\": {NAME: REPR}, \
\"variables\": [{\"variable\", \"value\"}]}, ...]}.";

/// The definition of an observation, for `flux extractors`.
pub(crate) fn observations_doc() -> &'static str {
    OBSERVATIONS
}

/// The frame's locals after the `line` event at position `k` of the invocation.
fn state_after(
    ix: &Ix<'_>,
    inv: &Invocation,
    k: usize,
) -> Result<BTreeMap<String, Observed>, ExtractError> {
    let j = inv.effects_of(ix.trace, k).ok_or_else(|| {
        ExtractError::NotObserved(format!(
            "no event of the frame follows the execution of line {} (the trace ends)",
            ix.event(inv.events[k]).line
        ))
    })?;
    Ok(inv.locals_through(ix.trace, j))
}

/// The frame's locals at the event at position `k` (`at = "before"`) or after it.
fn state_for(
    ix: &Ix<'_>,
    inv: &Invocation,
    k: usize,
    before: bool,
) -> Result<BTreeMap<String, Observed>, ExtractError> {
    if before {
        Ok(inv.locals_through(ix.trace, k))
    } else {
        state_after(ix, inv, k)
    }
}

fn at_before(p: &Params) -> Result<bool, ExtractError> {
    Ok(p.choice_or("at", &["after", "before"], "after")? == "before")
}

pub(crate) fn state_at(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let line = p.line("line")?;
    let occ = p.index_or("occurrence", 1)?;
    let before = at_before(p)?;
    let by_statement =
        p.choice_or("line_mode", &["reported", "statement"], "reported")? == "statement";
    // The executions of the line: its `line` events, or with `line_mode = "statement"` one per
    // execution of the statement that starts there (3.11 reports a multi-line statement's
    // first line again when it completes), observed at its last line event.
    let line_positions =
        |ix: &Ix<'_>, inv: &Invocation, line: u32| -> Result<Vec<usize>, ExtractError> {
            if !by_statement {
                return Ok(line_positions(ix, inv, line));
            }
            let f = facts_of(ix, inv, "`line_mode = \"statement\"`")?;
            let mut out: Vec<usize> = Vec::new();
            let mut inside = false;
            for (k, &i) in inv.events.iter().enumerate() {
                let e = ix.event(i);
                if e.ev != Kind::Line {
                    continue;
                }
                let here = f.statement_start(e.line) == line;
                if here && inside {
                    *out.last_mut().expect("inside an execution") = k;
                } else if here {
                    out.push(k);
                }
                inside = here;
            }
            Ok(out)
        };
    let (n, inv, k) = if p.bool_or("across_invocations", false)? {
        // Every execution of the line in every selected invocation, in trace order.
        // (event, position in `invs`, position in its events)
        let mut invs = all_invocations(ix, p, function)?;
        let mut all: Vec<(usize, usize, usize)> = Vec::new();
        for (j, inv) in invs.iter().enumerate() {
            for k in line_positions(ix, inv, line)? {
                all.push((inv.events[k], j, k));
            }
        }
        all.sort_by_key(|x| x.0);
        let count = all.len();
        let &(_, j, k) = all.get(occ - 1).ok_or_else(|| {
            ExtractError::NotObserved(format!(
                "line {line} executes {count} time(s) over the invocations of `{function}`; \
                 occurrence {occ} was asked for"
            ))
        })?;
        (j + 1, invs.swap_remove(j), k)
    } else {
        let (n, inv) = pick_invocation(ix, p, function)?;
        let positions = line_positions(ix, &inv, line)?;
        let &k = positions.get(occ - 1).ok_or_else(|| {
            ExtractError::NotObserved(format!(
                "line {line} executes {} time(s) in invocation {n} of `{function}`; occurrence {occ} \
                 was asked for",
                positions.len()
            ))
        })?;
        (n, inv, k)
    };
    let state = state_for(ix, &inv, k, before)?;
    let names = match p.opt_str_list("variables")? {
        Some(v) => v,
        None => state.keys().cloned().collect(),
    };
    let mut out = Vec::new();
    for name in names {
        let v = state.get(&name).ok_or_else(|| {
            ExtractError::NotObserved(format!(
                "variable `{name}` is not bound {} line {line} (occurrence {occ}) of \
                 invocation {n} of `{function}`",
                if before { "at" } else { "after" }
            ))
        })?;
        let value = crate::render::value(p, &v.repr)?;
        out.push(json!({"variable": name, "value": value}));
    }
    Ok(json!({ "observed_state": out }))
}

pub(crate) fn state_across_tests(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let line = p.line("line")?;
    let variable = p.str("variable")?;
    let occ = p.index_or("occurrence", 1)?;
    let before = at_before(p)?;
    let invs = all_invocations(ix, p, function)?;
    // (invocation index, position) of each execution of the line, per test in order.
    let mut per_test: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    for (x, inv) in invs.iter().enumerate() {
        for k in line_positions(ix, inv, line) {
            let test = ix.event(inv.events[k]).test.as_str();
            if !test.is_empty() {
                per_test.entry(test).or_default().push((x, k));
            }
        }
    }
    let mut out = Vec::new();
    for test in ix.test_ids() {
        let Some(&(x, k)) = per_test.get(test.as_str()).and_then(|v| v.get(occ - 1)) else {
            continue;
        };
        let state = state_for(ix, &invs[x], k, before)?;
        let v = state.get(variable).ok_or_else(|| {
            ExtractError::NotObserved(format!(
                "variable `{variable}` is not bound {} line {line} (occurrence {occ}) of \
                 `{function}` in test `{test}`",
                if before { "at" } else { "after" }
            ))
        })?;
        out.push(json!({"test": test, "value": v.repr}));
    }
    if out.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "line {line} of `{function}` executes at least {occ} time(s) in no test"
        )));
    }
    Ok(json!({ "observed_states": out }))
}

/// One observation of state (see [`OBSERVATIONS`]).
pub(crate) struct Obs {
    /// Index into the trace of the event it was taken at.
    pub at: usize,
    pub invocation: usize,
    /// Its place among its invocation's observations (from 1).
    pub nth: u64,
    pub test: String,
    pub line: u32,
    pub state: BTreeMap<String, Observed>,
}

/// Where observations are taken.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    Line,
    Return,
    Change,
    LineAndReturn,
}

/// Every observation the parameters define, in trace order (`names`: the variables whose
/// change makes an observation with `event = "change"`).
pub(crate) fn observe(ix: &Ix<'_>, p: &Params, names: &[String]) -> Result<Vec<Obs>, ExtractError> {
    let function = p.str("function")?;
    let invs: Vec<(usize, Invocation)> = if p.contains("invocation") {
        let (n, inv) = pick_invocation(ix, p, function)?;
        vec![(n, inv)]
    } else {
        all_invocations(ix, p, function)?
            .into_iter()
            .enumerate()
            .map(|(k, inv)| (k + 1, inv))
            .collect()
    };
    let at = match p.choice_or(
        "event",
        &["line", "return", "change", "line_and_return"],
        "line",
    )? {
        "return" => Where::Return,
        "change" => Where::Change,
        "line_and_return" => Where::LineAndReturn,
        _ => Where::Line,
    };
    let lines = p.opt_line_list("lines")?;
    let before = p.choice_or("at", &["before", "after"], "before")? == "before";
    let occ = p.opt_pos("occurrence")?;
    let occs = p.opt_line_list("occurrences")?;
    let by_statement =
        p.choice_or("line_mode", &["reported", "statement"], "reported")? == "statement";
    let mut out = Vec::new();
    for (n, inv) in &invs {
        let n = *n;
        // With `line_mode = "statement"`, a line event's statement (its first line), and the
        // statement the frame's previous line event was in: a line event of the same statement
        // continues its execution (3.11 reports a multi-line statement's lines, then its first
        // line again when it completes), so it is neither an observation nor its end.
        let facts = if by_statement && matches!(at, Where::Line | Where::LineAndReturn) {
            Some(facts_of(ix, inv, "`line_mode = \"statement\"`")?)
        } else {
            None
        };
        let mut inside: Option<u32> = None;
        let mut state: BTreeMap<String, Observed> = BTreeMap::new();
        let mut waiting: Option<usize> = None; // a line event whose effects come next
        let mut taken = 0u64;
        let mut push = |at: usize, state: &BTreeMap<String, Observed>, out: &mut Vec<Obs>| {
            taken += 1;
            let kept = occ.is_none_or(|o| o == taken)
                && occs
                    .as_ref()
                    .is_none_or(|os| os.iter().any(|&o| u64::from(o) == taken));
            if kept {
                let e = ix.event(at);
                out.push(Obs {
                    at,
                    invocation: n,
                    nth: taken,
                    test: e.test.to_string(),
                    line: e.line,
                    state: state.clone(),
                });
            }
        };
        for &i in &inv.events {
            let e = ix.event(i);
            let changed = e.detail().locals.iter().any(|(k, _)| names.contains(k));
            for (k, v) in &e.detail().locals {
                state.insert(k.clone(), v.clone());
            }
            let line = facts.map_or(e.line, |f| f.statement_start(e.line));
            if let Some(f) = facts {
                if e.ev == Kind::Line {
                    let start = f.statement_start(e.line);
                    if inside.replace(start) == Some(start) {
                        continue; // the same statement's execution goes on
                    }
                } else if e.ev == Kind::Return {
                    inside = None;
                }
            }
            let at_listed = lines.as_ref().is_none_or(|ls| ls.contains(&line));
            if at == Where::LineAndReturn
                && e.ev == Kind::Return
                && !e.unwind
                && !e.suspended
                && at_listed
            {
                if let Some(w) = waiting.take() {
                    push(w, &state, &mut out);
                }
                push(i, &state, &mut out);
                continue;
            }
            match at {
                Where::Line | Where::LineAndReturn => {
                    if matches!(e.ev, Kind::Line | Kind::Return) {
                        if let Some(w) = waiting.take() {
                            push(w, &state, &mut out);
                        }
                    }
                    if e.ev == Kind::Line && at_listed {
                        if before {
                            push(i, &state, &mut out);
                        } else {
                            waiting = Some(i);
                        }
                    }
                }
                Where::Return => {
                    if e.ev == Kind::Return && !e.unwind && !e.suspended && at_listed {
                        push(i, &state, &mut out);
                    }
                }
                Where::Change => {
                    if changed {
                        push(i, &state, &mut out);
                    }
                }
            }
        }
        if let Some(w) = waiting {
            return Err(ExtractError::NotObserved(format!(
                "no event of the frame follows the execution of line {} (the trace ends)",
                ix.event(w).line
            )));
        }
    }
    out.sort_by_key(|o| o.at);
    Ok(out)
}

/// The variables of `variable` / `variables`, and whether the value is a tuple.
fn observed_names(p: &Params) -> Result<(Vec<String>, bool), ExtractError> {
    match (p.opt_str("variable")?, p.opt_str_list("variables")?) {
        (Some(v), None) => Ok((vec![v.to_string()], false)),
        (None, Some(vs)) if !vs.is_empty() => Ok((vs, true)),
        _ => Err(ExtractError::MissingParam {
            param: "variable (or a non-empty variables)".into(),
        }),
    }
}

/// The observed value: the repr, or the tuple of reprs; None when a variable is unbound.
fn value_of(state: &BTreeMap<String, Observed>, names: &[String], tuple: bool) -> Option<String> {
    let reprs: Option<Vec<&str>> = names
        .iter()
        .map(|n| state.get(n).map(|v| v.repr.as_str()))
        .collect();
    let reprs = reprs?;
    if !tuple {
        return reprs.first().map(|s| s.to_string());
    }
    Some(if reprs.len() == 1 {
        format!("({},)", reprs[0])
    } else {
        format!("({})", reprs.join(", "))
    })
}

pub(crate) fn unique_values(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let (names, tuple) = observed_names(p)?;
    // `union`: the values each variable holds, pooled (not the tuple of them)
    let union = p.choice_or("combine", &["tuple", "union"], "tuple")? == "union";
    let obs = observe(ix, p, &names)?;
    let mut values: Vec<String> = Vec::new();
    let mut count = 0usize;
    for o in &obs {
        let seen: Vec<String> = if union {
            names
                .iter()
                .filter_map(|n| o.state.get(n).map(|v| v.repr.clone()))
                .collect()
        } else {
            value_of(&o.state, &names, tuple).into_iter().collect()
        };
        if !seen.is_empty() {
            count += 1;
        }
        for v in seen {
            if !values.contains(&v) {
                values.push(v);
            }
        }
    }
    if count == 0 {
        return Err(ExtractError::NotObserved(format!(
            "`{}` is never bound at an observation point of `{}`",
            names.join("`, `"),
            p.str("function")?
        )));
    }
    if p.choice_or("order", &["sorted", "first_seen"], "sorted")? == "sorted" {
        values.sort();
    }
    Ok(json!({"unique_values": values, "observations": count}))
}

pub(crate) fn value_history(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let (names, tuple) = observed_names(p)?;
    let obs = observe(ix, p, &names)?;
    let dedupe = p.bool_or("dedupe_consecutive", false)?;
    let mut out: Vec<Value> = Vec::new();
    let mut last: Option<(usize, String)> = None;
    for o in &obs {
        let Some(v) = value_of(&o.state, &names, tuple) else {
            continue;
        };
        if dedupe && last.as_ref() == Some(&(o.invocation, v.clone())) {
            continue;
        }
        last = Some((o.invocation, v.clone()));
        let step = out.len() + 1;
        out.push(json!({"step": step, "value": v, "invocation": o.invocation, "test": o.test, "line": o.line}));
    }
    if out.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "`{}` is never bound at an observation point of `{}`",
            names.join("`, `"),
            p.str("function")?
        )));
    }
    Ok(json!({ "value_history": out }))
}

pub(crate) fn state_snapshots(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let wanted = p.opt_str_list("variables")?;
    let obs = observe(ix, p, wanted.as_deref().unwrap_or(&[]))?;
    if obs.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "no observation point of `{}` is reached",
            p.str("function")?
        )));
    }
    // the variables of an observation, in answer order (unbound ones left out)
    let names = |o: &Obs| -> Vec<String> {
        match &wanted {
            Some(w) => w
                .iter()
                .filter(|n| o.state.contains_key(*n))
                .cloned()
                .collect(),
            None => o.state.keys().cloned().collect(),
        }
    };
    // `point_label`: each observation named as the question names its program points
    let label = p.opt_str("point_label")?;
    let point = |o: &Obs| {
        label.map(|l| {
            l.replace("{line}", &o.line.to_string())
                .replace("{nth}", &o.nth.to_string())
                .replace("{invocation}", &o.invocation.to_string())
        })
    };
    if p.choice_or("rows", &["snapshots", "variables"], "snapshots")? == "variables" {
        // one row per variable of each observation, sorted by invocation, variable, value
        // (SWE-Flux's "sort by invocation, then variable, then value"); with labelled points,
        // by invocation, point (in execution order), variable, value
        let nth = |o: &Obs| if label.is_some() { o.nth } else { 0 };
        let mut rows: Vec<(usize, u64, String, &str, &Obs)> = obs
            .iter()
            .flat_map(|o| {
                names(o).into_iter().map(move |n| {
                    (
                        o.invocation,
                        nth(o),
                        n.clone(),
                        o.state[&n].repr.as_str(),
                        o,
                    )
                })
            })
            .collect();
        rows.sort_by(|a, b| (a.0, a.1, &a.2, a.3).cmp(&(b.0, b.1, &b.2, b.3)));
        let rows: Vec<Value> = rows
            .into_iter()
            .map(|(inv, _, n, v, o)| {
                let mut r = json!({"invocation": inv, "line": o.line, "test": o.test,
                                   "variable": n, "value": v});
                if let Some(pt) = point(o) {
                    r["point"] = json!(pt);
                }
                r
            })
            .collect();
        return Ok(json!({ "state_snapshots": rows }));
    }
    let snaps: Vec<Value> = obs
        .iter()
        .map(|o| {
            let names = names(o);
            let state: Map<String, Value> = names
                .iter()
                .map(|n| (n.clone(), json!(o.state[n].repr)))
                .collect();
            let vars: Vec<Value> = names
                .iter()
                .map(|n| json!({"variable": n, "value": o.state[n].repr}))
                .collect();
            let mut snap = json!({"line": o.line, "invocation": o.invocation, "test": o.test,
                   "state": state, "variables": vars});
            if let Some(pt) = point(o) {
                snap["point"] = json!(pt);
            }
            snap
        })
        .collect();
    Ok(json!({ "state_snapshots": snaps }))
}

#[cfg(test)]
pub(crate) mod tests;
