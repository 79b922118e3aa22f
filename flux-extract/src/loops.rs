//! Loops: S2 (`loop_iterations`, `iteration_value`), S2/M2 (`loop_stats`) and M2
//! (`loop_iterations_across_tests`).
use crate::common::{all_invocations, facts_of, in_test_order, pick_invocation, Ix};
use crate::{ExtractError, Params};
use flux_trace::query::Invocation;
use flux_trace::{Kind, TraceIndex};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const ITERATION: &str = "\
An iteration is counted one of two ways (`count`). `header` (default): over the frame's `line` \
events in order (nested calls excluded), an *entry* is a `line` event at `header` whose previous \
`line` event of the frame is absent or outside [`header`, `body_end`], and an *iteration* is a \
`line` event at `header` whose next `line` event of the frame is inside (`header`, `body_end`] \
(Python 3.11 reports the header line at each pass, `while True:` included, and once more when a \
`for` loop is exhausted or a `while` condition fails; that last header event is followed by a \
line outside the body, such as an `else:` body, and so is not an iteration; a `break` leaves \
without reaching the header). `body_line`: an iteration is one execution (`line` event of the \
frame) of the body's first line (`body_line`, default from the static facts: the first line of \
the body's first statement), SWE-Flux's definition. `body_end` defaults to the last line of the \
loop body from the static facts.";

pub(crate) const LOOP_ITERATIONS: &str = "\
Iterations of the loop whose header is at line `header` in the Nth invocation of `function`: \
the number of iterations over all entries, or within the Nth entry if `entry` is given. See \
the iteration convention (`count`, `body_end`, `body_line`). Answer: {\"loop_iteration_count\": N}.";

pub(crate) const LOOP_STATS: &str = "\
Per-invocation iteration counts of the loop whose header is at `header`, over every selected \
invocation of `function` (`test`, `file`), and their statistics. An invocation's count is the \
number of its iterations over all its entries into the loop; with `invocations = \"all\"` \
(default) every invocation counts, those that never reach the loop with 0 (zero-iteration \
invocations are included); with `\"entered\"` only those whose frame executes the header. \
An error if no invocation reaches the header (the loop never runs). \
`min_iterations`, `max_iterations` and `total_iterations` are over those counts (an error if \
there is none); `per_test` sums each test's invocations (tests that run none are omitted). \
With `per = \"entry\"` the statistics are over the loop's entries instead (one count per entry \
into the loop, in every counted invocation: SWE-Flux's \"loop activation\"), with `per = \"call\"` \
over the frames' `call` events (a generator's start and each resumption, counting the \
iterations whose body line runs before the frame's next call event: SWE-Flux's \"each call is a \
separate invocation\"); `invocations` and `zero_iteration_invocations` then count those. \
Answer: {\"min_iterations\", \"max_iterations\", \"total_iterations\", \"invocations\" (how many \
counted), \"zero_iteration_invocations\", \"per_invocation\": [{\"invocation\", \"test\", \
\"iterations\"}], \"per_test\": [{\"test\", \"iterations\"}]}.";

pub(crate) const LOOP_ITERATIONS_ACROSS_TESTS: &str = "\
For every test in which the loop's header line executes (same loop definition as \
`loop_iterations`), the total number of iterations over all invocations of `function` during \
that test (an iteration is attributed to the test of its header `line` event). Answer: the \
minimum and maximum of these totals and the tests attaining each, in start order: \
{\"min_iterations\": N, \"max_iterations\": N, \"tests_with_min\": [...], \"tests_with_max\": [...]}.";

pub(crate) const ITERATION_VALUE: &str = "\
The value of `variable` at the Nth iteration (`iteration`, from 1, counted over all entries as \
in `loop_stats`) of the loop at `header` in the Nth invocation of `function`: with `at = \
\"before\"` (default) the frame's state when the iteration's first body line is about to run \
(after a `for` target is bound), with `at = \"after\"` its state at the iteration's end (the \
next `line` event of the frame at the header or outside the loop, or its return). Answer: \
{\"nth_iteration\": N, \"variable\": V, \"value\": REPR} (`render = \"str\"`: what `str()` gives, \
where the repr says: a string's text; any other object is an error).";

/// The whole definition, for `flux extractors`.
pub(crate) fn iteration_doc() -> &'static str {
    ITERATION
}

/// One iteration: its entry (from 0) and the positions (in `inv.events`) of the event that
/// starts it (the header or the body line) and of its first body line event.
#[derive(Clone, Copy, Debug)]
struct Iteration {
    entry: usize,
    start: usize,
    body: usize,
}

/// How iterations are recognised.
struct LoopDef {
    header: u32,
    body_end: u32,
    /// `Some(line)`: count executions of `line` (the `body_line` definition).
    body_line: Option<u32>,
}

impl LoopDef {
    fn from_params(ix: &Ix<'_>, p: &Params, inv: &Invocation) -> Result<LoopDef, ExtractError> {
        let header = p.line("header")?;
        let by_body = p.choice_or("count", &["header", "body_line"], "header")? == "body_line";
        let explicit_end = p.opt_line("body_end")?;
        let explicit_body = p.opt_line("body_line")?;
        let need_facts = explicit_end.is_none() || (by_body && explicit_body.is_none());
        let facts = if need_facts {
            let f = facts_of(ix, inv, "the loop's body lines")?;
            let file = ix.facts_of_invocation(inv).map(|(ff, _)| ff);
            Some(
                file.and_then(|ff| ff.loop_at(&f.qualname, header))
                    .ok_or_else(|| {
                        ExtractError::NotObserved(format!(
                            "the static facts show no loop with its header at line {header} in \
                             `{}`",
                            f.qualname
                        ))
                    })?,
            )
        } else {
            None
        };
        let body_end = match explicit_end {
            Some(e) => e,
            None => facts.map(|l| l.body[1]).unwrap_or(header),
        };
        if body_end <= header {
            return Err(ExtractError::BadParam {
                param: "body_end".into(),
                expected: "a line after `header`",
                got: body_end.to_string(),
            });
        }
        let body_line = if by_body {
            Some(
                explicit_body
                    .or(facts.map(|l| l.body_first_line))
                    .unwrap_or(header + 1),
            )
        } else {
            None
        };
        Ok(LoopDef {
            header,
            body_end,
            body_line,
        })
    }

    /// The iterations of `inv`, and how many entries into the loop it makes.
    fn iterations(&self, ix: &Ix<'_>, inv: &Invocation) -> (Vec<Iteration>, usize) {
        let lines: Vec<(usize, u32)> = inv
            .events
            .iter()
            .enumerate()
            .filter(|(_, &i)| ix.event(i).ev == Kind::Line)
            .map(|(k, &i)| (k, ix.event(i).line))
            .collect();
        let in_loop = |l: u32| l >= self.header && l <= self.body_end;
        let in_body = |l: u32| l > self.header && l <= self.body_end;
        let mut out = Vec::new();
        let mut entries = 0usize;
        for (n, &(k, l)) in lines.iter().enumerate() {
            let prev = n.checked_sub(1).map(|p| lines[p].1);
            if l == self.header && (prev.is_none_or(|p| !in_loop(p)) || entries == 0) {
                entries += 1;
            }
            match self.body_line {
                Some(b) => {
                    if l == b {
                        out.push(Iteration {
                            entry: entries.saturating_sub(1),
                            start: k,
                            body: k,
                        });
                    }
                }
                None => {
                    if l == self.header {
                        if let Some(&(kb, next)) = lines.get(n + 1) {
                            if in_body(next) {
                                out.push(Iteration {
                                    entry: entries.saturating_sub(1),
                                    start: k,
                                    body: kb,
                                });
                            }
                        }
                    }
                }
            }
        }
        (out, entries)
    }
}

pub(crate) fn loop_iterations(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let (n, inv) = pick_invocation(ix, p, function)?;
    let def = LoopDef::from_params(ix, p, &inv)?;
    let (its, entries) = def.iterations(ix, &inv);
    if entries == 0 && its.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "line {} (the loop header) never executes in invocation {n} of `{function}`",
            def.header
        )));
    }
    let count = match p.opt_pos("entry")? {
        None => its.len(),
        Some(k) => {
            let k = usize::try_from(k).unwrap_or(usize::MAX);
            if k > entries {
                return Err(ExtractError::NotObserved(format!(
                    "the loop at line {} is entered {entries} time(s) in invocation {n} of \
                     `{function}`; entry {k} was asked for",
                    def.header
                )));
            }
            its.iter().filter(|it| it.entry == k - 1).count()
        }
    };
    Ok(json!({ "loop_iteration_count": count }))
}

pub(crate) fn loop_stats(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = all_invocations(ix, p, function)?;
    let def = LoopDef::from_params(ix, p, &invs[0])?;
    let entered_only = p.choice_or("invocations", &["all", "entered"], "all")? == "entered";
    let per = p.choice_or("per", &["invocation", "entry", "call"], "invocation")?;
    let mut per_inv = Vec::new();
    let mut per_test: BTreeMap<String, usize> = BTreeMap::new();
    let mut counts = Vec::new();
    let mut any_entered = false;
    for (k, inv) in invs.iter().enumerate() {
        let (its, entries) = def.iterations(ix, inv);
        let entered = entries > 0 || !its.is_empty();
        any_entered |= entered;
        if entered_only && !entered {
            continue;
        }
        match per {
            // One count per entry into the loop (an entry without iterations counts 0).
            "entry" => {
                counts.extend((0..entries).map(|e| its.iter().filter(|it| it.entry == e).count()))
            }
            // One count per `call` event of the frame (a generator's start and each
            // resumption): the iterations whose body line runs before its next call event.
            "call" => {
                let calls: Vec<usize> = inv
                    .events
                    .iter()
                    .enumerate()
                    .filter(|(_, &i)| ix.event(i).ev == Kind::Call)
                    .map(|(j, _)| j)
                    .collect();
                for (c, &from) in calls.iter().enumerate() {
                    let to = calls.get(c + 1).copied().unwrap_or(usize::MAX);
                    counts.push(
                        its.iter()
                            .filter(|it| it.body >= from && it.body < to)
                            .count(),
                    );
                }
            }
            _ => counts.push(its.len()),
        }
        per_inv.push(json!({"invocation": k + 1, "test": inv.test, "iterations": its.len()}));
        if !inv.test.is_empty() {
            *per_test.entry(inv.test.to_string()).or_insert(0) += its.len();
        }
    }
    let (Some(&min), Some(&max), true) = (counts.iter().min(), counts.iter().max(), any_entered)
    else {
        return Err(ExtractError::NotObserved(format!(
            "no invocation of `{function}` reaches the loop header at line {} (or nothing was \
             counted per {per})",
            def.header
        )));
    };
    let per_test: Vec<Value> = ix
        .test_ids()
        .into_iter()
        .filter_map(|t| {
            per_test
                .get(&t)
                .map(|n| json!({"test": t, "iterations": n}))
        })
        .collect();
    Ok(json!({
        "min_iterations": min,
        "max_iterations": max,
        "total_iterations": counts.iter().sum::<usize>(),
        "invocations": counts.len(),
        "zero_iteration_invocations": counts.iter().filter(|c| **c == 0).count(),
        "per_invocation": per_inv,
        "per_test": per_test,
    }))
}

pub(crate) fn loop_iterations_across_tests(
    ix: &TraceIndex<'_>,
    p: &Params,
) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = all_invocations(ix, p, function)?;
    let def = LoopDef::from_params(ix, p, &invs[0])?;
    let mut per_test: BTreeMap<String, usize> = BTreeMap::new();
    for inv in &invs {
        // Tests that reach the header count even with zero iterations.
        for &i in &inv.events {
            let e = ix.event(i);
            if e.ev == Kind::Line && e.line == def.header && !e.test.is_empty() {
                per_test.entry(e.test.to_string()).or_insert(0);
            }
        }
        for it in def.iterations(ix, inv).0 {
            let test = &ix.event(inv.events[it.start]).test;
            if !test.is_empty() {
                *per_test.entry(test.to_string()).or_insert(0) += 1;
            }
        }
    }
    let (Some(&min), Some(&max)) = (per_test.values().min(), per_test.values().max()) else {
        return Err(ExtractError::NotObserved(format!(
            "line {} (the loop header) of `{function}` never executes inside a test",
            def.header
        )));
    };
    let order = ix.test_ids();
    let with = |n: usize| -> BTreeSet<String> {
        per_test
            .iter()
            .filter(|(_, &c)| c == n)
            .map(|(t, _)| t.clone())
            .collect()
    };
    Ok(json!({
        "min_iterations": min,
        "max_iterations": max,
        "tests_with_min": in_test_order(&order, &with(min)),
        "tests_with_max": in_test_order(&order, &with(max)),
    }))
}

pub(crate) fn iteration_value(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let variable = p.str("variable")?;
    let nth = p.index_or("iteration", 1)?;
    let (n, inv) = pick_invocation(ix, p, function)?;
    let def = LoopDef::from_params(ix, p, &inv)?;
    let (its, _) = def.iterations(ix, &inv);
    let it = its.get(nth - 1).ok_or_else(|| {
        ExtractError::NotObserved(format!(
            "the loop at line {} makes {} iteration(s) in invocation {n} of `{function}`; \
             iteration {nth} was asked for",
            def.header,
            its.len()
        ))
    })?;
    let pos = match p.choice_or("at", &["before", "after"], "before")? {
        "after" => {
            // The end of the iteration: the next line event at the header or outside the loop.
            let mut end = None;
            for k in it.body + 1..inv.events.len() {
                let e = ix.event(inv.events[k]);
                if e.ev == Kind::Return
                    || (e.ev == Kind::Line
                        && (e.line == def.header || e.line > def.body_end || e.line < def.header))
                {
                    end = Some(k);
                    break;
                }
            }
            end.ok_or_else(|| {
                ExtractError::NotObserved("the trace ends inside the iteration".into())
            })?
        }
        _ => it.body,
    };
    let state = inv.locals_through(ix.trace, pos);
    let v = state.get(variable).ok_or_else(|| {
        ExtractError::NotObserved(format!(
            "variable `{variable}` is not bound at iteration {nth} of the loop at line {} in \
             invocation {n} of `{function}`",
            def.header
        ))
    })?;
    let value = crate::render::value(p, &v.repr)?;
    Ok(json!({"nth_iteration": nth, "variable": variable, "value": value}))
}

/// Iteration counts per invocation of the loop at `header` (`count` definition from `p`), for
/// the candidate enumeration.
pub(crate) fn iterations_of(
    ix: &Ix<'_>,
    p: &Params,
    inv: &Invocation,
) -> Result<(usize, usize), ExtractError> {
    let def = LoopDef::from_params(ix, p, inv)?;
    let (its, entries) = def.iterations(ix, inv);
    Ok((its.len(), entries))
}

#[cfg(test)]
mod tests;
