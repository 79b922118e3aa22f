//! `flux harvest [--check [--witness flux|reference]] [--replace] [--runtime docker|host] [PATH…]`: glue over
//! `flux_harvest::harvest`. One line per instance on stderr as it finishes (and, with `--json`,
//! one JSON object per instance on stdout), a summary at the end. Exit status: 0 when every
//! instance was harvested (or reproduced), 1 when any failed, 2 when nothing could run, 130 or
//! 143 when SIGINT or SIGTERM stopped it (the running test's container is removed first).
use anyhow::Result;
use flux_harvest::{InstanceReport, Runtime, Status};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WitnessArg {
    Flux,
    Reference,
}

#[derive(clap::Args)]
pub struct Args {
    /// Harvest again from a clean run and compare with the stored oracle.json (nothing is
    /// written to the instance); any difference fails with a diff.
    #[arg(long, conflicts_with = "replace")]
    check: bool,
    /// Replace a stored oracle.json / callgraph.json that holds a different answer (the
    /// replaced files are kept in the instance's history/).
    #[arg(long)]
    replace: bool,
    /// Run each test twice from clean containers: answers that differ are refused, a call
    /// graph that differs is not written.
    #[arg(long)]
    twice: bool,
    /// With --check, what re-derives the stored gold: `flux` (a clean traced run, USDT and the
    /// hook) or `reference` (the instance's exact command in its image under a plain settrace
    /// reference sharing no code with the hook, the same extractor and template on its trace;
    /// a disagreement fails with both answers).
    #[arg(long, value_enum, default_value = "flux", requires = "check")]
    witness: WitnessArg,
    /// With `--check --witness reference`: record the agreeing reference run in each stored
    /// gold's provenance (`provenance.witness`; the answer is untouched), which `flux stats`
    /// counts as witnessed.
    #[arg(long, requires = "witness")]
    record_witness: bool,
    #[arg(long, value_enum, default_value = "auto")]
    runtime: Runtime,
    #[command(flatten)]
    cache: crate::cache::CacheArg,
    /// The most USDT events of the program kept per run; past it the test is stopped and the
    /// instance fails naming the budget.
    #[arg(long, default_value_t = 20_000_000)]
    max_events: usize,
    /// Also print one JSON object per instance on stdout.
    #[arg(long)]
    json: bool,
    /// Harvest only the K-th of N disjoint parts of the instances (by `<repository>/<id>`),
    /// e.g. one per Kubernetes Indexed Job pod; the N parts together are every instance once.
    #[arg(long, value_parser = crate::gen::parse_shard)]
    shard: Option<flux_gen::Shard>,
    /// Instance directories, or directories to search for them (default: `instances`).
    paths: Vec<PathBuf>,
}

fn line(r: &InstanceReport) -> String {
    let kind = r.kind.map(|k| k.as_str()).unwrap_or("-");
    let labels = if r.labels.is_empty() {
        String::new()
    } else {
        format!(" [{}]", r.labels.join(", "))
    };
    let verdicts = flux_harvest::verdicts(r);
    let witness = match r.witness {
        Some(flux_harvest::WitnessKind::Reference) => " by the reference witness",
        _ => "",
    };
    let verdicts = if verdicts.is_empty() {
        String::new()
    } else {
        format!("{verdicts}{witness}; ")
    };
    let warnings: String = r
        .warnings
        .iter()
        .map(|w| format!("\n  warning: {w}"))
        .collect();
    match (&r.status, &r.error) {
        (Status::Failed, Some(e)) => format!("FAILED     {}: {e}{warnings}", r.name),
        (s, _) => format!(
            "{:<10} {} ({verdicts}{kind}, {}, {} events, {:.1}s){labels}{warnings}",
            s.as_str(),
            r.name,
            r.runtime,
            r.events.unwrap_or(0),
            r.seconds
        ),
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mut opts = flux_interop::external::harvest_options(a.cache.dir());
    opts.check = a.check;
    opts.replace = a.replace;
    opts.tracer.max_events = a.max_events.max(1);
    opts.twice = a.twice;
    opts.witness = match a.witness {
        WitnessArg::Flux => flux_harvest::WitnessKind::Flux,
        WitnessArg::Reference => flux_harvest::WitnessKind::Reference,
    };
    opts.runtime = a.runtime;
    if a.record_witness && !matches!(a.witness, WitnessArg::Reference) {
        anyhow::bail!("--record-witness records the reference witness: add --witness reference");
    }
    opts.record_witness = a.record_witness;
    let paths = if a.paths.is_empty() {
        vec![Path::new("instances").to_path_buf()]
    } else {
        a.paths.clone()
    };
    let paths = match a.shard {
        Some(shard) => flux_gen::set::shard_instances(&paths, shard)?,
        None => paths,
    };
    let json = a.json;
    let mut progress = |r: &InstanceReport| {
        eprintln!("flux: {}", line(r));
        if json {
            if let Ok(s) = serde_json::to_string(r) {
                println!("{s}");
            }
        }
    };
    let report = match flux_harvest::harvest_blocking(&paths, &opts, &mut progress) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flux: error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if let Some(note) = &report.note {
        eprintln!("flux: note: {note}");
    }
    let count = |s: Status| report.instances.iter().filter(|r| r.status == s).count();
    eprintln!(
        "flux: {} instance(s) on {}: {} created, {} unchanged, {} replaced, {} reproduced, {} failed",
        report.instances.len(),
        report.runtime,
        count(Status::Created),
        count(Status::Unchanged),
        count(Status::Replaced),
        count(Status::Reproduced),
        count(Status::Failed),
    );
    if let Some(sig) = report.interrupted {
        eprintln!("flux: interrupted by {sig}; the instances after it were not harvested");
        return Ok(ExitCode::from(sig.exit_code()));
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
