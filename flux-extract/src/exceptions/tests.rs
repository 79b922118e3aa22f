//! Unit tests of the exceptions extractors on hand-built traces (`testkit`).
use crate::testkit::TraceBuilder;
use crate::{extract, params};
use serde_json::json;

/// test_a: outer (10) calls parse (20); parse raises ValueError at 22 and unwinds; outer
/// gets the propagated exception event at 11 and handles it at 12.
/// test_b: parse raises KeyError at 23; as in Python 3.11 the `except` line 24 runs before
/// the hook's `handled` event (at 24) and the except body 25: handled in parse at 24.
/// test_c: parse raises ValueError at 22, unwinds, outer unwinds, and the caller of outer
/// is untraced → unhandled in traced code.
/// test_d: nothing raised.
/// test_e: parse raises TypeError at 23 and goes on at 26 with no `handled` event (a tracer
/// without handled events): handled in parse, handler line unknown.
fn exc() -> flux_trace::Trace {
    TraceBuilder::new()
        .test("t.py::test_a")
        .call("outer", 10, &[])
        .line(11, &[])
        .call("parse", 20, &[("s", "'x'")])
        .line(21, &[])
        .line(22, &[])
        .raise("ValueError", "bad x")
        .unwind("ValueError", "bad x")
        .raise("ValueError", "bad x")
        .handled(12, "ValueError", "bad x")
        .line(13, &[])
        .ret("None")
        .end("passed")
        .test("t.py::test_b")
        .call("parse", 20, &[("s", "'y'")])
        .line(23, &[])
        .raise("KeyError", "'y'")
        .line(24, &[])
        .handled(24, "KeyError", "'y'")
        .line(25, &[])
        .ret("None")
        .end("passed")
        .test("t.py::test_c")
        .call("outer", 10, &[])
        .line(11, &[])
        .call("parse", 20, &[("s", "'z'")])
        .line(22, &[])
        .raise("ValueError", "bad z")
        .unwind("ValueError", "bad z")
        .raise("ValueError", "bad z")
        .unwind("ValueError", "bad z")
        .end("failed")
        .test("t.py::test_d")
        .end("passed")
        .test("t.py::test_e")
        .call("parse", 20, &[("s", "1")])
        .line(23, &[])
        .raise("TypeError", "no")
        .line(26, &[])
        .line(27, &[])
        .ret("None")
        .end("passed")
        .build()
}

#[test]
fn exception_info_follows_the_exception_to_its_handler() {
    let t = exc();
    let p = params(json!({"type": "ValueError"})).unwrap();
    // The event at outer:11 continues the propagation from parse, so it is not a raise.
    assert_eq!(
        extract(&t, "exception_info", &p).unwrap(),
        json!({"exception": {"type": "ValueError", "message": "bad x", "raised_in": "parse",
               "raise_line": 22, "handled_in": "outer", "handler_line": 12,
               "unwound": ["parse"]}})
    );
    let p = params(json!({"type": "ValueError", "occurrence": 2})).unwrap();
    assert_eq!(
        extract(&t, "exception_info", &p).unwrap(),
        json!({"exception": {"type": "ValueError", "message": "bad z", "raised_in": "parse",
               "raise_line": 22, "handled_in": null, "handler_line": null,
               "unwound": ["parse", "outer"]}})
    );
    let p = params(json!({"test": "test_b"})).unwrap();
    assert_eq!(
        extract(&t, "exception_info", &p).unwrap(),
        json!({"exception": {"type": "KeyError", "message": "'y'", "raised_in": "parse",
               "raise_line": 23, "handled_in": "parse", "handler_line": 24, "unwound": []}})
    );
    let p = params(json!({"type": "TypeError"})).unwrap();
    assert_eq!(
        extract(&t, "exception_info", &p).unwrap(),
        json!({"exception": {"type": "TypeError", "message": "no", "raised_in": "parse",
               "raise_line": 23, "handled_in": "parse", "handler_line": null, "unwound": []}})
    );
}

#[test]
fn exception_info_out_of_range_says_how_many() {
    let t = exc();
    let p = params(json!({"type": "ValueError", "occurrence": 3})).unwrap();
    let err = extract(&t, "exception_info", &p).unwrap_err().to_string();
    assert!(
        err.contains("the trace has 2 `ValueError` exception(s) raised; occurrence 3"),
        "{err}"
    );
}

#[test]
fn raising_tests_split_the_suite() {
    let t = exc();
    let p = params(json!({"type": "ValueError"})).unwrap();
    assert_eq!(
        crate::testkit::pick(
            &extract(&t, "raising_tests", &p).unwrap(),
            &json!({"crashing_tests": [""], "safe_tests": [""]})
        ),
        json!({"crashing_tests": ["t.py::test_a", "t.py::test_c"],
               "safe_tests": ["t.py::test_b", "t.py::test_d", "t.py::test_e"]})
    );
    let p = params(json!({"type": "ValueError", "uncaught": true})).unwrap();
    assert_eq!(
        crate::testkit::pick(
            &extract(&t, "raising_tests", &p).unwrap(),
            &json!({"crashing_tests": [""], "safe_tests": [""]})
        ),
        json!({"crashing_tests": ["t.py::test_c"],
               "safe_tests": ["t.py::test_a", "t.py::test_b", "t.py::test_d", "t.py::test_e"]})
    );
}

/// Issue 25: SWE-Flux's flat `exception_type` + `exception_message` of the exception that
/// propagates out of the target (not one its callee raised and it handled).
#[test]
fn exception_info_with_escapes_keeps_what_propagates_out_of_the_function() {
    let t = exc();
    let get = |v: serde_json::Value| extract(&t, "exception_info", &params(v).unwrap());
    // parse's ValueError of test_a is handled in outer: the first to leave outer is test_c's.
    let out = get(json!({"escapes": "outer"})).unwrap();
    assert_eq!(out["exception"]["message"], "bad z");
    assert_eq!(out["exception"]["type"], "ValueError");
    // Out of parse: test_a's first (it unwinds parse, then outer handles it).
    assert_eq!(
        get(json!({"escapes": "parse"})).unwrap()["exception"]["message"],
        "bad x"
    );
    // KeyError of test_b is handled inside parse: it never leaves it.
    let err = get(json!({"escapes": "parse", "type": "KeyError"})).unwrap_err();
    assert!(
        err.to_string().contains("that propagate out of `parse`"),
        "{err}"
    );
}
