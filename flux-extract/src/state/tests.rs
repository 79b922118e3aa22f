//! Unit tests of the state extractors on hand-built traces (`testkit`).
use crate::testkit::TraceBuilder;
use crate::{extract, params};
use serde_json::json;

/// f(n) at 1: 2 `i = 0`, 3 `while i < n:`, 4 `i += 1`, 5 `return i`.
/// Called with n=2 in test_a: call{n:2} 2 3{i:0} 4 3{i:1} 4 3{i:2} 5 return.
/// After line 4's 1st execution the next frame event is `3{i:1}` → i = '1';
/// after its 2nd → '2'. After line 2 → i = '0' (seen on the line-3 event).
/// Called with n=1 in test_b: after line 4's 1st execution i = '1'.
pub(crate) fn counting() -> flux_trace::Trace {
    TraceBuilder::new()
        .test("t.py::test_a")
        .call("f", 1, &[("n", "2")])
        .line(2, &[])
        .line(3, &[("i", "0")])
        .line(4, &[])
        .line(3, &[("i", "1")])
        .line(4, &[])
        .line(3, &[("i", "2")])
        .line(5, &[])
        .ret("2")
        .end("passed")
        .test("t.py::test_b")
        .call("f", 1, &[("n", "1")])
        .line(2, &[])
        .line(3, &[("i", "0")])
        .line(4, &[])
        .line(3, &[("i", "1")])
        .line(5, &[])
        .ret("1")
        .end("passed")
        .build()
}

#[test]
fn state_at_reads_the_next_event_of_the_frame() {
    let t = counting();
    let p = params(json!({"function": "f", "line": 4, "occurrence": 2, "variables": ["i", "n"]}))
        .unwrap();
    assert_eq!(
        extract(&t, "state_at", &p).unwrap(),
        json!({"observed_state": [{"variable": "i", "value": "2"}, {"variable": "n", "value": "2"}]})
    );
    // Without `variables`: every bound local, by name.
    let p = params(json!({"function": "f", "line": 2})).unwrap();
    assert_eq!(
        extract(&t, "state_at", &p).unwrap(),
        json!({"observed_state": [{"variable": "i", "value": "0"}, {"variable": "n", "value": "2"}]})
    );
}

#[test]
fn state_at_errors_say_what_is_missing() {
    let t = counting();
    let p = params(json!({"function": "f", "line": 4, "occurrence": 3})).unwrap();
    let err = extract(&t, "state_at", &p).unwrap_err().to_string();
    assert!(
        err.contains("line 4 executes 2 time(s) in invocation 1 of `f`; occurrence 3"),
        "{err}"
    );
    let p = params(json!({"function": "f", "line": 2, "variables": ["zz"]})).unwrap();
    let err = extract(&t, "state_at", &p).unwrap_err().to_string();
    assert!(err.contains("variable `zz` is not bound"), "{err}");
}

#[test]
fn state_across_tests_one_value_per_test() {
    let t = counting();
    let p = params(json!({"function": "f", "line": 4, "variable": "i", "occurrence": 2})).unwrap();
    // Only test_a executes line 4 twice.
    assert_eq!(
        extract(&t, "state_across_tests", &p).unwrap(),
        json!({"observed_states": [{"test": "t.py::test_a", "value": "2"}]})
    );
    let p = params(json!({"function": "f", "line": 4, "variable": "i"})).unwrap();
    assert_eq!(
        extract(&t, "state_across_tests", &p).unwrap(),
        json!({"observed_states": [{"test": "t.py::test_a", "value": "1"},
                                   {"test": "t.py::test_b", "value": "1"}]})
    );
}
