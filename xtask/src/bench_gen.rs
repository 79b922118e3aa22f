//! `cargo xtask bench gen [--json] [--spec SET] [--check-sample N] [--before | --witness |
//! --own-runs] [--witness-sample F]`: screened instances per hour
//! of `flux gen` (which includes each instance's own harvest, its cross-check) on one repository
//! slice, and where the time goes.
//!
//! The slice is `xtask/bench/gen/gen.toml` (a few modules of SymPy's own test suite, python3.11)
//! unless `--spec` names another. It runs the release `flux gen SET --out <fresh dir> --json`
//! (`FLUX_BENCH_BIN=PATH`: that flux instead)
//! (no resume: every scout, shared trace and own run is made), then, as the ratio a shared
//! machine cannot spoil, the same modules untraced once each in the same image
//! (`untraced_seconds`): `gen_over_untraced` is gen's wall time over that. With
//! `--check-sample N`, `flux harvest --check` re-harvests N of the instances (seeded) from
//! clean containers and the time and result are reported beside. With `--before`, the slice is
//! first generated with every test used (`[budget] test_calls = 0`: no test left out for the
//! calls it makes, how flux-gen-v1 is made), then as specified, and the ratio printed. With
//! `--witness`, the slice is generated without the third witness (`[witness]` off), then with
//! every instance witnessed by the plain settrace reference (`sample = 1`), side by side: the
//! ratio of instances per hour and the witness's phase seconds are what it costs. With
//! `--own-runs`, one own run per narrowed config (how flux-gen-v1 was made), then one per tests
//! (configs widened to the union, `[budget] own_runs = "per-tests"`), side by side.
//! `--witness-sample F` sets `[witness] sample` in every run (1: as at release).
//!
//! Completeness beside throughput: the modules gen refused (their scout or shared trace
//! incomplete, a timeout, no target) are counted and listed with why; a module refused for an
//! incomplete trace makes the bench exit non-zero.
//!
//! Phase seconds are summed over modules, which run side by side (`budget.modules`), so they add
//! up to more than the wall time. The load average before and after is printed: figures from a
//! busy machine are for ratios only. Nothing here is asserted in tests.
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const DEFAULT_SPEC: &str = "xtask/bench/gen/gen.toml";

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One repository of a bench spec: where and how its modules run.
struct RepoModules {
    image: String,
    interpreter: String,
    root: String,
    pytest_args: Vec<String>,
    modules: Vec<String>,
}

/// Each repository of the spec.
fn modules_of(spec: &Path) -> Result<Vec<RepoModules>> {
    let text = std::fs::read_to_string(spec).with_context(|| spec.display().to_string())?;
    let v: toml::Value = toml::from_str(&text)?;
    let mut out = Vec::new();
    for r in v
        .get("repository")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
    {
        let s = |k: &str| r.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        let list = |k: &str| -> Vec<String> {
            r.get(k)
                .and_then(|x| x.as_array())
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        };
        let mut args = list("pytest_args");
        if args.is_empty() {
            args = vec!["-q".into(), "-p".into(), "no:cacheprovider".into()];
        }
        out.push(RepoModules {
            image: s("image"),
            interpreter: s("interpreter"),
            root: s("root"),
            pytest_args: args,
            modules: list("modules"),
        });
    }
    Ok(out)
}

/// Each listed module run once, untraced, in its image (the same command flux gen runs).
fn untraced_seconds(spec: &Path) -> Result<f64> {
    let mut total = 0.0;
    for RepoModules {
        image,
        interpreter: interp,
        root,
        pytest_args: args,
        modules,
    } in modules_of(spec)?
    {
        for m in modules {
            let t = std::time::Instant::now();
            let st = Command::new("docker")
                .args(["run", "--rm", "--network", "none", "-u", "1000:1000"])
                .args([
                    "-e",
                    "PYTHONDONTWRITEBYTECODE=1",
                    "-e",
                    "PYTHONHASHSEED=0",
                    "-w",
                    "/tmp",
                ])
                .arg(&image)
                .arg(&interp)
                .args(["-m", "pytest"])
                .args(&args)
                .arg(format!("--rootdir={root}"))
                .arg(format!("{}/{m}", root.trim_end_matches('/')))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .context("docker run")?;
            total += t.elapsed().as_secs_f64();
            let _ = st;
        }
    }
    Ok(total)
}

/// What a run changes in the spec.
#[derive(Clone, Copy)]
struct Overrides {
    /// `[budget] test_calls`.
    test_calls: Option<u64>,
    /// `[witness] sample` (every kind; `kinds` cleared).
    witness: Option<f64>,
    /// `[budget] own_runs`.
    own_runs: Option<&'static str>,
}

/// Which runs side by side.
pub enum Mode {
    AsSpecified,
    /// Every test used, then as specified.
    Before,
    /// Without the witness, then every instance witnessed.
    Witness,
    /// One own run per config, then per tests.
    OwnRuns,
}

pub fn run(
    json_out: bool,
    spec: Option<PathBuf>,
    check_sample: usize,
    mode: Mode,
    witness_sample: Option<f64>,
) -> Result<std::process::ExitCode> {
    let root = crate::workspace_root();
    let spec = spec.unwrap_or_else(|| root.join(DEFAULT_SPEC));
    let flux = crate::bench_flux()?;
    let plain = Overrides {
        test_calls: None,
        witness: witness_sample,
        own_runs: None,
    };
    let runs = match mode {
        Mode::AsSpecified => vec![("as specified", plain)],
        Mode::Before => vec![
            (
                "every test (test_calls = 0)",
                Overrides {
                    test_calls: Some(0u64),
                    ..plain
                },
            ),
            ("as specified", plain),
        ],
        Mode::Witness => vec![
            (
                "without the witness",
                Overrides {
                    witness: Some(0.0),
                    ..plain
                },
            ),
            (
                "every instance witnessed",
                Overrides {
                    witness: Some(1.0),
                    ..plain
                },
            ),
        ],
        Mode::OwnRuns => vec![
            (
                "one own run per config",
                Overrides {
                    own_runs: Some("per-config"),
                    ..plain
                },
            ),
            (
                "one own run per tests",
                Overrides {
                    own_runs: Some("per-tests"),
                    ..plain
                },
            ),
        ],
    };
    let mut out = Vec::new();
    let mut incomplete = 0u64;
    for (label, overrides) in runs {
        let j = gen_once(&flux, &root, &spec, overrides, check_sample)?;
        incomplete += j["modules_refused_incomplete"].as_u64().unwrap_or(0);
        if !json_out {
            print_run(label, &spec, &j);
        }
        out.push(json!({"run": label, "result": j}));
    }
    if json_out {
        let j = if out.len() == 1 {
            out.remove(0)["result"].take()
        } else {
            json!({ "runs": out })
        };
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else if out.len() == 2 {
        let rate = |i: usize| {
            out[i]["result"]["instances_per_hour"]
                .as_f64()
                .unwrap_or(0.0)
        };
        println!(
            "{} / {}: {:.2}x instances per hour",
            out[1]["run"].as_str().unwrap_or(""),
            out[0]["run"].as_str().unwrap_or(""),
            rate(1) / rate(0).max(1e-9)
        );
    }
    if incomplete > 0 {
        eprintln!(
            "bench gen: {incomplete} module(s) refused for an incomplete trace: the figures are no result"
        );
        return Ok(std::process::ExitCode::FAILURE);
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// One `flux gen` of the slice into a fresh directory (`test_calls` overrides the spec's
/// `[budget] test_calls`), and its figures.
fn gen_once(
    flux: &Path,
    root: &Path,
    spec: &Path,
    overrides: Overrides,
    check_sample: usize,
) -> Result<Value> {
    let test_calls = overrides.test_calls;
    let out = std::env::temp_dir().join(format!("flux-bench-gen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    // The set is written beside a copy of the spec, not into the repository.
    let set = out.join("set");
    std::fs::create_dir_all(&set)?;
    let text = std::fs::read_to_string(spec).with_context(|| spec.display().to_string())?;
    let text =
        if test_calls.is_none() && overrides.witness.is_none() && overrides.own_runs.is_none() {
            text
        } else {
            let mut v: toml::Value = toml::from_str(&text)?;
            let t = v.as_table_mut().context("a spec is a table")?;
            let mut budget = |k: &str, x: toml::Value| -> Result<()> {
                t.entry("budget")
                    .or_insert_with(|| toml::Value::Table(Default::default()))
                    .as_table_mut()
                    .context("[budget] is a table")?
                    .insert(k.into(), x);
                Ok(())
            };
            if let Some(n) = test_calls {
                budget("test_calls", toml::Value::Integer(n as i64))?;
            }
            if let Some(o) = overrides.own_runs {
                budget("own_runs", toml::Value::String(o.into()))?;
            }
            if let Some(f) = overrides.witness {
                let mut w = toml::map::Map::new();
                w.insert("sample".into(), toml::Value::Float(f));
                t.insert("witness".into(), toml::Value::Table(w));
            }
            toml::to_string(&v)?
        };
    std::fs::write(set.join("gen.toml"), text)?;
    let load_before = loadavg();
    let t = std::time::Instant::now();
    let o = Command::new(flux)
        .arg("gen")
        .arg(&set)
        .arg("--out")
        .arg(out.join("work"))
        .arg("--json")
        .current_dir(root)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running flux gen")?;
    let wall = t.elapsed().as_secs_f64();
    if !o.status.success() {
        bail!("flux gen failed ({})", o.status);
    }
    let report: Value = serde_json::from_slice(&o.stdout).context("flux gen --json")?;
    let screened = report["instances"].as_u64().unwrap_or(0);
    let load_gen = loadavg();
    let untraced = untraced_seconds(spec)?;
    let mut check = Value::Null;
    if check_sample > 0 {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let inst = set.join("instances");
        for repo in std::fs::read_dir(&inst).into_iter().flatten().flatten() {
            for d in std::fs::read_dir(repo.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                dirs.push(d.path());
            }
        }
        dirs.sort();
        // A fixed stride: the same sample for the same set.
        let step = (dirs.len() / check_sample.max(1)).max(1);
        let sample: Vec<PathBuf> = dirs
            .iter()
            .step_by(step)
            .take(check_sample)
            .cloned()
            .collect();
        let t = std::time::Instant::now();
        let st = Command::new(flux)
            .args(["harvest", "--check"])
            .args(&sample)
            .current_dir(root)
            .status()?;
        check = json!({
            "instances": sample.len(),
            "seconds": t.elapsed().as_secs_f64(),
            "all_reproduced": st.success(),
        });
    }
    let load_after = loadavg();
    let per_hour = screened as f64 / (wall / 3600.0);
    let _ = std::fs::remove_dir_all(&out);
    // Completeness beside throughput (issue 28): a module left out (an incomplete scout or
    // shared trace, a timeout) costs its time and gives nothing.
    let modules = report["modules"].as_u64().unwrap_or(0);
    let skipped = report["modules_skipped"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let incomplete = skipped
        .iter()
        .filter(|w| w[1].as_str().is_some_and(|s| s.contains("incomplete")))
        .count();
    Ok(json!({
        "modules_refused": skipped.len(),
        "modules_refused_incomplete": incomplete,
        "modules_refused_share": skipped.len() as f64 / (modules.max(1) as f64),
        "modules_refused_why": skipped,
        "spec": spec.display().to_string(),
        "test_calls_override": test_calls,
        "witness_sample_override": overrides.witness,
        "witnessed": report["witnessed"],
        "witness_dropped": report["witness"].as_array().map_or(0, Vec::len),
        "screened": screened,
        "instances_per_hour": per_hour,
        "wall_seconds": wall,
        "untraced_seconds": untraced,
        "gen_over_untraced": wall / untraced.max(1e-9),
        "seconds_per_instance": wall / (screened.max(1) as f64),
        "modules": report["modules"],
        "candidates": report["candidates"],
        "check_runs": report["check_runs"],
        "phase_seconds": report["seconds"],
        "by_kind": report["by_kind"],
        "left_out": report["left_out"],
        "harvest_check_sample": check,
        "load_before": load_before,
        "load_after_gen": load_gen,
        "load_after": load_after,
    }))
}

fn print_run(label: &str, spec: &Path, j: &Value) {
    let f = |k: &str| j[k].as_f64().unwrap_or(0.0);
    println!("bench gen: {} ({label})", spec.display());
    println!(
        "  {} screened instances in {:.0}s: {:.0} an hour ({:.1}s each; target >= 5000/h, issue 26.1)",
        j["screened"],
        f("wall_seconds"),
        f("instances_per_hour"),
        f("seconds_per_instance")
    );
    println!(
        "  modules refused (no instance: incomplete trace, timeout): {} of {} ({:.0}%)",
        j["modules_refused"],
        j["modules"],
        100.0 * f("modules_refused_share")
    );
    for w in j["modules_refused_why"].as_array().into_iter().flatten() {
        println!(
            "    {}: {}",
            w[0].as_str().unwrap_or("?"),
            w[1].as_str().unwrap_or("?")
        );
    }
    println!(
        "  untraced run of the same modules: {:.1}s; gen / untraced = {:.1}x",
        f("untraced_seconds"),
        f("gen_over_untraced")
    );
    println!(
        "  own runs (cross-check): {}; candidates before the set's selection: {}; tests left out as heavy: {}",
        j["check_runs"],
        j["candidates"],
        j["left_out"]["heavy-test"].as_u64().unwrap_or(0)
    );
    println!("  phase seconds (summed over modules run side by side):");
    if let Some(m) = j["phase_seconds"].as_object() {
        let total: f64 = m.values().filter_map(Value::as_f64).sum();
        for (k, v) in m {
            let v = v.as_f64().unwrap_or(0.0);
            println!(
                "    {k:<10} {v:>8.1}s {:>5.1}%",
                100.0 * v / total.max(1e-9)
            );
        }
    }
    if j["witness_sample_override"]
        .as_f64()
        .is_some_and(|f| f > 0.0)
    {
        println!(
            "  third witness: {} instance(s) agreed, {} dropped (disagreed or could not check)",
            j["witnessed"], j["witness_dropped"]
        );
    }
    if !j["harvest_check_sample"].is_null() {
        println!(
            "  flux harvest --check on a sample: {}",
            j["harvest_check_sample"]
        );
    }
    println!(
        "  load average: before {}, after gen {}, at the end {}",
        j["load_before"].as_str().unwrap_or(""),
        j["load_after_gen"].as_str().unwrap_or(""),
        j["load_after"].as_str().unwrap_or("")
    );
}
