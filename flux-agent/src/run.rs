//! The tracing pipeline around one launched program, wherever it runs.
//!
//! A program is *launched* when it exists, sits in a PID namespace of its own, and has not
//! started yet ([`Launched`]): a host command from [`crate::spawn`], or a container (the
//! container runtime implements the trait where both crates are visible). [`capture`] then does
//! the part that must happen in a fixed order: load and configure the BPF side for that
//! namespace, start draining, attach, release the program, wait, drain to the end, read the
//! kernel's counters. [`usdt_trace`] turns a capture into trace events with an honest
//! completeness verdict.
use crate::hook::{HookCollector, HookServer};
use crate::interp::{Family, Interpreter, JVM_TRACE_FLAGS};
use crate::merge::{interpreter_label, merge, plan, CallsMode, Plan};
use crate::spawn::{spawn_gated, Gated};
use crate::tracer::{drain, Counters, Drained, ProbeSet, Tracer, TracerOptions};
use anyhow::{bail, Context, Result};
use flux_trace::{Trace, TracingConfig};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A program that exists in its own PID namespace and waits for [`Launched::release`].
pub trait Launched {
    /// (device, inode) of the program's PID namespace.
    fn pidns(&self) -> (u64, u64);
    /// Let the program start.
    fn release(&mut self) -> Result<()>;
    /// Wait for the program to end; its exit code (128 + signal when killed).
    fn wait(&mut self) -> impl Future<Output = Result<i32>> + Send;
    /// Kill the program (used when tracing fails half-way).
    fn kill(&mut self);
    /// Whether [`capture`] must take the run's turn ([`take_turn`]). A launcher whose program
    /// cannot wait long at its gate (a container gives up on its gate after
    /// `flux_container::runtime::GATE_DEADLINE`) takes the turn before launching, and says no.
    fn needs_turn(&self) -> bool {
        true
    }
}

impl Launched for Gated {
    fn pidns(&self) -> (u64, u64) {
        self.pidns
    }
    fn release(&mut self) -> Result<()> {
        Gated::release(self).context("releasing the traced command")
    }
    fn wait(&mut self) -> impl Future<Output = Result<i32>> + Send {
        if self.waiter.is_none() && self.exit.is_none() {
            if let Some(mut child) = self.take_child() {
                self.waiter = Some(tokio::task::spawn_blocking(move || child.wait()));
            }
        }
        async move {
            if let Some(code) = self.exit {
                return Ok(code);
            }
            let h = self
                .waiter
                .as_mut()
                .context("traced command already waited for")?;
            let status = h.await??;
            self.waiter = None;
            use std::os::unix::process::ExitStatusExt;
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            self.exit = Some(code);
            Ok(code)
        }
    }
    fn kill(&mut self) {
        Gated::kill(self)
    }
}

/// What the kernel side delivered for one run.
#[derive(Debug, Default)]
pub struct UsdtCapture {
    pub drained: Drained,
    pub counters: Counters,
    /// Probe sites attached (0 when no probe was requested: hook-only runs).
    pub sites: usize,
}

/// Trace `launched` through `interp`'s probes in `set`, from release to exit.
/// With an empty `set` nothing is loaded: the program just runs (the hook-only case).
pub async fn capture<L: Launched>(
    launched: &mut L,
    interp: &Interpreter,
    set: ProbeSet,
    topts: &TracerOptions,
) -> Result<(UsdtCapture, i32)> {
    let result = async {
        let _turn = match launched.needs_turn() {
            true => take_turn(interp, set).await?,
            false => None,
        };
        capture_inner(launched, interp, set, topts).await
    }
    .await;
    if result.is_err() {
        launched.kill();
        let _ = launched.wait().await;
    }
    result
}

/// Wait until no traced run of `interp`'s probe file with another probe set is running
/// ([`crate::turns`]): to hold until the program has exited and the probes are detached. An
/// untraced run whose program must be the traced one's (a witness) takes it with no probe.
pub async fn take_turn(interp: &Interpreter, set: ProbeSet) -> Result<Option<crate::turns::Turn>> {
    let file = &interp.probes.path;
    if interp.probes.sites.is_empty() || !file.is_file() {
        return Ok(None); // no probe, no semaphore: nothing another run could raise
    }
    let on = [(set.entry, "entry"), (set.ret, "ret"), (set.line, "line")];
    let names: Vec<&str> = on.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
    let name = if names.is_empty() {
        "none".to_string()
    } else {
        names.join("-")
    };
    let dir = std::path::Path::new(crate::turns::LOCK_DIR);
    let mut request = crate::turns::Request::new(file, &name, dir)?;
    let mut told = false;
    loop {
        if let Some(turn) = request.try_take()? {
            return Ok(Some(turn));
        }
        if !told && request.is_waiting() {
            told = true;
            eprintln!(
                "flux: waiting for other runs on {} to end: they attach other probes than \
                 this one's ({name}), which would change what its program does (determinism)",
                file.display()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn capture_inner<L: Launched>(
    launched: &mut L,
    interp: &Interpreter,
    set: ProbeSet,
    topts: &TracerOptions,
) -> Result<(UsdtCapture, i32)> {
    if !(set.entry || set.ret || set.line) {
        launched.release()?;
        let code = launched.wait().await?;
        return Ok((UsdtCapture::default(), code));
    }
    let mut tracer = Tracer::load(topts.clone(), Some(launched.pidns()), interp.fingerprint())?;
    if !topts.classes.is_empty() {
        if interp.family != Family::HotSpot {
            bail!(
                "a class filter ({}) is for a JVM, and {} is {}",
                topts.classes.join(", "),
                interp.exe.display(),
                interp.family_name()
            );
        }
        tracer.set_class_filter(&topts.classes)?;
    }
    let ring = tracer.take_ring()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (over_tx, mut over_rx) = tokio::sync::watch::channel(false);
    let drainer = tokio::spawn(drain(ring, topts.poll, stop_rx, topts.max_events, over_tx));
    let sites = tracer.attach(interp, set)?;
    if sites == 0 {
        bail!(
            "{} has none of the requested USDT probes (see `flux probes {}`)",
            interp.probes.path.display(),
            interp.exe.display()
        );
    }
    launched.release()?;
    let over = async { over_rx.wait_for(|o| *o).await.is_ok() };
    let code = tokio::select! {
        c = launched.wait() => c?,
        // Past the event budget: stop the program (the trace says why it is incomplete).
        true = over => {
            launched.kill();
            launched.wait().await?
        }
    };
    let _ = stop_tx.send(true);
    let (drained, _ring) = drainer.await??;
    let counters = tracer.counters()?;
    tracer.detach();
    Ok((
        UsdtCapture {
            drained,
            counters,
            sites,
        },
        code,
    ))
}

/// Trace events from a capture, and the completeness verdict: every lost, malformed or
/// unresolvable record makes the trace incomplete, with the reason written down. A JVM's
/// records go through the JVM merge (`flux_merge::jvm`) with no test windows.
/// The records are consumed: their memory is given back as they become events.
pub fn usdt_trace(drained: Drained, counters: &Counters, interp: &Interpreter) -> Trace {
    let label = interpreter_label(interp);
    match interp.family {
        Family::CPython => flux_merge::usdt::usdt_trace(drained, counters, &label),
        Family::HotSpot => {
            flux_merge::jvm::jvm_trace(&drained, counters, &label, &JvmOptions::default())
        }
    }
}

pub use flux_merge::jvm::JvmOptions;

/// A JVM's oracle trace from a capture (`flux_merge::jvm`).
pub fn jvm_trace(cap: &UsdtCapture, interp: &Interpreter, opts: &JvmOptions) -> Trace {
    flux_merge::jvm::jvm_trace(
        &cap.drained,
        &cap.counters,
        &interpreter_label(interp),
        opts,
    )
}

/// The environment that makes a JVM fire its method probes: `JAVA_TOOL_OPTIONS` (read by every
/// JVM the command starts, forked test JVMs included) with the flag added to `existing`.
pub fn jvm_env(existing: Option<&str>) -> (String, String) {
    let v = match existing {
        Some(e) if !e.trim().is_empty() => format!("{} {JVM_TRACE_FLAGS}", e.trim()),
        _ => JVM_TRACE_FLAGS.to_string(),
    };
    ("JAVA_TOOL_OPTIONS".to_string(), v)
}

/// Trace a launched JVM (started with [`jvm_env`]) through its method probes, from release to
/// exit: there is no in-process hook, so this is the whole trace.
pub async fn trace_jvm_launched<L: Launched>(
    launched: &mut L,
    interp: &Interpreter,
    topts: &TracerOptions,
    opts: &JvmOptions,
) -> Result<Traced> {
    let set = default_probes(interp);
    if !(set.entry && set.ret) {
        bail!(
            "{} has no usable hotspot:method__entry/__return probes (see `flux probes {}`)",
            interp.probes.path.display(),
            interp.exe.display()
        );
    }
    let (cap, exit_code) = capture(launched, interp, set, topts).await?;
    Ok(Traced {
        trace: jvm_trace(&cap, interp, opts),
        exit_code,
        counters: cap.counters,
        sites: cap.sites,
        whole_sha256: None,
    })
}

/// `flux trace` of a JVM command on the host.
pub async fn trace_jvm_host(
    cmd: &[String],
    interp: &Interpreter,
    topts: &TracerOptions,
    opts: &JvmOptions,
) -> Result<Traced> {
    let env = vec![jvm_env(std::env::var("JAVA_TOOL_OPTIONS").ok().as_deref())];
    let mut launched = launch_host(cmd, &env)?;
    trace_jvm_launched(&mut launched, interp, topts, opts).await
}

/// `flux trace --no-hook`: a host command traced with USDT only, on every probe the
/// interpreter reports reliably.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub cmd: Vec<String>,
    /// The interpreter binary to attach to; default: `cmd[0]` resolved on PATH.
    pub python: Option<PathBuf>,
    pub tracer: TracerOptions,
    /// Extra environment for the command.
    pub env: Vec<(String, String)>,
}

/// The probes an interpreter can be trusted with.
pub fn default_probes(interp: &Interpreter) -> ProbeSet {
    ProbeSet {
        entry: interp.entry.usable(),
        ret: interp.ret.usable(),
        line: interp.line.usable(),
    }
}

/// Resolve the interpreter to attach to: an explicit path, or the command's program.
pub fn resolve_python(cmd: &[String], python: Option<&Path>) -> Result<PathBuf> {
    let p = match python {
        Some(p) => p.to_path_buf(),
        None => {
            let prog = cmd.first().context("no command given")?;
            crate::spawn::resolve(prog)
                .with_context(|| format!("command `{prog}` not found on PATH"))?
        }
    };
    std::fs::canonicalize(&p).with_context(|| format!("interpreter {}", p.display()))
}

/// Start a host command gated in its own PID namespace.
pub fn launch_host(cmd: &[String], env: &[(String, String)]) -> Result<Gated> {
    let prog = cmd.first().context("no command given")?;
    let mut c = Command::new(prog);
    c.args(&cmd[1..]);
    for (k, v) in env {
        c.env(k, v);
    }
    Ok(spawn_gated(c)?)
}

/// `flux trace` with USDT only, on the host.
pub async fn trace_command(opts: RunOptions) -> Result<(Traced, Interpreter)> {
    let python = resolve_python(&opts.cmd, opts.python.as_deref())?;
    let interp = Interpreter::inspect(&python, Path::new("/"))
        .with_context(|| format!("inspecting {}", python.display()))?;
    let set = default_probes(&interp);
    let mut env = opts.env.clone();
    if interp.family == Family::HotSpot {
        env.push(jvm_env(std::env::var("JAVA_TOOL_OPTIONS").ok().as_deref()));
    }
    let mut launched = launch_host(&opts.cmd, &env)?;
    let (cap, exit_code) = capture(&mut launched, &interp, set, &opts.tracer).await?;
    let UsdtCapture {
        drained,
        counters,
        sites,
    } = cap;
    let trace = usdt_trace(drained, &counters, &interp);
    let traced = Traced {
        trace,
        exit_code,
        counters,
        sites,
        whole_sha256: None,
    };
    Ok((traced, interp))
}

/// A traced run (USDT alone, or both witnesses merged): the trace and what produced it.
pub struct Traced {
    pub trace: Trace,
    /// The command's exit status: its code, or 128 + signal.
    pub exit_code: i32,
    /// The kernel side's counters (zero when no probe was attached).
    pub counters: Counters,
    /// USDT probe sites attached.
    pub sites: usize,
    /// The digest (sha256, hex) of the whole trace, when it was written as the merge went
    /// (`TracerOptions::whole_trace`).
    pub whole_sha256: Option<String>,
}

/// Trace a launched program with both witnesses as `plan` says, and merge them. The hook's
/// server must already be listening (its socket is in the program's environment); only
/// connections from the program's PID namespace are read.
pub async fn trace_launched<L: Launched>(
    launched: &mut L,
    interp: &Interpreter,
    plan: &Plan,
    hook: HookCollector,
    topts: &TracerOptions,
) -> Result<Traced> {
    trace_recorded(launched, interp, plan, hook, topts, None).await
}

/// Where to write the merge's inputs of a run, and what to call the program in them.
#[derive(Clone, Debug)]
pub struct Record {
    pub path: PathBuf,
    pub program: String,
}

/// [`trace_launched`], and with `record` the merge's inputs written as a fixture (normalised:
/// see `flux_merge::fixture`). The collector's server must then be [`HookServer::recording`].
pub async fn trace_recorded<L: Launched>(
    launched: &mut L,
    interp: &Interpreter,
    plan: &Plan,
    hook: HookCollector,
    topts: &TracerOptions,
    record: Option<&Record>,
) -> Result<Traced> {
    hook.restrict_to(launched.pidns());
    let (cap, exit_code) = capture(launched, interp, plan.probes, topts).await?;
    memory_note(&format!(
        "the capture ({} raw USDT records, {} of them held in memory)",
        cap.drained.events.kept().len(),
        cap.drained.events.kept().held()
    ));
    let hook = hook.finish(std::time::Duration::from_secs(5)).await?;
    memory_note(&format!("the hook's streams ({})", hook.streams.len()));
    let label = interpreter_label(interp);
    if let Some(r) = record {
        let raw = (cap.sites > 0).then_some((&cap.drained, &cap.counters));
        let mut f = flux_merge::fixture::Fixture::capture(&r.program, &label, plan, raw, &hook);
        f.normalise();
        let file = std::fs::File::create(&r.path)
            .with_context(|| format!("creating {}", r.path.display()))?;
        f.write(&mut std::io::BufWriter::new(file))
            .with_context(|| format!("writing {}", r.path.display()))?;
    }
    // The merge reads each thread's raw records (from the drainer's spill file, a block at a
    // time) and makes them events as it places them; it holds its output and the hook's
    // records, not the run's USDT events.
    let UsdtCapture {
        drained,
        counters,
        sites,
    } = cap;
    // (The hook and the merge are CPython's: a JVM is traced by `trace_jvm_launched`.)
    let usdt = (sites > 0).then(|| flux_merge::usdt::usdt_capture(drained, &counters, &label));
    memory_note(&format!(
        "the USDT events ({}, read per thread by the merge)",
        usdt.as_ref().map_or(0, |t| t.len())
    ));
    let (trace, whole_sha256) = match &topts.whole_trace {
        None => (merge(usdt, &hook, &label, plan), None),
        Some(path) => {
            let (t, sha) = merge_writing(usdt, &hook, &label, plan, path)?;
            (t, Some(sha))
        }
    };
    memory_note(&format!("the merge ({} events)", trace.events.len()));
    Ok(Traced {
        trace,
        exit_code,
        counters,
        sites,
        whole_sha256,
    })
}

/// The merge, the whole trace written to the new file `path` as it goes (its events past a
/// bound through a [`crate::tracer::spill_file`]): the trace kept, and the digest of the file.
fn merge_writing(
    usdt: Option<flux_merge::usdt::UsdtEvents>,
    hook: &flux_merge::HookCapture,
    label: &str,
    plan: &Plan,
    path: &Path,
) -> Result<(Trace, String)> {
    // Created new, nothing followed, as every output of a run directory (`O_EXCL|O_NOFOLLOW`).
    let f = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o644)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?
    };
    let mut w = flux_trace::Sha256Writer::new(std::io::BufWriter::with_capacity(1 << 20, f));
    let whole = flux_merge::Whole {
        to: &mut w,
        spill: crate::tracer::spill_file("the merged events"),
        // Events are larger than the records the bound counts (~100 bytes against 32–48).
        after: crate::tracer::spill_after() / 4,
    };
    let t = flux_merge::merge_writing(usdt, hook, label, plan, whole)
        .with_context(|| format!("writing the trace to {}", path.display()))?;
    let sha = w
        .finish()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok((t, sha))
}

/// With `FLUX_MEMLOG` set (to anything), one stderr line of the agent's resident and peak
/// memory (`/proc/self/status`) after `stage`: where a run's memory goes (docs/performance.md).
pub fn memory_note(stage: &str) {
    if std::env::var_os("FLUX_MEMLOG").is_none() {
        return;
    }
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    eprintln!(
        "flux: memory after {stage}: resident {} MiB, peak {} MiB",
        kib("VmRSS:") / 1024,
        kib("VmHWM:") / 1024
    );
}

/// `flux trace` with the hook, on the host.
#[derive(Clone, Debug)]
pub struct HostTrace {
    pub cmd: Vec<String>,
    pub python: Option<PathBuf>,
    pub calls: CallsMode,
    pub config: TracingConfig,
    pub tracer: TracerOptions,
    /// The filesystem root the command sees (a chroot), `/` normally: the hook's files and
    /// socket are put where the command can reach them.
    pub root: PathBuf,
    /// Write the merge's inputs as a fixture (`flux trace --record-merge-input`).
    pub record: Option<Record>,
}

pub async fn trace_host(req: HostTrace) -> Result<(Traced, Interpreter, Plan)> {
    let python = resolve_python(&req.cmd, req.python.as_deref())?;
    let interp = Interpreter::inspect(&python, &req.root)
        .with_context(|| format!("inspecting {}", python.display()))?;
    let plan = plan(&interp, req.calls, req.config.scope)?;
    let tmp = req.root.join("tmp");
    let run_dir = tmp.join(run_dir_name(
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    ));
    std::fs::create_dir_all(&run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    {
        // Private: the hook's socket lives here.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let result = async {
        let hook_dir = run_dir.join("hook");
        crate::hook::install(&hook_dir).context("installing the hook")?;
        let sock = run_dir.join("hook.sock");
        let mut server = HookServer::bind(&sock)?;
        if req.record.is_some() {
            server = server.recording();
        }
        let seen = |p: &Path| -> String {
            let rel = p.strip_prefix(&req.root).unwrap_or(p);
            Path::new("/").join(rel).display().to_string()
        };
        let env = crate::hook::hook_env(
            &interp,
            &plan,
            &req.config,
            &seen(&sock),
            &seen(&hook_dir),
            std::env::var("PYTHONPATH").ok().as_deref(),
        );
        let mut launched = launch_host(&req.cmd, &env)?;
        let collector = server.spawn();
        let rec = req.record.as_ref();
        trace_recorded(&mut launched, &interp, &plan, collector, &req.tracer, rec).await
    }
    .await;
    let _ = std::fs::remove_dir_all(&run_dir);
    Ok((result?, interp, plan))
}

/// The name of a host run's directory: unique per agent process and moment, and always of one
/// length. The program sees it (the hook's socket and `PYTHONPATH` name it), and the length of
/// what a program's environment and module paths hold moves its heap: with the agent's PID
/// (3 to 7 digits, wrapping at `pid_max`) in it at its natural width, two runs of one program
/// placed objects at other addresses and iterated a set hashed by them in another order (the
/// determinism policy, 17.4).
fn run_dir_name(pid: u32, nanos: u128) -> String {
    format!("flux-run-{pid:010}-{nanos:039}")
}

#[cfg(test)]
mod tests {
    use super::run_dir_name;

    #[test]
    fn run_dir_names_are_one_length_whatever_the_pid() {
        let names = [
            run_dir_name(300, 1),
            run_dir_name(9_999, 1_765_000_000_000_000_000),
            run_dir_name(32_767, 1_765_000_000_000_000_001),
            run_dir_name(u32::MAX, u128::MAX),
        ];
        for n in &names {
            assert_eq!(n.len(), names[0].len(), "{names:?}");
        }
        assert_ne!(names[1], names[2]);
    }
}
