//! What one function's run offers to ask about, enumerated from the trace (and its static
//! facts) rather than discovered through `NotObserved` errors: the planning input of `flux gen`.
//!
//! Every count uses the same definitions as the extractors (an iteration as `loop_stats` with
//! `count = "header"`, a callee as `call_sequence`, a raise as `exception_info`), so a
//! candidate's numbers predict what the extractor will answer.
use crate::common::{all_invocations, facts_of, Ix};
use crate::{calls, loops, ExtractError, Params};
use flux_trace::{Kind, TraceIndex};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A loop of the function that its frames enter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoopCandidate {
    pub header: u32,
    pub body_end: u32,
    pub body_first_line: u32,
    pub kind: String,
    pub depth: u32,
    /// Iterations per invocation, in invocation order (0 for invocations that do not enter it).
    pub iterations: Vec<usize>,
    /// Invocations that execute its header.
    pub entered: usize,
}

/// A variable whose value a line's execution shows (its next frame event reports it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValueCandidate {
    pub line: u32,
    pub variable: String,
    pub observations: usize,
    pub distinct_values: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CalleeCandidate {
    pub function: String,
    pub file: String,
    pub calls: usize,
}

/// An exception raised in, or propagating through, the function's frames.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExceptionCandidate {
    pub exception_type: String,
    /// Exception events in the function's frames of this type.
    pub events: usize,
    /// Of those, how many arrived from a callee (the exception crossed into this frame).
    pub crossed_in: usize,
    /// Frames of the function left by this type unwinding (it crossed out).
    pub crossed_out: usize,
    /// Handled in the function's frames.
    pub caught: usize,
}

/// An `if`/`elif` of the function and how often each way was taken.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BranchCandidate {
    pub line: u32,
    pub kind: String,
    pub taken_true: usize,
    pub taken_false: usize,
    /// Tests in which it went each way.
    pub tests_true: usize,
    pub tests_false: usize,
}

/// Everything [`candidates`] finds for one function.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidates {
    pub function: String,
    pub file: String,
    pub invocations: usize,
    pub tests: Vec<String>,
    pub line_events: usize,
    pub distinct_lines: usize,
    /// Empty without static facts.
    pub loops: Vec<LoopCandidate>,
    pub values: Vec<ValueCandidate>,
    pub callees: Vec<CalleeCandidate>,
    pub exceptions: Vec<ExceptionCandidate>,
    /// Empty without static facts.
    pub branches: Vec<BranchCandidate>,
}

/// The candidates of `function` (qualname; `file` when the name is ambiguous) in the indexed
/// trace. An error if the function never runs or the name is ambiguous.
pub fn candidates(
    ix: &TraceIndex<'_>,
    function: &str,
    file: Option<&str>,
) -> Result<Candidates, ExtractError> {
    let mut m = Map::new();
    m.insert("function".into(), json!(function));
    if let Some(f) = file {
        m.insert("file".into(), json!(f));
    }
    let p = Params::new(m);
    let invs = all_invocations(ix, &p, function)?;
    let first = &invs[0];
    let the_file = first
        .first_call(ix.trace)
        .map(|e| e.file().clone())
        .unwrap_or_default();
    let mut tests: Vec<String> = Vec::new();
    let mut line_events = 0usize;
    let mut lines: BTreeSet<u32> = BTreeSet::new();
    // (line, variable) → values
    let mut values: BTreeMap<(u32, String), (usize, BTreeSet<String>)> = BTreeMap::new();
    let mut exceptions: BTreeMap<String, ExceptionCandidate> = BTreeMap::new();
    let mut callees: BTreeMap<(String, String), usize> = BTreeMap::new();
    for inv in &invs {
        if !inv.test.is_empty() && !tests.iter().any(|t| *t == *inv.test) {
            tests.push(inv.test.to_string());
        }
        let mut pending_line: Option<u32> = None;
        for &i in &inv.events {
            let e = ix.event(i);
            if let Some(l) = pending_line {
                if matches!(e.ev, Kind::Line | Kind::Return) {
                    for (name, v) in &e.detail().locals {
                        let slot = values.entry((l, name.clone())).or_default();
                        slot.0 += 1;
                        slot.1.insert(v.repr.clone());
                    }
                    pending_line = None;
                }
            }
            let ty = e.detail().exc.as_ref().map(|x| x.ty.as_str()).unwrap_or("");
            match e.ev {
                Kind::Line => {
                    line_events += 1;
                    lines.insert(e.line);
                    pending_line = Some(e.line);
                }
                Kind::Exception => exception_slot(&mut exceptions, ty).events += 1,
                Kind::Handled => exception_slot(&mut exceptions, ty).caught += 1,
                Kind::Return if e.unwind => exception_slot(&mut exceptions, ty).crossed_out += 1,
                _ => {}
            }
        }
        for i in calls::direct_callees(ix, inv) {
            let callee = ix.event(i);
            *callees
                .entry((callee.name().to_string(), callee.file().to_string()))
                .or_insert(0) += 1;
        }
        mark_crossings(ix, inv, &mut exceptions);
    }
    let mut out = Candidates {
        function: function.to_string(),
        file: the_file.into(),
        invocations: invs.len(),
        tests,
        line_events,
        distinct_lines: lines.len(),
        loops: Vec::new(),
        values: values
            .into_iter()
            .map(|((line, variable), (n, vs))| ValueCandidate {
                line,
                variable,
                observations: n,
                distinct_values: vs.len(),
            })
            .collect(),
        callees: callees
            .into_iter()
            .map(|((function, file), calls)| CalleeCandidate {
                function,
                file,
                calls,
            })
            .collect(),
        exceptions: exceptions.into_values().collect(),
        branches: Vec::new(),
    };
    let Ok(f) = facts_of(ix, first, "candidates") else {
        return Ok(out);
    };
    let file_facts = ix.facts_of_invocation(first).map(|(ff, _)| ff);
    if let Some(ff) = file_facts {
        for l in ff.loops_of(&f.qualname) {
            let mut lp = p.clone();
            let mut map = lp.as_map().clone();
            map.insert("header".into(), json!(l.line));
            map.insert("body_end".into(), json!(l.body[1].max(l.line + 1)));
            lp = Params::new(map);
            let mut iterations = Vec::new();
            let mut entered = 0;
            for inv in &invs {
                let (n, entries) = loops::iterations_of(ix, &lp, inv)?;
                iterations.push(n);
                if entries > 0 {
                    entered += 1;
                }
            }
            if entered > 0 {
                out.loops.push(LoopCandidate {
                    header: l.line,
                    body_end: l.body[1],
                    body_first_line: l.body_first_line,
                    kind: l.kind.clone(),
                    depth: l.depth,
                    iterations,
                    entered,
                });
            }
        }
        for b in ff.branches.iter().filter(|b| b.func == f.qualname) {
            let (Some(body), true) = (b.body_line, matches!(b.kind.as_str(), "if" | "elif")) else {
                continue;
            };
            let mut c = BranchCandidate {
                line: b.line,
                kind: b.kind.clone(),
                taken_true: 0,
                taken_false: 0,
                tests_true: 0,
                tests_false: 0,
            };
            let mut t_true = BTreeSet::new();
            let mut t_false = BTreeSet::new();
            for inv in &invs {
                let ls: Vec<(u32, &str)> = inv
                    .events
                    .iter()
                    .map(|&i| ix.event(i))
                    .filter(|e| e.ev == Kind::Line)
                    .map(|e| (e.line, e.test.as_str()))
                    .collect();
                for w in ls.windows(2) {
                    if w[0].0 != b.line {
                        continue;
                    }
                    if w[1].0 == body {
                        c.taken_true += 1;
                        t_true.insert(w[0].1);
                    } else if w[1].0 > b.test_end.unwrap_or(b.line) || w[1].0 < b.line {
                        c.taken_false += 1;
                        t_false.insert(w[0].1);
                    }
                }
            }
            c.tests_true = t_true.len();
            c.tests_false = t_false.len();
            if c.taken_true + c.taken_false > 0 {
                out.branches.push(c);
            }
        }
    }
    Ok(out)
}

fn exception_slot<'m>(
    m: &'m mut BTreeMap<String, ExceptionCandidate>,
    ty: &str,
) -> &'m mut ExceptionCandidate {
    m.entry(ty.to_string())
        .or_insert_with(|| ExceptionCandidate {
            exception_type: ty.to_string(),
            events: 0,
            crossed_in: 0,
            crossed_out: 0,
            caught: 0,
        })
}

/// Count exception events that arrive from a callee's unwind as crossings into the frame.
fn mark_crossings(
    ix: &Ix<'_>,
    inv: &flux_trace::query::Invocation,
    exceptions: &mut BTreeMap<String, ExceptionCandidate>,
) {
    let own: BTreeSet<u64> = inv.activations.iter().copied().collect();
    let mut unwound_into = false;
    for &a in &inv.activations {
        let Some((c, r)) = ix.span(a) else { continue };
        for i in c..=r {
            let e = ix.event(i);
            if e.ev == Kind::Return && e.unwind && own.contains(&e.parent) {
                unwound_into = true;
            } else if own.contains(&ix.owner(i)) {
                if e.ev == Kind::Exception && unwound_into {
                    if let Some(c) = e
                        .detail()
                        .exc
                        .as_ref()
                        .and_then(|x| exceptions.get_mut(&x.ty))
                    {
                        c.crossed_in += 1;
                    }
                }
                if matches!(e.ev, Kind::Line | Kind::Exception | Kind::Handled) {
                    unwound_into = false;
                }
            }
        }
    }
}

/// Every function that runs in the trace with its invocation count and file, sorted by
/// qualname then file: the starting list of a scout.
pub fn functions(ix: &TraceIndex<'_>) -> Vec<Value> {
    let mut m: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (_, e) in ix.first_calls() {
        *m.entry((e.name().to_string(), e.file().to_string()))
            .or_insert(0) += 1;
    }
    m.into_iter()
        .map(|((q, f), n)| json!({"function": q, "file": f, "invocations": n}))
        .collect()
}
