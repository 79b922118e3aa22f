//! Program state: S3 (`state_at`), M3 (`state_across_tests`), and invariants over observed
//! values: S7 (`invariants_in_test`), M7 (`invariants_across_tests`).
use crate::common::{all_invocations, line_positions, pick_invocation, test_ids};
use crate::{ExtractError, Params};
use flux_trace::query::Invocation;
use flux_trace::{Kind, Trace, Value as Observed};
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub(crate) const STATE_AT: &str = "\
The values of local variables right after line `line` executes for the Mth time (`occurrence`, \
default 1) in the Nth invocation of `function`: the frame's locals (the call's arguments updated \
by every change the frame's later events report) at the frame's next `line` or `return` event \
after that `line` event. Values are the tracer's bounded `repr` strings. `variables` names them \
in answer order (an error if one is unbound then); without it every bound local is reported, \
sorted by name. Answer: {\"observed_state\": [{\"variable\": V, \"value\": REPR}, ...]}.";

pub(crate) const STATE_ACROSS_TESTS: &str = "\
For every test in which line `line` of `function` executes at least `occurrence` (default 1) \
times, the value (repr) of `variable` right after that execution (same definition as \
`state_at`; executions are counted across the test's invocations in order). Tests are in start \
order; tests that do not reach the line are omitted. Answer: {\"observed_states\": [{\"test\": \
T, \"value\": REPR}, ...]}.";

pub(crate) const INVARIANTS_IN_TEST: &str = "\
The observations of `variable` are its values right after each execution of line `line` in \
every invocation of `function` (restricted to `test` if given; same definition as `state_at`; \
executions where it is unbound are skipped), in trace order. Over them: `observations` = their \
number; `types` = the distinct type names, sorted; `single_type` = exactly one type; \
`non_negative` = every value is an int or float whose repr parses as a number >= 0; `constant` \
= every repr is equal; `monotonic` = \"constant\" if constant, else \"non_decreasing\" / \
\"non_increasing\" if every value is an int or float and each is >= / <= the previous, else \
\"none\". Answer: {\"invariants\": {...}}.";

pub(crate) const INVARIANTS_ACROSS_TESTS: &str = "\
As `invariants_in_test`, over the observations of every test (observations outside tests are \
ignored). `observations`, `types`, `single_type`, `non_negative` and `constant` are computed over \
all observations together; `monotonic` is decided per test and combined: \"constant\" if every \
test's sequence is constant, \"non_decreasing\" if each is constant or non_decreasing, likewise \
\"non_increasing\", else \"none\". `tests` lists the tests with at least one observation, in \
start order. Answer: {\"invariants\": {...}, \"tests\": [...]}.";

/// The frame's locals after the `line` event at position `k` of the invocation.
fn state_after(
    t: &Trace,
    inv: &Invocation,
    k: usize,
) -> Result<BTreeMap<String, Observed>, ExtractError> {
    let j = inv.effects_of(t, k).ok_or_else(|| {
        ExtractError::NotObserved(format!(
            "no event of the frame follows the execution of line {} (the trace ends)",
            t.events[inv.events[k]].line
        ))
    })?;
    Ok(inv.locals_through(t, j))
}

pub(crate) fn state_at(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let line = p.line("line")?;
    let occ = p.index_or("occurrence", 1)?;
    let (n, inv) = pick_invocation(t, p, function)?;
    let positions = line_positions(t, &inv, line);
    let &k = positions.get(occ - 1).ok_or_else(|| {
        ExtractError::NotObserved(format!(
            "line {line} executes {} time(s) in invocation {n} of `{function}`; occurrence {occ} \
             was asked for",
            positions.len()
        ))
    })?;
    let state = state_after(t, &inv, k)?;
    let names = match p.opt_str_list("variables")? {
        Some(v) => v,
        None => state.keys().cloned().collect(),
    };
    let mut out = Vec::new();
    for name in names {
        let v = state.get(&name).ok_or_else(|| {
            ExtractError::NotObserved(format!(
                "variable `{name}` is not bound after line {line} (occurrence {occ}) of \
                 invocation {n} of `{function}`"
            ))
        })?;
        out.push(json!({"variable": name, "value": v.repr}));
    }
    Ok(json!({ "observed_state": out }))
}

pub(crate) fn state_across_tests(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let line = p.line("line")?;
    let variable = p.str("variable")?;
    let occ = p.index_or("occurrence", 1)?;
    let invs = all_invocations(t, p, function)?;
    // (test, invocation index, position) of each execution of the line, per test in order.
    let mut per_test: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    for (x, inv) in invs.iter().enumerate() {
        for k in line_positions(t, inv, line) {
            let test = t.events[inv.events[k]].test.as_str();
            if !test.is_empty() {
                per_test.entry(test).or_default().push((x, k));
            }
        }
    }
    let mut out = Vec::new();
    for test in test_ids(t) {
        let Some(&(x, k)) = per_test.get(test.as_str()).and_then(|v| v.get(occ - 1)) else {
            continue;
        };
        let state = state_after(t, &invs[x], k)?;
        let v = state.get(variable).ok_or_else(|| {
            ExtractError::NotObserved(format!(
                "variable `{variable}` is not bound after line {line} (occurrence {occ}) of \
                 `{function}` in test `{test}`"
            ))
        })?;
        out.push(json!({"test": test, "value": v.repr}));
    }
    if out.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "line {line} of `{function}` executes at least {occ} time(s) in no test"
        )));
    }
    Ok(json!({ "observed_states": out }))
}

/// Observed values of `variable` after each execution of `line`, with their test.
fn observations(
    t: &Trace,
    invs: &[Invocation],
    line: u32,
    variable: &str,
) -> Result<Vec<(String, Observed)>, ExtractError> {
    let mut out: Vec<(usize, String, Observed)> = Vec::new();
    for inv in invs {
        // One pass over the frame: the variable's current value, and the `line` event at
        // `line` (if any) whose effects the next `line`/`return` event shows.
        let mut current: Option<&Observed> = None;
        let mut waiting: Option<usize> = None;
        for &i in &inv.events {
            let e = &t.events[i];
            if let Some((_, v)) = e.locals.iter().rev().find(|(n, _)| n == variable) {
                current = Some(v);
            }
            if matches!(e.ev, Kind::Line | Kind::Return) {
                if let (Some(at), Some(v)) = (waiting.take(), current) {
                    out.push((at, t.events[at].test.clone(), v.clone()));
                }
                if e.ev == Kind::Line && e.line == line {
                    waiting = Some(i);
                }
            }
        }
        if let Some(at) = waiting {
            return Err(ExtractError::NotObserved(format!(
                "no event of the frame follows the execution of line {} (the trace ends)",
                t.events[at].line
            )));
        }
    }
    // Trace order across invocations (a generator's lines interleave with other frames).
    out.sort_by_key(|(i, _, _)| *i);
    Ok(out.into_iter().map(|(_, t, v)| (t, v)).collect())
}

fn number(v: &Observed) -> Option<f64> {
    if v.ty == "int" || v.ty == "float" {
        v.repr.parse::<f64>().ok().filter(|x| !x.is_nan())
    } else {
        None
    }
}

fn monotonic(vals: &[&Observed]) -> &'static str {
    if vals.windows(2).all(|w| w[0].repr == w[1].repr) {
        return "constant";
    }
    let nums: Option<Vec<f64>> = vals.iter().map(|v| number(v)).collect();
    let Some(nums) = nums else {
        return "none";
    };
    if nums.windows(2).all(|w| w[1] >= w[0]) {
        "non_decreasing"
    } else if nums.windows(2).all(|w| w[1] <= w[0]) {
        "non_increasing"
    } else {
        "none"
    }
}

fn record(vals: &[&Observed], monotonic: &str) -> Value {
    let mut types: Vec<&str> = vals.iter().map(|v| v.ty.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    json!({
        "observations": vals.len(),
        "single_type": types.len() == 1,
        "types": types,
        "non_negative": vals.iter().all(|v| number(v).is_some_and(|x| x >= 0.0)),
        "constant": vals.windows(2).all(|w| w[0].repr == w[1].repr),
        "monotonic": monotonic,
    })
}

fn inv_params(p: &Params) -> Result<(&str, u32, &str), ExtractError> {
    Ok((p.str("function")?, p.line("line")?, p.str("variable")?))
}

pub(crate) fn invariants_in_test(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let (function, line, variable) = inv_params(p)?;
    let invs = all_invocations(t, p, function)?;
    let obs = observations(t, &invs, line, variable)?;
    if obs.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "`{variable}` is never bound after line {line} of `{function}`"
        )));
    }
    let vals: Vec<&Observed> = obs.iter().map(|(_, v)| v).collect();
    Ok(json!({ "invariants": record(&vals, monotonic(&vals)) }))
}

pub(crate) fn invariants_across_tests(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let (function, line, variable) = inv_params(p)?;
    let invs = all_invocations(t, p, function)?;
    let obs = observations(t, &invs, line, variable)?;
    let mut tests = Vec::new();
    let mut all: Vec<&Observed> = Vec::new();
    let mut kinds: Vec<&str> = Vec::new();
    for test in test_ids(t) {
        let vals: Vec<&Observed> = obs
            .iter()
            .filter(|(tt, _)| *tt == test)
            .map(|(_, v)| v)
            .collect();
        if vals.is_empty() {
            continue;
        }
        kinds.push(monotonic(&vals));
        all.extend(&vals);
        tests.push(test);
    }
    if all.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "`{variable}` is never bound after line {line} of `{function}` inside a test"
        )));
    }
    let combined = if kinds.iter().all(|k| *k == "constant") {
        "constant"
    } else if kinds
        .iter()
        .all(|k| matches!(*k, "constant" | "non_decreasing"))
    {
        "non_decreasing"
    } else if kinds
        .iter()
        .all(|k| matches!(*k, "constant" | "non_increasing"))
    {
        "non_increasing"
    } else {
        "none"
    };
    Ok(json!({ "invariants": record(&all, combined), "tests": tests }))
}

#[cfg(test)]
mod tests {
    use crate::testkit::TraceBuilder;
    use crate::{extract, params};
    use serde_json::json;

    /// f(n) at 1: 2 `i = 0`, 3 `while i < n:`, 4 `i += 1`, 5 `return i`.
    /// Called with n=2 in test_a: call{n:2} 2 3{i:0} 4 3{i:1} 4 3{i:2} 5 return.
    /// After line 4's 1st execution the next frame event is `3{i:1}` → i = '1';
    /// after its 2nd → '2'. After line 2 → i = '0' (seen on the line-3 event).
    /// Called with n=1 in test_b: after line 4's 1st execution i = '1'.
    fn counting() -> flux_trace::Trace {
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
        let p =
            params(json!({"function": "f", "line": 4, "occurrence": 2, "variables": ["i", "n"]}))
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
        let p =
            params(json!({"function": "f", "line": 4, "variable": "i", "occurrence": 2})).unwrap();
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

    #[test]
    fn invariants_in_one_test_and_across_tests() {
        let t = counting();
        // In test_a, i after line 4: 1, 2 → ints, non-negative, non_decreasing, not constant.
        let p =
            params(json!({"function": "f", "line": 4, "variable": "i", "test": "test_a"})).unwrap();
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
}
