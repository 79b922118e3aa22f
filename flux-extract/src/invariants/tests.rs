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

/// A predicate a question gave in prose is evaluated as the Python it was compiled to and
/// reported in the question's words (`labels`), sorted by them: without labels the report
/// showed `(len(name)) > (8)` where their answer says `len(name) is strictly greater than 8`.
#[test]
fn predicate_report_reports_each_predicate_by_its_label() {
    let t = TraceBuilder::new()
        .call("f", 1, &[])
        .check(2, "(len(name)) > (8)", Some(true), "")
        .check(2, "(len(name)) > (8)", Some(false), "")
        .check(3, "x is None", Some(true), "")
        .ret("None")
        .build();
    let p = |labels: serde_json::Value| {
        let mut p = json!({"function": "f", "predicates": ["(len(name)) > (8)", "x is None"]});
        if !labels.is_null() {
            p["labels"] = labels;
        }
        params(p).unwrap()
    };
    let got = extract(
        &t,
        "predicate_report",
        &p(json!(["len(name) is strictly greater than 8", "x is None"])),
    )
    .unwrap();
    let rows: Vec<(String, u64)> = got["invariant_report"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["predicate"].as_str().unwrap().to_string(),
                r["violations"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("len(name) is strictly greater than 8".to_string(), 1),
            ("x is None".to_string(), 0)
        ]
    );
    let err = extract(&t, "predicate_report", &p(json!(["one"]))).unwrap_err();
    assert!(err.to_string().contains("one label per predicate"), "{err}");
}
