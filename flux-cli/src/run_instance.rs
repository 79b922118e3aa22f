//! `flux bench-run --witness flux|none|reference [--calls auto|hook] INSTANCE_DIR`: run one
//! instance's test once in its container and print what it cost as one JSON object (a
//! `flux_harvest::TestRun`, plus `witness` and, for the reference tracer, `events` = its log
//! lines). Nothing is written to the instance; the run directory is removed afterwards unless
//! `--keep-run-dir`. Used by `cargo xtask bench harvest` (hidden from `flux --help`).
//!
//! Witnesses: `flux` (USDT + hook, `--calls`), `none` (the same container and command, no
//! tracer), `reference` (a settrace tracer file given by `--reference-tracer`, injected as flux's
//! hook is: put in the run directory, on `PYTHONPATH`, loaded by `PYTEST_PLUGINS`, configured
//! from the instance's `[tracing]` table through `FLUX_REF_CONFIG`, logging through
//! `FLUX_REF_LOG` into `<run dir>/out`, the one directory of the host the container may write,
//! whose files are read back as untrusted: no link followed, no FIFO opened).
use anyhow::{bail, Context, Result};
use flux_agent::merge::CallsMode;
use flux_container::runtime::{OUT_IN_CONTAINER, RUN_DIR_IN_CONTAINER};
use flux_harvest::Witness;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WitnessArg {
    /// flux's tracer (USDT + hook) as `--calls` says.
    Flux,
    /// No tracer at all.
    None,
    /// The reference settrace tracer given by `--reference-tracer`.
    Reference,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CallsArg {
    /// USDT where the interpreter can supply returns, else the hook (what harvests use).
    Auto,
    /// The in-process hook alone.
    Hook,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeArg {
    /// The whole run.
    Run,
    /// Only inside pytest's test protocols.
    Tests,
    /// Inside tests, only while targeted code runs (its extents).
    Targets,
}

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_enum, default_value = "flux")]
    witness: WitnessArg,
    #[arg(long, value_enum, default_value = "auto")]
    calls: CallsArg,
    /// Trace with this scope instead of the instance's `[tracing] scope` (flux witness).
    #[arg(long, value_enum)]
    scope: Option<ScopeArg>,
    /// The reference tracer (a Python file, the pytest plugin `reference_tracer`).
    #[arg(long)]
    reference_tracer: Option<PathBuf>,
    #[command(flatten)]
    cache: crate::cache::CacheArg,
    /// Keep the run directory (logs, reference log, trace-meta.json).
    #[arg(long)]
    keep_run_dir: bool,
    /// The most USDT events of the program kept (flux witness), as `flux harvest
    /// --max-events`: past it the test is stopped and the trace is incomplete naming the budget.
    #[arg(long, default_value_t = 20_000_000)]
    max_events: usize,
    /// The instance directory.
    instance: PathBuf,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mut opts = flux_interop::external::harvest_options(a.cache.dir());
    opts.calls = match a.calls {
        CallsArg::Auto => CallsMode::Auto,
        CallsArg::Hook => CallsMode::Hook,
    };
    opts.tracer.max_events = a.max_events.max(1);
    opts.scope = a.scope.map(|s| match s {
        ScopeArg::Run => flux_trace::Scope::Run,
        ScopeArg::Tests => flux_trace::Scope::Tests,
        ScopeArg::Targets => flux_trace::Scope::Targets,
    });
    let witness = match a.witness {
        WitnessArg::Flux => Witness::Flux,
        WitnessArg::None => Witness::Untraced {
            env: Vec::new(),
            files: Vec::new(),
        },
        WitnessArg::Reference => {
            let Some(path) = &a.reference_tracer else {
                bail!("--witness reference needs --reference-tracer FILE");
            };
            let text = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
            let inst = flux_instance::load_instance(&a.instance)?;
            let dir = "reference";
            Witness::Untraced {
                env: vec![
                    ("PYTHONPATH".into(), format!("{RUN_DIR_IN_CONTAINER}/{dir}")),
                    ("PYTEST_PLUGINS".into(), "reference_tracer".into()),
                    (
                        "FLUX_REF_CONFIG".into(),
                        serde_json::to_string(&inst.spec.tracing)?,
                    ),
                    ("FLUX_REF_LOG".into(), OUT_IN_CONTAINER.into()),
                ],
                files: vec![(format!("{dir}/reference_tracer.py"), text)],
            }
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let r = match rt.block_on(flux_harvest::until_interrupted(flux_harvest::run_test(
        &a.instance,
        &opts,
        &witness,
    ))) {
        Ok(r) => r?,
        Err(sig) => {
            eprintln!(
                "flux bench-run: interrupted by {sig}: the test was stopped and its container removed"
            );
            return Ok(ExitCode::from(sig.exit_code()));
        }
    };
    flux_agent::run::memory_note("the run (its trace written, its answer extracted)");
    let mut v = serde_json::to_value(&r)?;
    let o = v.as_object_mut().expect("an object");
    o.insert(
        "witness".into(),
        match (a.witness, a.calls) {
            (WitnessArg::Flux, CallsArg::Auto) if a.scope == Some(ScopeArg::Run) => "flux-auto-run",
            (WitnessArg::Flux, CallsArg::Auto) if a.scope == Some(ScopeArg::Targets) => {
                "flux-auto-targets"
            }
            (WitnessArg::Flux, CallsArg::Auto) => "flux-auto",
            (WitnessArg::Flux, CallsArg::Hook) => "flux-hook",
            (WitnessArg::None, _) => "untraced",
            (WitnessArg::Reference, _) => "reference",
        }
        .into(),
    );
    if a.witness == WitnessArg::Reference {
        let (files, lines, bytes) = reference_logs(&r.run_dir)?;
        o.insert("events".into(), lines.into());
        o.insert("lost_events".into(), 0.into());
        o.insert("log_files".into(), files.into());
        o.insert("log_bytes".into(), bytes.into());
    }
    // The agent's memory: flux's own peak resident set (the merge holds the trace in it).
    v.as_object_mut()
        .expect("an object")
        .insert("agent_max_rss_bytes".into(), max_rss_bytes().into());
    println!("{}", serde_json::to_string(&v)?);
    if !a.keep_run_dir {
        let _ = std::fs::remove_dir_all(&r.run_dir);
    }
    Ok(ExitCode::SUCCESS)
}

/// (files, lines, bytes) of the reference tracer's logs in a run directory's `out/`.
fn reference_logs(run_dir: &Path) -> Result<(u64, u64, u64)> {
    let (mut lines, mut bytes) = (0u64, 0u64);
    let keep = |n: &str| n.starts_with("reference-") && n.ends_with(".log");
    let files = flux_harvest::read_untrusted(&run_dir.join("out"), keep, |piece| {
        bytes += piece.len() as u64;
        lines += piece.iter().filter(|b| **b == b'\n').count() as u64;
    })?;
    Ok((files, lines, bytes))
}

/// This process's peak resident set size, in bytes (`getrusage`; Linux reports KiB).
fn max_rss_bytes() -> u64 {
    // SAFETY: getrusage writes a plain struct we own; RUSAGE_SELF is always valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    u64::try_from(ru.ru_maxrss).unwrap_or(0) * 1024
}
