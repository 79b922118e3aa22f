//! `flux export`: write instances in a peer benchmark's layout (flux_instance::export).
use anyhow::Result;
use flux_instance::export::{self, ExportFormat};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// swe-flux (`<out>/<repo>__<id>/` with oracle.json, question.json, files/, eval.sh) or
    /// traceeval (`<out>/<repo>/<id>/callgraph.json` and `<out>/splits.json`).
    #[arg(long)]
    format: ExportFormat,
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
    let report = export::export(a.format, &dirs, &a.out_dir);
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
        a.format,
        report.skipped.len(),
        report.errors.len()
    );
    Ok(if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
