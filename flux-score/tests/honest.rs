//! Honest scoring (issue 24.4) on the committed starter set `instances/`: answers that match no
//! instance of the set are refused (or listed when allowed), `--filter`/`--limit` select the
//! same instances for eval and score, predictions JSONL in and out, and the results file pins
//! the set by digest.

use flux_score::{
    discover, predictions, results, run_score, select::Selection, AnswerSource, Instance,
    ScoreError, ScoreOptions,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn starter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../instances")
}

fn starter_instances() -> Vec<Instance> {
    discover(&[starter()]).expect("the starter set is readable")
}

/// Every harvested starter instance answered with its gold (what `flux eval --model oracle`
/// writes), under `dir`.
fn oracle_answers(dir: &Path) -> usize {
    let mut n = 0;
    for i in starter_instances() {
        let Some(gold) = &i.oracle else { continue };
        let d = dir.join(&i.rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("answer.json"), gold.to_string()).unwrap();
        n += 1;
    }
    n
}

/// A one-instance set `demo/demo-one` (not a starter instance) under `root`.
fn one_instance_set(root: &Path, extra_toml: &str) {
    let d = root.join("demo/demo-one");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("instance.toml"),
        format!(
            "id = \"demo-one\"\nrepository = \"demo\"\nkind = \"S2_Loops\"\nquestion = \"q\"\n\
             template = '{{\"n\": \"int\"}}'\n{extra_toml}"
        ),
    )
    .unwrap();
    std::fs::write(
        d.join("oracle.json"),
        json!({"question_kind": "S2_Loops", "oracle_answer": {"n": 3}}).to_string(),
    )
    .unwrap();
}

fn opts(answers: &Path, roots: &[PathBuf]) -> ScoreOptions {
    let mut o = ScoreOptions::new(answers);
    o.instances = roots.to_vec();
    o
}

#[test]
fn score_refuses_answers_that_match_no_instance() {
    // The outside user's case: answers of one set scored against another printed
    // "0.0 % (0/1)" and never said that none of the answers belonged to the set.
    let t = tempfile::tempdir().unwrap();
    let answers = t.path().join("answers");
    let n = oracle_answers(&answers);
    let other = t.path().join("other");
    one_instance_set(&other, "");
    let e = run_score(&opts(&answers, std::slice::from_ref(&other))).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ScoreError::Unmatched(_)), "{e:?}");
    for want in [
        format!("{n} answer(s) match no instance of {}", other.display()),
        "(1 instances)".to_string(),
        starter_instances()[0].key(),
        "--allow-unmatched".to_string(),
        format!("… {} more", n - 5),
    ] {
        assert!(msg.contains(&want), "{want:?} not in: {msg}");
    }

    // A subset of the right set is refused too: the other repositories' answers match nothing.
    let sympy = starter().join("sympy");
    let e = run_score(&opts(&answers, &[sympy]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cfn-lint/"), "{e}");
    assert!(!e.contains("sympy/"), "{e}");
}

#[test]
fn allow_unmatched_scores_and_lists_them() {
    let t = tempfile::tempdir().unwrap();
    let answers = t.path().join("answers");
    let n = oracle_answers(&answers);
    let other = t.path().join("other");
    one_instance_set(&other, "");
    let mut o = opts(&answers, std::slice::from_ref(&other));
    o.allow_unmatched = true;
    let out = run_score(&o).unwrap();
    let r = &out.report;
    assert_eq!((r.total, r.passed), (1, 0));
    assert_eq!(r.unmatched_answers.len(), n);
    assert_eq!(r.scored_against, vec![other.display().to_string()]);
    assert!(out.rendered.contains(&format!(
        "scored against {} (set {}), all instances; 1 of 1 without an answer",
        other.display(),
        other.display()
    )));
    assert!(
        out.rendered
            .contains(&format!("{n} answer(s) match no instance of the set")),
        "{}",
        out.rendered
    );
    assert_eq!(out.results.runs[0].unmatched_answers.len(), n);
}

#[test]
fn matching_answers_score_every_instance() {
    let t = tempfile::tempdir().unwrap();
    let answers = t.path().join("answers");
    let n = oracle_answers(&answers);
    let out = run_score(&opts(&answers, &[starter()])).unwrap();
    assert_eq!((out.report.total, out.report.passed), (n, n));
    assert!(out.report.unmatched_answers.is_empty());
}

/// (key, value) of every starter instance, read from instance.toml here, not by the scorer.
fn starter_field(key: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for repo in std::fs::read_dir(starter()).unwrap().flatten() {
        let Ok(rd) = std::fs::read_dir(repo.path()) else {
            continue;
        };
        for inst in rd.flatten() {
            let Ok(text) = std::fs::read_to_string(inst.path().join("instance.toml")) else {
                continue;
            };
            let t: toml::Table = text.parse().unwrap();
            let rel = format!(
                "{}/{}",
                repo.file_name().to_string_lossy(),
                inst.file_name().to_string_lossy()
            );
            v.push((rel, t[key].as_str().unwrap().to_string()));
        }
    }
    v.sort();
    v
}

fn keys(v: &[Instance]) -> Vec<String> {
    v.iter().map(Instance::key).collect()
}

#[test]
fn filters_select_any_value_of_a_key_and_every_key() {
    let kinds = starter_field("kind");
    let repos = starter_field("repository");
    let sel = Selection::parse(
        &[
            "kind=S2_Loops,kind=M2_Loops".into(),
            "repository=sympy".into(),
        ],
        None,
    )
    .unwrap();
    let got = keys(&sel.apply(starter_instances()).unwrap());
    let want: Vec<String> = kinds
        .iter()
        .zip(&repos)
        .filter(|((_, k), (_, r))| (k == "S2_Loops" || k == "M2_Loops") && r == "sympy")
        .map(|((rel, _), _)| rel.clone())
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    assert_eq!(
        sel.describe(),
        "kind=S2_Loops,kind=M2_Loops,repository=sympy"
    );

    // id: the id or repo/id; split: the starter set's instances are all `test`.
    let sel = Selection::parse(
        &[
            "id=sympy-ibin-coverage".into(),
            "id=yt-dlp/ytdlp-parse-duration-path".into(),
            "split=test".into(),
        ],
        None,
    )
    .unwrap();
    assert_eq!(
        keys(&sel.apply(starter_instances()).unwrap()),
        [
            "sympy/sympy-ibin-coverage",
            "yt-dlp/ytdlp-parse-duration-path"
        ]
    );
}

#[test]
fn limit_keeps_the_first_harvested_instances_in_key_order() {
    let all = keys(&starter_instances());
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "discovery is in repo/id order");
    let sel = Selection::parse(&["repository=yt-dlp".into()], Some(3)).unwrap();
    let want: Vec<String> = starter_field("repository")
        .into_iter()
        .filter(|(_, r)| r == "yt-dlp")
        .map(|(rel, _)| rel)
        .take(3)
        .collect();
    assert_eq!(keys(&sel.apply(starter_instances()).unwrap()), want);

    // An instance without gold never counts towards the limit.
    let t = tempfile::tempdir().unwrap();
    one_instance_set(t.path(), "");
    let d = t.path().join("a/a-unharvested");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("instance.toml"),
        "id = \"a-unharvested\"\nkind = \"S2_Loops\"\n",
    )
    .unwrap();
    let found = discover(&[t.path().to_path_buf()]).unwrap();
    assert_eq!(keys(&found), ["a/a-unharvested", "demo/demo-one"]);
    let one = Selection::parse(&[], Some(1))
        .unwrap()
        .apply(found)
        .unwrap();
    assert_eq!(keys(&one), ["demo/demo-one"]);
}

#[test]
fn filter_mistakes_are_errors_that_say_what_there_is() {
    let cases: &[(&[&str], Option<usize>, &str)] = &[
        (
            &["knd=S2_Loops"],
            None,
            "unknown key \"knd\" (keys: kind, repository, split, id)",
        ),
        (&["S2_Loops"], None, "expected key=value"),
        (&["kind="], None, "empty value"),
        (&[], Some(0), "--limit 0: must be at least 1"),
        (
            &["kind=S9_Nothing"],
            None,
            "--filter kind=S9_Nothing: no instance has it",
        ),
        (&["split=train"], None, "have split test)"),
        (
            &["repository=jvm", "kind=S2_Loops"],
            None,
            "the selection kind=S2_Loops,repository=jvm keeps none of the",
        ),
    ];
    for (filters, limit, want) in cases {
        let filters: Vec<String> = filters.iter().map(|s| s.to_string()).collect();
        let e = Selection::parse(&filters, *limit)
            .and_then(|s| s.apply(starter_instances()))
            .map(|v| keys(&v))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(want),
            "{filters:?} {limit:?}: {want:?} not in {e:?}"
        );
    }
    // A value no instance has: the error lists the values there are.
    let mut repos: Vec<String> = starter_field("repository")
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    repos.sort();
    repos.dedup();
    let e = Selection::parse(&["repository=numpy".into()], None)
        .unwrap()
        .apply(starter_instances())
        .map(|v| keys(&v))
        .unwrap_err()
        .to_string();
    let want = format!(
        "have repository {}",
        repos[..repos.len().min(12)].join(", ")
    );
    assert!(e.contains(&want), "{want:?} not in {e:?}");
}

#[test]
fn split_comes_from_generated_else_variant_else_test() {
    let t = tempfile::tempdir().unwrap();
    one_instance_set(
        &t.path().join("gen"),
        "[generated]\nset = \"my-set\"\nsplit = \"train\"\n",
    );
    one_instance_set(&t.path().join("var"), "[variant]\norigin = \"x\"\n");
    one_instance_set(&t.path().join("plain"), "");
    let split = |sub: &str| {
        let i = &discover(&[t.path().join(sub)]).unwrap()[0];
        (i.split.clone(), i.set.clone())
    };
    assert_eq!(split("gen"), ("train".into(), Some("my-set".into())));
    assert_eq!(split("var"), ("variants".into(), None));
    assert_eq!(split("plain"), ("test".into(), None));
    let gen = discover(&[t.path().join("gen")]).unwrap();
    assert_eq!(results::set_name(&[t.path().join("gen")], &gen), "my-set");
}

// ---------------------------------------------------------------------------------------------
// Predictions JSONL

fn write_preds(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("preds.jsonl");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn predictions_round_trip_scores_like_the_answers_directory() {
    let t = tempfile::tempdir().unwrap();
    let answers = t.path().join("answers");
    oracle_answers(&answers);
    // One wrong answer and one missing, so that the round trip has failures to keep.
    let insts = starter_instances();
    std::fs::write(answers.join(&insts[0].rel).join("answer.json"), "{}").unwrap();
    std::fs::remove_dir_all(answers.join(&insts[1].rel)).unwrap();
    std::fs::write(
        answers.join(&insts[2].rel).join("meta.json"),
        r#"{"model": "m-1", "status": "ok"}"#,
    )
    .unwrap();

    let mut buf = Vec::new();
    let n = predictions::write(&insts, &answers, 1 << 20, &mut buf).unwrap();
    assert_eq!(n, insts.len() - 1);
    let text = String::from_utf8(buf).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first, json!({"instance_id": insts[0].id, "answer": {}}));
    assert!(text.contains(r#""model_name_or_path":"m-1""#), "{text}");
    let preds = write_preds(t.path(), &text);

    let from_dir = run_score(&opts(&answers, &[starter()])).unwrap().report;
    let mut o = opts(&answers, &[starter()]);
    o.answers.clear();
    o.predictions = vec![preds.clone()];
    let from_preds = run_score(&o).unwrap();
    let verdicts = |r: &flux_score::Report| -> Vec<(String, String)> {
        r.instances
            .iter()
            .map(|i| (i.id.clone(), format!("{:?} {:?}", i.status, i.reason)))
            .collect()
    };
    assert_eq!(verdicts(&from_preds.report), verdicts(&from_dir));
    assert_eq!(from_preds.report.passed, insts.len() - 2);
    assert_eq!(from_preds.report.answers, preds.display().to_string());
    assert_eq!(from_preds.results.runs[0].source, "predictions");
    assert_eq!(from_preds.results.runs[0].models, ["m-1"]);
}

#[test]
fn bad_prediction_lines_are_errors_naming_the_line() {
    let t = tempfile::tempdir().unwrap();
    let ok = r#"{"instance_id": "sympy-ibin-coverage", "answer": {}}"#;
    let cases: &[(String, &str)] = &[
        (format!("{ok}\n\n{{not json\n"), ":3: not JSON"),
        (format!("[1]\n{ok}\n"), ":1: not a JSON object"),
        ("{\"answer\": {}}\n".into(), ":1: no `instance_id`"),
        ("{\"instance_id\": 7, \"answer\": {}}\n".into(), ":1: `instance_id` is not"),
        ("{\"instance_id\": \"x\"}\n".into(), ":1: x: no `answer`"),
        (
            format!("{ok}\n{ok}\n"),
            ":2: duplicate instance_id sympy-ibin-coverage (first on line 1)",
        ),
        (
            format!("{ok}\n{{\"instance_id\": \"sympy/sympy-ibin-coverage\", \"answer\": 1}}\n"),
            ":2: instance_id sympy/sympy-ibin-coverage names sympy/sympy-ibin-coverage a second time",
        ),
        (
            format!("{ok}\n{{\"instance_id\": \"y\", \"answer\": \"{}\"}}\n", "x".repeat(300)),
            ":2: longer than the answer size limit of 200 bytes",
        ),
        (
            "{\"instance_id\": \"x\", \"answer\": 1, \"model_name_or_path\": 3}\n".into(),
            ":1: `model_name_or_path` is not a string",
        ),
    ];
    for (text, want) in cases {
        let p = write_preds(t.path(), text);
        let mut o = opts(t.path(), &[starter()]);
        o.answers.clear();
        o.predictions = vec![p];
        o.max_answer_bytes = 200;
        let e = run_score(&o).unwrap_err();
        assert!(matches!(e, ScoreError::Predictions(_)), "{text}: {e:?}");
        let e = e.to_string();
        assert!(e.contains(want), "{text}: {want:?} not in {e:?}");
    }
}

#[test]
fn predictions_that_match_no_instance_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let p = write_preds(
        t.path(),
        "{\"instance_id\": \"sympy-ibin-coverage\", \"answer\": {}}\n\
         {\"instance_id\": \"django__django-11099\", \"answer\": {}, \"model_name_or_path\": \"m\"}\n",
    );
    let mut o = opts(t.path(), &[starter()]);
    o.answers.clear();
    o.predictions = vec![p.clone()];
    let e = run_score(&o).unwrap_err().to_string();
    assert!(
        e.contains("1 answer(s) match no instance of") && e.contains("django__django-11099"),
        "{e}"
    );
    o.allow_unmatched = true;
    let r = run_score(&o).unwrap().report;
    assert_eq!(r.unmatched_answers, ["django__django-11099"]);
    let src = AnswerSource::Predictions(predictions::read(&p, 1 << 20).unwrap());
    assert_eq!(src.unmatched(&starter_instances()).unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Results file

#[test]
fn results_digest_pins_the_instances_and_their_gold() {
    let t = tempfile::tempdir().unwrap();
    one_instance_set(&t.path().join("a"), "");
    let set = |sub: &str| discover(&[t.path().join(sub)]).unwrap();
    let d1 = results::digest(&set("a"));
    assert!(d1.starts_with("sha256:") && d1.len() == 7 + 64, "{d1}");
    // The same gold elsewhere: the same digest; in another order: the same digest.
    one_instance_set(&t.path().join("b"), "");
    assert_eq!(results::digest(&set("b")), d1);
    let mut two = starter_instances();
    let d = results::digest(&two);
    two.reverse();
    assert_eq!(results::digest(&two), d);
    // One byte of gold changed: another digest.
    let oracle = t.path().join("b/demo/demo-one/oracle.json");
    let text = std::fs::read_to_string(&oracle).unwrap().replace('3', "4");
    std::fs::write(&oracle, text).unwrap();
    assert_ne!(results::digest(&set("b")), d1);
}

#[test]
fn results_record_flux_the_set_the_selection_and_the_eval_settings() {
    let t = tempfile::tempdir().unwrap();
    let answers = t.path().join("answers");
    oracle_answers(&answers);
    let insts = starter_instances();
    let meta = json!({"model": "m-1", "api": "openai", "mode": "context", "status": "ok",
        "params": {"temperature": 0.0, "max_tokens": null}});
    std::fs::write(
        answers.join(&insts[0].rel).join("meta.json"),
        meta.to_string(),
    )
    .unwrap();
    std::fs::write(
        answers.join("summary.json"),
        json!({"model": "m-1", "api": "openai", "samples": 1,
            "infra_error_instances": ["x"]})
        .to_string(),
    )
    .unwrap();
    let mut o = opts(&answers, &[starter()]);
    o.selection = Selection::parse(&["repository=cfn-lint".into()], Some(4)).unwrap();
    o.flux_commit = Some("abc123".into());
    let r = run_score(&o).unwrap().results;
    let cfn: Vec<Instance> = insts
        .iter()
        .filter(|i| i.repository == "cfn-lint")
        .take(4)
        .cloned()
        .collect();
    assert_eq!(r.flux_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(r.flux_commit.as_deref(), Some("abc123"));
    assert!(r.date.ends_with('Z') && r.date.len() == 20, "{}", r.date);
    assert_eq!(r.set.instances, 4);
    assert_eq!(r.set.digest, results::digest(&cfn));
    assert_eq!(r.set.roots, [starter().display().to_string()]);
    assert_eq!(r.selection.describe(), "repository=cfn-lint limit 4");
    let run = &r.runs[0];
    assert_eq!((run.total, run.passed), (4, 4));
    assert_eq!(run.source, "answers_dir");
    assert_eq!(
        run.generation,
        [json!({"model": "m-1", "api": "openai", "mode": "context",
            "params": {"temperature": 0.0, "max_tokens": null}})]
    );
    assert_eq!(run.eval["samples"], 1);
    assert!(run.eval.get("infra_error_instances").is_none());

    let file = t.path().join("out/results.json");
    results::write(&file, &r).unwrap();
    let back: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(back["set"]["digest"], json!(r.set.digest));
    assert_eq!(back["selection"]["limit"], 4);
    assert_eq!(back["runs"][0]["accuracy"], 1.0);
}

#[test]
fn score_refuses_an_answers_directory_that_holds_no_answers() {
    // `--answers answers` for `answers/<model>`: every instance would be "no answer".
    let t = tempfile::tempdir().unwrap();
    let answers = t.path().join("answers");
    oracle_answers(&answers.join("oracle"));
    let e = run_score(&opts(&answers, &[starter()]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("answers: holds no answers") && e.contains("answers/<model>"),
        "{e}"
    );
    let mut o = opts(&answers, &[starter()]);
    o.allow_unmatched = true;
    assert_eq!(run_score(&o).unwrap().report.passed, 0);
    // An empty predictions file likewise.
    let p = write_preds(t.path(), "\n");
    o.allow_unmatched = false;
    o.answers.clear();
    o.predictions = vec![p];
    let e = run_score(&o).unwrap_err().to_string();
    assert!(e.contains("preds.jsonl: holds no answers"), "{e}");
}
