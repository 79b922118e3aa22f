//! `cargo xtask bench harvest [--json] [--rounds N] [--instances DIR…|all] [--no-slice]`: what
//! tracing an instance's test costs, flux against a `sys.settrace` reference tracer, side by
//! side in one run.
//!
//! Workloads: starter instances (`instances/<repo>/<id>/`; default a handful across sympy and
//! cfn-lint on python3.11 and yt-dlp on python3.15) and the SymPy slice on both interpreters
//! (`xtask/bench/sympy/sympy-slice/`: 29 modules of SymPy's own test suite from the
//! python3.15 image, ~33 s untraced, and `sympy-slice-311/`, the same from the python3.11
//! image; a callee question about `Add.flatten` with `scope = "targets"`; `flux-auto-run` is
//! not run on them).
//!
//! Completeness is part of every figure: a flux run whose trace is incomplete, or whose trace
//! gives the instance's extractor no answer, is marked in the table (`INCOMPLETE`, `no gold`)
//! and makes the bench exit non-zero — a cost paid for no gold answer is no result. Each runs in its own image, the same container and command, four ways,
//! interleaved round by round (the order rotates each round):
//! - `untraced`: no tracer;
//! - `flux-auto`: flux as harvests run it (`--calls auto`: USDT + the hook, the instance's
//!   `[tracing] scope`: the starter instances trace only inside their tests);
//! - `flux-auto-run`: the same with the whole run traced (`--scope run`): what test windows save;
//! - `flux-hook`: flux's in-process witness alone (`--calls hook`);
//! - `reference`: `xtask/bench/reference_tracer.py`, a settrace tracer in SWE-Flux's style,
//!   injected as flux's hook is (run directory on `PYTHONPATH`, `PYTEST_PLUGINS`, the instance's
//!   `[tracing]` table as its config), logging into the run directory.
//!
//! The time is the program's wall time, from the gate's release to its exit (container
//! create/start, BPF load/attach before, and drain/merge after are not in it; the merge is
//! reported as `post_seconds`). Medians over rounds; ratios to untraced per workload, and their
//! geometric mean across the starter instances. Events: the merged trace's (flux) or the log's
//! lines (reference); lost events are summed over every run. Timings are never asserted.
//!
//! Each run is one `flux bench-run` of the release binary, so xtask never links the BPF loader.
use super::median;
#[path = "bench_suite.rs"]
mod bench_suite;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const CONFIGS: [&str; 5] = [
    "untraced",
    "flux-auto",
    "flux-auto-run",
    "flux-hook",
    "reference",
];

/// The flux configurations (their lost events must be 0; compared with the reference).
const FLUX_CONFIGS: [&str; 3] = ["flux-auto", "flux-auto-run", "flux-hook"];

/// The default handful: two per repository, different kinds.
const DEFAULT_INSTANCES: &[&str] = &[
    "instances/sympy/sympy-multiplicity-calls",
    "instances/sympy/sympy-partitions-state",
    "instances/cfn-lint/cfnlint-decode-coverage",
    "instances/cfn-lint/cfnlint-count-occurrences-loop",
    "instances/yt-dlp/ytdlp-parse-codecs-loop",
    "instances/yt-dlp/ytdlp-jsinterp-throw",
];

/// `--suite sympy`: SymPy's whole test suite under the slice's question, on 3.15 and 3.11.
const SUITES: [&str; 2] = [
    "xtask/bench/sympy/sympy-suite",
    "xtask/bench/sympy/sympy-suite-311",
];

/// A copy of the workload in `dir` that runs the `k_n` part of it under `scratch`: every N-th
/// module of its `modules.txt` from the K-th in place of `--pyargs PACKAGE`, or without a
/// `modules.txt` the runner's own `--split K/N` appended to its test command.
fn split_copy(dir: &Path, k_n: &str, scratch: &Path) -> Result<PathBuf> {
    let ok = k_n
        .split_once('/')
        .and_then(|(k, n)| Some((k.parse::<u32>().ok()?, n.parse::<u32>().ok()?)))
        .is_some_and(|(k, n)| k >= 1 && k <= n);
    if !ok {
        bail!("--split {k_n}: expected K/N with 1 <= K <= N");
    }
    let text = std::fs::read_to_string(dir.join("instance.toml"))?;
    let mut spec: toml::Table = text.parse()?;
    let id = format!(
        "{}-part-{}",
        spec.get("id").and_then(|v| v.as_str()).unwrap_or("suite"),
        k_n.replace('/', "-of-")
    );
    spec.insert("id".into(), id.clone().into());
    let Some(cmd) = spec
        .get_mut("test")
        .and_then(|t| t.get_mut("command"))
        .and_then(|c| c.as_array_mut())
    else {
        bail!("{}: no [test] command", dir.display());
    };
    let (k, n) = k_n.split_once('/').expect("checked above");
    let (k, n): (usize, usize) = (k.parse()?, n.parse()?);
    let modules = dir.join("modules.txt");
    if modules.is_file() {
        // Part K of N is every N-th module from the K-th: pytest then imports only the part's
        // test modules (SymPy's own `--split` collects the whole suite in every part, four
        // minutes each here), and round-robin spreads each package's modules over the parts.
        let list = std::fs::read_to_string(&modules)
            .with_context(|| format!("reading {}", modules.display()))?;
        let at = cmd.iter().position(|a| a.as_str() == Some("--pyargs"));
        let Some(at) = at.filter(|&i| i + 1 < cmd.len()) else {
            bail!(
                "{}: modules.txt needs the command to end in `--pyargs PACKAGE`",
                dir.display()
            );
        };
        cmd.drain(at..at + 2);
        let mine = list
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .enumerate()
            .filter(|(i, _)| i % n == k - 1)
            .map(|(_, m)| toml::Value::from(m));
        cmd.extend(mine);
    } else {
        cmd.push("--split".into());
        cmd.push(k_n.into());
    }
    let out = scratch.join("sympy").join(id);
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("instance.toml"), toml::to_string(&spec)?)?;
    std::fs::copy(dir.join("README.md"), out.join("README.md"))?;
    Ok(out)
}

/// The suites `--interpreter` selects (both without it).
fn suites(interpreter: Option<&str>) -> Vec<&'static str> {
    SUITES
        .into_iter()
        .filter(|s| match interpreter {
            Some("3.11") => s.ends_with("-311"),
            Some(_) => !s.ends_with("-311"),
            None => true,
        })
        .collect()
}

/// `--suite … --parts N --ledger FILE`: measure what the ledger lacks, then report it.
fn suite_parts(
    a: &Args,
    root: &Path,
    flux: &Path,
    n: u32,
    configs: &[String],
) -> Result<std::process::ExitCode> {
    if n == 0 {
        bail!("--parts 0: a suite has at least one part");
    }
    let ledger = a.ledger.as_deref().context("--parts needs --ledger")?;
    let named: Vec<(String, PathBuf)> = suites(a.interpreter.as_deref())
        .into_iter()
        .map(|s| (workload_name(&root.join(s)), root.join(s)))
        .collect();
    let only = match &a.part_range {
        None => None,
        Some(r) => {
            let (x, y) = r
                .split_once('-')
                .and_then(|(x, y)| Some((x.parse::<u32>().ok()?, y.parse::<u32>().ok()?)))
                .filter(|(x, y)| 1 <= *x && x <= y && *y <= n)
                .with_context(|| {
                    format!("--part-range {r}: expected A-B with 1 <= A <= B <= {n}")
                })?;
            Some((x, y))
        }
    };
    if !a.report_only {
        bench_suite::measure(&bench_suite::Plan {
            root,
            flux,
            suites: named.clone(),
            parts: n,
            only,
            rerun: a.rerun,
            configs,
            ledger,
            max_events: a.max_events,
        })?;
    }
    let names: Vec<String> = named.into_iter().map(|(n, _)| n).collect();
    let ok = bench_suite::report(ledger, &names, n, configs, a.json)?;
    Ok(if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// `<repo>/<id>` of a workload directory.
fn workload_name(d: &Path) -> String {
    let id = d
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let repo = d
        .parent()
        .and_then(|p| p.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{repo}/{id}")
}

const SLICES: [&str; 2] = [
    "xtask/bench/sympy/sympy-slice",
    "xtask/bench/sympy/sympy-slice-311",
];
const REFERENCE: &str = "xtask/bench/reference_tracer.py";

#[derive(clap::Args, Clone)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Interleaved rounds (the median is reported).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Instance directories (or directories holding them), or `all` for every starter instance;
    /// default: six across sympy, cfn-lint and yt-dlp.
    #[arg(long, num_args = 1..)]
    instances: Vec<String>,
    /// Leave out the SymPy slice.
    #[arg(long)]
    no_slice: bool,
    /// Only the SymPy slice.
    #[arg(long, conflicts_with = "no_slice")]
    slice_only: bool,
    /// A whole test suite instead of the instances and slices: `sympy` (SymPy's own suite as
    /// its configuration runs it by default, on 3.15 and 3.11: `xtask/bench/sympy/sympy-suite*`).
    #[arg(long, value_parser = ["sympy"], conflicts_with_all = ["slice_only", "instances"])]
    suite: Option<String>,
    /// With `--suite`: run only the K-th of N parts of it (`K/N`: every N-th module of its
    /// `modules.txt` from the K-th).
    #[arg(long, requires = "suite", conflicts_with = "parts")]
    split: Option<String>,
    /// With `--suite`: the whole suite as N parts (as `--split`), every run appended
    /// to `--ledger` as it finishes; a rerun with the same ledger runs only what it lacks
    /// (`bench_suite`).
    #[arg(long, requires_all = ["suite", "ledger"])]
    parts: Option<u32>,
    /// With `--parts`: only parts A..=B (`A-B`), e.g. to spread a suite over machines.
    #[arg(long, requires = "parts")]
    part_range: Option<String>,
    /// With `--parts`: the ledger (JSON lines) runs are appended to and figures read from.
    #[arg(long, requires = "parts")]
    ledger: Option<PathBuf>,
    /// With `--parts`: print the ledger's figures without running anything.
    #[arg(long, requires = "parts")]
    report_only: bool,
    /// With `--part-range`: run those parts again even where the ledger has them (the new
    /// entries win: e.g. parts measured while the machine was busy, see each entry's `load`).
    #[arg(long, requires = "part_range")]
    rerun: bool,
    /// With `--parts`: the event budget of flux's runs (`flux bench-run --max-events`; default
    /// flux's 20 M), for parts whose program makes more events than the default lets through
    /// (each ledger entry records it).
    #[arg(long, requires = "parts")]
    max_events: Option<u64>,
    /// With `--suite`: only the suite on this interpreter (`3.15` or `3.11`).
    #[arg(long, requires = "suite", value_parser = ["3.15", "3.11"])]
    interpreter: Option<String>,
    /// Configurations to run (comma-separated; `untraced` is always run).
    #[arg(long, value_delimiter = ',', default_values_t = CONFIGS.map(String::from))]
    configs: Vec<String>,
    /// Use this flux binary instead of building the release one.
    #[arg(long)]
    flux: Option<PathBuf>,
    /// Print the table of a report saved with `--json` instead of measuring.
    #[arg(long)]
    render: Option<PathBuf>,
}

fn find_instances(p: &Path, out: &mut Vec<PathBuf>) {
    if p.join("instance.toml").is_file() {
        out.push(p.to_path_buf());
        return;
    }
    if let Ok(rd) = std::fs::read_dir(p) {
        let mut subs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        subs.sort();
        for s in subs {
            find_instances(&s, out);
        }
    }
}

/// One `flux bench-run`; its JSON, or why it failed. With `failed_tests_ok` (a whole suite),
/// pytest's exit 1 (some tests failed) is a measurement, not a failure: the ledger keeps the exit
/// code and the report compares it across configurations.
fn one(
    flux: &Path,
    root: &Path,
    dir: &Path,
    config: &str,
    failed_tests_ok: bool,
    max_events: Option<u64>,
) -> Result<Value> {
    let mut c = Command::new(flux);
    c.arg("bench-run");
    if let Some(m) = max_events.filter(|_| config.starts_with("flux")) {
        c.arg("--max-events").arg(m.to_string());
    }
    match config {
        "untraced" => c.args(["--witness", "none"]),
        "flux-auto" => c.args(["--witness", "flux", "--calls", "auto"]),
        // The same with the whole run traced, whatever the instance's scope: what test
        // windows save.
        "flux-auto-run" => c.args(["--witness", "flux", "--calls", "auto", "--scope", "run"]),
        "flux-hook" => c.args(["--witness", "flux", "--calls", "hook"]),
        "reference" => c
            .args(["--witness", "reference", "--reference-tracer"])
            .arg(root.join(REFERENCE)),
        other => bail!(
            "unknown configuration {other} (known: {})",
            CONFIGS.join(", ")
        ),
    };
    c.arg(dir).current_dir(root);
    let o = c.output().context("running flux bench-run")?;
    if !o.status.success() {
        bail!(
            "flux bench-run {config} {} failed ({}): {}",
            dir.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let v: Value = serde_json::from_slice(&o.stdout).with_context(|| {
        format!(
            "flux bench-run printed {:?}",
            String::from_utf8_lossy(&o.stdout)
        )
    })?;
    let accepted = if failed_tests_ok { 0..=1 } else { 0..=0 };
    if !v["exit_code"]
        .as_i64()
        .is_some_and(|c| accepted.contains(&c))
    {
        bail!(
            "{config} {}: the test exited with {}{} (run dir removed; rerun with `flux bench-run --keep-run-dir`)",
            dir.display(),
            v["exit_code"],
            why_killed(&v)
        );
    }
    Ok(v)
}

/// What a traced run that ended badly says of itself: its events and the problems its trace
/// records (e.g. the event budget that stopped the program: exit 137 alone says only "killed").
fn why_killed(v: &Value) -> String {
    let problems: Vec<&str> = v["problems"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match (v["events"].as_u64(), problems.is_empty()) {
        (None, _) => String::new(),
        (Some(n), true) => format!(" after {n} events"),
        (Some(n), false) => format!(" after {n} events; its trace: {}", problems.join("; ")),
    }
}

fn geomean(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    Some((v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

#[derive(Default)]
struct Cell {
    secs: Vec<f64>,
    post: Vec<f64>,
    events: u64,
    /// Of `events`, those inside a test window (flux runs).
    in_tests: Option<u64>,
    lost: u64,
    incomplete: u64,
    /// Complete runs whose trace gave the instance's extractor no answer.
    no_gold: u64,
    /// The gold answers' digests (`sha256:…`), run by run.
    gold: Vec<String>,
    /// flux's peak resident set over the runs (the agent: drain, merge, extraction).
    max_rss: u64,
    errors: Vec<String>,
    /// Not run on this workload, and why.
    skipped: Option<String>,
}

pub fn run(a: Args) -> Result<std::process::ExitCode> {
    if let Some(f) = &a.render {
        let v: Value =
            serde_json::from_slice(&std::fs::read(f).with_context(|| format!("{}", f.display()))?)?;
        print_table(&v);
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let root = crate::workspace_root();
    // `--report-only` reads the ledger: it runs nothing, so it builds nothing.
    let flux = match &a.flux {
        Some(f) => std::fs::canonicalize(f).with_context(|| format!("{}", f.display()))?,
        None if a.report_only => PathBuf::new(),
        None => crate::bench_flux()?,
    };
    let mut configs: Vec<String> = vec!["untraced".into()];
    for c in &a.configs {
        if !CONFIGS.contains(&c.as_str()) {
            bail!("unknown configuration {c} (known: {})", CONFIGS.join(", "));
        }
        if !configs.contains(c) {
            configs.push(c.clone());
        }
    }
    if let Some(n) = a.parts {
        return suite_parts(&a, &root, &flux, n, &configs);
    }
    let mut dirs = Vec::new();
    // Workload copies (`--split`) live here until the bench ends.
    let scratch = tempfile::tempdir()?;
    if a.suite.is_some() {
        for s in suites(a.interpreter.as_deref()) {
            dirs.push(match &a.split {
                Some(k_n) => split_copy(&root.join(s), k_n, scratch.path())?,
                None => root.join(s),
            });
        }
    } else if !a.slice_only {
        if a.instances.is_empty() {
            dirs.extend(DEFAULT_INSTANCES.iter().map(|d| root.join(d)));
        } else if a.instances.iter().any(|s| s == "all") {
            find_instances(&root.join("instances"), &mut dirs);
        } else {
            for s in &a.instances {
                let p = PathBuf::from(s);
                let p = if p.is_absolute() {
                    p
                } else {
                    std::env::current_dir()?.join(p)
                };
                let before = dirs.len();
                find_instances(&p, &mut dirs);
                if dirs.len() == before {
                    bail!("{s}: no instance.toml at or under it");
                }
            }
        }
    }
    // Suites count as slices: no geometric mean over them, no whole-run-traced config.
    let n_instances = if a.suite.is_some() { 0 } else { dirs.len() };
    if !a.no_slice && a.suite.is_none() {
        dirs.extend(SLICES.iter().map(|s| root.join(s)));
    }
    let rounds = a.rounds.max(1);
    let names: Vec<String> = dirs.iter().map(|d| workload_name(d)).collect();
    let mut cells: Vec<BTreeMap<String, Cell>> = dirs.iter().map(|_| BTreeMap::new()).collect();
    for r in 0..rounds {
        for (i, d) in dirs.iter().enumerate() {
            for k in 0..configs.len() {
                let c = &configs[(k + r + i) % configs.len()];
                eprintln!("bench harvest: round {}/{rounds}: {} {c}", r + 1, names[i]);
                let cell = cells[i].entry(c.clone()).or_default();
                if i >= n_instances && c == "flux-auto-run" {
                    // Every call of the suite would be an event: far over the event budget
                    // (the agent would stop it), and nothing a harvest would ever run.
                    eprintln!(
                        "  not run on the slice (the whole run traced: over the event budget)"
                    );
                    cell.skipped = Some("the whole run traced is over the event budget".into());
                    continue;
                }
                match one(&flux, &root, d, c, a.suite.is_some(), None) {
                    Ok(v) => {
                        let p = v["program_seconds"].as_f64().unwrap_or(0.0);
                        eprintln!(
                            "  {p:.2}s, events {}, lost {}",
                            v["events"].as_u64().unwrap_or(0),
                            v["lost_events"].as_u64().unwrap_or(0)
                        );
                        cell.secs.push(p);
                        cell.post
                            .push(v["total_seconds"].as_f64().unwrap_or(0.0) - p);
                        cell.events = v["events"].as_u64().unwrap_or(0);
                        cell.in_tests = v["events_in_tests"].as_u64();
                        cell.lost += v["lost_events"].as_u64().unwrap_or(0);
                        cell.max_rss = cell
                            .max_rss
                            .max(v["agent_max_rss_bytes"].as_u64().unwrap_or(0));
                        if v["complete"].as_bool() == Some(false) {
                            cell.incomplete += 1;
                            if let Some(ps) = v["problems"].as_array() {
                                for p in ps {
                                    eprintln!("  incomplete: {}", p.as_str().unwrap_or(""));
                                }
                            }
                        } else if v["complete"].as_bool() == Some(true) {
                            match v["gold"]["sha256"].as_str() {
                                Some(g) => {
                                    eprintln!(
                                        "  gold {g} (size {})",
                                        v["gold"]["size"].as_u64().unwrap_or(0)
                                    );
                                    cell.gold.push(g.to_string());
                                }
                                None => {
                                    cell.no_gold += 1;
                                    eprintln!(
                                        "  no gold answer: {}",
                                        v["gold"]["error"].as_str().unwrap_or("?")
                                    );
                                }
                            }
                        }
                    }
                    Err(e) => {
                        eprintln!("  error: {e:#}");
                        cell.errors.push(format!("{e:#}"));
                    }
                }
            }
        }
    }
    // Per workload: medians and ratios.
    let mut workloads = Vec::new();
    let mut ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut totals: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let base = median(
            cells[i]
                .get("untraced")
                .map(|c| c.secs.clone())
                .unwrap_or_default(),
        );
        let mut per = serde_json::Map::new();
        for c in &configs {
            let cell = &cells[i][c];
            let secs = median(cell.secs.clone());
            let ratio = match (secs, base) {
                (Some(s), Some(b)) if b > 0.0 => Some(s / b),
                _ => None,
            };
            if i < n_instances {
                if let Some(r) = ratio {
                    ratios.entry(c.clone()).or_default().push(r);
                }
            }
            let t = totals.entry(c.clone()).or_default();
            t.0 += cell.events;
            t.1 += cell.lost;
            t.2 += cell.incomplete + cell.no_gold;
            per.insert(
                c.clone(),
                json!({
                    "seconds": secs,
                    "ratio_to_untraced": ratio,
                    "added_seconds": secs.zip(base).map(|(s, b)| s - b),
                    "post_seconds": median(cell.post.clone()),
                    "events": cell.events,
                    "events_in_tests": cell.in_tests,
                    "lost_events": cell.lost,
                    "incomplete_runs": cell.incomplete,
                    "runs_without_gold": cell.no_gold,
                    "agent_max_rss_bytes": cell.max_rss,
                    "gold": cell.gold,
                    "runs": cell.secs.len(),
                    "errors": cell.errors,
                    "not_run": cell.skipped,
                }),
            );
        }
        // flux's added time over the reference tracer's.
        let added = |c: &str| per.get(c).and_then(|v| v["added_seconds"].as_f64());
        let mut vs_ref = serde_json::Map::new();
        if let Some(rf) = added("reference") {
            for c in FLUX_CONFIGS {
                if let Some(x) = added(c) {
                    vs_ref.insert(c.into(), json!(if rf > 0.0 { x / rf } else { f64::NAN }));
                }
            }
        }
        workloads.push(json!({
            "name": name,
            "dir": dirs[i],
            "slice": i >= n_instances,
            "configs": per,
            "added_time_vs_reference": vs_ref,
        }));
    }
    let geo: BTreeMap<String, Option<f64>> = configs
        .iter()
        .map(|c| {
            (
                c.clone(),
                geomean(ratios.get(c).map(|v| v.as_slice()).unwrap_or(&[])),
            )
        })
        .collect();
    let slice = workloads
        .iter()
        .find(|w| w["slice"] == json!(true))
        .cloned();
    let slice_ratio = |c: &str| {
        slice
            .as_ref()
            .and_then(|s| s["configs"][c]["ratio_to_untraced"].as_f64())
    };
    let slice_vs_ref = |c: &str| {
        slice
            .as_ref()
            .and_then(|s| s["added_time_vs_reference"][c].as_f64())
    };
    let mut summary = serde_json::Map::new();
    for c in &configs {
        let (ev, lost, inc) = totals[c];
        summary.insert(
            c.clone(),
            json!({
                "ratio_to_untraced": geo[c],
                "sympy_slice_ratio_to_untraced": slice_ratio(c),
                "sympy_slice_added_time_vs_reference": slice_vs_ref(c),
                "events": ev,
                "lost_events": lost,
                "incomplete_runs": inc,
            }),
        );
    }
    let lost_flux: u64 = FLUX_CONFIGS
        .iter()
        .filter_map(|c| totals.get(*c))
        .map(|t| t.1)
        .sum();
    let without_gold: u64 = FLUX_CONFIGS
        .iter()
        .filter_map(|c| totals.get(*c))
        .map(|t| t.2)
        .sum();
    let targets = json!({
        "every_flux_run_complete_with_gold": without_gold == 0,
        "flux_auto_slice_ratio_le_1_5": slice_ratio("flux-auto").map(|r| r <= 1.5),
        "flux_auto_added_time_le_third_of_reference": slice_vs_ref("flux-auto").map(|r| r <= 1.0 / 3.0),
        "zero_lost_events": lost_flux == 0,
    });
    let report = json!({
        "rounds": rounds,
        "time": "program wall time, gate release to exit; median over rounds",
        "configs": summary,
        "geomean_ratio_to_untraced": geo,
        "geomean_over": n_instances,
        "targets": targets,
        "slice_ratio_flux_auto": slice_ratio("flux-auto"),
        "slice_added_time_vs_reference_flux_auto": slice_vs_ref("flux-auto"),
        "lost_events_flux": lost_flux,
        "flux_runs_without_gold": without_gold,
        "config_names": configs,
        "workloads": workloads,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    // A failed run, or a flux run that gave no gold answer (incomplete trace, extractor
    // refusal): the figures are no result.
    let failed = cells
        .iter()
        .any(|m| m.values().any(|c| !c.errors.is_empty()))
        || without_gold > 0;
    Ok(if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    })
}

/// The table of a report (what `--json` prints); `--render FILE` prints it for a saved one.
pub fn print_table(report: &Value) {
    let configs: Vec<String> = report["config_names"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_else(|| CONFIGS.iter().map(|s| s.to_string()).collect());
    let rounds = report["rounds"].as_u64().unwrap_or(0);
    println!(
        "flux bench harvest: program wall time (gate release → exit), median of {rounds} interleaved round(s); ratio to untraced; events/lost; gold (every run complete and answered) or INCOMPLETE/no-gold; flux's peak memory"
    );
    print!("{:<32}", "workload");
    for c in &configs {
        print!(" {:>36}", c);
    }
    println!(" {:>9}", "auto/ref+");
    for w in report["workloads"].as_array().into_iter().flatten() {
        print!("{:<32}", w["name"].as_str().unwrap_or(""));
        for c in &configs {
            let v = &w["configs"][c];
            let cell = match (v["seconds"].as_f64(), v["ratio_to_untraced"].as_f64()) {
                (Some(s), Some(_)) if c == "untraced" => format!("{s:.2}s"),
                (Some(s), Some(r)) => format!(
                    "{s:.2}s {r:.2}x {}/{} {}{}",
                    short(v["events"].as_u64().unwrap_or(0)),
                    v["lost_events"].as_u64().unwrap_or(0),
                    completeness(v),
                    match v["agent_max_rss_bytes"].as_u64() {
                        Some(b) if b > 0 && c.starts_with("flux") => {
                            format!(" {:.1}G", b as f64 / (1u64 << 30) as f64)
                        }
                        _ => String::new(),
                    }
                ),
                _ if v["not_run"].is_string() => "not run".into(),
                _ => "failed".into(),
            };
            print!(" {cell:>36}");
        }
        match w["added_time_vs_reference"]["flux-auto"].as_f64() {
            Some(x) => println!(" {x:>9.2}"),
            None => println!(" {:>9}", "-"),
        }
    }
    print!(
        "{:<32}",
        format!("geomean ({} instances)", report["geomean_over"])
    );
    for c in &configs {
        match report["geomean_ratio_to_untraced"][c].as_f64() {
            Some(g) => print!(" {:>36}", format!("{g:.2}x")),
            None => print!(" {:>36}", "-"),
        }
    }
    println!();
    let t = &report["targets"];
    let lost = report["lost_events_flux"].as_u64().unwrap_or(0);
    let without = report["flux_runs_without_gold"].as_u64().unwrap_or(0);
    println!(
        "every flux run complete with a gold answer: {}",
        if without == 0 {
            "met".to_string()
        } else {
            format!("NOT met ({without} runs incomplete or without gold: the bench fails)")
        }
    );
    println!(
        "targets (SymPy slice): flux-auto <= 1.5x untraced: {}; flux-auto added time <= 1/3 of the reference's: {}; 0 lost events: {}",
        fmt_target(report["slice_ratio_flux_auto"].as_f64(), "x", t["flux_auto_slice_ratio_le_1_5"].as_bool()),
        fmt_target(
            report["slice_added_time_vs_reference_flux_auto"].as_f64(),
            "",
            t["flux_auto_added_time_le_third_of_reference"].as_bool()
        ),
        if lost == 0 { "met".to_string() } else { format!("NOT met ({lost} lost)") },
    );
}

/// `gold` when every run of a flux cell was complete and answered, else what was not.
fn completeness(v: &Value) -> String {
    let inc = v["incomplete_runs"].as_u64().unwrap_or(0);
    let none = v["runs_without_gold"].as_u64().unwrap_or(0);
    let golds: std::collections::BTreeSet<&str> = v["gold"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str())
        .collect();
    match (inc, none) {
        (0, 0) if golds.len() > 1 => "GOLD-DIFFERS".into(),
        (0, 0) if golds.len() == 1 => "gold".into(),
        (0, 0) => "-".into(),
        (0, n) => format!("no-gold×{n}"),
        (n, _) => format!("INCOMPLETE×{n}"),
    }
}

fn short(n: u64) -> String {
    if n >= 10_000_000 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

fn fmt_target(v: Option<f64>, unit: &str, met: Option<bool>) -> String {
    match (v, met) {
        (Some(v), Some(true)) => format!("{v:.2}{unit} met"),
        (Some(v), Some(false)) => format!("{v:.2}{unit} NOT met"),
        _ => "not measured".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_and_geomean() {
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(super::median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(super::median(vec![]), None);
        let g = super::geomean(&[1.0, 4.0]).unwrap();
        assert!((g - 2.0).abs() < 1e-12);
    }

    /// Part 11 of the SymPy suite on 3.15 went into the ledger as "the test exited with 137":
    /// the event budget had stopped it, and the run's JSON that said so was dropped.
    #[test]
    fn suite_part_killed_by_the_event_budget_says_so() {
        let v = serde_json::json!({
            "exit_code": 137, "events": 20000000, "complete": false,
            "problems": ["over the event budget (--max-events): stopped"],
        });
        assert_eq!(
            super::why_killed(&v),
            " after 20000000 events; its trace: over the event budget (--max-events): stopped"
        );
        assert_eq!(super::why_killed(&serde_json::json!({"exit_code": 1})), "");
    }

    #[test]
    fn the_default_instances_and_the_slice_exist() {
        let root = crate::workspace_root();
        for d in super::DEFAULT_INSTANCES.iter().chain(super::SLICES.iter()) {
            assert!(root.join(d).join("instance.toml").is_file(), "{d}");
        }
        assert!(root.join(super::REFERENCE).is_file());
    }

    /// The suites' parts take every module exactly once (round-robin over `modules.txt`), drop
    /// `--pyargs sympy` and keep the rest of the command: the sum over parts is the suite.
    #[test]
    fn the_suites_parts_cover_every_module_once() {
        let root = crate::workspace_root();
        let scratch = tempfile::tempdir().unwrap();
        for suite in super::SUITES {
            let dir = root.join(suite);
            let all: Vec<String> = std::fs::read_to_string(dir.join("modules.txt"))
                .unwrap()
                .lines()
                .map(String::from)
                .collect();
            assert_eq!(all.len(), 604, "{suite}: SymPy 1.13.3 has 604 test modules");
            let mut seen = Vec::new();
            for k in 1..=7 {
                let copy = super::split_copy(&dir, &format!("{k}/7"), scratch.path()).unwrap();
                let spec: toml::Table = std::fs::read_to_string(copy.join("instance.toml"))
                    .unwrap()
                    .parse()
                    .unwrap();
                let cmd: Vec<String> = spec["test"]["command"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                assert!(
                    !cmd.iter().any(|a| a == "--pyargs" || a == "--split"),
                    "{cmd:?}"
                );
                assert!(
                    cmd.iter().any(|a| a == "not slow and not tooslow"),
                    "{cmd:?}"
                );
                seen.extend(cmd.into_iter().filter(|a| a.ends_with(".py")));
            }
            seen.sort();
            let mut want = all.clone();
            want.sort();
            assert_eq!(seen, want, "{suite}");
        }
    }
}
