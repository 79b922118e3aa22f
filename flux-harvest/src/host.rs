//! Run an instance's test on the host: the same command, traced the same way, in a venv of the
//! instance's interpreter (which must exist on the host at the same path) holding exactly the
//! image's pinned wheels, installed offline from `<cache>/wheelhouse/`. Never the host's own
//! site-packages: the venv is made without `--system-site-packages`.
//!
//! Whatever it produces is labelled "not reproducible": the host's interpreter build, its
//! Debian packages and the working directory's path are not pinned the way an image is.
//!
//! Test code is hostile: when flux is root, the test runs as `nobody` (65534, through
//! util-linux's `setpriv`), so it can write nothing flux owns; its stdout and stderr come to
//! flux through pipes (at most [`flux_container::runtime::LOG_CAP`] bytes each are kept, the
//! rest is drained and the truncation recorded); and, as in a container, coreutils' `timeout`
//! (a child of the namespace's PID 1, a shell) kills it at the instance's timeout plus
//! [`flux_container::runtime::DEADLINE_GRACE`] even if flux is gone.
use crate::{HarvestOptions, TracedRun, NOT_REPRODUCIBLE};
use anyhow::{bail, Context, Result};
use flux_agent::interp::Interpreter;
use flux_agent::run::Launched;
use flux_agent::spawn::Gated;
use flux_container::Manifest;
use flux_instance::Instance;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Who the test runs as on the host when flux is root.
const NOBODY: u32 = 65534;

struct HostRun {
    gated: Gated,
    timeout: Duration,
    timed_out: bool,
    exited: bool,
}

impl Launched for HostRun {
    fn pidns(&self) -> (u64, u64) {
        self.gated.pidns
    }

    fn release(&mut self) -> Result<()> {
        self.gated.release().context("releasing the test command")
    }

    async fn wait(&mut self) -> Result<i32> {
        let timeout = self.timeout;
        let code = match tokio::time::timeout(timeout, Launched::wait(&mut self.gated)).await {
            Ok(r) => r?,
            Err(_) => {
                self.timed_out = true;
                self.gated.kill();
                Launched::wait(&mut self.gated).await?
            }
        };
        self.exited = true;
        Ok(code)
    }

    fn kill(&mut self) {
        self.gated.kill()
    }
}

impl Drop for HostRun {
    /// A run abandoned half-way (an error, SIGINT) leaves no process behind.
    fn drop(&mut self) {
        if !self.exited {
            self.gated.kill();
        }
    }
}

/// Read `r` to its end, keeping the first `cap` bytes; whether anything was dropped.
fn read_capped(mut r: impl Read, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, truncated)
}

/// The image's manifest, which names its wheelhouse and pins.
fn manifest(cache_dir: &Path, image: &str) -> Result<Manifest> {
    let path = flux_container::images::manifest_path(cache_dir, image);
    if !path.exists() {
        bail!(
            "no manifest for image {image} at {} (the host runtime installs that image's pinned \
             wheels); {}{}",
            path.display(),
            flux_container::images::build_hint(image),
            cache_note(cache_dir)
        );
    }
    Ok(Manifest::load(&path)?)
}

/// Which cache was searched, and how to name another (a command run elsewhere finds, or makes,
/// another cache).
fn cache_note(cache_dir: &Path) -> String {
    format!(
        " (searched the cache {}; --cache DIR or FLUX_CACHE=DIR names another)",
        cache_dir.display()
    )
}

fn def_str<'a>(m: &'a Manifest, ptr: &str) -> Result<&'a str> {
    m.definition
        .pointer(ptr)
        .and_then(|v| v.as_str())
        .with_context(|| format!("manifest of {}: no `definition{ptr}`", m.image))
}

/// `<cache>/venvs/<repo>-<version>-py<X.Y>`, made once per manifest (re-made when its pins
/// change) from the wheelhouse, offline.
fn venv(cache_dir: &Path, inst: &Instance) -> Result<PathBuf> {
    let interpreter = &inst.spec.interpreter;
    if !Path::new(interpreter).is_file() {
        bail!(
            "interpreter {interpreter} (instance.toml `interpreter`) does not exist on this host; \
             the host runtime needs it (use --runtime docker)"
        );
    }
    let m = manifest(cache_dir, &inst.spec.image)?;
    flux_container::images::check_pins(&m, &inst.spec.package, interpreter).map_err(|e| {
        anyhow::anyhow!(
            "instance.toml does not describe image {}: {e}",
            inst.spec.image
        )
    })?;
    if m.kind != "repo" {
        bail!(
            "image {} is a base image: it has no wheels to install",
            m.image
        );
    }
    let name = format!(
        "{}-{}-py{}",
        def_str(&m, "/name")?,
        def_str(&m, "/version")?,
        def_str(&m, "/base/python")?
    );
    let wheelhouse = std::path::absolute(cache_dir.join("wheelhouse").join(&name))?;
    if !wheelhouse.is_dir() {
        bail!(
            "wheelhouse {} is missing; `flux images build {}` downloads it{}",
            wheelhouse.display(),
            m.image,
            cache_note(cache_dir)
        );
    }
    let venv = std::path::absolute(cache_dir.join("venvs").join(&name))?;
    let stamp = venv.join(".flux-venv");
    let want = serde_json::json!({
        "interpreter": interpreter,
        "definition_hash": m.definition_hash,
        "pip_freeze": m.pip_freeze,
        "identity": m.identity,
    })
    .to_string();
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(venv);
    }
    if venv.exists() {
        std::fs::remove_dir_all(&venv).with_context(|| format!("removing {}", venv.display()))?;
    }
    std::fs::create_dir_all(venv.parent().unwrap_or(&venv))?;
    run(Command::new(interpreter)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv))?;
    let pip = def_str(&m, "/pip")?;
    let pip_version = pip.split_once("==").map(|(_, v)| v).unwrap_or("");
    let pip_wheel = std::fs::read_dir(&wheelhouse)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with(&format!("pip-{pip_version}-")) && n.ends_with(".whl")
            })
        })
        .with_context(|| format!("no wheel for {pip} in {}", wheelhouse.display()))?;
    let python = venv.join("bin/python");
    let mut install = Command::new(&python);
    install
        .arg(pip_wheel.join("pip"))
        .args([
            "install",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
        ])
        .arg("--find-links")
        .arg(&wheelhouse)
        .args(&m.pip_freeze)
        .env("PIP_NO_INPUT", "1");
    run(&mut install)?;
    // As in the image: the package imports from its unpacked source (the cache's tree, which
    // `flux eval` shows), not from the venv's site-packages.
    if let Some(src) = &m.source {
        let tree = std::path::absolute(cache_dir.join(&src.cache_tree))?;
        flux_container::images::source::adopt(&python, &src.info.package, &tree)
            .with_context(|| format!("importing {} from {}", src.info.package, tree.display()))?;
    }
    std::fs::write(&stamp, want)?;
    Ok(venv)
}

fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().with_context(|| format!("running {shown}"))?;
    if !out.status.success() {
        bail!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

pub(crate) async fn run_host(
    inst: &Instance,
    run_dir: &Path,
    opts: &HarvestOptions,
) -> Result<TracedRun> {
    // Blocking, once per pin set; the harvest runs one instance at a time.
    let venv = venv(&opts.cache_dir, inst).context("preparing the host venv")?;
    let bin = venv.join("bin");
    let python = std::fs::canonicalize(bin.join("python"))?;
    let interp = Interpreter::inspect(&python, Path::new("/"))
        .with_context(|| format!("inspecting {}", python.display()))?;
    let shared = crate::rundir::shared(run_dir);
    // SAFETY: geteuid has no preconditions.
    let as_nobody = unsafe { libc::geteuid() } == 0;
    let prepared = crate::tracing::prepare(
        &interp,
        &inst.spec.tracing,
        &shared,
        &shared.display().to_string(),
        opts.calls,
        opts.scope,
        as_nobody.then_some((NOBODY, NOBODY)),
    )?;
    // The command as written for the image; its program is taken from the venv when it is
    // there (`python3.11`, `python`, the interpreter's path), and it runs in the instance copy.
    let mut cmd = inst.spec.test.command.clone();
    let prog = &cmd[0];
    if prog == &inst.spec.interpreter {
        cmd[0] = bin.join("python").display().to_string();
    } else if !prog.contains('/') && bin.join(prog).exists() {
        cmd[0] = bin.join(prog).display().to_string();
    }
    let workdir = run_dir.join("instance");
    let timeout = Duration::from_secs(inst.spec.test.timeout_s);
    let deadline = (timeout + flux_container::runtime::DEADLINE_GRACE).as_secs();
    let mut wrapped: Vec<String> = vec![
        "/bin/sh".into(),
        "-c".into(),
        // Not `exec`: `timeout` must not be PID 1 (see `flux_container::runtime`).
        "cd \"$1\" && shift && \"$@\" </dev/null; exit $?".into(),
        "sh".into(),
        workdir.display().to_string(),
        "timeout".into(),
        "-s".into(),
        "KILL".into(),
        deadline.to_string(),
    ];
    if as_nobody {
        if flux_agent::spawn::resolve("setpriv").is_none() {
            bail!(
                "the host runtime runs tests as nobody when flux is root, with setpriv \
                 (util-linux), which is not on PATH"
            );
        }
        wrapped.extend(
            [
                "setpriv",
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                "--no-new-privs",
                "--",
            ]
            .map(String::from),
        );
    }
    wrapped.extend(cmd);
    // Pipes of our own (the gated spawn keeps its `Child`): the write ends go to the command,
    // the read ends to a reader thread each.
    let (out_r, out_w) = std::io::pipe().context("a pipe for the test's stdout")?;
    let (err_r, err_w) = std::io::pipe().context("a pipe for the test's stderr")?;
    let mut command = Command::new(&wrapped[0]);
    command
        .args(&wrapped[1..])
        .envs(prepared.env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(out_w)
        .stderr(err_w);
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    command.env("PATH", format!("{}:{path}", bin.display()));
    command.env("VIRTUAL_ENV", venv.display().to_string());
    // `command` (holding our copies of the write ends) is dropped by the spawn: EOF comes when
    // the test's side is done.
    let gated = flux_agent::spawn::spawn_gated(command)?;
    let cap = flux_container::runtime::LOG_CAP;
    let out_reader = Some(std::thread::spawn(move || read_capped(out_r, cap)));
    let err_reader = Some(std::thread::spawn(move || read_capped(err_r, cap)));
    let (plan, collector) = prepared.listen();
    let mut launched = HostRun {
        gated,
        timeout,
        timed_out: false,
        exited: false,
    };
    let (mut trace, exit_code, _) =
        crate::tracing::trace(&mut launched, &interp, &plan, collector, &opts.tracer).await?;
    if !trace.meta.labels.iter().any(|l| l == NOT_REPRODUCIBLE) {
        trace.meta.labels.push(NOT_REPRODUCIBLE.into());
    }
    let killed = (!launched.timed_out && exit_code > 128 && exit_code <= 128 + 64)
        .then(|| format!("signal {}", exit_code - 128));
    let labels = trace.meta.labels.clone();
    let joined = |h: Option<std::thread::JoinHandle<(Vec<u8>, bool)>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let (stdout, stdout_truncated) = joined(out_reader);
    let (stderr, stderr_truncated) = joined(err_reader);
    Ok(TracedRun {
        trace,
        run_dir: run_dir.to_path_buf(),
        exit_code,
        timed_out: launched.timed_out.then_some(timeout),
        killed,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        image_id: String::new(),
        image_identity: String::new(),
        interpreter_version: interp.version_string(),
        labels,
        program_seconds: 0.0,
        whole_sha256: None,
    })
}

#[cfg(test)]
mod tests {
    /// 17.12: a host run's logs were read whole from files the test wrote (a size bomb);
    /// they come through pipes now, the first `cap` bytes kept and the rest drained.
    #[test]
    fn logs_are_kept_up_to_the_cap_and_drained_beyond() {
        let big = vec![b'x'; 300_000];
        assert_eq!(super::read_capped(&big[..], 1000), (vec![b'x'; 1000], true));
        assert_eq!(
            super::read_capped(&b"ok"[..], 1000),
            (b"ok".to_vec(), false)
        );
        assert_eq!(super::read_capped(&big[..], 300_000), (big.clone(), false));
    }

    /// A missing manifest names the cache searched and how to name another (a command run in
    /// another directory finds, or makes, another cache).
    #[test]
    fn a_missing_manifest_names_the_cache_searched() {
        let tmp = tempfile::tempdir().unwrap();
        let e = super::manifest(tmp.path(), "flux/demo:1.0-py3.11")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("searched the cache {}", tmp.path().display())),
            "{e}"
        );
        assert!(e.contains("--cache DIR or FLUX_CACHE=DIR"), "{e}");
    }
}
