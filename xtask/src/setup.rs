//! `cargo xtask setup` and `cargo xtask test`: bring a fresh Debian machine to where flux builds,
//! traces and runs its tests, then (for `test`) run them.
//!
//! Idempotent: every step checks first and does nothing when its piece is there. Root is needed
//! for apt, dockerd and BPF; without root the steps that need it are reported and skipped (the
//! tests that need them then skip loudly).
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, ExitCode};

/// Debian packages flux needs: llvm-22-dev (bpf-linker links nightly rustc's LLVM), docker.io and
/// debootstrap (images without a registry), python3.11 (Debian's, with USDT probes),
/// python3-pytest (the hook's pytest-plugin tests on 3.11), openjdk-17-jdk-headless (the JVM
/// witness: HotSpot's method probes, `javac` for its fixture), dpkg-dev (`dpkg-source`, which
/// unpacks the Debian source packages of the Java images), python3.11-venv (the virtual
/// environment of [`HUB_PACKAGES`]), python3.11-dev (the headers flux-agent's build compiles the
/// hook's C part for 3.11 against, `flux-hook/flux_hook/_fast311.c`).
const APT: &[&str] = &[
    "llvm-22-dev",
    "docker.io",
    "debootstrap",
    "python3.11",
    "python3.11-venv",
    "python3.11-dev",
    "python3-pytest",
    "openjdk-17-jdk-headless",
    "dpkg-dev",
];

/// What the dataset-export tests run for real, from PyPI into [`hub_venv`]: `datasets` loads
/// `flux export --format hf`'s dataset, `inspect_ai` runs `--format inspect`'s task (with its
/// own `mockllm` provider). Pinned: the versions the tests were written against. About 1 min
/// 45 s and 610 MB on the 2-core development machine.
pub const HUB_PACKAGES: &[&str] = &[
    "datasets==5.2.0",
    "inspect_ai==0.3.285",
    "kubernetes-validate==1.37.0",
];

/// The virtual environment of [`HUB_PACKAGES`]: `<workspace>/.flux-cache/venv-hub` (the tests
/// look for it there, or where `FLUX_HUB_PYTHON` names its interpreter).
pub fn hub_venv() -> std::path::PathBuf {
    crate::workspace_root().join(".flux-cache/venv-hub")
}

/// Make [`hub_venv`] with Debian's Python 3.11 and install [`HUB_PACKAGES`] into it, unless
/// they import already.
fn ensure_hub_venv() -> Result<()> {
    let venv = hub_venv();
    let py = venv.join("bin/python");
    if ok(Command::new(&py).args(["-c", "import datasets, inspect_ai, kubernetes_validate"])) {
        return Ok(());
    }
    step(&format!(
        "python venv {} with {}",
        venv.display(),
        HUB_PACKAGES.join(" ")
    ));
    run(Command::new("/usr/bin/python3.11")
        .args(["-m", "venv"])
        .arg(&venv))?;
    run(Command::new(&py)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(HUB_PACKAGES))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn run(cmd: &mut Command) -> Result<()> {
    let st = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed ({st})");
    }
    Ok(())
}

fn ok(cmd: &mut Command) -> bool {
    cmd.output().map(|o| o.status.success()).unwrap_or(false)
}

fn step(name: &str) {
    eprintln!("xtask setup: {name}");
}

pub fn ensure() -> Result<()> {
    let root = is_root();
    let missing: Vec<&str> = APT
        .iter()
        .copied()
        .filter(|p| !ok(Command::new("dpkg").args(["-s", p])))
        .collect();
    if !missing.is_empty() {
        if !root {
            bail!(
                "missing Debian packages {missing:?}: run as root, or `apt-get install -y {}`",
                missing.join(" ")
            );
        }
        step(&format!("apt-get install {}", missing.join(" ")));
        run(Command::new("apt-get").arg("update").arg("-qq"))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    let has_src = Command::new("rustup")
        .args(["component", "list", "--toolchain", "nightly", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("rust-src"))
        .unwrap_or(false);
    if !has_src {
        step("rustup component add rust-src --toolchain nightly");
        run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    // The tidy test runs rustfmt and clippy: under FLUX_REQUIRE_ALL a skip for lack of them fails.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for (sub, component) in [("fmt", "rustfmt"), ("clippy", "clippy")] {
        if !ok(Command::new(&cargo).args([sub, "--version"])) {
            step(&format!("rustup component add {component}"));
            run(Command::new("rustup").args(["component", "add", component]))?;
        }
    }
    let linker_ok = Command::new("bpf-linker")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("0.13"))
        .unwrap_or(false);
    if !linker_ok {
        step("cargo install bpf-linker 0.13 (LLVM 22)");
        run(
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args([
                    "install",
                    "bpf-linker@0.13.0",
                    "--locked",
                    "--no-default-features",
                    "--features",
                    "llvm-22",
                ])
                .env("LLVM_PREFIX", "/usr/lib/llvm-22"),
        )?;
    }
    if !crate::fuzz::available() {
        step("cargo install cargo-fuzz (the fuzz targets run briefly in `cargo xtask test`)");
        if let Err(e) = run(
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())).args([
                "install",
                "cargo-fuzz",
                "--locked",
            ]),
        ) {
            // Fuzzing is skipped (loudly) without it; the rest of the setup still holds.
            eprintln!("xtask setup: installing cargo-fuzz failed: {e:#}");
        }
    }
    ensure_hub_venv()?;
    if !ok(Command::new("docker").arg("info")) {
        if !root {
            eprintln!(
                "xtask setup: no Docker daemon answers and not root: container tests will skip"
            );
            return Ok(());
        }
        step("starting dockerd");
        let log = std::fs::File::create("/tmp/flux-dockerd.log")?;
        Command::new("dockerd")
            .args(fixed_addresses_runtime()?)
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting dockerd")?;
        for _ in 0..60 {
            if ok(Command::new("docker").arg("info")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        if !ok(Command::new("docker").arg("info")) {
            bail!("dockerd did not come up (see /tmp/flux-dockerd.log)");
        }
    } else if !daemon_has_runtime(flux_container::runtime::FIXED_ADDRESSES_RUNTIME) {
        // A daemon someone else started: say so, and (root) what to restart it with.
        let how = if is_root() {
            format!(
                " (restart it with `dockerd {}`)",
                fixed_addresses_runtime()?.join(" ")
            )
        } else {
            String::new()
        };
        eprintln!(
            "xtask setup: the running dockerd has no `{}` runtime: containers randomise \
             addresses{how}",
            flux_container::runtime::FIXED_ADDRESSES_RUNTIME,
        );
    }
    Ok(())
}

/// Whether the running daemon lists the OCI runtime `name`.
fn daemon_has_runtime(name: &str) -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{json .Runtimes}}"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!("\"{name}\"")))
}

/// Where `cargo xtask setup` puts the wrapper behind flux's fixed-addresses runtime.
const FIXED_ADDRESSES_WRAPPER: &str = "/usr/local/lib/flux/runc-fixed-addresses";

/// `--add-runtime` for dockerd: `flux_container::FIXED_ADDRESSES_RUNTIME`, the daemon's `runc`
/// started with address-space randomisation off (inherited by every process of a container,
/// where Docker's seccomp profile refuses to set it). Empty, and said, without `runc` or
/// `setarch`: containers then randomise addresses.
fn fixed_addresses_runtime() -> Result<Vec<String>> {
    let which = |b: &str| -> Option<String> {
        let out = Command::new("sh")
            .args(["-c", &format!("command -v {b}")])
            .output()
            .ok()?;
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && p.starts_with('/')).then_some(p)
    };
    let (Some(runc), Some(setarch)) = (which("runc"), which("setarch")) else {
        eprintln!(
            "xtask setup: no runc or setarch on PATH: containers will randomise addresses \
             (flux_container::FIXED_ADDRESSES_RUNTIME is not registered)"
        );
        return Ok(Vec::new());
    };
    let wrapper = Path::new(FIXED_ADDRESSES_WRAPPER);
    std::fs::create_dir_all(wrapper.parent().expect("a directory"))?;
    std::fs::write(
        wrapper,
        format!(
            "#!/bin/sh\n# flux_container::FIXED_ADDRESSES_RUNTIME: the daemon's runc with \
             address-space\n# randomisation off, which the container's processes inherit.\n\
             exec {setarch} \"$(uname -m)\" --addr-no-randomize {runc} \"$@\"\n"
        ),
    )?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(wrapper, std::fs::Permissions::from_mode(0o755))?;
    Ok(vec![
        "--add-runtime".into(),
        format!(
            "{}={FIXED_ADDRESSES_WRAPPER}",
            flux_container::runtime::FIXED_ADDRESSES_RUNTIME
        ),
    ])
}

#[derive(clap::Args)]
pub struct TestArgs {
    /// Extra arguments for `cargo test`.
    #[arg(last = true)]
    cargo_args: Vec<String>,
}

/// Set up, build the images the tests use, then run every test: `cargo test` (which includes
/// the hook's own Python suite through a Rust wrapper test).
pub fn test(a: TestArgs) -> Result<ExitCode> {
    disk_note("before setup");
    ensure()?;
    let root = crate::workspace_root();
    let docker = ok(Command::new("docker").arg("info"));
    if docker {
        step("images");
        crate::images::build_default()?;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    // Every test binary runs even after one fails: a CI log then shows every failure at once.
    cmd.current_dir(&root)
        .args(["test", "--no-fail-fast"])
        .args(&a.cargo_args);
    // Setup proved root, eBPF (the uprobe PMU), Docker and the images: from here a test that
    // skips for lack of one of them fails instead (flux-skip). An explicit value is kept.
    let uprobes = Path::new("/sys/bus/event_source/devices/uprobe/type").exists();
    let require_all = match std::env::var_os(flux_skip::REQUIRE_ALL) {
        Some(_) => flux_skip::required(),
        None => is_root() && docker && uprobes,
    };
    if require_all {
        step("FLUX_REQUIRE_ALL=1: a test skipped for lack of root, eBPF or Docker fails");
        cmd.env(flux_skip::REQUIRE_ALL, "1");
    }
    disk_note("before cargo test");
    let (st, failures) = status_with_failures(&mut cmd)?;
    disk_note("after cargo test");
    // The fuzz targets, briefly (seconds each), where nightly and cargo-fuzz are: setup
    // installs both, so under FLUX_REQUIRE_ALL their absence is a failure like any skip.
    let mut fuzzed = true;
    if crate::fuzz::available() {
        step("fuzz targets, 10 s each");
        if let Err(e) = crate::fuzz::run(crate::fuzz::Args::brief()) {
            eprintln!("xtask test: the fuzz targets failed: {e:#}");
            fuzzed = false;
        }
    } else if require_all {
        eprintln!(
            "xtask test: the fuzz targets cannot run: `cargo +nightly fuzz` does not run here, \
             though setup installs it (see its output above) — a failure under {}=1",
            flux_skip::REQUIRE_ALL
        );
        fuzzed = false;
    } else {
        flux_skip::skip(
            "the fuzz targets",
            "`cargo +nightly fuzz` does not run here (cargo install cargo-fuzz)",
        );
    }
    // Last, so the tail of a CI log (all some CI views show) names what failed: the fuzz
    // targets' log comes after `cargo test`'s and is long.
    if !failures.is_empty() {
        step("what failed in `cargo test` (its full output is above)");
        for line in &failures {
            eprintln!("{line}");
        }
    }
    Ok(if st.success() && fuzzed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Run `cmd` with its stdout and stderr echoed line by line, and return its status with the lines
/// that say what failed (see [`FailureLines`]).
fn status_with_failures(cmd: &mut Command) -> Result<(std::process::ExitStatus, Vec<String>)> {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::sync::{Arc, Mutex};
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting cargo test")?;
    let kept = Arc::new(Mutex::new(FailureLines::default()));
    fn echo<R: std::io::Read + Send + 'static, W: Write>(
        from: R,
        mut to: W,
        kept: Arc<Mutex<FailureLines>>,
    ) {
        for line in BufReader::new(from).lines().map_while(|l| l.ok()) {
            let _ = writeln!(to, "{line}");
            if let Ok(mut k) = kept.lock() {
                k.push(&line);
            }
        }
    }
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let k = kept.clone();
    let t_out = std::thread::spawn(move || out.map(|o| echo(o, std::io::stdout(), k)));
    let k = kept.clone();
    let t_err = std::thread::spawn(move || err.map(|e| echo(e, std::io::stderr(), k)));
    let st = child.wait().context("waiting for cargo test")?;
    let _ = (t_out.join(), t_err.join());
    let lines = kept.lock().map(|k| k.lines.clone()).unwrap_or_default();
    Ok((st, lines))
}

/// The lines of `cargo test`'s output that say what failed: a failed test's `… FAILED` line,
/// each panic's location and the message under it, cargo's `error…` lines and the targets
/// listed under them. Bounded, so a test failing in a loop cannot flood the summary.
#[derive(Default)]
struct FailureLines {
    lines: Vec<String>,
    /// Lines still to keep after the one that started a failure.
    follow: usize,
}

impl FailureLines {
    const MAX: usize = 400;

    fn push(&mut self, line: &str) {
        let t = line.trim_start();
        let starts = (t.starts_with("test ") && t.ends_with("FAILED"))
            || t.starts_with("error")
            || t.starts_with("warning: build failed");
        if t.contains("panicked at") {
            self.follow = 2;
        } else if self.follow > 0 && !starts {
            self.follow -= 1;
            self.keep(line);
            return;
        }
        if starts || t.contains("panicked at") || (t.starts_with('`') && t.contains(" --")) {
            if t.starts_with("error") {
                self.follow = 0;
            }
            self.keep(line);
        }
    }

    fn keep(&mut self, line: &str) {
        if self.lines.len() < Self::MAX {
            self.lines.push(line.to_string());
        }
    }
}

/// Say how much disk is free where the build and the images go: a run that fails with ENOSPC
/// then shows where the space went.
fn disk_note(when: &str) {
    let root = crate::workspace_root();
    let out = Command::new("df")
        .args(["-h", "--output=target,avail,used"])
        .arg(&root)
        .arg("/var/lib")
        .output();
    if let Ok(o) = out {
        let text = String::from_utf8_lossy(&o.stdout);
        step(&format!("disk {when}:\n{}", text.trim_end()));
    }
}

pub fn setup() -> Result<ExitCode> {
    ensure()?;
    if Path::new("/var/run/docker.sock").exists() {
        crate::images::build_default()?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::FailureLines;

    /// The CI log of stop 34 ended in the fuzz targets' output: which test had failed was
    /// nowhere in the part of it that was shown. The summary keeps exactly what names it.
    #[test]
    fn ci_tail_names_the_failed_test() {
        let log = "\
running 3 tests
test cli::ok_one ... ok
test cli::eval_without_source ... FAILED
test cli::ok_two ... ok

failures:

---- cli::eval_without_source stdout ----

thread 'cli::eval_without_source' panicked at flux-cli/tests/common/mod.rs:88:9:
stderr lacks \"flux: note: no cache found\"
stack backtrace:
   0: std::panicking::begin_panic
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace

test result: FAILED. 2 passed; 1 failed; 0 ignored
error: test failed, to rerun pass `-p flux-cli --test cli`
error: 1 target failed:
    `-p flux-cli --test cli`
";
        let mut f = FailureLines::default();
        for l in log.lines() {
            f.push(l);
        }
        assert_eq!(
            f.lines,
            [
                "test cli::eval_without_source ... FAILED",
                "thread 'cli::eval_without_source' panicked at flux-cli/tests/common/mod.rs:88:9:",
                "stderr lacks \"flux: note: no cache found\"",
                "stack backtrace:",
                "error: test failed, to rerun pass `-p flux-cli --test cli`",
                "error: 1 target failed:",
                "    `-p flux-cli --test cli`",
            ]
        );
    }
}
