//! `flux gen SET [--shard K/N] [--merge] [--resume] [--check] [--out DIR]`, `flux gen SET
//! --reauthor`, `flux gen SET --release NAME=VERSION` (`crate::release`) and `flux stats
//! [--json] PATH…`: glue over `flux_gen`.
//!
//! Exit status of `flux gen`: 0 when the set (or the shard's module results) was written, or
//! `--check` found the set equal to its regeneration; 1 when `--check` found differences; 2
//! when nothing could run or nothing valid was made (a bad spec, a pin the image does not
//! have, a select glob matching nothing, a repository left without an instance, another gen
//! holding the set's lock, no Docker, a missing image) — the set is then left as it was; 130 /
//! 143 when SIGINT / SIGTERM stopped it (its containers and scratch removed).
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The set directory (holding gen.toml) or the spec file.
    set: PathBuf,
    /// Run only the K-th of N disjoint parts of the modules (writes module results to --out;
    /// assemble them afterwards with --merge).
    #[arg(long, value_parser = parse_shard)]
    shard: Option<flux_gen::Shard>,
    /// Assemble the set from the module results in --out without running anything.
    #[arg(long, conflicts_with = "shard")]
    merge: bool,
    /// Keep module results already in --out instead of running those modules again.
    #[arg(long)]
    resume: bool,
    /// Regenerate and compare with the set on disk instead of writing it; with --shard K/N, a
    /// sample: that shard's modules made again into a fresh --out and compared with the
    /// results the set was assembled from (<cache>/gen/<set name>/) and the set's instances.
    #[arg(long)]
    check: bool,
    /// Write the set's questions again with this flux's prose and preambles and drop what the
    /// screens drop (recorded in screened.json), running nothing: oracle.json files stay as
    /// they are; the module results in <cache>/gen/<set name>/modules/ get the same questions.
    /// Reads the repositories' sources from <cache>/src/ (`flux images source`).
    #[arg(long, conflicts_with_all = ["shard", "merge", "resume", "check"])]
    reauthor: bool,
    /// Regenerate repository NAME of the set for a new VERSION (NAME=VERSION): the current
    /// release's instances stay in the set as <id>@<old version>, gen.toml gets the new pin,
    /// image and release date, the other repositories' module results are kept (--resume), and
    /// each new instance says whether its target function changed since the old release.
    #[arg(long, value_name = "NAME=VERSION", conflicts_with_all = ["shard", "merge", "check", "reauthor"])]
    release: Option<String>,
    /// The new release's date (YYYY-MM-DD or ISO 8601) instead of PyPI's upload time of its
    /// sdist.
    #[arg(long, value_name = "DATE", requires = "release")]
    released: Option<String>,
    /// The new release's image (default: the current image with the version replaced).
    #[arg(long, requires = "release")]
    image: Option<String>,
    /// Where module results and the run report go (default: <cache>/gen/<set name>/).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    cache: crate::cache::CacheArg,
    /// Print the run report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn parse_shard(s: &str) -> Result<flux_gen::Shard, String> {
    flux_gen::Shard::parse(s)
}

pub fn run(a: Args) -> Result<ExitCode> {
    let cache = a.cache.dir();
    if a.reauthor {
        return reauthor(&a, &cache);
    }
    let opts = flux_gen::GenOptions {
        spec: a.set.clone(),
        shard: a.shard.unwrap_or(flux_gen::Shard::ALL),
        out: a.out.clone(),
        merge: a.merge,
        resume: a.resume || a.release.is_some(),
        check: a.check,
        harvest: flux_interop::external::harvest_options(cache.clone()),
    };
    let release = match &a.release {
        None => None,
        Some(r) => {
            let out = match &a.out {
                Some(o) => o.clone(),
                None => {
                    let spec = flux_gen::spec::load(&a.set)?;
                    cache.join("gen").join(&spec.name)
                }
            };
            let prepared =
                crate::release::prepare(&a.set, &out, r, a.released.as_deref(), a.image.as_deref());
            match prepared {
                Ok(p) => Some(p),
                Err(e) => {
                    eprintln!("flux: error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            }
        }
    };
    let report = match flux_gen::generate_interruptible(&opts) {
        Ok(Ok(r)) => r,
        Ok(Err(sig)) => {
            eprintln!(
                "flux gen: interrupted by {sig}: its containers and scratch removed, the set left \
                 as it was; module results written so far stay in the output directory \
                 (--resume keeps them)"
            );
            return Ok(ExitCode::from(sig.exit_code()));
        }
        Err(e) => {
            eprintln!("flux: error: {e:#}");
            if let Some(p) = release {
                p.undo()?;
                eprintln!("flux gen: --release: gen.toml and the old release's instances put back");
            }
            return Ok(ExitCode::from(2));
        }
    };
    if let Some(p) = release {
        p.finish()?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    for (m, why) in &report.modules_skipped {
        eprintln!("flux gen: skipped {m}: {why}");
    }
    for w in &report.witness {
        eprintln!(
            "flux gen: the reference witness {} {} ({}): gold {} / reference {}",
            if w.verdict == "disagrees" {
                "disagrees with"
            } else {
                "could not check"
            },
            w.id,
            w.kind,
            w.gold,
            w.reference
        );
    }
    if report.witnessed > 0 || !report.witness.is_empty() {
        eprintln!(
            "flux gen: the reference witness agreed with {} instance(s), dropped {}",
            report.witnessed,
            report.witness.len()
        );
    }
    eprintln!(
        "flux gen: {} ({}): {} module(s), {} run, {} skipped; {} screened candidate(s); {} instance(s) in the set; {:.0}s",
        report.set,
        report.shard,
        report.modules,
        report.modules_run,
        report.modules_skipped.len(),
        report.candidates,
        report.instances,
        report.wall_seconds
    );
    if a.check {
        for d in &report.differences {
            eprintln!("flux gen: --check: {d}");
        }
        if !report.differences.is_empty() {
            return Ok(ExitCode::from(1));
        }
        eprintln!("flux gen: --check: the set is what its spec regenerates");
    }
    Ok(ExitCode::SUCCESS)
}

fn reauthor(a: &Args, cache: &std::path::Path) -> Result<ExitCode> {
    let dir = if a.set.is_dir() {
        a.set.clone()
    } else {
        a.set.parent().map(PathBuf::from).unwrap_or_default()
    };
    let r = match flux_gen::reauthor::reauthor(&dir, cache) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flux: error: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    }
    for repo in &r.without_source {
        eprintln!(
            "flux gen: --reauthor: no source of {repo} under {}/src (`flux images source \
             {repo}` unpacks it): echoed-literal left unchecked for it",
            cache.display()
        );
    }
    let dropped: Vec<String> = r.dropped.iter().map(|(k, v)| format!("{k} {v}")).collect();
    eprintln!(
        "flux gen: --reauthor {}: {} instance(s), {} question(s) rewritten ({} changed the static \
         baseline's verdict; {} in the module results), {} kept, {} dropped ({})",
        r.set,
        r.instances,
        r.rewritten,
        r.easy_changed,
        r.module_questions_rewritten,
        r.kept,
        r.instances - r.kept,
        if dropped.is_empty() {
            "none".to_string()
        } else {
            dropped.join(", ")
        }
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct StatsArgs {
    /// Print JSON (keys `instances`, `repositories`, `by_kind`, `median`, ...).
    #[arg(long)]
    json: bool,
    /// Instance directories or directories to search (default: `instances`).
    paths: Vec<PathBuf>,
}

pub fn run_stats(a: StatsArgs) -> Result<ExitCode> {
    let paths = if a.paths.is_empty() {
        vec![PathBuf::from("instances")]
    } else {
        a.paths
    };
    let s = flux_gen::stats::stats(&paths)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", flux_gen::stats::render(&s));
    }
    Ok(if s.invalid.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
