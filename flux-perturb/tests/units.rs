//! Pure parts: reason classification, the answer-change criterion, the variant's instance.toml.
use flux_perturb::{answer_change, classify, variant};
use serde_json::json;

#[test]
fn harvest_errors_are_classified() {
    let c = |e: &str| classify(e).0;
    assert_eq!(
        c("instance sympy/x--v1: the test was expected to pass but exited with code 1\n  stdout"),
        "test-outcome"
    );
    assert_eq!(
        classify(
            "instance sympy/x--v1: the test was expected to pass but exited with code 1\n  more"
        )
        .1,
        "the test was expected to pass but exited with code 1"
    );
    assert_eq!(
        c("instance a/b: the test timed out after 300s (test.timeout_s) and was killed"),
        "timeout"
    );
    assert_eq!(
        c("instance a/b: the trace is incomplete (3 events lost)"),
        "incomplete-trace"
    );
    assert_eq!(
        c("instance a/b: screened out: answer size 1 is below the minimum 3"),
        "screened"
    );
    assert_eq!(
        c("instance a/b: the answer does not fit the template at /x"),
        "template"
    );
    assert_eq!(
        c("instance a/b: extractor `executed_path`: function not called"),
        "extractor"
    );
    assert_eq!(c("something else"), "harvest");
}

#[test]
fn a_change_is_what_the_scorer_would_mark_wrong() {
    let a = json!({"executed_path": [{"line": 1}, {"line": 2}]});
    assert!(answer_change(&a, &a, &[]).is_none());
    let b = json!({"executed_path": [{"line": 1}, {"line": 3}]});
    assert!(answer_change(&b, &a, &[])
        .unwrap()
        .contains("/executed_path/1/line"));
    // order-insensitive lists: a permutation is no change
    let x = json!({"covered_lines": [3, 1, 2]});
    let y = json!({"covered_lines": [1, 2, 3]});
    assert!(answer_change(&x, &y, &[]).is_some());
    assert!(answer_change(&x, &y, &["/covered_lines".into()]).is_none());
    // floats within the scorer's tolerance are no change
    assert!(answer_change(&json!({"v": 1.0}), &json!({"v": 1.0000000001}), &[]).is_none());
}

#[test]
fn the_variant_toml_keeps_everything_but_the_id_and_adds_the_table() {
    let origin = "# keep me\nid = \"a-b\"\nrepository = \"r\"\nquestion = \"\"\"\nline one\nline two\n\"\"\"\n\n[extractor]\nname = \"x\"\n";
    let info = variant::VariantInfo {
        origin: "a-b".into(),
        seed: 4,
        proposer: "ast".into(),
        mutations: vec![
            "t.py:1:1 test_x int+1: 1 -> 2".into(),
            "t.py:2:1 test_x bool-flip: True -> False".into(),
        ],
        relaxed_assertions: vec![],
    };
    let out = variant::variant_toml(origin, "a-b--v4", &info).unwrap();
    assert!(out.starts_with("# keep me\nid = \"a-b--v4\"\n"), "{out}");
    assert!(
        out.contains("question = \"\"\"\nline one\nline two\n\"\"\"\n"),
        "{out}"
    );
    assert!(
        out.contains("[variant]\norigin = \"a-b\"\nseed = 4\nproposer = \"ast\"\n"),
        "{out}"
    );
    assert!(
        out.contains("mutations = [\n    \"t.py:1:1 test_x int+1: 1 -> 2\",\n"),
        "{out}"
    );
    let again = variant::variant_toml(&out, "a-b--v4", &info).unwrap();
    assert_eq!(again.matches("[variant]").count(), 1);
}
