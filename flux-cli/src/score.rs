//! `flux score`: score answers directories against the harvested gold (flux-score): one run's
//! report, or several compared (`--answers A --answers B`); answers from directories or
//! predictions JSONL; a results file beside the answers (or `--results FILE`).
use anyhow::{bail, Context, Result};
use flux_score::{Format, ScoreOptions, Selection};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `--filter` and `--limit`, shared by `flux eval` and `flux score` (one selection:
/// `flux_score::select`).
#[derive(clap::Args)]
pub struct SelectArgs {
    /// Only instances with this `kind`, `repository`, `split` or `id` (`key=value`; repeat it
    /// or join with commas; several values of one key: any of them; different keys: all).
    #[arg(long = "filter", value_name = "KEY=VALUE")]
    filter: Vec<String>,
    /// Only the first N harvested instances (in repo/id order, after --filter).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only instances whose repository version was released after this day ([generated.release]
    /// date, `flux gen --release`): score a model on questions newer than its training cutoff.
    /// Undated instances are left out. The results file records it.
    #[arg(long, value_name = "YYYY-MM-DD")]
    released_after: Option<String>,
}

impl SelectArgs {
    pub fn selection(&self) -> Result<Selection> {
        Ok(Selection::parse(&self.filter, self.limit)?
            .released_after(self.released_after.as_deref())?)
    }
}

/// The commit flux was built from (build.rs), if it was built in a git checkout.
pub const GIT_COMMIT: Option<&str> = option_env!("FLUX_GIT_COMMIT");

#[derive(clap::Args)]
pub struct Args {
    /// Answers directory (`<answers>/<repo>/<id>/answer.json`, e.g. written by `flux eval`);
    /// repeat it to compare runs (paired, on the instances every run scored).
    #[arg(long, required_unless_present = "predictions")]
    answers: Vec<PathBuf>,
    /// Predictions JSONL (`{"instance_id": …, "answer": {…}, "model_name_or_path": …}` a
    /// line) instead of, or beside, answers directories (repeatable).
    #[arg(long, value_name = "FILE")]
    predictions: Vec<PathBuf>,
    #[command(flatten)]
    select: SelectArgs,
    /// Score even when some answers match no instance of the set (they are listed), or none
    /// is there at all; without it such a run is an error naming them.
    #[arg(long)]
    allow_unmatched: bool,
    /// Write the results file (flux version, set digest, models, selection, scores) here;
    /// default `<answers>/results.json` or `<predictions>.results.json` with one run.
    #[arg(long, value_name = "FILE")]
    results: Option<PathBuf>,
    /// Write the (selected) answers of the one --answers directory as predictions JSONL.
    #[arg(long, value_name = "FILE")]
    write_predictions: Option<PathBuf>,
    /// Instance root (repeatable); a root may be the store, one repository or one instance,
    /// or an exported dataset (`flux export --format hf`: its directory or a `data/*.jsonl`).
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
/// not be read (reported on stderr, the others scored), an error on unusable input, answers
/// that match no instance of the set (unless `--allow-unmatched`) included.
pub fn run(a: Args) -> Result<ExitCode> {
    for ans in &a.answers {
        require_dir("answers", ans)?;
    }
    for p in &a.predictions {
        if !p.is_file() {
            let why = if p.exists() {
                "not a regular file (a FIFO, socket or device is not read)"
            } else {
                "no such file"
            };
            bail!("predictions file {}: {why}", p.display());
        }
    }
    if !(0.0..=1.0).contains(&a.call_graph_threshold) {
        bail!(
            "--call-graph-threshold {}: must be between 0 and 1",
            a.call_graph_threshold
        );
    }
    for root in &a.instances {
        // An exported dataset (`flux export --format hf`) is a set too: its rows carry the gold.
        if !flux_score::dataset::is_dataset(root) {
            require_dir("instances", root)?;
        }
    }
    let selection = a.select.selection()?;
    if let Some(w) = &a.write_predictions {
        write_predictions(&a, &selection, w)?;
    }
    let runs = a.answers.len() + a.predictions.len();
    let default_results = match (&a.answers[..], &a.predictions[..]) {
        ([d], []) => Some(d.join("results.json")),
        ([], [p]) => Some(PathBuf::from(format!("{}.results.json", p.display()))),
        _ => None,
    };
    let opts = ScoreOptions {
        answers: a.answers,
        predictions: a.predictions,
        selection,
        allow_unmatched: a.allow_unmatched,
        flux_version: env!("CARGO_PKG_VERSION").to_string(),
        flux_commit: GIT_COMMIT.map(String::from),
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
    if opts.out.is_some() || opts.format != Format::Text {
        if let Some(l) = flux_score::report::against(r) {
            eprintln!("flux score: {l}");
        }
    }
    for run in &out.multi.runs {
        if !run.unmatched_answers.is_empty() {
            eprintln!(
                "flux score: {}: {} answer(s) match no instance of the set, not scored (--allow-unmatched)",
                run.answers,
                run.unmatched_answers.len()
            );
        }
    }
    write_results(
        &out.results,
        a.results.as_deref(),
        default_results.as_deref(),
        runs,
    )?;
    for i in &r.invalid_instances {
        eprintln!("flux: invalid instance {}: {}", i.path, i.error);
    }
    Ok(if r.invalid_instances.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The results file: where `--results` says (an error when it cannot be written), else beside
/// the one run's answers (a warning when it cannot be written: the answers may be read-only).
fn write_results(
    results: &flux_score::Results,
    explicit: Option<&Path>,
    default: Option<&Path>,
    runs: usize,
) -> Result<()> {
    if let Some(path) = explicit {
        flux_score::results::write(path, results)?;
        eprintln!("flux score: results written to {}", path.display());
    } else if let Some(path) = default.filter(|_| runs == 1) {
        match flux_score::results::write(path, results) {
            Ok(()) => eprintln!("flux score: results written to {}", path.display()),
            Err(e) => eprintln!("flux score: warning: results not written: {e}"),
        }
    }
    Ok(())
}

/// `--write-predictions FILE`: the selected instances' answers of the one answers directory.
fn write_predictions(a: &Args, selection: &Selection, path: &Path) -> Result<()> {
    let [answers] = &a.answers[..] else {
        bail!("--write-predictions needs exactly one --answers directory");
    };
    let found = flux_score::discover_selected(&a.instances, selection)?;
    let mut buf = Vec::new();
    let n = flux_score::predictions::write(&found.instances, answers, a.max_answer_bytes, &mut buf)
        .context("writing predictions")?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, buf).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "flux score: {n} prediction(s) of {} written to {}",
        answers.display(),
        path.display()
    );
    Ok(())
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
