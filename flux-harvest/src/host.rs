//! Run an instance's test on the host: the same command, traced the same way, in a venv of the
//! instance's interpreter (which must exist on the host at the same path) holding exactly the
//! image's pinned wheels, installed offline from `<cache>/wheelhouse/`. Never the host's own
//! site-packages: the venv is made without `--system-site-packages`.
//!
//! Whatever it produces is labelled "not reproducible": the host's interpreter build, its
//! Debian packages and the working directory's path are not pinned the way an image is.
use crate::{HarvestOptions, RunOutput, NOT_REPRODUCIBLE};
use anyhow::{bail, Context, Result};
use flux_agent::interp::Interpreter;
use flux_agent::run::Launched;
use flux_agent::spawn::Gated;
use flux_container::Manifest;
use flux_instance::Instance;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

struct HostRun {
    gated: Gated,
    timeout: Duration,
    timed_out: bool,
    exit: Option<i32>,
}

impl Launched for HostRun {
    fn pidns(&self) -> (u64, u64) {
        self.gated.pidns
    }

    fn release(&mut self) -> Result<()> {
        self.gated.release().context("releasing the test command")
    }

    async fn wait(&mut self) -> Result<i32> {
        if let Some(code) = self.exit {
            return Ok(code);
        }
        let mut child = self
            .gated
            .take_child()
            .context("the test command was already waited for")?;
        let group = self.gated.pid();
        let waiter = tokio::task::spawn_blocking(move || child.wait());
        tokio::pin!(waiter);
        let status = tokio::select! {
            r = &mut waiter => r??,
            _ = tokio::time::sleep(self.timeout) => {
                self.timed_out = true;
                // SAFETY: plain syscall; the group is our child's (it called setsid).
                unsafe { libc::killpg(group as libc::pid_t, libc::SIGKILL); }
                waiter.await??
            }
        };
        use std::os::unix::process::ExitStatusExt;
        let code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        self.exit = Some(code);
        Ok(code)
    }

    fn kill(&mut self) {
        self.gated.kill()
    }
}

/// The image's manifest, which names its wheelhouse and pins.
fn manifest(cache_dir: &Path, image: &str) -> Result<Manifest> {
    let path = flux_container::images::manifest_path(cache_dir, image);
    if !path.exists() {
        let build = flux_container::images::build_command(image);
        bail!(
            "no manifest for image {image} at {} (the host runtime installs that image's pinned \
             wheels); build it with `{build}`",
            path.display()
        );
    }
    Ok(Manifest::load(&path)?)
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
            "wheelhouse {} is missing; `{}` downloads it",
            wheelhouse.display(),
            flux_container::images::build_command(&m.image)
        );
    }
    let venv = std::path::absolute(cache_dir.join("venvs").join(&name))?;
    let stamp = venv.join(".flux-venv");
    let want = serde_json::json!({
        "interpreter": interpreter,
        "definition_hash": m.definition_hash,
        "pip_freeze": m.pip_freeze,
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
) -> Result<RunOutput> {
    // Blocking, once per pin set; the harvest runs one instance at a time.
    let venv = venv(&opts.cache_dir, inst).context("preparing the host venv")?;
    let bin = venv.join("bin");
    let python = std::fs::canonicalize(bin.join("python"))?;
    let interp = Interpreter::inspect(&python, Path::new("/"))
        .with_context(|| format!("inspecting {}", python.display()))?;
    let prepared = crate::tracing::prepare(
        &interp,
        &inst.spec.tracing,
        run_dir,
        &run_dir.display().to_string(),
        opts.calls,
        opts.scope,
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
    let mut wrapped: Vec<String> = vec![
        "/bin/sh".into(),
        "-c".into(),
        "cd \"$1\" && out=$2 && err=$3 && shift 3 && exec \"$@\" </dev/null >\"$out\" 2>\"$err\""
            .into(),
        "sh".into(),
        workdir.display().to_string(),
        run_dir.join("stdout.txt").display().to_string(),
        run_dir.join("stderr.txt").display().to_string(),
    ];
    wrapped.extend(cmd);
    let mut env = prepared.env.clone();
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    env.push(("PATH".into(), format!("{}:{path}", bin.display())));
    env.push(("VIRTUAL_ENV".into(), venv.display().to_string()));
    let gated = flux_agent::run::launch_host(&wrapped, &env)?;
    let (plan, collector) = prepared.listen();
    let timeout = Duration::from_secs(inst.spec.test.timeout_s);
    let mut launched = HostRun {
        gated,
        timeout,
        timed_out: false,
        exit: None,
    };
    let (mut trace, exit_code) =
        crate::tracing::trace(&mut launched, &interp, &plan, collector, &opts.tracer).await?;
    if !trace.meta.labels.iter().any(|l| l == NOT_REPRODUCIBLE) {
        trace.meta.labels.push(NOT_REPRODUCIBLE.into());
    }
    let killed = (!launched.timed_out && exit_code > 128 && exit_code <= 128 + 64)
        .then(|| format!("signal {}", exit_code - 128));
    let labels = trace.meta.labels.clone();
    Ok(RunOutput {
        trace,
        exit_code,
        timed_out: launched.timed_out.then_some(timeout),
        killed,
        stdout: std::fs::read(run_dir.join("stdout.txt")).unwrap_or_default(),
        stderr: std::fs::read(run_dir.join("stderr.txt")).unwrap_or_default(),
        image_id: String::new(),
        interpreter_version: interp.version_string(),
        labels,
    })
}
