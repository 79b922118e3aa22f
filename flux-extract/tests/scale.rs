//! Extractors on a large trace: 100 tests × 200 invocations of f, each with a 5-pass loop and
//! a call to g (≈ 360,000 events), all answered from one index (as `flux gen` asks many
//! questions of one trace). A quadratic extractor would take minutes; the times are printed,
//! never asserted (`cargo xtask bench extract` measures on a real trace).
use flux_extract::testkit::TraceBuilder;
use flux_extract::{extract_indexed, params};
use flux_trace::TraceIndex;
use serde_json::json;
use std::time::Instant;

#[test]
fn across_tests_extractors_on_a_large_trace() {
    let mut tb = TraceBuilder::new();
    for t in 0..100 {
        tb = tb.test(&format!("t.py::test_{t}"));
        for _ in 0..200 {
            tb = tb.call("f", 10, &[("n", "5")]).line(11, &[]);
            for i in 0..5 {
                tb = tb.line(12, &[("i", &i.to_string())]).line(13, &[]);
            }
            tb = tb
                .line(12, &[])
                .line(14, &[])
                .call("g", 20, &[])
                .line(21, &[])
                .ret("None")
                .ret("None");
        }
        tb = tb.end("passed");
    }
    let trace = tb.build();
    assert!(trace.events.len() > 350_000);
    let uses = json!({"13": ["i"], "12": ["n"]});
    let cases = [
        ("covered_lines", json!({"function": "f"})),
        ("coverage_across_tests", json!({"function": "f"})),
        (
            "loop_iterations_across_tests",
            json!({"function": "f", "header": 12, "body_end": 13}),
        ),
        (
            "state_across_tests",
            json!({"function": "f", "line": 13, "variable": "i"}),
        ),
        (
            "def_use_across_tests",
            json!({"function": "f", "uses": uses}),
        ),
        ("raising_tests", json!({"type": "ValueError"})),
        ("callees_across_tests", json!({"function": "f"})),
        ("call_graph", json!({})),
        (
            "invariants_across_tests",
            json!({"function": "f", "line": 13, "variable": "i"}),
        ),
        (
            "executed_path",
            json!({"function": "f", "invocation": 20000}),
        ),
    ];
    let start = Instant::now();
    let ix = TraceIndex::new(&trace);
    eprintln!("index: {:?}", start.elapsed());
    for (name, p) in cases {
        let start = Instant::now();
        let answer = extract_indexed(&ix, name, &params(p).unwrap()).unwrap();
        eprintln!("{name}: {:?}", start.elapsed());
        if name == "loop_iterations_across_tests" {
            // Every test runs the loop 200 × 5 times.
            assert_eq!(answer["min_iterations"], json!(1000));
            assert_eq!(answer["max_iterations"], json!(1000));
        }
    }
}
