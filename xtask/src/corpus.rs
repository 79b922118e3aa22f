//! `cargo xtask record-merge-corpus [--flux PATH] [--only NAME,…] [--reencode]`: record the merge's inputs of
//! every witness-corpus program (`flux-cli/tests/witness/*.py`) as fixtures of the offline merge
//! corpus (`flux-merge/tests/corpus/<python>-<scope>/<program>.jsonl.gz`), then refresh their
//! snapshots (`UPDATE_EXPECT=1 cargo test -p flux-merge --test integration -- corpus::`). Rerun it when the hook,
//! the probes or the corpus change, and read the snapshots' diff: it is what the change did to
//! the merged traces. `--reencode` records nothing: it rewrites every fixture in the current
//! encoding and trim (frozen ones only re-encoded), for a change of `flux_merge::fixture`.
//!
//! Each program runs under `flux trace --calls usdt --record-merge-input` with a config that
//! targets it, on Debian's python3.11 (host) and sid's python3.15 (chroot into
//! `/var/cache/flux/rootfs/sid-py315`): with scope `run`, and for [`SCOPED`] also under pytest
//! (a test that runs the program) with scopes `tests` and `targets` (and `run` for
//! [`PYTEST_RUN`] on 3.15); the scoped witness programs (`flux-cli/tests/witness/scoped/test_*.py`,
//! pytest files) with scopes `tests` and `targets`, targeting what their `# targets:` line names
//! (untargeted code inside an extent is what scope `targets` is about). Programs live at
//! `/tmp/flux-corpus/` in both roots, so paths are the same in every recording; `flux` itself
//! normalises what changes from run to run (`flux_merge::fixture`). Needs root and eBPF.
//!
//! Architecture invariant (as everywhere in xtask): drives the `flux` binary, links no BPF.
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Programs recorded under pytest with scope `run` too (3.15 only: a whole pytest session
/// traced is ~1.5 MB of fixture; one pins 17.14, the hook's plugin generator under scope run).
pub const PYTEST_RUN: &[&str] = &["recursion"];

/// Programs also recorded under pytest with scopes `tests` and `targets`.
pub const SCOPED: &[&str] = &[
    "closures",
    "ctx_decorator",
    "deep_unwind",
    "exc_caught",
    "generators",
    "genexpr",
    "recursion",
    "threads_basic",
    "yield_from",
];

#[derive(clap::Args)]
pub struct Args {
    /// The flux binary (default: build the release one).
    #[arg(long)]
    flux: Option<PathBuf>,
    /// Only these programs (comma-separated names without `.py`).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Record nothing: rewrite every fixture in the current encoding, trimmed as a recording
    /// trims (frozen ones only re-encoded; needs no root).
    #[arg(long)]
    reencode: bool,
}

struct Python {
    label: &'static str,
    exe: &'static str,
    root: Option<PathBuf>,
}

impl Python {
    fn root(&self) -> PathBuf {
        self.root.clone().unwrap_or_else(|| PathBuf::from("/"))
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let ws = crate::workspace_root();
    if args.reencode {
        reencode(&ws.join("flux-merge/tests/corpus"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let flux = match args.flux {
        Some(f) => f,
        None => crate::build_flux_release()?,
    };
    let pythons = [
        Python {
            label: "3.11",
            exe: "/usr/bin/python3.11",
            root: None,
        },
        Python {
            label: "3.15",
            exe: "/usr/bin/python3.15",
            root: Some(PathBuf::from("/var/cache/flux/rootfs/sid-py315")),
        },
    ];
    // A frozen program's fixture pins a rule for inputs today's hook no longer makes (its
    // header says which hook recorded it): recording it again would lose that.
    let thawed = |p: &PathBuf| {
        !std::fs::read_to_string(p).is_ok_and(|t| t.lines().any(|l| l.starts_with("# frozen:")))
    };
    let mut programs: Vec<PathBuf> = std::fs::read_dir(ws.join("flux-cli/tests/witness"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .filter(thawed)
        .filter(|p| {
            args.only.is_empty()
                || args
                    .only
                    .iter()
                    .any(|o| p.file_stem().is_some_and(|s| s == o.as_str()))
        })
        .collect();
    programs.sort();
    // Regression programs of the merge (flux-merge/tests/programs), scope run only.
    let mut regress: Vec<PathBuf> = std::fs::read_dir(ws.join("flux-merge/tests/programs"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        // (It re-recorded the frozen ones here, losing what they pin: raw_thread's 3.11
        // fixture came out complete.)
        .filter(thawed)
        .filter(|p| {
            args.only.is_empty()
                || args
                    .only
                    .iter()
                    .any(|o| p.file_stem().is_some_and(|s| s == o.as_str()))
        })
        .collect();
    regress.sort();
    // The scoped witness programs (pytest files targeting what their header names).
    let mut scoped: Vec<PathBuf> = std::fs::read_dir(ws.join("flux-cli/tests/witness/scoped"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .filter(thawed)
        .filter(|p| {
            args.only.is_empty()
                || args
                    .only
                    .iter()
                    .any(|o| p.file_stem().is_some_and(|s| s == o.as_str()))
        })
        .collect();
    scoped.sort();
    let out_root = ws.join("flux-merge/tests/corpus");
    let mut failed = 0;
    for py in &pythons {
        let host_exe = py.root().join(py.exe.trim_start_matches('/'));
        if !host_exe.exists() {
            bail!("{} is missing (cargo xtask images)", host_exe.display());
        }
        let pytest = pytest_path(&ws, py)?;
        for prog in &regress {
            let name = prog.file_stem().unwrap().to_string_lossy().into_owned();
            let dest = out_root
                .join(format!("{}-regress", py.label))
                .join(format!("{name}.jsonl.gz"));
            match record(&flux, py, prog, "run", pytest.as_deref(), &dest) {
                Ok(()) => eprintln!(
                    "recorded {}",
                    dest.strip_prefix(&ws).unwrap_or(&dest).display()
                ),
                Err(e) => {
                    failed += 1;
                    eprintln!("FAILED {} {name}: {e:#}", py.label);
                }
            }
        }
        for prog in &programs {
            let name = prog.file_stem().unwrap().to_string_lossy().into_owned();
            let mut scopes = vec!["run"];
            if SCOPED.contains(&name.as_str()) {
                if py.label == "3.15" && PYTEST_RUN.contains(&name.as_str()) {
                    scopes.push("pytest-run");
                }
                scopes.extend(["tests", "targets"]);
            }
            for scope in scopes {
                let dest = out_root
                    .join(format!("{}-{scope}", py.label))
                    .join(format!("{name}.jsonl.gz"));
                match record(&flux, py, prog, scope, pytest.as_deref(), &dest) {
                    Ok(()) => eprintln!(
                        "recorded {}",
                        dest.strip_prefix(&ws).unwrap_or(&dest).display()
                    ),
                    Err(e) => {
                        failed += 1;
                        eprintln!("FAILED {} {name} {scope}: {e:#}", py.label);
                    }
                }
            }
        }
    }
    for py in &pythons {
        let pytest = pytest_path(&ws, py)?;
        for prog in &scoped {
            let name = prog.file_stem().unwrap().to_string_lossy().into_owned();
            for scope in ["tests", "targets"] {
                let dest = out_root
                    .join(format!("{}-{scope}", py.label))
                    .join(format!("{name}.jsonl.gz"));
                match record(&flux, py, prog, scope, pytest.as_deref(), &dest) {
                    Ok(()) => eprintln!(
                        "recorded {}",
                        dest.strip_prefix(&ws).unwrap_or(&dest).display()
                    ),
                    Err(e) => {
                        failed += 1;
                        eprintln!("FAILED {} {name} {scope}: {e:#}", py.label);
                    }
                }
            }
        }
    }
    // Frozen fixtures are kept, in the current encoding.
    reencode(&out_root)?;
    let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&ws)
        .env("UPDATE_EXPECT", "1")
        .args([
            "test",
            "-q",
            "-p",
            "flux-merge",
            "--test",
            "integration",
            "--",
            "corpus::",
        ])
        .status()?;
    if !st.success() {
        bail!("refreshing the snapshots failed");
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Where pytest is importable from for `py` (`None`: its own site-packages): on sid, the
/// wheels of the yt-dlp wheelhouse unpacked into the root's `/tmp/flux-corpus-pytest`.
fn pytest_path(ws: &Path, py: &Python) -> Result<Option<String>> {
    let Some(root) = &py.root else {
        return Ok(None);
    };
    let inside = "/tmp/flux-corpus-pytest";
    let dir = root.join(inside.trim_start_matches('/'));
    if dir.join("pytest").is_dir() {
        return Ok(Some(inside.into()));
    }
    let wheels = ws.join(".flux-cache/wheelhouse/yt-dlp-2025.10.22-py3.15");
    std::fs::create_dir_all(&dir)?;
    for w in std::fs::read_dir(&wheels).with_context(|| format!("reading {}", wheels.display()))? {
        let w = w?.path();
        let n = w.file_name().unwrap().to_string_lossy().into_owned();
        if [
            "pytest-",
            "pluggy-",
            "iniconfig-",
            "packaging-",
            "pygments-",
        ]
        .iter()
        .any(|p| n.starts_with(p))
        {
            let st = Command::new("python3")
                .args(["-m", "zipfile", "-e"])
                .arg(&w)
                .arg(&dir)
                .status()?;
            if !st.success() {
                bail!("unpacking {}", w.display());
            }
        }
    }
    Ok(Some(inside.into()))
}

/// Rewrite every fixture under `corpus` in the current encoding (`flux_merge::fixture`), and
/// but for frozen ones normalised and trimmed as a recording is (that is idempotent: what a
/// trim left, it leaves).
fn reencode(corpus: &Path) -> Result<()> {
    let ws = crate::workspace_root();
    let frozen = |program: &str| {
        ["flux-cli/tests/witness", "flux-merge/tests/programs"]
            .iter()
            .any(|d| {
                std::fs::read_to_string(ws.join(d).join(program))
                    .is_ok_and(|t| t.lines().any(|l| l.starts_with("# frozen:")))
            })
    };
    for d in std::fs::read_dir(corpus)? {
        let d = d?.path();
        if !d.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&d)? {
            let f = f?.path();
            if !f.to_string_lossy().ends_with(".jsonl.gz") {
                continue;
            }
            let r = std::io::BufReader::new(flate2::read::GzDecoder::new(std::fs::File::open(&f)?));
            let mut fx = flux_merge::fixture::Fixture::read(r)
                .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
            let program = fx
                .header
                .program
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            if !frozen(&program) {
                fx.normalise();
            }
            let mut text = Vec::new();
            fx.write(&mut text)?;
            write_gz(&f, &text)?;
        }
    }
    Ok(())
}

/// `text` gzipped into `dest`, with fixed header fields (no name, no time): the same input
/// gives the same bytes.
fn write_gz(dest: &Path, text: &[u8]) -> Result<()> {
    let f = std::fs::File::create(dest)?;
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(f, flate2::Compression::best());
    gz.write_all(text)?;
    gz.finish()?;
    Ok(())
}

fn record(
    flux: &Path,
    py: &Python,
    prog: &Path,
    scope: &str,
    pytest: Option<&str>,
    dest: &Path,
) -> Result<()> {
    let name = prog.file_name().unwrap().to_string_lossy().into_owned();
    let stem = prog.file_stem().unwrap().to_string_lossy().into_owned();
    let root = py.root();
    let inside_dir = "/tmp/flux-corpus";
    let host_dir = root.join(inside_dir.trim_start_matches('/'));
    let _ = std::fs::remove_dir_all(&host_dir);
    std::fs::create_dir_all(&host_dir)?;
    std::fs::copy(prog, host_dir.join(&name))?;
    let mut cmd: Vec<String> = Vec::new();
    // A scoped witness program is a pytest file of its own, targeting what its header names.
    let test_file = name.starts_with("test_");
    let functions: Vec<String> = std::fs::read_to_string(prog)?
        .lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix("# targets: "))
        .map(|r| r.split(',').map(|f| f.trim().to_string()).collect())
        .unwrap_or_default();
    let pytest_run = scope != "run";
    let scope = scope.strip_prefix("pytest-").unwrap_or(scope);
    if py.root.is_some() {
        // A mount namespace of its own with a /proc (the hook reads /proc/self/maps to find the
        // semaphores it zeroes outside test windows).
        let sh = r#"mount -t proc proc "$0/proc" && exec chroot "$0" "$@""#;
        cmd.extend(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "/bin/sh",
                "-c",
                sh,
            ]
            .map(String::from),
        );
        cmd.push(root.display().to_string());
    }
    cmd.push(py.exe.into());
    if !pytest_run {
        cmd.push(format!("{inside_dir}/{name}"));
    } else {
        let test_name = if test_file {
            name.clone()
        } else {
            format!("test_{name}")
        };
        if !test_file {
            let test = format!(
                "import os, runpy\n\n\ndef test_{stem}():\n    runpy.run_path(os.path.join(os.path.dirname(__file__), {name:?}), run_name=\"__main__\")\n"
            );
            std::fs::write(host_dir.join(&test_name), test)?;
        }
        cmd.extend(
            [
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
            ]
            .map(String::from),
        );
        cmd.push(format!("{inside_dir}/{test_name}"));
    }
    let tmp = std::env::temp_dir().join(format!("flux-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let cfg = tmp.join("cfg.json");
    let config = serde_json::json!({"files": [name], "functions": functions, "scope": scope});
    std::fs::write(&cfg, config.to_string())?;
    let raw = tmp.join("input.jsonl");
    let mut c = Command::new(flux);
    c.args(["trace", "--calls", "usdt", "--config"]).arg(&cfg);
    let live = tmp.join("trace.jsonl");
    c.arg("--record-merge-input")
        .arg(&raw)
        .arg("--out")
        .arg(&live)
        .arg("--accept-incomplete");
    if let Some(r) = &py.root {
        c.arg("--root")
            .arg(r)
            .arg("--python")
            .arg(root.join(py.exe.trim_start_matches('/')));
    }
    c.arg("--").args(&cmd);
    match pytest {
        Some(p) => c.env("PYTHONPATH", p),
        None => c.env_remove("PYTHONPATH"),
    };
    let out = c.output().context("running flux")?;
    let _ = std::fs::remove_dir_all(&host_dir);
    if !raw.exists() {
        bail!(
            "flux wrote no merge input: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = std::fs::read(&raw)?;
    let live = std::fs::read(&live).context("reading the live trace")?;
    let _ = std::fs::remove_dir_all(&tmp);
    faithful(&text, &live, &stem)?;
    std::fs::create_dir_all(dest.parent().unwrap())?;
    write_gz(dest, &text)
}

/// The fixture (normalised and trimmed) must merge to what the live run merged: the same
/// events, thread by thread (the written trace has no verdict or counts to compare).
fn faithful(fixture: &[u8], live: &[u8], stem: &str) -> Result<()> {
    use flux_merge::fixture::{render, Fixture};
    let f = Fixture::read(fixture).map_err(|e| anyhow::anyhow!("reading the fixture back: {e}"))?;
    let live = flux_trace::Trace::read_jsonl(live, "live trace")?;
    let threads = |t: &str| -> String {
        let i = t.find("thread #").unwrap_or(t.len());
        t[i..].to_string()
    };
    let file = format!("/{stem}.py");
    let (a, b) = (
        threads(&render(&f.merged(), &file)),
        threads(&render(&live, &file)),
    );
    if a != b {
        let i = a.lines().zip(b.lines()).take_while(|(x, y)| x == y).count();
        bail!(
            "the fixture does not merge to the live trace (line {}: {:?} vs {:?})",
            i + 1,
            a.lines().nth(i),
            b.lines().nth(i)
        );
    }
    Ok(())
}
