//! `flux eval` → `flux score` on the committed starter set `instances/` with the oracle solver
//! (no network, no Docker): answers that match no instance are refused, `--filter`/`--limit`
//! select the same instances on both commands, the results file, predictions JSONL out and in.
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn starter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../instances")
}

struct Run(Output, String);

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    fn code(self, want: i32) -> Run {
        assert_eq!(
            self.0.status.code(),
            Some(want),
            "flux {}\n--- stdout\n{}--- stderr\n{}",
            self.1,
            self.stdout(),
            self.stderr()
        );
        self
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout()).unwrap_or_else(|e| panic!("{e}: {}", self.stdout()))
    }
}

/// `flux ARGS` in `dir`, without API keys.
fn flux(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(args)
        .current_dir(dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .expect("run flux");
    Run(out, args.join(" "))
}

/// `flux eval --model oracle` over the starter set into `<dir>/answers`, with `extra` args.
fn oracle_eval(dir: &Path, extra: &[&str]) -> Run {
    let root = starter().display().to_string();
    let mut args = vec![
        "eval",
        "--model",
        "oracle",
        "--quiet",
        "--instances",
        &root,
        "--out",
        "answers",
    ];
    args.extend_from_slice(extra);
    flux(dir, &args).code(0)
}

/// `<repo>/<id>` of every answer directory under `<dir>/answers`, sorted.
fn answered(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for repo in std::fs::read_dir(dir.join("answers")).unwrap().flatten() {
        if !repo.path().is_dir() {
            continue;
        }
        for inst in std::fs::read_dir(repo.path()).unwrap().flatten() {
            v.push(format!(
                "{}/{}",
                repo.file_name().to_string_lossy(),
                inst.file_name().to_string_lossy()
            ));
        }
    }
    v.sort();
    v
}

/// `<repo>/<id>` of every instance of a JSON score report, in report order.
fn scored(report: &Value) -> Vec<String> {
    report["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["repo"].as_str().unwrap(),
                i["id"].as_str().unwrap()
            )
        })
        .collect()
}

/// A one-instance set `<dir>/other/demo/demo-one`.
fn other_set(dir: &Path) {
    let d = dir.join("other/demo/demo-one");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("instance.toml"),
        "id = \"demo-one\"\nrepository = \"demo\"\nkind = \"S2_Loops\"\nquestion = \"q\"\n",
    )
    .unwrap();
    std::fs::write(
        d.join("oracle.json"),
        r#"{"question_kind": "S2_Loops", "oracle_answer": {"n": 3}}"#,
    )
    .unwrap();
}

#[test]
fn score_refuses_answers_that_match_no_instance() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    oracle_eval(dir, &[]);
    let n = answered(dir).len();
    other_set(dir);
    let run = flux(
        dir,
        &["score", "--answers", "answers", "--instances", "other"],
    )
    .code(2);
    let err = run.stderr();
    for want in [
        format!("answers: {n} answer(s) match no instance of other (1 instances)"),
        answered(dir)[0].clone(),
        "--allow-unmatched".into(),
    ] {
        assert!(err.contains(&want), "{want:?} not in:\n{err}");
    }
    assert!(!run.stdout().contains("0.0"), "{}", run.stdout());

    let run = flux(
        dir,
        &[
            "score",
            "--answers",
            "answers",
            "--instances",
            "other",
            "--allow-unmatched",
        ],
    )
    .code(0);
    assert!(
        run.stdout()
            .contains("scored against other (set other), all instances; 1 of 1 without an answer"),
        "{}",
        run.stdout()
    );
    assert!(
        run.stdout()
            .contains(&format!("{n} answer(s) match no instance of the set")),
        "{}",
        run.stdout()
    );
}

#[test]
fn eval_and_score_select_the_same_instances() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let sel = [
        "--filter",
        "repository=sympy,repository=yt-dlp",
        "--filter",
        "kind=S2_Loops",
        "--filter",
        "kind=M2_Loops,kind=S3_ProgramState",
        "--limit",
        "3",
    ];
    let run = oracle_eval(dir, &sel);
    assert!(
        run.stdout().contains(
            "selection: kind=S2_Loops,kind=M2_Loops,kind=S3_ProgramState,repository=sympy,repository=yt-dlp limit 3"
        ),
        "{}",
        run.stdout()
    );
    let asked = answered(dir);
    assert_eq!(asked.len(), 3, "{asked:?}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("answers/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["selection"]["limit"], 3);
    assert_eq!(summary["instances"], 3);

    let root = starter().display().to_string();
    let mut args = vec![
        "score",
        "--answers",
        "answers",
        "--instances",
        &root,
        "--format",
        "json",
    ];
    args.extend_from_slice(&sel);
    let report = flux(dir, &args).code(0).json();
    assert_eq!(scored(&report), asked);
    assert_eq!(
        (report["total"].as_u64(), report["passed"].as_u64()),
        (Some(3), Some(3))
    );

    // Without the selection, the other instances score as unanswered: 3 of all.
    let all = flux(
        dir,
        &[
            "score",
            "--answers",
            "answers",
            "--instances",
            &root,
            "--format",
            "json",
        ],
    )
    .code(0)
    .json();
    assert_eq!(all["passed"], 3);
    let total = all["total"].as_u64().unwrap();
    assert!(total > 3);
    let text = flux(
        dir,
        &["score", "--answers", "answers", "--instances", &root],
    )
    .code(0);
    let want = format!("all instances; {} of {total} without an answer", total - 3);
    assert!(
        text.stdout().contains(&want),
        "{want:?}:\n{}",
        text.stdout()
    );
}

#[test]
fn selection_mistakes_are_errors_on_eval_and_score() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    std::fs::create_dir_all(dir.join("answers")).unwrap();
    let root = starter().display().to_string();
    for cmd in [
        vec!["eval", "--model", "oracle", "--quiet"],
        vec!["score", "--answers", "answers"],
    ] {
        for (filter, want) in [
            (
                "knd=S2_Loops",
                "unknown key \"knd\" (keys: kind, repository, split, id)",
            ),
            ("split=train", "--filter split=train: no instance has it"),
            ("id=nope", "--filter id=nope: no instance has it"),
        ] {
            let mut args = cmd.clone();
            args.extend_from_slice(&["--instances", &root, "--filter", filter]);
            let run = flux(dir, &args).code(2);
            assert!(run.stderr().contains(want), "{want:?}:\n{}", run.stderr());
        }
    }
    assert!(!dir.join("answers/summary.json").exists());
}

#[test]
fn score_writes_a_results_file_beside_the_answers_or_where_asked() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    oracle_eval(dir, &["--filter", "repository=cfn-lint"]);
    let root = starter().display().to_string();
    let run = flux(
        dir,
        &[
            "score",
            "--answers",
            "answers",
            "--instances",
            &root,
            "--filter",
            "repository=cfn-lint",
        ],
    )
    .code(0);
    assert!(
        run.stderr()
            .contains("results written to answers/results.json"),
        "{}",
        run.stderr()
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("answers/results.json")).unwrap())
            .unwrap();
    assert_eq!(r["flux_version"], env!("CARGO_PKG_VERSION"));
    let commit = &r["flux_commit"];
    assert!(
        commit.is_null()
            || commit
                .as_str()
                .is_some_and(|c| c.len() == 40 && c.chars().all(|x| x.is_ascii_hexdigit())),
        "{commit}"
    );
    assert!(r["set"]["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(r["selection"]["filters"]["repository"][0], "cfn-lint");
    let run0 = &r["runs"][0];
    assert_eq!(run0["models"][0], "oracle");
    assert_eq!(run0["generation"][0]["model"], "oracle");
    assert_eq!(run0["eval"]["model"], "oracle");
    assert_eq!(run0["accuracy"], 1.0);
    assert_eq!(run0["total"], r["set"]["instances"]);

    flux(
        dir,
        &[
            "score",
            "--answers",
            "answers",
            "--instances",
            &root,
            "--filter",
            "repository=cfn-lint",
            "--results",
            "out/r.json",
        ],
    )
    .code(0);
    let r2: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/r.json")).unwrap()).unwrap();
    assert_eq!(r2["set"]["digest"], r["set"]["digest"]);
}

#[test]
fn predictions_out_and_in_score_as_the_answers_directory() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    oracle_eval(dir, &[]);
    let root = starter().display().to_string();
    let from_dir = flux(
        dir,
        &[
            "score",
            "--answers",
            "answers",
            "--instances",
            &root,
            "--format",
            "json",
            "--write-predictions",
            "preds.jsonl",
        ],
    )
    .code(0);
    let lines = std::fs::read_to_string(dir.join("preds.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), answered(dir).len());
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["model_name_or_path"], "oracle");
    let from_preds = flux(
        dir,
        &[
            "score",
            "--predictions",
            "preds.jsonl",
            "--instances",
            &root,
            "--format",
            "json",
        ],
    )
    .code(0);
    assert_eq!(scored(&from_preds.json()), scored(&from_dir.json()));
    assert_eq!(from_preds.json()["passed"], from_dir.json()["passed"]);
    assert!(dir.join("preds.jsonl.results.json").is_file());

    let dup = format!("{lines}{}", lines.lines().next().unwrap());
    std::fs::write(dir.join("dup.jsonl"), dup).unwrap();
    let n = lines.lines().count() + 1;
    let run = flux(
        dir,
        &["score", "--predictions", "dup.jsonl", "--instances", &root],
    )
    .code(2);
    assert!(
        run.stderr()
            .contains(&format!("dup.jsonl:{n}: duplicate instance_id")),
        "{}",
        run.stderr()
    );
}
