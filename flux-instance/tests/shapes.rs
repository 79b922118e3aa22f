//! Every answer shape of SWE-Flux's store (issue 13's list), expressed natively: an extractor,
//! its parameters, SWE-Flux's template and, where its names differ from the extractor's,
//! `[extractor.answer]` bindings, compiled and cut exactly as an instance's are.
//!
//! The trace is `fixtures/shapes.jsonl`, made by `flux-extract/tests/fixtures/mktrace.py` (see
//! its doc for the command) with sys.settrace under
//! Python 3.11 from `fixtures/shapes.py` (a program written for this test in the style of the
//! store's targets, not one of its files), with the file's static facts from
//! `flux_hook.static_facts` and `check` events for three predicates. Every expected answer was
//! worked out by hand from `shapes.py` and its four tests.
use flux_instance::{Projection, Template};
use flux_trace::Trace;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const T_PARSE: &str = "test_shapes.py::test_parse";
const T_REGISTRY: &str = "test_shapes.py::test_registry";
const T_NEGATIVE: &str = "test_shapes.py::test_negative";
const T_EMPTY: &str = "test_shapes.py::test_empty";

fn trace() -> Trace {
    let text = include_str!("fixtures/shapes.jsonl");
    Trace::read_jsonl(text.as_bytes(), "shapes.jsonl").unwrap()
}

/// The answer an instance with this extractor, parameters, template and bindings harvests.
fn answer(extractor: &str, params: Value, template: &str, bindings: &[(&str, &str)]) -> Value {
    let t = trace();
    let p = flux_extract::params(params).unwrap();
    let ex = flux_extract::check_params(extractor, &p).unwrap_or_else(|e| panic!("{e}"));
    let template = Template::parse(template).unwrap();
    let shape = Template::parse((ex.shape)(&p)).unwrap();
    let b: BTreeMap<String, String> = bindings
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let projection =
        Projection::compile(&template, &shape, &b).unwrap_or_else(|e| panic!("{extractor}: {e}"));
    let out = flux_extract::extract(&t, extractor, &p).unwrap_or_else(|e| panic!("{e}"));
    let a = projection.apply(&out).unwrap();
    template
        .validate(&a)
        .unwrap_or_else(|e| panic!("{extractor}: {a} {e}"));
    a
}

fn loc(func: &str, line: i64) -> Value {
    json!({"file": "shapes.py", "func": format!("shapes.{func}"), "line": line})
}

#[test]
fn executed_path_with_file_and_func_normalised_to_statements() {
    let tmpl = r#"{"executed_path": [{"file": "str", "func": "str", "line": "int"}]}"#;
    // The third invocation of parse (test_empty): the return statement spans 40-41 and
    // CPython reports 40, 41, 40.
    assert_eq!(
        answer(
            "executed_path",
            json!({"function": "parse", "invocation": 3}),
            tmpl,
            &[]
        ),
        json!({"executed_path": ([26, 27, 28, 39, 40, 41, 40].map(|l| loc("parse", l)))})
    );
    assert_eq!(
        answer(
            "executed_path",
            json!({"function": "parse", "invocation": 3, "line_mode": "statement"}),
            tmpl,
            &[]
        ),
        json!({"executed_path": ([26, 27, 28, 39, 40, 40, 40].map(|l| loc("parse", l)))})
    );
}

#[test]
fn executed_line_sequence_as_plain_lines() {
    assert_eq!(
        answer(
            "executed_path",
            json!({"function": "parse", "invocation": 3, "line_mode": "statement",
                   "dedupe_consecutive": true}),
            r#"{"executed_line_sequence": ["int"]}"#,
            &[
                ("/executed_line_sequence", "/executed_path"),
                ("/executed_line_sequence/*", "/executed_path/*/line"),
            ]
        ),
        json!({"executed_line_sequence": [26, 27, 28, 39, 40]})
    );
}

#[test]
fn executed_path_across_functions_while_the_target_is_active() {
    // walk's and Registry.get's lines while walk runs (Registry.size is not tracked).
    let w = |l| loc("walk", l);
    let g = |l| loc("Registry.get", l);
    assert_eq!(
        answer(
            "executed_path",
            json!({"function": "walk", "functions": ["walk", "Registry.get"]}),
            r#"{"executed_path": [{"file": "str", "func": "str", "line": "int"}]}"#,
            &[]
        ),
        json!({"executed_path": [w(55), w(56), w(57), g(12), g(13), w(56), w(57), g(12), g(13),
                                 g(14), g(15), w(56), w(58)]})
    );
}

#[test]
fn function_call_order_and_callee_sequence() {
    let f = |q: &str| json!({"file": "shapes.py", "func": format!("shapes.{q}")});
    assert_eq!(
        answer(
            "call_sequence",
            json!({"function": "walk", "transitive": true,
                   "functions": ["Registry.get", "Registry.size", "Registry.add"]}),
            r#"{"function_call_order": [{"file": "str", "func": "str"}]}"#,
            &[("/function_call_order", "/call_sequence")]
        ),
        json!({"function_call_order": [f("Registry.get"), f("Registry.get"), f("Registry.size")]})
    );
    // Across a test: every start of the tracked functions, in order, with no target.
    assert_eq!(
        answer(
            "call_sequence",
            json!({"functions": ["Registry.__init__", "Registry.add", "walk"],
                   "test": "test_registry"}),
            r#"{"function_call_order": [{"file": "str", "func": "str"}]}"#,
            &[("/function_call_order", "/call_sequence")]
        ),
        json!({"function_call_order": [f("Registry.__init__"), f("Registry.add"),
               f("Registry.add"), f("Registry.add"), f("walk")]})
    );
    assert_eq!(
        answer(
            "call_sequence",
            json!({"function": "fill"}),
            r#"{"callee_sequence": ["str"]}"#,
            &[
                ("/callee_sequence", "/call_sequence"),
                ("/callee_sequence/*", "/call_sequence/*/function")
            ]
        ),
        json!({"callee_sequence": ["Registry.add", "Registry.add", "Registry.add"]})
    );
}

#[test]
fn loop_iteration_count_both_definitions() {
    for count in ["header", "body_line"] {
        for (inv, n) in [(1, 4), (2, 2), (3, 0)] {
            assert_eq!(
                answer(
                    "loop_iterations",
                    json!({"function": "parse", "invocation": inv, "header": 28, "count": count}),
                    r#"{"loop_iteration_count": "int"}"#,
                    &[]
                ),
                json!({"loop_iteration_count": n}),
                "{count} {inv}"
            );
        }
    }
}

#[test]
fn min_max_and_total_iterations_include_zero_iteration_invocations() {
    let p = json!({"function": "parse", "header": 28, "count": "body_line"});
    assert_eq!(
        answer(
            "loop_stats",
            p.clone(),
            r#"{"max_iterations": "int", "min_iterations": "int"}"#,
            &[]
        ),
        json!({"max_iterations": 4, "min_iterations": 0})
    );
    assert_eq!(
        answer("loop_stats", p, r#"{"total_iterations": "int"}"#, &[]),
        json!({"total_iterations": 6})
    );
}

#[test]
fn nth_iteration_value_variable() {
    assert_eq!(
        answer(
            "iteration_value",
            json!({"function": "parse", "header": 28, "variable": "tok", "iteration": 3}),
            r#"{"nth_iteration": "int", "value": "str", "variable": "str"}"#,
            &[]
        ),
        json!({"nth_iteration": 3, "value": "'5'", "variable": "tok"})
    );
}

#[test]
fn observed_state_after_and_before_a_line() {
    let tmpl = r#"{"observed_state": [{"value": "str", "variable": "str"}]}"#;
    let p = json!({"function": "parse", "line": 38, "occurrence": 2, "variables": ["n", "out"]});
    assert_eq!(
        answer("state_at", p.clone(), tmpl, &[]),
        json!({"observed_state": [{"variable": "n", "value": "3"},
                                  {"variable": "out", "value": "[1, 3]"}]})
    );
    let mut before = p;
    before["at"] = json!("before");
    assert_eq!(
        answer("state_at", before, tmpl, &[]),
        json!({"observed_state": [{"variable": "n", "value": "3"},
                                  {"variable": "out", "value": "[1]"}]})
    );
}

#[test]
fn unique_values_of_a_variable_and_of_a_tuple() {
    let tmpl = r#"{"unique_values": ["str"]}"#;
    assert_eq!(
        answer(
            "unique_values",
            json!({"function": "parse", "variable": "n", "lines": [38]}),
            tmpl,
            &[]
        ),
        json!({"unique_values": ["1", "2", "3"]})
    );
    assert_eq!(
        answer(
            "unique_values",
            json!({"function": "parse", "variables": ["n", "count"], "lines": [38]}),
            tmpl,
            &[]
        ),
        json!({"unique_values": ["(1, 1)", "(2, 4)", "(3, 1)", "(3, 3)"]})
    );
}

#[test]
fn value_history_and_temporal_value_history() {
    assert_eq!(
        answer(
            "value_history",
            json!({"function": "parse", "invocation": 1, "variable": "out", "event": "change"}),
            r#"{"value_history": ["str"]}"#,
            &[("/value_history/*", "/value_history/*/value")]
        ),
        json!({"value_history": ["[]", "[1]", "[1, 3]", "[1, 3, 2]"]})
    );
    // `n` when line 38 first runs in each invocation (test_empty's never reaches it).
    assert_eq!(
        answer(
            "value_history",
            json!({"function": "parse", "variable": "n", "lines": [38], "occurrence": 1}),
            r#"{"temporal_value_history": ["str"]}"#,
            &[
                ("/temporal_value_history", "/value_history"),
                ("/temporal_value_history/*", "/value_history/*/value")
            ]
        ),
        json!({"temporal_value_history": ["1", "3"]})
    );
}

#[test]
fn state_snapshots() {
    assert_eq!(
        answer(
            "state_snapshots",
            json!({"function": "parse", "invocation": 2, "lines": [34],
                   "variables": ["n", "count"]}),
            r#"{"state_snapshots": [{"line": "int", "state": {"*": "str"}}]}"#,
            &[]
        ),
        json!({"state_snapshots": [{"line": 34, "state": {"count": "1", "n": "4"}},
                                   {"line": 34, "state": {"count": "2", "n": "-1"}}]})
    );
}

#[test]
fn observed_def_use_pairs_with_ast_definitions_over_all_invocations() {
    let pair = |v: &str, d: i64, u: i64| json!({"def_line": d, "use_line": u, "variable": v});
    assert_eq!(
        answer(
            "def_use_pairs",
            json!({"function": "parse", "all_invocations": true, "definitions": "ast",
                   "variables": ["out", "count", "n"]}),
            r#"{"observed_def_use_pairs": [{"def_line": "int", "use_line": "int", "variable": "str"}]}"#,
            &[]
        ),
        json!({"observed_def_use_pairs": [
            pair("count", 27, 29), pair("count", 29, 29),
            pair("n", 31, 34), pair("n", 31, 36), pair("n", 31, 38), pair("n", 37, 38),
            pair("out", 26, 38), pair("out", 26, 39), pair("out", 26, 40)]})
    );
}

#[test]
fn dead_defs() {
    // `n = int(tok)` for 'x' raises and is replaced at 31 before any use.
    assert_eq!(
        answer(
            "dead_defs",
            json!({"function": "parse", "invocation": 1, "variables": ["n"]}),
            r#"{"dead_defs": [{"def_line": "int", "variable": "str"}]}"#,
            &[]
        ),
        json!({"dead_defs": [{"def_line": 31, "variable": "n"}]})
    );
}

#[test]
fn line_execution_counts_zero_filled_over_the_body() {
    let counts = [
        (26, 3),
        (27, 3),
        (28, 8),
        (29, 6),
        (30, 6),
        (31, 6),
        (32, 1),
        (33, 1),
        (34, 5),
        (35, 1),
        (36, 4),
        (37, 2),
        (38, 4),
        (39, 3),
        (40, 6),
        (41, 3),
    ];
    assert_eq!(
        answer(
            "line_counts",
            json!({"function": "parse"}),
            r#"{"line_execution_counts": [{"count": "int", "line": "int"}]}"#,
            &[]
        ),
        json!({"line_execution_counts": (counts.map(|(l, c)| json!({"line": l, "count": c})))})
    );
    // An explicit range, zero-filled: Registry.get's def line 11 never has a line event.
    assert_eq!(
        answer(
            "line_counts",
            json!({"function": "Registry.get", "from": 11, "to": 15}),
            r#"{"line_execution_counts": [{"count": "int", "line": "int"}]}"#,
            &[]
        ),
        json!({"line_execution_counts": [{"line": 11, "count": 0}, {"line": 12, "count": 2},
               {"line": 13, "count": 2}, {"line": 14, "count": 1}, {"line": 15, "count": 1}]})
    );
}

#[test]
fn covered_lines() {
    assert_eq!(
        answer(
            "covered_lines",
            json!({"function": "Registry.get"}),
            r#"{"covered_lines": ["int"]}"#,
            &[]
        ),
        json!({"covered_lines": [12, 13, 14, 15]})
    );
}

#[test]
fn always_sometimes_never_executed() {
    assert_eq!(
        answer(
            "line_classes",
            json!({"function": "parse", "tests": "running", "line_mode": "statement"}),
            r#"{"always_executed": ["int"], "never_executed": ["int"], "sometimes_executed": ["int"]}"#,
            &[]
        ),
        json!({"always_executed": [26, 27, 28, 39, 40], "never_executed": [],
               "sometimes_executed": [29, 30, 31, 32, 33, 34, 35, 36, 37, 38]})
    );
}

#[test]
fn caught_exception_kinds() {
    let tmpl = r#"{"caught_exception_kinds": ["str"]}"#;
    assert_eq!(
        answer("caught_types", json!({"function": "parse"}), tmpl, &[]),
        json!({"caught_exception_kinds": ["ValueError"]})
    );
    // Raised in Registry.add, propagated into fill, caught there.
    assert_eq!(
        answer("caught_types", json!({"function": "fill"}), tmpl, &[]),
        json!({"caught_exception_kinds": ["KeyError"]})
    );
    assert_eq!(
        answer(
            "caught_types",
            json!({"function": "Registry.get", "line": 14}),
            tmpl,
            &[]
        ),
        json!({"caught_exception_kinds": ["KeyError"]})
    );
    assert_eq!(
        answer(
            "caught_types",
            json!({"function": "Registry.get", "line": 13}),
            tmpl,
            &[]
        ),
        json!({"caught_exception_kinds": []})
    );
}

#[test]
fn exception_type_counts_and_exception_types() {
    assert_eq!(
        answer(
            "exception_counts",
            json!({"function": "fill"}),
            r#"{"exception_type_counts": [{"count": "int", "exception_type": "str"}]}"#,
            &[]
        ),
        json!({"exception_type_counts": [{"count": 1, "exception_type": "KeyError"}]})
    );
    // Only raises: the KeyError event in fill continues a propagation from Registry.add.
    assert_eq!(
        answer(
            "exception_counts",
            json!({"function": "fill", "events": "raises"}),
            r#"{"exception_types": ["str"]}"#,
            &[]
        ),
        json!({"exception_types": []})
    );
    assert_eq!(
        answer(
            "exception_counts",
            json!({"function": "parse"}),
            r#"{"exception_types": ["str"]}"#,
            &[]
        ),
        json!({"exception_types": ["ValueError"]})
    );
}

#[test]
fn exception_type_and_message_flat() {
    assert_eq!(
        answer(
            "exception_info",
            json!({"type": "KeyError"}),
            r#"{"exception_message": "str", "exception_type": "str"}"#,
            &[
                ("/exception_type", "/exception/type"),
                ("/exception_message", "/exception/message")
            ]
        ),
        json!({"exception_type": "KeyError", "exception_message": "'a'"})
    );
}

#[test]
fn crashing_tests_and_safe_tests() {
    assert_eq!(
        answer(
            "raising_tests",
            json!({"type": "KeyError", "raised_in": "Registry.add"}),
            r#"{"crashing_tests": ["str"], "safe_tests": ["str"]}"#,
            &[]
        ),
        json!({"crashing_tests": [T_REGISTRY], "safe_tests": [T_PARSE, T_NEGATIVE, T_EMPTY]})
    );
    // Items with the type, from the exceptions that escape Registry.add.
    assert_eq!(
        answer(
            "raising_tests",
            json!({"escapes": "Registry.add"}),
            r#"{"crashing_tests": [{"exception_type": "str", "test": "str"}], "safe_tests": ["str"]}"#,
            &[("/crashing_tests", "/crashes")]
        ),
        json!({"crashing_tests": [{"exception_type": "KeyError", "test": T_REGISTRY}],
               "safe_tests": [T_PARSE, T_NEGATIVE, T_EMPTY]})
    );
}

#[test]
fn invocation_counts_of_a_class_with_zero_rows() {
    let row = |q: &str, n: i64| json!({"count": n, "file": "shapes.py", "func": format!("shapes.Registry.{q}")});
    assert_eq!(
        answer(
            "invocation_counts",
            json!({"class": "Registry", "file": "shapes.py", "exclude_decorated": ["property"]}),
            r#"{"invocation_counts": [{"count": "int", "file": "str", "func": "str"}]}"#,
            &[]
        ),
        json!({"invocation_counts": [row("__init__", 1), row("add", 3), row("get", 2),
                                     row("unused", 0)]})
    );
}

#[test]
fn covered_functions_while_the_target_is_active() {
    let f = |q: &str| json!({"file": "shapes.py", "func": format!("shapes.{q}")});
    assert_eq!(
        answer(
            "covered_functions",
            json!({"function": "walk",
                   "functions": ["walk", "Registry.get", "Registry.size", "Registry.add"]}),
            r#"{"covered_functions": [{"file": "str", "func": "str"}]}"#,
            &[]
        ),
        json!({"covered_functions": [f("Registry.get"), f("Registry.size"), f("walk")]})
    );
}

#[test]
fn invariant_report_and_a_single_invariant() {
    let item = |p: &str, o: i64, v: i64, h: bool| json!({"held_always": h, "observations": o, "predicate": p, "violations": v});
    assert_eq!(
        answer(
            "predicate_report",
            json!({"function": "parse"}),
            r#"{"invariant_report": [{"held_always": "bool", "observations": "int", "predicate": "str", "violations": "int"}]}"#,
            &[]
        ),
        json!({"invariant_report": [
            item("count <= len(tokens)", 5, 0, true),
            item("n >= 0", 5, 1, false),
            // Raises IndexError while `out` is empty: not held, though never false.
            item("out[-1] > 0", 5, 0, false)]})
    );
    assert_eq!(
        answer(
            "predicate_report",
            json!({"function": "parse", "predicates": ["n >= 0"]}),
            r#"{"is_invariant_always_held": "bool", "total_iterations_observed": "int", "violating_iteration_count": "int"}"#,
            &[
                (
                    "/is_invariant_always_held",
                    "/invariant_report/0/held_always"
                ),
                (
                    "/total_iterations_observed",
                    "/invariant_report/0/observations"
                ),
                (
                    "/violating_iteration_count",
                    "/invariant_report/0/violations"
                )
            ]
        ),
        json!({"is_invariant_always_held": false, "total_iterations_observed": 5,
               "violating_iteration_count": 1})
    );
}

/// The generator's view of `parse`: what its run offers, from the same definitions.
#[test]
fn candidates_enumerate_loops_branches_exceptions_callees_values() {
    let t = trace();
    let ix = flux_trace::TraceIndex::new(&t);
    let c = flux_extract::candidates(&ix, "parse", None).unwrap();
    assert_eq!(c.invocations, 3);
    assert_eq!(c.tests, vec![T_PARSE, T_NEGATIVE, T_EMPTY]);
    assert_eq!(c.loops.len(), 1);
    let l = &c.loops[0];
    assert_eq!((l.header, l.body_first_line, l.body_end), (28, 29, 38));
    assert_eq!(l.iterations, vec![4, 2, 0]);
    assert_eq!(l.entered, 3);
    // `if n < 0` (34) goes to `break` once (test_negative) and on four times; `elif n > limit`
    // (36) is true twice (tok 5 and 4), false twice.
    let b = |line: u32| c.branches.iter().find(|b| b.line == line).unwrap();
    assert_eq!((b(34).taken_true, b(34).taken_false), (1, 4));
    assert_eq!((b(34).tests_true, b(34).tests_false), (1, 2));
    assert_eq!((b(36).taken_true, b(36).taken_false), (2, 2));
    let e = &c.exceptions[0];
    assert_eq!(
        (
            e.exception_type.as_str(),
            e.events,
            e.caught,
            e.crossed_in,
            e.crossed_out
        ),
        ("ValueError", 1, 1, 0, 0)
    );
    assert_eq!(c.callees.len(), 1);
    assert_eq!(
        (c.callees[0].function.as_str(), c.callees[0].calls),
        ("parse.<locals>.<listcomp>", 3)
    );
    // `n` is shown after line 31 (int(tok)) with the values 1, 5, 2, 4, -1.
    let n = c
        .values
        .iter()
        .find(|v| v.line == 31 && v.variable == "n")
        .unwrap();
    assert_eq!((n.observations, n.distinct_values), (5, 5));
    // Registry.add's KeyError crosses out of it into fill.
    let f = flux_extract::candidates(&ix, "fill", None).unwrap();
    let k = &f.exceptions[0];
    assert_eq!((k.crossed_in, k.caught), (1, 1));
    let a = flux_extract::candidates(&ix, "Registry.add", None).unwrap();
    assert_eq!(a.exceptions[0].crossed_out, 1);
}
