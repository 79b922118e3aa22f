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

/// SWE-Flux's "the statement's 19th completion during the test, over all invocations": line 4
/// executes twice in f's 1st invocation and once in its 2nd, so its 3rd execution is the 2nd
/// invocation's first (i = '1', n = '1').
#[test]
fn state_at_counts_occurrences_across_invocations() {
    let t = counting();
    let p = params(
        json!({"function": "f", "line": 4, "occurrence": 3, "across_invocations": true,
        "variables": ["i", "n"]}),
    )
    .unwrap();
    assert_eq!(
        extract(&t, "state_at", &p).unwrap(),
        json!({"observed_state": [{"variable": "i", "value": "1"}, {"variable": "n", "value": "1"}]})
    );
    let p =
        params(json!({"function": "f", "line": 4, "occurrence": 4, "across_invocations": true}))
            .unwrap();
    let err = extract(&t, "state_at", &p).unwrap_err().to_string();
    assert!(
        err.contains("line 4 executes 3 time(s) over the invocations of `f`"),
        "{err}"
    );
}

/// A multi-line assignment executes once though 3.11 reports its first line twice (at its
/// start and when the store completes): `line_mode = "statement"` counts executions and reads
/// the state after the completing event (their "the Nth completion of the statement").
#[test]
fn state_at_counts_statement_executions_of_multi_line_statements() {
    let src = "def f(n):\n    x = g(\n        n)\n    return x\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("f", 1, &[("n", "1")])
        .line(2, &[])
        .line(3, &[])
        .line(2, &[])
        .line(4, &[("x", "2")])
        .ret("2")
        .call("f", 1, &[("n", "5")])
        .line(2, &[])
        .line(3, &[])
        .line(2, &[])
        .line(4, &[("x", "6")])
        .ret("6")
        .build();
    let p = |mode: &str| {
        params(
            json!({"function": "f", "line": 2, "occurrence": 2, "across_invocations": true,
            "variables": ["n", "x"], "line_mode": mode}),
        )
        .unwrap()
    };
    assert_eq!(
        extract(&t, "state_at", &p("statement")).unwrap(),
        json!({"observed_state": [{"variable": "n", "value": "5"}, {"variable": "x", "value": "6"}]})
    );
    // Reported lines: the 2nd line-2 event is the 1st call's completing one.
    assert_eq!(
        extract(&t, "state_at", &p("reported")).unwrap(),
        json!({"observed_state": [{"variable": "n", "value": "1"}, {"variable": "x", "value": "2"}]})
    );
}

/// SWE-Flux's `value_history` items are `{step, value}`: step numbers the entries from 1.
#[test]
fn value_history_numbers_its_steps() {
    let t = counting();
    let p = params(json!({"function": "f", "variable": "i", "lines": [4], "at": "after"})).unwrap();
    let h = extract(&t, "value_history", &p).unwrap();
    let steps: Vec<(i64, String)> = h["value_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["step"].as_i64().unwrap(),
                x["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [(1, "1".to_string()), (2, "2".into()), (3, "1".into())]
    );
}

/// SWE-Flux's "the unique values of the tuple `(i, n)`": each observation's value is the repr of
/// the tuple of the locals' reprs, and the distinct ones are kept (sorted); an observation
/// where one of them is unbound is skipped (line 2, before `i` is bound).
#[test]
fn unique_values_of_a_tuple_of_locals() {
    let t = counting();
    let p = params(
        json!({"function": "f", "variables": ["i", "n"], "lines": [2, 4],
        "at": "before"}),
    )
    .unwrap();
    assert_eq!(
        extract(&t, "unique_values", &p).unwrap(),
        json!({"unique_values": ["(0, 1)", "(0, 2)", "(1, 2)"], "observations": 3})
    );
    // One local as a tuple is `(v,)`; as `variable`, its bare repr.
    let p = params(json!({"function": "f", "variables": ["n"], "lines": [2]})).unwrap();
    assert_eq!(
        extract(&t, "unique_values", &p).unwrap()["unique_values"],
        json!(["(1,)", "(2,)"])
    );
    let p = params(json!({"function": "f", "variable": "n", "lines": [2]})).unwrap();
    assert_eq!(
        extract(&t, "unique_values", &p).unwrap()["unique_values"],
        json!(["1", "2"])
    );
}

/// SWE-Flux's "immediately after each execution of the assignment statement that begins on line
/// 3 and ends on line 6" (a comprehension inside): 3.11 reports line 3, the iterable's line 5,
/// then line 3 again as the statement completes. Observed per reported line, the first line-3
/// event is read at line 5 (the old `out`) and makes an extra entry; per statement, one
/// execution is one entry, read at line 7.
#[test]
fn observations_per_statement_execution_of_a_multi_line_statement() {
    let src = "def f(xs):\n    out = []\n    out = [\n        x * 2\n        for x in xs\n    ]\n    return out\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("f", 1, &[("xs", "[1, 2]")])
        .line(2, &[])
        .line(3, &[("out", "[]")])
        .line(5, &[])
        .line(3, &[])
        .line(7, &[("out", "[2, 4]")])
        .ret("[2, 4]")
        .build();
    let history = |mode: &str, at: &str| {
        let p = params(
            json!({"function": "f", "variable": "out", "lines": [3], "at": at,
            "line_mode": mode}),
        )
        .unwrap();
        let h = extract(&t, "value_history", &p).unwrap();
        h["value_history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["value"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(history("reported", "after"), ["[]", "[2, 4]"]);
    assert_eq!(history("statement", "after"), ["[2, 4]"]);
    assert_eq!(history("statement", "before"), ["[]"]);
    // A line inside the statement names no statement of its own.
    let p = params(
        json!({"function": "f", "variable": "out", "lines": [5], "at": "after",
        "line_mode": "statement"}),
    )
    .unwrap();
    assert!(extract(&t, "value_history", &p).is_err());
    // Without static facts the mode says what it needs.
    let bare = TraceBuilder::new()
        .call("f", 1, &[("xs", "[1, 2]")])
        .line(3, &[])
        .ret("[]")
        .build();
    let err = extract(&bare, "value_history", &p).unwrap_err().to_string();
    assert!(
        err.contains("line_mode = \"statement\"` needs the static facts"),
        "{err}"
    );
}

/// SWE-Flux's "each line event at L1 and each return at L2": line 4's events (the state before
/// it runs) and the returns at line 5, in trace order.
#[test]
fn observations_at_line_events_and_returns_together() {
    let t = counting();
    let p = params(json!({"function": "f", "variable": "i", "lines": [4, 5],
        "event": "line_and_return", "at": "before"}))
    .unwrap();
    let h = extract(&t, "value_history", &p).unwrap();
    let got: Vec<(u64, &str)> = h["value_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["line"].as_u64().unwrap(), x["value"].as_str().unwrap()))
        .collect();
    // Line 5's line events count too (the state before `return i` runs), then each return.
    assert_eq!(
        got,
        [
            (4, "0"),
            (4, "1"),
            (5, "2"),
            (5, "2"),
            (4, "0"),
            (5, "1"),
            (5, "1")
        ]
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

/// "Record every distinct value each variable holds from the moment it is first assigned until
/// the frame exits ... Collect the distinct repr strings observed for `result` and `keys`
/// COMBINED into one set" (kedro node_from_dict_m3_state, dev): `event = "change"` with
/// `combine = "union"` pools the values each variable holds, where the default is their tuple.
#[test]
fn unique_values_pooled_over_several_locals() {
    let t = counting();
    let p = params(
        json!({"function": "f", "variables": ["i", "n"], "event": "change", "combine": "union"}),
    )
    .unwrap();
    assert_eq!(
        extract(&t, "unique_values", &p).unwrap()["unique_values"],
        json!(["0", "1", "2"])
    );
    let p = params(json!({"function": "f", "variables": ["i", "n"], "event": "change"})).unwrap();
    assert_eq!(
        extract(&t, "unique_values", &p).unwrap()["unique_values"],
        json!(["(0, 1)", "(0, 2)", "(1, 1)", "(1, 2)", "(2, 2)"])
    );
}

/// SWE-Flux's flat snapshots (llama_factory adapter_setup_freeze_tuning_m3_state, dev): at
/// each normal return, one row per local, `{invocation, variable, value}` sorted by
/// invocation, variable, value.
#[test]
fn state_snapshots_one_row_per_variable_at_each_return() {
    let t = counting();
    let p = params(
        json!({"function": "f", "event": "return", "variables": ["n", "i"],
        "rows": "variables"}),
    )
    .unwrap();
    let got = extract(&t, "state_snapshots", &p).unwrap();
    let rows: Vec<(u64, &str, &str)> = got["state_snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["invocation"].as_u64().unwrap(),
                r["variable"].as_str().unwrap(),
                r["value"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [(1, "i", "2"), (1, "n", "2"), (2, "i", "1"), (2, "n", "1")]
    );
    // the default keeps one entry per observation
    let p = params(json!({"function": "f", "event": "return", "variables": ["n", "i"]})).unwrap();
    let got = extract(&t, "state_snapshots", &p).unwrap();
    assert_eq!(got["state_snapshots"].as_array().unwrap().len(), 2);
}

/// `render = "str"`: numbers are written as they are (their `str()` is their repr).
#[test]
fn state_at_renders_values_as_str_gives_them() {
    let t = TraceBuilder::new()
        .test("t.py::test_a")
        .call("f", 1, &[("s", "'x y'")])
        .line(2, &[])
        .line(3, &[("i", "0")])
        .ret("None")
        .end("passed")
        .build();
    let p = params(json!({"function": "f", "line": 2, "render": "str"})).unwrap();
    assert_eq!(
        extract(&t, "state_at", &p).unwrap(),
        json!({"observed_state": [{"variable": "i", "value": "0"}, {"variable": "s", "value": "x y"}]})
    );
}

/// SWE-Flux's labelled program points (llama_factory llamafy_qwen_save_weight_m3_state, dev:
/// "Define program points `line_58_exec_1` and `line_58_exec_3` as the first and third
/// executions of line 58 … sort by point using execution index order, then by variable"):
/// `occurrences` picks the executions, `point_label` names them, rows follow the points.
#[test]
fn state_snapshots_at_labelled_points_in_execution_order() {
    let t = counting();
    let p = params(json!({"function": "f", "invocation": 1, "lines": [3],
        "occurrences": [1, 3], "variables": ["n", "i"], "rows": "variables",
        "point_label": "line_{line}_exec_{nth}"}))
    .unwrap();
    let rows = extract(&t, "state_snapshots", &p).unwrap();
    let got: Vec<(String, String, String)> = rows["state_snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            (s("point"), s("variable"), s("value"))
        })
        .collect();
    let want = [
        ("line_3_exec_1", "i", "0"),
        ("line_3_exec_1", "n", "2"),
        ("line_3_exec_3", "i", "2"),
        ("line_3_exec_3", "n", "2"),
    ];
    assert_eq!(
        got,
        want.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
    // Without a label the rows keep their order (invocation, variable, value) and no `point`.
    let p = params(json!({"function": "f", "invocation": 1, "lines": [3],
        "occurrences": [1, 3], "variables": ["n", "i"], "rows": "variables"}))
    .unwrap();
    let rows = extract(&t, "state_snapshots", &p).unwrap();
    let first = &rows["state_snapshots"][0];
    assert!(first.get("point").is_none(), "{first}");
    assert_eq!(rows["state_snapshots"].as_array().unwrap().len(), 4);
}
