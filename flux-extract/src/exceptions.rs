//! Exceptions: S5 (`exception_info`) and M5 (`raising_tests`).
use crate::common::{in_test_order, test_ids};
use crate::{ExtractError, Params};
use flux_trace::query::{owners, test_matches};
use flux_trace::{Event, Kind, Trace};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};

pub(crate) const EXCEPTION_INFO: &str = "\
The Mth (`occurrence`, default 1) exception *raised* in traced code, in trace order, optionally \
only of `type` (equal to the traced type or to its last dotted component), raised in \
`raised_in`, or during `test`. An `exception` event is a raise unless it continues a \
propagation, i.e. unless the same activation's last event before it was the unwinding `return` \
of a callee; a re-raise (`raise` in a handler) is a new raise. For an exception raised by C code \
(`int('x')`), the raising function is the Python function that called it. From its raise the \
exception is followed frame by frame: a `handled` event of the same type in the current frame \
(the hook reports the line of the matching `except` clause) means handled there at that line; \
an unwinding `return` moves it to the caller, which must be traced to go on (an untraced caller \
or the bottom of the stack: it leaves traced code unhandled); a frame that goes on with `line` \
events and then returns or raises again without a `handled` event handled it, at an unknown \
line (null). Answer: {\"exception\": {\"type\", \"message\", \"raised_in\" (qualname), \
\"raise_line\", \"handled_in\" (qualname or null), \"handler_line\" (int or null), \"unwound\" \
([qualnames of the frames the exception exited, innermost first])}}.";

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

/// Every raise whose `exception` event satisfies `keep`, in trace order, followed to its
/// handler.
fn raises(t: &Trace, keep: impl Fn(&Event) -> bool) -> Vec<Raise<'_>> {
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
                if !continues_propagation && keep(e) {
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
            let ty = origin.exc.as_ref().map(|x| x.ty.as_str());
            let mut act = own[o];
            let mut handled = None;
            let mut unwound = Vec::new();
            // A frame that goes on with `line` events after the exception handled it, even if
            // no `handled` event says so; the `handled` event (Python 3.11: inferred by the hook
            // at the first line of the except body) may come after the `except` line itself.
            let mut went_on: Option<&Event> = None;
            // The caller's first `exception` event after an unwind continues this propagation.
            let mut expect_propagation = false;
            for (j, e) in t.events.iter().enumerate().skip(o + 1) {
                if own[j] != act || act == 0 {
                    continue;
                }
                match e.ev {
                    Kind::Handled if e.exc.as_ref().map(|x| x.ty.as_str()) == ty => {
                        handled = Some(e);
                        break;
                    }
                    Kind::Line => {
                        expect_propagation = false;
                        went_on.get_or_insert(e);
                    }
                    Kind::Exception if expect_propagation => expect_propagation = false,
                    Kind::Return if e.unwind && went_on.is_none() => {
                        unwound.push(e);
                        match calls.get(&e.parent) {
                            Some(_) => {
                                act = e.parent;
                                expect_propagation = true;
                            }
                            None => break,
                        }
                    }
                    // A normal return, a new exception, an unwind after the frame went on, or
                    // a `handled` event of another exception: handled here, line unknown.
                    Kind::Return | Kind::Exception | Kind::Handled => {
                        handled = went_on.or(Some(e));
                        break;
                    }
                    _ => {}
                }
            }
            if handled.is_none() {
                handled = went_on;
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
    let all = raises(t, |e| {
        let exc_ty = e.exc.as_ref().map(|x| x.ty.as_str()).unwrap_or("");
        ty.is_none_or(|w| type_matches(exc_ty, w))
            && raised_in.is_none_or(|f| e.name() == f)
            && test.is_none_or(|tt| test_matches(&e.test, tt))
    });
    let chosen: Vec<&Raise<'_>> = all.iter().collect();
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
    let handler_line = r
        .handled
        .filter(|h| h.ev == Kind::Handled && h.exc.as_ref().map(|x| &x.ty) == Some(&exc.ty))
        .map(|h| h.line);
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
    let crashing: BTreeSet<String> = raises(t, |e| {
        e.exc.as_ref().is_some_and(|x| type_matches(&x.ty, ty))
            && raised_in.is_none_or(|f| e.name() == f)
            && !e.test.is_empty()
    })
    .into_iter()
    .filter(|r| !uncaught || r.handled.is_none())
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
            extract(&t, "raising_tests", &p).unwrap(),
            json!({"crashing_tests": ["t.py::test_a", "t.py::test_c"],
                   "safe_tests": ["t.py::test_b", "t.py::test_d", "t.py::test_e"]})
        );
        let p = params(json!({"type": "ValueError", "uncaught": true})).unwrap();
        assert_eq!(
            extract(&t, "raising_tests", &p).unwrap(),
            json!({"crashing_tests": ["t.py::test_c"],
                   "safe_tests": ["t.py::test_a", "t.py::test_b", "t.py::test_d", "t.py::test_e"]})
        );
    }
}
