use anyhow::{Context, Result};
use flux_agent::run::{trace_command, RunOptions};
use flux_agent::tracer::TracerOptions;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Jsonl,
    Perfetto,
}

#[derive(clap::Args)]
pub struct Args {
    /// Where to write the trace (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "jsonl")]
    format: Format,
    /// Interpreter binary to attach to (default: the command's program, resolved on PATH).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Exit with the command's status even if events were lost (the trace stays marked
    /// incomplete in the summary).
    #[arg(long)]
    accept_incomplete: bool,
    /// Ring buffer size in MiB.
    #[arg(long, default_value_t = 64)]
    ring_mib: u32,
    /// Attach flux's empty BPF program instead of the real one (the trap floor; for
    /// `cargo xtask bench`). The trace is then empty.
    #[arg(long, hide = true)]
    empty_program: bool,
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
    let opts = RunOptions {
        cmd: a.cmd.clone(),
        python: a.python.clone(),
        probes: None,
        tracer: TracerOptions {
            ring_bytes: a.ring_mib.max(1) << 20,
            empty_program: a.empty_program,
            ..TracerOptions::default()
        },
        env: Vec::new(),
    };
    let res = rt.block_on(trace_command(opts))?;
    let write = |w: &mut dyn std::io::Write| -> std::io::Result<()> {
        match a.format {
            Format::Jsonl => res.trace.write_jsonl(w),
            Format::Perfetto => flux_trace::perfetto::write(&res.trace, w),
        }
    };
    match &a.out {
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
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
                       "filtered": c.filtered, "no_spec": c.no_spec, "string_defs": c.strdefs},
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
        if m.complete { String::new() } else { format!(", INCOMPLETE: {}", m.problems.join("; ")) }
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
