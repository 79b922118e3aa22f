//! Unit tests of the extractor registry, parameters and shapes on hand-built traces.
use super::*;
use crate::testkit::TraceBuilder;
use serde_json::json;

#[test]
fn every_kind_has_an_extractor_and_names_are_unique() {
    for k in QuestionKind::ALL {
        assert!(!for_kind(k).is_empty(), "no extractor for {k}");
    }
    let mut names: Vec<_> = extractors().iter().map(|e| e.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), extractors().len());
    for e in extractors() {
        let t: Value = serde_json::from_str((e.template)(&no_params())).unwrap();
        assert!(t.is_object(), "{}", e.name);
        assert!(!e.doc.is_empty());
    }
}

#[test]
fn extract_checks_names_params_and_completeness() {
    let t = TraceBuilder::new()
        .call("f", 1, &[])
        .line(2, &[])
        .ret("None")
        .build();
    let err = extract(&t, "nope", &no_params()).unwrap_err();
    assert!(
        err.to_string().contains("unknown extractor `nope`"),
        "{err}"
    );
    let err = extract(&t, "executed_path", &params(json!({"fn": "f"})).unwrap()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("extractor `executed_path`: unknown parameter `fn`; allowed: function"),
        "{err}"
    );
    let err = extract(&t, "executed_path", &no_params()).unwrap_err();
    assert!(
        err.to_string()
            .contains("missing required parameter `function`"),
        "{err}"
    );
    let p = params(json!({"function": "f"})).unwrap();
    assert_eq!(
        crate::testkit::pick(
            &extract(&t, "executed_path", &p).unwrap(),
            &json!({"executed_path": [{"line": 0}]})
        ),
        json!({"executed_path": [{"line": 2}]})
    );
    let mut bad = t.clone();
    bad.meta.complete = false;
    bad.meta.problems = vec!["3 events lost".into()];
    let err = extract(&bad, "executed_path", &p).unwrap_err();
    assert!(
        err.to_string().contains("incomplete (3 events lost)"),
        "{err}"
    );
    assert!(params(json!([1])).is_err());
}

/// Every extractor refuses parameters that the trace cannot answer, with a message that
/// says what was asked and what the trace holds.
#[test]
fn every_extractor_reports_unanswerable_parameters() {
    let t = TraceBuilder::new()
        .test("t.py::test_a")
        .call("f", 1, &[("n", "1")])
        .line(2, &[])
        .ret("None")
        .end("passed")
        .build();
    let cases = [
        (
            "executed_path",
            json!({"function": "f", "invocation": 2}),
            "function `f` has 1 invocation(s); invocation 2",
        ),
        (
            "covered_lines",
            json!({"function": "f", "test": "test_b"}),
            "function `f` has 0 invocation(s) in test `test_b`",
        ),
        (
            "coverage_across_tests",
            json!({"function": "f", "normalize": "rel"}),
            "parameter `normalize`: expected one of \"absolute\", \"relative\", got \"rel\"",
        ),
        (
            "loop_iterations",
            json!({"function": "f", "header": 7, "body_end": 8}),
            "line 7 (the loop header) never executes",
        ),
        (
            "loop_iterations_across_tests",
            json!({"function": "f", "header": 5, "body_end": 6}),
            "line 5 (the loop header) of `f` never executes inside a test",
        ),
        (
            "state_at",
            json!({"function": "f", "line": 9}),
            "line 9 executes 0 time(s) in invocation 1 of `f`",
        ),
        (
            "state_across_tests",
            json!({"function": "f", "line": 9, "variable": "n"}),
            "line 9 of `f` executes at least 1 time(s) in no test",
        ),
        (
            "def_use_pairs",
            json!({"function": "f", "uses": {"x": ["n"]}}),
            "parameter `uses`: expected an object mapping line numbers to lists of names, got {\"x\":[\"n\"]}",
        ),
        (
            "def_use_across_tests",
            json!({"function": "f", "uses": ["n"]}),
            "parameter `uses`: expected an object mapping line numbers to lists of names, got [\"n\"]",
        ),
        (
            "exception_info",
            json!({}),
            "the trace has 0 exception(s) raised; occurrence 1",
        ),
        (
            "raising_tests",
            json!({"type": 3}),
            "parameter `type`: expected a string, got 3",
        ),
        (
            "call_sequence",
            json!({"function": "g"}),
            "function `g` has 0 invocation(s)",
        ),
        (
            "callees_count",
            json!({"function": "f", "invocation": 0}),
            "parameter `invocation`: expected an integer >= 1, got 0",
        ),
        (
            "callees_across_tests",
            json!({"function": "f", "within": 1}),
            "parameter `within`: expected a string",
        ),
        (
            "call_graph",
            json!({"test": false}),
            "parameter `test`: expected a string",
        ),
        (
            "invariants_in_test",
            json!({"function": "f", "line": 2, "variable": "zz"}),
            "`zz` is never bound after line 2 of `f`",
        ),
        (
            "invariants_across_tests",
            json!({"function": "f", "line": 3, "variable": "n"}),
            "`n` is never bound after line 3 of `f` inside a test",
        ),
        (
            "line_counts",
            json!({"function": "f"}),
            "`range = \"body\"` needs the static facts of `f`",
        ),
        (
            "line_classes",
            json!({"function": "f", "from": 2}),
            "missing required parameter `to`",
        ),
        (
            "loop_stats",
            json!({"function": "f", "header": 7, "body_end": 8}),
            "no invocation of `f` reaches the loop header at line 7",
        ),
        (
            "callers",
            json!({"function": "f", "count": "frames"}),
            "parameter `count`: expected one of \"invocations\", \"calls\", got \"frames\"",
        ),
        (
            "iteration_value",
            json!({"function": "f", "header": 2, "body_end": 3, "variable": "n"}),
            "makes 0 iteration(s) in invocation 1 of `f`; iteration 1 was asked for",
        ),
        (
            "unique_values",
            json!({"function": "f", "variable": "zz"}),
            "`zz` is never bound at an observation point of `f`",
        ),
        (
            "value_history",
            json!({"function": "f", "variable": "n", "variables": ["n"]}),
            "exactly one of `variable` and `variables`",
        ),
        (
            "state_snapshots",
            json!({"function": "f", "lines": [9]}),
            "no observation point of `f` is reached",
        ),
        (
            "dead_defs",
            json!({"function": "f"}),
            "`definitions = \"ast\"` needs the static facts of `f`",
        ),
        (
            "caught_types",
            json!({"function": "f", "line": "x"}),
            "parameter `line`: expected a line number, got \"x\"",
        ),
        (
            "exception_counts",
            json!({"function": "f", "events": "some"}),
            "parameter `events`: expected one of \"all\", \"raises\", \"reported\", got \"some\"",
        ),
        (
            "exception_events",
            json!({"function": "f", "type_names": "full"}),
            "parameter `type_names`: expected one of \"hook\", \"qualified\", got \"full\"",
        ),
        (
            "covered_functions",
            json!({"function": "g"}),
            "function `g` has 0 invocation(s)",
        ),
        (
            "invocation_counts",
            json!({"class": "C"}),
            "missing required parameter `functions, or file with class, classes or module = true`",
        ),
        (
            "predicate_report",
            json!({"function": "f"}),
            "the trace has no predicate evaluations in `f`",
        ),
    ];
    let mut covered = Vec::new();
    for (name, p, want) in cases {
        let err = match extract(&t, name, &params(p).unwrap()) {
            Ok(v) => panic!("{name}: unexpected answer {v}"),
            Err(e) => e.to_string(),
        };
        assert!(err.starts_with(&format!("extractor `{name}`: ")), "{err}");
        assert!(err.contains(want), "{name}: want {want:?} in {err}");
        covered.push(name);
    }
    for e in extractors() {
        assert!(covered.contains(&e.name), "{} has no error case", e.name);
    }
}

/// A random program's trace for the keep test: tests calling `t` (the target) and `a`..`d`,
/// nested to depth 6, `t` recursing through its callees, raising and catching, and a
/// generator `g` suspended in one call of `t` and resumed in another.
fn random_trace(seed: u64) -> Trace {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    fn body(
        mut b: TraceBuilder,
        depth: u32,
        next: &mut dyn FnMut(u64) -> u64,
        gen: &mut Option<u64>,
    ) -> TraceBuilder {
        const NAMES: [&str; 5] = ["t", "a", "b", "c", "d"];
        for _ in 0..next(4) {
            if depth >= 6 {
                break;
            }
            match next(10) {
                0 => b = b.line(10 + next(5) as u32, &[("x", "1")]),
                1 => b = b.raise("ValueError", "no").handled(12, "ValueError", "no"),
                2 => {
                    // The generator: started once, resumed by later calls.
                    b = match *gen {
                        None => {
                            let frame = b.next_activation();
                            *gen = Some(frame);
                            b.call("g", 30, &[])
                        }
                        Some(frame) => b.resume(frame, "g", 31),
                    };
                    b = body(b, depth + 1, next, gen).suspend("1");
                }
                _ => {
                    let name = NAMES[next(NAMES.len() as u64) as usize];
                    b = b.call(name, 20, &[("n", "2")]);
                    b = body(b, depth + 1, next, gen);
                    b = if next(6) == 0 {
                        b.unwind("KeyError", "k")
                    } else {
                        b.ret("None")
                    };
                }
            }
        }
        b
    }
    let mut b = TraceBuilder::new();
    let mut gen = None;
    for test in ["t.py::test_a", "t.py::test_b", "t.py::test_c"] {
        b = b.test(test);
        for _ in 0..1 + next(3) {
            let name = if next(3) == 0 { "a" } else { "t" };
            b = b.call(name, 20, &[]);
            b = body(b, 1, &mut next, &mut gen).ret("None");
        }
        b = b.end("passed");
    }
    b.build()
}

/// An extractor saying it reads only the target's direct calls (`target_calls_only`) answers
/// exactly the same — or refuses the same way — from a trace cut to them
/// (`flux_trace::keep::retain_target_calls`, what a run keeping `Keep::TargetCalls` holds) as
/// from the whole trace: over 300 random traces and each parameter set it says so for; and the
/// cut removes events in most of them (else the test proves nothing).
#[test]
fn an_extractor_reading_target_calls_only_answers_the_same_from_them() {
    let sets = [
        json!({"function": "t"}),
        json!({"function": "t", "within": "pkg/"}),
        json!({"function": "t", "functions": ["a", "b", "g"]}),
        json!({"function": "t", "transitive": false}),
        json!({"function": "t", "transitive": true}),
        json!({"function": "t", "file": testkit::FILE}),
    ];
    let (mut checked, mut cut) = (0, 0);
    for seed in 1..=300 {
        let full = random_trace(seed);
        let mut kept = full.clone();
        let n =
            flux_trace::keep::retain_target_calls(&mut kept.events, 0, |e| e.name() == "t", |_| {});
        cut += usize::from(n > 0);
        for ex in extractors() {
            for s in &sets {
                let Ok(p) = params(s.clone()) else { continue };
                if check_params(ex.name, &p).is_err() || !(ex.target_calls_only)(&p) {
                    continue;
                }
                let want = extract(&full, ex.name, &p).map_err(|e| e.to_string());
                let got = extract(&kept, ex.name, &p).map_err(|e| e.to_string());
                assert_eq!(got, want, "{} {s} on random trace {seed}", ex.name);
                checked += 1;
            }
        }
    }
    assert!(checked >= 300 * 4, "only {checked} answers compared");
    assert!(
        cut > 200,
        "the cut removed events in only {cut} of 300 traces"
    );
}
