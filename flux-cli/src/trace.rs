//! `flux trace [--config F] [--format F] -- CMD…`: trace a program on the host with both
//! witnesses and write the merged trace (JSONL, Perfetto or SWE-Flux's log).
use anyhow::{Context, Result};
use flux_agent::interp::{Family, Interpreter};
use flux_agent::merge::CallsMode;
use flux_agent::run::{
    trace_command, trace_host, trace_jvm_host, HostTrace, JvmOptions, Record, RunOptions,
};
use flux_agent::tracer::TracerOptions;
use flux_trace::TracingConfig;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Jsonl,
    Perfetto,
    /// SWE-Flux's tracer log, configured by its TRACE_* variables (flux_interop::sweflux_log).
    SweFluxLog,
}

#[derive(clap::Args)]
pub struct Args {
    /// Where calls and returns come from.
    #[arg(long, value_enum, default_value = "auto")]
    calls: CallsMode,
    /// Tracing config (TOML or JSON): targeted files and functions, events, value limits.
    #[arg(long)]
    config: Option<PathBuf>,
    /// USDT alone, without the in-process hook (no values, no test boundaries; on 3.11 no
    /// entries).
    #[arg(long, conflicts_with_all = ["calls", "config"])]
    no_hook: bool,
    /// The root directory the command sees when the command chroots into it itself (flux does
    /// not: `--root DIR -- chroot DIR python …`): the hook's files and socket are placed under
    /// it, and the interpreter's libraries are looked up in it. The hook reads
    /// `/proc/self/maps`, so DIR needs a proc filesystem (`mount --bind /proc DIR/proc`).
    #[arg(long, default_value = "/")]
    root: PathBuf,
    /// Where to write the trace (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "jsonl")]
    format: Format,
    /// Interpreter binary to attach to (default: the command's program, resolved on PATH): a
    /// Python, or a JDK's `java` (its `libjvm.so` carries the probes).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Exit with the command's status even if events were lost (the trace stays marked
    /// incomplete in the summary).
    #[arg(long)]
    accept_incomplete: bool,
    /// Ring buffer size in MiB.
    #[arg(long, default_value_t = 64)]
    ring_mib: u32,
    /// The most USDT events kept; past it the program is stopped and the trace is incomplete.
    #[arg(long, default_value_t = 20_000_000)]
    max_events: usize,
    /// Attach flux's empty BPF program instead of the real one (the trap floor; for
    /// `cargo xtask bench`). The trace is then empty.
    #[arg(long, hide = true)]
    empty_program: bool,
    /// Have the kernel time the BPF program; the statistics JSON then has its run time (for
    /// `cargo xtask bench`: the timing itself costs two clock reads per probe hit).
    #[arg(long, hide = true)]
    program_stats: bool,
    /// Also write the merge's inputs (USDT records, the hook's lines, the plan) here, normalised,
    /// as a fixture of the offline merge corpus (`cargo xtask record-merge-corpus`).
    #[arg(long, conflicts_with = "no_hook")]
    record_merge_input: Option<PathBuf>,
    /// Also write the run's statistics (kernel counters, completeness, counts) as JSON here.
    #[arg(long)]
    stats_json: Option<PathBuf>,
    /// The command to run.
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    flux_agent::tracer::can_trace().map_err(|e| anyhow::anyhow!("cannot trace: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let tracer = TracerOptions {
        ring_bytes: a.ring_mib.max(1) << 20,
        empty_program: a.empty_program,
        program_stats: a.program_stats,
        max_events: a.max_events.max(1),
        ..TracerOptions::default()
    };
    let jvm = jvm_of(&a)?;
    let res = if let Some(interp) = jvm.filter(|_| !a.empty_program) {
        // A JVM: its method probes are the whole trace (no in-process hook).
        let config = match &a.config {
            Some(p) => load_config(p)?,
            None => TracingConfig::default(),
        };
        let tracer = TracerOptions {
            classes: config.classes.clone(),
            ..tracer
        };
        let opts = JvmOptions {
            tests: config.test_methods.clone(),
        };
        rt.block_on(trace_jvm_host(&a.cmd, &interp, &tracer, &opts))?
    } else if a.no_hook || a.empty_program {
        let (traced, _) = rt.block_on(trace_command(RunOptions {
            cmd: a.cmd.clone(),
            python: a.python.clone(),
            tracer,
            env: Vec::new(),
        }))?;
        traced
    } else {
        let config = match &a.config {
            Some(p) => load_config(p)?,
            None if a.format == Format::SweFluxLog => crate::sweflux::log_config().tracing_config(),
            None => TracingConfig::default(),
        };
        if a.format == Format::SweFluxLog {
            crate::sweflux::check_config(&config)?;
        }
        let (traced, _, _) = rt.block_on(trace_host(HostTrace {
            cmd: a.cmd.clone(),
            python: a.python.clone(),
            calls: a.calls,
            config,
            tracer,
            root: a.root.clone(),
            record: a.record_merge_input.clone().map(|path| Record {
                path,
                program: a.cmd.join(" "),
            }),
        }))?;
        traced
    };
    let write = |w: &mut dyn std::io::Write| -> std::io::Result<()> {
        match a.format {
            Format::Jsonl => res.trace.write_jsonl(w),
            Format::Perfetto => flux_trace::perfetto::write(&res.trace, w),
            Format::SweFluxLog => crate::sweflux::write_log(&res.trace, w),
        }
    };
    let out = a.out.clone().or_else(|| match a.format {
        Format::SweFluxLog => crate::sweflux::log_config().out.map(PathBuf::from),
        _ => None,
    });
    match &out {
        Some(p) => {
            let f =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            write(&mut BufWriter::new(f)).with_context(|| format!("writing {}", p.display()))?;
        }
        None => write(&mut BufWriter::new(std::io::stdout().lock()))?,
    }
    let m = &res.trace.meta;
    if let Some(p) = &a.stats_json {
        let c = &res.counters;
        let stats = serde_json::json!({
            "exit_code": res.exit_code,
            "sites": res.sites,
            "complete": m.complete,
            "problems": m.problems,
            "lost_events": m.lost_events,
            "kernel": {"events": c.events, "lost": c.lost, "read_errors": c.read_errors,
                       "filtered": c.filtered, "no_spec": c.no_spec, "string_defs": c.strdefs,
                       "program_run_ns": c.program.map(|p| p.0), "program_runs": c.program.map(|p| p.1)},
            "counts": m.counts,
        });
        std::fs::write(p, serde_json::to_vec_pretty(&stats)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    eprintln!(
        "flux: traced {} with {} ({} probe sites): {} events, {} lost{}",
        a.cmd.join(" "),
        m.interpreter,
        res.sites,
        res.trace.events.len(),
        m.lost_events,
        if m.complete {
            String::new()
        } else {
            format!(", INCOMPLETE: {}", m.problems.join("; "))
        }
    );
    eprintln!(
        "flux:   filtered out {} probe hits from processes outside the traced PID namespace",
        res.counters.filtered
    );
    for (k, v) in &m.counts {
        eprintln!("flux:   {k:<16} {v}");
    }
    if !m.complete && !a.accept_incomplete && !a.empty_program {
        eprintln!("flux: error: the trace is incomplete (use --accept-incomplete to keep the command's exit status)");
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::from(res.exit_code.clamp(0, 255) as u8))
}

/// The runtime to attach to when it is a JVM (the command's program or `--python`, inspected
/// by its probes), else None.
fn jvm_of(a: &Args) -> Result<Option<Interpreter>> {
    let exe = flux_agent::run::resolve_python(&a.cmd, a.python.as_deref())?;
    let interp = Interpreter::inspect(&exe, &a.root)
        .with_context(|| format!("inspecting {}", exe.display()))?;
    if interp.family != Family::HotSpot {
        return Ok(None);
    }
    if a.format == Format::SweFluxLog || a.record_merge_input.is_some() {
        anyhow::bail!(
            "{} is a JVM: --format swe-flux-log and --record-merge-input are for Python",
            exe.display()
        );
    }
    Ok(Some(interp))
}

/// A tracing config from a `.toml` or `.json` file.
pub fn load_config(p: &std::path::Path) -> Result<TracingConfig> {
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    let is_json = p.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
    if is_json {
        serde_json::from_str(&text)
            .with_context(|| format!("{}: invalid tracing config", p.display()))
    } else {
        toml::from_str(&text).with_context(|| format!("{}: invalid tracing config", p.display()))
    }
}
