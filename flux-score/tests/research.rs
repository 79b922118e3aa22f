//! Scores for research: partial credit, intervals, pass@k, failure classes, several runs
//! compared, the HTML report, and reading answers safely (17.12). Every figure is checked
//! against a value computed by hand.

use flux_score::{run_score, FailureClass, Format, ScoreOptions, Status};
use serde_json::{json, Value};
use std::path::Path;

fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

fn instance(root: &Path, repo: &str, id: &str, kind: &str, gold: Value) {
    let dir = root.join(repo).join(id);
    write(
        &dir.join("instance.toml"),
        &format!("id = \"{id}\"\nrepository = \"{repo}\"\nkind = \"{kind}\"\nquestion = \"What does {id} do?\"\ntemplate = '{{}}'\n"),
    );
    write(
        &dir.join("oracle.json"),
        &json!({"question_kind": kind, "question": "q", "template_answer": {}, "oracle_answer": gold}).to_string(),
    );
}

fn answer(root: &Path, repo: &str, id: &str, a: &Value) {
    write(
        &root.join(repo).join(id).join("answer.json"),
        &a.to_string(),
    );
}

fn path(lines: &[i64]) -> Value {
    json!({"executed_path": lines.iter().map(|l| json!({"line": l})).collect::<Vec<_>>()})
}

/// Ten instances; run A passes 8, run B passes 4 of the same (B passes one A fails).
fn two_runs(root: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let inst = root.join("instances");
    let (a, b) = (root.join("answers/a"), root.join("answers/b"));
    for i in 0..10 {
        let repo = if i < 6 { "alpha" } else { "beta" };
        let kind = if i % 2 == 0 {
            "S2_Loops"
        } else {
            "S1_IntraProceduralCFG"
        };
        instance(&inst, repo, &format!("i{i}"), kind, json!({"n": i}));
        answer(
            &a,
            repo,
            &format!("i{i}"),
            &json!({"n": if i < 8 { i } else { -1 }}),
        );
        // B passes i0..i2 and i9.
        answer(
            &b,
            repo,
            &format!("i{i}"),
            &json!({"n": if i < 3 || i == 9 { i } else { -1 }}),
        );
    }
    write(
        &a.join("alpha/i0/meta.json"),
        &json!({"status": "ok", "model": "model-a"}).to_string(),
    );
    (inst, a, b)
}

#[test]
fn partial_credit_list_f1_and_per_field_accuracy() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    // Gold 4 lines, answer 3 of them + 1 wrong: multiset F1 = 2*3/(4+4) = 0.75.
    instance(
        &inst,
        "r",
        "path",
        "S1_IntraProceduralCFG",
        path(&[1, 2, 3, 4]),
    );
    answer(&ans, "r", "path", &path(&[1, 2, 3, 9]));
    // Two fields: one right (1), one list with F1 2*1/(2+1) = 2/3 → mean 5/6.
    instance(
        &inst,
        "r",
        "fields",
        "S3_ProgramState",
        json!({"raised": true, "names": ["a", "b"]}),
    );
    answer(
        &ans,
        "r",
        "fields",
        &json!({"raised": "True", "names": ["b"]}),
    );
    // Repeats count: gold [1, 1, 2] vs [1, 2, 2]: matching 2 → F1 2*2/6.
    instance(&inst, "r", "multi", "S2_Loops", json!({"seq": [1, 1, 2]}));
    answer(&ans, "r", "multi", &json!({"seq": [1, 2, 2]}));
    let mut o = ScoreOptions::new(&ans);
    o.instances = vec![inst];
    let r = run_score(&o).unwrap().report;
    let get = |id: &str| r.instances.iter().find(|i| i.id == id).unwrap().clone();
    assert!((get("path").partial.unwrap() - 0.75).abs() < 1e-12);
    let f = get("fields");
    assert!((f.partial.unwrap() - 5.0 / 6.0).abs() < 1e-12);
    let fields = f.fields.unwrap();
    assert_eq!(fields["raised"], 1.0);
    assert!((fields["names"] - 2.0 / 3.0).abs() < 1e-12);
    assert!((get("multi").partial.unwrap() - 4.0 / 6.0).abs() < 1e-12);
    let mean = (0.75 + 5.0 / 6.0 + 4.0 / 6.0) / 3.0;
    assert!((r.partial_credit.mean - mean).abs() < 1e-12);
    assert!(r.partial_credit.low <= mean && mean <= r.partial_credit.high);
    assert_eq!(r.partial_credit.n, 3);
    // Failure classes where the gold can tell.
    assert_eq!(get("path").failure, Some(FailureClass::WrongPath));
    assert_eq!(r.failure_classes["wrong_path"], 1);
}

#[test]
fn wilson_intervals_per_group_and_overall() {
    let tmp = tempfile::tempdir().unwrap();
    let (inst, a, _) = two_runs(tmp.path());
    let mut o = ScoreOptions::new(&a);
    o.instances = vec![inst];
    o.format = Format::Json;
    let out = run_score(&o).unwrap();
    let r = &out.report;
    assert_eq!((r.passed, r.total), (8, 10));
    // Wilson 95 % of 8/10: [0.4902, 0.9433].
    assert!(
        (r.accuracy_ci[0] - 0.4902).abs() < 1e-4,
        "{:?}",
        r.accuracy_ci
    );
    assert!((r.accuracy_ci[1] - 0.9433).abs() < 1e-4);
    // alpha: 6/6 → [0.6097, 1]; beta: 2/4 → [0.1500, 0.8500].
    let alpha = &r.by_repository["alpha"];
    assert!(
        (alpha.ci[0] - 0.6097).abs() < 1e-4 && (alpha.ci[1] - 1.0).abs() < 1e-9,
        "{alpha:?}"
    );
    let beta = &r.by_repository["beta"];
    assert!(
        (beta.ci[0] - 0.1500).abs() < 1e-4 && (beta.ci[1] - 0.8500).abs() < 1e-4,
        "{beta:?}"
    );
    assert!(out.rendered.contains("\"accuracy_ci\""));
    assert_eq!(r.name, "model-a", "the run is named by its model");
}

#[test]
fn several_runs_compared_pairwise() {
    let tmp = tempfile::tempdir().unwrap();
    let (inst, a, b) = two_runs(tmp.path());
    let mut o = ScoreOptions::new(&a);
    o.answers.push(b.clone());
    o.instances = vec![inst];
    o.format = Format::Text;
    let out = run_score(&o).unwrap();
    let m = &out.multi;
    assert_eq!(m.runs.len(), 2);
    assert_eq!(m.runs[1].name, "b", "no meta: the directory's name");
    let c = &m.comparisons[0];
    assert_eq!((c.n, c.only_a, c.only_b), (10, 5, 1));
    assert!((c.accuracy_a - 0.8).abs() < 1e-12 && (c.accuracy_b - 0.4).abs() < 1e-12);
    assert!((c.accuracy_diff.mean + 0.4).abs() < 1e-12);
    assert!(c.accuracy_diff.low <= -0.4 && -0.4 <= c.accuracy_diff.high);
    assert!(
        c.accuracy_diff.low < -0.4 && -0.4 < c.accuracy_diff.high,
        "{:?}",
        c.accuracy_diff
    );
    // McNemar exact, b = 5, c = 1: 2 * (1 + 6) / 64.
    assert!((c.mcnemar_p - 14.0 / 64.0).abs() < 1e-12, "{}", c.mcnemar_p);
    // Tables per kind × run and repository × run.
    assert_eq!(m.by_kind["S2_Loops"]["model-a"].passed, 4);
    assert_eq!(m.by_kind["S2_Loops"]["b"].passed, 2);
    assert_eq!(m.by_repository["beta"]["b"].passed, 1);
    let t = &out.rendered;
    assert!(t.contains("flux score: 2 runs"), "{t}");
    assert!(t.contains("b vs model-a (n 10): accuracy -40.0 ["), "{t}");
    assert!(t.contains("McNemar exact p = 0.2188"), "{t}");
    // HTML of the comparison: a forest plot, both runs' bars, side-by-side failures.
    o.format = Format::Html;
    let h = run_score(&o).unwrap().rendered;
    assert!(h.contains("aria-label=\"paired differences\""));
    assert!(h.contains("b − model-a"));
    assert!(h.contains("<h2>model-a</h2>") && h.contains("<h2>b</h2>"));
    assert!(!h.contains("<script") && !h.contains("https://"));
}

#[test]
fn pass_at_k_from_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    let samples = |n: usize| {
        json!({"status": "ok", "model": "m",
               "samples": (0..n).map(|_| json!({"status": "ok"})).collect::<Vec<_>>()})
    };
    // x: 1 of 3 samples right (sample 2); y: 3 of 3.
    instance(&inst, "r", "x", "S2_Loops", json!({"n": 1}));
    instance(&inst, "r", "y", "S2_Loops", json!({"n": 2}));
    let d = ans.join("r/x");
    write(&d.join("meta.json"), &samples(3).to_string());
    write(&d.join("answer.json"), r#"{"n": 0}"#);
    write(&d.join("answer-2.json"), r#"{"n": 1}"#);
    write(&d.join("answer-3.json"), r#"{"n": 5}"#);
    let d = ans.join("r/y");
    write(&d.join("meta.json"), &samples(3).to_string());
    for f in ["answer.json", "answer-2.json", "answer-3.json"] {
        write(&d.join(f), r#"{"n": 2}"#);
    }
    let mut o = ScoreOptions::new(&ans);
    o.instances = vec![inst];
    let r = run_score(&o).unwrap().report;
    let x = r.instances.iter().find(|i| i.id == "x").unwrap();
    assert_eq!(x.status, Status::Fail, "sample 1 decides the verdict");
    assert_eq!(x.samples.map(|s| (s.n, s.passed)), Some((3, 1)));
    // pass@1 = mean(1/3, 1); pass@2 = mean(1 - C(2,2)/C(3,2), 1) = mean(2/3, 1); pass@3 = 1.
    let p = |k: &str| r.pass_at_k[k].mean;
    assert!((p("1") - (1.0 / 3.0 + 1.0) / 2.0).abs() < 1e-12);
    assert!((p("2") - (2.0 / 3.0 + 1.0) / 2.0).abs() < 1e-12);
    assert!((p("3") - 1.0).abs() < 1e-12);
    o.format = Format::Html;
    let h = run_score(&o).unwrap().rendered;
    assert!(h.contains("aria-label=\"pass@k\"") && h.contains("pass@3"));
}

#[test]
fn html_report_has_plots_with_intervals_and_failures_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    instance(
        &inst,
        "r",
        "early",
        "S1_IntraProceduralCFG",
        path(&[10, 11, 12, 11, 12, 13]),
    );
    answer(&ans, "r", "early", &path(&[10, 11, 12]));
    instance(
        &inst,
        "r",
        "ok",
        "S2_Loops",
        json!({"loop_iteration_count": 3}),
    );
    answer(&ans, "r", "ok", &json!({"loop_iteration_count": 3}));
    let mut o = ScoreOptions::new(&ans);
    o.instances = vec![inst];
    o.format = Format::Html;
    let h = run_score(&o).unwrap().rendered;
    // Plots: bars with Wilson whiskers, failure classes.
    assert!(h.matches("<svg").count() >= 3, "{h}");
    assert!(
        h.contains("[9.5–90.5]") || h.contains("[9.4–90.6]") || h.contains("[9.5–90.6]"),
        "Wilson of 1/2 in a title"
    );
    assert!(h.contains("aria-label=\"failure classes\""));
    // The failure: class, then question, gold and answer side by side.
    assert!(h.contains("<b>stopped_early</b>"), "{h}");
    let sbs = h
        .split("class=\"sbs\"")
        .nth(1)
        .expect("a side-by-side block");
    assert!(sbs.contains("What does early do?"));
    assert!(sbs.contains("&quot;line&quot;: 13"), "gold shown");
    assert!(
        !sbs.split("<h4>answer</h4>").nth(1).unwrap().contains("13"),
        "answer shown"
    );
    // Self-contained.
    assert!(!h.contains("<script") && !h.contains("<link") && !h.contains("https://"));
}

/// 17.12: a 100 MB answer took 8 GB of memory. An answer over the limit is a failure named by
/// its size and is never read; a correct answer padded past the limit passed before.
#[test]
fn score_reads_answers_with_a_size_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    instance(&inst, "r", "huge", "S2_Loops", json!({"n": 1}));
    let pad = "x".repeat(9 << 20);
    write(
        &ans.join("r/huge/answer.json"),
        &format!("{{\"n\": 1, \"pad\": \"{pad}\"}}"),
    );
    let mut o = ScoreOptions::new(&ans);
    o.instances = vec![inst];
    let r = run_score(&o).unwrap().report;
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Fail);
    let reason = i.reason.as_deref().unwrap();
    assert!(
        reason.contains("over the limit of 8388608 (--max-answer-bytes); not read"),
        "{reason}"
    );
    assert_eq!(i.failure, Some(FailureClass::Format));
    // A larger limit reads it (extra keys are ignored: it passes).
    o.max_answer_bytes = 16 << 20;
    assert_eq!(
        run_score(&o).unwrap().report.instances[0].status,
        Status::Pass
    );
}

/// 17.12: an answer file that exists but cannot be read said "no answer" (a wrong answer);
/// it is an infrastructure error, excluded from accuracy.
#[test]
fn unreadable_answer_file_is_an_infrastructure_error() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("i");
    let ans = tmp.path().join("a");
    instance(&inst, "r", "dir", "S2_Loops", json!({"n": 1}));
    std::fs::create_dir_all(ans.join("r/dir/answer.json")).unwrap();
    instance(&inst, "r", "meta", "S2_Loops", json!({"n": 1}));
    write(&ans.join("r/meta/answer.json"), r#"{"n": 1}"#);
    std::fs::create_dir_all(ans.join("r/meta/meta.json")).unwrap();
    instance(&inst, "r", "missing", "S2_Loops", json!({"n": 1}));
    let mut o = ScoreOptions::new(&ans);
    o.instances = vec![inst];
    let r = run_score(&o).unwrap().report;
    let get = |id: &str| r.instances.iter().find(|i| i.id == id).unwrap().clone();
    assert_eq!(get("dir").status, Status::InfraError);
    assert!(
        get("dir").reason.unwrap().contains("answer unreadable"),
        "{:?}",
        get("dir").reason
    );
    assert_eq!(get("meta").status, Status::InfraError);
    assert_eq!(
        get("missing").status,
        Status::Fail,
        "no file at all is no answer"
    );
    assert_eq!((r.total, r.infra_errors), (1, 2));
}
