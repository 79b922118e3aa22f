//! `flux export`: write instances in a peer benchmark's layout (flux_instance::export) or as a
//! Hugging Face dataset (flux_instance::hf).
use anyhow::Result;
use flux_instance::export::{self, ExportFormat};
use std::path::PathBuf;
use std::process::ExitCode;

/// A peer layout, or `hf`.
#[derive(Clone, Copy)]
enum Format {
    Peer(ExportFormat),
    Hf,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "hf" | "huggingface" | "hugging-face" => Ok(Format::Hf),
            other => other
                .parse()
                .map(Format::Peer)
                .map_err(|_| format!("unknown export format {other:?} (swe-flux, traceeval, hf)")),
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// swe-flux (`<out>/<repo>_qa/<id>/` with oracle.json, question.json, files/, eval.sh and
    /// flux/, which `flux import swe-flux` reads back),
    /// traceeval (`<out>/<repo>/<id>/callgraph.json` and `<out>/splits.json`) or hf (a
    /// Hugging Face dataset: `data/<split>.jsonl` and a dataset card `README.md`).
    #[arg(long)]
    format: Format,
    /// Instance root (repeatable).
    #[arg(long = "instances", default_value = "instances")]
    instances: Vec<PathBuf>,
    /// Output directory (created if needed).
    out_dir: PathBuf,
}

/// Exit 0 when every harvested instance was exported, 1 when some were malformed (each reported
/// with its file and field; the others are still exported).
pub fn run(a: Args) -> Result<ExitCode> {
    let dirs = flux_instance::discover(&a.instances)?;
    let format = match a.format {
        Format::Peer(f) => f,
        Format::Hf => return hf(&dirs, &a.out_dir),
    };
    let report = export::export(format, &dirs, &a.out_dir);
    let code = notes(&report.skipped, &report.errors);
    println!(
        "exported {} instance(s) to {} ({}); {} skipped, {} error(s)",
        report.exported.len(),
        a.out_dir.display(),
        format,
        report.skipped.len(),
        report.errors.len()
    );
    Ok(code)
}

fn hf(dirs: &[PathBuf], out: &std::path::Path) -> Result<ExitCode> {
    let report = flux_instance::hf::export(dirs, out);
    let code = notes(&report.skipped, &report.errors);
    let splits: Vec<String> = report
        .splits
        .iter()
        .map(|(s, ids)| format!("{s} {}", ids.len()))
        .collect();
    println!(
        "exported a Hugging Face dataset to {} ({}; card {}); {} skipped, {} error(s)",
        out.display(),
        if splits.is_empty() {
            "no rows".to_string()
        } else {
            splits.join(", ")
        },
        out.join("README.md").display(),
        report.skipped.len(),
        report.errors.len()
    );
    Ok(code)
}

/// Print what was skipped and what failed; exit 1 when anything failed (every instance is
/// still tried: one malformed instance never stops the export).
fn notes(skipped: &[export::Skipped], errors: &[flux_instance::InstanceError]) -> ExitCode {
    for s in skipped {
        eprintln!("flux: note: skipped {}: {}", s.dir.display(), s.reason);
    }
    for e in errors {
        eprintln!("flux: error: {e}");
    }
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
