//! `cargo xtask fuzz [--seconds N] [TARGET…]`: run each cargo-fuzz target of `fuzz/` for a few
//! seconds (default: every `[[bin]]` of `fuzz/Cargo.toml`, 10 s each), from its seeds in
//! `fuzz/seeds/<target>/` into a scratch corpus (nothing in the checkout changes unless a crash
//! is found: then libFuzzer writes it to `fuzz/artifacts/<target>/` and this fails).
//!
//! Needs the nightly toolchain and `cargo-fuzz` (`cargo xtask setup` installs it);
//! `cargo xtask test` runs this after the tests where both are there, and says so where not.
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, ExitCode};

#[derive(clap::Args)]
pub struct Args {
    /// Seconds per target.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Targets (default: all of fuzz/Cargo.toml).
    targets: Vec<String>,
}

/// Whether this machine can fuzz: nightly cargo and cargo-fuzz answer.
pub fn available() -> bool {
    Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The `[[bin]]` names of `fuzz/Cargo.toml` (a plain-text read: `name = "…"` after each).
fn targets(fuzz: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(fuzz.join("Cargo.toml")).context("fuzz/Cargo.toml")?;
    let mut out = Vec::new();
    let mut in_bin = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
            continue;
        }
        if let (true, Some(v)) = (in_bin, line.strip_prefix("name")) {
            if let Some(v) = v.trim_start().strip_prefix('=') {
                out.push(v.trim().trim_matches('"').to_owned());
            }
        }
    }
    Ok(out)
}

impl Args {
    /// Every target, 10 s each: what `cargo xtask test` runs.
    pub fn brief() -> Args {
        Args {
            seconds: 10,
            targets: Vec::new(),
        }
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let fuzz = crate::workspace_root().join("fuzz");
    if !available() {
        bail!("cargo +nightly fuzz does not run here (`cargo xtask setup` installs cargo-fuzz)");
    }
    let names = if a.targets.is_empty() {
        targets(&fuzz)?
    } else {
        a.targets.clone()
    };
    let mut failed = Vec::new();
    for t in &names {
        let scratch = std::env::temp_dir().join(format!("flux-fuzz-{}-{t}", std::process::id()));
        std::fs::create_dir_all(&scratch)?;
        let seeds = fuzz.join("seeds").join(t);
        std::fs::create_dir_all(&seeds)?;
        eprintln!("xtask fuzz: {t} for {}s", a.seconds);
        let st = Command::new("cargo")
            .current_dir(&fuzz)
            .args(["+nightly", "fuzz", "run", t])
            // The targets link flux-agent; its eBPF object is not needed to fuzz parsers.
            .env("AYA_BUILD_SKIP", "1")
            .arg(&scratch)
            .arg(&seeds)
            .arg("--")
            .arg(format!("-max_total_time={}", a.seconds))
            .status()
            .with_context(|| format!("running cargo fuzz run {t}"))?;
        let _ = std::fs::remove_dir_all(&scratch);
        if !st.success() {
            failed.push(t.clone());
        }
    }
    if !failed.is_empty() {
        bail!(
            "fuzz targets failed: {} (crashes in fuzz/artifacts/)",
            failed.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_fuzz_target_is_found() {
        let t = super::targets(&crate::workspace_root().join("fuzz")).unwrap();
        for want in ["instance_loader", "template", "answer_compare"] {
            assert!(t.iter().any(|n| n == want), "{want} in {t:?}");
        }
    }
}
