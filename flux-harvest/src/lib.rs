//! The harvest pipeline: from an instance directory to its gold `oracle.json`.
//!
//! Data flows one way: `instance.toml` → a run of the instance's test in its pinned image
//! under the tracer (USDT through eBPF + the in-process hook) → the merged trace → the
//! instance's extractor → screening → `oracle.json` + `callgraph.json`, written atomically.
//!
//! Per instance ([`harvest`] goes through them in order, ripgrep style: an error on one is
//! reported, changes the exit status, and the others still run):
//! 1. load and validate the instance (`flux_instance::load_instance`; errors name file and field),
//!    its extractor's parameters against the target's source where the instance directory or
//!    the cache's `src/` holds it (`flux_instance::check_source`; a skipped check is a warning);
//! 2. make a run directory `<cache>/runs/<id>-<utc time>/` holding a copy of the instance
//!    directory (what is mounted read-only at `/flux/instance`), the hook package, the hook's
//!    socket and, afterwards, `trace.jsonl`, `trace-meta.json`, `stdout.txt`, `stderr.txt`;
//! 3. run the test command, gated until the tracer is attached: in a container of the instance's
//!    image ([`Runtime::Docker`], network off, user 1000, the instance's timeout), or on the host
//!    in a venv of the instance's interpreter holding the image's pinned wheels installed offline
//!    from `<cache>/wheelhouse/` ([`Runtime::Host`]; every output is labelled
//!    [`NOT_REPRODUCIBLE`]);
//! 4. screening gates: the test ended as expected (exit 0 for `expect = "pass"`; for `"fail"`
//!    pytest's exit 1 with a failed test in its records, see `outcome`; a timeout or a kill is
//!    an error), the trace is complete with 0 lost events, the
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
//! An instance answered by another benchmark's parser is answered through
//! [`ExternalAnswers`], which the caller hands in (flux-interop implements it for SWE-Flux):
//! this crate knows no peer format.
//!
//! Architecture invariant: this crate decides nothing about what an answer is (that is
//! `flux-extract` through `flux-instance`) and nothing about how events are captured (that is
//! `flux-agent`); it sequences them and owns the gates.
use anyhow::Context as _;
use flux_extract::QuestionKind;
use flux_instance::{Instance, Oracle};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod diff;
mod docker;
pub mod external;
mod gc;
mod gold;
mod host;
mod outcome;
mod run_test;
mod rundir;
mod signals;
mod tracing;
pub mod witness;

pub use diff::json_diff;
pub use external::ExternalAnswers;
pub use gc::{gc, GcOptions, GcReport};
pub use gold::{verdicts, Verdict};
pub use run_test::{read_untrusted, run_test, run_traced, RunGold, TestRun, Witness};
pub use rundir::{KEEP_RUNS, KEEP_RUNS_TOTAL, RUNS_MAX_BYTES};
pub use signals::{until_interrupted, Interrupted};
pub use witness::{Judgement, WitnessKind};

/// The label every output of a host run carries.
pub const NOT_REPRODUCIBLE: &str = "not reproducible";

/// Where the test runs (`flux harvest --runtime`, which takes it with feature `clap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// Run each test twice from clean containers; answers that differ are refused, a call
    /// graph that differs is not written (`gold`).
    pub twice: bool,
    /// Run directories under `<cache>/runs` are pruned, oldest first, to stay under this many
    /// bytes in all (besides [`KEEP_RUNS`] per instance and [`KEEP_RUNS_TOTAL`]).
    pub runs_max_bytes: u64,
    /// `--check`: which witness re-derives the stored gold ([`witness`]: flux from a clean run,
    /// or the plain settrace reference, which shares no code with the hook).
    pub witness: WitnessKind,
    /// `--check --witness reference --record-witness`: a stored gold the reference agrees with
    /// records that witness in its provenance (`provenance.witness`; the answer is untouched),
    /// so a set's stats count it as witnessed.
    pub record_witness: bool,
    /// A peer benchmark's parsers and stored answers (flux-interop's SWE-Flux, handed in by the
    /// caller): instances answered by an external parser need it.
    pub external: Option<std::sync::Arc<dyn ExternalAnswers>>,
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
            twice: false,
            runs_max_bytes: RUNS_MAX_BYTES,
            witness: WitnessKind::Flux,
            record_witness: false,
            external: None,
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
    /// What the user should know about a run that did not fail it (e.g. a truncated log).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What happened to `oracle.json` and to `callgraph.json`, each on its own (see `gold`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oracle: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_graph: Option<Verdict>,
    /// `--check --witness reference`: the witness that agreed with the stored gold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<WitnessKind>,
    /// `--check --witness reference`, when it disagrees: the stored gold and the reference's
    /// answer (or why its trace gives none), for the record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disagreement: Option<(Value, Value)>,
    /// Events in the merged trace, when a run was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<usize>,
    /// From the run's start to the program's exit and the trace merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_seconds: Option<f64>,
    pub seconds: f64,
}

/// What a report says when its containers randomised addresses: the daemon has no
/// [`flux_container::runtime::FIXED_ADDRESSES_RUNTIME`], so a program that iterates a set of
/// objects hashed by identity may take another path at another harvest.
fn addresses_note(fixed_addresses: bool) -> Option<String> {
    (!fixed_addresses).then(|| {
        format!(
            "dockerd has no `{}` runtime: containers randomised addresses, so a test iterating \
             a set of objects hashed by identity may answer otherwise at another harvest \
             (`cargo xtask setup` registers it when it starts dockerd)",
            flux_container::runtime::FIXED_ADDRESSES_RUNTIME
        )
    })
}

/// Everything [`harvest`] did.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The runtime used (never `auto`).
    pub runtime: Runtime,
    /// Why `auto` chose the host, if it did; or that the containers randomised addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub instances: Vec<InstanceReport>,
    /// The harvest was stopped by this signal (the instances after it were not run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
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
    let mut signals = signals::Signals::install()
        .map_err(|e| FatalError(anyhow::anyhow!("catching SIGINT/SIGTERM: {e}")))?;
    let (backend, runtime, note) = match opts.runtime {
        Runtime::Docker => {
            let rt = flux_container::Runtime::connect()
                .await
                .map_err(|e| FatalError(anyhow::Error::new(e).context("--runtime docker")))?;
            let note = addresses_note(rt.fixed_addresses());
            (Backend::Docker(rt), Runtime::Docker, note)
        }
        Runtime::Host => (Backend::Host, Runtime::Host, None),
        Runtime::Auto => match flux_container::Runtime::connect().await {
            Ok(rt) => {
                let note = addresses_note(rt.fixed_addresses());
                (Backend::Docker(rt), Runtime::Docker, note)
            }
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
    let mut interrupted = None;
    for d in dirs {
        let r = match d {
            Err(r) => r,
            Ok(dir) => {
                let key = std::path::absolute(&dir).unwrap_or_else(|_| dir.clone());
                if !seen.insert(key) {
                    continue;
                }
                tokio::select! {
                    r = harvest_one(&dir, opts, &backend, runtime) => r,
                    sig = signals.recv() => {
                        // The instance's run was dropped with its future (see `signals`).
                        if let Backend::Docker(rt) = &backend {
                            let _ = rt.remove_own().await;
                        }
                        interrupted = Some(sig);
                        failed_report(&dir, runtime, anyhow::anyhow!(
                            "interrupted by {sig}: the test was stopped and nothing was written"
                        ))
                    }
                }
            }
        };
        progress(&r);
        instances.push(r);
        if interrupted.is_some() {
            break;
        }
    }
    Ok(Report {
        runtime,
        note,
        instances,
        interrupted,
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
        error: Some(format!("{e:#}")),
        ..new_report(dir, runtime)
    }
}

/// The report of an instance in `dir` before anything is known (failed until it is not).
pub(crate) fn new_report(dir: &Path, runtime: Runtime) -> InstanceReport {
    InstanceReport {
        dir: dir.to_path_buf(),
        name: dir.display().to_string(),
        repository: None,
        kind: None,
        status: Status::Failed,
        error: None,
        run_dir: None,
        runtime,
        labels: Vec::new(),
        warnings: Vec::new(),
        oracle: None,
        call_graph: None,
        witness: None,
        disagreement: None,
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
        name: name.clone(),
        repository: Some(inst.spec.repository.clone()),
        kind: Some(inst.kind()),
        ..new_report(dir, runtime)
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

/// The start of the problem a trace carries when the event budget stopped its program (which
/// is killed: name the budget, not the signal).
pub use flux_merge::usdt::BUDGET_PROBLEM;

/// What a traced run of an instance's test produced (a harvest's, or [`run_traced`]'s).
pub struct TracedRun {
    pub trace: flux_trace::Trace,
    /// The run directory (its logs, trace and the instance copy the test ran in).
    pub run_dir: PathBuf,
    /// Exit code of the test command (128 + signal when killed).
    pub exit_code: i32,
    /// After how long the test was killed for its timeout, if it was.
    pub timed_out: Option<Duration>,
    /// Why the program was killed (OOM, signal), if it was.
    pub killed: Option<String>,
    /// What the test wrote, its first `flux_container::runtime::LOG_CAP` bytes each.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The test wrote more than the cap: the rest was dropped.
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// `sha256:…` of the image, when the run was in a container.
    pub image_id: String,
    /// The image's content identity (`flux-id:…`, from its manifest), when it has one.
    pub image_identity: String,
    /// `X.Y.Z` of the interpreter traced.
    pub interpreter_version: String,
    /// Labels every output must carry.
    pub labels: Vec<String>,
    /// The program's wall time, from the gate's release to its exit (0 where not measured: host
    /// runs).
    pub program_seconds: f64,
    /// The digest of the whole trace, when the run wrote it as the merge went (`trace` then
    /// holds only what the run keeps: [`docker::Keeps`]).
    pub whole_sha256: Option<String>,
}

async fn harvest_instance(
    inst: &Instance,
    opts: &HarvestOptions,
    backend: &Backend,
    report: &mut InstanceReport,
) -> anyhow::Result<Status> {
    // Fail before running anything if there is nothing to check against. (An instance
    // imported from SWE-Flux may be checked against their stored answer alone.)
    let external = inst.external_parser().is_some();
    if external && opts.external.is_none() {
        anyhow::bail!(
            "this instance is answered by an external parser, and this harvest was given nothing \
             that runs one (HarvestOptions::external: flux-interop's SWE-Flux answers)"
        );
    }
    if external && matches!(backend, Backend::Host) {
        anyhow::bail!(
            "this instance is answered by SWE-Flux's parser, third-party code that runs only in \
             the instance's container (use --runtime docker)"
        );
    }
    if let (Some(l), Backend::Host) = (&inst.spec.test.layout, backend) {
        anyhow::bail!(
            "this instance's test is laid out as another benchmark's harness lays it out (its files \
             at {}, run from {}), which only its container has (use --runtime docker)",
            l.files_at,
            l.workdir
        );
    }
    check_against_source(inst, opts, report)?;
    // Their stored answer, kept by `flux import swe-flux` with the instance their parser answers
    // and with its native twin (answered by a flux extractor).
    let reference = flux_instance::external::read_reference(&inst.dir)?.is_some();
    let stored = if opts.check {
        let path = inst.oracle_path();
        if path.exists() {
            Some(flux_instance::read_oracle(&inst.dir)?)
        } else if reference {
            None
        } else {
            anyhow::bail!(
                "--check: {} does not exist (harvest it first with `flux harvest {}`)",
                path.display(),
                inst.dir.display()
            );
        }
    } else {
        None
    };
    if let Backend::Docker(rt) = backend {
        // Before anything is made for the run: the image exists and is the one the instance
        // pins (its `package` and `interpreter` against the image's manifest).
        docker::checked_image(rt, inst).await?;
    }
    if opts.witness == WitnessKind::Reference {
        return check_with_reference(inst, opts, backend, stored.as_ref(), report).await;
    }
    let first = run_once(inst, opts, backend, report).await?;
    let fresh = if opts.twice {
        let second = run_once(inst, opts, backend, report)
            .await
            .map_err(|e| e.context("the second run (--twice)"))?;
        gold::agree(first, second, report)?
    } else {
        first.into()
    };
    if opts.check && reference {
        // A peer's stored answer, under its scoring rules (flux-interop's, handed in).
        let ext = opts.external.as_ref().ok_or_else(|| {
            anyhow::anyhow!(
                "--check: this instance keeps another benchmark's stored answer, and this harvest \
                 was given nothing that checks it (HarvestOptions::external)"
            )
        })?;
        ext.check_reference(inst, &fresh.oracle.oracle_answer)
            .map_err(|e| anyhow::anyhow!("--check: {e:#}"))?;
    }
    match stored {
        Some(stored) => gold::check_against(inst, &stored, &fresh, report),
        None if opts.check => {
            // Checked against their stored answer alone (an imported instance not harvested).
            report.oracle = Some(Verdict::Reproduced);
            Ok(Status::Reproduced)
        }
        None => gold::write_outputs(inst, &fresh, opts.replace, report),
    }
}

/// The extractor's parameters against the target's source (the instance directory's, else the
/// cache's unpacked package source `<cache>/src/<name>-<version>/`), before anything runs: a
/// loop header that is no loop line would otherwise harvest a plausible gold answer. Where the
/// source is not on the host the check is skipped, and the report's warnings say why.
fn check_against_source(
    inst: &Instance,
    opts: &HarvestOptions,
    report: &mut InstanceReport,
) -> anyhow::Result<()> {
    let roots: Vec<PathBuf> = inst
        .spec
        .package
        .split_once("==")
        .map(|(n, v)| opts.cache_dir.join("src").join(format!("{n}-{v}")))
        .into_iter()
        .collect();
    if let flux_instance::SourceCheck::Skipped { reason } =
        flux_instance::check_source(inst, &roots)?
    {
        report.warnings.push(format!(
            "parameters not checked against the source: {reason}"
        ));
    }
    Ok(())
}

/// `--check --witness reference`: the stored gold re-derived by the plain settrace reference
/// ([`witness`]); a disagreement fails with both answers.
async fn check_with_reference(
    inst: &Instance,
    opts: &HarvestOptions,
    backend: &Backend,
    stored: Option<&Oracle>,
    report: &mut InstanceReport,
) -> anyhow::Result<Status> {
    let (Some(stored), true) = (stored, opts.check) else {
        anyhow::bail!("--witness reference checks a stored gold answer: use it with --check");
    };
    let Backend::Docker(rt) = backend else {
        anyhow::bail!("--witness reference runs in the instance's container (Docker)");
    };
    let t = Instant::now();
    let run = witness::run_reference(rt, inst, opts).await?;
    report.run_dir = Some(run.run_dir.clone());
    report.run_seconds = Some(t.elapsed().as_secs_f64());
    report.events = Some(run.trace.events.len());
    match witness::judge(inst, &stored.oracle_answer, &run) {
        Judgement::Agrees => {
            report.oracle = Some(Verdict::Reproduced);
            report.witness = Some(WitnessKind::Reference);
            if opts.record_witness {
                record_witness(inst, stored, &run)?;
            }
            Ok(Status::Reproduced)
        }
        Judgement::Disagrees { reference } => {
            report.oracle = Some(Verdict::Differs);
            report.disagreement = Some((stored.oracle_answer.clone(), reference.clone()));
            anyhow::bail!(
                "the reference witness disagrees with the stored gold (run in {}):\n{}",
                run.run_dir.display(),
                witness::disagreement(&stored.oracle_answer, &reference)
            )
        }
        Judgement::Unavailable { why } => {
            anyhow::bail!("the reference witness could not check it: {why}")
        }
    }
}

/// `--record-witness`: write `stored` back with the reference run that agreed with it as its
/// `provenance.witness` (the answer and the rest of the file unchanged), through a temporary
/// file renamed over the old one.
fn record_witness(
    inst: &Instance,
    stored: &Oracle,
    run: &witness::ReferenceRun,
) -> anyhow::Result<()> {
    let mut oracle = stored.clone();
    oracle.provenance.witness = Some(flux_instance::Witnessed {
        by: "reference".into(),
        trace_sha256: run.trace_sha256.clone(),
        interpreter: run.trace.meta.interpreter.clone(),
    });
    let path = inst.oracle_path();
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&oracle)? + "\n")
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

/// One traced run of the instance's test, screened, with its gold answer and call graph.
pub(crate) struct Harvested {
    pub run_dir: PathBuf,
    /// The run directory stays in use while its outputs are written ([`rundir::InUse`]).
    pub _in_use: Option<rundir::InUse>,
    pub oracle: Oracle,
    /// `None` with scope "targets" (its trace holds no call graph of the test).
    pub graph: Option<Value>,
}

async fn run_once(
    inst: &Instance,
    opts: &HarvestOptions,
    backend: &Backend,
    report: &mut InstanceReport,
) -> anyhow::Result<Harvested> {
    use anyhow::Context;
    let (run_dir, in_use) = rundir::make(&opts.cache_dir, inst, opts.runs_max_bytes)?;
    if report.run_dir.is_none() {
        report.run_dir = Some(run_dir.clone());
    }
    let t_run = Instant::now();
    // A peer's parser answers on flux's trace, in the container (checked before the run that
    // `opts.external` is there for an instance that needs it).
    let external = opts
        .external
        .as_ref()
        .filter(|_| inst.external_parser().is_some());
    let out = match backend {
        Backend::Docker(rt) => {
            let keeps = keeps(inst, opts, external.is_some(), &run_dir);
            docker::run(rt, inst, &run_dir, opts, keeps).await?
        }
        Backend::Host => host::run_host(inst, &run_dir, opts).await?,
    };
    report.run_seconds = Some(t_run.elapsed().as_secs_f64());
    report.events = Some(out.trace.events.len() + run_test::not_kept(&out.trace.meta, "") as usize);
    report.labels = out.labels.clone();
    for w in run_warnings(&out) {
        if !report.warnings.contains(&w) {
            report.warnings.push(w);
        }
    }
    let phase = |what: &str, t: Instant| {
        if std::env::var_os("FLUX_HARVEST_TIMINGS").is_some() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
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
    flux_agent::run::memory_note("the trace written");
    screen_run(inst, &out, &run_dir)?;
    flux_agent::run::memory_note("the run screened");
    let t = Instant::now();
    let parsed = match (backend, external) {
        (Backend::Docker(rt), Some(ext)) => Some((
            ext.answer(rt, inst, &out.trace, &run_dir).await?,
            ext.label().to_string(),
        )),
        _ => None,
    };
    let mut facts = flux_instance::RunFacts {
        harvested_at: flux_instance::utc_timestamp(std::time::SystemTime::now()),
        image_id: out.image_id.clone(),
        image_identity: out.image_identity.clone(),
        interpreter: out.interpreter_version.clone(),
        trace_sha256: Some(trace_sha256),
        labels: out.labels.clone(),
    };
    let oracle = match parsed {
        Some((answer, label)) => {
            facts.labels.push(label);
            inst.oracle_for(answer, &out.trace, &facts)
        }
        None => inst.build_oracle(&out.trace, &facts),
    }
    .map_err(|e| anyhow::anyhow!("{}", strip_id(&e.to_string(), inst.id())))?;
    phase("extract", t);
    flux_agent::run::memory_note("the answer extracted");
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
    rundir::write_new(
        &run_dir,
        flux_instance::ORACLE_FILE,
        (serde_json::to_string_pretty(&oracle)? + "\n").as_bytes(),
    )
    .context("keeping the harvested oracle in the run directory")?;
    if let Some(g) = &graph {
        rundir::write_new(
            &run_dir,
            flux_instance::CALL_GRAPH_FILE,
            (serde_json::to_string_pretty(g)? + "\n").as_bytes(),
        )
        .context("keeping the harvested call graph in the run directory")?;
    }
    Ok(Harvested {
        run_dir,
        _in_use: Some(in_use),
        oracle,
        graph,
    })
}

/// What a harvest's run keeps (issue 28). With scope "targets" and an answer that reads only
/// the targets' direct calls (`Instance::keep_for_answer`), nothing else reads the whole trace
/// (no call graph is taken): the run keeps what the answer reads and writes the whole trace to
/// the run directory as the merge goes, so it never holds it. A peer's parser reads the whole
/// trace: such a run keeps every event.
fn keeps(inst: &Instance, opts: &HarvestOptions, external: bool, run_dir: &Path) -> docker::Keeps {
    let scope = opts.scope.unwrap_or(inst.spec.tracing.scope);
    match inst.keep_for_answer(scope) {
        flux_trace::Keep::TargetCalls if !external => docker::Keeps {
            keep: flux_trace::Keep::TargetCalls,
            whole_trace: Some(run_dir.join(rundir::TRACE_FILE)),
        },
        _ => docker::Keeps::all(),
    }
}

/// `flux_instance` errors start with the instance id; the report names the instance already.
fn strip_id(msg: &str, id: &str) -> String {
    msg.strip_prefix(&format!("{id}: "))
        .unwrap_or(msg)
        .to_string()
}

/// What a run that is not failed for it should still tell: logs cut at the cap.
fn run_warnings(out: &TracedRun) -> Vec<String> {
    let cap = flux_container::runtime::LOG_CAP >> 20;
    [
        ("stdout", out.stdout_truncated),
        ("stderr", out.stderr_truncated),
    ]
    .iter()
    .filter(|(_, t)| *t)
    .map(|(s, _)| format!("the test's {s} was truncated at {cap} MiB (the rest was dropped)"))
    .collect()
}

/// The gates that come before the extractor: how the test ended, and whether the trace is whole.
fn screen_run(inst: &Instance, out: &TracedRun, run_dir: &Path) -> anyhow::Result<()> {
    let tail = |b: &[u8]| -> String {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        let from = lines.len().saturating_sub(15);
        lines[from..]
            .iter()
            .map(|l| format!("\n    | {l}"))
            .collect()
    };
    let cut = |t: bool| if t { " (truncated at the cap)" } else { "" };
    let logs = || {
        format!(
            "\n  stdout (end{}):{}\n  stderr (end{}):{}\n  (logs and trace in {})",
            cut(out.stdout_truncated),
            tail(&out.stdout),
            cut(out.stderr_truncated),
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
    if let Some(p) = out
        .trace
        .meta
        .problems
        .iter()
        .find(|p| p.starts_with(budget))
    {
        anyhow::bail!("{p} (raise it with flux harvest --max-events){}", logs());
    }
    if let Some(why) = &out.killed {
        anyhow::bail!("the test was killed: {why}{}", logs());
    }
    if let Err(why) = outcome::check_expected(inst.spec.test.expect, out.exit_code, &out.trace) {
        anyhow::bail!("{why}{}", logs());
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

#[cfg(test)]
mod tests {
    /// A harvest whose containers randomised addresses says so in its report (and `flux
    /// harvest` prints it); one whose daemon has the fixed-addresses runtime says nothing.
    #[test]
    fn a_harvest_with_randomised_addresses_says_so() {
        let note = crate::addresses_note(false).unwrap();
        assert!(
            note.contains("flux-fixed-addresses") && note.contains("randomised addresses"),
            "{note}"
        );
        assert_eq!(crate::addresses_note(true), None);
    }

    /// 17.12: a log cut at the 64 MiB cap was kept silently (the outcome knew, nobody said).
    #[test]
    fn truncated_logs_are_reported() {
        let out = crate::TracedRun {
            trace: flux_trace::Trace::default(),
            run_dir: std::path::PathBuf::new(),
            exit_code: 0,
            timed_out: None,
            killed: None,
            stdout: Vec::new(),
            stderr: Vec::new(),
            stdout_truncated: true,
            stderr_truncated: false,
            image_id: String::new(),
            image_identity: String::new(),
            interpreter_version: "3.11.2".into(),
            labels: Vec::new(),
            program_seconds: 0.0,
            whole_sha256: None,
        };
        assert_eq!(
            super::run_warnings(&out),
            ["the test's stdout was truncated at 64 MiB (the rest was dropped)"]
        );
    }
}
