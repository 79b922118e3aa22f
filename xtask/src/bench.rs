//! `cargo xtask bench trace [--json]`: what the USDT tracer costs per event, side by side in one
//! run.
//!
//! Three configurations, interleaved round by round so drift on the machine hits all alike:
//! - `untraced`: the workload alone;
//! - `floor`: flux's empty BPF program on the same probe sites (the uprobe trap and nothing
//!   else: the least any USDT tracer can cost);
//! - `full`: flux's real program (PID-namespace filter, argument decoding, string cache, ring
//!   buffer) with the userspace consumer draining.
//!
//! The workload times its own loop (`perf_counter_ns` around ≥ 1 M calls), so interpreter
//! start-up and attach are not counted. Per-event cost of a traced configuration is its added
//! time over untraced divided by the number of probe hits in the loop (counted by the full
//! program's kernel counters); `untraced` reports ns per call. `ratio_full_to_floor` compares the
//! two traced per-event costs; the target is ≤ 1.3. `in_program` is the time the kernel
//! measures inside flux's program per hit (`BPF_ENABLE_STATS`, in one extra untimed run each of
//! the empty and the real program, the empty one's subtracted: the timing's own cost), which
//! splits a hit's cost into the trap and the program's work. Timings are never asserted in
//! tests.
//!
//! It drives the release `flux` binary (built first; `FLUX_BENCH_BIN=PATH` measures another
//! build, e.g. a baseline from before a change), so xtask itself never links the BPF loader and
//! builds on a machine that has no eBPF toolchain yet. Where a JDK 17 is installed, a JVM
//! workload is measured too (`bench_jvm`: untraced, the probe flags unattached, the trap floor,
//! flux full; `FLUX_BENCH_NO_JVM=1` leaves it out).
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "bench_extract.rs"]
mod bench_extract;
#[path = "bench_gen.rs"]
mod bench_gen;
#[path = "bench_harvest.rs"]
mod bench_harvest;
#[path = "bench_hook.rs"]
mod bench_hook;
#[path = "bench_jvm.rs"]
mod bench_jvm;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// USDT tracer cost per event: untraced, empty-program floor, full.
    Trace {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Python calls per run.
        #[arg(long, default_value_t = 1_000_000)]
        calls: u64,
        /// Interleaved rounds (the median is reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// In-process hook cost as ratios to untraced: untargeted and targeted, hook and auto.
    Hook {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Python calls per run.
        #[arg(long, default_value_t = 200_000)]
        calls: u64,
        /// Interleaved rounds (the median is reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// Tracing an instance's test in its container: untraced, flux (auto, hook-only), and a
    /// settrace reference tracer, on starter instances and a SymPy test-suite slice.
    /// (Boxed: its many options make it the largest variant by far.)
    Harvest(Box<bench_harvest::Args>),
    /// Answering many questions of one big trace: per question versus one trace index.
    Extract(bench_extract::Args),
    /// `flux gen` on a repository slice: screened instances per hour, where the time goes.
    Gen {
        /// Print JSON (`instances_per_hour`, `screened`, ...) instead of a table.
        #[arg(long)]
        json: bool,
        /// The set directory or spec (default: xtask/bench/gen/gen.toml).
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Re-harvest this many of the generated instances with `flux harvest --check`.
        #[arg(long, default_value_t = 0)]
        check_sample: usize,
        /// Also generate the slice with every test used (`[budget] test_calls = 0`, how
        /// flux-gen-v1 is made), first, and print both side by side.
        #[arg(long)]
        before: bool,
        /// Generate the slice twice side by side: without the third witness, then with every
        /// instance witnessed by the settrace reference (`[witness] sample = 1`), and print what
        /// the witness costs as a ratio (issue 23.1).
        #[arg(long, conflicts_with = "before")]
        witness: bool,
        /// Generate the slice twice side by side: one own run per narrowed config (how
        /// flux-gen-v1 was made, `[budget] own_runs = "per-config"`), then one per tests
        /// (configs widened to share runs, the default), and print the ratio (issue 26.1).
        #[arg(long, conflicts_with_all = ["before", "witness"])]
        own_runs: bool,
        /// `[witness] sample` for every run (e.g. 1: every instance witnessed, as at release).
        #[arg(long)]
        witness_sample: Option<f64>,
    },
}

const WORKLOAD: &str = r#"
import sys, time
def f(n):
    return n + 1
def main(count):
    x = 0
    t0 = time.perf_counter_ns()
    for _ in range(count):
        x = f(x)
    t1 = time.perf_counter_ns()
    print(t1 - t0)
main(int(sys.argv[1]))
"#;

/// One interpreter to measure: how to run it, and which file carries its probes.
struct Target {
    label: String,
    python: PathBuf,
    /// Command prefix that runs the interpreter (chroot for a rootfs).
    prefix: Vec<String>,
    /// Where the workload is written, and the path the interpreter sees it at.
    script_host: PathBuf,
    script_seen: String,
}

fn targets() -> Result<Vec<Target>> {
    let mut out = Vec::new();
    let host = std::env::temp_dir().join(format!("flux-bench-{}.py", std::process::id()));
    std::fs::write(&host, WORKLOAD)?;
    if Path::new("/usr/bin/python3.11").exists() {
        out.push(Target {
            label: "python3.11 (bookworm: returns + lines)".into(),
            python: "/usr/bin/python3.11".into(),
            prefix: vec!["/usr/bin/python3.11".into()],
            script_host: host.clone(),
            script_seen: host.display().to_string(),
        });
    }
    let root = std::env::var_os("FLUX_SID_ROOTFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/cache/flux/rootfs/sid-py315".into());
    if root.join("usr/bin/python3.15").exists() {
        let seen = format!("/tmp/flux-bench-{}.py", std::process::id());
        let inside = root.join(seen.trim_start_matches('/'));
        std::fs::write(&inside, WORKLOAD)?;
        out.push(Target {
            label: "python3.15 (sid: entries + returns)".into(),
            python: root.join("usr/bin/python3.15"),
            prefix: vec![
                "chroot".into(),
                root.display().to_string(),
                "/usr/bin/python3.15".into(),
            ],
            script_host: inside,
            script_seen: seen,
        });
    }
    if out.is_empty() {
        bail!("no interpreter with USDT probes found (/usr/bin/python3.11, or a sid rootfs with python3.15 from `cargo xtask images`)");
    }
    Ok(out)
}

fn loop_ns(stdout: &[u8]) -> Result<u64> {
    let s = String::from_utf8_lossy(stdout);
    s.lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("workload printed no timing: {s:?}"))
}

/// The median (the mean of the middle two for an even count); `None` for no values.
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

struct Measured {
    untraced: f64,
    floor: f64,
    full: f64,
    events: u64,
    lost: u64,
    /// ns per hit the kernel timed inside the empty and the real program (one extra, untimed
    /// run each: the kernel's timing reads the clock twice per hit).
    program_floor: f64,
    program_full: f64,
}

fn measure(flux: &Path, t: &Target, calls: u64, rounds: usize) -> Result<Measured> {
    let mut cmd = t.prefix.clone();
    cmd.push(t.script_seen.clone());
    cmd.push(calls.to_string());
    let (mut un, mut fl, mut fu) = (Vec::new(), Vec::new(), Vec::new());
    let (mut events, mut lost) = (0u64, 0u64);
    let tmp = std::env::temp_dir();
    let out_file = tmp.join(format!("flux-bench-out-{}", std::process::id()));
    let stats_file = tmp.join(format!("flux-bench-stats-{}.json", std::process::id()));
    // One traced run: the workload's loop time and flux's statistics.
    let traced = |empty: bool, program_stats: bool| -> Result<(f64, serde_json::Value)> {
        // The workload's own stdout carries its timing: send it to a file, since the traced
        // command's stdout is flux's.
        let mut c = Command::new(flux);
        // The USDT tracer alone (`--no-hook`): the hook is `bench hook`'s, and cannot be
        // injected into the chroot of the sid rootfs anyway.
        c.args(["trace", "--no-hook", "--out", "/dev/null", "--stats-json"])
            .arg(&stats_file)
            .arg("--python")
            .arg(&t.python);
        if empty {
            c.arg("--empty-program");
        }
        if program_stats {
            c.arg("--program-stats");
        }
        c.args(["--", "sh", "-c"])
            .arg(format!("exec \"$@\" > {}", out_file.display()))
            .arg("sh")
            .args(&cmd);
        let st = c.status().context("running flux trace")?;
        if !st.success() {
            bail!("flux trace failed ({st}) on {}", t.label);
        }
        let ns = loop_ns(&std::fs::read(&out_file)?)? as f64;
        Ok((ns, serde_json::from_slice(&std::fs::read(&stats_file)?)?))
    };
    for _ in 0..rounds {
        let o = Command::new(&cmd[0]).args(&cmd[1..]).output()?;
        un.push(loop_ns(&o.stdout)? as f64);
        fl.push(traced(true, false)?.0);
        let (ns, stats) = traced(false, false)?;
        fu.push(ns);
        events = stats["kernel"]["events"].as_u64().unwrap_or(0);
        lost += stats["kernel"]["lost"].as_u64().unwrap_or(0);
    }
    let program_ns = |empty: bool| -> Result<f64> {
        let k = &traced(empty, true)?.1["kernel"];
        match (k["program_run_ns"].as_u64(), k["program_runs"].as_u64()) {
            (Some(ns), Some(n)) if n > 0 => Ok(ns as f64 / n as f64),
            _ => bail!(
                "flux trace --program-stats reported no program run time on {}",
                t.label
            ),
        }
    };
    let (program_floor, program_full) = (program_ns(true)?, program_ns(false)?);
    let _ = std::fs::remove_file(&out_file);
    let _ = std::fs::remove_file(&stats_file);
    let _ = std::fs::remove_file(&t.script_host);
    Ok(Measured {
        untraced: median(un).expect("rounds >= 1"),
        floor: median(fl).expect("rounds >= 1"),
        full: median(fu).expect("rounds >= 1"),
        events,
        lost,
        program_floor,
        program_full,
    })
}

pub fn run(a: Args) -> Result<std::process::ExitCode> {
    let (json, calls, rounds) = match a.what {
        What::Trace {
            json,
            calls,
            rounds,
        } => (json, calls, rounds),
        What::Hook {
            json,
            calls,
            rounds,
        } => return bench_hook::run(json, calls, rounds),
        What::Harvest(h) => return bench_harvest::run(*h),
        What::Extract(e) => return bench_extract::run(e),
        What::Gen {
            json,
            spec,
            check_sample,
            before,
            witness,
            own_runs,
            witness_sample,
        } => {
            let mode = match (before, witness, own_runs) {
                (true, _, _) => bench_gen::Mode::Before,
                (_, true, _) => bench_gen::Mode::Witness,
                (_, _, true) => bench_gen::Mode::OwnRuns,
                _ => bench_gen::Mode::AsSpecified,
            };
            return bench_gen::run(json, spec, check_sample, mode, witness_sample);
        }
    };
    let flux = crate::bench_flux()?;
    let jvm = if bench_jvm::available() && std::env::var_os("FLUX_BENCH_NO_JVM").is_none() {
        Some(bench_jvm::report(
            &bench_jvm::measure(&flux, calls, rounds.max(1))?,
            calls,
        ))
    } else {
        None
    };
    let mut results = Vec::new();
    for t in targets()? {
        let m = measure(&flux, &t, calls, rounds.max(1))?;
        // Probe hits in the loop: the full run's count less start-up; start-up is small next to
        // ≥ 1 M calls, so the whole count is used (this slightly flatters neither side).
        let ev = m.events.max(1) as f64;
        // In the real program, net of what the kernel's timing of an empty one costs.
        let program = (m.program_full - m.program_floor).max(0.0);
        let per = json!({
            "untraced": m.untraced / calls as f64,
            "floor": (m.floor - m.untraced) / ev,
            "full": (m.full - m.untraced) / ev,
            "in_program": program,
        });
        let ratio = (m.full - m.untraced) / (m.floor - m.untraced).max(1.0);
        results.push((t.label.clone(), per, ratio, m));
    }
    if json {
        let (_, per, ratio, m) = results.last().expect("at least one target");
        let by: serde_json::Map<String, serde_json::Value> = results
            .iter()
            .map(|(l, p, r, m)| {
                (
                    l.clone(),
                    json!({"per_event_ns": p, "ratio_full_to_floor": r, "events": m.events, "lost_events": m.lost}),
                )
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "per_event_ns": per,
                "ratio_full_to_floor": ratio,
                "events": m.events,
                "lost_events": m.lost,
                "calls": calls,
                "rounds": rounds,
                "by_interpreter": by,
                "jvm": jvm,
            }))?
        );
    } else {
        println!("flux bench trace: {calls} calls per run, median of {rounds} interleaved rounds");
        println!(
            "{:<40} {:>14} {:>12} {:>12} {:>12} {:>10} {:>10} {:>6}",
            "interpreter",
            "untraced/call",
            "floor/event",
            "full/event",
            "in program",
            "full/floor",
            "events",
            "lost"
        );
        for (l, p, r, m) in &results {
            println!(
                "{:<40} {:>11.1} ns {:>9.1} ns {:>9.1} ns {:>9.1} ns {:>10.2} {:>10} {:>6}",
                l,
                p["untraced"].as_f64().unwrap_or(0.0),
                p["floor"].as_f64().unwrap_or(0.0),
                p["full"].as_f64().unwrap_or(0.0),
                p["in_program"].as_f64().unwrap_or(0.0),
                r,
                m.events,
                m.lost
            );
        }
        println!("in program: the kernel's timing of flux's program per hit, less its timing of an empty one");
        println!("target: full/floor <= 1.3");
        if let Some(j) = &jvm {
            bench_jvm::print(j, calls, rounds);
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}
