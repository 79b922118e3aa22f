//! `flux images build` and `flux images list`: the reproducible images of `images/images.toml`
//! (flux-container's builder, the same function `cargo xtask images` drives) and their
//! manifests in `<cache>/images/*.json`.
use anyhow::{Context, Result};
use flux_container::images::{self, Action, BuildConfig, Manifest};
use flux_container::Runtime;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Build images (incremental: up-to-date images are skipped).
    Build(BuildArgs),
    /// List the built images from their manifests.
    List(ListArgs),
}

#[derive(clap::Args)]
struct BuildArgs {
    /// Rebuild even if an image's manifest matches its definition (the rootfs cache is reused).
    #[arg(long)]
    rebuild: bool,
    /// Image definitions.
    #[arg(long, default_value = "images/images.toml")]
    definitions: PathBuf,
    /// Manifests go to <cache>/images/, package sources to <cache>/src/.
    #[command(flatten)]
    cache: crate::cache::CacheArg,
    /// Images to build: a repo name (`sympy`), a base name (`py3.13-trixie`) or a full reference
    /// (`flux/base:py3.15-sid`). None: the default bases and every repo.
    names: Vec<String>,
}

#[derive(clap::Args)]
struct ListArgs {
    /// Manifests are read from <cache>/images/.
    #[command(flatten)]
    cache: crate::cache::CacheArg,
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.cmd {
        Cmd::Build(b) => build(b),
        Cmd::List(l) => list(&l.cache.dir()),
    }
}

fn build(a: BuildArgs) -> Result<ExitCode> {
    if !a.definitions.is_file() {
        anyhow::bail!(
            "image definitions {}: no such file",
            a.definitions.display()
        );
    }
    let config = BuildConfig {
        definitions: a.definitions,
        cache_dir: a.cache.dir(),
        rebuild: a.rebuild,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    let results = rt.block_on(async {
        let runtime = Runtime::connect().await?;
        images::build(&runtime, &config, &a.names, &mut |line| {
            eprintln!("  .. {line}")
        })
        .await
    })?;
    let mut failed = 0;
    for (image, result) in &results {
        match result {
            Ok(r) => {
                let verb = match r.action {
                    Action::Built => "built  ",
                    Action::Skipped => "skipped",
                };
                println!(
                    "{verb} {image} ({}, python {}) in {:.1}s; manifest {}",
                    short_id(r.manifest.image_id.as_deref()),
                    r.manifest.interpreter.version,
                    r.seconds,
                    r.manifest_path.display()
                );
            }
            Err(e) => {
                failed += 1;
                println!("FAILED  {image}: {e}");
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn short_id(id: Option<&str>) -> &str {
    let id = id.unwrap_or("?");
    id.trim_start_matches("sha256:").get(..12).unwrap_or(id)
}

/// Print one line per manifest; unreadable manifests are reported and make the exit code 1.
fn list(cache_dir: &Path) -> Result<ExitCode> {
    let dir = cache_dir.join("images");
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| dir.display().to_string()),
    };
    paths.sort();
    if paths.is_empty() {
        println!(
            "no images built yet (no manifests in {}); run `flux images build`",
            dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut bad = 0;
    let mut rows = Vec::new();
    for p in &paths {
        match Manifest::load(p) {
            Ok(m) => rows.push([
                m.image.clone(),
                m.kind.clone(),
                short_id(m.image_id.as_deref()).to_string(),
                m.interpreter.version.clone(),
                m.pip_freeze.len().to_string(),
                m.built_at.clone(),
            ]),
            Err(e) => {
                bad += 1;
                eprintln!("flux: {}: {e}", p.display());
            }
        }
    }
    let header = ["IMAGE", "KIND", "ID", "PYTHON", "PKGS", "BUILT"].map(String::from);
    let mut width = [0usize; 6];
    for r in std::iter::once(&header).chain(&rows) {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    for r in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = r
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
