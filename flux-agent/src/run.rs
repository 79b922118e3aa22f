//! The `flux trace` pipeline: start the command gated in its own PID namespace, load and
//! configure the BPF side for that namespace, start draining, attach, release, wait, drain to
//! the end, and assemble the trace with an honest completeness verdict.
use crate::interp::Interpreter;
use crate::spawn::{spawn_gated, Gated};
use crate::tracer::{drain, Counters, ProbeSet, Tracer, TracerOptions};
use anyhow::{bail, Context, Result};
use flux_trace::{Meta, Trace};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub cmd: Vec<String>,
    /// The interpreter binary to attach to; default: `cmd[0]` resolved on PATH.
    pub python: Option<PathBuf>,
    /// Which probes; default: every probe the interpreter reports reliably.
    pub probes: Option<ProbeSet>,
    pub tracer: TracerOptions,
    /// Extra environment for the command.
    pub env: Vec<(String, String)>,
}

pub struct RunResult {
    pub trace: Trace,
    /// The command's exit status: its code, or 128 + signal.
    pub exit_code: i32,
    pub counters: Counters,
    pub interp: Interpreter,
    pub sites: usize,
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
pub fn resolve_python(opts: &RunOptions) -> Result<PathBuf> {
    let p = match &opts.python {
        Some(p) => p.clone(),
        None => {
            let prog = opts.cmd.first().context("no command given")?;
            crate::spawn::resolve(prog)
                .with_context(|| format!("command `{prog}` not found on PATH"))?
        }
    };
    std::fs::canonicalize(&p).with_context(|| format!("interpreter {}", p.display()))
}

pub async fn trace_command(opts: RunOptions) -> Result<RunResult> {
    let python = resolve_python(&opts)?;
    let interp = Interpreter::inspect(&python, Path::new("/"))
        .with_context(|| format!("inspecting {}", python.display()))?;
    let set = opts.probes.unwrap_or_else(|| default_probes(&interp));

    let mut cmd = Command::new(&opts.cmd[0]);
    cmd.args(&opts.cmd[1..]);
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    let mut gated = spawn_gated(cmd)?;
    let result = traced_run(&mut gated, &interp, set, &opts.tracer).await;
    if result.is_err() {
        gated.kill();
        if let Some(mut c) = gated.take_child() {
            let _ = c.wait();
        }
    }
    let (trace, counters, sites, exit_code) = result?;
    Ok(RunResult {
        trace,
        exit_code,
        counters,
        interp,
        sites,
    })
}

async fn traced_run(
    gated: &mut Gated,
    interp: &Interpreter,
    set: ProbeSet,
    topts: &TracerOptions,
) -> Result<(Trace, Counters, usize, i32)> {
    let mut tracer = Tracer::load(topts.clone(), Some(gated.pidns), interp.fingerprint_offset())?;
    let ring = tracer.take_ring()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let drainer = tokio::spawn(drain(ring, topts.poll, stop_rx));
    let sites = tracer.attach(interp, set)?;
    if sites == 0 && (set.entry || set.ret || set.line) {
        bail!(
            "{} has none of the requested USDT probes (see `flux probes {}`)",
            interp.exe.display(),
            interp.exe.display()
        );
    }
    gated.release().context("releasing the traced command")?;
    let pid = gated.pid();
    let mut child = gated.take_child().context("traced command already waited for")?;
    let status = tokio::task::spawn_blocking(move || child.wait())
    .await?
    .with_context(|| format!("waiting for pid {pid}"))?;
    let _ = stop_tx.send(true);
    let (drained, _ring) = drainer.await??;
    let counters = tracer.counters()?;
    tracer.detach();

    let exit_code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    let (events, unresolved) = crate::assemble::usdt_events(&drained);
    let mut meta = Meta {
        complete: true,
        interpreter: format!("{} ({})", interp.exe.display(), interp.version_string()),
        calls: "usdt".into(),
        lost_events: counters.lost,
        ..Meta::default()
    };
    let mut problem = |s: String| {
        meta.complete = false;
        meta.problems.push(s);
    };
    if counters.lost > 0 {
        problem(format!("{} records lost (ring buffer full)", counters.lost));
    }
    if counters.read_errors > 0 {
        problem(format!("{} probe argument reads failed", counters.read_errors));
    }
    if drained.malformed > 0 {
        problem(format!("{} malformed records", drained.malformed));
    }
    if drained.unreadable_strings > 0 {
        problem(format!("{} strings unreadable", drained.unreadable_strings));
    }
    if unresolved > 0 {
        problem(format!("{unresolved} events name strings never defined"));
    }
    let delivered = drained.events.len() as u64;
    if delivered != counters.events {
        problem(format!(
            "kernel counted {} events but {} were delivered",
            counters.events, delivered
        ));
    }
    let mut trace = Trace { meta, events };
    trace.meta.lost_events += unresolved;
    trace.meta.counts = trace.count_by_kind();
    Ok((trace, counters, sites, exit_code))
}

