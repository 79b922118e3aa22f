//! The third witness (issue 23.1): an instance's gold answer re-derived from an independent run.
//!
//! Why: flux's promise is that no gold answer is ever wrong, and the two witnesses of a harvest
//! (USDT and the hook) share the hook's exception and frame logic. A plain `sys.settrace`
//! reference sharing no code with the hook (`reference/flux_reference.py`: what it records and
//! why is its module doc) runs the instance's exact test command in the same image; its records
//! become a [`flux_trace::Trace`] (`flux_trace::reference`); the instance's own extractor and
//! template ([`Instance::extract`], the projection `flux harvest` cuts gold with) answer on it.
//! The two answers must be equal (lists the instance calls `order_insensitive` as multisets):
//! [`judge`]. `flux harvest --check --witness reference` and `flux gen` (per sampled instance,
//! before it is kept) use it.
//!
//! What the reference traces: the whole of each test's protocol (no target scope: an
//! exception question's callees, every call under a callee question's target), lines and values
//! of the targeted code; values rendered by the reference itself with the config's limits. The
//! static facts of the targeted files come from `flux_hook/static_facts.py` (pure AST, no
//! runtime), computed separately in the reference's process at exit. Its output is read like
//! any output of test code ([`crate::read_untrusted`]): no link followed, every record checked,
//! one record held at a time (a module of SymPy's writes gigabytes), and the trace written back
//! as it is serialised.
use crate::{docker, rundir, HarvestOptions};
use anyhow::{bail, Context, Result};
use flux_container::runtime::RUN_DIR_IN_CONTAINER;
use flux_instance::Instance;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The reference, put in the run's `shared/reference/` (read-only in the container).
const REFERENCE_PY: &[u8] = include_bytes!("../reference/flux_reference.py");
/// flux's static facts (pure AST): the one piece of flux the reference runs.
const STATIC_FACTS_PY: &[u8] = include_bytes!("../../flux-hook/flux_hook/static_facts.py");

/// Which witness re-derives a stored gold answer (`flux harvest --check --witness`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WitnessKind {
    /// flux itself, from a clean run (USDT and the hook).
    #[default]
    Flux,
    /// The plain settrace reference.
    Reference,
}

/// One run of an instance's test under the reference.
pub struct ReferenceRun {
    pub trace: flux_trace::Trace,
    /// sha256 of the trace's JSONL (`flux_instance::trace_digest`).
    pub trace_sha256: String,
    pub exit_code: i32,
    pub timed_out: bool,
    pub run_dir: PathBuf,
    pub program_seconds: f64,
    /// The end of the test's stderr, for messages.
    pub stderr_tail: String,
}

/// What the reference says of a gold answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "verdict")]
pub enum Judgement {
    /// Its answer is the gold answer.
    Agrees,
    /// Its answer (or why its trace gives none) differs.
    Disagrees { reference: Value },
    /// It could not check: the run did not end as the instance expects, its trace is
    /// incomplete, or the instance is of a kind it does not witness.
    Unavailable { why: String },
}

/// Why the reference cannot witness `inst` at all (checked before anything runs).
pub fn unsupported(inst: &Instance) -> Option<String> {
    let t = &inst.spec.tracing;
    if inst.external_parser().is_some() {
        return Some("it is answered by SWE-Flux's parser, not a flux extractor".into());
    }
    if t.scope == flux_trace::Scope::Run {
        return Some("scope \"run\" (the reference traces test windows)".into());
    }
    if t.dialect != flux_trace::Dialect::Flux || !t.module_functions.is_empty() {
        return Some("SWE-Flux's dialect".into());
    }
    if !t.tests {
        return Some("no test boundaries (tests = false)".into());
    }
    None
}

/// Run `inst`'s test once in its image under the reference (Docker only), and read what it
/// wrote into a trace. The run directory keeps the test's logs and the trace
/// (`reference-trace.jsonl`).
pub async fn run_reference(
    rt: &flux_container::Runtime,
    inst: &Instance,
    opts: &HarvestOptions,
) -> Result<ReferenceRun> {
    if let Some(why) = unsupported(inst) {
        bail!("the reference witness cannot check this instance: {why}");
    }
    let (run_dir, _in_use) = rundir::make(&opts.cache_dir, inst, opts.runs_max_bytes)?;
    crate::run_test::write_files(
        &rundir::shared(&run_dir),
        &[
            ("reference/flux_reference.py".into(), REFERENCE_PY.to_vec()),
            ("reference/static_facts.py".into(), STATIC_FACTS_PY.to_vec()),
        ],
    )?;
    let env = vec![
        (
            "PYTHONPATH".to_string(),
            format!("{RUN_DIR_IN_CONTAINER}/reference"),
        ),
        ("PYTEST_PLUGINS".into(), "flux_reference".into()),
        (
            "FLUX_REFERENCE_CONFIG".into(),
            serde_json::to_string(&inst.spec.tracing)?,
        ),
        (
            "FLUX_REFERENCE_OUT".into(),
            flux_container::runtime::OUT_IN_CONTAINER.into(),
        ),
        (
            "FLUX_REFERENCE_MAX_RECORDS".into(),
            opts.tracer.max_events.to_string(),
        ),
        // The determinism policy of every flux run (flux-hook/README.md, "Determinism"): hash
        // randomisation off; the reference seeds `random` itself.
        ("PYTHONHASHSEED".into(), "0".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ];
    let (outcome, took) = docker::run_untraced(rt, inst, &run_dir, &env).await?;
    rundir::write_new(&run_dir, "stdout.txt", &outcome.stdout)?;
    rundir::write_new(&run_dir, "stderr.txt", &outcome.stderr)?;
    let trace = read_output(&run_dir.join("out"), opts.tracer.max_events as u64)?;
    // Written as it is serialised, hashed on the way (a reference trace of a SymPy module is
    // gigabytes: never a second copy in memory).
    let mut file = std::io::BufWriter::new(rundir::create_new(&run_dir, "reference-trace.jsonl")?);
    let trace_sha256 = flux_instance::write_trace_jsonl(&trace, &mut file)
        .and_then(|sha| std::io::Write::flush(&mut file).map(|()| sha))
        .with_context(|| format!("writing {}/reference-trace.jsonl", run_dir.display()))?;
    drop(file);
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    Ok(ReferenceRun {
        trace_sha256,
        trace,
        exit_code: if outcome.timed_out {
            128 + libc::SIGKILL
        } else {
            i32::try_from(outcome.exit_code).unwrap_or(-1)
        },
        timed_out: outcome.timed_out,
        run_dir,
        program_seconds: took.as_secs_f64(),
        stderr_tail: lines[lines.len().saturating_sub(12)..].join("\n"),
    })
}

/// The reference's output in `out` (one `reference-<pid>.jsonl` per process), read as untrusted
/// output of test code, one record at a time, as a trace; `max_records` is the budget the
/// reference was given. More than one process (a fork) is not witnessed.
fn read_output(out: &Path, max_records: u64) -> Result<flux_trace::Trace> {
    let names: Vec<String> = std::fs::read_dir(out)
        .with_context(|| format!("reading {}", out.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("reference-") && n.ends_with(".jsonl"))
        .collect();
    let name = match names.as_slice() {
        [one] => one.clone(),
        [] => {
            bail!("the reference wrote nothing (did the test command run pytest with its plugin?)")
        }
        many => bail!(
            "the reference saw {} processes ({}): a forked child is not witnessed",
            many.len(),
            many.join(", ")
        ),
    };
    let p = out.join(&name);
    let f = crate::run_test::open_untrusted(&p)?;
    flux_trace::reference::read(
        std::io::BufReader::with_capacity(1 << 20, f),
        &name,
        max_records,
    )
    .with_context(|| format!("reading {}", p.display()))
}

/// Does the reference's run of `inst` give `gold` (the answer in the instance's template, as
/// `oracle.json` holds it)?
pub fn judge(inst: &Instance, gold: &Value, run: &ReferenceRun) -> Judgement {
    if run.timed_out {
        return Judgement::Unavailable {
            why: format!(
                "the test timed out under the reference (test.timeout_s = {})",
                inst.spec.test.timeout_s
            ),
        };
    }
    let m = &run.trace.meta;
    if !m.complete {
        return Judgement::Unavailable {
            why: format!(
                "the reference's trace is incomplete: {}",
                m.problems.join("; ")
            ),
        };
    }
    if let Err(why) =
        crate::outcome::check_expected(inst.spec.test.expect, run.exit_code, &run.trace)
    {
        return Judgement::Unavailable {
            why: format!(
                "under the reference: {why}\n{}",
                run.stderr_tail
                    .lines()
                    .map(|l| format!("    | {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        };
    }
    match inst.extract(&run.trace) {
        Ok(answer) => agreement(gold, answer, &inst.spec.order_insensitive),
        Err(e) => Judgement::Disagrees {
            reference: Value::String(format!("(no answer: {e})")),
        },
    }
}

/// [`Judgement::Agrees`] when `answer` equals `gold`, the lists at `order_insensitive` (template
/// paths, `/*` for any item or key) compared as multisets.
pub fn agreement(gold: &Value, answer: Value, order_insensitive: &[String]) -> Judgement {
    if canonical(gold, order_insensitive, &mut Vec::new())
        == canonical(&answer, order_insensitive, &mut Vec::new())
    {
        Judgement::Agrees
    } else {
        Judgement::Disagrees { reference: answer }
    }
}

fn canonical(v: &Value, paths: &[String], at: &mut Vec<String>) -> Value {
    let hit = |at: &[String]| {
        paths.iter().any(|p| {
            let segs: Vec<&str> = p.split('/').skip(1).collect();
            segs.len() == at.len() && segs.iter().zip(at).all(|(s, a)| *s == "*" || s == a)
        })
    };
    match v {
        Value::Array(a) => {
            let mut items: Vec<Value> = a
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    at.push(i.to_string());
                    let c = canonical(x, paths, at);
                    at.pop();
                    c
                })
                .collect();
            if hit(at) {
                items.sort_by_cached_key(|x| x.to_string());
            }
            Value::Array(items)
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    at.push(k.clone());
                    let c = canonical(x, paths, at);
                    at.pop();
                    (k.clone(), c)
                })
                .collect(),
        ),
        _ => v.clone(),
    }
}

/// A readable report of a disagreement: both answers.
pub fn disagreement(gold: &Value, reference: &Value) -> String {
    crate::json_diff(gold, reference, "gold", "reference")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An attrs M3 gold of cell reprs disagreed with the reference only by memory addresses: the
    /// reference rendered them raw where flux's gold follows the documented `0x?` rule.
    #[test]
    fn the_reference_shows_addresses_as_0x_as_flux_gold_does() {
        let py = "/usr/bin/python3.11";
        if !std::path::Path::new(py).exists()
            && flux_skip::skip("reference address rule", "no /usr/bin/python3.11")
        {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("flux_reference.py"), REFERENCE_PY).unwrap();
        let out = std::process::Command::new(py)
            .arg("-c")
            .arg(
                "import flux_reference as r\n\
                 class C: pass\n\
                 print(r._render((C(), lambda: 0))[0])",
            )
            .env("PYTHONPATH", dir.path())
            // Its records (written at exit) stay in the scratch directory.
            .env("FLUX_REFERENCE_OUT", dir.path())
            .current_dir(dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            text.trim(),
            "(<__main__.C object at 0x?>, <function <lambda> at 0x?>)"
        );
    }

    /// The reference's trace of `pytest test_it.py` (the file `test_py`) under `config`, run
    /// on the host's Debian Python; `None` (skipped loudly) without it or its pytest.
    fn reference_trace(name: &str, test_py: &str, config: &str) -> Option<flux_trace::Trace> {
        let t = reference_run(name, test_py, config)?;
        assert!(t.meta.complete, "{:?}", t.meta.problems);
        Some(t)
    }

    /// [`reference_trace`] without asserting that the trace is complete.
    fn reference_run(name: &str, test_py: &str, config: &str) -> Option<flux_trace::Trace> {
        let py = "/usr/bin/python3.11";
        let has_pytest = std::process::Command::new(py)
            .args(["-c", "import pytest"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !has_pytest
            && flux_skip::skip(
                name,
                "no /usr/bin/python3.11 with pytest (cargo xtask setup installs python3-pytest)",
            )
        {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("flux_reference.py"), REFERENCE_PY).unwrap();
        std::fs::write(dir.path().join("static_facts.py"), STATIC_FACTS_PY).unwrap();
        std::fs::write(dir.path().join("test_it.py"), test_py).unwrap();
        let out_dir = dir.path().join("out");
        std::fs::create_dir(&out_dir).unwrap();
        let out = std::process::Command::new(py)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"])
            .env("PYTHONPATH", dir.path())
            .env("PYTEST_PLUGINS", "flux_reference")
            .env("FLUX_REFERENCE_CONFIG", config)
            .env("FLUX_REFERENCE_OUT", &out_dir)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let files: Vec<_> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let f = std::io::BufReader::new(std::fs::File::open(&files[0]).unwrap());
        Some(flux_trace::reference::read(f, "reference.jsonl", u64::MAX).unwrap())
    }

    /// 12 fastapi golds went unwitnessed: "5 activation(s) of thread 13 never returned". A
    /// worker thread (untargeted code) the test started was still running when the test's
    /// window closed; the reference records nothing outside windows, so its frames never
    /// returned in the file. What the question asks about (`helper`, targeted) returned inside
    /// the window: the trace is complete. With the worker itself targeted it is not.
    #[test]
    fn a_worker_thread_outliving_the_test_window_leaves_the_targets_trace_complete() {
        let test_py = "import threading, time\n\n\
             def helper(n):\n    return n * 2\n\n\
             def work(n):\n    v = helper(n)\n    time.sleep(0.3)\n    return v\n\n\
             def test_a():\n\
             \x20   threading.Thread(target=work, args=(1,)).start()\n\
             \x20   time.sleep(0.05)\n";
        let config = |f: &str| {
            format!(
                r#"{{"scope": "targets", "files": ["test_it.py"], "functions": ["{f}"],
                    "events": ["call", "return"]}}"#
            )
        };
        let Some(t) = reference_trace(
            "reference worker past the window",
            test_py,
            &config("helper"),
        ) else {
            return;
        };
        let helper: Vec<_> = t
            .events
            .iter()
            .filter(|e| e.func().as_str() == "helper" && e.file().ends_with("test_it.py"))
            .map(|e| (e.ev, e.detail().value.as_ref().map(|v| v.repr.clone())))
            .collect();
        assert_eq!(
            helper,
            [
                (flux_trace::Kind::Call, None),
                (flux_trace::Kind::Return, Some("2".to_string()))
            ]
        );
        let Some(t) = reference_run("reference worker past the window", test_py, &config("work"))
        else {
            return;
        };
        assert!(!t.meta.complete);
        assert!(t.meta.problems.iter().any(|p| p.contains("never returned")));
    }

    /// 30 fastapi golds of tests/test_dump_json_fast_path.py went unwitnessed: "the test was
    /// expected to pass but exited with code 1". The test patches `json.dumps` (wrapping it) and
    /// asserts it is never called; the reference wrote its records with `json.dumps`, so the
    /// mock saw the witness's own calls. The records' serializer is bound at import now.
    #[test]
    fn a_test_patching_json_dumps_does_not_see_the_references_records() {
        let Some(t) = reference_trace(
            "reference under a patched json.dumps",
            "import json\nfrom unittest.mock import patch\n\n\
             def f(x):\n    return x + 1\n\n\
             def test_a():\n\
             \x20   with patch(\"json.dumps\", wraps=json.dumps) as m:\n\
             \x20       f(1)\n\
             \x20   m.assert_not_called()\n",
            r#"{"scope": "targets", "files": ["test_it.py"], "functions": ["f"],
                "events": ["call", "return"]}"#,
        ) else {
            return;
        };
        let rets: Vec<_> = t
            .events
            .iter()
            .filter(|e| e.func().as_str() == "f" && e.ev == flux_trace::Kind::Return)
            .map(|e| e.detail().value.as_ref().map(|v| v.repr.clone()))
            .collect();
        assert_eq!(rets, [Some("2".to_string())]);
    }

    /// 77 fastapi golds (a TestClient runs the app in a portal thread) went unwitnessed with
    /// "a return of frame N, which is not the innermost": the reference's flush joined its
    /// buffer, wrote it (the GIL released) and then replaced it, dropping what other threads
    /// appended meanwhile. Five threads calling at once must leave every record.
    #[test]
    fn the_reference_keeps_records_other_threads_add_while_it_writes() {
        let Some(t) = reference_trace(
            "reference records of threads",
            "import threading\n\n\
             def leaf(i):\n    return i + 1\n\n\
             def work(n):\n    t = 0\n    for i in range(n):\n        t = leaf(t)\n    return t\n\n\
             def test_threads_calling_at_once():\n\
             \x20   ts = [threading.Thread(target=work, args=(20000,)) for _ in range(4)]\n\
             \x20   for t in ts:\n        t.start()\n\
             \x20   work(20000)\n\
             \x20   for t in ts:\n        t.join()\n",
            r#"{"scope": "tests", "files": ["test_it.py"], "events": ["call", "return"]}"#,
        ) else {
            return;
        };
        // 5 threads × 20,000 calls of leaf, each a call and a return.
        let leaf_returns = t
            .events
            .iter()
            .filter(|e| e.ev == flux_trace::Kind::Return && e.func().as_str() == "leaf")
            .count();
        assert_eq!(leaf_returns, 5 * 20_000);
    }

    /// jinja2's `frame = frame.inner()` and flask's `_iter_loaders` rebind a local to another
    /// object of the same class: flux's gold counts a new definition (the hook compares reprs
    /// with their addresses), the reference compared the shown `0x?` reprs and saw none (5
    /// def-use golds disagreed).
    #[test]
    fn the_reference_sees_a_local_rebound_to_an_object_that_shows_the_same() {
        let Some(t) = reference_trace(
            "reference rebinding",
            "class C:\n    pass\n\n\
             def f():\n    x = C()\n    keep = x\n    x = C()\n    return keep is not x\n\n\
             def test_f():\n    assert f()\n",
            r#"{"scope": "tests", "files": ["test_it.py"], "functions": ["f"],
                "events": ["line", "call", "return", "variables"]}"#,
        ) else {
            return;
        };
        let shown: Vec<(u32, &str)> = t
            .events
            .iter()
            .filter(|e| e.func().as_str() == "f")
            .flat_map(|e| e.detail().locals.iter().map(move |(n, v)| (e.line, n, v)))
            .filter(|(_, n, _)| n.as_str() == "x")
            .map(|(line, _, v)| (line, v.repr.as_str()))
            .collect();
        // x shows at the line after each assignment (lines 6 and 8), both times as `0x?`.
        assert_eq!(
            shown,
            [
                (6, "<test_it.C object at 0x?>"),
                (8, "<test_it.C object at 0x?>")
            ]
        );
    }

    /// SymPy's `multiplicity` raises a ValueError in its `except` body right after
    /// `all(... for ...)` stopped early: the generator's close unwound with a GeneratorExit,
    /// which died, and the new ValueError took its address, so the reference took the raise
    /// for that exception coming out of a callee (a multiplicity S5 gold "disagreed").
    #[test]
    fn a_raise_at_a_dead_exceptions_address_is_still_a_raise() {
        let Some(t) = reference_trace(
            "reference exception identity",
            "def as_int(n):\n\
             \x20   if not isinstance(n, int):\n\
             \x20       raise ValueError('not an int')\n\
             \x20   return n\n\n\
             def multiplicity(p, n):\n\
             \x20   try:\n\
             \x20       p, n = as_int(p), as_int(n)\n\
             \x20   except ValueError:\n\
             \x20       if all(isinstance(i, (int, float)) for i in (p, n)):\n\
             \x20           return 0\n\
             \x20       raise ValueError('expecting ints')\n\n\
             def test_m():\n\
             \x20   for _ in range(3):\n\
             \x20       try:\n\
             \x20           multiplicity('a', 2)\n\
             \x20       except ValueError:\n\
             \x20           pass\n",
            r#"{"scope": "tests", "files": ["test_it.py"], "functions": ["multiplicity"],
                "events": ["line", "call", "return", "exception"]}"#,
        ) else {
            return;
        };
        let kinds: Vec<&str> = t
            .events
            .iter()
            .filter(|e| e.ev == flux_trace::Kind::Exception && e.line == 12)
            .map(|e| e.detail().outcome.as_str())
            .collect();
        assert_eq!(kinds, ["raise"; 3]);
    }

    #[test]
    fn order_insensitive_lists_compare_as_multisets_and_nothing_else_does() {
        let gold = json!({"a": [1, 2, 3], "b": [{"l": [2, 1]}, {"l": [3]}], "c": [1, 2]});
        let same = json!({"a": [3, 2, 1], "b": [{"l": [1, 2]}, {"l": [3]}], "c": [1, 2]});
        let paths = vec!["/a".to_string(), "/b/*/l".to_string()];
        assert_eq!(agreement(&gold, same.clone(), &paths), Judgement::Agrees);
        let swapped = json!({"a": [1, 2, 3], "b": [{"l": [2, 1]}, {"l": [3]}], "c": [2, 1]});
        assert!(matches!(
            agreement(&gold, swapped, &paths),
            Judgement::Disagrees { .. }
        ));
        assert!(matches!(
            agreement(&gold, same, &[]),
            Judgement::Disagrees { .. }
        ));
    }

    /// The bytes this thread holds, counted by a global allocator of the crate's unit tests (per
    /// thread, so the tests running beside one do not count in it).
    mod held {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;

        thread_local! {
            static NOW: Cell<isize> = const { Cell::new(0) };
            static PEAK: Cell<isize> = const { Cell::new(0) };
        }

        fn add(d: isize) {
            let _ = NOW.try_with(|n| {
                n.set(n.get() + d);
                let _ = PEAK.try_with(|p| p.set(p.get().max(n.get())));
            });
        }

        /// The most this thread held since the last call, above what it held then.
        pub fn peak_since(start: &mut Option<isize>) -> isize {
            let now = NOW.with(Cell::get);
            match start.replace(now) {
                None => {
                    PEAK.with(|p| p.set(now));
                    0
                }
                Some(s) => PEAK.with(Cell::get) - s,
            }
        }

        struct Counting;

        // SAFETY: every call goes to `System` with the caller's arguments unchanged; the
        // counting touches only const-initialised thread-locals (no allocation in them).
        unsafe impl GlobalAlloc for Counting {
            unsafe fn alloc(&self, l: Layout) -> *mut u8 {
                // SAFETY: the caller's contract, passed on.
                let p = unsafe { System.alloc(l) };
                if !p.is_null() {
                    add(l.size() as isize);
                }
                p
            }
            unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
                // SAFETY: the caller's contract, passed on.
                let p = unsafe { System.alloc_zeroed(l) };
                if !p.is_null() {
                    add(l.size() as isize);
                }
                p
            }
            unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
                // SAFETY: the caller's contract, passed on.
                unsafe { System.dealloc(p, l) };
                add(-(l.size() as isize));
            }
            unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
                // SAFETY: the caller's contract, passed on.
                let q = unsafe { System.realloc(p, l, new) };
                if !q.is_null() {
                    add(new as isize - l.size() as isize);
                }
                q
            }
        }

        #[global_allocator]
        static COUNTING: Counting = Counting;
    }

    /// `flux harvest --check --witness reference` on one SymPy module got the agent killed for
    /// memory: the witness read the reference's whole output into memory (up to 4 GiB, refused
    /// past it), then parsed it, then serialised the trace into memory again for its digest.
    /// Now a record at a time: reading ~80 MiB of output (records padded with blanks, as
    /// JSON allows) holds the events it makes, not the text.
    #[test]
    fn the_reference_output_is_read_one_record_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let pad = " ".repeat(4096);
        let mut text = String::from("[\"hello\",1,9,\"3.11.2\"]\n");
        text.push_str("[\"C\",1,\"/p/m.py\",\"f\",\"f\",10,1]\n[\"ts\",5,\"t::a\"]\n");
        for fid in 1..=10_000 {
            text.push_str(&format!("[\"c\",5,1,{fid},10,\"fresh\"{pad}]\n"));
            text.push_str(&format!(
                "[\"r\",5,{fid},11,\"return\",null,null,null{pad}]\n"
            ));
        }
        text.push_str("[\"te\",5,\"t::a\",\"passed\"]\n[\"end\",20003]\n");
        std::fs::write(dir.path().join("reference-9.jsonl"), &text).unwrap();
        let size = text.len() as isize;
        drop(text);
        let mut start = None;
        held::peak_since(&mut start);
        let t = read_output(dir.path(), 20_000_000).unwrap();
        let peak = held::peak_since(&mut start);
        assert!(t.meta.complete, "{:?}", t.meta.problems);
        assert_eq!(t.events.len(), 20_002);
        assert!(
            peak < size / 4,
            "reading {size} bytes of output held {peak} bytes at its peak"
        );
    }
}
