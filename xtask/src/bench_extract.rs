//! `cargo xtask bench extract [--trace FILE] [--functions N] [--json]`: the cost of answering
//! many questions of one trace, per question (the trace indexed again for each, as every
//! extraction cost before the index) versus one `TraceIndex` for all, side by side in one run
//! of the release `flux` (`flux bench-extract`).
//!
//! The trace defaults to the largest `trace.jsonl` a harvest kept under
//! `<workspace>/.flux-cache/runs/` (e.g. after `cargo xtask harvest --check instances/sympy`).
//! The machine's load is printed beside the figures; nothing here is asserted.
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[derive(clap::Args)]
pub struct Args {
    /// The trace to question (default: the largest kept harvest trace).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// How many functions to ask about (those with the most invocations).
    #[arg(long, default_value_t = 20)]
    functions: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// The largest `trace.jsonl` under `dir` (recursively).
fn largest_trace(dir: &Path) -> Option<PathBuf> {
    let mut best: Option<(u64, PathBuf)> = None;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.is_dir() {
                todo.push(p);
            } else if p.file_name().is_some_and(|n| n == "trace.jsonl")
                && best.as_ref().is_none_or(|(s, _)| meta.len() > *s)
            {
                best = Some((meta.len(), p));
            }
        }
    }
    best.map(|(_, p)| p)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(String::from))
        .unwrap_or_else(|| "?".into())
}

pub fn run(a: Args) -> Result<ExitCode> {
    let root = crate::workspace_root();
    let trace = match a.trace {
        Some(t) => t,
        None => match largest_trace(&root.join(".flux-cache/runs")) {
            Some(t) => t,
            None => bail!(
                "no kept trace under {}/.flux-cache/runs: run `cargo xtask harvest --check \
                 instances/sympy` first, or give --trace FILE",
                root.display()
            ),
        },
    };
    let flux = crate::bench_flux()?;
    let load_before = load();
    let out = Command::new(&flux)
        .args(["bench-extract", "--trace"])
        .arg(&trace)
        .args(["--functions", &a.functions.to_string()])
        .output()
        .with_context(|| format!("running {}", flux.display()))?;
    if !out.status.success() {
        bail!(
            "flux bench-extract failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut v: Value = serde_json::from_slice(&out.stdout).context("bench-extract output")?;
    v["load_1min"] = Value::String(format!("{load_before} -> {}", load()));
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    println!(
        "trace:      {} ({} events)",
        v["trace"].as_str().unwrap_or("?"),
        v["events"]
    );
    println!(
        "questions:  {} about {} functions ({} answered)",
        v["questions"], v["functions"], v["answered"]
    );
    println!("index:      {:.1} ms (built once)", f("index_ms"));
    println!(
        "per question (index rebuilt each time): {:>9.1} ms total, {:>8.2} ms each",
        f("per_question_ms"),
        f("per_question_ms_each")
    );
    println!(
        "one index for all:                      {:>9.1} ms total, {:>8.2} ms each",
        f("indexed_ms"),
        f("indexed_ms_each")
    );
    println!("speedup:    {:.1}x", f("speedup"));
    println!("load (1 min): {}", v["load_1min"].as_str().unwrap_or("?"));
    Ok(ExitCode::SUCCESS)
}
