//! The harvest end to end: real Docker, the real kernel, the `flux/sympy:1.13.3-py3.11` image.
//!
//! Instances are made in temp dirs. Expected answers were worked out by hand from sympy
//! 1.13.3's source (comments say how), not copied from a run.
//!
//! Needs root (eBPF), a uprobe-capable kernel, a Docker daemon and the image (`cargo xtask
//! images sympy`). Where one is missing the test says `skipping: …` and returns.

use crate::common::*;
use flux_harvest::Status;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

#[test]
fn harvests_ibin_then_check_reproduces_it_and_diffs_a_different_one() {
    if skip("harvests_ibin_then_check_reproduces_it_and_diffs_a_different_one") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = make(tmp.path(), &Inst::default());

    // 1. Harvest: oracle.json with the hand-derived answer and its provenance; callgraph.json.
    let r = run(&[tmp.path().to_path_buf()], &opts());
    assert_eq!(r.instances.len(), 1);
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Created, "{:?}", i.error);
    assert_eq!(i.name, "sympy/sympy-ibin-width-path");
    let oracle = read_json(&dir.join("oracle.json"));
    assert_eq!(oracle["oracle_answer"], expected_answer());
    assert_eq!(oracle["question_kind"], "S1_IntraProceduralCFG");
    assert_eq!(
        oracle["template_answer"],
        json!({"executed_path": [{"line": "int"}]})
    );
    let p = &oracle["provenance"];
    assert_eq!(p["image"], IMAGE);
    assert!(
        p["image_id"].as_str().unwrap().starts_with("sha256:"),
        "{p}"
    );
    assert_eq!(p["interpreter"], "3.11.2");
    assert_eq!(p["complete"], true);
    assert_eq!(p["labels"], json!([]));
    assert_eq!(p["trace_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(p["extractor"], "executed_path");
    let graph = read_json(&dir.join("callgraph.json"));
    let callees = graph["sympy.utilities.iterables.ibin"]
        .as_array()
        .expect("ibin in the call graph");
    assert!(
        callees
            .iter()
            .any(|c| c.as_str().unwrap().ends_with("as_int")),
        "ibin calls as_int: {graph}"
    );
    let run_dir = i.run_dir.clone().unwrap();
    assert!(run_dir.join("trace.jsonl").metadata().unwrap().len() > 0);
    assert!(run_dir.join("instance/test_ibin_width.py").is_file());
    assert!(
        !run_dir.join("instance/oracle.json").exists(),
        "gold files are not shown to the test"
    );

    // 2. --check from a clean container reproduces it, and writes nothing.
    let before = std::fs::read(dir.join("oracle.json")).unwrap();
    let mut o = opts();
    o.check = true;
    let r = run(std::slice::from_ref(&dir), &o);
    assert_eq!(
        r.instances[0].status,
        Status::Reproduced,
        "{:?}",
        r.instances[0].error
    );
    assert_eq!(std::fs::read(dir.join("oracle.json")).unwrap(), before);

    // 3. A stored answer that differs is not reproduced: the error shows where.
    let mut tampered = read_json(&dir.join("oracle.json"));
    tampered["oracle_answer"]["executed_path"][3]["line"] = json!(360);
    std::fs::write(
        dir.join("oracle.json"),
        serde_json::to_string_pretty(&tampered).unwrap(),
    )
    .unwrap();
    let r = run(std::slice::from_ref(&dir), &o);
    let err = r.instances[0].error.as_deref().unwrap_or("");
    assert_eq!(r.instances[0].status, Status::Failed);
    // 17.4: each file has its verdict; the call graph reproduced while the answer did not.
    assert!(
        err.starts_with(
            "instance sympy/sympy-ibin-width-path: --check: not reproduced \
             (oracle differs, call graph reproduced)\noracle: oracle_answer differs from "
        ),
        "{err}"
    );
    assert_eq!(r.instances[0].oracle, Some(flux_harvest::Verdict::Differs));
    assert_eq!(
        r.instances[0].call_graph,
        Some(flux_harvest::Verdict::Reproduced)
    );
    assert!(
        err.contains("at /executed_path/3/line: stored 360, harvested 361"),
        "{err}"
    );
    assert!(!r.ok());
}

#[test]
fn a_hanging_test_times_out_with_the_instance_named_and_no_container_left() {
    if skip("a_hanging_test_times_out_with_the_instance_named_and_no_container_left") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    make(
        tmp.path(),
        &Inst {
            id: "sympy-ibin-hangs",
            test_body: "    ibin(2, 4)\n    time.sleep(600)\n",
            timeout_s: 5,
            ..Inst::default()
        },
    );
    let t0 = std::time::Instant::now();
    let r = run(&[tmp.path().to_path_buf()], &opts());
    assert!(t0.elapsed().as_secs() < 300, "took {:?}", t0.elapsed());
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Failed);
    let err = i.error.as_deref().unwrap();
    assert!(
        err.starts_with("instance sympy/sympy-ibin-hangs: the test timed out after 5s"),
        "{err}"
    );
    assert!(!tmp
        .path()
        .join("sympy/sympy-ibin-hangs/oracle.json")
        .exists());
    let out = std::process::Command::new("docker")
        .args(["ps", "-a", "-q", "--filter", "label=flux.managed"])
        .args(["--filter", "label=flux.instance=sympy/sympy-ibin-hangs"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "",
        "containers left behind"
    );
}

#[test]
fn broken_instances_are_reported_and_the_others_still_harvested() {
    if skip("broken_instances_are_reported_and_the_others_still_harvested") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Sorted by directory: a-…, b-…, c-….
    make(
        tmp.path(),
        &Inst {
            id: "a-malformed",
            extra_top: "min_answer_sise = 3\n",
            ..Inst::default()
        },
    );
    make(
        tmp.path(),
        &Inst {
            id: "b-no-image",
            image: "flux/nosuchrepo:0.1-py3.11",
            ..Inst::default()
        },
    );
    let good = make(
        tmp.path(),
        &Inst {
            id: "c-good",
            ..Inst::default()
        },
    );
    // An instance whose stored oracle (and call graph) hold another answer: kept as they are.
    let conflict = make(
        tmp.path(),
        &Inst {
            id: "d-stored-differs",
            ..Inst::default()
        },
    );
    let stored_oracle = serde_json::to_string_pretty(&json!({
        "question_kind": "S1_IntraProceduralCFG",
        "question": "q",
        "template_answer": {"executed_path": [{"line": "int"}]},
        "oracle_answer": {"executed_path": [{"line": 354}, {"line": 355}]},
        "provenance": {"image": IMAGE, "interpreter": "3.11.2", "flux_version": "0.0.1",
            "trace_sha256": "0", "harvested_at": "2026-01-01T00:00:00Z", "complete": true,
            "extractor": "executed_path"}
    }))
    .unwrap();
    std::fs::write(conflict.join("oracle.json"), &stored_oracle).unwrap();
    let r = run(&[tmp.path().to_path_buf()], &opts());
    assert_eq!(r.instances.len(), 4);
    let [bad, noimg, ok, differs] = &r.instances[..] else {
        unreachable!()
    };

    assert_eq!(bad.status, Status::Failed);
    let err = bad.error.as_deref().unwrap();
    let file = tmp.path().join("sympy/a-malformed/instance.toml");
    assert!(err.starts_with(&format!("{}:", file.display())), "{err}");
    assert!(
        err.contains("field `min_answer_sise`: unknown field"),
        "{err}"
    );

    assert_eq!(noimg.status, Status::Failed);
    assert_eq!(
        noimg.error.as_deref().unwrap(),
        "instance sympy/b-no-image: image flux/nosuchrepo:0.1-py3.11 is missing; \
         build it with `flux images build flux/nosuchrepo:0.1-py3.11`"
    );

    assert_eq!(ok.status, Status::Created, "{:?}", ok.error);
    assert_eq!(
        read_json(&good.join("oracle.json"))["oracle_answer"],
        expected_answer()
    );
    assert!(good.join("callgraph.json").is_file());

    assert_eq!(differs.status, Status::Failed);
    let err = differs.error.as_deref().unwrap();
    assert!(
        err.starts_with("instance sympy/d-stored-differs: not written (oracle differs): oracle: "),
        "{err}"
    );
    assert!(
        err.contains("oracle.json holds a different answer"),
        "{err}"
    );
    assert!(
        err.contains("at /executed_path: stored has 2 items, harvested has 9"),
        "{err}"
    );
    assert!(
        err.contains("at /executed_path/1/line: stored 355, harvested 356"),
        "{err}"
    );
    assert!(err.contains("(use --replace to replace it)"), "{err}");
    assert_eq!(
        std::fs::read_to_string(conflict.join("oracle.json")).unwrap(),
        stored_oracle
    );
    assert!(
        !conflict.join("callgraph.json").exists(),
        "nothing written when one file conflicts"
    );
    assert_eq!(r.failed(), 3);
}

/// Removes the intruder container however the test ends.
struct Intruder(String);

impl Drop for Intruder {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &self.0])
            .output();
    }
}

/// The tracer attaches to the interpreter file in the image's layers: every container of that
/// image maps the same inode and traps on it. Only the traced container's PID namespace may
/// reach the trace — a second container of the same image, calling the very function the
/// question is about the whole time, must add nothing.
#[test]
fn a_second_container_of_the_same_image_running_meanwhile_adds_no_events() {
    if skip("a_second_container_of_the_same_image_running_meanwhile_adds_no_events") {
        return;
    }
    let name = format!("flux-test-intruder-{}", std::process::id());
    let intruder = Intruder(name.clone());
    // Counts its rounds on stdout so the test can see it ran before, during and after.
    // Compiled under a file name of its own, so any of its code in the trace is recognisable.
    let body = "import sys, time\n\
from sympy.utilities.iterables import ibin\n\
def flux_intruder(n):\n    return ibin(n, 4)\n\
i = 0\n\
while True:\n    for k in range(200):\n        flux_intruder(k % 16)\n    i += 1\n    print('round', i, flush=True)\n    time.sleep(0.01)\n";
    let prog = format!("exec(compile({body:?}, '/flux-intruder.py', 'exec'))");
    let out = std::process::Command::new("docker")
        .args([
            "run",
            "-d",
            "--network",
            "none",
            "--name",
            &name,
            IMAGE,
            "python3.11",
            "-c",
            &prog,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rounds = || -> usize {
        let o = std::process::Command::new("docker")
            .args(["logs", &intruder.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("round "))
            .count()
    };
    let t0 = std::time::Instant::now();
    while rounds() == 0 {
        assert!(
            t0.elapsed().as_secs() < 120,
            "the intruder never started a round"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    let tmp = tempfile::tempdir().unwrap();
    let dir = make(tmp.path(), &Inst::default());
    let before = rounds();
    let r = run(&[tmp.path().to_path_buf()], &opts());
    let after = rounds();
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Created, "{:?}", i.error);
    assert!(
        after > before,
        "the intruder made no progress while the test ran ({before} → {after})"
    );
    let running = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}", &name])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&running.stdout).trim(), "true");

    // The answer is that of the test's one call, and the trace holds nothing of the intruder:
    // exactly one activation of `ibin`, no `flux_intruder`, no code of `/flux-intruder.py`.
    assert_eq!(
        read_json(&dir.join("oracle.json"))["oracle_answer"],
        expected_answer()
    );
    let trace = std::fs::read_to_string(i.run_dir.as_ref().unwrap().join("trace.jsonl")).unwrap();
    let mut ibin_calls = 0;
    for line in trace.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        let func = e["func"].as_str().unwrap_or("");
        let file = e["file"].as_str().unwrap_or("");
        assert!(
            func != "flux_intruder" && file != "/flux-intruder.py",
            "an intruder event: {line}"
        );
        if func == "ibin" && e["ev"] == "call" {
            ibin_calls += 1;
        }
    }
    assert_eq!(ibin_calls, 1, "the test calls ibin once");
}

/// `scope = "targets"` (tracing only inside targeted code) reproduces the gold answers that the
/// starter instances harvested with `scope = "tests"`, on 3.11 (hook entries, USDT returns) and
/// 3.15 (USDT entries and returns), from far fewer events.
#[test]
fn scope_targets_reproduces_starter_gold_answers_from_fewer_events() {
    if skip("scope_targets_reproduces_starter_gold_answers_from_fewer_events") {
        return;
    }
    let mut rels = vec![
        "sympy/sympy-multiplicity-callees-across",
        "sympy/sympy-multiplicity-raising",
    ];
    match docker_has("flux/yt-dlp:2025.10.22-py3.15") {
        Ok(true) => rels.extend([
            "yt-dlp/ytdlp-jsinterp-throw",
            "yt-dlp/ytdlp-parse-codecs-loop",
        ]),
        _ => {
            flux_skip::skip(
                "scope_targets_reproduces…: the 3.15 part",
                "image flux/yt-dlp:2025.10.22-py3.15 is missing (flux images build)",
            );
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = rels.iter().map(|r| copy_starter(tmp.path(), r)).collect();
    let mut o = opts();
    o.check = true;
    let tests = run(&dirs, &o);
    o.scope = Some(flux_trace::Scope::Targets);
    let targets = run(&dirs, &o);
    for (t, x) in tests.instances.iter().zip(&targets.instances) {
        assert_eq!(t.status, Status::Reproduced, "{}: {:?}", t.name, t.error);
        assert_eq!(
            x.status,
            Status::Reproduced,
            "{} (targets): {:?}",
            x.name,
            x.error
        );
        let (et, ex) = (t.events.unwrap(), x.events.unwrap());
        assert!(
            ex < et,
            "{}: {ex} events with scope targets, {et} with tests",
            x.name
        );
    }
}

/// An instance in `root/yt-dlp/<id>` on the 3.15 image asking for `target`'s callees per test
/// (scope `targets`, `extra` more lines of `[tracing]`), its one test file `file` holding `src`.
fn callees_instance_315(root: &Path, id: &str, file: &str, src: &str, extra: &str) -> PathBuf {
    let dir = root.join("yt-dlp").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(file), src).unwrap();
    std::fs::write(
        dir.join("instance.toml"),
        format!(
            r#"id = "{id}"
repository = "yt-dlp"
package = "yt-dlp==2025.10.22"
image = "flux/yt-dlp:2025.10.22-py3.15"
interpreter = "/usr/bin/python3.15"
kind = "M6_InterProceduralCFG"
question = "Which functions does `target` call directly in each test?"
template = '{{"callees_per_test": [{{"test": "str", "callees": ["str"]}}]}}'

[test]
files = ["{file}"]
command = ["python3.15", "-m", "pytest", "-q", "-p", "no:cacheprovider", "{file}"]
expect = "pass"
timeout_s = 120

[tracing]
files = ["{file}"]
functions = ["target"]
scope = "targets"
{extra}
[extractor]
name = "callees_across_tests"
params = {{ function = "target" }}
"#
        ),
    )
    .unwrap();
    dir
}

/// The skip of a test on the 3.15 image ([`callees_instance_315`]'s): tracing and Docker as
/// [`skip`], and the image itself.
fn skip_without_315_image(what: &str) -> bool {
    const YT: &str = "flux/yt-dlp:2025.10.22-py3.15";
    if skip(what) {
        return true;
    }
    if docker_has(YT) != Ok(true) {
        return flux_skip::skip(what, &format!("image {YT} is missing (flux images build)"));
    }
    false
}

/// Scope "targets" on 3.15, where the hook no longer reports starts of code without a first line
/// (USDT says line 0 for them) nor of generator expressions: two closures named `inner`, both
/// without a first line (`COPY_FREE_VARS` comes first), are told apart by the line of their
/// USDT return; a generator expression created by `gen_of` and resumed by `sum()` inside the
/// target is placed by USDT alone (line 0: its creation, dropped; its line: a resumption).
/// Hand-derived: `target(3)` calls `gen_of(2)`, `A(3)` (make's inner), `B(3)` (make2's inner),
/// and through `sum` (C) the genexpr, whose calls of `A` are not the target's.
#[test]
fn scope_targets_on_315_names_same_named_closures_by_their_return_line() {
    if skip_without_315_image("scope_targets_on_315_names_same_named_closures") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = callees_instance_315(
        tmp.path(),
        "closures-callees",
        "test_closures.py",
        "def make(k):\n    def inner(x):\n        return x + k\n    return inner\n\n\n\
def make2(k):\n    def inner(x):\n        y = x * k\n        return y\n    return inner\n\n\n\
A = make(1)\nB = make2(2)\n\n\ndef gen_of(n):\n    return (A(i) for i in range(n))\n\n\n\
def target(n):\n    g = gen_of(2)\n    return A(n) + B(n) + sum(g)\n\n\n\
def test_t():\n    for i in range(3):\n        A(i)\n        B(i)\n        sum(gen_of(i))\n    assert target(3) == 13\n",
        "",
    );
    let r = run(std::slice::from_ref(&dir), &opts());
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Created, "{:?}", i.error);
    let oracle = read_json(&dir.join("oracle.json"));
    assert_eq!(
        oracle["oracle_answer"],
        json!({"callees_per_test": [{"test": "test_closures.py::test_t", "callees": [
            "gen_of", "gen_of.<locals>.<genexpr>", "make.<locals>.inner", "make2.<locals>.inner"
        ]}]})
    );
    assert!(
        !dir.join("callgraph.json").exists(),
        "no call graph from a targets trace"
    );
    let meta = std::fs::read_to_string(i.run_dir.as_ref().unwrap().join("trace-meta.json"))
        .unwrap_or_default();
    assert!(meta.contains("merge.usdt_line0_entries_named"), "{meta}");
    // Generator expressions are the hook's on 3.15 (issue 28): their USDT entries are dropped,
    // never named from USDT resumptions.
    assert!(
        meta.contains("merge.usdt_generator_entries_dropped"),
        "{meta}"
    );
    assert!(
        !meta.contains("merge.usdt_genexpr_resumptions_named"),
        "{meta}"
    );
}

/// Issue 28 (`c-monitoring`): on 3.15 every generator resumption inside an extent runs a hook
/// callback, and while it was a Python function USDT fired an entry and a return for it, two
/// probe traps the merge then dropped as the hook's own work (5.76 M of the SymPy slice's
/// 11.9 M probe hits). The hook's C callbacks fire none: a target resuming a generator 1,000
/// times costs a handful of hook-internal events (the target's own records), not ≥ 2,000; and
/// the answer is still the target's callees.
#[test]
fn scope_targets_on_315_generator_resumptions_fire_no_hook_frames() {
    if skip_without_315_image("scope_targets_on_315_generator_resumptions_fire_no_hook_frames") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = callees_instance_315(
        tmp.path(),
        "gens-callees",
        "test_gens.py",
        "def gen(n):\n    for i in range(n):\n        yield i\n\n\n\
def helper(x):\n    return x + 1\n\n\n\
def target(n):\n    total = 0\n    for v in gen(n):\n        total += helper(v)\n    return total\n\n\n\
def test_t():\n    assert target(1000) == 500500\n",
        "events = [\"call\"]\n",
    );
    let r = run(std::slice::from_ref(&dir), &opts());
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Created, "{:?}", i.error);
    let oracle = read_json(&dir.join("oracle.json"));
    assert_eq!(
        oracle["oracle_answer"],
        json!({"callees_per_test": [{"test": "test_gens.py::test_t", "callees": ["gen", "helper"]}]})
    );
    let meta = read_json(&i.run_dir.as_ref().unwrap().join("trace-meta.json"));
    let dropped = meta["counts"]["merge.usdt_events_of_hook_internals_dropped"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        dropped < 500,
        "{dropped} USDT events of the hook's own frames for 1,001 generator resumptions: {meta}"
    );
}

/// 17.10: `expect = "fail"` took any non-zero exit for the expected failure: a test file that
/// does not even import (pytest's exit 2, a collection error) harvested a gold answer from a
/// run in which no test failed. Now only pytest's own "a test failed" counts. The failing one
/// is harvested `--twice` (17.4): two clean runs agree, and the answer is written.
#[test]
fn expect_fail_needs_a_failed_test_not_a_broken_run() {
    if skip("expect_fail_needs_a_failed_test_not_a_broken_run") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let broken = make(
        tmp.path(),
        &Inst {
            id: "a-collection-error",
            expect: "fail",
            test_top: "import no_such_module_anywhere\n",
            tracing_extra: "scope = \"tests\"\n",
            ..Inst::default()
        },
    );
    let failing = make(
        tmp.path(),
        &Inst {
            id: "b-fails",
            expect: "fail",
            test_body: "    assert ibin(2, 4) == [1]\n",
            tracing_extra: "scope = \"tests\"\n",
            ..Inst::default()
        },
    );
    let r = run(std::slice::from_ref(&broken), &opts());
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Failed);
    let err = i.error.as_deref().unwrap();
    assert!(
        err.starts_with(
            "instance sympy/a-collection-error: the test was expected to fail (pytest's exit \
             code 1, a test failed) but exited with code 2 (pytest was interrupted"
        ),
        "{err}"
    );
    assert!(!broken.join("oracle.json").exists());

    let mut o = opts();
    o.twice = true;
    // A cache of its own, to count the runs (a Docker run needs nothing else from it).
    o.cache_dir = tmp.path().join("cache");
    let r = run(std::slice::from_ref(&failing), &o);
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Created, "{:?}", i.error);
    assert_eq!(
        read_json(&failing.join("oracle.json"))["oracle_answer"],
        expected_answer()
    );
    let runs = std::fs::read_dir(tmp.path().join("cache/runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 2, "two runs were made");
}

/// A started container waits for its gate only `GATE_DEADLINE` (120 s), and a run's turn
/// (`flux_agent::turns`) waits for every run of another probe set on the interpreter to end,
/// which can take longer: the turn was taken after the container had started, so a long wait
/// made the container give up (exit 125) and the harvest fail. The turn now comes first: while
/// another set runs, the harvest waits with no container (no gate in its run directory).
#[test]
fn a_container_run_waits_its_turn_before_its_container_exists() {
    if skip("a_container_run_waits_its_turn_before_its_container_exists") {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let python = rt.block_on(async {
        let docker = flux_container::Runtime::connect().await.unwrap();
        docker
            .image_file(IMAGE, "/usr/bin/python3.11")
            .await
            .unwrap()
    });
    let locks = std::path::Path::new(flux_agent::turns::LOCK_DIR);
    let mut other = flux_agent::turns::Request::new(&python, "a-test-holding", locks).unwrap();
    let mut held = None;
    while held.is_none() {
        held = other.try_take().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let tmp = tempfile::tempdir().unwrap();
    let id = format!("turn-first-{}", std::process::id());
    let dir = make(
        tmp.path(),
        &Inst {
            id: &id,
            ..Inst::default()
        },
    );
    let harvest = std::thread::spawn(move || run(std::slice::from_ref(&dir), &opts()));
    // Waiting: a run of its set (`ret`, python3.11's) says so with its `.want` lock.
    let t0 = std::time::Instant::now();
    let waiting = || {
        let p = std::fs::read_dir(locks)
            .unwrap()
            .flatten()
            .map(|e| e.path());
        p.filter(|p| p.to_string_lossy().ends_with(".ret.want"))
            .any(|p| {
                let f = std::fs::File::open(&p).unwrap();
                // SAFETY: flock on a descriptor owned here.
                let r = unsafe {
                    libc::flock(
                        std::os::fd::AsRawFd::as_raw_fd(&f),
                        libc::LOCK_EX | libc::LOCK_NB,
                    )
                };
                r != 0
            })
    };
    while !waiting() {
        assert!(t0.elapsed().as_secs() < 120, "the harvest never waited");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let runs = cache_dir().join("runs");
    let gates: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&id))
        .map(|e| e.path().join("shared").join(".flux-gate"))
        .filter(|g| g.exists())
        .collect();
    drop(held);
    let r = harvest.join().unwrap();
    assert!(
        gates.is_empty(),
        "a container was made before the turn: {gates:?}"
    );
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Created, "{:?}", i.error);
}
