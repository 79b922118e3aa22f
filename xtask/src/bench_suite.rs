//! `cargo xtask bench harvest --suite sympy --parts N --ledger FILE`: a whole test suite measured
//! as N parts (round-robin over its `modules.txt`), each part one traced run per configuration side by
//! side (the order rotates part by part), every finished run appended to a ledger at once.
//!
//! Why parts: the whole suite is hours of wall time per configuration on this machine (the
//! settrace reference alone is several times the untraced run), and the agent holds one run's
//! trace in memory while it merges; a part bounds both, and the ledger makes the measurement
//! resumable (a rerun with the same ledger runs only what it lacks, so a suite can be measured
//! across sessions or machines). The figures are sums over parts: a part whose run of any
//! configuration is missing is left out of every configuration's sum, so the ratios compare the
//! same tests.
use super::{one, split_copy};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One ledger line: a run of one configuration on one part of one suite.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub(super) struct Entry {
    /// The suite's workload (`sympy/sympy-suite`, `sympy/sympy-suite-311`).
    pub suite: String,
    pub part: u32,
    pub of: u32,
    pub config: String,
    /// When it ran (UTC, RFC 3339) and with which flux binary (its sha256).
    pub date: String,
    pub flux: String,
    /// The 1-minute load average when the run started and when it ended (`/proc/loadavg`):
    /// what else the machine was doing, for reading the figures.
    #[serde(default)]
    pub load: Option<[f64; 2]>,
    /// The event budget the run had (`--max-events`), when not flux's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_events: Option<u64>,
    /// `flux bench-run`'s JSON, or why the run failed.
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<String>,
}

/// The entries of `path` (none when it does not exist yet). A line that does not parse is an
/// error naming the file and line: a ledger is never silently truncated.
pub(super) fn read_ledger(path: &Path) -> Result<Vec<Entry>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not a ledger entry", path.display(), i + 1))
        })
        .collect()
}

fn append(path: &Path, e: &Entry) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    writeln!(f, "{}", serde_json::to_string(e)?)?;
    f.sync_data()
        .with_context(|| format!("syncing {}", path.display()))?;
    Ok(())
}

fn sha256_file(p: &Path) -> Result<String> {
    use sha2::Digest;
    let bytes = std::fs::read(p).with_context(|| format!("{}", p.display()))?;
    Ok(format!("{:x}", sha2::Sha256::digest(bytes)))
}

/// What to measure.
pub(super) struct Plan<'a> {
    pub root: &'a Path,
    pub flux: &'a Path,
    pub suites: Vec<(String, PathBuf)>,
    pub parts: u32,
    /// Only these parts (1-based), else all.
    pub only: Option<(u32, u32)>,
    /// Run `only`'s parts again even where the ledger has them.
    pub rerun: bool,
    pub configs: &'a [String],
    pub ledger: &'a Path,
    /// flux's event budget (`--max-events`), else its default.
    pub max_events: Option<u64>,
}

/// Run every (suite, part, config) the ledger lacks a successful entry for.
pub(super) fn measure(p: &Plan<'_>) -> Result<()> {
    let flux_sha = sha256_file(p.flux)?;
    let done = read_ledger(p.ledger)?;
    let has = |suite: &str, part: u32, config: &str| {
        done.iter().any(|e| {
            e.suite == suite
                && e.part == part
                && e.of == p.parts
                && e.config == config
                && e.result.is_some()
        })
    };
    let scratch = tempfile::tempdir()?;
    let (lo, hi) = p.only.unwrap_or((1, p.parts));
    for part in lo..=hi {
        for (s, (name, dir)) in p.suites.iter().enumerate() {
            let k_n = format!("{part}/{}", p.parts);
            let copy = split_copy(dir, &k_n, scratch.path())?;
            for k in 0..p.configs.len() {
                let config = &p.configs[(k + part as usize + s) % p.configs.len()];
                if !p.rerun && has(name, part, config) {
                    continue;
                }
                eprintln!("bench suite: {name} part {k_n}: {config}");
                let load_before = load_average();
                let (result, error) = match one(p.flux, p.root, &copy, config, true, p.max_events) {
                    Ok(v) => {
                        eprintln!(
                            "  {:.2}s, events {}, lost {}, complete {}",
                            v["program_seconds"].as_f64().unwrap_or(0.0),
                            v["events"].as_u64().unwrap_or(0),
                            v["lost_events"].as_u64().unwrap_or(0),
                            v["complete"]
                        );
                        (Some(v), None)
                    }
                    Err(e) => {
                        eprintln!("  error: {e:#}");
                        (None, Some(format!("{e:#}")))
                    }
                };
                append(
                    p.ledger,
                    &Entry {
                        suite: name.clone(),
                        part,
                        of: p.parts,
                        config: config.clone(),
                        date: chrono_now(),
                        flux: flux_sha.clone(),
                        load: load_before.zip(load_average()).map(|(a, b)| [a, b]),
                        max_events: p.max_events.filter(|_| config.starts_with("flux")),
                        result,
                        error,
                    },
                )?;
            }
        }
    }
    Ok(())
}

/// The 1-minute load average, when /proc says it.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn chrono_now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => String::new(),
    }
}

/// Sums of one configuration over the parts counted.
#[derive(Default, Debug, PartialEq)]
pub(super) struct Sum {
    pub seconds: f64,
    pub events: u64,
    pub lost: u64,
    pub incomplete: u64,
    pub no_gold: u64,
    pub max_rss: u64,
    /// The agent's peak over the events of the part with the most events (issue 28: what
    /// memory costs per event is what says whether it is bounded, and how large a part fits).
    /// Not the largest ratio over the parts: a small part's is its fixed cost spread over few
    /// events (1,748 bytes an event on a part of 111 k events, 169 on one of 48 M).
    pub rss_per_event: f64,
    /// The events of that part.
    pub most_events: u64,
}

/// The ledger's figures for one suite: per configuration, sums over the parts every
/// configuration finished (latest entry of each); the parts counted, and the parts of `of`
/// still missing or failed.
#[derive(Debug)]
pub(super) struct SuiteFigures {
    pub of: u32,
    pub counted: Vec<u32>,
    pub sums: BTreeMap<String, Sum>,
    pub errors: Vec<String>,
}

pub(super) fn figures(entries: &[Entry], suite: &str, of: u32, configs: &[String]) -> SuiteFigures {
    // The latest entry per (part, config).
    let mut latest: BTreeMap<(u32, &str), &Entry> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.suite == suite && e.of == of) {
        latest.insert((e.part, e.config.as_str()), e);
    }
    let mut errors = Vec::new();
    let mut counted = Vec::new();
    for part in 1..=of {
        let all = configs.iter().all(|c| {
            latest
                .get(&(part, c.as_str()))
                .is_some_and(|e| e.result.is_some())
        });
        for c in configs {
            if let Some(Entry {
                error: Some(err), ..
            }) = latest.get(&(part, c.as_str()))
            {
                errors.push(format!("part {part}/{of} {c}: {err}"));
            }
        }
        if all {
            // A tracer must not change what the tests do: the same exit code in every
            // configuration (pytest's 1 when some test failed).
            let codes: Vec<String> = configs
                .iter()
                .map(|c| {
                    let e = &latest[&(part, c.as_str())];
                    let code = e.result.as_ref().map(|v| v["exit_code"].clone());
                    format!("{c} {}", code.unwrap_or_default())
                })
                .collect();
            let first = codes[0].split_once(' ').map(|x| x.1);
            if codes
                .iter()
                .any(|c| c.split_once(' ').map(|x| x.1) != first)
            {
                errors.push(format!(
                    "part {part}/{of}: exit codes differ ({}): the tracer changed the tests' outcome",
                    codes.join(", ")
                ));
            }
            counted.push(part);
        }
    }
    let mut sums: BTreeMap<String, Sum> = BTreeMap::new();
    for c in configs {
        let s = sums.entry(c.clone()).or_default();
        for part in &counted {
            let v = latest[&(*part, c.as_str())]
                .result
                .as_ref()
                .expect("counted parts have results");
            s.seconds += v["program_seconds"].as_f64().unwrap_or(0.0);
            s.events += v["events"].as_u64().unwrap_or(0);
            s.lost += v["lost_events"].as_u64().unwrap_or(0);
            let rss = v["agent_max_rss_bytes"].as_u64().unwrap_or(0);
            s.max_rss = s.max_rss.max(rss);
            if let Some(n) = v["events"].as_u64().filter(|&n| n > 0) {
                let per = rss as f64 / n as f64;
                // (Of parts with as many events, the larger figure.)
                if n > s.most_events || (n == s.most_events && per > s.rss_per_event) {
                    (s.most_events, s.rss_per_event) = (n, per);
                }
            }
            if c != "untraced" && c != "reference" {
                match v["complete"].as_bool() {
                    Some(false) => s.incomplete += 1,
                    _ if v["gold"]["sha256"].as_str().is_none() => s.no_gold += 1,
                    _ => {}
                }
            }
        }
    }
    SuiteFigures {
        of,
        counted,
        sums,
        errors,
    }
}

/// The report of a ledger: a table on stderr-free stdout and its JSON; non-zero when a flux
/// run was incomplete or gave no gold, or a run failed.
pub(super) fn report(
    ledger: &Path,
    suites: &[String],
    of: u32,
    configs: &[String],
    as_json: bool,
) -> Result<bool> {
    let entries = read_ledger(ledger)?;
    if entries.is_empty() {
        bail!("{}: no ledger entries", ledger.display());
    }
    let mut ok = true;
    let mut out = Vec::new();
    for suite in suites {
        let f = figures(&entries, suite, of, configs);
        let base = f.sums.get("untraced").map(|s| s.seconds).unwrap_or(0.0);
        let per: serde_json::Map<String, Value> = f
            .sums
            .iter()
            .map(|(c, s)| {
                ok &= s.incomplete == 0 && s.no_gold == 0 && (c == "reference" || s.lost == 0);
                (
                    c.clone(),
                    json!({
                        "seconds": s.seconds,
                        "ratio_to_untraced": (base > 0.0).then(|| s.seconds / base),
                        "events": s.events,
                        "lost_events": s.lost,
                        "incomplete_parts": s.incomplete,
                        "parts_without_gold": s.no_gold,
                        "agent_max_rss_bytes": s.max_rss,
                        "agent_peak_bytes_per_event": (s.rss_per_event > 0.0)
                            .then_some(s.rss_per_event),
                    }),
                )
            })
            .collect();
        ok &= f.errors.is_empty();
        out.push(json!({
            "suite": suite,
            "parts": f.of,
            "parts_counted": f.counted.len(),
            "configs": per,
            "errors": f.errors,
        }));
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_report(&out, configs);
    }
    Ok(ok)
}

fn print_report(out: &[Value], configs: &[String]) {
    println!(
        "flux bench harvest --suite: sums over the parts every configuration finished (program wall time); ratio to untraced; events/lost; complete parts; flux's peak memory (max over parts) and its peak per event on the part with the most events"
    );
    for s in out {
        println!(
            "{}: {} of {} parts counted",
            s["suite"].as_str().unwrap_or(""),
            s["parts_counted"],
            s["parts"]
        );
        for c in configs {
            let v = &s["configs"][c];
            let ratio = v["ratio_to_untraced"]
                .as_f64()
                .map(|r| format!("{r:.2}x"))
                .unwrap_or_else(|| "-".into());
            let incomplete = v["incomplete_parts"].as_u64().unwrap_or(0);
            let no_gold = v["parts_without_gold"].as_u64().unwrap_or(0);
            let per_event = v["agent_peak_bytes_per_event"]
                .as_f64()
                .map(|b| format!("{b:.0} B/event"))
                .unwrap_or_default();
            println!(
                "  {c:<14} {:>10.1}s {ratio:>7} {:>12} events {:>6} lost {:>14} {:>6.1} GB {per_event:>13}",
                v["seconds"].as_f64().unwrap_or(0.0),
                v["events"].as_u64().unwrap_or(0),
                v["lost_events"].as_u64().unwrap_or(0),
                match (c.as_str(), incomplete, no_gold) {
                    ("untraced" | "reference", _, _) => String::new(),
                    (_, 0, 0) => "complete+gold".into(),
                    (_, i, n) => format!("INCOMPLETE {i}, no gold {n}"),
                },
                v["agent_max_rss_bytes"].as_u64().unwrap_or(0) as f64 / (1u64 << 30) as f64,
            );
        }
        for e in s["errors"].as_array().into_iter().flatten() {
            println!("  failed: {}", e.as_str().unwrap_or(""));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(part: u32, config: &str, secs: f64, complete: bool) -> Entry {
        Entry {
            suite: "sympy/sympy-suite".into(),
            part,
            of: 3,
            config: config.into(),
            date: String::new(),
            flux: String::new(),
            load: None,
            max_events: None,
            result: Some(json!({
                "program_seconds": secs,
                "events": 10,
                "lost_events": 0,
                "complete": complete,
                "gold": {"sha256": "sha256:x"},
                "agent_max_rss_bytes": 1000 * part as u64,
            })),
            error: None,
        }
    }

    /// A part is counted only when every configuration finished it, so the ratios compare the
    /// same tests; the latest entry of a (part, config) wins; an incomplete flux part counts.
    #[test]
    fn sums_cover_only_parts_every_config_finished() {
        let configs = ["untraced".to_string(), "flux-auto".to_string()];
        let mut es = vec![
            entry(1, "untraced", 10.0, true),
            entry(1, "flux-auto", 99.0, true),
            entry(1, "flux-auto", 15.0, false),
            entry(2, "untraced", 20.0, true),
            entry(2, "flux-auto", 30.0, true),
            entry(3, "untraced", 5.0, true),
        ];
        let mut failed = entry(3, "flux-auto", 0.0, true);
        failed.result = None;
        failed.error = Some("boom".into());
        es.push(failed);
        let f = figures(&es, "sympy/sympy-suite", 3, &configs);
        assert_eq!(f.counted, vec![1, 2]);
        assert_eq!(f.sums["untraced"].seconds, 30.0);
        assert_eq!(f.sums["flux-auto"].seconds, 45.0);
        assert_eq!(f.sums["flux-auto"].incomplete, 1);
        assert_eq!(f.sums["flux-auto"].max_rss, 2000);
        // Part 2's 2000 bytes over its 10 events.
        assert_eq!(f.sums["flux-auto"].rss_per_event, 200.0);
        assert_eq!(f.errors.len(), 1, "{:?}", f.errors);
    }

    /// The peak per event was the largest ratio over the parts, so a small part's fixed cost
    /// (1,748 bytes an event on the 3.15 suite's part 32, 111 k events) hid what the largest part costs an
    /// event (169 on part 43): it is the part with the most events' figure.
    #[test]
    fn the_peak_per_event_is_the_largest_parts_not_a_small_parts() {
        let configs = ["untraced".to_string(), "flux-auto".to_string()];
        let mut es = Vec::new();
        for (part, events, rss) in [(1u32, 10u64, 1000u64), (2, 1000, 20_000), (3, 100, 5000)] {
            es.push(entry(part, "untraced", 1.0, true));
            let mut e = entry(part, "flux-auto", 2.0, true);
            let r = e.result.as_mut().expect("a result");
            r["events"] = json!(events);
            r["agent_max_rss_bytes"] = json!(rss);
            es.push(e);
        }
        let f = figures(&es, "sympy/sympy-suite", 3, &configs);
        assert_eq!(f.sums["flux-auto"].rss_per_event, 20.0);
        assert_eq!(f.sums["flux-auto"].most_events, 1000);
        assert_eq!(f.sums["flux-auto"].max_rss, 20_000);
    }

    /// A part where the traced run's tests ended otherwise than the untraced run's is an error:
    /// the tracer changed what the tests do, whatever the timing says.
    #[test]
    fn a_part_whose_exit_codes_differ_across_configs_is_an_error() {
        let configs = ["untraced".to_string(), "flux-auto".to_string()];
        let mut es = vec![
            entry(1, "untraced", 10.0, true),
            entry(1, "flux-auto", 15.0, true),
        ];
        es[0].result.as_mut().unwrap()["exit_code"] = json!(0);
        es[1].result.as_mut().unwrap()["exit_code"] = json!(1);
        let f = figures(&es, "sympy/sympy-suite", 3, &configs);
        assert_eq!(f.counted, vec![1]);
        assert!(
            f.errors.iter().any(|e| e.contains("exit codes differ")),
            "{:?}",
            f.errors
        );
        es[0].result.as_mut().unwrap()["exit_code"] = json!(1);
        let f = figures(&es, "sympy/sympy-suite", 3, &configs);
        assert!(f.errors.is_empty(), "{:?}", f.errors);
    }

    #[test]
    fn a_ledger_line_that_does_not_parse_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ledger.jsonl");
        append(&p, &entry(1, "untraced", 1.0, true)).unwrap();
        std::fs::write(&p, std::fs::read_to_string(&p).unwrap() + "{not json\n").unwrap();
        let err = format!("{:#}", read_ledger(&p).unwrap_err());
        assert!(err.contains("ledger.jsonl:2"), "{err}");
        assert!(read_ledger(&dir.path().join("none")).unwrap().is_empty());
    }

    /// Parts 11 and 30 of the SymPy suite exceed flux's default event budget: they are run
    /// with `--max-events`, which each entry records; the ledger's older lines (no budget
    /// recorded) still read.
    #[test]
    fn a_ledger_entry_records_a_raised_event_budget() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ledger.jsonl");
        append(&p, &entry(1, "untraced", 1.0, true)).unwrap();
        let mut e = entry(1, "flux-auto", 2.0, true);
        e.max_events = Some(60_000_000);
        append(&p, &e).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(!text.lines().next().unwrap().contains("max_events"));
        assert!(text
            .lines()
            .nth(1)
            .unwrap()
            .contains("\"max_events\":60000000"));
        let back = read_ledger(&p).unwrap();
        assert_eq!(
            (back[0].max_events, back[1].max_events),
            (None, Some(60_000_000))
        );
    }
}
