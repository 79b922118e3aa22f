//! `flux score`: score answers directories against the harvested gold (flux-score): one run's
//! report, or several compared (`--answers A --answers B`).
use anyhow::{bail, Result};
use flux_score::{Format, ScoreOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Answers directory (`<answers>/<repo>/<id>/answer.json`, e.g. written by `flux eval`);
    /// repeat it to compare runs (paired, on the instances every run scored).
    #[arg(long, required = true)]
    answers: Vec<PathBuf>,
    /// Instance root (repeatable); a root may be the store, one repository or one instance.
    #[arg(long = "instances", default_value = "instances")]
    instances: Vec<PathBuf>,
    /// Report format: text, json or html (one self-contained file with SVG charts).
    #[arg(long, default_value = "text")]
    format: Format,
    /// Write the report to this file instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Pass threshold on edge F1 for call-graph instances.
    #[arg(long, default_value_t = 1.0)]
    call_graph_threshold: f64,
    /// Larger answer files are failures, never read.
    #[arg(long, default_value_t = flux_score::MAX_ANSWER_BYTES)]
    max_answer_bytes: u64,
}

/// Exit 0 when the scoring ran (whatever the accuracy), 1 when some instance directories could
/// not be read (reported on stderr, the others scored), an error on unusable input.
pub fn run(a: Args) -> Result<ExitCode> {
    for ans in &a.answers {
        require_dir("answers", ans)?;
    }
    if !(0.0..=1.0).contains(&a.call_graph_threshold) {
        bail!(
            "--call-graph-threshold {}: must be between 0 and 1",
            a.call_graph_threshold
        );
    }
    for root in &a.instances {
        require_dir("instances", root)?;
    }
    let opts = ScoreOptions {
        answers: a.answers,
        instances: a.instances,
        call_graph_threshold: a.call_graph_threshold,
        max_answer_bytes: a.max_answer_bytes,
        format: a.format,
        out: a.out,
    };
    let out = flux_score::run_score(&opts)?;
    let r = &out.report;
    match &opts.out {
        Some(path) => {
            for r in &out.multi.runs {
                eprintln!(
                    "flux score: {}: {}/{} passed ({:.1}%), {} infra errors, {} not harvested",
                    r.name,
                    r.passed,
                    r.total,
                    r.accuracy * 100.0,
                    r.infra_errors,
                    r.not_harvested,
                );
            }
            eprintln!("flux score: report written to {}", path.display());
        }
        None => print!("{}", out.rendered),
    }
    for i in &r.invalid_instances {
        eprintln!("flux: invalid instance {}: {}", i.path, i.error);
    }
    Ok(if r.invalid_instances.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// An error naming `path` unless it is a directory.
pub(crate) fn require_dir(what: &str, path: &std::path::Path) -> Result<()> {
    if !path.is_dir() {
        let why = if path.exists() {
            "not a directory"
        } else {
            "no such directory"
        };
        bail!("{what} directory {}: {why}", path.display());
    }
    Ok(())
}
