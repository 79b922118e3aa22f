//! The harvest pipeline: from an instance directory to its gold `oracle.json`.
//!
//! Data flows one way: `instance.toml` → a run of the instance's test in its pinned image
//! under the tracer (USDT through eBPF + the in-process hook) → the merged trace → the
//! instance's extractor → screening → `oracle.json` + `callgraph.json`, written atomically.
//!
//! Per instance ([`harvest`] goes through them in order, ripgrep style: an error on one is
//! reported, changes the exit status, and the others still run):
//! 1. load and validate the instance (`flux_instance::load_instance`; errors name file and field);
//! 2. make a run directory `<cache>/runs/<id>-<utc time>/` holding a copy of the instance
//!    directory (what is mounted read-only at `/flux/instance`), the hook package, the hook's
//!    socket and, afterwards, `trace.jsonl`, `trace-meta.json`, `stdout.txt`, `stderr.txt`;
//! 3. run the test command, gated until the tracer is attached: in a container of the instance's
//!    image ([`Runtime::Docker`], network off, user 1000, the instance's timeout), or on the host
//!    in a venv of the instance's interpreter holding the image's pinned wheels installed offline
//!    from `<cache>/wheelhouse/` ([`Runtime::Host`]; every output is labelled
//!    [`NOT_REPRODUCIBLE`]);
//! 4. screening gates: the test ended as expected (exit 0 for `expect = "pass"`, non-zero for
//!    `"fail"`; a timeout or a kill is an error), the trace is complete with 0 lost events, the
//!    extractor succeeded, the answer fits the template, the answer is at least the kind's
//!    minimum size;
//! 5. write `oracle.json` (provenance: image id, interpreter version, flux version, trace digest,
//!    labels) and `callgraph.json`, refusing to replace a different existing answer unless
//!    [`HarvestOptions::replace`]. Both conflicts are checked before either file is written.
//!
//! With [`HarvestOptions::check`] nothing is written to the instance: the answer harvested from
//! a fresh run is compared with the stored one, and any difference is an error with a readable
//! diff.
//!
//! Architecture invariant: this crate decides nothing about what an answer is (that is
//! `flux-extract` through `flux-instance`) and nothing about how events are captured (that is
//! `flux-agent`); it sequences them and owns the gates.
use flux_extract::QuestionKind;
use flux_instance::{Instance, OnConflict, Oracle, WriteOutcome};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod diff;
mod docker;
mod host;
mod run_test;
mod rundir;
mod tracing;

pub use diff::json_diff;
pub use run_test::{run_test, run_traced, TestRun, TracedRun, Witness};

/// The label every output of a host run carries.
pub const NOT_REPRODUCIBLE: &str = "not reproducible";

/// Where the test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// Docker when the daemon answers, else the host.
    Auto,
    /// In a container of the instance's image.
    Docker,
    /// On the host, in a venv of the instance's interpreter (labelled "not reproducible").
    Host,
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Runtime::Auto => "auto",
            Runtime::Docker => "docker",
            Runtime::Host => "host",
        })
    }
}

#[derive(Clone, Debug)]
pub struct HarvestOptions {
    /// Harvest again and compare with the stored oracle instead of writing it.
    pub check: bool,
    pub runtime: Runtime,
    /// Replace an existing oracle (and call graph) with a different answer.
    pub replace: bool,
    /// The cache directory: `images/` (manifests), `wheelhouse/`, and where `runs/` and
    /// `venvs/` are made.
    pub cache_dir: PathBuf,
    /// Ring buffer size and polling of the USDT side.
    pub tracer: flux_agent::tracer::TracerOptions,
    /// Which witness supplies calls and returns: `Auto` (USDT where the interpreter can,
    /// the default and what gold answers are harvested with) or `Hook` (the in-process witness
    /// alone); benchmarks ([`run_test`]) compare the two.
    pub calls: flux_agent::merge::CallsMode,
    /// Benchmarks only: trace with this scope instead of the instance's `[tracing] scope`
    /// (`cargo xtask bench harvest` measures what test windows save).
    pub scope: Option<flux_trace::Scope>,
}

impl HarvestOptions {
    pub fn new(cache_dir: impl Into<PathBuf>) -> HarvestOptions {
        HarvestOptions {
            check: false,
            runtime: Runtime::Auto,
            replace: false,
            cache_dir: cache_dir.into(),
            tracer: flux_agent::tracer::TracerOptions::default(),
            calls: flux_agent::merge::CallsMode::Auto,
            scope: None,
        }
    }
}

/// What happened to one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// No oracle existed; it was written.
    Created,
    /// The stored oracle holds the same answer; nothing was changed.
    Unchanged,
    /// A different stored answer was replaced (`--replace`).
    Replaced,
    /// `--check`: the fresh run gave the stored answer.
    Reproduced,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Created => "created",
            Status::Unchanged => "unchanged",
            Status::Replaced => "replaced",
            Status::Reproduced => "reproduced",
            Status::Failed => "failed",
        }
    }
}

/// One instance's result.
#[derive(Clone, Debug, Serialize)]
pub struct InstanceReport {
    /// The instance directory.
    pub dir: PathBuf,
    /// `<repository>/<id>` when the instance loaded, else the directory.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<QuestionKind>,
    pub status: Status,
    /// The error, with its causes, when `status` is `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run directory (trace, logs), when a run was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<PathBuf>,
    /// The runtime the test ran in.
    pub runtime: Runtime,
    pub labels: Vec<String>,
    /// Events in the merged trace, when a run was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<usize>,
    /// From the run's start to the program's exit and the trace merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_seconds: Option<f64>,
    pub seconds: f64,
}

/// Everything [`harvest`] did.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The runtime used (never `auto`).
    pub runtime: Runtime,
    /// Why `auto` chose the host, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub instances: Vec<InstanceReport>,
}

impl Report {
    pub fn failed(&self) -> usize {
        self.instances
            .iter()
            .filter(|i| i.status == Status::Failed)
            .count()
    }

    pub fn ok(&self) -> bool {
        self.failed() == 0
    }
}

/// Errors that stop the whole harvest (everything else is per instance).
#[derive(Debug)]
pub struct FatalError(pub anyhow::Error);

impl std::fmt::Display for FatalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for FatalError {}

/// The runtime resolved once for the whole harvest.
pub(crate) enum Backend {
    Docker(flux_container::Runtime),
    Host,
}

/// Harvest (or `check`) every instance at or under `paths`, in order. `progress` is called
/// once per instance as soon as it is done. Fails as a whole only when nothing can run
/// (tracing is impossible here, or Docker was asked for and does not answer).
pub async fn harvest(
    paths: &[PathBuf],
    opts: &HarvestOptions,
    progress: &mut dyn FnMut(&InstanceReport),
) -> Result<Report, FatalError> {
    flux_agent::tracer::can_trace()
        .map_err(|e| FatalError(anyhow::anyhow!("cannot trace here: {e}")))?;
    let (backend, runtime, note) = match opts.runtime {
        Runtime::Docker => {
            let rt = flux_container::Runtime::connect()
                .await
                .map_err(|e| FatalError(anyhow::Error::new(e).context("--runtime docker")))?;
            (Backend::Docker(rt), Runtime::Docker, None)
        }
        Runtime::Host => (Backend::Host, Runtime::Host, None),
        Runtime::Auto => match flux_container::Runtime::connect().await {
            Ok(rt) => (Backend::Docker(rt), Runtime::Docker, None),
            Err(e) => (
                Backend::Host,
                Runtime::Host,
                Some(format!(
                    "Docker does not answer ({e}); running on the host, outputs labelled \
                     \"{NOT_REPRODUCIBLE}\""
                )),
            ),
        },
    };
    if let Backend::Docker(rt) = &backend {
        // What a killed earlier run left behind.
        let _ = rt.remove_orphans().await;
    }
    let mut dirs: Vec<Result<PathBuf, InstanceReport>> = Vec::new();
    for p in paths {
        match flux_instance::discover(std::slice::from_ref(p)) {
            Ok(found) if found.is_empty() => dirs.push(Err(failed_report(
                p,
                runtime,
                anyhow::anyhow!("{}: no instance.toml at or under this path", p.display()),
            ))),
            Ok(found) => dirs.extend(found.into_iter().map(Ok)),
            Err(e) => dirs.push(Err(failed_report(p, runtime, e.into()))),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut instances = Vec::new();
    for d in dirs {
        let r = match d {
            Err(r) => r,
            Ok(dir) => {
                let key = std::path::absolute(&dir).unwrap_or_else(|_| dir.clone());
                if !seen.insert(key) {
                    continue;
                }
                harvest_one(&dir, opts, &backend, runtime).await
            }
        };
        progress(&r);
        instances.push(r);
    }
    Ok(Report {
        runtime,
        note,
        instances,
    })
}

/// [`harvest`] on a runtime of its own.
pub fn harvest_blocking(
    paths: &[PathBuf],
    opts: &HarvestOptions,
    progress: &mut dyn FnMut(&InstanceReport),
) -> Result<Report, FatalError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| FatalError(anyhow::Error::new(e).context("starting tokio")))?;
    rt.block_on(harvest(paths, opts, progress))
}

fn failed_report(dir: &Path, runtime: Runtime, e: anyhow::Error) -> InstanceReport {
    InstanceReport {
        dir: dir.to_path_buf(),
        name: dir.display().to_string(),
        repository: None,
        kind: None,
        status: Status::Failed,
        error: Some(format!("{e:#}")),
        run_dir: None,
        runtime,
        labels: Vec::new(),
        events: None,
        run_seconds: None,
        seconds: 0.0,
    }
}

async fn harvest_one(
    dir: &Path,
    opts: &HarvestOptions,
    backend: &Backend,
    runtime: Runtime,
) -> InstanceReport {
    let t0 = Instant::now();
    let inst = match flux_instance::load_instance(dir) {
        Ok(i) => i,
        Err(e) => return failed_report(dir, runtime, e.into()),
    };
    let name = format!("{}/{}", inst.spec.repository, inst.id());
    let mut report = InstanceReport {
        dir: dir.to_path_buf(),
        name: name.clone(),
        repository: Some(inst.spec.repository.clone()),
        kind: Some(inst.kind()),
        status: Status::Failed,
        error: None,
        run_dir: None,
        runtime,
        labels: Vec::new(),
        events: None,
        run_seconds: None,
        seconds: 0.0,
    };
    match harvest_instance(&inst, opts, backend, &mut report).await {
        Ok(status) => report.status = status,
        Err(e) => {
            report.status = Status::Failed;
            report.error = Some(format!("instance {name}: {e:#}"));
        }
    }
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// What a traced run of an instance's test produced.
pub(crate) struct RunOutput {
    pub trace: flux_trace::Trace,
    /// Exit code of the test command (128 + signal when killed).
    pub exit_code: i32,
    pub timed_out: Option<Duration>,
    /// Why the program was killed (OOM, signal), if it was.
    pub killed: Option<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// `sha256:…` of the image, when the run was in a container.
    pub image_id: String,
    /// `X.Y.Z` of the interpreter traced.
    pub interpreter_version: String,
    /// Labels every output must carry.
    pub labels: Vec<String>,
}

async fn harvest_instance(
    inst: &Instance,
    opts: &HarvestOptions,
    backend: &Backend,
    report: &mut InstanceReport,
) -> anyhow::Result<Status> {
    use anyhow::Context;
    // Fail before running anything if there is nothing to check against.
    let stored = if opts.check {
        let path = inst.oracle_path();
        if !path.exists() {
            anyhow::bail!(
                "--check: {} does not exist (harvest it first with `flux harvest {}`)",
                path.display(),
                inst.dir.display()
            );
        }
        Some(flux_instance::read_oracle(&inst.dir)?)
    } else {
        None
    };
    if let Backend::Docker(rt) = backend {
        // Before anything is made for the run.
        docker::image_id(rt, &inst.spec.image).await?;
    }
    let run_dir = rundir::make(&opts.cache_dir, inst)?;
    report.run_dir = Some(run_dir.clone());
    let t_run = Instant::now();
    let out = match backend {
        Backend::Docker(rt) => docker::run(rt, inst, &run_dir, opts).await?,
        Backend::Host => host::run_host(inst, &run_dir, opts).await?,
    };
    report.run_seconds = Some(t_run.elapsed().as_secs_f64());
    report.events = Some(out.trace.events.len());
    report.labels = out.labels.clone();
    let phase = |what: &str, t: Instant| {
        if std::env::var_os("FLUX_HARVEST_TIMINGS").is_some() {
            eprintln!(
                "flux-harvest: {}: {what} {:.2}s",
                inst.id(),
                t.elapsed().as_secs_f64()
            );
        }
    };
    phase("run and merge", t_run);
    let t = Instant::now();
    let trace_sha256 = rundir::keep_outputs(&run_dir, &out).context("writing the run's outputs")?;
    phase("trace.jsonl", t);
    screen_run(inst, &out, &run_dir)?;
    let t = Instant::now();
    let oracle = build_oracle(inst, &out, trace_sha256)?;
    phase("extract", t);
    let t = Instant::now();
    // Scope "targets": the trace holds only what runs inside targeted code, not a call graph
    // of the test (none is written or compared).
    let graph =
        if opts.scope.unwrap_or(inst.spec.tracing.scope) == flux_trace::Scope::Targets {
            None
        } else {
            Some(inst.call_graph(&out.trace).map_err(|e| {
                anyhow::anyhow!("call graph: {}", strip_id(&e.to_string(), inst.id()))
            })?)
        };
    phase("call graph", t);
    std::fs::write(
        run_dir.join("oracle.json"),
        serde_json::to_string_pretty(&oracle)? + "\n",
    )
    .context("keeping the harvested oracle in the run directory")?;
    match stored {
        Some(stored) => {
            check_against(inst, &stored, &oracle, graph.as_ref())?;
            Ok(Status::Reproduced)
        }
        None => write_outputs(inst, &oracle, graph.as_ref(), opts.replace, &run_dir),
    }
}

/// The gates after the run: extract, check the answer against the template, screen by size;
/// then the oracle with its provenance. (What `Instance::build_oracle` does, with the trace's
/// digest taken while `trace.jsonl` was written instead of serialising the trace once more:
/// a sympy test's trace holds millions of events.)
fn build_oracle(inst: &Instance, out: &RunOutput, trace_sha256: String) -> anyhow::Result<Oracle> {
    let answer = inst
        .extract(&out.trace)
        .map_err(|e| anyhow::anyhow!("{}", strip_id(&e.to_string(), inst.id())))?;
    let size = flux_extract::answer_size(&answer);
    let min = inst.min_answer_size();
    if size < min {
        anyhow::bail!(
            "screened out: answer size {size} is below the minimum {min} for {}",
            inst.kind()
        );
    }
    let template_answer: Value = serde_json::from_str(&inst.spec.template)?;
    let mut labels = out.trace.meta.labels.clone();
    for l in &out.labels {
        if !labels.contains(l) {
            labels.push(l.clone());
        }
    }
    Ok(Oracle {
        question_kind: inst.kind(),
        question: inst.spec.question.clone(),
        template_answer,
        oracle_answer: answer,
        provenance: flux_instance::Provenance {
            image: inst.spec.image.clone(),
            image_id: out.image_id.clone(),
            interpreter: out.interpreter_version.clone(),
            flux_version: env!("CARGO_PKG_VERSION").to_string(),
            trace_sha256,
            harvested_at: flux_instance::utc_timestamp(std::time::SystemTime::now()),
            complete: out.trace.meta.complete,
            labels,
            extractor: inst.spec.extractor.name.clone(),
            params: inst.spec.extractor.params.clone(),
            order_insensitive: inst.spec.order_insensitive.clone(),
        },
    })
}

/// `flux_instance` errors start with the instance id; the report names the instance already.
fn strip_id(msg: &str, id: &str) -> String {
    msg.strip_prefix(&format!("{id}: "))
        .unwrap_or(msg)
        .to_string()
}

/// The gates that come before the extractor: how the test ended, and whether the trace is whole.
fn screen_run(inst: &Instance, out: &RunOutput, run_dir: &Path) -> anyhow::Result<()> {
    let tail = |b: &[u8]| -> String {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        let from = lines.len().saturating_sub(15);
        lines[from..]
            .iter()
            .map(|l| format!("\n    | {l}"))
            .collect()
    };
    let logs = || {
        format!(
            "\n  stdout (end):{}\n  stderr (end):{}\n  (full logs and trace in {})",
            tail(&out.stdout),
            tail(&out.stderr),
            run_dir.display()
        )
    };
    if let Some(after) = out.timed_out {
        anyhow::bail!(
            "the test timed out after {}s (test.timeout_s) and was killed{}",
            after.as_secs(),
            logs()
        );
    }
    // The event budget stops the program with SIGKILL: name the budget, not the signal.
    let budget = flux_merge::usdt::BUDGET_PROBLEM;
    if let Some(p) = out.trace.meta.problems.iter().find(|p| p.starts_with(budget)) {
        anyhow::bail!("{p} (raise it with flux harvest --max-events){}", logs());
    }
    if let Some(why) = &out.killed {
        anyhow::bail!("the test was killed: {why}{}", logs());
    }
    match inst.spec.test.expect {
        flux_instance::Expect::Pass if out.exit_code != 0 => anyhow::bail!(
            "the test was expected to pass but exited with code {}{}",
            out.exit_code,
            logs()
        ),
        flux_instance::Expect::Fail if out.exit_code == 0 => anyhow::bail!(
            "the test was expected to fail but exited with code 0{}",
            logs()
        ),
        _ => {}
    }
    let m = &out.trace.meta;
    if !m.complete || m.lost_events > 0 {
        anyhow::bail!(
            "the trace is incomplete ({} events lost{}); no gold answer is taken from it (trace in {})",
            m.lost_events,
            if m.problems.is_empty() {
                String::new()
            } else {
                format!(": {}", m.problems.join("; "))
            },
            run_dir.display()
        );
    }
    Ok(())
}

/// `--check`: the fresh answer (and call graph, if one is stored) must equal the stored ones.
fn check_against(
    inst: &Instance,
    stored: &Oracle,
    fresh: &Oracle,
    graph: Option<&Value>,
) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    if stored.oracle_answer != fresh.oracle_answer {
        problems.push(format!(
            "oracle_answer differs from {}:\n{}",
            inst.oracle_path().display(),
            json_diff(
                &stored.oracle_answer,
                &fresh.oracle_answer,
                "stored",
                "harvested"
            )
        ));
    }
    if stored.question_kind != fresh.question_kind
        || stored.template_answer != fresh.template_answer
    {
        problems.push(format!(
            "question_kind/template_answer differ: stored {} {}, instance {} {}",
            stored.question_kind,
            stored.template_answer,
            fresh.question_kind,
            fresh.template_answer
        ));
    }
    let graph_path = inst.dir.join(flux_instance::CALL_GRAPH_FILE);
    if let (true, Some(graph)) = (graph_path.exists(), graph) {
        let old = flux_instance::read_call_graph(&inst.dir)?;
        if &old != graph {
            problems.push(format!(
                "call graph differs from {}:\n{}",
                graph_path.display(),
                json_diff(&old, graph, "stored", "harvested")
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("--check: not reproduced\n{}", problems.join("\n"))
    }
}

/// Write the oracle and the call graph, checking both for conflicts first so that a refusal
/// leaves both files as they were. With `replace`, the files replaced are kept in the run
/// directory as `replaced-oracle.json` / `replaced-callgraph.json`.
fn write_outputs(
    inst: &Instance,
    oracle: &Oracle,
    graph: Option<&Value>,
    replace: bool,
    run_dir: &Path,
) -> anyhow::Result<Status> {
    if replace {
        for name in [flux_instance::ORACLE_FILE, flux_instance::CALL_GRAPH_FILE] {
            let p = inst.dir.join(name);
            if p.exists() {
                std::fs::copy(&p, run_dir.join(format!("replaced-{name}")))
                    .map_err(|e| anyhow::anyhow!("keeping a copy of {}: {e}", p.display()))?;
            }
        }
    }
    let on_conflict = if replace {
        OnConflict::Replace
    } else {
        OnConflict::Refuse
    };
    if !replace {
        let mut conflicts = Vec::new();
        if inst.oracle_path().exists() {
            match flux_instance::read_oracle(&inst.dir) {
                Ok(old) if old.oracle_answer == oracle.oracle_answer => {}
                Ok(old) => conflicts.push(format!(
                    "{} holds a different answer:\n{}",
                    inst.oracle_path().display(),
                    json_diff(
                        &old.oracle_answer,
                        &oracle.oracle_answer,
                        "stored",
                        "harvested"
                    )
                )),
                Err(e) => conflicts.push(format!("{e} (the file is kept)")),
            }
        }
        let graph_path = inst.dir.join(flux_instance::CALL_GRAPH_FILE);
        if let (true, Some(graph)) = (graph_path.exists(), graph) {
            match flux_instance::read_call_graph(&inst.dir) {
                Ok(old) if &old == graph => {}
                Ok(old) => conflicts.push(format!(
                    "{} holds a different call graph:\n{}",
                    graph_path.display(),
                    json_diff(&old, graph, "stored", "harvested")
                )),
                Err(e) => conflicts.push(format!("{e} (the file is kept)")),
            }
        }
        if !conflicts.is_empty() {
            anyhow::bail!(
                "not written: {} (use --replace to replace it)",
                conflicts.join("\n")
            );
        }
    }
    let o = flux_instance::write_oracle(&inst.dir, oracle, on_conflict)?;
    let g = match graph {
        Some(graph) => flux_instance::write_call_graph(&inst.dir, graph, on_conflict)?,
        None => WriteOutcome::Unchanged,
    };
    Ok(match (o, g) {
        (WriteOutcome::Replaced, _) | (_, WriteOutcome::Replaced) => Status::Replaced,
        (WriteOutcome::Created, _) | (_, WriteOutcome::Created) => Status::Created,
        _ => Status::Unchanged,
    })
}
