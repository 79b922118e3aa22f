//! Intra-procedural control flow: S1 (`executed_path`, `covered_lines`) and M1
//! (`coverage_across_tests`).
use crate::common::{all_invocations, in_test_order, pick_invocation, test_ids, Norm};
use crate::{ExtractError, Params};
use flux_trace::{Kind, Trace};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) const EXECUTED_PATH: &str = "\
The lines executed by the Nth invocation (`invocation`, default 1) of `function`, in execution \
order, one entry per `line` event of that frame (a line executed k times appears k times; lines \
of called functions are not included, nor are those of comprehensions and generator expressions, \
which run in frames of their own in Python 3.11 such as `f.<locals>.<listcomp>`; a generator's \
resumptions are part of its one invocation). \
Answer: {\"executed_path\": [{\"line\": L}, ...]}; `normalize` = absolute (default) or relative \
(def line = 1).";

pub(crate) const COVERED_LINES: &str = "\
The set of lines of `function` executed by any of its invocations (optionally only those first \
called in `test`), sorted ascending, each once. Answer: {\"covered_lines\": [L, ...]}.";

pub(crate) const COVERAGE_ACROSS_TESTS: &str = "\
Without `line`: for every test of the trace in start order, the sorted set of lines of \
`function` executed while that test ran (a `line` event of a frame of `function` whose `test` is \
that test; tests that never execute it get an empty list). Answer: {\"coverage\": [{\"test\": T, \
\"lines\": [L, ...]}, ...]}. With `line` (absolute): {\"covering_tests\": [tests in which that \
line of `function` executes], \"non_covering_tests\": [every other test]}, both in start order.";

pub(crate) fn executed_path(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let (_, inv) = pick_invocation(t, p, function)?;
    let norm = Norm::new(t, p, &inv)?;
    let path: Vec<Value> = inv
        .lines(t)
        .into_iter()
        .map(|l| json!({"line": norm.apply(l)}))
        .collect();
    Ok(json!({ "executed_path": path }))
}

pub(crate) fn covered_lines(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = all_invocations(t, p, function)?;
    let norm = Norm::new(t, p, &invs[0])?;
    let lines: BTreeSet<u32> = invs.iter().flat_map(|i| i.lines(t)).collect();
    let lines: Vec<i64> = lines.into_iter().map(|l| norm.apply(l)).collect();
    Ok(json!({ "covered_lines": lines }))
}

pub(crate) fn coverage_across_tests(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = all_invocations(t, p, function)?;
    let norm = Norm::new(t, p, &invs[0])?;
    let mut per_test: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for inv in &invs {
        for &i in &inv.events {
            let e = &t.events[i];
            if e.ev == Kind::Line && !e.test.is_empty() {
                per_test.entry(e.test.as_str()).or_default().insert(e.line);
            }
        }
    }
    let tests = test_ids(t);
    if let Some(line) = p.opt_line("line")? {
        let covering: BTreeSet<String> = per_test
            .iter()
            .filter(|(_, ls)| ls.contains(&line))
            .map(|(t, _)| t.to_string())
            .collect();
        let others: BTreeSet<String> = tests
            .iter()
            .filter(|t| !covering.contains(*t))
            .cloned()
            .collect();
        return Ok(json!({
            "covering_tests": in_test_order(&tests, &covering),
            "non_covering_tests": in_test_order(&tests, &others),
        }));
    }
    let coverage: Vec<Value> = tests
        .iter()
        .map(|id| {
            let lines: Vec<i64> = per_test
                .get(id.as_str())
                .map(|ls| ls.iter().map(|&l| norm.apply(l)).collect())
                .unwrap_or_default();
            json!({"test": id, "lines": lines})
        })
        .collect();
    Ok(json!({ "coverage": coverage }))
}

#[cfg(test)]
mod tests {
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
            extract(&t, "executed_path", &p).unwrap(),
            json!({"executed_path": [{"line": 11}, {"line": 12}, {"line": 14}]})
        );
        // Invocation 2, relative to the def line 10: 11-10+1 = 2, 14-10+1 = 5.
        let p = params(json!({"function": "f", "invocation": 2, "normalize": "relative"})).unwrap();
        assert_eq!(
            extract(&t, "executed_path", &p).unwrap(),
            json!({"executed_path": [{"line": 2}, {"line": 5}]})
        );
        // The test filter renumbers: test_b's first invocation is the second overall.
        let p = params(json!({"function": "f", "test": "test_b"})).unwrap();
        assert_eq!(
            extract(&t, "executed_path", &p).unwrap(),
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
}
