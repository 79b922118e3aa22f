//! Run an instance's test in a container of its image, traced from the host.
//!
//! Order: the interpreter is looked up in the image's layers and inspected first (the plan —
//! which probes, what the hook must add — decides the container's environment, fixed at
//! create); then create → start (the command waits on its gate) → the hook's acceptor starts →
//! `trace_launched` loads the BPF side filtered on the container's PID namespace, attaches,
//! releases the gate, waits (the instance's timeout; the container is killed when it expires)
//! and drains → the container is removed, whatever happened.
use crate::{HarvestOptions, TracedRun};
use anyhow::{anyhow, Context, Result};
use flux_agent::interp::Interpreter;
use flux_agent::run::Launched;
use flux_container::runtime::GATE_NAME;
use flux_container::{Container, ContainerSpec, Mount, Outcome};
use flux_instance::Instance;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the instance (a copy of it) is mounted, read-only; the test's working directory.
pub const INSTANCE_IN_CONTAINER: &str = "/flux/instance";

/// A started container blocked on its gate, as the tracer sees it.
struct ContainerRun<'a> {
    container: &'a mut Container,
    pidns: (u64, u64),
    init_pid: u32,
    gate: PathBuf,
    timeout: Duration,
    outcome: Option<Outcome>,
    /// When the gate was opened and when the program was seen to exit: its wall time.
    released: Option<Instant>,
    exited: Option<Instant>,
}

impl ContainerRun<'_> {
    /// The program's wall time, from the gate's release to its exit.
    fn program_time(&self) -> Duration {
        match (self.released, self.exited) {
            (Some(a), Some(b)) => b.saturating_duration_since(a),
            _ => Duration::ZERO,
        }
    }
}

impl Launched for ContainerRun<'_> {
    fn pidns(&self) -> (u64, u64) {
        self.pidns
    }

    /// Open the gate FIFO and write a line; the shell runs the test command. (The same as
    /// `Container::release`, without await: the shell may not have opened the FIFO yet, ENXIO.)
    fn release(&mut self) -> Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let opened = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.gate);
            match opened {
                Ok(mut f) => {
                    f.write_all(b"go\n")
                        .with_context(|| format!("writing the gate {}", self.gate.display()))?;
                    self.released = Some(Instant::now());
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => {
                    return Err(anyhow!(e).context(format!(
                        "opening the gate {} of container {}",
                        self.gate.display(),
                        self.container.name()
                    )))
                }
            }
        }
    }

    async fn wait(&mut self) -> Result<i32> {
        if let Some(o) = &self.outcome {
            return Ok(exit_code(o));
        }
        let o = self.container.wait(self.timeout).await?;
        self.exited = Some(Instant::now());
        let code = exit_code(&o);
        self.outcome = Some(o);
        Ok(code)
    }

    /// [`run`] took the turn before the container existed: its gate gives up after
    /// `GATE_DEADLINE`, and a turn can take longer than that.
    fn needs_turn(&self) -> bool {
        false
    }

    fn kill(&mut self) {
        // The container's init is the gate shell (the test runs under it); its death ends the
        // container. We are root on the host, outside the container's namespaces.
        // SAFETY: plain syscall on a pid we were given by the daemon.
        unsafe {
            libc::kill(self.init_pid as libc::pid_t, libc::SIGKILL);
        }
    }
}

fn exit_code(o: &Outcome) -> i32 {
    if o.timed_out {
        128 + libc::SIGKILL
    } else {
        i32::try_from(o.exit_code).unwrap_or(-1)
    }
}

/// The layer directory that holds `exe` (host path of `interpreter` in the image's layers):
/// the root to look for its libpython in before the container exists.
fn layer_root(exe: &Path, interpreter: &str) -> PathBuf {
    let rel = interpreter.trim_start_matches('/');
    let mut root = exe.to_path_buf();
    for _ in Path::new(rel).components() {
        root.pop();
    }
    root
}

/// The id of `image`; an error naming the command that builds it when it is missing.
pub(crate) async fn image_id(rt: &flux_container::Runtime, image: &str) -> Result<String> {
    let Some(image_id) = rt.image_id(image).await? else {
        anyhow::bail!(
            "image {image} is missing; {}",
            flux_container::images::build_hint(image)
        );
    };
    Ok(image_id)
}

/// The id and content identity of the instance's image, after checking the instance's
/// `package` and `interpreter` against the image's manifest (its `flux.manifest` label): a
/// mismatch, or an image without a manifest, is refused naming both sides.
pub(crate) async fn checked_image(
    rt: &flux_container::Runtime,
    inst: &Instance,
) -> Result<(String, String)> {
    let image = &inst.spec.image;
    let id = image_id(rt, image).await?;
    let Some(m) = flux_container::images::image_manifest(rt, image).await? else {
        anyhow::bail!(
            "image {image} carries no flux manifest (label {}), so the instance's `package` and \
             `interpreter` cannot be checked against it; {}",
            flux_container::images::LABEL_MANIFEST,
            flux_container::images::build_hint(image)
        );
    };
    flux_container::images::check_pins(&m, &inst.spec.package, &inst.spec.interpreter)
        .map_err(|e| anyhow!("instance.toml does not describe image {image}: {e}"))?;
    Ok((id, m.identity))
}

/// The container of an instance's test: its image and command, the instance copy mounted
/// read-only as the working directory, the run directory, `env`.
/// The run directory's `shared/` is the container's (read-only) `/flux/run`; nothing of the
/// host is writable in the container (`flux_container::Writes::Tmp`).
fn container_spec(inst: &Instance, run_dir: &Path, env: &[(String, String)]) -> ContainerSpec {
    let mut spec = ContainerSpec::new(
        &inst.spec.image,
        inst.spec.test.command.clone(),
        crate::rundir::shared(run_dir),
    );
    spec.mounts.push(Mount::read_only(
        run_dir.join("instance"),
        INSTANCE_IN_CONTAINER,
    ));
    spec.workdir = Some(INSTANCE_IN_CONTAINER.into());
    if let Some(l) = &inst.spec.test.layout {
        // Another benchmark's layout (an instance imported from SWE-Flux, answered by their
        // parser or natively): their root, their files where their harness puts them.
        spec.mounts.push(Mount::read_only(
            run_dir.join("instance"),
            l.files_at.clone(),
        ));
        spec.workdir = Some(l.workdir.clone());
    } else if let Some(ext) = inst.external_parser() {
        // An instance answered by an external parser (imported from SWE-Flux) runs from their
        // root with its files where their harness puts them (`<root>/<repo>_qa/<id>/files/`).
        spec.mounts.push(Mount::read_only(
            run_dir.join("instance"),
            format!("{}/{}", ext.root, ext.qa_dir),
        ));
        spec.workdir = Some(ext.root);
    }
    spec.env = env.iter().cloned().collect();
    spec.timeout = Duration::from_secs(inst.spec.test.timeout_s);
    spec.labels.insert(
        "flux.instance".into(),
        format!("{}/{}", inst.spec.repository, inst.id()),
    );
    spec
}

/// The instance's test in its container without flux's tracer (`env` added): the same
/// container, gate and command as a traced run. The outcome and the program's wall time.
pub(crate) async fn run_untraced(
    rt: &flux_container::Runtime,
    inst: &Instance,
    run_dir: &Path,
    env: &[(String, String)],
) -> Result<(Outcome, Duration)> {
    image_id(rt, &inst.spec.image).await?;
    // Another run's probes on this interpreter would change what the program does
    // (flux_agent::turns): an untraced run (the reference witness's) waits its turn too.
    let interp = interpreter(rt, inst).await?;
    let _turn =
        flux_agent::run::take_turn(&interp, flux_agent::tracer::ProbeSet::default()).await?;
    let mut spec = container_spec(inst, run_dir, env);
    // The one place a container writes on the host: `<run dir>/out`, read back as untrusted.
    let out = run_dir.join("out");
    std::fs::create_dir(&out).with_context(|| format!("creating {}", out.display()))?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&out, Some(1000), Some(1000))
            .with_context(|| format!("chown {}", out.display()))?;
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777))?;
    }
    spec.mounts.push(Mount::read_write(
        &out,
        flux_container::runtime::OUT_IN_CONTAINER,
    ));
    let timeout = spec.timeout;
    let mut container = rt.create(spec).await?;
    let result = async {
        let started = container.start().await?;
        let mut launched = ContainerRun {
            pidns: (started.pidns.dev, started.pidns.ino),
            init_pid: started.init_pid,
            gate: crate::rundir::shared(run_dir).join(GATE_NAME),
            timeout,
            outcome: None,
            released: None,
            exited: None,
            container: &mut container,
        };
        launched.release()?;
        if let Err(e) = launched.wait().await {
            launched.kill();
            return Err(e);
        }
        let took = launched.program_time();
        let outcome = launched
            .outcome
            .take()
            .context("the container's outcome is unknown")?;
        Ok((outcome, took))
    }
    .await;
    let removed = container.remove().await;
    let r = result?;
    removed.context("removing the container")?;
    Ok(r)
}

/// The traced run of `inst`'s test in a container of its image, in `run_dir`. Its program time
/// runs from the gate's release to the program's exit (attach before, drain and merge after,
/// are not in it).
/// The instance's interpreter, found in its image's layers and inspected.
async fn interpreter(rt: &flux_container::Runtime, inst: &Instance) -> Result<Interpreter> {
    let (image, interpreter) = (&inst.spec.image, &inst.spec.interpreter);
    let exe = rt.image_file(image, interpreter).await.with_context(|| {
        format!("interpreter {interpreter} (instance.toml `interpreter`) in image {image}")
    })?;
    Interpreter::inspect(&exe, &layer_root(&exe, interpreter))
        .with_context(|| format!("inspecting {interpreter} of image {image}"))
}

/// What a run keeps of its merged trace, and where the whole of it goes.
pub(crate) struct Keeps {
    /// What the returned trace holds (`flux_trace::Keep`; a run that reads more than the
    /// instance's answer keeps `All`).
    pub keep: flux_trace::Keep,
    /// Write the whole trace to this new file as the merge goes (issue 28: a harvest writes
    /// every event and its answer may read few).
    pub whole_trace: Option<std::path::PathBuf>,
}

impl Keeps {
    /// Every event, in the returned trace.
    pub(crate) fn all() -> Keeps {
        Keeps {
            keep: flux_trace::Keep::All,
            whole_trace: None,
        }
    }
}

pub(crate) async fn run(
    rt: &flux_container::Runtime,
    inst: &Instance,
    run_dir: &Path,
    opts: &HarvestOptions,
    keeps: Keeps,
) -> Result<TracedRun> {
    let image = &inst.spec.image;
    let (image_id, image_identity) = checked_image(rt, inst).await?;
    let interpreter = &inst.spec.interpreter;
    let interp = self::interpreter(rt, inst).await?;
    let exe = interp.exe.clone();
    let timeout = Duration::from_secs(inst.spec.test.timeout_s);
    // A JVM has one witness, its method probes: no hook to prepare, the probe flags in the
    // environment, the class filter and the test methods from the instance's config.
    let jvm = interp.family == flux_agent::interp::Family::HotSpot;
    let prepared = if jvm {
        None
    } else {
        Some(crate::tracing::prepare(
            &interp,
            &inst.spec.tracing,
            &crate::rundir::shared(run_dir),
            flux_container::runtime::RUN_DIR_IN_CONTAINER,
            opts.calls,
            opts.scope,
            // The container's default user (flux_container::ContainerSpec).
            Some((1000, 1000)),
        )?)
    };
    let env = match &prepared {
        Some(p) => p.env.clone(),
        None => vec![flux_agent::run::jvm_env(None)],
    };
    let spec = container_spec(inst, run_dir, &env);
    // The run's turn (flux_agent::turns) before the container exists: a started container
    // waits for its gate only GATE_DEADLINE, and another set's run may take longer.
    let set = match &prepared {
        Some(p) => p.plan.probes,
        None => flux_agent::run::default_probes(&interp),
    };
    let _turn = flux_agent::run::take_turn(&interp, set).await?;
    let mut container = rt.create(spec).await?;
    let result = async {
        let in_container = container.host_path(interpreter).await?;
        if in_container != exe {
            anyhow::bail!(
                "{interpreter} resolves to {} in the container but to {} in image {image}",
                in_container.display(),
                exe.display()
            );
        }
        let started = container.start().await?;
        let mut launched = ContainerRun {
            pidns: (started.pidns.dev, started.pidns.ino),
            init_pid: started.init_pid,
            gate: crate::rundir::shared(run_dir).join(GATE_NAME),
            timeout,
            outcome: None,
            released: None,
            exited: None,
            container: &mut container,
        };
        let (trace, code, whole_sha256) = match prepared {
            Some(p) => {
                let (mut plan, collector) = p.listen();
                plan.keep = keeps.keep;
                let topts = flux_agent::tracer::TracerOptions {
                    whole_trace: keeps.whole_trace,
                    ..opts.tracer.clone()
                };
                crate::tracing::trace(&mut launched, &interp, &plan, collector, &topts).await?
            }
            None => {
                let topts = flux_agent::tracer::TracerOptions {
                    classes: inst.spec.tracing.classes.clone(),
                    ..opts.tracer.clone()
                };
                let jopts = flux_agent::run::JvmOptions {
                    tests: inst.spec.tracing.test_methods.clone(),
                };
                let t = flux_agent::run::trace_jvm_launched(&mut launched, &interp, &topts, &jopts)
                    .await?;
                (t.trace, t.exit_code, None)
            }
        };
        let took = launched.program_time();
        let outcome = launched
            .outcome
            .take()
            .context("the container's outcome is unknown")?;
        Ok((trace, code, outcome, took, whole_sha256))
    }
    .await;
    let removed = container.remove().await;
    let (trace, exit_code, outcome, took, whole_sha256) = result?;
    removed.context("removing the container")?;
    let (timed_out, killed) = match outcome.clone().check(timeout) {
        Ok(_) => (None, None),
        Err(flux_container::Error::TimedOut { after, .. }) => (Some(after), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let labels = trace.meta.labels.clone();
    Ok(TracedRun {
        trace,
        run_dir: run_dir.to_path_buf(),
        exit_code,
        timed_out,
        killed,
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        stdout_truncated: outcome.stdout_truncated,
        stderr_truncated: outcome.stderr_truncated,
        image_id,
        image_identity,
        interpreter_version: interp.version_string(),
        labels,
        program_seconds: took.as_secs_f64(),
        whole_sha256,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn layer_root_strips_the_interpreter_path() {
        let exe = std::path::Path::new("/var/lib/docker/overlay2/abc/diff/usr/bin/python3.11");
        assert_eq!(
            super::layer_root(exe, "/usr/bin/python3.11"),
            std::path::Path::new("/var/lib/docker/overlay2/abc/diff")
        );
    }
}
