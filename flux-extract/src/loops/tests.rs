//! Unit tests of the loops extractors on hand-built traces (`testkit`).
use crate::testkit::TraceBuilder;
use crate::{extract, params};
use serde_json::json;

/// f: 10 def, 11 `total = 0`, 12 `for x in xs:`, 13 `if x < 0: break`... simplified:
/// 12 header, body 13..14, 15 after the loop.
/// Invocation 1 (xs of 3): 11 12 13 14 12 13 14 12 13 14 12 15 → the header is followed by
/// a body line 3 times; the 4th header event (exhaustion) is followed by 15 → 3 iterations.
/// Invocation 2 (break on the 2nd item): 11 12 13 14 12 13 15 → 2 iterations.
/// Invocation 3 (empty xs): 11 12 15 → entered once, 0 iterations.
fn loops() -> flux_trace::Trace {
    let mut tb = TraceBuilder::new()
        .test("t.py::test_three")
        .call("f", 10, &[])
        .line(11, &[]);
    for _ in 0..3 {
        tb = tb.line(12, &[]).line(13, &[]).line(14, &[]);
    }
    tb = tb.line(12, &[]).line(15, &[]).ret("None").end("passed");
    tb = tb
        .test("t.py::test_break")
        .call("f", 10, &[])
        .line(11, &[])
        .line(12, &[])
        .line(13, &[])
        .line(14, &[])
        .line(12, &[])
        .line(13, &[])
        .line(15, &[])
        .ret("None")
        .end("passed");
    tb.test("t.py::test_empty")
        .call("f", 10, &[])
        .line(11, &[])
        .line(12, &[])
        .line(15, &[])
        .ret("None")
        .end("passed")
        .test("t.py::test_other")
        .end("passed")
        .build()
}

fn count(t: &flux_trace::Trace, inv: u64) -> serde_json::Value {
    let p =
        params(json!({"function": "f", "invocation": inv, "header": 12, "body_end": 14})).unwrap();
    extract(t, "loop_iterations", &p).unwrap()
}

#[test]
fn loop_iterations_counts_header_followed_by_body() {
    let t = loops();
    assert_eq!(count(&t, 1), json!({"loop_iteration_count": 3}));
    assert_eq!(count(&t, 2), json!({"loop_iteration_count": 2}));
    assert_eq!(count(&t, 3), json!({"loop_iteration_count": 0}));
}

/// `f` enters the loop at 12..13 twice from line 11: 11 12 13 12 | 11 12 13 12 13 12 | 11
/// (1, then 2 iterations).
fn two_entries_into_the_loop_at_12() -> flux_trace::Trace {
    TraceBuilder::new()
        .call("f", 10, &[])
        .line(11, &[])
        .line(12, &[])
        .line(13, &[])
        .line(12, &[])
        .line(11, &[])
        .line(12, &[])
        .line(13, &[])
        .line(12, &[])
        .line(13, &[])
        .line(12, &[])
        .line(11, &[])
        .ret("None")
        .build()
}

#[test]
fn loop_entries_are_separated_by_lines_outside_the_loop() {
    // Inner loop at 12..13 inside an outer loop at 11..13: 11 12 13 12 | 11 12 13 12 13 12 | 11
    // Entries into the inner loop come from 11 (outside [12, 13]): 2 entries, 1 then 2
    // iterations.
    let t = two_entries_into_the_loop_at_12();
    let run = |entry: Option<u64>| {
        let mut p = json!({"function": "f", "header": 12, "body_end": 13});
        if let Some(e) = entry {
            p["entry"] = json!(e);
        }
        extract(&t, "loop_iterations", &params(p).unwrap())
    };
    assert_eq!(run(None).unwrap(), json!({"loop_iteration_count": 3}));
    assert_eq!(run(Some(1)).unwrap(), json!({"loop_iteration_count": 1}));
    assert_eq!(run(Some(2)).unwrap(), json!({"loop_iteration_count": 2}));
    let err = run(Some(3)).unwrap_err().to_string();
    assert!(err.contains("entered 2 time(s)"), "{err}");
}

#[test]
fn loop_errors_name_the_problem() {
    let t = loops();
    let p = params(json!({"function": "f", "header": 30, "body_end": 31})).unwrap();
    let err = extract(&t, "loop_iterations", &p).unwrap_err().to_string();
    assert!(
        err.contains("line 30 (the loop header) never executes in invocation 1 of `f`"),
        "{err}"
    );
    let p = params(json!({"function": "f", "header": 12, "body_end": 12})).unwrap();
    assert!(extract(&t, "loop_iterations", &p).is_err());
}

#[test]
fn across_tests_reports_min_and_max() {
    // Totals: test_three 3, test_break 2, test_empty 0; test_other never reaches the loop.
    let t = loops();
    let p = params(json!({"function": "f", "header": 12, "body_end": 14})).unwrap();
    assert_eq!(
        extract(&t, "loop_iterations_across_tests", &p).unwrap(),
        json!({"min_iterations": 0, "max_iterations": 3,
               "tests_with_min": ["t.py::test_empty"], "tests_with_max": ["t.py::test_three"]})
    );
}

/// SWE-Flux's M2 questions count per "loop activation" (an entry into the loop) or per `call`
/// event of a generator (each resumption a separate invocation); loop_stats counted per frame.
#[test]
fn loop_stats_counts_per_entry_or_per_call_event() {
    // Two entries into the loop at 12..13 in one invocation: 1 then 2 iterations.
    let t = two_entries_into_the_loop_at_12();
    let stats = |t: &flux_trace::Trace, per: &str| {
        let p = json!({"function": "f", "header": 12, "body_end": 13, "count": "body_line",
            "body_line": 13, "per": per});
        let a = extract(t, "loop_stats", &params(p).unwrap()).unwrap();
        (
            a["min_iterations"].clone(),
            a["max_iterations"].clone(),
            a["invocations"].clone(),
        )
    };
    assert_eq!(stats(&t, "invocation"), (json!(3), json!(3), json!(1)));
    assert_eq!(stats(&t, "entry"), (json!(1), json!(2), json!(2)));
    // A generator started, suspended twice and resumed: its three call events see 1, 2 and 0
    // iterations.
    let first = 1; // the builder's first activation id, and so the frame
    let g = TraceBuilder::new()
        .call("f", 10, &[])
        .line(12, &[])
        .line(13, &[])
        .suspend("1")
        .resume(first, "f", 13)
        .line(12, &[])
        .line(13, &[])
        .line(12, &[])
        .line(13, &[])
        .suspend("2")
        .resume(first, "f", 13)
        .line(12, &[])
        .line(15, &[])
        .ret("None")
        .build();
    assert_eq!(stats(&g, "invocation"), (json!(3), json!(3), json!(1)));
    assert_eq!(stats(&g, "call"), (json!(0), json!(2), json!(3)));
}

/// `render = "str"` (SWE-Flux's "the raw Python `str` held by `name` … do not return Python
/// `repr()` quoting"): a string's text, where the default writes its repr; an object whose
/// `str()` the repr does not tell is an error, not its repr.
#[test]
fn iteration_value_renders_a_string_as_str_gives_it() {
    let t = TraceBuilder::new()
        .test("t.py::test_names")
        .call("f", 10, &[])
        .line(11, &[])
        .line(12, &[("name", "'a.b'")])
        .line(13, &[])
        .line(12, &[("name", "'it\\'s'"), ("o", "<O object at 0x1>")])
        .line(13, &[])
        .line(12, &[])
        .line(15, &[])
        .ret("None")
        .end("passed")
        .build();
    let value = |it: u32, var: &str, render: Option<&str>| {
        let mut p = json!({"function": "f", "header": 12, "body_end": 14, "iteration": it,
            "variable": var});
        if let Some(r) = render {
            p["render"] = json!(r);
        }
        extract(&t, "iteration_value", &params(p).unwrap()).map(|v| v["value"].clone())
    };
    assert_eq!(value(1, "name", None).unwrap(), json!("'a.b'"));
    assert_eq!(value(1, "name", Some("str")).unwrap(), json!("a.b"));
    assert_eq!(value(2, "name", Some("str")).unwrap(), json!("it's"));
    let e = value(2, "o", Some("str")).unwrap_err().to_string();
    assert!(
        e.contains("<O object at 0x1> is not known from its repr"),
        "{e}"
    );
}
