//! Intra-procedural control flow: S1 (`executed_path`, `covered_lines`, `line_counts`) and M1
//! (`coverage_across_tests`, `line_classes`).
use crate::common::{all_invocations, facts_of, in_test_order, pick_invocation, Ix, Loc, Norm};
use crate::{ExtractError, Params};
use flux_trace::query::Invocation;
use flux_trace::{Kind, TraceIndex};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashSet};

mod own_lines;

pub(crate) const EXECUTED_PATH: &str = "\
The lines executed by the Nth invocation (`invocation`, default 1; every selected invocation in \
trace order with `all_invocations = true`) of `function`, in execution order, one entry per \
`line` event of that frame (a line executed k times appears k times; lines of called functions \
are not included, nor are those of comprehensions and generator expressions, which run in \
frames of their own in Python 3.11 such as `f.<locals>.<listcomp>`; a generator's resumptions \
are part of its one invocation). With `functions` (qualnames), the path instead holds the `line` \
events of every frame of those functions (the target's own only if listed) that run, directly \
or through any callee, while the chosen invocation is active (from its call to its return, in \
its thread). With `line_mode = \"statement\"` each line is the first line of its statement (static \
facts); `dedupe_consecutive` drops an entry equal to the one before it. Items carry the \
location fields (`file`, `func`, `qualname`, ...) of the frame and `line`. Answer: \
{\"executed_path\": [{\"line\": L, ...}, ...]}; `normalize` = absolute (default) or relative \
(def line = 1).";

pub(crate) const COVERED_LINES: &str = "\
The set of lines of `function` executed by any of its invocations (optionally only those first \
called in `test`), sorted ascending, each once (with `line_mode = \"statement\"`, statement first \
lines). With `coverage = \"own_lines\"`, statement coverage instead: a statement of `function` \
whose own lines (its span less what statements nested in it hold: a compound statement's \
header, `else:`, `finally:`, `except` lines) get a `line` event covers all of them, and the \
signature lines (`def` up to the first body statement) are covered once it is invoked (static \
facts; a `with` statement's own lines are its header's). With `nested = true`, the lines of \
the frames of functions defined inside it (qualnames `function.<locals>.…`: closures, local \
handlers, their comprehensions) count too. Answer: {\"covered_lines\": [L, ...]}.";

pub(crate) const LINE_COUNTS: &str = "\
How many times each line of `function` executes (`line` events of its own frames) over its \
selected invocations (all of them, or the Nth with `invocation`; optionally only in `test`), for \
every line of a range, zero-filled: `from`..`to` (absolute, inclusive) if given, else `range` = \
`body` (default: from the first line of the body's first statement, a docstring included, to \
the function's last line), `function` (from the def line), or `statements` (only the first lines \
of the function's own statements and headers); the ranges come from the static facts. \
`per_test` gives the same table for every test of the trace, in start order. Answer: \
{\"line_execution_counts\": [{\"line\": L, \"count\": N}, ...]} sorted by line.";

pub(crate) const COVERAGE_ACROSS_TESTS: &str = "\
Without `line`: for every test of the trace in start order, the sorted set of lines of \
`function` executed while that test ran (a `line` event of a frame of `function` whose `test` is \
that test; tests that never execute it get an empty list). Answer: {\"coverage\": [{\"test\": T, \
\"lines\": [L, ...]}, ...]}. With `line` (absolute): {\"covering_tests\": [tests in which that \
line of `function` executes], \"non_covering_tests\": [every other test]}, both in start order.";

pub(crate) const LINE_CLASSES: &str = "\
Every line of a range of `function` (as `line_counts`; default `range = \"statements\"`: the \
first lines of its own statements) classified over the tests of the trace (`tests = \"all\"`, \
default) or only the tests in which `function` runs (`tests = \"running\"`), or with `over = \
\"invocations\"` over the invocations of `function` (each its own frame's lines): executed (a `line` \
event of one of its frames, with `line_mode = \"statement\"` normalised) in every such test, in some \
but not all, or in none. Answer: {\"always_executed\": [L...], \"sometimes_executed\": [L...], \
\"never_executed\": [L...]}, each sorted.";

/// Indices of the `line` events of the invocations' own frames, in trace order.
fn own_lines(ix: &Ix<'_>, invs: &[Invocation]) -> Vec<usize> {
    let mut out: Vec<usize> = invs
        .iter()
        .flat_map(|inv| inv.events.iter().copied())
        .filter(|&i| ix.event(i).ev == Kind::Line)
        .collect();
    out.sort_unstable();
    out
}

/// Indices of the `line` events of frames of `functions` that run while an activation of one of
/// `invs` is open in its thread, in trace order.
fn lines_while_active(ix: &Ix<'_>, invs: &[Invocation], functions: &[String]) -> Vec<usize> {
    // Active spans per thread, sorted.
    let mut spans: BTreeMap<(u32, u32), Vec<(usize, usize)>> = BTreeMap::new();
    for inv in invs {
        for &a in &inv.activations {
            if let (Some((c, r)), Some(call)) = (ix.span(a), ix.call_event(a)) {
                spans.entry((call.pid, call.tid)).or_default().push((c, r));
            }
        }
    }
    for v in spans.values_mut() {
        v.sort_unstable();
    }
    let inside = |i: usize| {
        let e = ix.event(i);
        spans.get(&(e.pid, e.tid)).is_some_and(|v| {
            let k = v.partition_point(|s| s.0 <= i);
            v[..k].iter().any(|s| s.1 >= i)
        })
    };
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for f in functions {
        for inv in ix.invocations(f, Default::default()) {
            if !seen.insert(inv.frame) {
                continue;
            }
            out.extend(
                inv.events
                    .iter()
                    .copied()
                    .filter(|&i| ix.event(i).ev == Kind::Line && inside(i)),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The (normalised) lines of `invs` executed in each test.
fn lines_per_test<'t>(
    ix: &Ix<'t>,
    invs: &[Invocation],
    norm: Norm<'_>,
) -> BTreeMap<&'t str, BTreeSet<u32>> {
    let mut per_test: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for i in own_lines(ix, invs) {
        let e = ix.event(i);
        if !e.test.is_empty() {
            per_test
                .entry(e.test.as_str())
                .or_default()
                .insert(norm.statement(e.line));
        }
    }
    per_test
}

pub(crate) fn executed_path(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let chosen: Vec<Invocation> = if p.bool_or("all_invocations", false)? {
        all_invocations(ix, p, function)?
    } else {
        vec![pick_invocation(ix, p, function)?.1]
    };
    let norm = Norm::new(ix, p, &chosen[0])?;
    let loc = Loc::new(p)?;
    let events = match p.opt_str_list("functions")? {
        Some(fs) => lines_while_active(ix, &chosen, &fs),
        None => own_lines(ix, &chosen),
    };
    // Statement normalisation of a line uses the facts of the frame it belongs to.
    let statements = p.opt_str("line_mode")? == Some("statement");
    let mut path: Vec<Value> = Vec::with_capacity(events.len());
    let dedupe = p.bool_or("dedupe_consecutive", false)?;
    let mut last: Option<(u64, i64)> = None;
    for i in events {
        let e = ix.event(i);
        let line = match ix.invocation_holding(i) {
            Some(k) if statements => {
                let inv = ix.invocation(k).ok_or_else(|| {
                    ExtractError::NotObserved(format!("the invocation holding event {i}"))
                })?;
                let f = facts_of(ix, &inv, "`line_mode = \"statement\"`")?;
                norm.relative(f.statement_start(e.line))
            }
            _ => norm.apply(e.line),
        };
        let frame = ix.owner(i);
        if dedupe && last == Some((frame, line)) {
            continue;
        }
        last = Some((frame, line));
        path.push(loc.record(e, Some(line)));
    }
    Ok(json!({ "executed_path": path }))
}

pub(crate) fn covered_lines(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let mut invs = all_invocations(ix, p, function)?;
    let norm = Norm::new(ix, p, &invs[0])?;
    if p.bool_or("nested", false)? {
        let prefix = format!("{function}.<locals>.");
        let f = crate::common::filter(p)?;
        invs.extend(ix.invocations_where(f, |e| e.qualname().starts_with(&prefix)));
    }
    // Each frame's lines are normalised with its own function's statements (a nested
    // function's are not the target's).
    let mut lines: BTreeSet<i64> = BTreeSet::new();
    if p.choice_or("coverage", &["lines", "own_lines"], "lines")? == "own_lines" {
        // the target's statements, each covered with all its own lines once executed
        // the target's own invocations; the nested functions' (`nested`) stay in `invs`
        let (file, f) = ix.facts_of_invocation(&invs[0]).ok_or_else(|| {
            ExtractError::NotObserved(format!(
                "`coverage = \"own_lines\"` needs the static facts of `{function}`, and the \
                 trace has none for it (they come from the hook for targeted files)"
            ))
        })?;
        let (mine, nested): (Vec<Invocation>, Vec<Invocation>) =
            invs.into_iter().partition(|inv| {
                inv.first_call(ix.trace)
                    .is_some_and(|c| c.name() == function)
            });
        let executed: BTreeSet<u32> = own_lines(ix, &mine)
            .into_iter()
            .map(|i| ix.event(i).line)
            .collect();
        lines.extend(
            own_lines::covered(file, f, &executed)
                .into_iter()
                .map(|l| norm.relative(l)),
        );
        invs = nested;
    }
    for inv in &invs {
        let own = Norm::new(ix, p, inv)?;
        for i in own_lines(ix, std::slice::from_ref(inv)) {
            lines.insert(norm.relative(own.statement(ix.event(i).line)));
        }
    }
    Ok(json!({ "covered_lines": lines.into_iter().collect::<Vec<_>>() }))
}

/// The lines of the range chosen by `from`/`to`/`range` (`default` when `range` is absent).
fn range_lines(
    ix: &Ix<'_>,
    p: &Params,
    inv: &Invocation,
    default: &'static str,
) -> Result<Vec<u32>, ExtractError> {
    if let (Some(a), Some(b)) = (p.opt_line("from")?, p.opt_line("to")?) {
        if b < a {
            return Err(ExtractError::BadParam {
                param: "to".into(),
                expected: "a line at or after `from`",
                got: b.to_string(),
            });
        }
        return Ok((a..=b).collect());
    }
    let which = p.choice_or("range", RANGE_CHOICES, default)?;
    let f = facts_of(ix, inv, &format!("`range = \"{which}\"`"))?;
    Ok(match which {
        "function" => (f.def_line..=f.last_line).collect(),
        "statements" => {
            let mut v: Vec<u32> = f.statements.iter().map(|s| s[0]).collect();
            v.dedup();
            v
        }
        _ => (f.body_line.max(f.def_line)..=f.last_line).collect(),
    })
}

pub(crate) const RANGE_CHOICES: &[&str] = &["body", "function", "statements"];

fn count_table(range: &[u32], counts: &BTreeMap<u32, usize>) -> Vec<Value> {
    range
        .iter()
        .map(|l| json!({"line": l, "count": counts.get(l).copied().unwrap_or(0)}))
        .collect()
}

pub(crate) fn line_counts(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs: Vec<Invocation> = if p.contains("invocation") {
        vec![pick_invocation(ix, p, function)?.1]
    } else {
        all_invocations(ix, p, function)?
    };
    let norm = Norm::new(ix, p, &invs[0])?;
    let range = range_lines(ix, p, &invs[0], "body")?;
    let mut all: BTreeMap<u32, usize> = BTreeMap::new();
    let mut per_test: BTreeMap<&str, BTreeMap<u32, usize>> = BTreeMap::new();
    for i in own_lines(ix, &invs) {
        let e = ix.event(i);
        let l = norm.statement(e.line);
        *all.entry(l).or_insert(0) += 1;
        if !e.test.is_empty() {
            *per_test
                .entry(e.test.as_str())
                .or_default()
                .entry(l)
                .or_insert(0) += 1;
        }
    }
    let empty = BTreeMap::new();
    let tests: Vec<Value> = ix
        .test_ids()
        .iter()
        .map(|t| {
            json!({"test": t,
                   "line_execution_counts": count_table(&range, per_test.get(t.as_str()).unwrap_or(&empty))})
        })
        .collect();
    Ok(json!({
        "line_execution_counts": count_table(&range, &all),
        "per_test": tests,
    }))
}

pub(crate) fn coverage_across_tests(
    ix: &TraceIndex<'_>,
    p: &Params,
) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = all_invocations(ix, p, function)?;
    let norm = Norm::new(ix, p, &invs[0])?;
    let per_test = lines_per_test(ix, &invs, norm);
    let tests = ix.test_ids();
    if let Some(line) = p.opt_line("line")? {
        let covering: BTreeSet<String> = per_test
            .iter()
            .filter(|(_, ls)| ls.contains(&line))
            .map(|(t, _)| t.to_string())
            .collect();
        let others: BTreeSet<String> = tests
            .iter()
            .filter(|t| !covering.contains(*t))
            .cloned()
            .collect();
        return Ok(json!({
            "covering_tests": in_test_order(&tests, &covering),
            "non_covering_tests": in_test_order(&tests, &others),
        }));
    }
    let coverage: Vec<Value> = tests
        .iter()
        .map(|id| {
            let lines: Vec<i64> = per_test
                .get(id.as_str())
                .map(|ls| ls.iter().map(|&l| norm.apply(l)).collect())
                .unwrap_or_default();
            json!({"test": id, "lines": lines})
        })
        .collect();
    Ok(json!({ "coverage": coverage }))
}

pub(crate) fn line_classes(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = all_invocations(ix, p, function)?;
    let first = &invs[0];
    let norm = Norm::new(ix, p, first)?;
    let range = range_lines(ix, p, first, "statements")?;
    // The groups the lines are classified over: the tests, or each invocation's own lines.
    let groups: Vec<BTreeSet<u32>> =
        if p.choice_or("over", &["tests", "invocations"], "tests")? == "invocations" {
            invs.iter()
                .map(|inv| {
                    own_lines(ix, std::slice::from_ref(inv))
                        .into_iter()
                        .map(|i| norm.statement(ix.event(i).line))
                        .collect()
                })
                .collect()
        } else {
            tests_lines(ix, p, &invs, norm, function)?
        };
    let (mut always, mut some, mut never) = (Vec::new(), Vec::new(), Vec::new());
    for l in range {
        let n = groups.iter().filter(|g| g.contains(&l)).count();
        let out = norm.apply(l);
        if n == groups.len() {
            always.push(out);
        } else if n > 0 {
            some.push(out);
        } else {
            never.push(out);
        }
    }
    Ok(json!({"always_executed": always, "sometimes_executed": some, "never_executed": never}))
}

/// The lines of `function` each test (`tests = "all"`, or only those `running` it) executes.
fn tests_lines(
    ix: &TraceIndex<'_>,
    p: &Params,
    invs: &[Invocation],
    norm: Norm<'_>,
    function: &str,
) -> Result<Vec<BTreeSet<u32>>, ExtractError> {
    let per_test = lines_per_test(ix, invs, norm);
    let tests: Vec<String> = match p.choice_or("tests", &["all", "running"], "all")? {
        "running" => ix
            .test_ids()
            .into_iter()
            .filter(|t| per_test.contains_key(t.as_str()))
            .collect(),
        _ => ix.test_ids(),
    };
    if tests.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "the trace has no test{} to classify the lines of `{function}` over",
            if p.opt_str("tests")? == Some("running") {
                " in which it runs"
            } else {
                ""
            }
        )));
    }
    Ok(tests
        .iter()
        .map(|t| per_test.get(t.as_str()).cloned().unwrap_or_default())
        .collect())
}

#[cfg(test)]
mod tests;
