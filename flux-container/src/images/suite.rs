//! A repository's own test suite, run in its image offline: `python -m pytest -p
//! no:cacheprovider -p flux_testreport --continue-on-collection-errors -q <args> <paths>` in
//! `/testbed` (read-only) as uid 1000,
//! network off, under the definition's deadline. The plugin (`py/flux_testreport.py`) streams
//! what was collected and how each test ended; [`SuiteReport`] counts them per module and is
//! written to `<cache>/images/<image>.tests.json` — what `flux gen` can choose test modules
//! from, and the figures `flux images test` prints.
//!
//! A module *collects* when pytest collected at least one test item from it, and *passes* when
//! it collects and none of its tests failed or errored (skips and expected failures allowed)
//! and at least one passed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{tools_dir, BaseDef, BuildConfig, Manifest, RepoDef, TESTBED, TOOLS_IN_CONTAINER};
use crate::error::{Error, Result};
use crate::runtime::{ContainerSpec, Mount, Runtime, OUT_IN_CONTAINER};

/// The text of `path`, a file test code could have written: only a regular file, opened
/// without following a link (a planted link is read as nothing, never followed).
fn read_untrusted(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    f.read_to_string(&mut text).ok()?;
    Some(text)
}

const DEFAULT_TIMEOUT_S: u64 = 3600;

/// Per-module outcome counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ModuleResult {
    /// Test items collected.
    pub tests: u64,
    pub passed: u64,
    pub failed: u64,
    pub errors: u64,
    pub skipped: u64,
    pub xfailed: u64,
    pub xpassed: u64,
    /// Collected but never reported (the run ended first: deadline, crash).
    pub not_run: u64,
    /// Node ids of the tests that failed or errored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
    /// The message when the module failed to collect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collect_error: Option<String>,
}

impl ModuleResult {
    /// Collected, and every test ended without failure or error, at least one passing.
    pub fn passes(&self) -> bool {
        self.tests > 0
            && self.collect_error.is_none()
            && self.failed == 0
            && self.errors == 0
            && self.not_run == 0
            && self.passed + self.xpassed > 0
    }
}

/// What one run of a repository's test suite did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SuiteReport {
    pub image: String,
    /// The image's content identity when it was run.
    pub identity: String,
    pub command: Vec<String>,
    /// Modules with at least one collected test.
    pub modules_collected: u64,
    /// Modules that failed to collect (import errors, missing test dependencies).
    pub modules_collect_errors: u64,
    /// Modules whose tests all pass ([`ModuleResult::passes`]).
    pub modules_passing: u64,
    pub tests_collected: u64,
    pub tests_passed: u64,
    pub tests_failed: u64,
    pub tests_errors: u64,
    pub tests_skipped: u64,
    pub tests_not_run: u64,
    /// pytest's exit status, when the session finished.
    pub exit_status: Option<i64>,
    pub timed_out: bool,
    pub seconds: f64,
    pub modules: BTreeMap<String, ModuleResult>,
    pub ran_at: String,
}

/// `<cache>/images/<image>.tests.json`.
pub fn report_path(cache_dir: &Path, image: &str) -> PathBuf {
    super::manifest_path(cache_dir, image).with_extension("tests.json")
}

/// Counts the plugin's JSON lines (unknown or broken lines are ignored: a run killed
/// mid-write leaves half a line).
pub fn summarize(jsonl: &str) -> (BTreeMap<String, ModuleResult>, Option<i64>) {
    let mut modules: BTreeMap<String, ModuleResult> = BTreeMap::new();
    let mut pending: BTreeMap<String, String> = BTreeMap::new();
    let mut finished = None;
    let module_of = |nodeid: &str| nodeid.split("::").next().unwrap_or(nodeid).to_owned();
    for line in jsonl.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(id) = v.get("collected").and_then(|x| x.as_str()) {
            modules.entry(module_of(id)).or_default().tests += 1;
            pending.insert(id.to_owned(), module_of(id));
        } else if let Some(id) = v.get("collect_error").and_then(|x| x.as_str()) {
            let msg = v.get("message").and_then(|m| m.as_str()).unwrap_or("");
            let last = msg
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or(msg);
            modules.entry(module_of(id)).or_default().collect_error = Some(last.trim().to_owned());
        } else if let Some(id) = v.get("test").and_then(|x| x.as_str()) {
            let m = pending.remove(id).unwrap_or_else(|| module_of(id));
            let r = modules.entry(m).or_default();
            match v.get("outcome").and_then(|x| x.as_str()).unwrap_or("") {
                "passed" => r.passed += 1,
                "skipped" => r.skipped += 1,
                "xfailed" => r.xfailed += 1,
                "xpassed" => r.xpassed += 1,
                failed => {
                    if failed == "failed" {
                        r.failed += 1
                    } else {
                        r.errors += 1
                    }
                    r.failing.push(id.to_owned());
                }
            }
        } else if let Some(s) = v.get("finished").and_then(|x| x.as_i64()) {
            finished = Some(s);
        }
    }
    for m in pending.values() {
        if let Some(r) = modules.get_mut(m) {
            r.not_run += 1;
        }
    }
    (modules, finished)
}

/// Runs the suite of `r` (built on `b`) in its image and writes the report.
pub async fn run(
    rt: &Runtime,
    config: &BuildConfig,
    r: &RepoDef,
    b: &BaseDef,
    progress: &mut dyn FnMut(&str),
) -> Result<(SuiteReport, PathBuf)> {
    let image = r.image(b);
    let tests = r.tests.as_ref().ok_or_else(|| Error::Definition {
        path: config.definitions.clone(),
        message: format!(
            "repo {} has no [repo.tests] (its sdist carries no test suite, or none is defined)",
            r.name
        ),
    })?;
    let mut command = vec![
        b.interpreter.clone(),
        "-m".into(),
        "pytest".into(),
        "-p".into(),
        "no:cacheprovider".into(),
        "-p".into(),
        "flux_testreport".into(),
        // One module that cannot import must not keep the others from running.
        "--continue-on-collection-errors".into(),
        "-q".into(),
    ];
    command.extend(tests.args.iter().cloned());
    command.extend(tests.paths.iter().cloned());
    let timeout = Duration::from_secs(tests.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S));
    let env = [
        ("PYTHONPATH", TOOLS_IN_CONTAINER.to_owned()),
        (
            "FLUX_TESTREPORT",
            format!("{OUT_IN_CONTAINER}/report.jsonl"),
        ),
        ("HOME", "/home/flux".to_owned()),
        ("PYTHONDONTWRITEBYTECODE", "1".to_owned()),
        ("PYTHONHASHSEED", "0".to_owned()),
    ];
    run_suite(
        rt, config, &image, command, &env, timeout, "pytest", progress,
    )
    .await
}

/// Runs the suite of the Java project `j` (built on `b`) in its image: every test class of
/// `target/test-classes` through `flux-junit` (JUnit's console launcher, `--scan-classpath`),
/// its XML reports turned into the plugin's lines by `py/junit_report.py`; writes the report
/// (a module is a test class's source file).
pub async fn run_java(
    rt: &Runtime,
    config: &BuildConfig,
    j: &super::JavaDef,
    b: &BaseDef,
    progress: &mut dyn FnMut(&str),
) -> Result<(SuiteReport, PathBuf)> {
    let image = j.image(b);
    let script = format!(
        "{launcher} --scan-classpath {TESTBED}/target/test-classes --reports-dir {OUT_IN_CONTAINER}/xml \
           > {OUT_IN_CONTAINER}/junit.log 2>&1; \
         python3 {TOOLS_IN_CONTAINER}/junit_report.py {OUT_IN_CONTAINER}/xml $? \
           > {OUT_IN_CONTAINER}/report.jsonl",
        launcher = super::java::LAUNCHER
    );
    let command = vec!["/bin/sh".to_owned(), "-c".to_owned(), script];
    let timeout = Duration::from_secs(j.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S));
    let env = [("HOME", "/home/flux".to_owned())];
    run_suite(
        rt, config, &image, command, &env, timeout, "JUnit", progress,
    )
    .await
}

/// Runs `command` in `image` (in `/testbed`, as uid 1000, network off, under `timeout`) with
/// the report directory at `/flux/out`, and writes what its report lines count.
#[expect(
    clippy::too_many_arguments,
    reason = "the one runner of both suites' commands"
)]
async fn run_suite(
    rt: &Runtime,
    config: &BuildConfig,
    image: &str,
    command: Vec<String>,
    env: &[(&str, String)],
    timeout: Duration,
    runner: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<(SuiteReport, PathBuf)> {
    let image = image.to_owned();
    let manifest = super::image_manifest(rt, &image)
        .await?
        .ok_or_else(|| Error::ImageMissing {
            image: image.clone(),
            hint: super::build_hint(&image),
        })?;
    let cache_dir = std::path::absolute(&config.cache_dir)
        .map_err(|e| Error::io(format!("resolve {}", config.cache_dir.display()), e))?;
    let run_dir = cache_dir
        .join("build")
        .join(format!("{}.tests", image.replace(['/', ':'], "_")));
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .map_err(|e| Error::io(format!("remove {}", run_dir.display()), e))?;
    }
    // A test's container sees its run directory read-only: the report goes to `out/`, mounted
    // writable at /flux/out and read back as untrusted (a regular file, no link followed).
    let out_dir = run_dir.join("out");
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| Error::io(format!("create {}", out_dir.display()), e))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o777))
            .map_err(|e| Error::io(format!("chmod {}", out_dir.display()), e))?;
    }
    let mut spec = ContainerSpec::new(&image, command.clone(), &run_dir);
    spec.mounts
        .push(Mount::read_write(&out_dir, OUT_IN_CONTAINER));
    spec.workdir = Some(TESTBED.to_owned());
    spec.timeout = timeout;
    spec.mounts
        .push(Mount::read_only(tools_dir(&cache_dir)?, TOOLS_IN_CONTAINER));
    for (k, v) in env {
        spec.env.insert((*k).to_owned(), v.clone());
    }
    progress(&format!(
        "{image}: {} (in {TESTBED}, network off, deadline {}s)",
        command.join(" "),
        timeout.as_secs()
    ));
    let outcome = rt.run(spec).await?;
    let jsonl = read_untrusted(&out_dir.join("report.jsonl")).unwrap_or_default();
    if jsonl.is_empty() {
        let tail: Vec<String> = outcome
            .stdout_lossy()
            .lines()
            .chain(outcome.stderr_lossy().lines())
            .map(str::to_owned)
            .collect();
        let from = tail.len().saturating_sub(30);
        return Err(Error::Suite {
            image,
            message: format!(
                "{runner} reported nothing (exit {}):\n{}",
                outcome.exit_code,
                tail[from..].join("\n")
            ),
        });
    }
    let (modules, finished) = summarize(&jsonl);
    let sum = |f: fn(&ModuleResult) -> u64| modules.values().map(f).sum::<u64>();
    let report = SuiteReport {
        image: image.clone(),
        identity: manifest.identity.clone(),
        command,
        modules_collected: modules.values().filter(|m| m.tests > 0).count() as u64,
        modules_collect_errors: modules
            .values()
            .filter(|m| m.collect_error.is_some())
            .count() as u64,
        modules_passing: modules.values().filter(|m| m.passes()).count() as u64,
        tests_collected: sum(|m| m.tests),
        tests_passed: sum(|m| m.passed + m.xpassed),
        tests_failed: sum(|m| m.failed),
        tests_errors: sum(|m| m.errors),
        tests_skipped: sum(|m| m.skipped + m.xfailed),
        tests_not_run: sum(|m| m.not_run),
        exit_status: finished,
        timed_out: outcome.timed_out,
        seconds: outcome.elapsed.as_secs_f64(),
        modules,
        ran_at: super::now_rfc3339(),
    };
    let path = report_path(&cache_dir, &image);
    super::write_json(&path, &report)?;
    Ok((report, path))
}

/// The last suite report of `image` under `cache_dir`, if any.
pub fn load_report(cache_dir: &Path, image: &str) -> Option<SuiteReport> {
    let text = std::fs::read_to_string(report_path(cache_dir, image)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether a report still describes `manifest`'s image (same identity).
pub fn report_is_current(report: &SuiteReport, manifest: &Manifest) -> bool {
    !manifest.identity.is_empty() && report.identity == manifest.identity
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_counted_from_the_plugin_lines() {
        let jsonl = r#"{"collected": "tests/test_a.py::test_1"}
{"collected": "tests/test_a.py::test_2"}
{"collected": "tests/test_b.py::C::test_x[1]"}
{"collected": "tests/test_c.py::test_slow"}
{"collect_error": "tests/test_d.py", "message": "Traceback\nE   ModuleNotFoundError: No module named 'yaml'\n"}
{"test": "tests/test_a.py::test_1", "outcome": "passed"}
{"test": "tests/test_a.py::test_2", "outcome": "skipped"}
{"test": "tests/test_b.py::C::test_x[1]", "outcome": "failed"}
{"test": "tests/test_c.py::te"#;
        let (m, finished) = summarize(jsonl);
        assert_eq!(finished, None, "the run did not finish");
        assert!(m["tests/test_a.py"].passes(), "{m:?}");
        assert_eq!(m["tests/test_a.py"].tests, 2);
        assert!(!m["tests/test_b.py"].passes());
        assert_eq!(m["tests/test_b.py"].failed, 1);
        assert_eq!(
            m["tests/test_b.py"].failing,
            ["tests/test_b.py::C::test_x[1]"]
        );
        assert_eq!(m["tests/test_c.py"].not_run, 1, "cut off mid-line");
        assert!(!m["tests/test_c.py"].passes());
        let d = &m["tests/test_d.py"];
        assert_eq!(d.tests, 0);
        assert_eq!(
            d.collect_error.as_deref(),
            Some("E   ModuleNotFoundError: No module named 'yaml'")
        );
        let (_, finished) = summarize("{\"finished\": 1}\n");
        assert_eq!(finished, Some(1));
        let only_skips = ModuleResult {
            tests: 1,
            skipped: 1,
            ..Default::default()
        };
        assert!(!only_skips.passes(), "nothing ran");
    }
}
