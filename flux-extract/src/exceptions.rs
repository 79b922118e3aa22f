//! Exceptions: S5 (`exception_info`, `caught_types`), S5/M5 (`exception_counts`) and M5
//! (`raising_tests`).
use crate::common::{in_test_order, invocations, Ix};
use crate::{ExtractError, Params};
use flux_trace::query::test_matches;
use flux_trace::{Event, ExcKind, Kind, TraceIndex};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const NAMING: &str = "\
Exception types are named as the hook records them, SWE-Flux's convention: bare \
`type(exc).__qualname__` for builtins (`ValueError`), `module.QualName` for every other class; \
messages are `str(exc)`, cut to the repr limit. A `type` parameter matches a traced type equal \
to it or whose last dotted component equals it.";

pub(crate) const EXCEPTION_INFO: &str = "\
The Mth (`occurrence`, default 1) exception *raised* in traced code, in trace order, optionally \
only of `type`, raised in `raised_in` (qualname; `file` restricts its file), or during `test`. \
Whether a frame raised an exception is read from the exception itself (its traceback, \
whether or not the function that raised it was traced): raised there by its own code or by a \
C function it called (`int('x')`: the raising function is the Python function that called \
it); a re-raise (`raise` in a handler, `raise e`) is a new raise; an exception that came out of \
a function it called, or that was thrown into a generator at its `yield` (`gen.throw()`, a \
`@contextmanager`'s `__exit__` throwing a `with` body's exception), is not raised there. From its raise the exception is followed frame \
by frame: a `handled` event of the same type in the current frame (the hook reports the line of \
the matching `except` clause) means handled there at that line; an unwinding `return` moves it \
to the caller, which must be traced line by line (targeted) to go on (a caller that is not, \
whether or not the trace shows its calls, or the bottom of the stack: it leaves traced code \
unhandled); a frame that goes on with `line` events and then returns or \
raises again without a `handled` event handled it, at an unknown line (null), unless the frame \
then unwinds with this very exception (its type and message, no other exception since): lines \
that ran on its way out (a `finally` body, a `with` statement's exit) handle nothing. With `escapes` \
(a qualname) only exceptions that propagate out of a frame of that function count (its frame \
unwinds with them: SWE-Flux's \"the exception that propagates out of the target\"); with \
`origins = \"any\"` those an untraced callee raised count too, followed from the frame of that \
function they reached (which `raised_in` and `raise_line` then name: a tracer that sees only \
the target, as SWE-Flux's, cannot tell them apart). Answer: \
{\"exception\": {\"type\", \"message\", \"raised_in\" (qualname), \"raise_line\", \
\"handled_in\" (qualname or null), \"handler_line\" (int or null), \"unwound\" ([qualnames of \
the frames the exception exited, innermost first])}}.";

pub(crate) const RAISING_TESTS: &str = "\
`crashing_tests`: the tests (in start order) during which an exception of `type` is raised in \
traced code (a raise as defined for `exception_info`), optionally only raises in `raised_in`, \
and with `uncaught = true` only those that no traced frame handles; with `escapes` (a \
qualname) instead the tests in which an exception (of `type`, if given) propagates out of an \
activation of that function (its frame ends by unwinding). `safe_tests`: every other test of \
the trace. `crashes` lists each crashing test with the type and message of its first such \
exception and where it was raised. All three lists follow the tests' start order, or with \
`order = \"sorted\"` their ids sorted (code points). Answer: {\"crashing_tests\": [...], \"safe_tests\": [...], \
\"crashes\": [{\"test\", \"exception_type\", \"message\", \"raised_in\"}, ...]}.";

pub(crate) const EXCEPTION_COUNTS: &str = "\
Per-type counts of the `exception` events in the frames of `function` over its selected \
invocations (`test`, `file`; `lines` keeps only events at those lines): with `events = \"all\"` \
(default, SWE-Flux's definition) every exception event of the frame counts (an exception raised \
there, one propagating into it from a callee, each re-raise); with `\"reported\"` the events \
the interpreter reports to a tracer (`sys.settrace`), which a bare `raise` is not one of \
(CPython re-raises without calling the tracer; flux infers those, outcome \
`reraise-inferred`, and they are left out: SWE-Flux's \"a bare re-raise of the exception already \
observed does not count again\", and what their tracer's log holds); with `\"raises\"` only \
raises as defined for `exception_info`. Answer: {\"exception_type_counts\": [{\"exception_type\", \
\"count\"}, ...] sorted by type, \"exception_types\": [the types, sorted], \"total\": N, \
\"per_test\": [{\"test\", \"exception_type_counts\"}, ...] for the tests with one}.";

pub(crate) const EXCEPTION_EVENTS: &str = "\
Every `exception` event in the frames of `function` over its selected invocations (`test`, \
`file`), in trace order (`events` as for `exception_counts`: `all`, or only those `reported` to \
a tracer), each with its `line`, `exception_type`, `message` (`str(exc)`), `handled` (true iff \
the same activation of the frame executes a later `line` event: the exception was handled \
there; false when the frame ends without one, the exception propagating out), the \
`invocation` (1-based, among the selected ones) and the `test`. With `type_names = \
\"qualified\"` a builtin type is named `builtins.X` (SWE-Flux's \"fully qualified exception \
type name\"), otherwise as the hook names it (bare for builtins). `per_invocation` groups the \
same events by invocation, every selected invocation listed (`raised`: it has at least one \
event; `handled_where`: `handled` or `propagated`). Answer: {\"exception_events\": [{\"line\", \
\"exception_type\", \"message\", \"handled\", \"invocation\", \"test\"}, ...], \
\"per_invocation\": [{\"invocation\", \"test\", \"raised\", \"exceptions\": [{\"line\", \
\"exception_type\", \"message\", \"handled\", \"handled_where\"}, ...]}, ...]}.";

pub(crate) const CAUGHT_TYPES: &str = "\
The exception types caught by `function`'s own handlers over its selected invocations: an \
`exception` event in one of its frames (raised there or propagated into it from a callee) after \
which the same frame reports the exception `handled` or goes on executing lines (rather than \
returning by unwinding or raising it again). With `line`, only those handled at the `except` \
clause on that line (per the hook's `handled` event). Answer: {\"caught_exception_kinds\": \
[types, sorted, unique], \"caught\": [{\"exception_type\", \"line\" (the except line or \
null), \"count\"}, ...]}.";

/// The naming convention, for `flux extractors`.
pub(crate) fn naming_doc() -> &'static str {
    NAMING
}

/// One raised exception and where it went.
struct Raise<'t> {
    origin: &'t Event,
    handled: Option<&'t Event>,
    unwound: Vec<&'t Event>,
}

fn type_matches(ty: &str, want: &str) -> bool {
    ty == want || ty.rsplit('.').next() == Some(want)
}

fn exc_type(e: &Event) -> &str {
    e.detail().exc.as_ref().map(|x| x.ty.as_str()).unwrap_or("")
}

fn exc_msg(e: &Event) -> String {
    e.detail()
        .exc
        .as_ref()
        .map(|x| x.msg.clone())
        .unwrap_or_default()
}

/// Indices of the `exception` events that start a raise (see `exception_info`), in trace
/// order. Whether the event's frame raised the exception is read from the exception itself:
/// the kind the hook recorded from its traceback (`raise`: the traceback's innermost entry is
/// this frame; `reraise`: this frame's own `raise` of an exception raised before;
/// `propagate`: it came out of a callee; `thrown`: `throw()` put it in at the `yield`), so the
/// answer is the same whether or not the callee that raised it was traced. A trace without
/// kinds (made before the hook recorded them) falls back to the trace's shape: a raise unless
/// the same activation's last event before it was the unwinding return of a callee.
pub fn raise_origins(ix: &TraceIndex<'_>) -> Vec<usize> {
    exception_entries(ix).0
}

/// The `exception` events of the trace, in order, in two parts: the raises
/// ([`raise_origins`]), and the exceptions a frame received from code the trace does not show
/// (an untraced callee raised them: the hook says `propagate` or `thrown` and no traced callee
/// unwound into the frame just before).
fn exception_entries(ix: &TraceIndex<'_>) -> (Vec<usize>, Vec<usize>) {
    // Activation → it has just received an exception from an unwinding callee.
    let mut pending: HashMap<u64, bool> = HashMap::new();
    let mut origins = Vec::new();
    let mut untraced = Vec::new();
    for (i, e) in ix.trace.events.iter().enumerate() {
        match e.ev {
            Kind::Return if e.unwind && e.parent != 0 => {
                pending.insert(e.parent, true);
            }
            Kind::Exception => {
                let after_unwind = pending.remove(&ix.owner(i)).is_some();
                let kind = ExcKind::of(e);
                let raised = match kind {
                    Some(k) => k.raised_here(),
                    None => !after_unwind,
                };
                if raised {
                    origins.push(i);
                } else if !after_unwind
                    && matches!(kind, Some(ExcKind::Propagate | ExcKind::Thrown))
                {
                    untraced.push(i);
                }
            }
            Kind::Line | Kind::Call | Kind::Handled => {
                pending.remove(&ix.owner(i));
            }
            _ => {}
        }
    }
    (origins, untraced)
}

/// The events of activation `act` after trace index `after`, in order.
fn events_after<'a>(ix: &'a Ix<'_>, act: u64, after: usize) -> impl Iterator<Item = usize> + 'a {
    let evs: &[u32] = ix
        .call_event(act)
        .and_then(|_| ix.frame(act))
        .and_then(|f| ix.frame_events(f))
        .unwrap_or(&[]);
    let start = evs.partition_point(|&i| i as usize <= after);
    evs[start..]
        .iter()
        .map(|&i| i as usize)
        .filter(move |&i| ix.owner(i) == act)
}

/// Follow the raise at trace index `o` to its handler (see `exception_info`).
fn follow<'t>(ix: &Ix<'t>, o: usize) -> Raise<'t> {
    let origin = ix.event(o);
    let ty = origin.detail().exc.as_ref().map(|x| x.ty.as_str());
    let mut act = ix.owner(o);
    let mut from = o;
    let mut handled = None;
    let mut unwound = Vec::new();
    'frames: while act != 0 {
        // A frame that goes on with `line` events after the exception handled it, even if no
        // `handled` event says so; the `handled` event (Python 3.11: inferred by the hook at the
        // first line of the except body) may come after the `except` line itself.
        let mut went_on: Option<&Event> = None;
        // The caller's first `exception` event after an unwind continues this propagation.
        let mut expect_propagation = from != o;
        for j in events_after(ix, act, from) {
            let e = ix.event(j);
            match e.ev {
                Kind::Handled if e.detail().exc.as_ref().map(|x| x.ty.as_str()) == ty => {
                    handled = Some(e);
                    break 'frames;
                }
                Kind::Line => {
                    expect_propagation = false;
                    went_on.get_or_insert(e);
                }
                Kind::Exception if expect_propagation => expect_propagation = false,
                // Unwinding with no line since, or with this very exception after lines that
                // ran on its way out (a `finally` body, a `with` statement's exit: cleanup
                // re-raises give no `exception` event) and no other exception since.
                Kind::Return if e.unwind && (went_on.is_none() || same_exception(e, origin)) => {
                    unwound.push(e);
                    if ix.call_event(e.parent).is_some() && traced_by_line(ix, e.parent) {
                        act = e.parent;
                        from = j;
                        continue 'frames;
                    }
                    break 'frames;
                }
                // A normal return, a new exception, an unwind after the frame went on, or a
                // `handled` event of another exception: handled here, line unknown.
                Kind::Return | Kind::Exception | Kind::Handled => {
                    handled = went_on.or(Some(e));
                    break 'frames;
                }
                _ => {}
            }
        }
        handled = went_on;
        break;
    }
    Raise {
        origin,
        handled,
        unwound,
    }
}

/// Whether an unwinding `return` carries the exception (type and message) of `origin`.
fn same_exception(unwind: &Event, origin: &Event) -> bool {
    match (&unwind.detail().exc, &origin.detail().exc) {
        (Some(a), Some(b)) => a.ty == b.ty && a.msg == b.msg,
        _ => false,
    }
}

/// Whether the frame of activation `act` is traced line by line (targeted code: it has `line`
/// events). An exception is followed only through such frames: a caller the trace shows only
/// the calls and returns of (scope `tests`; the reference witness) is where it leaves traced
/// code, as a caller the trace does not show at all (scope `targets`) is.
fn traced_by_line(ix: &Ix<'_>, act: u64) -> bool {
    ix.frame(act)
        .and_then(|f| ix.frame_events(f))
        .is_some_and(|evs| evs.iter().any(|&i| ix.event(i as usize).ev == Kind::Line))
}

/// Every raise whose `exception` event satisfies `keep`, in trace order, followed to its
/// handler.
fn raises<'t>(ix: &Ix<'t>, keep: impl Fn(&Event) -> bool) -> Vec<Raise<'t>> {
    raise_origins(ix)
        .into_iter()
        .filter(|&o| keep(ix.event(o)))
        .map(|o| follow(ix, o))
        .collect()
}

pub(crate) fn exception_info(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let ty = p.opt_str("type")?;
    let raised_in = p.opt_str("raised_in")?;
    let file = p.opt_str("file")?;
    let test = p.opt_str("test")?;
    let occ = p.index_or("occurrence", 1)?;
    let escapes = p.opt_str("escapes")?;
    let any_origin = p.choice_or("origins", &["traced", "any"], "traced")? == "any";
    let keep = |e: &Event| {
        ty.is_none_or(|w| type_matches(exc_type(e), w))
            && raised_in.is_none_or(|f| e.name() == f)
            && file.is_none_or(|f| flux_trace::query::file_within(e.file(), f))
            && test.is_none_or(|tt| test_matches(&e.test, tt))
    };
    let (mut starts, untraced) = exception_entries(ix);
    if let (Some(f), true) = (escapes, any_origin) {
        // An exception an untraced callee raised, followed from the frame of `f` it reached.
        starts.extend(untraced.into_iter().filter(|&i| ix.event(i).name() == f));
        starts.sort_unstable();
    }
    let mut all: Vec<Raise<'_>> = starts
        .into_iter()
        .filter(|&o| keep(ix.event(o)))
        .map(|o| follow(ix, o))
        .collect();
    if let Some(f) = escapes {
        // Only exceptions that propagate out of a frame of `f` (it unwinds with them).
        all.retain(|r| r.unwound.iter().any(|e| e.name() == f));
    }
    let r = all.get(occ - 1).ok_or_else(|| {
        let mut what = String::from("exception(s) raised");
        if let Some(w) = ty {
            what = format!("`{w}` {what}");
        }
        if let Some(f) = raised_in {
            what.push_str(&format!(" in `{f}`"));
        }
        if let Some(f) = escapes {
            what.push_str(&format!(" that propagate out of `{f}`"));
        }
        if let Some(tt) = test {
            what.push_str(&format!(" during test `{tt}`"));
        }
        ExtractError::NotObserved(format!(
            "the trace has {} {what}; occurrence {occ} was asked for",
            all.len()
        ))
    })?;
    let exc = r
        .origin
        .detail()
        .exc
        .clone()
        .unwrap_or(Box::new(flux_trace::ExcInfo {
            ty: String::new(),
            msg: String::new(),
        }));
    let handler_line = r
        .handled
        .filter(|h| {
            h.ev == Kind::Handled && h.detail().exc.as_ref().map(|x| &x.ty) == Some(&exc.ty)
        })
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

pub(crate) fn raising_tests(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let ty = p.opt_str("type")?;
    let raised_in = p.opt_str("raised_in")?;
    let uncaught = p.bool_or("uncaught", false)?;
    // test → (type, message, raised in) of its first crash
    let mut crashes: BTreeMap<String, (String, String, String)> = BTreeMap::new();
    if let Some(f) = p.opt_str("escapes")? {
        for inv in invocations(ix, p, f)? {
            for &i in &inv.events {
                let e = ix.event(i);
                let fits = e.ev == Kind::Return
                    && e.unwind
                    && !e.test.is_empty()
                    && ty.is_none_or(|w| type_matches(exc_type(e), w));
                if fits {
                    crashes.entry(e.test.to_string()).or_insert((
                        exc_type(e).to_string(),
                        exc_msg(e),
                        e.name().to_string(),
                    ));
                }
            }
        }
    } else {
        let Some(ty) = ty else {
            return Err(ExtractError::MissingParam {
                param: "type (or escapes)".into(),
            });
        };
        for r in raises(ix, |e| {
            type_matches(exc_type(e), ty)
                && raised_in.is_none_or(|f| e.name() == f)
                && !e.test.is_empty()
        }) {
            if uncaught && r.handled.is_some() {
                continue;
            }
            let o = r.origin;
            crashes.entry(o.test.to_string()).or_insert((
                exc_type(o).to_string(),
                exc_msg(o),
                o.name().to_string(),
            ));
        }
    }
    // the tests in start order, or (`order = "sorted"`) as Python's sorted() orders their ids
    let mut order = ix.test_ids();
    if p.choice_or("order", &["start", "sorted"], "start")? == "sorted" {
        order.sort();
    }
    let crashing: BTreeSet<String> = crashes.keys().cloned().collect();
    let safe: BTreeSet<String> = order
        .iter()
        .filter(|t| !crashing.contains(*t))
        .cloned()
        .collect();
    let crashing = in_test_order(&order, &crashing);
    let details: Vec<Value> = crashing
        .iter()
        .map(|t| {
            let (ty, msg, at) = &crashes[t];
            json!({"test": t, "exception_type": ty, "message": msg, "raised_in": at})
        })
        .collect();
    Ok(json!({
        "crashing_tests": crashing,
        "safe_tests": in_test_order(&order, &safe),
        "crashes": details,
    }))
}

fn type_counts(counts: &BTreeMap<String, usize>) -> Vec<Value> {
    counts
        .iter()
        .map(|(t, c)| json!({"exception_type": t, "count": c}))
        .collect()
}

pub(crate) fn exception_counts(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = invocations(ix, p, function)?;
    let lines = p.opt_line_list("lines")?;
    let which = p.choice_or("events", &["all", "raises", "reported"], "all")?;
    let raises_only = which == "raises";
    let reported_only = which == "reported";
    let origins: BTreeSet<usize> = if raises_only {
        raise_origins(ix).into_iter().collect()
    } else {
        BTreeSet::new()
    };
    let first_seen = p.choice_or("order", &["sorted", "first_seen"], "sorted")? == "first_seen";
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut seen: Vec<String> = Vec::new();
    let mut per_test: BTreeMap<&str, BTreeMap<String, usize>> = BTreeMap::new();
    for inv in &invs {
        for &i in &inv.events {
            let e = ix.event(i);
            if e.ev != Kind::Exception
                || (raises_only && !origins.contains(&i))
                || (reported_only && e.detail().outcome == "reraise-inferred")
                || lines.as_ref().is_some_and(|ls| !ls.contains(&e.line))
            {
                continue;
            }
            *counts.entry(exc_type(e).to_string()).or_insert(0) += 1;
            if !seen.iter().any(|t| t == exc_type(e)) {
                seen.push(exc_type(e).to_string());
            }
            if !e.test.is_empty() {
                *per_test
                    .entry(e.test.as_str())
                    .or_default()
                    .entry(exc_type(e).to_string())
                    .or_insert(0) += 1;
            }
        }
    }
    let per_test: Vec<Value> = ix
        .test_ids()
        .iter()
        .filter_map(|t| {
            per_test
                .get(t.as_str())
                .map(|c| json!({"test": t, "exception_type_counts": type_counts(c)}))
        })
        .collect();
    Ok(json!({
        "exception_type_counts": type_counts(&counts),
        "exception_types": if first_seen { seen } else { counts.keys().cloned().collect() },
        "total": counts.values().sum::<usize>(),
        "per_test": per_test,
    }))
}

pub(crate) fn exception_events(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs = invocations(ix, p, function)?;
    let reported_only = p.choice_or("events", &["all", "reported"], "all")? == "reported";
    let qualified = p.choice_or("type_names", &["hook", "qualified"], "hook")? == "qualified";
    let mut out = Vec::new();
    let mut per_invocation = Vec::new();
    for (n, inv) in invs.iter().enumerate() {
        let mut own = Vec::new();
        // Each activation's last `line` event (trace index): one pass, not a scan per event.
        let mut last_line: HashMap<u64, usize> = HashMap::new();
        for &j in &inv.events {
            if ix.event(j).ev == Kind::Line {
                last_line.insert(ix.owner(j), j);
            }
        }
        for &i in &inv.events {
            let e = ix.event(i);
            if e.ev != Kind::Exception
                || (reported_only && e.detail().outcome == "reraise-inferred")
            {
                continue;
            }
            // handled: its activation executes a later line
            let handled = last_line.get(&ix.owner(i)).is_some_and(|&j| j > i);
            let ty = exc_type(e);
            let ty = if qualified && !ty.contains('.') {
                format!("builtins.{ty}")
            } else {
                ty.to_string()
            };
            let event = json!({
                "line": e.line,
                "exception_type": ty,
                "message": e.detail().exc.as_ref().map(|x| x.msg.as_str()).unwrap_or(""),
                "handled": handled,
            });
            let mut grouped = event.clone();
            grouped["handled_where"] = json!(if handled { "handled" } else { "propagated" });
            own.push(grouped);
            let mut flat = event;
            flat["invocation"] = json!(n + 1);
            flat["test"] = json!(e.test);
            out.push(flat);
        }
        let test = inv
            .events
            .first()
            .map_or("", |&i| ix.event(i).test.as_str());
        per_invocation.push(json!({
            "invocation": n + 1,
            "test": test,
            "raised": !own.is_empty(),
            "exceptions": own,
        }));
    }
    Ok(json!({ "exception_events": out, "per_invocation": per_invocation }))
}

pub(crate) fn caught_types(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let at_line = p.opt_line("line")?;
    let invs = invocations(ix, p, function)?;
    let mut caught: BTreeMap<(String, Option<u32>), usize> = BTreeMap::new();
    for inv in &invs {
        for (k, &i) in inv.events.iter().enumerate() {
            let e = ix.event(i);
            if e.ev != Kind::Exception {
                continue;
            }
            let act = ix.owner(i);
            // The frame's next decisive event after the exception event.
            let mut verdict: Option<Option<u32>> = None; // Some(line) = caught (line if known)
            let mut went_on = false;
            for &j in &inv.events[k + 1..] {
                if ix.owner(j) != act {
                    continue;
                }
                let x = ix.event(j);
                match x.ev {
                    Kind::Handled if exc_type(x) == exc_type(e) => {
                        verdict = Some(Some(x.line));
                        break;
                    }
                    Kind::Line => went_on = true,
                    Kind::Exception if !went_on => break, // raised again from the same place
                    Kind::Return if x.unwind && !went_on => break,
                    Kind::Return | Kind::Exception | Kind::Handled => {
                        verdict = went_on.then_some(None);
                        break;
                    }
                    _ => {}
                }
            }
            if verdict.is_none() && went_on {
                verdict = Some(None);
            }
            let Some(line) = verdict else { continue };
            if at_line.is_some_and(|l| line != Some(l)) {
                continue;
            }
            *caught.entry((exc_type(e).to_string(), line)).or_insert(0) += 1;
        }
    }
    let kinds: BTreeSet<&str> = caught.keys().map(|(t, _)| t.as_str()).collect();
    let list: Vec<Value> = caught
        .iter()
        .map(|((t, l), c)| json!({"exception_type": t, "line": l, "count": c}))
        .collect();
    Ok(json!({"caught_exception_kinds": kinds.into_iter().collect::<Vec<_>>(), "caught": list}))
}

#[cfg(test)]
mod tests;
