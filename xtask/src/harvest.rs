//! `cargo xtask harvest [--check] [--replace] [--runtime R] [PATH…]`: harvest every instance
//! (default: `instances/`) with the release `flux`, building what is missing first (the release
//! binary; the images the instances name, through the same code as `cargo xtask images`), one
//! progress line per instance, then a table per kind × repository. Exits non-zero when any
//! instance failed.
//!
//! Architecture invariant: xtask does not link flux-agent (it must build without the eBPF
//! toolchain); it drives the `flux` binary (`flux harvest --json`, one JSON object per instance
//! on stdout) and reads instance files as plain text.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result};
use flux_container::images::{self, BuildConfig};
use flux_container::Runtime;

#[derive(clap::Args)]
pub struct Args {
    /// Harvest again from clean containers and compare with the stored oracles (writes nothing).
    #[arg(long, conflicts_with = "replace")]
    check: bool,
    /// Replace stored oracles whose answer changed.
    #[arg(long)]
    replace: bool,
    /// `docker`, `host` or `auto` (default: flux's default, docker when the daemon answers).
    #[arg(long)]
    runtime: Option<String>,
    /// Do not build missing images (instances whose image is missing then fail).
    #[arg(long)]
    no_images: bool,
    /// Instance directories or directories holding them (default: <workspace>/instances).
    paths: Vec<PathBuf>,
}

/// Instance directories at or under `root` (a directory holding `instance.toml`), sorted.
fn instance_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    if root.join("instance.toml").is_file() {
        out.push(root.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            !n.starts_with('.') && n != "target"
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for d in dirs {
        instance_dirs(&d, out);
    }
}

/// The top-level `image = "…"` of an instance file (a plain-text read: malformed files are
/// flux's to report).
fn image_of(instance_toml: &Path) -> Option<String> {
    let text = std::fs::read_to_string(instance_toml).ok()?;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            return None;
        }
        let Some(v) = t
            .strip_prefix("image")
            .and_then(|r| r.trim_start().strip_prefix('='))
        else {
            continue;
        };
        let v = v.split('#').next().unwrap_or("").trim();
        return Some(v.trim_matches(|c| c == '"' || c == '\'').to_owned());
    }
    None
}

/// Build the images the instances name that do not exist yet. Failures are printed: the
/// instances that need them will fail with the harvest's own error.
fn build_missing_images(root: &Path, dirs: &[PathBuf]) -> Result<()> {
    let mut wanted: Vec<String> = dirs
        .iter()
        .filter_map(|d| image_of(&d.join("instance.toml")))
        .collect();
    wanted.sort();
    wanted.dedup();
    if wanted.is_empty() {
        return Ok(());
    }
    let rt = tokio::runtime::Runtime::new().context("start tokio")?;
    rt.block_on(async {
        let runtime = match Runtime::connect().await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("xtask harvest: not building images: {e}");
                return Ok(());
            }
        };
        let definitions = root.join("images/images.toml");
        let defined: Vec<String> = images::Definitions::load(&definitions)?
            .all()
            .iter()
            .map(images::Target::image)
            .collect();
        let mut names = Vec::new();
        for image in &wanted {
            if runtime.image_id(image).await?.is_none() {
                if defined.contains(image) {
                    names.push(image.clone());
                } else {
                    eprintln!("xtask harvest: {image} is not defined in images/images.toml; not building it")
                }
            }
        }
        names.sort();
        names.dedup();
        if names.is_empty() {
            return Ok(());
        }
        eprintln!(
            "xtask harvest: building missing images: {}",
            names.join(", ")
        );
        let config = BuildConfig {
            definitions,
            cache_dir: root.join(".flux-cache"),
            rebuild: false,
        };
        let results =
            images::build(&runtime, &config, &names, &mut |l| eprintln!("  .. {l}")).await?;
        for (image, r) in results {
            if let Err(e) = r {
                eprintln!("xtask harvest: building {image} failed: {e}");
            }
        }
        anyhow::Ok(())
    })
}

#[derive(Default, Clone, Copy)]
struct Counts {
    harvested: usize,
    reproduced: usize,
    failed: usize,
}

pub fn run(args: Args) -> Result<ExitCode> {
    // The README promises this works on a fresh machine: install the toolchain pieces and start
    // dockerd first (idempotent; the same bootstrap as `cargo xtask test`).
    crate::setup::ensure()?;
    let root = crate::workspace_root();
    let paths = if args.paths.is_empty() {
        vec![root.join("instances")]
    } else {
        args.paths.clone()
    };
    let mut dirs = Vec::new();
    for p in &paths {
        instance_dirs(p, &mut dirs);
    }
    eprintln!("xtask harvest: building the release flux");
    let mut flux = crate::build_flux_release()?;
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        // build_flux_release builds from the workspace root; a relative target dir is below it.
        flux = root.join(dir).join("release/flux");
    }
    if !args.no_images {
        build_missing_images(&root, &dirs)?;
    }

    let mut cmd = Command::new(&flux);
    cmd.current_dir(&root)
        .env("FLUX_CACHE", root.join(".flux-cache"))
        .arg("harvest")
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if args.check {
        cmd.arg("--check");
    }
    if args.replace {
        cmd.arg("--replace");
    }
    if let Some(r) = &args.runtime {
        cmd.args(["--runtime", r]);
    }
    cmd.args(&paths);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("running {}", flux.display()))?;
    // flux's own progress lines go to stderr; keep them for when something goes wrong as a whole.
    let mut stderr = child.stderr.take().context("flux stderr")?;
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let total = dirs.len();
    let mut table: BTreeMap<(String, String), Counts> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut n = 0;
    for line in BufReader::new(child.stdout.take().context("flux stdout")?).lines() {
        let line = line?;
        let Ok(r) = serde_json::from_str::<serde_json::Value>(&line) else {
            println!("{line}");
            continue;
        };
        n += 1;
        let s = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_owned();
        let (name, status, kind, repo) = (s("name"), s("status"), s("kind"), s("repository"));
        let secs = r.get("seconds").and_then(|v| v.as_f64()).unwrap_or(0.0);
        let c = table.entry((kind.clone(), repo)).or_default();
        match status.as_str() {
            "failed" => {
                c.failed += 1;
                let err = s("error");
                let first = err.lines().next().unwrap_or("").to_owned();
                println!("[{n}/{total}] FAILED     {name}: {first}");
                failures.push(err);
            }
            "reproduced" => {
                c.reproduced += 1;
                println!("[{n}/{total}] reproduced {name} ({kind}, {secs:.1}s)");
            }
            other => {
                c.harvested += 1;
                println!("[{n}/{total}] {other:<10} {name} ({kind}, {secs:.1}s)");
            }
        }
    }
    let status = child.wait()?;
    let flux_stderr = err_thread.join().unwrap_or_default();
    if status.code() == Some(2) || (n == 0 && !status.success()) {
        eprint!("{flux_stderr}");
        anyhow::bail!("flux harvest could not run ({status})");
    }

    println!();
    println!(
        "{:<24} {:<14} {:>9} {:>10} {:>6}",
        "kind", "repository", "harvested", "reproduced", "failed"
    );
    let mut sum = Counts::default();
    for ((kind, repo), c) in &table {
        println!(
            "{kind:<24} {repo:<14} {:>9} {:>10} {:>6}",
            c.harvested, c.reproduced, c.failed
        );
        sum.harvested += c.harvested;
        sum.reproduced += c.reproduced;
        sum.failed += c.failed;
    }
    println!(
        "{:<24} {:<14} {:>9} {:>10} {:>6}",
        "total", "", sum.harvested, sum.reproduced, sum.failed
    );
    if !failures.is_empty() {
        println!("\nfailures:");
        for f in &failures {
            println!("- {f}");
        }
    }
    Ok(if sum.failed == 0 && status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn image_is_read_from_the_top_level_only() {
        let d = std::env::temp_dir().join(format!("xtask-harvest-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("instance.toml");
        std::fs::write(
            &p,
            "id = \"x\"\nimage = \"flux/sympy:1.13.3-py3.11\" # pinned\n[test]\nimage = \"no\"\n",
        )
        .unwrap();
        assert_eq!(
            super::image_of(&p).as_deref(),
            Some("flux/sympy:1.13.3-py3.11")
        );
        std::fs::write(&p, "[test]\nimage = \"no\"\n").unwrap();
        assert_eq!(super::image_of(&p), None);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
