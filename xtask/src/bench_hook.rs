//! `cargo xtask bench hook [--json]`: what the in-process hook costs, as a ratio to the untraced
//! workload, on untargeted and on targeted code, in one run.
//!
//! Per interpreter (bookworm's python3.11, sid's python3.15 in its rootfs), interleaved round by
//! round so that drift on the machine hits every configuration alike:
//! - `untraced`: the workload alone;
//! - `hook/untargeted`, `hook/targeted`: `flux trace --calls hook` (the pure in-process witness:
//!   every call and return from the hook) with a config that targets nothing in the workload,
//!   and one that targets the workload's file (lines, locals, values of every call);
//! - `auto/untargeted`, `auto/targeted`: the same with `--calls auto` (USDT calls/returns, the
//!   hook adding entries on 3.11, generator starts on 3.15, and the targeted data).
//!
//! The workload times its own loop (`perf_counter_ns` around ≥ 200 k Python calls), so start-up,
//! attach and the agent's merge are not counted: a ratio is the loop's slowdown. The median of
//! the rounds is reported. Timings are never asserted in tests.
//!
//! Like `bench trace` it drives the release `flux` binary (built first): xtask never links the
//! agent.
use super::{loop_ns, median};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Three calls per iteration (`step` → `leaf` twice), a few locals per frame.
const WORKLOAD: &str = r#"
import sys, time
def leaf(n):
    return n + 1
def step(n):
    a = leaf(n)
    b = leaf(a)
    return b & 0xffff
def main(calls):
    x = 0
    t0 = time.perf_counter_ns()
    for _ in range(calls // 3):
        x = step(x)
    t1 = time.perf_counter_ns()
    print(t1 - t0)
main(int(sys.argv[1]))
"#;

/// The configurations, in the order they run in each round.
const CONFIGS: &[(&str, &str, bool)] = &[
    ("hook/untargeted", "hook", false),
    ("hook/targeted", "hook", true),
    ("auto/untargeted", "auto", false),
    ("auto/targeted", "auto", true),
];

struct Target {
    label: &'static str,
    /// The interpreter binary as the host sees it (flux's `--python`).
    python: PathBuf,
    /// `--root` for flux (the chroot the command runs in).
    root: PathBuf,
    /// Command prefix that runs the interpreter.
    prefix: Vec<String>,
    script_host: PathBuf,
    script_seen: String,
}

fn script_name() -> String {
    format!("flux_bench_hook_{}.py", std::process::id())
}

fn targets() -> Result<Vec<Target>> {
    let mut out = Vec::new();
    let name = script_name();
    if Path::new("/usr/bin/python3.11").exists() {
        let host = std::env::temp_dir().join(&name);
        std::fs::write(&host, WORKLOAD)?;
        out.push(Target {
            label: "python3.11",
            python: "/usr/bin/python3.11".into(),
            root: "/".into(),
            prefix: vec!["/usr/bin/python3.11".into()],
            script_seen: host.display().to_string(),
            script_host: host,
        });
    }
    let root = std::env::var_os("FLUX_SID_ROOTFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/cache/flux/rootfs/sid-py315".into());
    if root.join("usr/bin/python3.15").exists() {
        let seen = format!("/tmp/{name}");
        let inside = root.join(seen.trim_start_matches('/'));
        std::fs::write(&inside, WORKLOAD)?;
        out.push(Target {
            label: "python3.15",
            python: root.join("usr/bin/python3.15"),
            prefix: vec![
                "chroot".into(),
                root.display().to_string(),
                "/usr/bin/python3.15".into(),
            ],
            root,
            script_host: inside,
            script_seen: seen,
        });
    }
    if out.is_empty() {
        bail!("no interpreter found (/usr/bin/python3.11, or a sid rootfs with python3.15 from `cargo xtask images`)");
    }
    Ok(out)
}

struct Measured {
    untraced: f64,
    /// Per configuration: median loop ns, and whether every traced run was complete.
    configs: Vec<(f64, bool, Vec<String>)>,
}

fn measure(flux: &Path, t: &Target, calls: u64, rounds: usize) -> Result<Measured> {
    let mut cmd = t.prefix.clone();
    cmd.push(t.script_seen.clone());
    cmd.push(calls.to_string());
    let tmp = std::env::temp_dir();
    let id = std::process::id();
    let out_file = tmp.join(format!("flux-bench-hook-out-{id}"));
    let stats_file = tmp.join(format!("flux-bench-hook-stats-{id}.json"));
    let untargeted = tmp.join(format!("flux-bench-hook-untargeted-{id}.json"));
    let targeted = tmp.join(format!("flux-bench-hook-targeted-{id}.json"));
    std::fs::write(
        &untargeted,
        r#"{"files": ["no_such_file_in_the_workload.py"]}"#,
    )?;
    std::fs::write(&targeted, format!(r#"{{"files": ["{}"]}}"#, script_name()))?;
    let mut un = Vec::new();
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    let mut complete = vec![true; CONFIGS.len()];
    let mut problems: Vec<Vec<String>> = vec![Vec::new(); CONFIGS.len()];
    for _ in 0..rounds {
        let o = Command::new(&cmd[0]).args(&cmd[1..]).output()?;
        if !o.status.success() {
            bail!(
                "the workload failed on {}: {}",
                t.label,
                String::from_utf8_lossy(&o.stderr)
            );
        }
        un.push(loop_ns(&o.stdout)? as f64);
        for (i, (name, calls_mode, is_targeted)) in CONFIGS.iter().enumerate() {
            let cfg = if *is_targeted { &targeted } else { &untargeted };
            let mut c = Command::new(flux);
            c.args([
                "trace",
                "--out",
                "/dev/null",
                "--accept-incomplete",
                "--calls",
                calls_mode,
            ])
            .arg("--config")
            .arg(cfg)
            .arg("--stats-json")
            .arg(&stats_file)
            .arg("--python")
            .arg(&t.python)
            .arg("--root")
            .arg(&t.root)
            // The workload's stdout carries its timing: to a file, since flux owns stdout.
            .args(["--", "sh", "-c"])
            .arg(format!("exec \"$@\" > {}", out_file.display()))
            .arg("sh")
            .args(&cmd);
            let o = c.output().context("running flux trace")?;
            if !o.status.success() {
                bail!(
                    "flux trace ({name}) failed ({}) on {}: {}",
                    o.status,
                    t.label,
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            per[i].push(loop_ns(&std::fs::read(&out_file)?)? as f64);
            let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats_file)?)?;
            if stats["complete"] != true {
                complete[i] = false;
                for p in stats["problems"].as_array().into_iter().flatten() {
                    let p = p.as_str().unwrap_or_default().to_string();
                    if !problems[i].contains(&p) {
                        problems[i].push(p);
                    }
                }
            }
        }
    }
    for f in [
        &out_file,
        &stats_file,
        &untargeted,
        &targeted,
        &t.script_host,
    ] {
        let _ = std::fs::remove_file(f);
    }
    Ok(Measured {
        untraced: median(un).expect("rounds >= 1"),
        configs: per
            .into_iter()
            .zip(complete)
            .zip(problems)
            .map(|((v, c), p)| (median(v).expect("rounds >= 1"), c, p))
            .collect(),
    })
}

pub fn run(json_out: bool, calls: u64, rounds: usize) -> Result<std::process::ExitCode> {
    let flux = crate::bench_flux()?;
    let calls = calls.max(3);
    let rounds = rounds.max(1);
    let mut results = Vec::new();
    for t in targets()? {
        let m = measure(&flux, &t, calls, rounds)?;
        results.push((t.label, m));
    }
    let by: serde_json::Map<String, serde_json::Value> = results
        .iter()
        .map(|(label, m)| {
            let configs: serde_json::Map<String, serde_json::Value> = CONFIGS
                .iter()
                .zip(&m.configs)
                .map(|((name, _, _), (ns, complete, problems))| {
                    (
                        name.to_string(),
                        json!({
                            "ratio_to_untraced": ns / m.untraced.max(1.0),
                            "ns_per_call": ns / calls as f64,
                            "complete": complete,
                            "problems": problems,
                        }),
                    )
                })
                .collect();
            (
                label.to_string(),
                json!({"untraced_ns_per_call": m.untraced / calls as f64, "configs": configs}),
            )
        })
        .collect();
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"calls": calls, "rounds": rounds, "by_interpreter": by})
            )?
        );
    } else {
        println!(
            "flux bench hook: {calls} Python calls per run, median of {rounds} interleaved rounds"
        );
        print!("{:<12} {:>14}", "interpreter", "untraced/call");
        for (name, _, _) in CONFIGS {
            print!(" {name:>16}");
        }
        println!();
        for (label, m) in &results {
            print!("{:<12} {:>11.1} ns", label, m.untraced / calls as f64);
            for (ns, complete, _) in &m.configs {
                let r = format!(
                    "{:.2}x{}",
                    ns / m.untraced.max(1.0),
                    if *complete { "" } else { "!" }
                );
                print!(" {r:>16}");
            }
            println!();
        }
        println!("ratios are the traced loop's time over the untraced loop's; ! = trace incomplete (see --json)");
    }
    Ok(std::process::ExitCode::SUCCESS)
}
