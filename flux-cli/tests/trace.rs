//! `flux trace` end to end: the real binary, the real kernel, real interpreters.
//!
//! Expected sequences below were worked out by hand from the programs in `tests/programs/`
//! (comments say how); they are what CPython's probes must report, not what flux happened to
//! print once.
//!
//! Needs root, a uprobe-capable kernel, Debian's `/usr/bin/python3.11` (bookworm, with USDT) and
//! for the 3.15 cases a sid root filesystem with python3.15 (`FLUX_SID_ROOTFS`, default
//! `/var/cache/flux/rootfs/sid-py315`, made by `cargo xtask images`). Where one is missing the
//! test says `skipping: …` loudly and returns; CI has all of them.

use crate::common::{
    config_for, run_flux, sid_root, skip, tempdir, trace_with, witness_view, Traced, PY311,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

fn skip311(what: &str) -> bool {
    if skip(what) {
        return true;
    }
    if !Path::new(PY311).exists() {
        return flux_skip::skip(
            what,
            &format!("{PY311} (Debian bookworm python3.11 with USDT) is missing"),
        );
    }
    false
}

/// `skip311`, and pytest must be importable by it.
fn skip311_pytest(what: &str) -> bool {
    if skip311(what) {
        return true;
    }
    let has_pytest = Command::new(PY311)
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_pytest {
        return flux_skip::skip(
            what,
            &format!("pytest is not importable by {PY311} (apt-get install python3-pytest)"),
        );
    }
    false
}

fn skip315(what: &str) -> bool {
    if skip(what) {
        return true;
    }
    if !sid_root().join("usr/bin/python3.15").exists() {
        return flux_skip::skip(
            what,
            &format!(
                "no sid rootfs with python3.15 at {} (run `cargo xtask images`)",
                sid_root().display()
            ),
        );
    }
    false
}

fn trace311(program: &str, args: &[&str]) -> Traced {
    let p = programs().join(program);
    let mut cmd = vec![PY311, p.to_str().unwrap()];
    cmd.extend_from_slice(args);
    trace_with(&["--no-hook"], &cmd)
}

/// Run a program with sid's python3.15 by chroot-ing into the rootfs.
fn trace315(program: &str) -> (Traced, String) {
    let root = sid_root();
    let inside = format!("/tmp/flux-test-{}-{program}", std::process::id());
    std::fs::copy(
        programs().join(program),
        root.join(inside.trim_start_matches('/')),
    )
    .unwrap();
    let py = root.join("usr/bin/python3.15");
    let t = trace_with(
        &["--no-hook", "--python", py.to_str().unwrap()],
        &[
            "chroot",
            root.to_str().unwrap(),
            "/usr/bin/python3.15",
            &inside,
        ],
    );
    let _ = std::fs::remove_file(root.join(inside.trim_start_matches('/')));
    (t, inside)
}

/// (ev, func, line) of the events whose file is `file`, in order.
fn seq(events: &[Value], file: &str) -> Vec<(String, String, u64)> {
    events
        .iter()
        .filter(|e| e["file"] == file)
        .map(|e| {
            (
                e["ev"].as_str().unwrap().to_string(),
                e["func"].as_str().unwrap().to_string(),
                e["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn only(s: &[(String, String, u64)], ev: &str) -> Vec<(String, u64)> {
    s.iter()
        .filter(|(e, _, _)| e == ev)
        .map(|(_, f, l)| (f.clone(), *l))
        .collect()
}

fn owned(v: &[(&str, u64)]) -> Vec<(String, u64)> {
    v.iter().map(|(f, l)| (f.to_string(), *l)).collect()
}

fn stderr(t: &Traced) -> String {
    t.stderr()
}

/// Every frame exit of basics.py, by hand: fact(5) returns at `return 1` (line 3) once and at
/// `return n * fact(n - 1)` (line 4) four times; gen(3) suspends at `yield` (line 8) three
/// times and returns when the `for` (line 7) is exhausted; boom leaves by exception at its
/// `raise` (line 11); catcher returns at line 17; the module ends at its last line (21).
const BASICS_RETURNS: &[(&str, u64)] = &[
    ("fact", 3),
    ("fact", 4),
    ("fact", 4),
    ("fact", 4),
    ("fact", 4),
    ("gen", 8),
    ("gen", 8),
    ("gen", 8),
    ("gen", 7),
    ("boom", 11),
    ("catcher", 17),
    ("<module>", 21),
];

#[test]
fn python311_returns_and_lines_of_recursion_generators_and_exceptions() {
    if skip311("python311_returns_and_lines") {
        return;
    }
    let t = trace311("basics.py", &[]);
    assert!(t.out.status.success(), "flux failed: {}", stderr(&t));
    let file = programs().join("basics.py");
    let s = seq(&t.events, file.to_str().unwrap());
    assert_eq!(only(&s, "return"), owned(BASICS_RETURNS), "{}", stderr(&t));
    // 3.11's entry probe is not attached (unreliable), so there are no USDT calls at all.
    assert!(t.events.iter().all(|e| e["ev"] != "call"));
    // Lines of fact(5): the `if` (2) then the recursive return (4) for n = 5..2, then 2 and 3.
    let fact_lines: Vec<u64> = s
        .iter()
        .filter(|(e, f, _)| e == "line" && f == "fact")
        .map(|(_, _, l)| *l)
        .collect();
    assert_eq!(fact_lines, vec![2, 4, 2, 4, 2, 4, 2, 4, 2, 3]);
    // catcher: try (14), call (15), except (16), return (17); boom: raise (11).
    let lines: Vec<(String, u64)> = only(&s, "line")
        .into_iter()
        .filter(|(f, _)| f == "catcher" || f == "boom")
        .collect();
    assert_eq!(
        lines,
        owned(&[
            ("catcher", 14),
            ("catcher", 15),
            ("boom", 11),
            ("catcher", 16),
            ("catcher", 17)
        ])
    );
    for e in &t.events {
        assert_eq!(e["src"], "usdt");
        assert_eq!(
            e["pid"], 1,
            "the traced command is PID 1 of its own namespace"
        );
        assert!(e["ts"].as_u64().unwrap() > 0);
    }
    assert!(stderr(&t).contains(" 0 lost"), "{}", stderr(&t));
}

#[test]
fn python311_threads_have_their_own_tids_and_sequences() {
    if skip311("python311_threads") {
        return;
    }
    let t = trace311("threads.py", &[]);
    assert!(t.out.status.success(), "{}", stderr(&t));
    let file = programs().join("threads.py");
    let file = file.to_str().unwrap();
    let work: Vec<&Value> = t
        .events
        .iter()
        .filter(|e| e["file"] == file && e["func"] == "work")
        .collect();
    let mut tids: Vec<u64> = work.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
    tids.dedup();
    tids.sort();
    tids.dedup();
    assert_eq!(tids.len(), 2, "two worker threads: {tids:?}");
    assert!(!tids.contains(&1), "workers are not the main thread");
    let mut per_thread: Vec<Vec<(String, u64)>> = tids
        .iter()
        .map(|tid| {
            work.iter()
                .filter(|e| e["tid"].as_u64() == Some(*tid))
                .map(|e| {
                    (
                        e["ev"].as_str().unwrap().to_string(),
                        e["line"].as_u64().unwrap(),
                    )
                })
                .collect()
        })
        .collect();
    per_thread.sort_by_key(|v| v.len());
    // work(3): total=0 (5), then for/body (6,7) x3, the exhausted for (6), return (8).
    let mut w3: Vec<(String, u64)> = vec![("line".into(), 5)];
    for _ in 0..3 {
        w3.push(("line".into(), 6));
        w3.push(("line".into(), 7));
    }
    w3.push(("line".into(), 6));
    w3.push(("line".into(), 8));
    w3.push(("return".into(), 8));
    let mut w4: Vec<(String, u64)> = vec![("line".into(), 5)];
    for _ in 0..4 {
        w4.push(("line".into(), 6));
        w4.push(("line".into(), 7));
    }
    w4.push(("line".into(), 6));
    w4.push(("line".into(), 8));
    w4.push(("return".into(), 8));
    assert_eq!(per_thread, vec![w3, w4]);
}

#[test]
fn python311_classes_methods_and_properties() {
    if skip311("python311_classes") {
        return;
    }
    let t = trace311("classes.py", &[]);
    assert!(t.out.status.success(), "{}", stderr(&t));
    let file = programs().join("classes.py");
    let s = seq(&t.events, file.to_str().unwrap());
    // The class body runs once and returns after its last statement, the decorated `size`,
    // whose statement line is the `def` line (10) since Python 3.8 (decorators have their own
    // lines); then __init__ (3), add (7) twice, the property getter (11), the module (16).
    assert_eq!(
        only(&s, "return"),
        owned(&[
            ("Acc", 10),
            ("__init__", 3),
            ("add", 7),
            ("add", 7),
            ("size", 11),
            ("<module>", 16)
        ])
    );
}

#[test]
fn another_python_on_the_same_binary_produces_no_events() {
    if skip311("filtering") {
        return;
    }
    // An untraced python3.11 spinning on the host during the whole traced run: its probes fire
    // (the uprobe is on the inode), but the PID-namespace filter must drop every one. It spins
    // until killed: the traced run may wait its turn (`flux_agent::turns`) behind the runs of
    // other tests with other probes for longer than any fixed time (it waited past 20 s in CI).
    let spin = programs().join("spin.py");
    let mut other = Command::new(PY311)
        .arg(&spin)
        .arg("3600")
        .spawn()
        .expect("spawn the other python");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let t = trace311("basics.py", &[]);
    let _ = other.kill();
    let _ = other.wait();
    assert!(t.out.status.success(), "{}", stderr(&t));
    assert!(!t.events.is_empty());
    let spin = spin.to_str().unwrap();
    assert!(
        t.events.iter().all(|e| e["file"] != spin),
        "events leaked from the untraced process"
    );
    assert!(t.events.iter().all(|e| e["pid"] == 1));
    let err = stderr(&t);
    let filtered: u64 = err
        .lines()
        .find_map(|l| l.split("filtered out ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        filtered > 0,
        "the other python's hits must have been seen and dropped: {err}"
    );
}

#[test]
fn python315_calls_and_returns_match() {
    if skip315("python315_calls_and_returns") {
        return;
    }
    let (t, inside) = trace315("basics.py");
    assert!(t.out.status.success(), "{}", stderr(&t));
    let s = seq(&t.events, &inside);
    assert_eq!(only(&s, "return"), owned(BASICS_RETURNS), "{}", stderr(&t));
    // Entries report the def line: module (0), fact x5 (1); gen fires once when the generator
    // is created (6) and on every resumption: first at its def line (6), then after each
    // yield (8); catcher (13); boom (10).
    assert_eq!(
        only(&s, "call"),
        owned(&[
            ("<module>", 0),
            ("fact", 1),
            ("fact", 1),
            ("fact", 1),
            ("fact", 1),
            ("fact", 1),
            ("gen", 6),
            ("gen", 6),
            ("gen", 8),
            ("gen", 8),
            ("gen", 8),
            ("catcher", 13),
            ("boom", 10),
        ])
    );
    assert!(
        s.iter().all(|(e, _, _)| e != "line"),
        "3.15 has no line probe"
    );
    assert!(stderr(&t).contains(" 0 lost"), "{}", stderr(&t));
}

#[test]
fn perfetto_output_is_trace_event_json() {
    if skip311("perfetto") {
        return;
    }
    let dir = tempdir();
    let out = dir.join("t.json");
    let p = programs().join("classes.py");
    let o = run_flux(&[
        "trace",
        "--no-hook",
        "--format",
        "perfetto",
        "--out",
        out.to_str().unwrap(),
        "--",
        PY311,
        p.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let evs = doc["traceEvents"].as_array().unwrap();
    assert!(evs
        .iter()
        .any(|e| e["ph"] == "E" && e["name"] == "__init__"));
    assert!(evs
        .iter()
        .all(|e| e["ts"].is_number() && e["pid"].is_number()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exit_status_is_the_commands() {
    if skip311("exit_status") {
        return;
    }
    let t = trace_with(&["--no-hook"], &[PY311, "-c", "import sys; sys.exit(7)"]);
    assert_eq!(t.out.status.code(), Some(7), "{}", stderr(&t));
    let t = trace_with(&[], &["/definitely/not/here"]);
    assert_eq!(t.out.status.code(), Some(2));
    assert!(stderr(&t).contains("not found"), "{}", stderr(&t));
}

#[test]
fn probes_reports_what_each_interpreter_can_do() {
    if !Path::new(PY311).exists() {
        flux_skip::skip("probes_reports", &format!("{PY311} missing"));
        return;
    }
    let o = run_flux(&["probes", PY311]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("python:function__return"), "{text}");
    assert!(
        text.contains("calls (entries): hook (probe present but unreliable"),
        "{text}"
    );
    assert!(text.contains("lines:           usdt"), "{text}");
    let py315 = sid_root().join("usr/bin/python3.15");
    if py315.exists() {
        let o = run_flux(&[
            "probes",
            py315.to_str().unwrap(),
            "--root",
            sid_root().to_str().unwrap(),
        ]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("CPython 3.15."), "{text}");
        assert!(text.contains("calls (entries): usdt"), "{text}");
        assert!(text.contains("lines:           hook (no probe)"), "{text}");
    }
}

#[test]
fn python311_merged_trace_has_an_entry_for_every_frame_and_matches_the_hook_witness() {
    if skip311("python311_merged") {
        return;
    }
    let dir = tempdir();
    let prog = programs().join("basics.py");
    let cfg = config_for(&dir, "basics.py");
    let (p, c) = (prog.to_str().unwrap(), cfg.to_str().unwrap());
    let merged = trace_with(&["--calls", "usdt", "--config", c], &[PY311, p]);
    assert!(merged.out.status.success(), "{}", stderr(&merged));
    let hook = trace_with(&["--calls", "hook", "--config", c], &[PY311, p]);
    assert!(hook.out.status.success(), "{}", stderr(&hook));
    let file = p;
    let calls: Vec<&Value> = merged
        .events
        .iter()
        .filter(|e| e["file"] == file && e["ev"] == "call")
        .collect();
    let rets: Vec<&Value> = merged
        .events
        .iter()
        .filter(|e| e["file"] == file && e["ev"] == "return")
        .collect();
    // 12 activations: module 1 + fact 5 + gen 4 (first run + 3 resumptions) + catcher 1 + boom 1.
    assert_eq!(calls.len(), 12, "{calls:?}");
    assert_eq!(rets.len(), calls.len());
    for r in &rets {
        assert!(
            calls.iter().any(|c| c["activation"] == r["activation"]),
            "return without entry: {r}"
        );
        assert_eq!(r["src"], "usdt", "3.11 returns come from USDT");
    }
    assert!(
        calls.iter().all(|c| c["src"] == "hook"),
        "3.11 entries come from the hook"
    );
    // fact(5) returns 120 at its outermost activation: the value comes from the hook.
    assert!(rets
        .iter()
        .any(|r| r["func"] == "fact" && r["value"]["repr"] == "120"));
    assert_eq!(
        witness_view(&merged.events, file),
        witness_view(&hook.events, file)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn python315_merged_trace_takes_calls_from_usdt_and_lines_from_the_hook() {
    if skip315("python315_merged") {
        return;
    }
    let root = sid_root();
    let dir = tempdir();
    let inside = format!("/tmp/flux-test-{}-merged.py", std::process::id());
    let host_copy = root.join(inside.trim_start_matches('/'));
    std::fs::copy(programs().join("basics.py"), &host_copy).unwrap();
    // Targets match at a path-component boundary: name the whole file.
    let cfg = config_for(&dir, inside.rsplit('/').next().unwrap());
    let py = root.join("usr/bin/python3.15");
    let run = |calls: &str| {
        trace_with(
            &[
                "--calls",
                calls,
                "--config",
                cfg.to_str().unwrap(),
                "--root",
                root.to_str().unwrap(),
                "--python",
                py.to_str().unwrap(),
            ],
            &[
                "chroot",
                root.to_str().unwrap(),
                "/usr/bin/python3.15",
                &inside,
            ],
        )
    };
    let merged = run("usdt");
    let hook = run("hook");
    let _ = std::fs::remove_file(&host_copy);
    assert!(merged.out.status.success(), "{}", stderr(&merged));
    assert!(hook.out.status.success(), "{}", stderr(&hook));
    let mine: Vec<&Value> = merged
        .events
        .iter()
        .filter(|e| e["file"] == inside.as_str())
        .collect();
    for e in &mine {
        match e["ev"].as_str().unwrap() {
            "call" if e["func"] == "gen" => {
                assert_eq!(e["src"], "hook", "generator starts come from the hook")
            }
            "call" | "return" => assert_eq!(e["src"], "usdt", "{e}"),
            "line" => assert_eq!(e["src"], "hook", "{e}"),
            _ => {}
        }
    }
    assert!(mine
        .iter()
        .any(|e| e["ev"] == "line" && e["locals"].is_array()));
    let ts: Vec<u64> = merged
        .events
        .iter()
        .map(|e| e["ts"].as_u64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "merged in time order");
    assert_eq!(
        witness_view(&merged.events, &inside),
        witness_view(&hook.events, &inside)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `flux:   <counter> <n>` line of the summary flux trace prints.
fn summary_count(t: &Traced, counter: &str) -> u64 {
    stderr(t)
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("flux:") && w.next() == Some(counter))
                .then(|| w.next()?.parse().ok())?
        })
        .unwrap_or(0)
}

/// `scope = "tests"`: only what runs inside pytest's test protocols is traced, and the probes
/// are off outside them (their semaphores zeroed by the hook), so collection costs no trap:
/// what USDT still reports outside the windows is the start-up before the hook is installed,
/// as in an unscoped run. Both witnesses agree on what the windows hold.
#[test]
fn python311_scope_tests_traces_only_test_windows_with_the_probes_off_outside() {
    if skip311_pytest("python311_scope_tests") {
        return;
    }
    let dir = tempdir();
    let test = dir.join("test_scoped.py");
    std::fs::write(
        &test,
        "def helper(n):\n    return n * 2\n\nAT_IMPORT = [helper(i) for i in range(50)]\n\n\
def test_one():\n    assert helper(1) == 2\n\n\
def test_two():\n    for i in range(3):\n        helper(i)\n",
    )
    .unwrap();
    let scoped = dir.join("scoped.toml");
    std::fs::write(&scoped, "files = [\"test_scoped.py\"]\nscope = \"tests\"\n").unwrap();
    let whole = dir.join("whole.toml");
    std::fs::write(&whole, "files = [\"test_scoped.py\"]\n").unwrap();
    let t = test.to_str().unwrap();
    let cmd = [PY311, "-m", "pytest", "-q", "-p", "no:cacheprovider", t];
    let run = |calls: &str, cfg: &Path| {
        trace_with(&["--calls", calls, "--config", cfg.to_str().unwrap()], &cmd)
    };
    let s = run("usdt", &scoped);
    assert!(s.out.status.success(), "{}", stderr(&s));
    let calls: Vec<&str> = s
        .events
        .iter()
        .filter(|e| e["file"] == t && e["ev"] == "call")
        .map(|e| e["func"].as_str().unwrap())
        .collect();
    assert_eq!(
        calls,
        ["test_one", "helper", "test_two", "helper", "helper", "helper"],
        "nothing of the collection"
    );
    for e in s.events.iter().filter(|e| e["file"] == t) {
        // (The node id's directory part depends on pytest's rootdir, i.e. where this runs.)
        assert!(
            e["test"]
                .as_str()
                .is_some_and(|x| x.contains("test_scoped.py::test_")),
            "outside a test: {e}"
        );
    }
    let w = run("usdt", &whole);
    assert!(w.out.status.success(), "{}", stderr(&w));
    let startup = summary_count(&w, "merge.usdt_events_before_hook_install");
    let outside = summary_count(&s, "merge.events_outside_test_windows");
    assert!(startup > 0 && outside > 0, "{}\n{}", stderr(&w), stderr(&s));
    assert!(
        outside <= 2 * startup,
        "{outside} USDT events outside the windows, {startup} at start-up: the probes fired during collection\n{}",
        stderr(&s)
    );
    assert!(
        s.events.len() * 5 < w.events.len(),
        "{} events scoped, {} whole",
        s.events.len(),
        w.events.len()
    );
    let h = run("hook", &scoped);
    assert!(h.out.status.success(), "{}", stderr(&h));
    assert_eq!(witness_view(&s.events, t), witness_view(&h.events, t));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `scope = "targets"`: inside tests, only the extents of targeted code are traced (the target
/// and everything it calls); the probes are on only there. Both witnesses agree on what the
/// extents hold, and calls of the same helper outside the target are not in the trace.
#[test]
fn python311_scope_targets_traces_only_inside_targeted_code() {
    if skip311_pytest("python311_scope_targets") {
        return;
    }
    let dir = tempdir();
    let test = dir.join("test_targets.py");
    std::fs::write(
        &test,
        "def helper(n):\n    return n * 2\n\n\
def target(n):\n    if n > 1:\n        target(n - 1)\n    return helper(n) + sum(helper(i) for i in range(2))\n\n\
AT_IMPORT = target(3)\n\n\
def test_one():\n    for i in range(20):\n        helper(i)\n    assert target(2) == 6\n\n\
def test_two():\n    assert helper(3) == 6\n",
    )
    .unwrap();
    let cfg = dir.join("targets.toml");
    std::fs::write(
        &cfg,
        "files = [\"test_targets.py\"]\nfunctions = [\"target\"]\nscope = \"targets\"\n",
    )
    .unwrap();
    let t = test.to_str().unwrap();
    let cmd = [PY311, "-m", "pytest", "-q", "-p", "no:cacheprovider", t];
    let run =
        |calls: &str| trace_with(&["--calls", calls, "--config", cfg.to_str().unwrap()], &cmd);
    let s = run("usdt");
    assert!(s.out.status.success(), "{}", stderr(&s));
    let calls: Vec<&str> = s
        .events
        .iter()
        .filter(|e| e["file"] == t && e["ev"] == "call")
        .map(|e| e["func"].as_str().unwrap())
        .collect();
    // target(2) -> target(1): helper(1), then sum() resumes the generator three times (two
    // yields, each after a helper call, then its end); back in target(2) the same again. Not
    // the 20 helper calls of test_one's loop, nor test_two's, nor anything at import.
    let g = [
        "helper",
        "<genexpr>",
        "helper",
        "<genexpr>",
        "helper",
        "<genexpr>",
    ];
    let want: Vec<&str> = ["target", "target"].into_iter().chain(g).chain(g).collect();
    assert_eq!(calls, want, "{}", stderr(&s));
    let depth0: Vec<&Value> = s
        .events
        .iter()
        .filter(|e| e["ev"] == "call" && e["depth"] == 0)
        .collect();
    assert!(
        depth0.iter().all(|e| e["func"] == "target"),
        "only the target at the extent's root: {depth0:?}"
    );
    for e in s.events.iter().filter(|e| e["file"] == t) {
        assert!(
            e["test"]
                .as_str()
                .is_some_and(|x| x.ends_with("test_targets.py::test_one")),
            "{e}"
        );
    }
    // USDT returns came from inside the extents only.
    assert!(
        s.events
            .iter()
            .any(|e| e["src"] == "usdt" && e["ev"] == "return"),
        "{}",
        stderr(&s)
    );
    let h = run("hook");
    assert!(h.out.status.success(), "{}", stderr(&h));
    assert_eq!(witness_view(&s.events, t), witness_view(&h.events, t));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program that makes more events than the budget is stopped, and the trace says why
/// (incomplete: exit 3) instead of the agent holding events until the machine runs out of memory.
#[test]
fn a_program_over_the_event_budget_is_stopped_and_the_trace_is_incomplete() {
    if skip311("event_budget") {
        return;
    }
    let dir = tempdir();
    let prog = dir.join("forever.py");
    std::fs::write(&prog, "import time\ndef f():\n    return 1\nt = time.time()\nwhile time.time() - t < 120:\n    f()\n").unwrap();
    let t0 = std::time::Instant::now();
    let t = trace_with(
        &["--calls", "usdt", "--max-events", "50000"],
        &[PY311, prog.to_str().unwrap()],
    );
    assert!(
        t0.elapsed().as_secs() < 60,
        "not stopped: {:?}",
        t0.elapsed()
    );
    assert_eq!(t.out.status.code(), Some(3), "{}", stderr(&t));
    assert!(
        stderr(&t).contains("over the event budget"),
        "{}",
        stderr(&t)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// 17.4: a run must take the same path every time. A program drawing from a `random.Random()`
/// of its own (SymPy's assumption shuffle), the `random` module, and iterating a set of objects
/// hashed by identity (their addresses: SymPy's multiple dispatch) made other calls at each run;
/// the hook seeds the generators and the launcher turns address randomisation off.
///
/// It failed in CI in 2 of 7 runs on 2026-12-06 and never alone. Writing the trace beside the
/// program was one cause (fixed in `trace_det`); the other was the tests beside it: their
/// agents attached the `line` probe to the same python3.11, which raised its semaphore in this
/// program too, and 3.11 runs deoptimised while it is up (shown by hand: 5 of 10 runs of det.py
/// iterated the set in another order beside an agent with `line`). Runs with other probes now
/// take turns (`flux_agent::turns`; the test below).
#[test]
fn python311_two_runs_of_a_program_make_the_same_calls() {
    if skip311("python311_two_runs_of_a_program_make_the_same_calls") {
        return;
    }
    let dir = tempdir();
    let first = trace_det(&dir, None);
    for _ in 0..3 {
        if let Some(d) = flux_trace::compare::call_divergence(&first, &trace_det(&dir, None)) {
            panic!("two runs of det.py made other calls: {d}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The agent's PID was in the name of the run directory the program sees (the hook's socket
/// and `PYTHONPATH`) at its natural width: runs under a 4-digit and a 5-digit PID moved the
/// program's heap, and det.py iterated its set in another order. `pid_max` is 32,768 on these
/// machines, so a test suite crosses that width often: the flake of the test above.
#[test]
fn python311_the_agents_pid_width_does_not_change_the_programs_calls() {
    let what = "python311_the_agents_pid_width_does_not_change_the_programs_calls";
    if skip311(what) {
        return;
    }
    if std::fs::write(NS_LAST_PID, "9000").is_err() {
        flux_skip::skip(what, &format!("{NS_LAST_PID} is not writable (needs root)"));
        return;
    }
    let dir = tempdir();
    let four = trace_det(&dir, Some(9_990));
    let five = trace_det(&dir, Some(20_000));
    if let Some(d) = flux_trace::compare::call_divergence(&four, &five) {
        panic!("det.py made other calls under agents of PIDs 9990 and 20000: {d}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CI flake of the test above: an agent attaches its probes for every process that maps
/// the interpreter, so a run beside this one with the `line` probe raised the line semaphore in
/// this run's program, which then ran otherwise (3.11 deoptimises every instruction). Runs of
/// one interpreter with other probes take turns: the second agent waits, and the first
/// program's line semaphore stays 0 (1 before).
#[test]
fn python311_a_run_with_other_probes_beside_it_leaves_its_semaphores_alone() {
    let what = "python311_a_run_with_other_probes_beside_it_leaves_its_semaphores_alone";
    if skip311(what) {
        return;
    }
    let Some((interp, line)) = line_probe_of_311(what) else {
        return;
    };
    let file = interp.probes.path.file_name().unwrap().to_str().unwrap();
    let dir = tempdir();
    let at = |n: &str| dir.join(n).to_str().unwrap().to_string();
    std::fs::write(dir.join("p.py"), SEMAPHORE_PY).unwrap();
    std::fs::write(dir.join("q.py"), WAIT_PY).unwrap();
    let mut a = Command::new(env!("CARGO_BIN_EXE_flux"));
    a.args(["trace", "--out", &at("a.jsonl"), "--", PY311, &at("p.py")])
        .args([
            file,
            &format!("{:x}", line.semaphore_offset),
            &at("p-ready"),
            &at("go"),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let a = a.spawn().unwrap();
    wait_for(
        || dir.join("p-ready").exists(),
        "the first program to start",
    );
    let b_err = std::fs::File::create(dir.join("b.err")).unwrap();
    let mut b = Command::new(env!("CARGO_BIN_EXE_flux"));
    b.args([
        "trace",
        "--no-hook",
        "--out",
        &at("b.jsonl"),
        "--",
        PY311,
        &at("q.py"),
    ])
    .args([&at("q-ran"), &at("q-go")])
    .stdout(std::process::Stdio::null())
    .stderr(b_err);
    let b = b.spawn().unwrap();
    let b_waits = || {
        std::fs::read_to_string(dir.join("b.err"))
            .unwrap_or_default()
            .contains("waiting for other runs")
    };
    wait_for(
        || b_waits() || dir.join("q-ran").exists(),
        "the second agent to wait or its program to start",
    );
    std::fs::write(dir.join("go"), "").unwrap();
    let out = a.wait_with_output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    std::fs::write(dir.join("q-go"), "").unwrap();
    let b = b.wait_with_output().unwrap();
    assert!(b.status.success() && dir.join("q-ran").exists());
    assert!(
        said.contains("line semaphore 0"),
        "the first program saw the second run's line probe: {said}"
    );
    assert!(b_waits(), "the second agent did not wait its turn");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tracer that is not flux takes no turn: a uprobe on python3.11's `line` probe opened by
/// another tool (here a bare perf event with the semaphore's offset, as perf or bpftrace open
/// one) raised the line semaphore in the traced program, which then ran deoptimised, and the
/// trace was complete. The hook watches the semaphores of the probes its run did not attach:
/// the trace is incomplete and says which probe.
#[test]
fn python311_another_tracers_probe_in_the_program_makes_the_trace_incomplete() {
    let what = "python311_another_tracers_probe_in_the_program_makes_the_trace_incomplete";
    if skip311(what) {
        return;
    }
    let Some((interp, line)) = line_probe_of_311(what) else {
        return;
    };
    let dir = tempdir();
    let at = |n: &str| dir.join(n).to_str().unwrap().to_string();
    std::fs::write(dir.join("p.py"), WAIT_PY).unwrap();
    let mut a = Command::new(env!("CARGO_BIN_EXE_flux"));
    a.args(["trace", "--out", &at("t.jsonl"), "--", PY311, &at("p.py")])
        .args([&at("p-ready"), &at("go")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let a = a.spawn().unwrap();
    wait_for(|| dir.join("p-ready").exists(), "the program to start");
    let pid = process_running(a.id(), "p.py").expect("the traced program's process");
    // What another tool's probe does to the process, for it only (the other tests' programs
    // must not see it): a uprobe with the semaphore's offset, no BPF program.
    let pmu = flux_agent::attach::UprobePmu::detect().unwrap();
    let path = &interp.probes.path;
    let foreign =
        flux_agent::attach::open_uprobe(&pmu, path, line.offset, line.semaphore_offset, Some(pid))
            .unwrap();
    std::fs::write(dir.join("go"), "").unwrap();
    let out = a.wait_with_output().unwrap();
    drop(foreign);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("another tracer attached the interpreter's line probe"),
        "{err}"
    );
    assert!(err.contains("the trace is incomplete"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The python3.11 process under `root` (itself or a descendant) whose command line holds
/// `word`.
fn process_running(root: u32, word: &str) -> Option<u32> {
    let cmdline = std::fs::read(format!("/proc/{root}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if args.first().is_some_and(|a| a == PY311) && args.iter().any(|a| a.contains(word)) {
        return Some(root);
    }
    let tasks = std::fs::read_dir(format!("/proc/{root}/task")).ok()?;
    for t in tasks.flatten() {
        let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for k in kids.split_whitespace().filter_map(|k| k.parse().ok()) {
            if let Some(p) = process_running(k, word) {
                return Some(p);
            }
        }
    }
    None
}

/// python3.11's probes and its `line` probe, which has a semaphore (else the test `what` is
/// skipped, saying so).
fn line_probe_of_311(
    what: &str,
) -> Option<(flux_agent::interp::Interpreter, flux_agent::usdt::Site)> {
    let interp =
        flux_agent::interp::Interpreter::inspect(Path::new(PY311), Path::new("/")).unwrap();
    let line = interp.probes.sites.iter().find(|s| s.name == "line");
    match line.filter(|s| s.semaphore_offset != 0) {
        Some(l) => Some((interp.clone(), l.clone())),
        None => {
            flux_skip::skip(what, &format!("{PY311} has no line probe with a semaphore"));
            None
        }
    }
}

/// Poll `ready` for up to a minute.
fn wait_for(ready: impl Fn() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Says it started, waits for `go`, then prints the line probe's semaphore in its own process
/// (found as flux-hook finds its semaphores: the file's writable mapping in /proc/self/maps).
const SEMAPHORE_PY: &str = r#"import ctypes, os, sys, time
name, off, ready, go = sys.argv[1], int(sys.argv[2], 16), sys.argv[3], sys.argv[4]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.01)
for m in open("/proc/self/maps"):
    p = m.split(None, 5)
    if len(p) == 6 and "w" in p[1] and os.path.basename(p[5].strip()) == name:
        lo, hi = (int(x, 16) for x in p[0].split("-"))
        if int(p[2], 16) <= off < int(p[2], 16) + hi - lo:
            v = ctypes.c_uint16.from_address(lo + off - int(p[2], 16)).value
            print("line semaphore", v, flush=True)
"#;

/// Says it ran, then waits for its second argument to exist.
const WAIT_PY: &str = r#"import os, sys, time
open(sys.argv[1], "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
"#;

const NS_LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";

/// A program whose calls depend on everything the determinism policy (17.4) fixes: a
/// `random.Random()` of its own (SymPy's assumption shuffle), the `random` module, and sets of
/// objects hashed by identity (their addresses: SymPy's multiple dispatch).
const DET_PY: &str = r#"import random

class A: pass
class B: pass
class C: pass
class D: pass

def a(): return 1
def b(): return 2
def c(): return 3
def d(): return 4

rng = random.Random()
fs = [a, b, c, d]
rng.shuffle(fs)
for f in fs:
    f()
random.choice(fs)()
for t in {A, B, C, D, type(a), type(rng)}:
    {A: a, B: b, C: c, D: d}.get(t, len)(*([] if t in (A, B, C, D) else [()]))

class O:
    def __init__(self, i):
        self.i = i

# Large enough for the set's order to depend on address bits above the page offset.
for o in set([O(i) for i in range(2000)]):
    fs[o.i % 4]()
"#;

/// `flux trace` of [`DET_PY`], by an agent of PID `pid` when given (the kernel gives the PID
/// after `ns_last_pid` to the next fork; a fork elsewhere may take it first, so try again).
///
/// The program's directory is an input like its source: Python lists `sys.path[0]` once (its
/// import cache, a set of the names there), so a file beside `det.py` moves its heap and the
/// order of the set it iterates. The trace was written beside it, so every run but the first saw
/// one name more (a cause of the flake of the two tests below, CI 2026-12-06, but not the only
/// one: see the first). The trace goes one level up.
fn trace_det(dir: &Path, pid: Option<u32>) -> flux_trace::Trace {
    let home = dir.join("det");
    std::fs::create_dir_all(&home).unwrap();
    let prog = home.join("det.py");
    std::fs::write(&prog, DET_PY).unwrap();
    let names: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["det.py"], "det.py's directory is one of its inputs");
    let out = dir.join("t.jsonl");
    let cmd = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_flux"));
        c.args(["trace", "--out", out.to_str().unwrap(), "--", PY311])
            .arg(&prog)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        c
    };
    let mut child = None;
    for _ in 0..200 {
        if let Some(want) = pid {
            std::fs::write(NS_LAST_PID, (want - 1).to_string()).unwrap();
        }
        let c = cmd().spawn().expect("run flux");
        if pid.is_none_or(|want| c.id() == want) {
            child = Some(c);
            break;
        }
        let mut c = c;
        let _ = c.kill();
        let _ = c.wait();
    }
    let o = child
        .unwrap_or_else(|| panic!("no agent of PID {pid:?} in 200 tries"))
        .wait_with_output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = std::io::BufReader::new(std::fs::File::open(&out).unwrap());
    flux_trace::Trace::read_jsonl(f, "t.jsonl").unwrap()
}

/// 17.13: the hook renders a targeted frame's locals at every line, and a local whose
/// `__repr__` runs Python code (here 200 frames: a linked list) made the probes fire for each
/// frame, at every line: events the agent drops, traps the program pays, and an event budget
/// spent on the hook's own work. In a single-threaded process the hook lowers the semaphores
/// while it renders: the local costs (almost) no USDT event more than an int would.
#[test]
fn python311_rendering_a_local_fires_no_probes() {
    if skip311("python311_rendering_a_local_fires_no_probes") {
        return;
    }
    rendering_a_local_fires_no_probes("");
}

/// The same in SWE-Flux's dialect (`flux import swe-flux`'s instances): their tracer's repr is
/// the full `repr()`, which the hook ran with the probes up, so fastapi's
/// `_get_openapi_operation_parameters` (pydantic models and JSON schemas in its locals, rendered
/// at every line) made 16.7 M USDT events of the hook's own work and did not finish in 600 s
/// (1.45 s untraced).
#[test]
fn python311_swe_flux_dialect_rendering_a_local_fires_no_probes() {
    if skip311("python311_swe_flux_dialect_rendering_a_local_fires_no_probes") {
        return;
    }
    rendering_a_local_fires_no_probes(r#", "dialect": "swe-flux""#);
}

/// Traces `loop` of a program whose local `v` is an int, then a 200-node chain whose
/// `__repr__` recurses in Python, with `extra` config keys: the chain must cost (almost) no
/// USDT event of the hook's own work more than the int.
fn rendering_a_local_fires_no_probes(extra: &str) {
    let dir = tempdir();
    let prog = |local: &str| {
        format!(
            r#"class Node:
    def __init__(self, nxt):
        self.nxt = nxt

    def __repr__(self):
        return "N" + (repr(self.nxt) if self.nxt is not None else "")


def chain(n):
    node = None
    for _ in range(n):
        node = Node(node)
    return node


def loop(n):
    v = {local}
    total = 0
    for i in range(n):
        total += i
    return total


print(loop(50))
"#
        )
    };
    let dropped = |name: &str, local: &str| -> u64 {
        let p = dir.join(name);
        std::fs::write(&p, prog(local)).unwrap();
        let cfg = dir.join(format!("{name}.json"));
        std::fs::write(
            &cfg,
            format!(r#"{{"files": ["{name}"], "functions": ["loop"]{extra}}}"#),
        )
        .unwrap();
        let stats = dir.join(format!("{name}.stats"));
        let out = dir.join(format!("{name}.jsonl"));
        let o = run_flux(&[
            "trace",
            "--calls",
            "usdt",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--stats-json",
            stats.to_str().unwrap(),
            "--",
            PY311,
            p.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        s["counts"]["merge.usdt_events_of_hook_internals_dropped"]
            .as_u64()
            .unwrap_or(0)
    };
    // The same calls (chain's), the local an int.
    let plain = dropped("plain.py", "chain(200) and 0");
    let chained = dropped("chained.py", "chain(200)");
    // 53 line events, each rendering `v` (200 nested __repr__ frames) when it is rendered
    // visibly: ≥ 10,000 more events. (chain() itself fires its 200 calls' returns once.)
    assert!(
        chained < plain + 2000,
        "rendering the chain cost {} more USDT events than an int ({plain} vs {chained})",
        chained.saturating_sub(plain)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
