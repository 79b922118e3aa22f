//! `flux trace --format swe-flux-log` against an independent witness: the same pytest run
//! traced by flux (USDT + hook, the `swe-flux` dialect, the log written from the merged trace)
//! and by the plain settrace reference tracer of `xtask/bench/reference_tracer.py` must give
//! the same log, line for line, up to what differs by design: the times, the process id (flux
//! runs the program in a PID namespace of its own), memory addresses (flux scrubs them and
//! logs one fixed address, `sweflux_log::LOGGED_ADDRESS`) and TRACE_OUT in the `[TRACE][START]` line.
//!
//! Programs: `tests/sweflux/test_dialect.py` (exceptions, deleted names, `except ... as`, long
//! reprs, failing reprs, many locals, `_` names, `super()`, comprehensions, generators driven
//! by send/close, context managers entered with an exception, coroutines, another thread)
//! under several settings of SWE-Flux's variables, and every program of `tests/witness/` run as
//! a pytest test. Then parsers in SWE-Flux's layout (`tests/sweflux/parsers/`, regular
//! expressions and `ast.literal_eval` of the `locals=` dicts) must read flux's log and give
//! the answers worked out by hand from the programs.
//!
//! Needs root, eBPF and Debian's `/usr/bin/python3.11` with pytest; else `skipping: …`.

use crate::common::{cannot_trace, tempdir, PY311};
use std::path::{Path, PathBuf};
use std::process::Command;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../xtask/bench")
}

fn skip(what: &str) -> bool {
    if let Some(why) = cannot_trace() {
        return flux_skip::skip(what, why);
    }
    let has_pytest = Command::new(PY311)
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    !has_pytest
        && flux_skip::skip(
            what,
            &format!("{PY311} with pytest is missing (apt-get install python3-pytest)"),
        )
}

/// The pytest command both tracers run.
fn pytest(target: &str) -> Vec<String> {
    [
        PY311,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        target,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn with_vars(c: &mut Command, vars: &[(&str, &str)]) {
    for k in flux_trace_vars() {
        c.env_remove(k);
    }
    c.env("PYTHONDONTWRITEBYTECODE", "1");
    for (k, v) in vars {
        c.env(k, v);
    }
}

fn flux_trace_vars() -> &'static [&'static str] {
    &[
        "TRACE_ON",
        "TRACE_FILE",
        "TRACE_FUNC",
        "TRACE_EVENTS",
        "TRACE_OUT",
        "TRACE_LIMIT",
        "TRACE_MAXLOCALS",
        "TRACE_NO_UNDERSCORE",
        "TRACE_TIME",
        "TRACE_LOG_ALL_LINES",
        "TRACE_FULL_LOCALS_ON_RETURN",
        "PYTEST_PLUGINS",
    ]
}

/// The reference tracer's log of `target` under `vars`.
fn reference_log(dir: &Path, target: &str, vars: &[(&str, &str)]) -> String {
    let log = dir.join("reference.log");
    let cmd = pytest(target);
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..]).current_dir(tests_dir());
    with_vars(&mut c, vars);
    c.env("TRACE_OUT", &log)
        .env("PYTHONPATH", reference_dir())
        .env("PYTEST_PLUGINS", "reference_tracer");
    let out = c.output().expect("run pytest");
    assert!(
        out.status.success(),
        "the reference run failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&log).unwrap_or_default()
}

/// flux's log of `target` under `vars`.
fn flux_log(dir: &Path, target: &str, vars: &[(&str, &str)]) -> String {
    let log = dir.join("flux.log");
    let mut c = Command::new(env!("CARGO_BIN_EXE_flux"));
    c.args(["trace", "--format", "swe-flux-log", "--out"])
        .arg(&log)
        .arg("--")
        .args(pytest(target))
        .current_dir(tests_dir());
    with_vars(&mut c, vars);
    let out = c.output().expect("run flux");
    assert!(
        out.status.success(),
        "flux trace failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&log).unwrap()
}

/// A log line without what differs by design (see the module doc).
fn normalise(log: &str, timed: bool) -> Vec<String> {
    log.lines()
        .map(|l| {
            let mut l = l.to_string();
            if timed {
                // `YYYY-MM-DD HH:MM:SS.mmm `
                assert!(
                    l.len() > 24 && l.as_bytes()[4] == b'-' && l.as_bytes()[19] == b'.',
                    "not a timed line: {l}"
                );
                l = l[24..].to_string();
            }
            if l.starts_with("[TRACE][START]") {
                let words: Vec<&str> = l
                    .split(' ')
                    .filter(|w| !w.starts_with("pid=") && !w.starts_with("TRACE_OUT="))
                    .collect();
                return words.join(" ");
            }
            scrub(&l)
        })
        .collect()
}

fn scrub(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(" at 0x") {
        out.push_str(&rest[..i + 6]);
        rest = &rest[i + 6..];
        let n = rest
            .bytes()
            .take_while(|b| b.is_ascii_hexdigit() || *b == b'?')
            .count();
        out.push('?');
        rest = &rest[n..];
    }
    out.push_str(rest);
    out
}

/// Both logs of `target` under `vars`; asserts they are equal and returns flux's.
fn same_logs(what: &str, target: &str, vars: &[(&str, &str)]) -> String {
    let dir = tempdir();
    let reference = reference_log(&dir, target, vars);
    let flux = flux_log(&dir, target, vars);
    let timed = !vars.contains(&("TRACE_TIME", "0"));
    let (r, f) = (normalise(&reference, timed), normalise(&flux, timed));
    let first = r.iter().zip(&f).position(|(a, b)| a != b);
    if r != f {
        let at = first.unwrap_or(r.len().min(f.len()));
        let from = at.saturating_sub(3);
        panic!(
            "{what}: logs differ at line {} (reference {} lines, flux {}):\nreference:\n  {}\nflux:\n  {}",
            at + 1,
            r.len(),
            f.len(),
            r.get(from..(at + 4).min(r.len())).unwrap_or_default().join("\n  "),
            f.get(from..(at + 4).min(f.len())).unwrap_or_default().join("\n  ")
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    flux
}

const DIALECT: &str = "sweflux/test_dialect.py";

#[test]
fn flux_writes_swe_fluxs_log_as_its_tracer_does_every_event_every_line() {
    if skip("swe-flux-log, every event") {
        return;
    }
    let log = same_logs(
        "every event",
        DIALECT,
        &[
            ("TRACE_ON", "1"),
            ("TRACE_FILE", "sweflux/pkg/shapes.py"),
            ("TRACE_EVENTS", "line,call,return,exception"),
            ("TRACE_LOG_ALL_LINES", "1"),
        ],
    );
    // What the programs make the tracer see (worked out from tests/sweflux/pkg/shapes.py).
    for needle in [
        "[TRACE][START]",
        "pkg.shapes.lookups event=exception exc=KeyError: KeyError('b')",
        // `err` of `except KeyError as err` is deleted when the handler ends; `last` stays;
        // `_hidden` is left out.
        "pkg.shapes.lookups event=return retval=([1, 3, 1], 1) locals={'found': '[1, 3, 1]', \
         'k': \"'a'\", 'keys': \"['a', 'b', 'c', 'a']\", 'last': \"KeyError('b')\", \
         'missing': '1', 'table': \"{'a': 1, 'c': 3}\"}",
        "pkg.shapes.reraiser event=exception exc=ValueError: ValueError(-2)",
        "pkg.shapes.depth event=return retval=None",
        "<repr error: ValueError: no repr>",
        "pkg.shapes.Shape.describe event=call",
        "pkg.shapes.chain.<locals>.<listcomp> event=call",
        "pkg.shapes.counter event=exception exc=GeneratorExit: GeneratorExit()",
        "pkg.shapes.guarded event=exception exc=RuntimeError: RuntimeError('inside 1')",
        // 3.11 reports the StopIteration that ends an `await` to tracers.
        "pkg.shapes.root event=exception exc=StopIteration: StopIteration(4)",
    ] {
        assert!(log.contains(needle), "no {needle:?} in flux's log:\n{log}");
    }
    let long = log
        .lines()
        .find(|l| l.contains("'long_text': "))
        .expect("the long string");
    assert!(
        long.contains(&format!("'long_text': \"'{}...\"", "x".repeat(499))),
        "{long}"
    );
    let threads = log.matches("pkg.shapes.lookups event=call").count();
    assert_eq!(
        threads, 1,
        "the other thread's call is not the test thread's"
    );
}

#[test]
fn flux_writes_swe_fluxs_log_under_their_other_settings() {
    if skip("swe-flux-log, other settings") {
        return;
    }
    let log = same_logs(
        "functions, default events, underscores",
        DIALECT,
        &[
            ("TRACE_ON", "1"),
            ("TRACE_FILE", "pkg/shapes.py"),
            (
                "TRACE_FUNC",
                "lookups,pkg.shapes.Shape,counter.nothing,pkg.shapes.counter",
            ),
            ("TRACE_NO_UNDERSCORE", "0"),
        ],
    );
    assert!(log.contains("event=line"), "{log}");
    assert!(
        !log.contains("event=call"),
        "TRACE_EVENTS defaults to line:\n{log}"
    );
    assert!(log.contains("'_hidden'"), "{log}");
    assert!(
        log.contains("pkg.shapes.Shape.describe"),
        "a dotted prefix matches"
    );
    assert!(
        log.contains("pkg.shapes.lookups"),
        "the last component matches"
    );
    assert!(!log.contains("pkg.shapes.wide"), "not matched");
    let log = same_logs(
        "calls and returns, cut reprs, few locals, no times",
        DIALECT,
        &[
            ("TRACE_ON", "1"),
            ("TRACE_FILE", "pkg/shapes.py"),
            ("TRACE_EVENTS", "call,return,exception"),
            ("TRACE_FULL_LOCALS_ON_RETURN", "0"),
            ("TRACE_LIMIT", "20"),
            ("TRACE_MAXLOCALS", "3"),
            ("TRACE_TIME", "0"),
        ],
    );
    assert!(
        log.contains("'...': '<truncated locals: first 3>'"),
        "{log}"
    );
    // chain() returns `(12, {1: '1', 2: '2', 3: '3'})`: cut after 20 characters.
    assert!(
        log.contains("event=return retval=(12, {1: '1', 2: '2'... locals="),
        "{log}"
    );
    assert!(!log.contains("event=line"), "{log}");
    let off = flux_log(&tempdir(), DIALECT, &[("TRACE_FILE", "pkg/shapes.py")]);
    assert!(off.is_empty(), "TRACE_ON unset: no log");
}

#[test]
fn flux_writes_swe_fluxs_log_of_the_witness_corpus() {
    if skip("swe-flux-log, witness corpus") {
        return;
    }
    let log = same_logs(
        "witness corpus",
        "sweflux/test_witness.py",
        &[
            ("TRACE_ON", "1"),
            ("TRACE_FILE", "/witness/"),
            ("TRACE_EVENTS", "line,call,return,exception"),
            ("TRACE_LOG_ALL_LINES", "1"),
        ],
    );
    // Its programs, less those with a tracer of their own (test_witness.py's OWN_TRACERS),
    // those whose finalizers run where the GC does (`# witness: gc-timing`) and those the
    // reference cannot log as they run (`# witness: not-in-swe-flux-log: <why>`).
    let dir = tests_dir().join("witness");
    let programs = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".py") && n != "own_settrace.py")
        .filter(|n| {
            !std::fs::read_to_string(dir.join(n))
                .unwrap()
                .lines()
                .any(|l| {
                    l.trim() == "# witness: gc-timing"
                        || l.starts_with("# witness: not-in-swe-flux-log:")
                })
        })
        .count();
    assert_eq!(
        log.matches("[TRACE][START]").count(),
        programs,
        "one test per program"
    );
    assert!(log.lines().count() > 2000, "{} lines", log.lines().count());
}

#[test]
fn parsers_in_swe_fluxs_layout_read_fluxs_log() {
    if skip("swe-flux-log parsers") {
        return;
    }
    let dir = tempdir();
    let log = flux_log(
        &dir,
        DIALECT,
        &[
            ("TRACE_ON", "1"),
            ("TRACE_FILE", "pkg/shapes.py"),
            ("TRACE_EVENTS", "line,call,return,exception"),
            ("TRACE_LOG_ALL_LINES", "1"),
        ],
    );
    let path = dir.join("trace.log");
    std::fs::write(&path, &log).unwrap();
    let parse = |parser: &str| -> serde_json::Value {
        let out = dir.join("oracle.json");
        let st = Command::new(PY311)
            .arg(tests_dir().join("sweflux/parsers").join(parser))
            .arg("--trace-log")
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{parser}: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&out).unwrap()).unwrap()
            ["oracle_answer"]
            .clone()
    };
    // `lookups(["a", "b", "c", "a"], ...)` runs its loop body 4 times and misses "b" once.
    assert_eq!(
        parse("loop_and_exceptions.py"),
        serde_json::json!({"max_iterations": 4, "min_iterations": 4,
                           "exception_type_counts": {"KeyError": 1}})
    );
    // counter(5): total 0, then 2 after send(2), then -1 when closed.
    assert_eq!(
        parse("value_history.py"),
        serde_json::json!({"value_history": ["0", "2", "-1"]})
    );
    let _ = std::fs::remove_dir_all(&dir);
}
