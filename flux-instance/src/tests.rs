//! Unit tests of instance loading, static checks at load and the one oracle builder.
use super::*;
use flux_trace::{Event, Kind, Meta, Source, Trace};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory `<tmp>/flux-instance-<pid>-<n>`, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let d = std::env::temp_dir().join(format!(
            "flux-instance-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const GOOD: &str = r#"id = "sympy-add-flatten-path"
repository = "sympy"
package = "sympy==1.13.3"
image = "flux/sympy:1.13.3-py3.11"
interpreter = "/usr/bin/python3.11"
kind = "S1_IntraProceduralCFG"
question = "Which lines of Add.flatten run, in order?"
template = '{"executed_path": [{"line": "int"}]}'
order_insensitive = []

[test]
files = ["test_flatten.py"]
command = ["python3.11", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_flatten.py"]
expect = "pass"
timeout_s = 300

[tracing]
files = ["sympy/core/add.py"]
functions = ["Add.flatten"]

[extractor]
name = "executed_path"
params = { function = "Add.flatten", invocation = 1 }
"#;

/// Write an instance `root/<repo>/<id>` with `toml` and a test file; returns its directory.
fn make(root: &Path, repo: &str, id: &str, toml: &str) -> PathBuf {
    let d = root.join(repo).join(id);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(INSTANCE_FILE), toml).unwrap();
    std::fs::write(d.join("test_flatten.py"), "def test_x():\n    pass\n").unwrap();
    d
}

fn good(root: &Path) -> PathBuf {
    make(root, "sympy", "sympy-add-flatten-path", GOOD)
}

fn err_of(root: &Path, toml: &str) -> String {
    let d = make(root, "sympy", "sympy-add-flatten-path", toml);
    load_instance(&d).unwrap_err().to_string()
}

#[test]
fn a_good_instance_loads() {
    let s = Scratch::new();
    let inst = load_instance(good(&s.0)).unwrap();
    assert_eq!(inst.id(), "sympy-add-flatten-path");
    assert_eq!(inst.kind(), QuestionKind::S1);
    assert_eq!(inst.spec.test.expect, Expect::Pass);
    assert_eq!(inst.spec.tracing.functions, vec!["Add.flatten".to_string()]);
    assert_eq!(inst.params.get("invocation"), Some(&json!(1)));
    assert_eq!(inst.min_answer_size(), 3);
    assert!(inst.test_files()[0].ends_with("test_flatten.py"));
}

#[test]
fn unknown_fields_name_file_position_table_and_field() {
    let s = Scratch::new();
    let e = err_of(
        &s.0,
        &GOOD.replace(
            "files = [\"test_flatten.py\"]",
            "fles = [\"test_flatten.py\"]",
        ),
    );
    assert!(
        e.contains("instance.toml:12:1: field `test.fles`: unknown field `fles`"),
        "{e}"
    );
    let e = err_of(&s.0, &format!("colour = 1\n{GOOD}"));
    assert!(
        e.contains("instance.toml:1:1: field `colour`: unknown field `colour`"),
        "{e}"
    );
    let e = err_of(
        &s.0,
        &GOOD.replace("files = [\"sympy/core/add.py\"]", "file = [\"x\"]"),
    );
    assert!(
        e.contains("field `tracing.file`: unknown field `file`"),
        "{e}"
    );
    let e = err_of(
        &s.0,
        &GOOD.replace("kind = \"S1_IntraProceduralCFG\"", "kind = \"S9\""),
    );
    assert!(e.contains("field `kind`"), "{e}");
    let e = err_of(
        &s.0,
        &GOOD.replace("timeout_s = 300", "timeout_s = \"long\""),
    );
    assert!(e.contains("field `test.timeout_s`"), "{e}");
    let e = err_of(&s.0, &GOOD.replace("expect = \"pass\"\n", ""));
    assert!(e.contains("missing field `expect`"), "{e}");
}

/// `scope = "targets"` only with an extractor that reads inside targeted code, about a function
/// the config targets.
#[test]
fn scope_targets_needs_a_targeted_function_and_extractor() {
    let s = Scratch::new();
    let targets = GOOD.replace(
        "functions = [\"Add.flatten\"]",
        "functions = [\"Add.flatten\"]\nscope = \"targets\"",
    );
    let d = make(&s.0, "sympy", "sympy-add-flatten-path", &targets);
    assert_eq!(
        load_instance(&d).unwrap().spec.tracing.scope,
        flux_trace::Scope::Targets
    );
    let other = targets.replace(
        "params = { function = \"Add.flatten\", invocation = 1 }",
        "params = { function = \"Mul.flatten\" }",
    );
    let e = err_of(&s.0, &other);
    assert!(
        e.contains("field `tracing.functions`") && e.contains("`Mul.flatten`"),
        "{e}"
    );
    // Without scope "targets" the function must be targeted all the same: its lines are
    // recorded only in targeted code (17.11).
    let e = err_of(&s.0, &other.replace("scope = \"targets\"", ""));
    assert!(
        e.contains("field `extractor.params.function`: `Mul.flatten` is not targeted"),
        "{e}"
    );
    let nested = targets.replace(
        "params = { function = \"Add.flatten\", invocation = 1 }",
        "params = { function = \"Add.flatten.<locals>.f\" }",
    );
    assert!(load_instance(make(&s.0, "sympy", "sympy-add-flatten-path", &nested)).is_ok());
    let graph = targets
        .replace(
            "kind = \"S1_IntraProceduralCFG\"",
            "kind = \"S6_InterProceduralCFG\"",
        )
        .replace(
            r#"'{"executed_path": [{"line": "int"}]}'"#,
            r#"'{"call_graph": {"*": ["str"]}}'"#,
        )
        .replace("name = \"executed_path\"", "name = \"call_graph\"")
        .replace(
            "params = { function = \"Add.flatten\", invocation = 1 }",
            "params = {}",
        );
    let e = err_of(&s.0, &graph);
    assert!(
        e.contains("field `tracing.scope`") && e.contains("`call_graph`"),
        "{e}"
    );
    assert!(load_instance(make(
        &s.0,
        "sympy",
        "sympy-add-flatten-path",
        &graph.replace("scope = \"targets\"", "scope = \"tests\"")
    ))
    .is_ok());
}

#[test]
fn semantic_checks_name_the_field() {
    let s = Scratch::new();
    let cases = [
        (GOOD.replace("id = \"sympy-add-flatten-path\"", "id = \"other\""), "instance.toml:1:1: field `id`: `other` must equal the directory name"),
        (GOOD.replace("repository = \"sympy\"", "repository = \"numpy\""), "field `repository`"),
        (GOOD.replace("sympy==1.13.3", "sympy>=1.13"), "field `package`: `sympy>=1.13` is not pinned"),
        (GOOD.replace("files = [\"test_flatten.py\"]", "files = [\"nope.py\"]"), "instance.toml:12:1: field `test.files`: `nope.py` does not exist"),
        (GOOD.replace("files = [\"test_flatten.py\"]", "files = [\"../x.py\"]"), "field `test.files`: `../x.py` must be relative"),
        (GOOD.replace("name = \"executed_path\"", "name = \"exec_path\""), "field `extractor.name`: unknown extractor `exec_path`"),
        (GOOD.replace("invocation = 1", "invocaton = 1"), "instance.toml:23:1: field `extractor.params`: extractor `executed_path`: unknown parameter `invocaton`"),
        (GOOD.replace("kind = \"S1_IntraProceduralCFG\"", "kind = \"S2_Loops\""), "field `kind`: extractor `executed_path` serves S1_IntraProceduralCFG, S6_InterProceduralCFG, not S2_Loops"),
        (GOOD.replace(r#"'{"executed_path": [{"line": "int"}]}'"#, r#"'{"path": ["int"]}'"#), "field `template`: at /path: the extractor computes no `path` at / (it has: executed_path)"),
        (GOOD.replace(r#"'{"executed_path": [{"line": "int"}]}'"#, r#"'{"executed_path": [{"line": "integer"}]}'"#), "field `template`: at /executed_path/0/line: unknown type name"),
        (GOOD.replace("order_insensitive = []", "order_insensitive = [\"/executed_path/*/line\"]"), "field `order_insensitive`: `/executed_path/*/line` is not a list"),
        (GOOD.replace("order_insensitive = []", "order_insensitive = [\"/covered\"]"), "field `order_insensitive`: `/covered` is not a path"),
        // 17.10: a failure is told from a broken run by pytest's test records.
        (GOOD.replace("expect = \"pass\"", "expect = \"fail\"").replace("functions = [\"Add.flatten\"]", "functions = [\"Add.flatten\"]\ntests = false"), "instance.toml:14:1: field `test.expect`: \"fail\" is told from a broken run by pytest's test records"),
    ];
    for (toml, want) in cases {
        let e = err_of(&s.0, &toml);
        assert!(e.contains(want), "want {want:?} in {e}");
        assert!(e.contains("sympy-add-flatten-path/instance.toml"), "{e}");
    }
}

fn ev(ev: Kind, line: u32) -> Event {
    let mut e = Event::new(0, 1, 1, ev, Source::Hook);
    e.activation = 1;
    e.frame = 1;
    e.code_mut().qualname = "Add.flatten".into();
    e.code_mut().func = "flatten".into();
    e.line = line;
    e
}

/// What a container run of the harvest knows: its image and interpreter version.
fn facts(harvested_at: &str) -> RunFacts {
    RunFacts {
        harvested_at: harvested_at.into(),
        image_id: "sha256:abc".into(),
        image_identity: "flux-identity-v1:abc".into(),
        interpreter: "3.11.9".into(),
        trace_sha256: None,
        labels: Vec::new(),
    }
}

/// 15.4: the harvest built its oracles with a function of its own, not this tested one, and the
/// two differed: labels (the run's were lost), interpreter (the trace's `<path> (X.Y.Z)` instead
/// of `X.Y.Z`) and digest (computed again instead of taken while writing `trace.jsonl`).
#[test]
fn the_one_oracle_builder_takes_the_runs_facts() {
    let s = Scratch::new();
    let inst = load_instance(good(&s.0)).unwrap();
    let mut t = trace(&[101, 102, 104]);
    t.meta.interpreter = "/var/lib/docker/overlay2/x/diff/usr/bin/python3.11 (3.11.2)".into();
    let f = RunFacts {
        harvested_at: "2026-12-01T00:00:00Z".into(),
        image_id: "sha256:abc".into(),
        image_identity: "flux-identity-v1:abc".into(),
        interpreter: "3.11.2".into(),
        trace_sha256: Some("d".repeat(64)),
        labels: vec!["not reproducible".into(), "host run".into()],
    };
    let o = inst.build_oracle(&t, &f).unwrap();
    let p = &o.provenance;
    assert_eq!(p.interpreter, "3.11.2");
    assert_eq!(p.image_id, "sha256:abc");
    assert_eq!(p.trace_sha256, "d".repeat(64));
    assert_eq!(
        p.labels,
        ["not reproducible", "host run"],
        "the trace's, then the run's"
    );
    assert_eq!(p.harvested_at, "2026-12-01T00:00:00Z");
    let computed = inst
        .build_oracle(
            &t,
            &RunFacts {
                trace_sha256: None,
                ..f
            },
        )
        .unwrap();
    assert_eq!(computed.provenance.trace_sha256, trace_digest(&t));
}

/// An answer made by something other than the extractor (an imported SWE-Flux instance: their
/// parser on flux's log) passes the same gates: a small one is screened out, and a kept one
/// carries the run's provenance exactly as the extractor's would.
#[test]
fn an_answer_from_elsewhere_goes_through_the_oracle_builders_gates() {
    let s = Scratch::new();
    let inst = load_instance(good(&s.0)).unwrap();
    let t = trace(&[101, 102, 104]);
    let f = facts("2026-12-01T00:00:00Z");
    let small = json!({"executed_path": [101, 102]});
    let e = inst.oracle_for(small, &t, &f).unwrap_err().to_string();
    assert!(e.contains("screened out: answer size 2"), "{e}");
    let mine = inst.build_oracle(&t, &f).unwrap();
    let theirs = inst.oracle_for(mine.oracle_answer.clone(), &t, &f).unwrap();
    assert_eq!(theirs, mine);
}

fn trace(lines: &[u32]) -> Trace {
    let mut events = vec![ev(Kind::Call, 100)];
    events.extend(lines.iter().map(|&l| ev(Kind::Line, l)));
    events.push(ev(Kind::Return, *lines.last().unwrap_or(&100)));
    Trace {
        meta: Meta {
            complete: true,
            interpreter: "3.11.9".into(),
            labels: vec!["not reproducible".into()],
            ..Meta::default()
        },
        events,
        facts: Default::default(),
    }
}

#[test]
fn harvest_write_read_and_conflicts() {
    let s = Scratch::new();
    let inst = load_instance(good(&s.0)).unwrap();
    let oracle = inst
        .build_oracle(&trace(&[101, 102, 104]), &facts("2026-11-29T09:00:00Z"))
        .unwrap();
    assert_eq!(
        oracle.oracle_answer,
        json!({"executed_path": [{"line": 101}, {"line": 102}, {"line": 104}]})
    );
    assert_eq!(oracle.provenance.interpreter, "3.11.9");
    assert_eq!(oracle.provenance.image_id, "sha256:abc");
    assert_eq!(
        oracle.provenance.labels,
        vec!["not reproducible".to_string()]
    );
    assert_eq!(oracle.provenance.trace_sha256.len(), 64);
    assert!(oracle.provenance.complete);

    assert_eq!(
        write_oracle(&inst.dir, &oracle, OnConflict::Refuse).unwrap(),
        WriteOutcome::Created
    );
    let back = read_oracle(&inst.dir).unwrap();
    assert_eq!(back, oracle);
    // Same answer, later harvest: the file is left as it was.
    let mut again = oracle.clone();
    again.provenance.harvested_at = "2026-11-30T00:00:00Z".into();
    assert_eq!(
        write_oracle(&inst.dir, &again, OnConflict::Refuse).unwrap(),
        WriteOutcome::Unchanged
    );
    assert_eq!(
        read_oracle(&inst.dir).unwrap().provenance.harvested_at,
        "2026-11-29T09:00:00Z"
    );
    // A different answer is refused unless replacing is asked for.
    let other = inst
        .build_oracle(&trace(&[101, 103, 104]), &facts("2026-11-30T00:00:00Z"))
        .unwrap();
    let e = write_oracle(&inst.dir, &other, OnConflict::Refuse)
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds a different oracle answer"), "{e}");
    assert_eq!(read_oracle(&inst.dir).unwrap(), oracle);
    assert_eq!(
        write_oracle(&inst.dir, &other, OnConflict::Replace).unwrap(),
        WriteOutcome::Replaced
    );
    assert_eq!(read_oracle(&inst.dir).unwrap(), other);
    // 14.9: the replaced answer was kept only in a run directory, which is pruned; now it is in
    // the instance's history.
    let history: Vec<PathBuf> = std::fs::read_dir(inst.dir.join(HISTORY_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(history.len(), 1, "{history:?}");
    let name = history[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.ends_with("Z-oracle.json"), "{name}");
    let kept: Oracle =
        serde_json::from_str(&std::fs::read_to_string(&history[0]).unwrap()).unwrap();
    assert_eq!(kept, oracle);
    // Replaced again within the same second: a second file, the first kept.
    let third = inst
        .build_oracle(
            &trace(&[101, 102, 103, 104]),
            &facts("2026-12-01T00:00:00Z"),
        )
        .unwrap();
    write_oracle(&inst.dir, &third, OnConflict::Replace).unwrap();
    write_oracle(&inst.dir, &oracle, OnConflict::Replace).unwrap();
    assert_eq!(
        std::fs::read_dir(inst.dir.join(HISTORY_DIR))
            .unwrap()
            .count(),
        3
    );
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(&inst.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");

    let q = question_json(&other);
    let keys: Vec<&String> = q.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 3);
    assert!(q.get("oracle_answer").is_none());
    assert_eq!(q["question_kind"], json!("S1_IntraProceduralCFG"));
    assert_eq!(
        q["template_answer"],
        json!({"executed_path": [{"line": "int"}]})
    );
}

#[test]
fn harvest_refuses_small_incomplete_and_missing() {
    let s = Scratch::new();
    let inst = load_instance(good(&s.0)).unwrap();
    let e = inst
        .build_oracle(&trace(&[101, 102]), &facts("t"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "sympy-add-flatten-path: screened out: answer size 2 is below the minimum 3 for S1_IntraProceduralCFG"
    );
    let mut t = trace(&[101, 102, 103]);
    t.meta.complete = false;
    let e = inst.build_oracle(&t, &facts("t")).unwrap_err().to_string();
    assert!(e.contains("incomplete"), "{e}");
    let mut t = trace(&[101, 102, 103]);
    for e in &mut t.events {
        e.code_mut().qualname = "Mul.flatten".into();
    }
    let e = inst.build_oracle(&t, &facts("t")).unwrap_err().to_string();
    assert!(
        e.contains("function `Add.flatten` has 0 invocation(s)"),
        "{e}"
    );
}

#[test]
fn read_oracle_reports_bad_files() {
    let s = Scratch::new();
    let d = good(&s.0);
    std::fs::write(
        d.join(ORACLE_FILE),
        r#"{"question_kind": "S1_IntraProceduralCFG", "colour": 1}"#,
    )
    .unwrap();
    let e = read_oracle(&d).unwrap_err().to_string();
    assert!(
        e.contains("oracle.json:1:") && e.contains("field `colour`"),
        "{e}"
    );
    std::fs::write(
        d.join(ORACLE_FILE),
        serde_json::to_string(&json!({
            "question_kind": "S2_Loops", "question": "q",
            "template_answer": {"loop_iteration_count": "int"},
            "oracle_answer": {"loop_iteration_count": "3"},
            "provenance": {"image": "i", "interpreter": "3.11", "flux_version": "0.1.0",
                "trace_sha256": "00", "harvested_at": "t", "complete": true, "extractor": "loop_iterations"}
        }))
        .unwrap(),
    )
    .unwrap();
    let e = read_oracle(&d).unwrap_err().to_string();
    assert!(e.contains("field `oracle_answer`: does not fit template_answer at /loop_iteration_count: expected int"), "{e}");
    // An unreadable existing oracle is never silently replaced.
    let inst = load_instance(&d).unwrap();
    let o = inst
        .build_oracle(&trace(&[101, 102, 104]), &facts("t"))
        .unwrap();
    assert!(write_oracle(&d, &o, OnConflict::Refuse).is_err());
}

#[test]
fn discover_finds_instance_dirs() {
    let s = Scratch::new();
    good(&s.0);
    make(&s.0, "attrs", "attrs-one", "x");
    std::fs::create_dir_all(s.0.join("empty/dir")).unwrap();
    std::fs::create_dir_all(s.0.join(".hidden/x")).unwrap();
    std::fs::write(s.0.join(".hidden/x").join(INSTANCE_FILE), "").unwrap();
    let found = discover(&[&s.0]).unwrap();
    assert_eq!(
        found,
        vec![
            s.0.join("attrs/attrs-one"),
            s.0.join("sympy/sympy-add-flatten-path")
        ]
    );
    // A list of paths: an instance dir itself, a repository dir, duplicates removed.
    let found = discover(&[s.0.join("sympy/sympy-add-flatten-path"), s.0.join("sympy")]).unwrap();
    assert_eq!(found, vec![s.0.join("sympy/sympy-add-flatten-path")]);
    assert!(discover(&[s.0.join("missing")]).is_err());
}

#[test]
fn timestamps_and_digests() {
    use std::time::{Duration, UNIX_EPOCH};
    assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    assert_eq!(
        utc_timestamp(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(
        utc_timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)),
        "2000-02-29T00:00:00Z"
    );
    let a = trace_digest(&trace(&[1, 2]));
    assert_eq!(a, trace_digest(&trace(&[1, 2])));
    assert_ne!(a, trace_digest(&trace(&[1, 3])));
    // sha256 of the empty string: an empty trace serialises to nothing.
    assert_eq!(
        trace_digest(&Trace::default()),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

/// The source the suite's lines come from (static facts for the extractors that need them).
const SUITE_SOURCE: &str = "\n\n\n\n\n\n\n\n\n\
def f(n):
    r = 0
    for i in range(n):
        try: r = g(i)
        except ValueError: pass
        r = r
    return r



def g(x):
    return 1 if x else fail()
";

/// A small suite: two tests run f(n) (def 10), whose loop (header 12, body 13..15) calls g
/// (def 20); g raises ValueError for x=0, which f handles at 14. The hook checks `i >= 0` at
/// each loop header.
fn suite() -> Trace {
    use flux_extract::testkit::TraceBuilder;
    let mut tb = TraceBuilder::new().source(SUITE_SOURCE);
    for (test, n) in [("t.py::test_a", 2), ("t.py::test_b", 1)] {
        tb = tb
            .test(test)
            .call("f", 10, &[("n", &n.to_string())])
            .line(11, &[]);
        for i in 0..n {
            tb = tb
                .line(12, &[("i", &i.to_string())])
                .check(12, "i >= 0", Some(true), "")
                .line(13, &[])
                .call("g", 20, &[("x", &i.to_string())])
                .line(21, &[]);
            tb = if i == 0 {
                tb.raise("ValueError", "zero")
                    .unwind("ValueError", "zero")
                    .raise("ValueError", "zero")
                    .handled(14, "ValueError", "zero")
                    .line(15, &[])
            } else {
                tb.ret("1").line(15, &[("r", "1")])
            };
        }
        tb = tb.line(12, &[]).line(16, &[]).ret("None").end("passed");
    }
    tb.build()
}

#[test]
fn every_extractor_answer_fits_its_template() {
    let t = suite();
    let uses = json!({"12": ["n"], "13": ["i"], "16": ["r"]});
    let cases = [
        ("executed_path", json!({"function": "f"})),
        ("covered_lines", json!({"function": "f"})),
        ("coverage_across_tests", json!({"function": "f"})),
        (
            "coverage_across_tests",
            json!({"function": "f", "line": 15}),
        ),
        (
            "loop_iterations",
            json!({"function": "f", "header": 12, "body_end": 15}),
        ),
        (
            "loop_iterations_across_tests",
            json!({"function": "f", "header": 12, "body_end": 15}),
        ),
        ("state_at", json!({"function": "f", "line": 12})),
        (
            "state_across_tests",
            json!({"function": "f", "line": 12, "variable": "i"}),
        ),
        ("def_use_pairs", json!({"function": "f", "uses": uses})),
        (
            "def_use_across_tests",
            json!({"function": "f", "uses": uses}),
        ),
        ("exception_info", json!({"type": "ValueError"})),
        ("raising_tests", json!({"type": "ValueError"})),
        ("call_sequence", json!({"function": "f"})),
        ("callees_count", json!({"function": "f"})),
        ("callees_across_tests", json!({"function": "f"})),
        ("callers", json!({"function": "g"})),
        ("call_graph", json!({})),
        (
            "invariants_in_test",
            json!({"function": "f", "line": 12, "variable": "i"}),
        ),
        (
            "invariants_across_tests",
            json!({"function": "f", "line": 12, "variable": "i"}),
        ),
        ("line_counts", json!({"function": "f"})),
        ("line_classes", json!({"function": "f"})),
        (
            "loop_stats",
            json!({"function": "f", "header": 12, "body_end": 15}),
        ),
        (
            "iteration_value",
            json!({"function": "f", "header": 12, "variable": "i", "iteration": 2}),
        ),
        ("unique_values", json!({"function": "f", "variable": "i"})),
        ("value_history", json!({"function": "f", "variable": "i"})),
        ("state_snapshots", json!({"function": "f", "lines": [13]})),
        ("dead_defs", json!({"function": "f"})),
        ("caught_types", json!({"function": "f"})),
        ("exception_counts", json!({"function": "f"})),
        ("exception_events", json!({"function": "f"})),
        ("covered_functions", json!({"function": "f"})),
        ("invocation_counts", json!({"functions": ["f", "g"]})),
        ("predicate_report", json!({"function": "f"})),
    ];
    let mut covered: Vec<&str> = Vec::new();
    for (name, p) in cases {
        let params = flux_extract::params(p).unwrap();
        let ex = flux_extract::find(name).unwrap();
        // The extractor's usual template, compiled against its shape as an instance would be.
        let template = Template::parse((ex.template)(&params)).unwrap();
        let shape = Template::parse((ex.shape)(&params)).unwrap();
        let projection = crate::Projection::compile(&template, &shape, &Default::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let output =
            flux_extract::extract(&t, name, &params).unwrap_or_else(|e| panic!("{name}: {e}"));
        let answer = projection.apply(&output).unwrap();
        template
            .validate(&answer)
            .unwrap_or_else(|e| panic!("{name}: {answer} {e}"));
        assert!(flux_extract::answer_size(&answer) > 0, "{name}: {answer}");
        covered.push(name);
    }
    for ex in flux_extract::extractors() {
        assert!(covered.contains(&ex.name), "{} not exercised", ex.name);
    }
    // Spot checks worked out by hand: test_a runs the loop twice, test_b once.
    let p = flux_extract::params(json!({"function": "f", "header": 12, "body_end": 15})).unwrap();
    assert_eq!(
        flux_extract::extract(&t, "loop_iterations_across_tests", &p).unwrap(),
        json!({"min_iterations": 1, "max_iterations": 2,
               "tests_with_min": ["t.py::test_b"], "tests_with_max": ["t.py::test_a"]})
    );
    let p = flux_extract::params(json!({"function": "f"})).unwrap();
    assert_eq!(
        flux_extract::testkit::pick(
            &flux_extract::extract(&t, "call_sequence", &p).unwrap(),
            &json!({"call_sequence": [{"function": "", "line": 0}]})
        ),
        json!({"call_sequence": [{"function": "g", "line": 13}, {"function": "g", "line": 13}]})
    );
}

#[test]
fn call_graph_of_the_repositorys_code() {
    use flux_extract::testkit::TraceBuilder;
    let s = Scratch::new();
    let inst = load_instance(good(&s.0)).unwrap();
    assert_eq!(inst.call_graph_scope(), "sympy/");
    let add = "/usr/lib/python3.11/site-packages/sympy/core/add.py";
    let basic = "/usr/lib/python3.11/site-packages/sympy/core/basic.py";
    let t = TraceBuilder::new()
        .call_in("Add.flatten", add, 10, &[])
        .line(11, &[])
        .call_in("Basic.__hash__", basic, 5, &[])
        .ret("1")
        .call_in("deepcopy", "/usr/lib/python3.11/copy.py", 1, &[])
        .ret("None")
        .ret("None")
        .build();
    let g = inst.call_graph(&t).unwrap();
    assert_eq!(
        g,
        json!({"sympy.core.add.Add.flatten": ["sympy.core.basic.Basic.__hash__"]})
    );
    assert_eq!(
        write_call_graph(&inst.dir, &g, OnConflict::Refuse).unwrap(),
        WriteOutcome::Created
    );
    assert_eq!(read_call_graph(&inst.dir).unwrap(), g);
    assert_eq!(
        write_call_graph(&inst.dir, &g, OnConflict::Refuse).unwrap(),
        WriteOutcome::Unchanged
    );
    assert!(write_call_graph(&inst.dir, &json!({}), OnConflict::Refuse).is_err());
    assert_eq!(
        write_call_graph(&inst.dir, &json!({}), OnConflict::Replace).unwrap(),
        WriteOutcome::Replaced
    );
}

/// The JVM fixture's harvested callgraph.json was `{}`: the scope came from the package name
/// (`openjdk/`), which no JVM file (`fluxfixture/Main.java`) lies under. A JVM instance's scope
/// is its classes, and its graph names methods by package.
#[test]
fn a_jvm_instances_call_graph_scope_is_its_classes() {
    use flux_extract::testkit::TraceBuilder;
    let s = Scratch::new();
    let mut inst = load_instance(good(&s.0)).unwrap();
    inst.spec.tracing.classes = vec!["org.x.".into()];
    assert_eq!(inst.call_graph_scope(), "org/x/");
    let t = TraceBuilder::new()
        .call_in("Foo.bar", "org/x/Foo.java", 0, &[])
        .call_in("Foo.Inner.baz", "org/x/Foo.java", 0, &[])
        .ret("")
        .call_in("Util.go", "org/x/sub/Util.java", 0, &[])
        .ret("")
        .ret("")
        .build();
    assert_eq!(
        inst.call_graph(&t).unwrap(),
        json!({"org.x.Foo.bar": ["org.x.Foo.Inner.baz", "org.x.sub.Util.go"]})
    );
}

#[test]
fn a_variant_table_is_optional_and_checked() {
    let s = Scratch::new();
    let inst = load_instance(good(&s.0)).unwrap();
    assert!(inst.spec.variant.is_none());
    let with = format!(
        "{GOOD}\n[variant]\norigin = \"sympy-add-flatten\"\nseed = 7\nproposer = \"ast\"\n\
         mutations = [\"test_flatten.py:2:5 test_x int: 1 -> 2\"]\n\
         relaxed_assertions = [\"test_flatten.py:3 test_x\"]\n"
    );
    let d = make(&s.0, "sympy", "sympy-add-flatten-path", &with);
    let inst = load_instance(&d).unwrap();
    let v = inst.spec.variant.as_ref().unwrap();
    assert_eq!(
        (v.origin.as_str(), v.seed, v.proposer.as_str()),
        ("sympy-add-flatten", 7, "ast")
    );
    assert_eq!(v.mutations.len(), 1);
    let e = err_of(
        &s.0,
        &format!("{GOOD}\n[variant]\norigin = \"x\"\nseed = 1\ncolour = 2\n"),
    );
    assert!(
        e.contains("field `variant.colour`: unknown field `colour`"),
        "{e}"
    );
    let e = err_of(
        &s.0,
        &format!("{GOOD}\n[variant]\norigin = \"sympy-add-flatten-path\"\nseed = 1\n"),
    );
    assert!(e.contains("field `variant.origin`"), "{e}");
}

/// An instance chooses its answer's keys: `[extractor.answer]` maps template paths to the
/// extractor's fields, checked at load and applied at harvest.
#[test]
fn answer_bindings_shape_the_oracle() {
    let s = Scratch::new();
    let toml = GOOD
        .replace(
            r#"'{"executed_path": [{"line": "int"}]}'"#,
            r#"'{"lines": ["int"], "function": "str"}'"#,
        )
        + "\n[extractor.answer]\n\"/lines\" = \"/executed_path\"\n\"/lines/*\" = \"/executed_path/*/line\"\n\"/function\" = \"/executed_path/0/qualname\"\n";
    let inst = load_instance(make(&s.0, "sympy", "sympy-add-flatten-path", &toml)).unwrap();
    let o = inst
        .build_oracle(&trace(&[101, 102, 104]), &facts("t"))
        .unwrap();
    assert_eq!(
        o.oracle_answer,
        json!({"lines": [101, 102, 104], "function": "Add.flatten"})
    );
    // A binding to a field the extractor does not compute names the binding.
    let bad = toml.replace("/executed_path/*/line\"", "/executed_path/*/lineno\"");
    let e = err_of(&s.0, &bad);
    assert!(
        e.contains("field `extractor.answer`: at /lines/*: the extractor computes no `lineno`"),
        "{e}"
    );
    // A binding to a path the template does not have.
    let bad = toml.replace("\"/function\" =", "\"/func\" =");
    let e = err_of(&s.0, &bad);
    assert!(
        e.contains("at /func: is bound in [extractor.answer] but is not a path"),
        "{e}"
    );
}

/// 17.11: everything that can be checked before a container starts is checked at load, with
/// the file and line: parameter types, targeted functions and files, required parameters.
#[test]
fn static_checks_at_load_name_file_and_line() {
    let s = Scratch::new();
    let cases = [
        (
            GOOD.replace("invocation = 1", "invocation = \"first\""),
            "instance.toml:23:1: field `extractor.params`: extractor `executed_path`: parameter \
             `invocation`: expected an integer >= 1, got \"first\"",
        ),
        (
            GOOD.replace("invocation = 1", "invocation = 1, line_mode = \"stmt\""),
            "parameter `line_mode`: expected one of \"reported\", \"statement\", got \"stmt\"",
        ),
        (
            GOOD.replace("function = \"Add.flatten\"", "function = \"Mul.flatten\""),
            "field `extractor.params.function`: `Mul.flatten` is not targeted by [tracing] \
             functions [\"Add.flatten\"]",
        ),
        (
            GOOD.replace(
                "invocation = 1",
                "invocation = 1, file = \"sympy/core/mul.py\"",
            ),
            "field `extractor.params.file`: `sympy/core/mul.py` names no file targeted by \
             [tracing] files [\"sympy/core/add.py\"]",
        ),
        (
            GOOD.replace(
                "params = { function = \"Add.flatten\", invocation = 1 }",
                "params = { invocation = 1 }",
            ),
            "missing required parameter `function`",
        ),
        (
            GOOD.replace("invocation = 1", "invocation = 1, all_invocations = true"),
            "parameter `invocation`: expected not both `invocation` and `all_invocations`",
        ),
    ];
    for (toml, want) in cases {
        let e = err_of(&s.0, &toml);
        assert!(e.contains(want), "want {want:?} in {e}");
        assert!(e.contains("sympy-add-flatten-path/instance.toml"), "{e}");
    }
    // A targeted file given more precisely, and nested functions of a target, are fine.
    for ok in [
        GOOD.replace("invocation = 1", "invocation = 1, file = \"core/add.py\""),
        GOOD.replace(
            "function = \"Add.flatten\"",
            "function = \"Add.flatten.<locals>.key\"",
        ),
    ] {
        load_instance(make(&s.0, "sympy", "sympy-add-flatten-path", &ok)).unwrap();
    }
}

/// 17.11: a function name that matches code in several modules (a package's `_parse` and the
/// stdlib's `re._parser._parse`) is an error naming them, unless `file` says which. Before the
/// fix, the answer mixed both functions' invocations.
#[test]
fn ambiguous_function_names_are_refused_unless_file_says_which() {
    use flux_extract::testkit::TraceBuilder;
    let t = TraceBuilder::new()
        .test("t.py::test_a")
        .call_in("_parse", "/usr/lib/python3.11/re/_parser.py", 900, &[])
        .line(901, &[])
        .ret("None")
        .call("_parse", 10, &[])
        .line(11, &[])
        .ret("None")
        .end("passed")
        .build();
    let p = flux_extract::params(json!({"function": "_parse"})).unwrap();
    let e = flux_extract::extract(&t, "covered_lines", &p)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "extractor `covered_lines`: function `_parse` names code in 2 files \
         (/usr/lib/python3.11/re/_parser.py, /usr/lib/python3.11/site-packages/pkg/mod.py); \
         give `file` to say which"
    );
    let p = flux_extract::params(json!({"function": "_parse", "file": "pkg/mod.py"})).unwrap();
    assert_eq!(
        flux_extract::extract(&t, "covered_lines", &p).unwrap(),
        json!({"covered_lines": [11]})
    );
}

#[test]
fn predicate_reports_need_configured_predicates() {
    let s = Scratch::new();
    let base = GOOD
        .replace("kind = \"S1_IntraProceduralCFG\"", "kind = \"S7_Invariants\"")
        .replace(
            "template = '{\"executed_path\": [{\"line\": \"int\"}]}'",
            "template = '{\"invariant_report\": [{\"predicate\": \"str\", \"held_always\": \"bool\"}]}'",
        )
        .replace("name = \"executed_path\"", "name = \"predicate_report\"");
    let with = |params: &str, preds: &str| {
        base.replace(
            "params = { function = \"Add.flatten\", invocation = 1 }",
            &format!("params = {{ function = \"Add.flatten\"{params} }}"),
        )
        .replace(
            "functions = [\"Add.flatten\"]",
            &format!("functions = [\"Add.flatten\"]\n{preds}"),
        )
    };
    let one = "predicates = [{ expr = \"len(args) > 0\", lines = [200] }]";
    let d = make(&s.0, "sympy", "sympy-add-flatten-path", &with("", one));
    assert_eq!(load_instance(&d).unwrap().spec.tracing.predicates.len(), 1);
    let e = err_of(&s.0, &with("", ""));
    assert!(
        e.contains("field `tracing.predicates`") && e.contains("needs predicates"),
        "{e}"
    );
    let e = err_of(&s.0, &with(", predicates = [\"x > 0\"]", one));
    assert!(
        e.contains("`x > 0` is not among [tracing] predicates"),
        "{e}"
    );
    let e = err_of(&s.0, &with(", lines = [201]", one));
    assert!(
        e.contains("no [tracing] predicate is evaluated at line 201"),
        "{e}"
    );
    assert!(load_instance(make(
        &s.0,
        "sympy",
        "sympy-add-flatten-path",
        &with(", predicates = [\"len(args) > 0\"], lines = [200]", one)
    ))
    .is_ok());
}

/// A generated instance's test lives in the image: `image_files` instead of `files`, absolute
/// clean paths only; `[generated]` is optional, informational and checked for unknown fields.
#[test]
fn image_files_and_a_generated_table() {
    let s = Scratch::new();
    let in_image = GOOD.replace(
        "files = [\"test_flatten.py\"]",
        "image_files = [\"/usr/lib/python3/dist-packages/sympy/core/tests/test_arit.py\"]",
    );
    let gen = format!(
        "{in_image}\n[generated]\nset = \"s\"\nsplit = \"test\"\nmodule = \"sympy/core/tests/test_arit.py\"\n\
         trace = \"sympy/sympy/core/tests/test_arit.py\"\n\
         difficulty = {{ calls = 603, functions = 28, lines = 192, files = 7, classes = 5, depth = 8 }}\n"
    );
    let d = make(&s.0, "sympy", "sympy-add-flatten-path", &gen);
    let inst = load_instance(&d).unwrap();
    assert!(inst.spec.test.files.is_empty());
    assert_eq!(inst.spec.test.image_files.len(), 1);
    let g = inst.spec.generated.as_ref().unwrap();
    assert_eq!((g.difficulty.calls, g.easy), (603, false));
    // Round trip: what gen writes is what loads.
    let back: InstanceSpec = toml::from_str(&toml::to_string(&inst.spec).unwrap()).unwrap();
    assert_eq!(back, inst.spec);
    for bad in ["sympy/x.py", "/usr/../etc/x.py", "/usr/./x.py", "/usr/lib/"] {
        let e = err_of(
            &s.0,
            &GOOD.replace(
                "files = [\"test_flatten.py\"]",
                &format!("image_files = [\"{bad}\"]"),
            ),
        );
        assert!(e.contains("field `test.image_files`"), "{bad}: {e}");
    }
    let e = err_of(
        &s.0,
        &GOOD.replace("files = [\"test_flatten.py\"]", "files = []"),
    );
    assert!(e.contains("lists no test file"), "{e}");
    let e = err_of(
        &s.0,
        &format!("{in_image}\n[generated]\nset = \"s\"\ncolour = 1\n"),
    );
    assert!(e.contains("generated.colour"), "{e}");
}

/// 17.15 (found by the `template` fuzz target): a template printed itself with Rust's string
/// escapes (`"\u{7f}"`), which are no JSON, so the template an error message showed did not
/// parse back.
#[test]
fn a_template_prints_as_the_json_it_parses_from() {
    for text in [
        "{\"executed\\u007fpath\": [{\"line\": \"int\"}]}",
        "{\"a\\\"b\": \"str|null\", \"c\": {\"*\": [\"float\"]}}",
    ] {
        let t = Template::parse(text).unwrap();
        assert_eq!(Template::parse(&t.to_string()).unwrap(), t, "{t}");
    }
}

/// A callee question over scope `targets` about a function the config names may be answered
/// from the targets' direct calls; deeper reading (`transitive`), another scope, or a function
/// the config only reaches through a prefix keeps the whole trace. A trace that kept less
/// answers only an instance about one of its targets, never silently another.
#[test]
fn what_a_run_keeps_for_an_answer_and_what_a_kept_trace_answers() {
    use flux_trace::keep::Kept;
    use flux_trace::{Keep, Scope};
    let s = Scratch::new();
    let callees = GOOD
        .replace(
            "functions = [\"Add.flatten\"]",
            "functions = [\"Add.flatten\"]\nscope = \"targets\"",
        )
        .replace(
            "kind = \"S1_IntraProceduralCFG\"",
            "kind = \"M6_InterProceduralCFG\"",
        )
        .replace(
            r#"'{"executed_path": [{"line": "int"}]}'"#,
            r#"'{"callees_per_test": [{"test": "str", "callees": ["str"]}]}'"#,
        )
        .replace(
            "name = \"executed_path\"",
            "name = \"callees_across_tests\"",
        )
        .replace(
            "params = { function = \"Add.flatten\", invocation = 1 }",
            "params = { function = \"Add.flatten\" }",
        );
    let inst = load_instance(make(&s.0, "sympy", "sympy-add-flatten-path", &callees)).unwrap();
    assert_eq!(inst.keep_for_answer(Scope::Targets), Keep::TargetCalls);
    assert_eq!(inst.keep_for_answer(Scope::Tests), Keep::All);
    let deep = callees.replace(
        "params = { function = \"Add.flatten\" }",
        "params = { function = \"Add.flatten\", transitive = true }",
    );
    let d = make(&s.0, "sympy", "sympy-add-flatten-path", &deep);
    assert_eq!(
        load_instance(d).unwrap().keep_for_answer(Scope::Targets),
        Keep::All
    );
    let by_prefix = callees.replace("functions = [\"Add.flatten\"]", "functions = [\"Add\"]");
    let d = make(&s.0, "sympy", "sympy-add-flatten-path", &by_prefix);
    assert_eq!(
        load_instance(d).unwrap().keep_for_answer(Scope::Targets),
        Keep::All
    );
    let path = load_instance(good(&s.0)).unwrap();
    assert_eq!(path.keep_for_answer(Scope::Targets), Keep::All);

    let mut t = Trace::default();
    t.meta.complete = true;
    t.meta.kept = Some(Kept {
        keep: Keep::TargetCalls,
        targets: vec!["Mul.flatten".into()],
    });
    let e = inst.extract(&t).unwrap_err().to_string();
    assert!(
        e.contains("it needs the whole trace") && e.contains("Mul.flatten"),
        "{e}"
    );
    let e = path.extract(&t).unwrap_err().to_string();
    assert!(e.contains("it needs the whole trace"), "{e}");
    t.meta.kept = Some(Kept {
        keep: Keep::TargetCalls,
        targets: vec!["Add.flatten".into()],
    });
    let e = inst.extract(&t).unwrap_err().to_string();
    assert!(!e.contains("whole trace"), "{e}");
}
