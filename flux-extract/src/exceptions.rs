//! Exceptions: S5 (`exception_info`) and M5 (`raising_tests`).
use crate::common::{in_test_order, test_ids};
use crate::{ExtractError, Params};
use flux_trace::query::{owners, test_matches};
use flux_trace::{Event, Kind, Trace};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};

pub(crate) const EXCEPTION_INFO: &str = "\
The Mth (`occurrence`, default 1) exception *raised* in traced code, optionally only of `type` \
(equal to the traced type or to its last dotted component), raised in `raised_in`, or during \
`test`. A re-raise (`raise` in a handler) is a new raise. An `exception` event is a raise unless it continues a propagation: it is one when the \
same activation's last event before it was the unwinding `return` of a callee (then the \
exception came from that callee). For a raise in a Python function that called into C code \
(`int('x')`), the raising function is that Python function. The exception is followed from its \
raise: if a `handled` event occurs in the current frame, it is handled there at that line; if \
the frame returns with `unwind`, it moves to the caller, which must be traced to go on; a caller \
that is not traced (or the end of the thread's stack) means it leaves traced code unhandled; if \
the frame instead goes on with a `line` event or returns normally without a `handled` event, it \
was handled there (handler line unknown: null). \
Answer: {\"exception\": {\"type\", \"message\", \"raised_in\" (qualname), \"raise_line\", \
\"handled_in\" (qualname or null), \"handler_line\" (the `handled` event's line: the hook \
reports the line of the matching `except` clause; null if unhandled or unknown), \
\"unwound\" ([functions exited by the exception, innermost first])}}.";

pub(crate) const RAISING_TESTS: &str = "\
`crashing_tests`: the tests (in start order) during which an exception of `type` (equal to the \
traced type or its last dotted component) is raised in traced code (a raise as defined for \
`exception_info`), optionally only raises in `raised_in`, and with `uncaught = true` only those \
that no traced frame handles. `safe_tests`: every other test of the trace. Answer: \
{\"crashing_tests\": [...], \"safe_tests\": [...]}.";

/// One raised exception and where it went.
struct Raise<'t> {
    origin: &'t Event,
    handled: Option<&'t Event>,
    unwound: Vec<&'t Event>,
}

fn type_matches(ty: &str, want: &str) -> bool {
    ty == want || ty.rsplit('.').next() == Some(want)
}

/// Every raise in trace order, followed to its handler.
fn raises(t: &Trace) -> Vec<Raise<'_>> {
    let own = owners(t);
    let calls: HashMap<u64, &Event> = t
        .events
        .iter()
        .filter(|e| e.ev == Kind::Call && e.activation != 0)
        .map(|e| (e.activation, e))
        .collect();
    // Activation → it has just received an exception from an unwinding callee.
    let mut pending: HashMap<u64, bool> = HashMap::new();
    let mut origins = Vec::new();
    for (i, e) in t.events.iter().enumerate() {
        match e.ev {
            Kind::Return if e.unwind && e.parent != 0 => {
                pending.insert(e.parent, true);
            }
            Kind::Exception => {
                let continues_propagation = pending.remove(&own[i]).is_some();
                if !continues_propagation {
                    origins.push(i);
                }
            }
            Kind::Line | Kind::Call | Kind::Handled => {
                pending.remove(&own[i]);
            }
            _ => {}
        }
    }
    origins
        .into_iter()
        .map(|o| {
            let origin = &t.events[o];
            let mut act = own[o];
            let mut handled = None;
            let mut unwound = Vec::new();
            for (j, e) in t.events.iter().enumerate().skip(o + 1) {
                if own[j] != act || act == 0 {
                    continue;
                }
                match e.ev {
                    Kind::Handled => {
                        handled = Some(e);
                        break;
                    }
                    Kind::Return if e.unwind => {
                        unwound.push(e);
                        match calls.get(&e.parent) {
                            Some(_) => act = e.parent,
                            None => break,
                        }
                    }
                    // The frame went on (or returned normally) without a `handled` event:
                    // it was handled there, at a line the trace does not show.
                    Kind::Line | Kind::Return => {
                        handled = Some(e);
                        break;
                    }
                    _ => {}
                }
            }
            Raise {
                origin,
                handled,
                unwound,
            }
        })
        .collect()
}

pub(crate) fn exception_info(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let ty = p.opt_str("type")?;
    let raised_in = p.opt_str("raised_in")?;
    let test = p.opt_str("test")?;
    let occ = p.index_or("occurrence", 1)?;
    let all = raises(t);
    let chosen: Vec<&Raise<'_>> = all
        .iter()
        .filter(|r| {
            let exc_ty = r.origin.exc.as_ref().map(|x| x.ty.as_str()).unwrap_or("");
            ty.is_none_or(|w| type_matches(exc_ty, w))
                && raised_in.is_none_or(|f| r.origin.name() == f)
                && test.is_none_or(|tt| test_matches(&r.origin.test, tt))
        })
        .collect();
    let r = chosen.get(occ - 1).ok_or_else(|| {
        let mut what = String::from("exception(s) raised");
        if let Some(w) = ty {
            what = format!("`{w}` {what}");
        }
        if let Some(f) = raised_in {
            what.push_str(&format!(" in `{f}`"));
        }
        if let Some(tt) = test {
            what.push_str(&format!(" during test `{tt}`"));
        }
        ExtractError::NotObserved(format!(
            "the trace has {} {what}; occurrence {occ} was asked for",
            chosen.len()
        ))
    })?;
    let exc = r.origin.exc.clone().unwrap_or(flux_trace::ExcInfo {
        ty: String::new(),
        msg: String::new(),
    });
    let handler_line = r.handled.filter(|h| h.ev == Kind::Handled).map(|h| h.line);
    Ok(json!({"exception": {
        "type": exc.ty,
        "message": exc.msg,
        "raised_in": r.origin.name(),
        "raise_line": r.origin.line,
        "handled_in": r.handled.map(|h| h.name()),
        "handler_line": handler_line,
        "unwound": r.unwound.iter().map(|e| e.name()).collect::<Vec<_>>(),
    }}))
}

pub(crate) fn raising_tests(t: &Trace, p: &Params) -> Result<Value, ExtractError> {
    let ty = p.str("type")?;
    let raised_in = p.opt_str("raised_in")?;
    let uncaught = p.bool_or("uncaught", false)?;
    let crashing: BTreeSet<String> = raises(t)
        .into_iter()
        .filter(|r| {
            r.origin
                .exc
                .as_ref()
                .is_some_and(|x| type_matches(&x.ty, ty))
                && raised_in.is_none_or(|f| r.origin.name() == f)
                && (!uncaught || r.handled.is_none())
                && !r.origin.test.is_empty()
        })
        .map(|r| r.origin.test.clone())
        .collect();
    let order = test_ids(t);
    let safe: BTreeSet<String> = order
        .iter()
        .filter(|t| !crashing.contains(*t))
        .cloned()
        .collect();
    Ok(json!({
        "crashing_tests": in_test_order(&order, &crashing),
        "safe_tests": in_test_order(&order, &safe),
    }))
}

#[cfg(test)]
mod tests {
    use crate::testkit::TraceBuilder;
    use crate::{extract, params};
    use serde_json::json;

    /// test_a: outer (10) calls parse (20); parse raises ValueError at 22 and unwinds; outer
    /// gets the propagated exception event at 11 and handles it at 12.
    /// test_b: parse raises KeyError at 23 and handles it itself at 24.
    /// test_c: parse raises ValueError at 22, unwinds, outer unwinds, and the caller of outer
    /// is untraced → unhandled in traced code.
    /// test_d: nothing raised.
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
            extract(&t, "exception_info", &p).unwrap()["exception"]["handler_line"],
            json!(24)
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
            extract(&t, "raising_tests", &p).unwrap(),
            json!({"crashing_tests": ["t.py::test_a", "t.py::test_c"],
                   "safe_tests": ["t.py::test_b", "t.py::test_d"]})
        );
        let p = params(json!({"type": "ValueError", "uncaught": true})).unwrap();
        assert_eq!(
            extract(&t, "raising_tests", &p).unwrap(),
            json!({"crashing_tests": ["t.py::test_c"],
                   "safe_tests": ["t.py::test_a", "t.py::test_b", "t.py::test_d"]})
        );
    }
}
