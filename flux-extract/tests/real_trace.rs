//! Extractors on a trace of real Python 3.11 code (`fixtures/sample.py`), made by
//! `fixtures/mktrace.py` (`. sample /src/sample.py`) with sys.settrace following the flux-trace
//! contract (with the file's static facts). The expected
//! answers were worked out by hand from the source and checked against the listed events.
use flux_extract::{extract, params, uses_from_source};
use flux_trace::Trace;
use serde_json::{json, Value};

fn trace() -> Trace {
    let text = include_str!("fixtures/sample.jsonl");
    Trace::read_jsonl(text.as_bytes(), "sample.jsonl").unwrap()
}

/// The answer equals `expected` on the fields `expected` names (records carry more).
macro_rules! assert_answer {
    ($answer:expr, $expected:expr $(,)?) => {{
        let expected: Value = $expected;
        assert_eq!(flux_extract::testkit::pick(&$answer, &expected), expected);
    }};
}

fn run(name: &str, p: Value) -> Value {
    extract(&trace(), name, &params(p).unwrap()).unwrap_or_else(|e| panic!("{e}"))
}

const A: &str = "test_sample.py::test_total";
const B: &str = "test_sample.py::test_negative";
const C: &str = "test_sample.py::test_gen";

#[test]
fn s1_paths_and_coverage() {
    // total([1, 2, 3]): 2, then the header 3 and body 4, 6 per item, the exhausting 3, then 7.
    let lines = |v: &[i64]| v.iter().map(|l| json!({"line": l})).collect::<Vec<_>>();
    assert_answer!(
        run("executed_path", json!({"function": "total"})),
        json!({"executed_path": lines(&[2, 3, 4, 6, 3, 4, 6, 3, 4, 6, 3, 7])})
    );
    // consume (def 24) relative: 25→2, 26→3, 27→4, 28→5.
    assert_answer!(
        run(
            "executed_path",
            json!({"function": "consume", "normalize": "relative"})
        ),
        json!({"executed_path": lines(&[2, 3, 4, 3, 4, 3, 4, 3, 5])})
    );
    assert_answer!(
        run("covered_lines", json!({"function": "total"})),
        json!({"covered_lines": [2, 3, 4, 5, 6, 7]})
    );
    assert_answer!(
        run(
            "coverage_across_tests",
            json!({"function": "total", "line": 5})
        ),
        json!({"covering_tests": [B], "non_covering_tests": [A, C]})
    );
}

#[test]
fn s2_loops_including_a_generator_across_resumptions() {
    let count = |f: &str, h: u32, end: u32, inv: u32| {
        run(
            "loop_iterations",
            json!({"function": f, "header": h, "body_end": end, "invocation": inv}),
        )["loop_iteration_count"]
            .clone()
    };
    assert_eq!(count("total", 3, 6, 1), json!(3));
    // [1, -2]: the second pass raises at 5 — still an iteration (header followed by 4).
    assert_eq!(count("total", 3, 6, 2), json!(2));
    // gen's while loop spans four activations of one frame: 19→20 three times, then 19 → return.
    assert_eq!(count("gen", 19, 21, 1), json!(3));
    assert_eq!(count("consume", 26, 27, 1), json!(3));
    assert_answer!(
        run(
            "loop_iterations_across_tests",
            json!({"function": "total", "header": 3, "body_end": 6})
        ),
        json!({"min_iterations": 2, "max_iterations": 3, "tests_with_min": [B], "tests_with_max": [A]})
    );
}

#[test]
fn s3_state_after_a_line() {
    // After the 2nd `t += x`: t = 1 + 2, x = 2 (seen on the next header event).
    assert_answer!(
        run(
            "state_at",
            json!({"function": "total", "line": 6, "occurrence": 2, "variables": ["t", "x"]})
        ),
        json!({"observed_state": [{"variable": "t", "value": "3"}, {"variable": "x", "value": "2"}]})
    );
    // After `yield i` the first time, the frame's next event is the suspending return.
    assert_answer!(
        run("state_at", json!({"function": "gen", "line": 20})),
        json!({"observed_state": [{"variable": "i", "value": "0"}, {"variable": "n", "value": "3"}]})
    );
    assert_answer!(
        run(
            "state_at",
            json!({"function": "gen", "line": 21, "occurrence": 3, "variables": ["i"]})
        ),
        json!({"observed_state": [{"variable": "i", "value": "3"}]})
    );
    assert_answer!(
        run(
            "state_across_tests",
            json!({"function": "total", "line": 3, "variable": "t", "occurrence": 2})
        ),
        json!({"observed_states": [{"test": A, "value": "1"}, {"test": B, "value": "1"}]})
    );
}

#[test]
fn s4_def_use_from_given_uses_and_from_source() {
    // defs: xs@1 (argument), t@2, x@3, t@6. Line 3 runs 4 times, 4 and 6 three times each.
    let want = json!({"observed_def_use_pairs": [
        {"variable": "t", "def_line": 2, "use_line": 6, "count": 1},
        {"variable": "t", "def_line": 6, "use_line": 6, "count": 2},
        {"variable": "t", "def_line": 6, "use_line": 7, "count": 1},
        {"variable": "x", "def_line": 3, "use_line": 4, "count": 3},
        {"variable": "x", "def_line": 3, "use_line": 6, "count": 3},
        {"variable": "xs", "def_line": 1, "use_line": 3, "count": 4},
    ]});
    let uses = json!({"3": ["xs"], "4": ["x"], "5": ["x"], "6": ["t", "x"], "7": ["t"]});
    assert_answer!(
        run("def_use_pairs", json!({"function": "total", "uses": uses})),
        want.clone()
    );
    let src = include_str!("fixtures/sample.py");
    assert_answer!(
        run("def_use_pairs", json!({"function": "total", "source": src})),
        want
    );
    let u = uses_from_source(src, 1);
    assert_eq!(u[&5], vec!["ValueError", "x"]);
    assert_eq!(u[&26], vec!["gen", "n"]);
    // Across tests: test_negative also reaches the raise at 5 with x = -2.
    assert_answer!(
        run(
            "def_use_across_tests",
            json!({"function": "total", "uses": uses, "variable": "x"})
        ),
        json!({"def_use_pairs": [
            {"variable": "x", "def_line": 3, "use_line": 4, "tests": [A, B]},
            {"variable": "x", "def_line": 3, "use_line": 5, "tests": [B]},
            {"variable": "x", "def_line": 3, "use_line": 6, "tests": [A, B]},
        ]})
    );
}

#[test]
fn s5_exception_raised_in_total_handled_in_safe_total() {
    assert_answer!(
        run("exception_info", json!({"type": "ValueError"})),
        json!({"exception": {"type": "ValueError", "message": "negative: -2", "raised_in": "total",
               "raise_line": 5, "handled_in": "safe_total", "handler_line": 13, "unwound": ["total"]}})
    );
    assert_answer!(
        run("raising_tests", json!({"type": "ValueError"})),
        json!({"crashing_tests": [B], "safe_tests": [A, C]})
    );
    assert_answer!(
        run(
            "raising_tests",
            json!({"type": "ValueError", "uncaught": true})
        ),
        json!({"crashing_tests": [], "safe_tests": [A, B, C]})
    );
}

#[test]
fn s6_calls_without_generator_resumptions() {
    // gen's frame starts at the first next() of the for loop at 26; its 3 resumptions are
    // not calls; acc.append is C code and not traced.
    assert_answer!(
        run("call_sequence", json!({"function": "consume"})),
        json!({"call_sequence": [{"function": "gen", "line": 26}]})
    );
    assert_answer!(
        run("callees_count", json!({"function": "safe_total"})),
        json!({"callees": [{"function": "total", "count": 1}]})
    );
    assert_answer!(
        run("callees_across_tests", json!({"function": "total"})),
        json!({"callees_per_test": [{"test": A, "callees": []}, {"test": B, "callees": []}]})
    );
    assert_answer!(
        run("call_graph", json!({"within": "src/"})),
        json!({"call_graph": {"consume": ["gen"], "safe_total": ["total"]}})
    );
}

#[test]
fn s7_invariants() {
    assert_answer!(
        run(
            "invariants_in_test",
            json!({"function": "gen", "line": 21, "variable": "i", "test": "test_gen"})
        ),
        json!({"invariants": {"observations": 3, "types": ["int"], "single_type": true,
               "non_negative": true, "constant": false, "monotonic": "non_decreasing"}})
    );
    // t after `t += x`: test_total 1, 3, 6; test_negative 1.
    assert_answer!(
        run(
            "invariants_across_tests",
            json!({"function": "total", "line": 6, "variable": "t"})
        ),
        json!({"invariants": {"observations": 4, "types": ["int"], "single_type": true,
               "non_negative": true, "constant": false, "monotonic": "non_decreasing"},
               "tests": [A, B]})
    );
}
