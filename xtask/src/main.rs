//! `cargo xtask <subcommand>`: project chores in Rust instead of shell scripts.
//!
//! Thin by design: argument parsing and calls into library crates, one module per subcommand.
//! (Run as `cargo run -p xtask -- <subcommand>` where no `xtask` cargo alias is configured.)

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod corpus;
mod fuzz;
mod harvest;
mod images;
mod setup;
mod swe_flux;
mod swe_flux_sdist;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "flux project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the flux container images (bases, then repository layers) from images/images.toml.
    Images(images::Args),
    /// Install what flux needs on a fresh Debian machine (apt packages, rust-src, bpf-linker,
    /// dockerd) and build the images.
    Setup,
    /// `setup`, then run every test (`cargo test`).
    Test(setup::TestArgs),
    /// Side-by-side measurements (ratios in one run; never asserted in tests).
    Bench(bench::Args),
    /// Run each cargo-fuzz target of fuzz/ for a few seconds (nightly + cargo-fuzz).
    Fuzz(fuzz::Args),
    /// Harvest every instance under instances/ with the release flux (building what is missing),
    /// then a summary per kind and repository.
    Harvest(harvest::Args),
    /// Record the merge's inputs of every witness-corpus program as fixtures of the offline merge
    /// corpus (flux-merge/tests/corpus/) and refresh their snapshots. Needs root and eBPF.
    RecordMergeCorpus(corpus::Args),
    /// Check flux against SWE-Flux's own instances (copies of their store in DIR, never in this
    /// repository): import each, harvest it in an image of their repository at their commit,
    /// compare with their stored answer; a table per instance and the figures.
    SweFluxValidate(swe_flux::Args),
}

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Images(args) => images::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Harvest(args) => harvest::run(args),
        Command::RecordMergeCorpus(args) => corpus::run(args),
        Command::SweFluxValidate(args) => swe_flux::run_validate(args),
        Command::Fuzz(args) => fuzz::run(args),
        Command::Setup => setup::setup(),
        Command::Test(args) => setup::test(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The `flux` a bench measures: `FLUX_BENCH_BIN` (another build side by side, e.g. a baseline
/// before a change), else the release binary, built first ([`build_flux_release`]).
pub fn bench_flux() -> anyhow::Result<PathBuf> {
    match bench_bin(std::env::var_os("FLUX_BENCH_BIN"))? {
        Some(p) => Ok(p),
        None => build_flux_release(),
    }
}

/// `FLUX_BENCH_BIN`'s value as a binary to use (`None`: unset or empty, build the release one).
fn bench_bin(var: Option<std::ffi::OsString>) -> anyhow::Result<Option<PathBuf>> {
    let Some(p) = var.filter(|p| !p.is_empty()).map(PathBuf::from) else {
        return Ok(None);
    };
    anyhow::ensure!(p.is_file(), "FLUX_BENCH_BIN={}: no such file", p.display());
    Ok(Some(p))
}

/// Build the release `flux` binary and return its path (under `CARGO_TARGET_DIR` when set,
/// where cargo put it: `target/` alone named a missing or stale binary then).
pub fn build_flux_release() -> anyhow::Result<PathBuf> {
    let root = workspace_root();
    let st = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .args(["build", "--release", "--quiet", "-p", "flux-cli"])
        .status()?;
    if !st.success() {
        anyhow::bail!("building flux (cargo build --release -p flux-cli) failed");
    }
    Ok(target_dir(&root).join("release/flux"))
}

/// Cargo's target directory for the workspace at `root`: `CARGO_TARGET_DIR` (relative to
/// `root` when relative), else `root/target`.
fn target_dir(root: &std::path::Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(d) => root.join(d),
        None => root.join("target"),
    }
}

#[cfg(test)]
mod bench_bin_tests {
    use super::bench_bin;

    /// `cargo xtask bench gen` (and hook, extract) ignored `FLUX_BENCH_BIN` and always built and
    /// measured the release binary, so a baseline build could not be measured side by side.
    #[test]
    fn flux_bench_bin_names_the_binary_every_bench_measures() {
        let exe = std::env::current_exe().unwrap();
        assert_eq!(
            bench_bin(Some(exe.clone().into_os_string())).unwrap(),
            Some(exe)
        );
        assert_eq!(bench_bin(None).unwrap(), None);
        assert_eq!(bench_bin(Some("".into())).unwrap(), None);
        let e = bench_bin(Some("/nonexistent/flux".into())).unwrap_err();
        assert!(
            e.to_string().contains("FLUX_BENCH_BIN=/nonexistent/flux"),
            "{e}"
        );
    }
}
