//! Unit tests of the cfg extractors on hand-built traces (`testkit`).
use crate::testkit::pick;
use crate::testkit::TraceBuilder;
use crate::{extract, params};
use serde_json::json;

/// f (def at 10) called twice: first takes the `if` branch (11, 12, 14), second skips it
/// (11, 14). A callee g's lines (21) must not appear in f's path.
fn two_calls() -> flux_trace::Trace {
    TraceBuilder::new()
        .test("t.py::test_a")
        .call("f", 10, &[("x", "1")])
        .line(11, &[])
        .line(12, &[])
        .call("g", 20, &[])
        .line(21, &[])
        .ret("None")
        .line(14, &[])
        .ret("1")
        .end("passed")
        .test("t.py::test_b")
        .call("f", 10, &[("x", "0")])
        .line(11, &[])
        .line(14, &[])
        .ret("0")
        .end("passed")
        .test("t.py::test_c")
        .end("passed")
        .build()
}

#[test]
fn executed_path_lists_the_frames_lines_in_order() {
    let t = two_calls();
    let p = params(json!({"function": "f"})).unwrap();
    // Invocation 1: lines 11, 12, 14 (g's 21 belongs to another frame).
    assert_eq!(
        pick(
            &extract(&t, "executed_path", &p).unwrap(),
            &json!({"executed_path": [{"line": 0}]})
        ),
        json!({"executed_path": [{"line": 11}, {"line": 12}, {"line": 14}]})
    );
    // Invocation 2, relative to the def line 10: 11-10+1 = 2, 14-10+1 = 5.
    let p = params(json!({"function": "f", "invocation": 2, "normalize": "relative"})).unwrap();
    assert_eq!(
        pick(
            &extract(&t, "executed_path", &p).unwrap(),
            &json!({"executed_path": [{"line": 0}]})
        ),
        json!({"executed_path": [{"line": 2}, {"line": 5}]})
    );
    // The test filter renumbers: test_b's first invocation is the second overall.
    let p = params(json!({"function": "f", "test": "test_b"})).unwrap();
    assert_eq!(
        pick(
            &extract(&t, "executed_path", &p).unwrap(),
            &json!({"executed_path": [{"line": 0}]})
        ),
        json!({"executed_path": [{"line": 11}, {"line": 14}]})
    );
}

#[test]
fn executed_path_out_of_range_names_function_and_count() {
    let t = two_calls();
    let p = params(json!({"function": "f", "invocation": 3})).unwrap();
    let err = extract(&t, "executed_path", &p).unwrap_err().to_string();
    assert_eq!(
        err,
        "extractor `executed_path`: function `f` has 2 invocation(s); invocation 3 was asked for"
    );
    let p = params(json!({"function": "f", "normalize": "weird"})).unwrap();
    assert!(extract(&t, "executed_path", &p).is_err());
}

#[test]
fn covered_lines_is_the_sorted_union() {
    let t = two_calls();
    let p = params(json!({"function": "f"})).unwrap();
    assert_eq!(
        extract(&t, "covered_lines", &p).unwrap(),
        json!({"covered_lines": [11, 12, 14]})
    );
    let p = params(json!({"function": "f", "test": "test_b"})).unwrap();
    assert_eq!(
        extract(&t, "covered_lines", &p).unwrap(),
        json!({"covered_lines": [11, 14]})
    );
    let p = params(json!({"function": "h"})).unwrap();
    let err = extract(&t, "covered_lines", &p).unwrap_err().to_string();
    assert!(err.contains("function `h` has 0 invocation(s)"), "{err}");
}

#[test]
fn coverage_across_tests_per_test_and_per_line() {
    let t = two_calls();
    let p = params(json!({"function": "f"})).unwrap();
    // test_c never calls f: empty list.
    assert_eq!(
        extract(&t, "coverage_across_tests", &p).unwrap(),
        json!({"coverage": [
            {"test": "t.py::test_a", "lines": [11, 12, 14]},
            {"test": "t.py::test_b", "lines": [11, 14]},
            {"test": "t.py::test_c", "lines": []},
        ]})
    );
    // Line 12 (the `if` body) runs only in test_a.
    let p = params(json!({"function": "f", "line": 12})).unwrap();
    assert_eq!(
        extract(&t, "coverage_across_tests", &p).unwrap(),
        json!({"covering_tests": ["t.py::test_a"],
               "non_covering_tests": ["t.py::test_b", "t.py::test_c"]})
    );
}

/// SWE-Flux's M1 region "the target's frame and frames of local functions lexically defined in
/// it" (`nested = true`): the lines of `f.<locals>.h` and its comprehension count, those of a
/// callee `g` do not.
#[test]
fn covered_lines_with_nested_local_functions() {
    let t = TraceBuilder::new()
        .call("f", 10, &[])
        .line(11, &[])
        .call("f.<locals>.h", 12, &[])
        .line(13, &[])
        .call("f.<locals>.h.<locals>.<listcomp>", 13, &[])
        .line(13, &[])
        .ret("[]")
        .ret("None")
        .call("g", 30, &[])
        .line(31, &[])
        .ret("None")
        .line(15, &[])
        .ret("None")
        .build();
    let p = params(json!({"function": "f"})).unwrap();
    assert_eq!(
        extract(&t, "covered_lines", &p).unwrap(),
        json!({"covered_lines": [11, 15]})
    );
    let p = params(json!({"function": "f", "nested": true})).unwrap();
    assert_eq!(
        extract(&t, "covered_lines", &p).unwrap(),
        json!({"covered_lines": [11, 13, 15]})
    );
}

/// A nested function's continuation lines normalise to its own statements (they were left as
/// reported: the target's statements do not hold them).
#[test]
fn covered_lines_nested_normalises_each_frame_by_its_own_statements() {
    let src = "def f():\n    def h():\n        return g(\n            1)\n    return h()\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("f", 1, &[])
        .line(2, &[])
        .line(5, &[])
        .call("f.<locals>.h", 2, &[])
        .line(3, &[])
        .line(4, &[])
        .line(3, &[])
        .ret("1")
        .ret("1")
        .build();
    let p = params(json!({"function": "f", "nested": true, "line_mode": "statement"})).unwrap();
    assert_eq!(
        extract(&t, "covered_lines", &p).unwrap(),
        json!({"covered_lines": [2, 3, 5]})
    );
}

/// SWE-Flux's "always / sometimes / never executed over every invocation of the function
/// during the test" (llama_factory adapter_setup_lora_tuning_m1_cfg__r20260714, dev): three
/// invocations in one test; over the tests every executed line is "always".
#[test]
fn line_classes_over_the_invocations_of_one_test() {
    let t = TraceBuilder::new()
        .test("t.py::test_a")
        .call("f", 10, &[])
        .line(11, &[])
        .line(12, &[])
        .line(14, &[])
        .ret("1")
        .call("f", 10, &[])
        .line(11, &[])
        .line(14, &[])
        .ret("2")
        .call("f", 10, &[])
        .line(11, &[])
        .line(13, &[])
        .line(14, &[])
        .ret("3")
        .end("passed")
        .build();
    let over = |o: &str| {
        let p = params(json!({"function": "f", "from": 11, "to": 15, "over": o})).unwrap();
        extract(&t, "line_classes", &p).unwrap()
    };
    assert_eq!(
        over("invocations"),
        json!({"always_executed": [11, 14], "sometimes_executed": [12, 13],
               "never_executed": [15]})
    );
    assert_eq!(
        over("tests"),
        json!({"always_executed": [11, 12, 13, 14], "sometimes_executed": [],
               "never_executed": [15]})
    );
}

/// kedro ipython_resolve_project_path_m1_cfg (dev): "statement-based coverage" where an
/// executed statement covers all its own lines (a multi-line header's continuation and closing
/// lines, `else:`, a call's continuation lines) and the signature counts once the function is
/// invoked; flux covered the lines that had events only (20 of their 29).
#[test]
fn covered_lines_by_statements_and_their_own_lines() {
    let src = "def f(path=None,\n      ns=None):\n    \"\"\"doc\"\"\"\n    if path:\n        p = 1\n    else:\n        if (ns\n                and ns.get('c')):\n            p = 2\n        else:\n            p = g(\n                3)\n    return p\n";
    let t = TraceBuilder::new()
        .test("t.py::test_a")
        .call("f", 1, &[("path", "'x'")])
        .line(4, &[])
        .line(5, &[("p", "1")])
        .line(13, &[])
        .ret("1")
        .call("f", 1, &[("path", "None")])
        .line(4, &[])
        .line(7, &[])
        .line(11, &[])
        .line(13, &[("p", "3")])
        .ret("3")
        .end("passed")
        .build();
    let mut t = t;
    t.facts.insert(
        crate::testkit::FILE.to_string(),
        crate::testkit::facts_from_source(src, crate::testkit::FILE),
    );
    let covered = |extra: serde_json::Value| {
        let mut p = json!({"function": "f"});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        extract(&t, "covered_lines", &params(p).unwrap()).unwrap()["covered_lines"].clone()
    };
    assert_eq!(covered(json!({})), json!([4, 5, 7, 11, 13]));
    assert_eq!(
        covered(json!({"coverage": "own_lines"})),
        json!([1, 2, 4, 5, 6, 7, 8, 10, 11, 12, 13])
    );
}
