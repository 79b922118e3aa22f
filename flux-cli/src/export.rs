//! `flux export`: write instances in a peer benchmark's layout (flux_instance::export), as a
//! self-contained Hugging Face dataset (flux_interop::hf), or as that dataset with an Inspect
//! task beside it (flux_interop::inspect).
use anyhow::Result;
use flux_eval::Source;
use flux_instance::export::{self, ExportFormat};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A peer layout, `hf` or `inspect`.
#[derive(Clone, Copy)]
enum Format {
    Peer(ExportFormat),
    Hf,
    Inspect,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "hf" | "huggingface" | "hugging-face" => Ok(Format::Hf),
            "inspect" | "inspect-ai" => Ok(Format::Inspect),
            other => other.parse().map(Format::Peer).map_err(|_| {
                format!("unknown export format {other:?} (swe-flux, traceeval, hf, inspect)")
            }),
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// swe-flux (`<out>/<repo>_qa/<id>/` with oracle.json, question.json, files/, eval.sh and
    /// flux/, which `flux import swe-flux` reads back),
    /// traceeval (`<out>/<repo>/<id>/callgraph.json` and `<out>/splits.json`),
    /// hf (a self-contained Hugging Face dataset: `data/<split>.parquet` and `.jsonl`, rows
    /// with the prompts `flux eval` sends, and a dataset card `README.md`) or
    /// inspect (that dataset, `flux_task.py`, an Inspect task, and `flux_scoring.py`, flux's
    /// scoring rules in Python: no flux binary needed to score).
    #[arg(long)]
    format: Format,
    /// Instance root (repeatable).
    #[arg(long = "instances", default_value = "instances")]
    instances: Vec<PathBuf>,
    /// hf, inspect: only these instances (as `flux eval`).
    #[command(flatten)]
    select: crate::score::SelectArgs,
    #[command(flatten)]
    cache: crate::cache::CacheArg,
    /// hf, inspect: package sources under this root (`<root>/<name>-<version>/`, or the root
    /// itself) instead of the cache's `<cache>/src/` (`flux images source` fetches them).
    #[arg(long, conflicts_with = "no_source")]
    source_root: Option<PathBuf>,
    /// hf, inspect: render the prompts without any repository source, on purpose (else a
    /// missing source is an error: the rows would not be self-contained).
    #[arg(long)]
    no_source: bool,
    /// hf, inspect: prompt budget in tokens (~4 characters each), as `flux eval`'s.
    #[arg(long, default_value_t = 100_000)]
    max_context_tokens: usize,
    /// Output directory (created if needed).
    out_dir: PathBuf,
}

/// Exit 0 when every harvested instance was exported, 1 when some were malformed (each reported
/// with its file and field; the others are still exported).
pub fn run(a: Args) -> Result<ExitCode> {
    let format = match a.format {
        Format::Peer(f) => f,
        Format::Hf | Format::Inspect => return dataset(&a),
    };
    let dirs = flux_instance::discover(&a.instances)?;
    let report = export::export(format, &dirs, &a.out_dir);
    for s in &report.skipped {
        eprintln!("flux: note: skipped {}: {}", s.dir.display(), s.reason);
    }
    for e in &report.errors {
        eprintln!("flux: error: {e}");
    }
    println!(
        "exported {} instance(s) to {} ({}); {} skipped, {} error(s)",
        report.exported.len(),
        a.out_dir.display(),
        format,
        report.skipped.len(),
        report.errors.len()
    );
    Ok(exit(report.errors.is_empty()))
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn dataset(a: &Args) -> Result<ExitCode> {
    let opts = flux_interop::hf::HfOptions {
        source: match (a.no_source, &a.source_root) {
            (true, _) => Source::Off,
            (false, Some(r)) => Source::Root(r.clone()),
            (false, None) => Source::Cache(a.cache.dir()),
        },
        max_context_tokens: a.max_context_tokens,
        selection: a.select.selection()?,
    };
    let out: &Path = &a.out_dir;
    let report = match a.format {
        Format::Inspect => flux_interop::inspect::export(&a.instances, out, &opts)?,
        _ => flux_interop::hf::export(&a.instances, out, &opts)?,
    };
    for (key, why) in &report.skipped {
        eprintln!("flux: note: skipped {key}: {why}");
    }
    for e in &report.errors {
        eprintln!("flux: error: {e}");
    }
    let splits: Vec<String> = report
        .splits
        .iter()
        .map(|(s, ids)| format!("{s} {}", ids.len()))
        .collect();
    println!(
        "exported a Hugging Face dataset to {} ({}; card {}){}; {} skipped, {} error(s)",
        out.display(),
        if splits.is_empty() {
            "no rows".to_string()
        } else {
            splits.join(", ")
        },
        out.join("README.md").display(),
        match a.format {
            Format::Inspect => format!(
                ", and the Inspect task {} (scored by {})",
                out.join(flux_interop::inspect::TASK_FILE).display(),
                out.join(flux_interop::inspect::SCORING_FILE).display()
            ),
            _ => String::new(),
        },
        report.skipped.len(),
        report.errors.len()
    );
    Ok(exit(report.errors.is_empty()))
}
