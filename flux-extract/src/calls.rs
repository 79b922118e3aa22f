//! Inter-procedural control flow: S6 (`call_sequence`, `callees_count`), M6
//! (`callees_across_tests`), and the TraceEval-style `call_graph`.
use crate::common::{all_invocations, pick_invocation, test_ids, Norm};
use crate::{ExtractError, Params};
use flux_trace::query::{file_within, test_matches, Invocation};
use flux_trace::{Event, Kind, Trace};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

pub(crate) const CALL_SEQUENCE: &str = "\
The direct calls made by the Nth invocation of `function`, in order: every `call` event whose \
parent is an activation of that frame, except resumptions of an existing generator/coroutine \
frame, optionally only callees whose file lies under `within`. Calls through untraced code (C \
functions such as `map` or `sorted(key=...)`) appear as direct calls of the nearest traced \
caller; comprehensions, generator expressions and lambdas are callees like any function \
(`f.<locals>.<listcomp>`, `f.<locals>.<lambda>`). Each entry is the callee's qualname and the call-site line: the line of the caller's \
last `line` event before the call. Answer: {\"call_sequence\": [{\"function\", \"line\"}, ...]}.";

pub(crate) const CALLEES_COUNT: &str = "\
The direct callees of the Nth invocation of `function` (same selection as `call_sequence`) with \
the number of calls to each, sorted by callee name. Answer: {\"callees\": [{\"function\", \
\"count\"}, ...]}.";

pub(crate) const CALLEES_ACROSS_TESTS: &str = "\
For every test in which `function` runs (in start order), the sorted set of its direct callees \
(as `call_sequence`, over all its invocations in that test, filtered by `within`). Answer: \
{\"callees_per_test\": [{\"test\", \"callees\": [...]}, ...]}.";

pub(crate) const CALL_GRAPH: &str = "\
The dynamic call graph, TraceEval style: for every `call` event (generator resumptions excluded) \
whose parent activation is known, an edge from the parent's qualname to the callee's qualname; \
with `within`, both caller and callee files must lie under it; with `test`, only calls made \
during that test. With `qualify = \"module\"` names are prefixed by the module derived from the \
file (the path after the last `site-packages/` or `dist-packages/`, else after \
`lib/pythonX.Y/`, else from the component where `within` matches, else the file's stem; `.py` and `/__init__` dropped, `/` \
as `.`), e.g. `sympy.core.add.Add.flatten`. Answer: {\"call_graph\": {caller: [callees, sorted, unique]}} with callers \
sorted.";

/// Indices of the fresh `call` events of each parent activation, in trace order.
fn calls_by_parent(t: &Trace) -> HashMap<u64, Vec<usize>> {
    let mut out: HashMap<u64, Vec<usize>> = HashMap::new();
    for i in fresh_calls(t) {
        out.entry(t.events[i].parent).or_default().push(i);
    }
    out
}

/// Indices of the `call` events that start a new frame (not a resumption).
fn fresh_calls(t: &Trace) -> Vec<usize> {
    let mut seen: HashSet<u64> = HashSet::new();
    let mut out = Vec::new();
    for (i, e) in t.events.iter().enumerate() {
        if e.ev != Kind::Call || e.activation == 0 {
            continue;
        }
        let frame = if e.frame == 0 { e.activation } else { e.frame };
        if seen.insert(frame) {
            out.push(i);
        }
    }
    out
}

/// (call event, call-site line) of the direct calls of `inv`.
fn direct_calls<'t>(
    t: &'t Trace,
    inv: &Invocation,
    children: &HashMap<u64, Vec<usize>>,
    within: Option<&str>,
) -> Vec<(&'t Event, u32)> {
    let mut calls: Vec<usize> = inv
        .activations
        .iter()
        .filter_map(|a| children.get(a))
        .flatten()
        .copied()
        .collect();
    calls.sort_unstable();
    let lines: Vec<usize> = inv
        .events
        .iter()
        .copied()
        .filter(|&i| t.events[i].ev == Kind::Line)
        .collect();
    let def_line = inv.first_call(t).map(|e| e.line).unwrap_or(0);
    calls
        .into_iter()
        .filter(|&i| within.is_none_or(|w| file_within(&t.events[i].file, w)))
        .map(|i| {
            let k = lines.partition_point(|&l| l < i);
            let site = k
                .checked_sub(1)
                .map(|k| t.events[lines[k]].line)
                .unwrap_or(def_line);
            (&t.events[i], site)
        })
        .collect()
}

pub(crate) fn call_sequence(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let within = p.opt_str("within")?;
    let (_, inv) = pick_invocation(t, p, function)?;
    let norm = Norm::new(t, p, &inv)?;
    let children = calls_by_parent(t);
    let seq: Vec<Value> = direct_calls(t, &inv, &children, within)
        .into_iter()
        .map(|(e, site)| json!({"function": e.name(), "line": norm.apply(site)}))
        .collect();
    Ok(json!({ "call_sequence": seq }))
}

pub(crate) fn callees_count(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let within = p.opt_str("within")?;
    let (_, inv) = pick_invocation(t, p, function)?;
    let children = calls_by_parent(t);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (e, _) in direct_calls(t, &inv, &children, within) {
        *counts.entry(e.name()).or_insert(0) += 1;
    }
    let list: Vec<Value> = counts
        .into_iter()
        .map(|(f, c)| json!({"function": f, "count": c}))
        .collect();
    Ok(json!({ "callees": list }))
}

pub(crate) fn callees_across_tests(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let within = p.opt_str("within")?;
    let invs = all_invocations(t, p, function)?;
    let children = calls_by_parent(t);
    let mut per_test: HashMap<String, BTreeSet<String>> = HashMap::new();
    for inv in invs.iter().filter(|i| !i.test.is_empty()) {
        let set = per_test.entry(inv.test.clone()).or_default();
        for (e, _) in direct_calls(t, inv, &children, within) {
            set.insert(e.name().to_string());
        }
    }
    let list: Vec<Value> = test_ids(t)
        .into_iter()
        .filter_map(|test| {
            per_test
                .remove(&test)
                .map(|c| json!({"test": test, "callees": c.into_iter().collect::<Vec<_>>()}))
        })
        .collect();
    Ok(json!({ "callees_per_test": list }))
}

/// The dotted module name of a source file (see `call_graph`).
pub(crate) fn module_of(file: &str, within: Option<&str>) -> String {
    let markers = ["/site-packages/", "/dist-packages/"];
    let stdlib = file.rfind("/lib/python").and_then(|i| {
        let after = &file[i + "/lib/python".len()..];
        after.find('/').map(|j| i + "/lib/python".len() + j + 1)
    });
    let rest = if let Some((i, m)) = markers
        .iter()
        .filter_map(|m| file.rfind(m).map(|i| (i, m.len())))
        .max()
    {
        &file[i + m..]
    } else if let Some(start) = stdlib {
        &file[start..]
    } else if let Some(i) = within
        .map(|w| w.trim_start_matches('/'))
        .filter(|w| !w.is_empty())
        .and_then(|w| file.find(&format!("/{w}")))
    {
        &file[i + 1..]
    } else {
        // The file's own name, or its package's for an `__init__.py`.
        let mut parts = file.rsplit('/');
        match (parts.next(), parts.next()) {
            (Some("__init__.py"), Some(pkg)) => pkg,
            (Some(name), _) => name,
            _ => file,
        }
    };
    let rest = rest.trim_start_matches('/');
    let rest = rest.strip_suffix(".py").unwrap_or(rest);
    let rest = rest.strip_suffix("/__init__").unwrap_or(rest);
    rest.replace('/', ".")
}

pub(crate) fn call_graph(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let within = p.opt_str("within")?;
    let test = p.opt_str("test")?;
    let by_module = match p.opt_str("qualify")?.unwrap_or("qualname") {
        "qualname" => false,
        "module" => true,
        other => {
            return Err(ExtractError::BadParam {
                param: "qualify".into(),
                expected: "\"qualname\" or \"module\"",
                got: format!("{other:?}"),
            })
        }
    };
    let name = |e: &Event| {
        if by_module {
            format!("{}.{}", module_of(&e.file, within), e.name())
        } else {
            e.name().to_string()
        }
    };
    let calls: HashMap<u64, &Event> = t
        .events
        .iter()
        .filter(|e| e.ev == Kind::Call && e.activation != 0)
        .map(|e| (e.activation, e))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in fresh_calls(t) {
        let e = &t.events[i];
        let Some(caller) = calls.get(&e.parent) else {
            continue;
        };
        let inside = |ev: &Event| within.is_none_or(|w| file_within(&ev.file, w));
        if !inside(e) || !inside(caller) || test.is_some_and(|tt| !test_matches(&e.test, tt)) {
            continue;
        }
        graph.entry(name(caller)).or_default().insert(name(e));
    }
    let map: Map<String, Value> = graph
        .into_iter()
        .map(|(k, v)| (k, json!(v.into_iter().collect::<Vec<_>>())))
        .collect();
    Ok(json!({ "call_graph": map }))
}

#[cfg(test)]
mod tests {
    use crate::testkit::TraceBuilder;
    use crate::{extract, params};
    use serde_json::json;

    const LIB: &str = "/usr/lib/python3.11/re/__init__.py";

    /// test_a: f (10) at line 11 calls g; g calls h (nested, not direct for f); at 12 f calls
    /// the stdlib `compile` (file under /usr/lib/python3.11/re); at 13 f calls g again.
    /// test_b: f calls nothing.
    fn calls() -> flux_trace::Trace {
        TraceBuilder::new()
            .test("t.py::test_a")
            .call("f", 10, &[])
            .line(11, &[])
            .call("g", 20, &[])
            .line(21, &[])
            .call("h", 30, &[])
            .line(31, &[])
            .ret("None")
            .ret("None")
            .line(12, &[])
            .call_in("compile", LIB, 100, &[])
            .ret("None")
            .line(13, &[])
            .call("g", 20, &[])
            .line(21, &[])
            .call("h", 30, &[])
            .line(31, &[])
            .ret("None")
            .ret("None")
            .ret("None")
            .end("passed")
            .test("t.py::test_b")
            .call("f", 10, &[])
            .line(11, &[])
            .ret("None")
            .end("passed")
            .build()
    }

    #[test]
    fn call_sequence_lists_direct_callees_with_call_sites() {
        let t = calls();
        let p = params(json!({"function": "f"})).unwrap();
        assert_eq!(
            extract(&t, "call_sequence", &p).unwrap(),
            json!({"call_sequence": [{"function": "g", "line": 11},
                                     {"function": "compile", "line": 12},
                                     {"function": "g", "line": 13}]})
        );
        let p = params(json!({"function": "f", "within": "site-packages/pkg"})).unwrap();
        assert_eq!(
            extract(&t, "call_sequence", &p).unwrap(),
            json!({"call_sequence": [{"function": "g", "line": 11}, {"function": "g", "line": 13}]})
        );
        let p = params(json!({"function": "f", "invocation": 3})).unwrap();
        let err = extract(&t, "call_sequence", &p).unwrap_err().to_string();
        assert!(
            err.contains("function `f` has 2 invocation(s); invocation 3"),
            "{err}"
        );
    }

    #[test]
    fn callees_count_and_across_tests() {
        let t = calls();
        let p = params(json!({"function": "f"})).unwrap();
        assert_eq!(
            extract(&t, "callees_count", &p).unwrap(),
            json!({"callees": [{"function": "compile", "count": 1}, {"function": "g", "count": 2}]})
        );
        let p = params(json!({"function": "f", "within": "pkg/"})).unwrap();
        assert_eq!(
            extract(&t, "callees_across_tests", &p).unwrap(),
            json!({"callees_per_test": [{"test": "t.py::test_a", "callees": ["g"]},
                                        {"test": "t.py::test_b", "callees": []}]})
        );
    }

    #[test]
    fn call_graph_edges_sorted_unique() {
        let t = calls();
        assert_eq!(
            extract(&t, "call_graph", &crate::no_params()).unwrap(),
            json!({"call_graph": {"f": ["compile", "g"], "g": ["h"]}})
        );
        let p = params(json!({"within": "pkg/"})).unwrap();
        assert_eq!(
            extract(&t, "call_graph", &p).unwrap(),
            json!({"call_graph": {"f": ["g"], "g": ["h"]}})
        );
    }

    #[test]
    fn call_graph_with_module_names() {
        let t = calls();
        assert_eq!(
            extract(
                &t,
                "call_graph",
                &params(json!({"qualify": "module"})).unwrap()
            )
            .unwrap(),
            json!({"call_graph": {"pkg.mod.f": ["pkg.mod.g", "re.compile"], "pkg.mod.g": ["pkg.mod.h"]}})
        );
        use super::module_of;
        assert_eq!(
            module_of(
                "/usr/lib/python3.11/site-packages/sympy/core/__init__.py",
                None
            ),
            "sympy.core"
        );
        assert_eq!(
            module_of("/work/src/attr/_make.py", Some("attr/")),
            "attr._make"
        );
        assert_eq!(module_of("/tmp/test_x.py", None), "test_x");
        let err = extract(&t, "call_graph", &params(json!({"qualify": "x"})).unwrap()).unwrap_err();
        assert!(err.to_string().contains("parameter `qualify`"), "{err}");
    }

    #[test]
    fn generator_resumptions_are_not_calls() {
        // f (10) creates gen (frame 2) at line 11 and resumes it at line 12: one call of gen.
        let t = TraceBuilder::new()
            .call("f", 10, &[])
            .line(11, &[])
            .call("gen", 40, &[])
            .line(41, &[])
            .suspend("1")
            .line(12, &[])
            .resume(2, "gen", 41)
            .line(42, &[])
            .ret("None")
            .ret("None")
            .build();
        let p = params(json!({"function": "f"})).unwrap();
        assert_eq!(
            extract(&t, "call_sequence", &p).unwrap(),
            json!({"call_sequence": [{"function": "gen", "line": 11}]})
        );
    }
}
