//! `flux bench-extract --trace FILE` (hidden; for `cargo xtask bench extract`): what answering
//! many questions of one trace costs, per question versus with one index for all.
//!
//! The questions are planned from the trace the way `flux gen` would: the functions with the
//! most invocations, and for each the questions its candidates offer (an executed path, covered
//! lines, calls and callees, exception counts, a value's history and state at a line, loop
//! statistics when the trace has static facts). `per_question` answers each with `extract`,
//! which indexes the trace again for every question (what every extraction cost before the
//! index: each query rebuilt owners and frames over the whole trace); `indexed` builds one
//! `TraceIndex` and answers all with `extract_indexed`. Both must give the same answers; the
//! output says how many questions were answered and the times.
use anyhow::{bail, Context, Result};
use flux_extract::{candidates, extract, extract_indexed, params};
use flux_trace::{Trace, TraceIndex};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// The trace (JSONL as `flux trace` and harvest runs write it).
    #[arg(long)]
    trace: PathBuf,
    /// How many functions to ask about (those with the most invocations).
    #[arg(long, default_value_t = 20)]
    functions: usize,
}

/// Questions (extractor, params) about `function`, from its candidates.
fn questions(ix: &TraceIndex<'_>, function: &str, file: &str) -> Vec<(&'static str, Value)> {
    let mut q: Vec<(&'static str, Value)> = Vec::new();
    let base = json!({"function": function, "file": file});
    let with = |extra: Value| {
        let mut v = base.clone();
        if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                m.insert(k.clone(), x.clone());
            }
        }
        v
    };
    q.push(("executed_path", with(json!({}))));
    q.push(("covered_lines", with(json!({}))));
    q.push(("coverage_across_tests", with(json!({}))));
    q.push(("call_sequence", with(json!({}))));
    q.push(("callees_count", with(json!({}))));
    q.push(("callees_across_tests", with(json!({}))));
    q.push(("exception_counts", with(json!({}))));
    q.push(("caught_types", with(json!({}))));
    q.push(("covered_functions", with(json!({}))));
    let Ok(c) = candidates(ix, function, Some(file)) else {
        return q;
    };
    if let Some(v) = c.values.iter().max_by_key(|v| v.distinct_values) {
        q.push(("state_at", with(json!({"line": v.line}))));
        q.push((
            "value_history",
            with(json!({"variable": v.variable, "lines": [v.line]})),
        ));
        q.push((
            "unique_values",
            with(json!({"variable": v.variable, "event": "change"})),
        ));
        q.push((
            "state_across_tests",
            with(json!({"line": v.line, "variable": v.variable})),
        ));
    }
    for l in c.loops.iter().take(2) {
        q.push(("loop_stats", with(json!({"header": l.header}))));
        q.push(("loop_iterations", with(json!({"header": l.header}))));
    }
    if !c.branches.is_empty() {
        q.push(("line_counts", with(json!({}))));
    }
    q
}

pub fn run(a: Args) -> Result<ExitCode> {
    let text = std::fs::read(&a.trace).with_context(|| a.trace.display().to_string())?;
    let t0 = Instant::now();
    let mut trace = Trace::read_jsonl(&text[..], &a.trace.display().to_string())?;
    let read_ms = t0.elapsed().as_secs_f64() * 1e3;
    // A harvest keeps the trace's completeness in trace-meta.json; the bench only measures.
    trace.meta.complete = true;
    let t1 = Instant::now();
    let ix = TraceIndex::new(&trace);
    let index_ms = t1.elapsed().as_secs_f64() * 1e3;
    let mut funcs: Vec<(usize, String, String)> = Vec::new();
    {
        let mut m: std::collections::BTreeMap<(String, String), usize> = Default::default();
        for (_, e) in ix.first_calls() {
            if !e.qualname().is_empty() {
                *m.entry((e.qualname().to_string(), e.file().to_string()))
                    .or_insert(0) += 1;
            }
        }
        funcs.extend(m.into_iter().map(|((q, f), n)| (n, q, f)));
    }
    funcs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut plan = Vec::new();
    for (_, q, f) in funcs.iter().take(a.functions) {
        plan.extend(questions(&ix, q, f));
    }
    if plan.is_empty() {
        bail!(
            "{}: no function with a qualname to ask about",
            a.trace.display()
        );
    }
    // Indexed: one index (built above), every question.
    let t2 = Instant::now();
    let mut indexed = Vec::with_capacity(plan.len());
    for (name, p) in &plan {
        let p = params(p.clone())?;
        indexed.push(extract_indexed(&ix, name, &p).ok());
    }
    let indexed_ms = t2.elapsed().as_secs_f64() * 1e3 + index_ms;
    // Per question: the trace indexed again for each.
    let t3 = Instant::now();
    let mut per = Vec::with_capacity(plan.len());
    for (name, p) in &plan {
        let p = params(p.clone())?;
        per.push(extract(&trace, name, &p).ok());
    }
    let per_ms = t3.elapsed().as_secs_f64() * 1e3;
    if per != indexed {
        bail!("the indexed answers differ from the per-question ones");
    }
    let answered = indexed.iter().filter(|a| a.is_some()).count();
    let out = json!({
        "trace": a.trace.display().to_string(),
        "events": trace.events.len(),
        "files_with_facts": trace.facts.len(),
        "functions": funcs.len().min(a.functions),
        "questions": plan.len(),
        "answered": answered,
        "read_ms": read_ms,
        "index_ms": index_ms,
        "per_question_ms": per_ms,
        "indexed_ms": indexed_ms,
        "per_question_ms_each": per_ms / plan.len() as f64,
        "indexed_ms_each": indexed_ms / plan.len() as f64,
        "speedup": per_ms / indexed_ms.max(1e-9),
    });
    println!("{}", serde_json::to_string(&out)?);
    Ok(ExitCode::SUCCESS)
}
