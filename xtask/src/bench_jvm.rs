//! `cargo xtask bench trace`'s JVM workload: what tracing a HotSpot JVM costs, side by side in
//! one run, rounds interleaved.
//!
//! The workload (`Workload.java`, compiled with the JDK's `javac`) times its own loop
//! (`System.nanoTime` around ≥ 1 M calls of a static method), so JVM start-up, class loading
//! and attach are not counted. Configurations:
//! - `untraced`: plain `java`;
//! - `probes flag`: `-XX:+DTraceMethodProbes` alone, nothing attached (the flag routes every
//!   call through the runtime: its own cost on the JIT);
//! - `flux flags`: the flags flux runs a JVM with (`flux_agent::interp::JVM_TRACE_FLAGS`: the
//!   probes and `-XX:-Inline`), nothing attached;
//! - `floor`: flux's empty BPF program on the method probes (the uprobe trap);
//! - `full`: flux's real program with the class filter keeping the workload's class, the
//!   consumer draining.
//!
//! Per call: the loop's time over the calls. Per event: a traced configuration's added time
//! over `flux flags` divided by the probe hits the kernel counted (two per call).
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

const JAVA_HOME: &str = "/usr/lib/jvm/java-17-openjdk-amd64";
/// What flux adds (kept equal to `flux_agent::interp::JVM_TRACE_FLAGS`; xtask does not link
/// the agent).
const FLUX_FLAGS: &[&str] = &["-XX:+DTraceMethodProbes", "-XX:-Inline"];

const WORKLOAD: &str = r#"
public final class Workload {
    static int f(int n) {
        return n + 1;
    }

    public static void main(String[] args) {
        int count = Integer.parseInt(args[0]);
        int x = 0;
        // Warm up outside the timed loop, so the loop runs compiled code.
        for (int i = 0; i < 20000; i++) {
            x = f(x);
        }
        long t0 = System.nanoTime();
        for (int i = 0; i < count; i++) {
            x = f(x);
        }
        long t1 = System.nanoTime();
        System.out.println(x);
        System.out.println(t1 - t0);
    }
}
"#;

/// The median rounds of each configuration, and the full run's kernel counts.
pub struct JvmMeasured {
    pub untraced: f64,
    pub probes_flag: f64,
    pub flux_flags: f64,
    pub floor: f64,
    pub full: f64,
    pub events: u64,
    pub lost: u64,
    pub class_filtered: u64,
}

/// Whether the JDK the workload needs is here.
pub fn available() -> bool {
    Path::new(JAVA_HOME).join("bin/javac").exists()
}

fn compile(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("Workload.java"), WORKLOAD)?;
    let st = Command::new(Path::new(JAVA_HOME).join("bin/javac"))
        .arg("-d")
        .arg(dir)
        .arg(dir.join("Workload.java"))
        .status()
        .context("running javac")?;
    if !st.success() {
        bail!("javac failed on the JVM workload");
    }
    Ok(())
}

fn loop_ns(stdout: &[u8]) -> Result<f64> {
    let s = String::from_utf8_lossy(stdout);
    s.lines()
        .last()
        .and_then(|l| l.trim().parse::<f64>().ok())
        .with_context(|| format!("the JVM workload printed no timing: {s:?}"))
}

pub fn measure(flux: &Path, calls: u64, rounds: usize) -> Result<JvmMeasured> {
    let tmp = std::env::temp_dir().join(format!("flux-bench-jvm-{}", std::process::id()));
    compile(&tmp)?;
    let java = PathBuf::from(JAVA_HOME).join("bin/java");
    let plain = |flags: &[&str]| -> Result<f64> {
        let o = Command::new(&java)
            .args(flags)
            .arg("-cp")
            .arg(&tmp)
            .arg("Workload")
            .arg(calls.to_string())
            .env_remove("JAVA_TOOL_OPTIONS")
            .output()?;
        if !o.status.success() {
            bail!(
                "the JVM workload failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        loop_ns(&o.stdout)
    };
    let cfg = tmp.join("config.json");
    std::fs::write(&cfg, r#"{"classes": ["Workload"]}"#)?;
    let out = tmp.join("out.txt");
    let stats = tmp.join("stats.json");
    let traced = |empty: bool| -> Result<(f64, serde_json::Value)> {
        let mut c = Command::new(flux);
        c.args([
            "trace",
            "--accept-incomplete",
            "--out",
            "/dev/null",
            "--stats-json",
        ])
        .arg(&stats)
        .arg("--python")
        .arg(&java);
        if empty {
            c.arg("--empty-program");
        } else {
            c.arg("--config").arg(&cfg);
        }
        c.args(["--", "sh", "-c"])
            .arg(format!("exec \"$@\" > {}", out.display()))
            .arg("sh")
            .arg(&java)
            .arg("-cp")
            .arg(&tmp)
            .arg("Workload")
            .arg(calls.to_string())
            .env_remove("JAVA_TOOL_OPTIONS");
        let st = c
            .status()
            .context("running flux trace on the JVM workload")?;
        if !st.success() {
            bail!("flux trace failed ({st}) on the JVM workload");
        }
        Ok((
            loop_ns(&std::fs::read(&out)?)?,
            serde_json::from_slice(&std::fs::read(&stats)?)?,
        ))
    };
    let mut v: [Vec<f64>; 5] = Default::default();
    let (mut events, mut lost, mut class_filtered) = (0, 0, 0);
    for _ in 0..rounds {
        v[0].push(plain(&[])?);
        v[1].push(plain(&FLUX_FLAGS[..1])?);
        v[2].push(plain(FLUX_FLAGS)?);
        v[3].push(traced(true)?.0);
        let (ns, s) = traced(false)?;
        v[4].push(ns);
        events = s["kernel"]["events"].as_u64().unwrap_or(0);
        lost += s["kernel"]["lost"].as_u64().unwrap_or(0);
        class_filtered = s["counts"]["jvm.class_filtered"].as_u64().unwrap_or(0);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let m = |i: usize| super::median(v[i].clone()).expect("rounds >= 1");
    Ok(JvmMeasured {
        untraced: m(0),
        probes_flag: m(1),
        flux_flags: m(2),
        floor: m(3),
        full: m(4),
        events,
        lost,
        class_filtered,
    })
}

/// The figures as JSON (per call, per event, ratios).
pub fn report(m: &JvmMeasured, calls: u64) -> serde_json::Value {
    let per_call = |ns: f64| ns / calls as f64;
    let ev = m.events.max(1) as f64;
    json!({
        "per_call_ns": {
            "untraced": per_call(m.untraced),
            "probes_flag": per_call(m.probes_flag),
            "flux_flags": per_call(m.flux_flags),
            "floor": per_call(m.floor),
            "full": per_call(m.full),
        },
        "per_event_ns": {
            "floor": (m.floor - m.flux_flags) / ev,
            "full": (m.full - m.flux_flags) / ev,
        },
        // Each configuration's loop time over the untraced one's: the side-by-side figure.
        "ratio_to_untraced": {
            "probes_flag": m.probes_flag / m.untraced.max(1.0),
            "flux_flags": m.flux_flags / m.untraced.max(1.0),
            "floor": m.floor / m.untraced.max(1.0),
            "full": m.full / m.untraced.max(1.0),
        },
        "ratio_full_to_floor": (m.full - m.flux_flags) / (m.floor - m.flux_flags).max(1.0),
        "ratio_flags_to_untraced": m.flux_flags / m.untraced.max(1.0),
        "events": m.events,
        "lost_events": m.lost,
        "class_filtered": m.class_filtered,
    })
}

pub fn print(r: &serde_json::Value, calls: u64, rounds: usize) {
    let f = |p: &str| r.pointer(p).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    println!(
        "\nJVM (HotSpot 17, method probes): {calls} calls per run, median of {rounds} interleaved rounds"
    );
    println!(
        "{:<44} {:>12} {:>12} {:>12}",
        "configuration", "per call", "x untraced", "per event"
    );
    for (label, key, event) in [
        ("untraced", "untraced", false),
        ("-XX:+DTraceMethodProbes, unattached", "probes_flag", false),
        (
            "flux's flags (+ -XX:-Inline), unattached",
            "flux_flags",
            false,
        ),
        ("floor: empty program (trap)", "floor", true),
        ("flux full (class filter on)", "full", true),
    ] {
        let e = if event {
            format!("{:.1} ns", f(&format!("/per_event_ns/{key}")))
        } else {
            String::from("-")
        };
        let ratio = if key == "untraced" {
            1.0
        } else {
            f(&format!("/ratio_to_untraced/{key}"))
        };
        println!(
            "{label:<44} {:>9.1} ns {:>11.1}x {e:>12}",
            f(&format!("/per_call_ns/{key}")),
            ratio
        );
    }
    println!(
        "full/floor per event {:.2}; flux's flags cost {:.1}x untraced; {} events, {} lost",
        f("/ratio_full_to_floor"),
        f("/ratio_flags_to_untraced"),
        r["events"],
        r["lost_events"]
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The side-by-side figures: every configuration's loop time as a ratio to untraced, and
    /// the per-event cost of the traced ones over flux's flags unattached.
    #[test]
    fn report_gives_each_configuration_as_a_ratio_to_untraced() {
        let m = JvmMeasured {
            untraced: 1_000.0,
            probes_flag: 2_000.0,
            flux_flags: 1_500.0,
            floor: 41_500.0,
            full: 81_500.0,
            events: 20,
            lost: 0,
            class_filtered: 0,
        };
        let r = report(&m, 10);
        assert_eq!(r["ratio_to_untraced"]["probes_flag"], 2.0);
        assert_eq!(r["ratio_to_untraced"]["flux_flags"], 1.5);
        assert_eq!(r["ratio_to_untraced"]["floor"], 41.5);
        assert_eq!(r["ratio_to_untraced"]["full"], 81.5);
        assert_eq!(r["per_event_ns"]["floor"], 2_000.0);
        assert_eq!(r["ratio_full_to_floor"], 2.0);
        assert_eq!(r["per_call_ns"]["untraced"], 100.0);
    }
}
