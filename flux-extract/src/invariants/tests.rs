//! Unit tests of the invariants extractors on hand-built traces (`testkit`).
use crate::testkit::TraceBuilder;
use crate::{extract, params};
use serde_json::json;

/// The fixture of the state tests: f(n) counting i up to n, in two tests.
use crate::state::tests::counting;

#[test]
fn invariants_in_one_test_and_across_tests() {
    let t = counting();
    // In test_a, i after line 4: 1, 2 → ints, non-negative, non_decreasing, not constant.
    let p = params(json!({"function": "f", "line": 4, "variable": "i", "test": "test_a"})).unwrap();
    assert_eq!(
        extract(&t, "invariants_in_test", &p).unwrap(),
        json!({"invariants": {"observations": 2, "types": ["int"], "single_type": true,
               "non_negative": true, "constant": false, "monotonic": "non_decreasing"}})
    );
    // Across tests: test_a [1, 2] non_decreasing, test_b [1] constant → non_decreasing;
    // 3 observations overall, values 1, 2, 1 are not all equal.
    let p = params(json!({"function": "f", "line": 4, "variable": "i"})).unwrap();
    assert_eq!(
        extract(&t, "invariants_across_tests", &p).unwrap(),
        json!({"invariants": {"observations": 3, "types": ["int"], "single_type": true,
               "non_negative": true, "constant": false, "monotonic": "non_decreasing"},
               "tests": ["t.py::test_a", "t.py::test_b"]})
    );
    let p = params(json!({"function": "f", "line": 4, "variable": "q"})).unwrap();
    assert!(extract(&t, "invariants_in_test", &p).is_err());
}

#[test]
fn invariants_of_mixed_and_decreasing_values() {
    // g at 1: line 2 executes 3 times; x after it: 3, 1.5, then 'a' (a str).
    let t = TraceBuilder::new()
        .call("g", 1, &[])
        .line(2, &[])
        .line(3, &[("x", "3")])
        .line(2, &[])
        .line(3, &[("x", "1.5")])
        .line(2, &[])
        .ret_with("None", &[("x", "'a'")])
        .build();
    let p = params(json!({"function": "g", "line": 2, "variable": "x"})).unwrap();
    assert_eq!(
        extract(&t, "invariants_in_test", &p).unwrap(),
        json!({"invariants": {"observations": 3, "types": ["float", "int", "str"],
               "single_type": false, "non_negative": false, "constant": false,
               "monotonic": "none"}})
    );
}
