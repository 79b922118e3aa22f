//! Loops: S2 (`loop_iterations`) and M2 (`loop_iterations_across_tests`).
use crate::common::{all_invocations, in_test_order, pick_invocation, test_ids};
use crate::{ExtractError, Params};
use flux_trace::query::Invocation;
use flux_trace::{Kind, Trace};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) const LOOP_ITERATIONS: &str = "\
Iterations of the loop whose header is at line `header` and whose body spans lines \
(`header`, `body_end`], in the Nth invocation of `function`. Over the frame's `line` events in \
order (nested calls excluded): an *entry* is a `line` event at `header` whose previous `line` \
event of the frame is absent or outside [`header`, `body_end`]; an *iteration* is a `line` event \
at `header` whose next `line` event of the frame is inside (`header`, `body_end`]. The count is \
the number of iterations over all entries, or within the Nth entry if `entry` is given. \
(Python 3.11 reports the header line at each pass, `while True:` included, and once more when \
a `for` loop is exhausted or a `while` condition fails; that last header event is followed by a \
line outside the body, such as an `else:` body, and so is not an iteration; a `break` leaves \
without reaching the header.) Answer: {\"loop_iteration_count\": N}.";

pub(crate) const LOOP_ITERATIONS_ACROSS_TESTS: &str = "\
For every test in which the loop's header line executes (same loop definition as \
`loop_iterations`), the total number of iterations over all invocations of `function` during \
that test (an iteration is attributed to the test of its header `line` event). Answer: the \
minimum and maximum of these totals and the tests attaining each, in start order: \
{\"min_iterations\": N, \"max_iterations\": N, \"tests_with_min\": [...], \"tests_with_max\": [...]}.";

/// Iterations per entry, with the index into `trace.events` of the header event of each
/// iteration.
fn entries(t: &Trace, inv: &Invocation, header: u32, body_end: u32) -> Vec<Vec<usize>> {
    let lines: Vec<(usize, u32)> = inv
        .events
        .iter()
        .filter(|&&i| t.events[i].ev == Kind::Line)
        .map(|&i| (i, t.events[i].line))
        .collect();
    let in_loop = |l: u32| l >= header && l <= body_end;
    let in_body = |l: u32| l > header && l <= body_end;
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (k, &(i, l)) in lines.iter().enumerate() {
        if l != header {
            continue;
        }
        let prev = k.checked_sub(1).map(|p| lines[p].1);
        if prev.is_none_or(|p| !in_loop(p)) || out.is_empty() {
            out.push(Vec::new());
        }
        if lines.get(k + 1).is_some_and(|&(_, next)| in_body(next)) {
            if let Some(last) = out.last_mut() {
                last.push(i);
            }
        }
    }
    out
}

fn loop_lines(p: &Params) -> Result<(u32, u32), ExtractError> {
    let header = p.line("header")?;
    let body_end = p.line("body_end")?;
    if body_end <= header {
        return Err(ExtractError::BadParam {
            param: "body_end".into(),
            expected: "a line after `header`",
            got: body_end.to_string(),
        });
    }
    Ok((header, body_end))
}

pub(crate) fn loop_iterations(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let (header, body_end) = loop_lines(p)?;
    let (n, inv) = pick_invocation(t, p, function)?;
    let entries = entries(t, &inv, header, body_end);
    if entries.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "line {header} (the loop header) never executes in invocation {n} of `{function}`"
        )));
    }
    let count = match p.opt_pos("entry")? {
        None => entries.iter().map(Vec::len).sum::<usize>(),
        Some(k) => {
            let k = usize::try_from(k).unwrap_or(usize::MAX);
            entries.get(k - 1).map(Vec::len).ok_or_else(|| {
                ExtractError::NotObserved(format!(
                    "the loop at line {header} is entered {} time(s) in invocation {n} of \
                     `{function}`; entry {k} was asked for",
                    entries.len()
                ))
            })?
        }
    };
    Ok(json!({ "loop_iteration_count": count }))
}

pub(crate) fn loop_iterations_across_tests(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let (header, body_end) = loop_lines(p)?;
    let invs = all_invocations(t, p, function)?;
    let mut per_test: BTreeMap<String, usize> = BTreeMap::new();
    for inv in &invs {
        // Tests that reach the header count even with zero iterations.
        for &i in &inv.events {
            let e = &t.events[i];
            if e.ev == Kind::Line && e.line == header && !e.test.is_empty() {
                per_test.entry(e.test.clone()).or_insert(0);
            }
        }
        for entry in entries(t, inv, header, body_end) {
            for i in entry {
                let test = &t.events[i].test;
                if !test.is_empty() {
                    *per_test.entry(test.clone()).or_insert(0) += 1;
                }
            }
        }
    }
    let (Some(&min), Some(&max)) = (per_test.values().min(), per_test.values().max()) else {
        return Err(ExtractError::NotObserved(format!(
            "line {header} (the loop header) of `{function}` never executes inside a test"
        )));
    };
    let order = test_ids(t);
    let with = |n: usize| -> BTreeSet<String> {
        per_test
            .iter()
            .filter(|(_, &c)| c == n)
            .map(|(t, _)| t.clone())
            .collect()
    };
    Ok(json!({
        "min_iterations": min,
        "max_iterations": max,
        "tests_with_min": in_test_order(&order, &with(min)),
        "tests_with_max": in_test_order(&order, &with(max)),
    }))
}

#[cfg(test)]
mod tests {
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
        let p = params(json!({"function": "f", "invocation": inv, "header": 12, "body_end": 14}))
            .unwrap();
        extract(t, "loop_iterations", &p).unwrap()
    }

    #[test]
    fn loop_iterations_counts_header_followed_by_body() {
        let t = loops();
        assert_eq!(count(&t, 1), json!({"loop_iteration_count": 3}));
        assert_eq!(count(&t, 2), json!({"loop_iteration_count": 2}));
        assert_eq!(count(&t, 3), json!({"loop_iteration_count": 0}));
    }

    #[test]
    fn loop_entries_are_separated_by_lines_outside_the_loop() {
        // Inner loop at 12..13 inside an outer loop at 11..13: 11 12 13 12 | 11 12 13 12 13 12 | 11
        // Entries into the inner loop come from 11 (outside [12, 13]): 2 entries, 1 then 2
        // iterations.
        let t = TraceBuilder::new()
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
            .build();
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
}
