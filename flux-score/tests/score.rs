//! Scorer tests: one data-driven table per rule, then end-to-end runs over a temp instance
//! store and answers directory.

use flux_score::{compare, run_score, CompareOptions, Format, ScoreOptions, Status};
use serde_json::{json, Value};
use std::path::Path;

fn check(cases: &[(Value, Value, bool)], oi: &[&str]) {
    let opts = CompareOptions {
        order_insensitive: oi.iter().map(|s| s.to_string()).collect(),
    };
    for (expected, got, want) in cases {
        let r = compare(expected, got, &opts);
        assert_eq!(r.is_ok(), *want, "expected {expected} vs got {got}: {r:?}");
    }
}

#[test]
fn recursive_exact() {
    check(
        &[
            (
                json!({"a": {"b": [1, 2, {"c": "x"}]}}),
                json!({"a": {"b": [1, 2, {"c": "x"}]}}),
                true,
            ),
            (
                json!({"a": {"b": [1, 2, {"c": "x"}]}}),
                json!({"a": {"b": [1, 2, {"c": "y"}]}}),
                false,
            ),
            (json!({"a": null}), json!({"a": null}), true),
            (json!({"a": true}), json!({"a": false}), false),
            (json!({"a": 1}), json!({"a": [1]}), false),
            (json!({"a": {"b": 1}}), json!({"a": 1}), false),
        ],
        &[],
    );
}

#[test]
fn floats_within_tolerance() {
    check(
        &[
            (json!(0.1), json!(0.1000000001), true),   // absolute
            (json!(1e9), json!(1e9 + 100.0), true),    // relative 1e-7
            (json!(1e9), json!(1e9 + 10000.0), false), // relative 1e-5
            (json!(1.0), json!(1.001), false),
            (json!(3), json!(3.0), true),
            (json!(3), json!(4), false),
            (json!(0.0), json!(0.0000005), true),
            (json!("2.5"), json!(2.5000000001), true),
        ],
        &[],
    );
}

#[test]
fn dict_keys_expected_present_extras_ignored() {
    check(
        &[
            (
                json!({"a": 1}),
                json!({"a": 1, "reasoning": "because"}),
                true,
            ),
            (json!({"a": 1, "b": 2}), json!({"a": 1}), false),
            (json!({}), json!({"x": 1}), true),
        ],
        &[],
    );
    let e = compare(
        &json!({"a": {"b": 1}}),
        &json!({"a": {}}),
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.path, "/a/b");
    assert!(e.message.contains("missing key"), "{e}");
}

#[test]
fn lists_equal_length_in_order() {
    check(
        &[
            (json!([1, 2, 3]), json!([1, 2, 3]), true),
            (json!([1, 2, 3]), json!([3, 2, 1]), false),
            (json!([1, 2, 3]), json!([1, 2]), false),
            (json!([1, 2]), json!([1, 2, 3]), false),
            (json!([]), json!([]), true),
        ],
        &[],
    );
    let e = compare(
        &json!({"l": [1, 2, 3]}),
        &json!({"l": [1, 5, 3]}),
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.path, "/l/1");
    assert_eq!(e.expected, json!(2));
    assert_eq!(e.got, json!(5));
    assert_eq!(e.to_string(), "at /l/1: value differs: expected 2, got 5");
}

#[test]
fn order_insensitive_paths_are_multisets() {
    check(
        &[
            (
                json!({"covered_lines": [1, 2, 3]}),
                json!({"covered_lines": [3, 1, 2]}),
                true,
            ),
            (
                json!({"covered_lines": [1, 1, 2]}),
                json!({"covered_lines": [1, 2, 2]}),
                false,
            ),
            (
                json!({"covered_lines": [1, 2]}),
                json!({"covered_lines": [2, 1, 1]}),
                false,
            ),
            // Other lists stay ordered.
            (json!({"other": [1, 2]}), json!({"other": [2, 1]}), false),
        ],
        &["/covered_lines"],
    );
    // Wildcard segments, and leniency inside multisets.
    check(
        &[
            (
                json!({"calls": [{"callees": ["sympy.core.add.Add", "b.c"]}, {"callees": ["x"]}]}),
                json!({"calls": [{"callees": ["c", "Add"]}, {"callees": ["x"]}]}),
                true,
            ),
            (
                json!({"calls": [{"callees": ["a", "b"]}]}),
                json!({"calls": [{"callees": ["b", "z"]}]}),
                false,
            ),
        ],
        &["/calls/*/callees"],
    );
    // Bare key names match lists under that key anywhere; a matching needs augmenting paths:
    // greedy pairing of "b|||a" with "a" would strand the gold "a".
    check(
        &[(
            json!({"x": {"tests": ["m.a|||b", "n.a"]}}),
            json!({"x": {"tests": ["a", "b"]}}),
            true,
        )],
        &["tests"],
    );
    // Lists of objects as multisets.
    check(
        &[(
            json!({"pairs": [{"v": "x", "l": 1}, {"v": "y", "l": 2}]}),
            json!({"pairs": [{"v": "y", "l": "2"}, {"v": "x", "l": 1}]}),
            true,
        )],
        &["/pairs"],
    );
    let opts = CompareOptions {
        order_insensitive: vec!["/s".into()],
    };
    let e = compare(&json!({"s": [1, 9]}), &json!({"s": [1, 2]}), &opts).unwrap_err();
    assert_eq!(e.path, "/s/1");
    assert!(
        e.message.contains("1 of 2 expected items have no match"),
        "{e}"
    );
}

#[test]
fn path_spellings_suffix_at_component_boundary() {
    check(
        &[
            (
                json!("/usr/lib/python3.11/site-packages/sympy/core/add.py"),
                json!("sympy/core/add.py"),
                true,
            ),
            (
                json!("sympy/core/add.py"),
                json!("/abs/sympy/core/add.py"),
                true,
            ),
            (json!("/abs/sympy/core/add.py"), json!("core/add.py"), true),
            (json!("/abs/sympy/core/add.py"), json!("ore/add.py"), false),
            (
                json!("/abs/sympy/core/add.py"),
                json!("sympy/core/mul.py"),
                false,
            ),
            (json!("./pkg/mod.py"), json!("pkg/mod.py"), true),
            (json!("mod.py"), json!("/site-packages/pkg/mod.py"), true),
            // Only file paths: reprs with slashes are compared exactly.
            (json!("1/2"), json!("2"), false),
            (json!("a/b"), json!("b"), false),
            (json!("x / y.py"), json!("y.py"), false),
        ],
        &[],
    );
}

#[test]
fn dotted_names_identifier_suffix() {
    check(
        &[
            (
                json!("sympy.core.add.Add.flatten"),
                json!("Add.flatten"),
                true,
            ),
            (
                json!("Add.flatten"),
                json!("sympy.core.add.Add.flatten"),
                true,
            ),
            (json!("sympy.core.add.Add.flatten"), json!("flatten"), true),
            (
                json!("sympy.core.add.Add.flatten"),
                json!("dd.flatten"),
                false,
            ),
            (
                json!("sympy.core.add.Add.flatten"),
                json!("Mul.flatten"),
                false,
            ),
            (json!("f.<locals>.<lambda>"), json!("<lambda>"), true),
            // Numbers are not dotted names.
            (json!("1.5"), json!("5"), false),
        ],
        &[],
    );
}

#[test]
fn class_wrappers() {
    check(
        &[
            (json!("<class 'ValueError'>"), json!("ValueError"), true),
            (json!("ValueError"), json!("<class 'ValueError'>"), true),
            (
                json!("<class 'builtins.ValueError'>"),
                json!("ValueError"),
                true,
            ),
            (json!("<class 'ValueError'>"), json!("TypeError"), false),
        ],
        &[],
    );
}

#[test]
fn alternatives_in_gold() {
    check(
        &[
            (json!("a|||b"), json!("b"), true),
            (json!("a|||b"), json!("a"), true),
            (json!("a|||b"), json!("c"), false),
            (json!("3|||4"), json!(4), true),
            (json!("None|||0"), json!(null), true),
        ],
        &[],
    );
}

#[test]
fn stringified_scalars() {
    check(
        &[
            (json!("3"), json!(3), true),
            (json!(3), json!("3"), true),
            (json!(3), json!("4"), false),
            (json!("True"), json!(true), true),
            (json!(true), json!("True"), true),
            (json!(false), json!("false"), true),
            (json!(true), json!("False"), false),
            (json!(null), json!("None"), true),
            (json!("1.0"), json!("1"), true),
            (json!("abc"), json!(3), false),
        ],
        &[],
    );
}

// ---- end-to-end over a temp store ----

fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

fn instance(root: &Path, repo: &str, id: &str, kind: &str, oi: &[&str], oracle: Option<Value>) {
    let dir = root.join(repo).join(id);
    let oi: Vec<String> = oi.iter().map(|s| format!("{s:?}")).collect();
    write(
        &dir.join("instance.toml"),
        &format!(
            "id = \"{id}\"\nrepository = \"{repo}\"\nkind = \"{kind}\"\nquestion = \"q\"\ntemplate = '{{}}'\norder_insensitive = [{}]\npackage = \"{repo}==1.0\"\n",
            oi.join(", ")
        ),
    );
    if let Some(o) = oracle {
        write(
            &dir.join("oracle.json"),
            &json!({"question_kind": kind, "question": "q", "template_answer": {}, "oracle_answer": o}).to_string(),
        );
    }
}

fn answer(root: &Path, repo: &str, id: &str, a: Option<&str>, status: Option<&str>) {
    let dir = root.join(repo).join(id);
    if let Some(a) = a {
        write(&dir.join("answer.json"), a);
    }
    if let Some(s) = status {
        write(
            &dir.join("meta.json"),
            &json!({"status": s, "error": "HTTP 500 after 3 retries"}).to_string(),
        );
    }
}

#[test]
fn end_to_end_report() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("instances");
    let ans = tmp.path().join("answers");
    instance(
        &inst,
        "sympy",
        "a1",
        "S2_Loops",
        &[],
        Some(json!({"loop_iteration_count": 3})),
    );
    instance(
        &inst,
        "sympy",
        "a2",
        "S2_Loops",
        &[],
        Some(json!({"loop_iteration_count": 3})),
    );
    instance(
        &inst,
        "sympy",
        "a3",
        "S4_DataFlow",
        &["/covered_lines"],
        Some(json!({"covered_lines": [1, 2]})),
    );
    instance(
        &inst,
        "requests",
        "b1",
        "S4_DataFlow",
        &[],
        Some(json!({"x": "a"})),
    );
    instance(
        &inst,
        "requests",
        "b2",
        "S5_Exceptions",
        &[],
        Some(json!({"x": "a"})),
    );
    instance(
        &inst,
        "requests",
        "b3",
        "S5_Exceptions",
        &[],
        Some(json!({"x": "a"})),
    );
    instance(&inst, "requests", "b4", "S5_Exceptions", &[], None);
    instance(
        &inst,
        "requests",
        "cg1",
        "S6_InterProceduralCFG",
        &[],
        Some(json!({"call_graph": {"main.f": ["main.g", "main.h"], "main.g": []}})),
    );
    instance(
        &inst,
        "requests",
        "cg2",
        "S6_InterProceduralCFG",
        &[],
        Some(json!({"call_graph": {"main.f": ["main.g"]}})),
    );
    answer(
        &ans,
        "sympy",
        "a1",
        Some(r#"{"loop_iteration_count": "3"}"#),
        None,
    ); // pass
    answer(
        &ans,
        "sympy",
        "a2",
        Some(r#"{"loop_iteration_count": 4}"#),
        Some("ok"),
    ); // fail
    answer(
        &ans,
        "sympy",
        "a3",
        Some(r#"{"covered_lines": [2, 1]}"#),
        None,
    ); // pass
       // b1: no answer → fail
    answer(&ans, "requests", "b2", None, Some("infra_error")); // excluded
    answer(&ans, "requests", "b3", Some("not json"), None); // unparseable → fail
    answer(
        &ans,
        "requests",
        "cg1",
        Some(r#"{"call_graph": {"f": ["g", "h"]}}"#),
        None,
    ); // F1 1
    answer(
        &ans,
        "requests",
        "cg2",
        Some(r#"{"call_graph": {"f": ["g", "x"]}}"#),
        None,
    ); // P .5 R 1

    let mut opts = ScoreOptions::new(&ans);
    opts.instances = vec![inst.clone()];
    opts.format = Format::Json;
    opts.out = Some(tmp.path().join("out/report.json"));
    let out = run_score(&opts).unwrap();
    let r = &out.report;
    assert_eq!(
        (r.total, r.passed, r.infra_errors, r.not_harvested),
        (7, 3, 1, 1)
    );
    assert!((r.accuracy - 3.0 / 7.0).abs() < 1e-9);
    assert_eq!(r.by_kind["S2_Loops"].passed, 1);
    assert_eq!(r.by_kind["S5_Exceptions"].total, 1);
    assert_eq!(r.by_kind["S5_Exceptions"].infra_errors, 1);
    assert_eq!(r.by_repository["sympy"].total, 3);
    assert_eq!(r.by_kind_repository["S4_DataFlow"]["requests"].total, 1);
    let get = |id: &str| r.instances.iter().find(|i| i.id == id).unwrap();
    assert_eq!(get("b1").reason.as_deref(), Some("no answer"));
    assert!(get("b3")
        .reason
        .as_deref()
        .unwrap()
        .starts_with("unparseable"));
    assert_eq!(get("b2").status, Status::InfraError);
    assert_eq!(get("b2").pass, None);
    assert_eq!(get("b4").status, Status::NotHarvested);
    assert_eq!(get("a2").path.as_deref(), Some("/loop_iteration_count"));
    assert!(get("a2")
        .reason
        .as_deref()
        .unwrap()
        .contains("expected 3, got 4"));
    assert_eq!(get("cg1").pass, Some(true));
    assert_eq!(get("cg2").pass, Some(false));
    let cg = &r.call_graph;
    // Edges: gold {f→g, f→h, f→g}; answers {f→g, f→h, f→g, f→x}. tp 3, fp 1, fn 0.
    assert_eq!(
        (cg.instances, cg.passed, cg.tp, cg.fp, cg.fn_),
        (2, 1, 3, 1, 0)
    );
    assert!((cg.precision - 0.75).abs() < 1e-9 && (cg.recall - 1.0).abs() < 1e-9);

    // The JSON written to --out carries the documented top-level keys.
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/report.json")).unwrap())
            .unwrap();
    for k in [
        "accuracy",
        "total",
        "passed",
        "infra_errors",
        "by_kind",
        "by_repository",
        "by_kind_repository",
        "instances",
        "call_graph",
    ] {
        assert!(j.get(k).is_some(), "missing {k}");
    }
    assert_eq!(j["instances"][0]["repo"], "requests");

    // A lower call-graph threshold passes cg2 (F1 = 0.667).
    opts.call_graph_threshold = 0.6;
    opts.out = None;
    assert_eq!(run_score(&opts).unwrap().report.passed, 4);

    // Text and HTML render the same facts.
    opts.format = Format::Text;
    let t = run_score(&opts).unwrap().rendered;
    assert!(
        t.contains("accuracy 57.1% (4/7 passed), 1 infra errors"),
        "{t}"
    );
    assert!(
        t.contains("FAIL  requests/b1 [S4_DataFlow] (format): no answer"),
        "{t}"
    );
    opts.format = Format::Html;
    let h = run_score(&opts).unwrap().rendered;
    assert!(h.starts_with("<!DOCTYPE html>") && h.contains("<svg") && h.contains("S5_Exceptions"));
    assert!(
        !h.contains("http://")
            || !h
                .replace("http://www.w3.org/2000/svg", "")
                .contains("http://")
    );
    assert!(!h.contains("https://") && !h.contains("<script") && !h.contains("<link"));
}

#[test]
fn html_escapes_reasons() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    instance(
        &inst,
        "r",
        "x",
        "S3_ProgramState",
        &[],
        Some(json!({"v": "<script>"})),
    );
    answer(&ans, "r", "x", Some(r#"{"v": "</td><b>"}"#), None);
    let mut opts = ScoreOptions::new(&ans);
    opts.instances = vec![inst];
    opts.format = Format::Html;
    let h = run_score(&opts).unwrap().rendered;
    assert!(!h.contains("<script>") && !h.contains("</td><b>"));
    assert!(h.contains("&lt;script&gt;"));
}

#[test]
fn one_broken_instance_does_not_stop_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    instance(&inst, "r", "good", "S2_Loops", &[], Some(json!({"n": 1})));
    write(&inst.join("r/bad-toml/instance.toml"), "id = [unclosed");
    instance(&inst, "r", "bad-oracle", "S2_Loops", &[], None);
    write(&inst.join("r/bad-oracle/oracle.json"), "{not json");
    answer(&ans, "r", "good", Some(r#"{"n": 1}"#), None);
    let mut opts = ScoreOptions::new(&ans);
    opts.instances = vec![inst];
    let out = run_score(&opts).unwrap();
    assert_eq!((out.report.total, out.report.passed), (1, 1));
    assert_eq!(out.report.invalid_instances.len(), 2);
    assert!(
        out.rendered.contains("invalid instances (not scored):"),
        "{}",
        out.rendered
    );
}

#[test]
fn missing_instances_dir_is_an_error_not_a_panic() {
    let mut opts = ScoreOptions::new("/nonexistent/answers");
    opts.instances = vec!["/nonexistent/instances".into()];
    assert!(run_score(&opts).is_err());
}

#[test]
fn a_cost_without_a_price_is_unknown_not_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    for id in ["x", "y"] {
        instance(&inst, "r", id, "S2_Loops", &[], Some(json!({"n": 1})));
        write(&ans.join("r").join(id).join("answer.json"), r#"{"n": 1}"#);
    }
    let meta = |id: &str, cost: Value| {
        let m = json!({"status": "ok", "model": "local-model", "tokens_in": 100,
                       "tokens_out": 10, "cost": cost, "seconds": 1.0});
        write(&ans.join("r").join(id).join("meta.json"), &m.to_string());
    };
    meta("x", Value::Null);
    meta("y", Value::Null);
    let render = |format| {
        let mut opts = ScoreOptions::new(&ans);
        opts.instances = vec![inst.clone()];
        opts.format = format;
        run_score(&opts).unwrap().rendered
    };
    let text = render(Format::Text);
    assert!(text.contains("cost unknown (no price)"), "{text}");
    assert!(!text.contains("$0.0"), "{text}");
    assert!(render(Format::Html).contains("unknown (no price)"));
    // One answer priced: its cost, and how many were.
    meta("y", json!(0.25));
    let text = render(Format::Text);
    assert!(
        text.contains("cost $0.2500 (1 of 2 answers priced)"),
        "{text}"
    );
}

/// A FIFO where an answer file (or a predictions file) should be: refused, not opened (opening
/// one blocks until someone writes to it, and `flux score` hung).
#[test]
fn a_fifo_as_an_answer_or_predictions_file_is_refused_not_waited_on() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    instance(&inst, "r", "x", "S2_Loops", &[], Some(json!({"n": 1})));
    std::fs::create_dir_all(ans.join("r/x")).unwrap();
    let fifo = |p: &Path| {
        let ok = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mkfifo {}", p.display());
    };
    fifo(&ans.join("r/x/answer.json"));
    let preds = tmp.path().join("preds.jsonl");
    fifo(&preds);
    let (tx, rx) = std::sync::mpsc::channel();
    let (i2, a2, p2) = (inst.clone(), ans.clone(), preds.clone());
    std::thread::spawn(move || {
        let mut opts = ScoreOptions::new(&a2);
        opts.instances = vec![i2];
        opts.format = Format::Text;
        let text = run_score(&opts)
            .map(|o| o.rendered)
            .map_err(|e| e.to_string());
        let preds = flux_score::predictions::read(&p2, 1 << 20).map(|_| ());
        let _ = tx.send((text, preds.map_err(|e| e.to_string())));
    });
    let (text, preds) = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("flux score waited on a FIFO");
    let text = text.unwrap();
    assert!(text.contains("not a regular file"), "{text}");
    let e = preds.unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
}
