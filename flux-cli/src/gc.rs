//! `flux gc [--keep N] [--max-size SIZE] [--dry-run] [--cache DIR]`: remove what the harvest's
//! caches no longer need (`flux_harvest::gc`: run directories beyond the newest N per
//! instance and beyond the size cap, stale image-build scratch, orphaned containers). Gold
//! files, manifests, wheelhouses and venvs are never touched.
use anyhow::{bail, Result};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Run directories kept per instance (the newest).
    #[arg(long, default_value_t = 1)]
    keep: usize,
    /// Run directories kept in all: bytes, or with a K, M, G or T suffix (powers of 1024).
    #[arg(long, default_value = "20G", value_parser = parse_size)]
    max_size: u64,
    /// List what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    cache: crate::cache::CacheArg,
}

/// `20G` → 20 GiB; a plain number is bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        Some('T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 500M, 20G)"))?;
    n.checked_shl(shift)
        .filter(|v| v >> shift == n)
        .ok_or_else(|| format!("`{s}` is too large"))
}

pub fn run(a: Args) -> Result<ExitCode> {
    let opts = flux_harvest::GcOptions {
        cache_dir: a.cache.dir(),
        keep: a.keep,
        max_bytes: a.max_size,
        dry_run: a.dry_run,
    };
    if !opts.cache_dir.is_dir() {
        bail!("no cache directory at {}", opts.cache_dir.display());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let r = rt.block_on(flux_harvest::gc(&opts))?;
    let verb = if a.dry_run { "would remove" } else { "removed" };
    for (p, n) in &r.removed {
        println!("{verb} {} ({})", p.display(), human(*n));
    }
    let containers = match r.containers {
        Some(n) if !a.dry_run => format!(", {n} orphaned container(s) removed"),
        Some(_) => String::new(),
        None => ", Docker does not answer (containers not looked at)".into(),
    };
    eprintln!(
        "flux: gc: {verb} {} director{} ({}), {} run director{} kept{containers}",
        r.removed.len(),
        if r.removed.len() == 1 { "y" } else { "ies" },
        human(r.bytes()),
        r.runs_kept,
        if r.runs_kept == 1 { "y" } else { "ies" },
    );
    Ok(ExitCode::SUCCESS)
}

fn human(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(super::parse_size("20G"), Ok(20 << 30));
        assert_eq!(super::parse_size("500m"), Ok(500 << 20));
        assert_eq!(super::parse_size("123"), Ok(123));
        assert!(super::parse_size("x").is_err());
        assert!(super::parse_size("99999999999T").is_err());
    }
}
