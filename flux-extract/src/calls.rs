//! Inter-procedural control flow: S6 (`call_sequence`, `callees_count`), S6/M6
//! (`covered_functions`, `invocation_counts`, `callers`), M6 (`callees_across_tests`), and the
//! TraceEval-style `call_graph`.
use crate::common::{all_invocations, module_of, pick_invocation, Ix, Loc, Norm};
use crate::{ExtractError, Params};
use flux_trace::query::{file_within, test_matches, Invocation};
use flux_trace::{Event, Kind, Name, TraceIndex};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

pub(crate) const CALL_SEQUENCE: &str = "\
The calls made by the Nth invocation of `function` (with `all_invocations = true`, by each of \
its selected invocations in turn), in order (without `function`: every start of \
the functions of `functions` in the trace, in order, within `test` if given): every `call` event whose parent \
is an activation of that frame (with `transitive = true`, of any frame running while it is \
active: every call it makes directly or through callees), except resumptions of an existing \
generator/coroutine frame (counted too with `resumptions = true`), optionally only callees whose \
file lies under `within` and only those of `functions` (qualnames, or `module.qualname`s as the \
entries' `func` names them, see `module_names`; with `include_self`, the \
invocation's own start comes first, at line 0, and with `resumptions` too each of its own \
resumptions is an entry where it happens, SWE-Flux's \"every `call` event, the target's own \
included\"). Calls through untraced code (C functions such as `map` or \
`sorted(key=...)`) appear as direct calls of the nearest traced caller; comprehensions, \
generator expressions and lambdas are callees like any function (`f.<locals>.<listcomp>`, \
`f.<locals>.<lambda>`). Each entry is the callee (`function`: its qualname, and the location \
fields `file`, `func`, ...), `caller` (the qualname of the frame that made the call) and `line`, \
the call site: the line of the caller's last `line` event before the call. Answer: \
{\"call_sequence\": [{\"function\", \"line\", ...}, ...]}.";

pub(crate) const CALLEES_COUNT: &str = "\
The direct callees of the Nth invocation of `function` (same selection as `call_sequence`, its \
options included) with the number of calls to each, sorted by callee name. Answer: \
{\"callees\": [{\"function\", \"count\", ...}, ...]}.";

pub(crate) const CALLEES_ACROSS_TESTS: &str = "\
For every test in which `function` runs (in start order), the sorted set of its direct callees \
(as `call_sequence`, over all its invocations in that test, filtered by `within`). Answer: \
{\"callees_per_test\": [{\"test\", \"callees\": [...]}, ...]}.";

pub(crate) const COVERED_FUNCTIONS: &str = "\
The functions of `functions` (qualnames; all functions when absent, then `within` limits their \
files) that start at least once (a fresh `call` event) while an invocation of `function` is \
active (from its call to its return, in its thread, the invocation's own start included), or \
anywhere in the trace (`test` restricts) when `function` is absent. Each once, sorted by \
relative file then `func`. Answer: {\"covered_functions\": [{\"file\", \"func\", ...}, ...]}.";

pub(crate) const INVOCATION_COUNTS: &str = "\
How many times each function of a set is invoked over the trace (`test` restricts): the set is \
`functions` (qualnames), or every method defined directly in the class `class` (or in each \
class of `classes`; from the static facts of `file`), or every function of the module in `file` \
(`module = true`; with `methods`, \
the methods of its classes too, SWE-Flux's \"module-level functions and methods of every \
class\"; with `class`, the methods of the classes nested in it too, not functions inside \
methods); with `nested`, functions defined inside those too; with `code_objects`, every code \
object under the class (or module) besides: nested functions, lambdas, comprehensions and \
generator expressions that have a frame of their own (SWE-Flux's counts over a class's code \
objects). `exclude_decorated` drops functions with one of those \
decorators (exact text, or a suffix after `.` such as `setter`); `exclude_dunder` drops dunder \
methods (a name `__x__`: `__init__`, `__call__`). A count is the number of frames \
(`count = \"invocations\"`, default) or of `call` events, generator resumptions included \
(`count = \"calls\"`, SWE-Flux's reading); functions never called have 0. Answer: \
{\"invocation_counts\": [{\"func\", \"file\", \"qualname\", \"count\", ...}, ...]} sorted by \
`func`.";

pub(crate) const CALL_GRAPH: &str = "\
The dynamic call graph, TraceEval style: for every `call` event (generator resumptions excluded) \
whose parent activation is known, an edge from the parent's qualname to the callee's qualname; \
with `within`, both caller and callee files must lie under it; with `test`, only calls made \
during that test; with `file`, only calls made from code under it. With `qualify = \"module\"` \
names are prefixed by the module derived from the file (the path after the last \
`site-packages/` or `dist-packages/`, else after `lib/pythonX.Y/`, else from the component where \
`within` matches, else the file's stem; `.py` and `/__init__` dropped, `/` as `.`), e.g. \
`sympy.core.add.Add.flatten`. Answer: {\"call_graph\": {caller: [callees, sorted, unique]}} with \
callers sorted.";

pub(crate) const CALLERS: &str = "\
Who calls `function`: its invocations (in `test` and under `file` if given) and the immediate \
caller of each, the traced frame whose activation made the call (the top of the call stack just \
before the `call` event; a call through untraced C code, such as `map`, is the nearest traced \
frame's). With `count = \"calls\"` every `call` event of `function` counts, resumptions of its \
generator or coroutine frames included (a resumer is then a caller too); by default \
(`\"invocations\"`) each frame once. A caller is written `module.qualname` (modules as \
`module_names` says; `module.co_name` with `function_names = \"co_name\"`, as a tracer before \
Python 3.11 names frames); an invocation whose caller is not in the trace is an error. Answer: \
{\"callers\": [sorted, unique], \"invocation_count\": N}.";

/// What calls a selection keeps.
struct CallSel<'p> {
    within: Option<&'p str>,
    functions: Option<HashSet<String>>,
    transitive: bool,
    resumptions: bool,
    /// Every call in the invocation's thread between its first and its last event, wherever it
    /// is made from (a coroutine's awaited work runs callbacks while the frame is suspended).
    lifetime: bool,
    /// How `module.qualname` entries of `functions` are read.
    loc: Loc<'p>,
}

impl<'p> CallSel<'p> {
    fn new(p: &'p Params) -> Result<CallSel<'p>, ExtractError> {
        Ok(CallSel {
            within: p.opt_str("within")?,
            functions: p
                .opt_str_list("functions")?
                .map(|v| v.into_iter().collect()),
            transitive: p.bool_or("transitive", false)?,
            resumptions: p.bool_or("resumptions", false)?,
            lifetime: p.bool_or("lifetime", false)?,
            loc: Loc::new(p)?,
        })
    }

    /// Under `within`, and one of `functions`: its qualname, or its `module.qualname` as the
    /// answer's `func` names it (`module.co_name` with `function_names = "co_name"`).
    fn keeps(&self, e: &Event) -> bool {
        self.within.is_none_or(|w| file_within(e.file(), w))
            && self.functions.as_ref().is_none_or(|f| {
                f.contains(e.name()) || f.contains(&self.loc.func_as_listed(e, Some(f)))
            })
    }

    /// The location record of `e`, its `func` as `functions` lists it.
    fn record(&self, e: &Event) -> Value {
        let mut v = self.loc.record(e, None);
        v["func"] = json!(self.loc.func_as_listed(e, self.functions.as_ref()));
        v
    }
}

/// The `call` events (fresh calls; resumptions too with `resumptions`) of the invocation's
/// thread from its first event to its last, other than its own activations'.
fn calls_in_lifetime(ix: &Ix<'_>, inv: &Invocation, resumptions: bool) -> Vec<usize> {
    let (Some(&first), Some(&last)) = (inv.events.first(), inv.events.last()) else {
        return Vec::new();
    };
    let start = ix.event(first);
    let own: HashSet<u64> = inv.activations.iter().copied().collect();
    let mut out = Vec::new();
    for i in first + 1..=last {
        let e = ix.event(i);
        if e.ev != Kind::Call || e.pid != start.pid || e.tid != start.tid {
            continue;
        }
        if own.contains(&e.activation) {
            continue;
        }
        if counts_as_call(ix, i, resumptions) {
            out.push(i);
        }
    }
    out
}

/// Whether the `call` event at `i` is a call of its callee's invocation (the same activation
/// reported by both witnesses is one call): its fresh start, or any resumption with
/// `resumptions`.
fn counts_as_call(ix: &Ix<'_>, i: usize, resumptions: bool) -> bool {
    let e = ix.event(i);
    let frame = if e.frame == 0 { e.activation } else { e.frame };
    let Some(callee) = ix.frame_events(frame) else {
        return false;
    };
    if callee.binary_search(&(i as u32)).is_err() {
        return false;
    }
    // The frame's first event is the call that made it: a fresh start when its activation
    // is the frame (`Invocation::starts_here`).
    (callee.first() == Some(&(i as u32)) && e.activation == frame) || resumptions
}

/// The trace indices of the `call` events under `inv` that `sel` keeps, in trace order.
fn calls_under(ix: &Ix<'_>, inv: &Invocation, sel: &CallSel<'_>) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    if sel.lifetime {
        out = calls_in_lifetime(ix, inv, sel.resumptions);
    } else if sel.transitive || sel.resumptions {
        // Every call event inside the invocation's activations, in its thread.
        let own: HashSet<u64> = inv.activations.iter().copied().collect();
        for &a in &inv.activations {
            let (Some((c, r)), Some(call)) = (ix.span(a), ix.call_event(a)) else {
                continue;
            };
            for i in c + 1..=r {
                let e = ix.event(i);
                if e.ev != Kind::Call
                    || e.pid != call.pid
                    || e.tid != call.tid
                    || own.contains(&e.activation)
                    || (!sel.transitive && !own.contains(&e.parent))
                {
                    continue;
                }
                if counts_as_call(ix, i, sel.resumptions) {
                    out.push(i);
                }
            }
        }
    } else {
        for &a in &inv.activations {
            out.extend(ix.fresh_calls_under(a));
        }
    }
    out.retain(|&i| sel.keeps(ix.event(i)));
    out.sort_unstable();
    out.dedup();
    out
}

/// The call-site line of the call event `i`: the caller's last `line` event before it (the
/// caller's def line when it has none).
fn call_site(ix: &Ix<'_>, i: usize) -> u32 {
    let e = ix.event(i);
    let Some(frame) = ix.frame(e.parent) else {
        return 0;
    };
    let Some(evs) = ix.frame_events(frame) else {
        return 0;
    };
    let k = evs.partition_point(|&j| (j as usize) < i);
    evs[..k]
        .iter()
        .rev()
        .map(|&j| ix.event(j as usize))
        .find(|x| x.ev == Kind::Line)
        .map(|x| x.line)
        .or_else(|| evs.first().map(|&c| ix.event(c as usize).line))
        .unwrap_or(0)
}

fn call_record(ix: &Ix<'_>, sel: &CallSel<'_>, norm: Norm<'_>, i: usize, direct: bool) -> Value {
    let e = ix.event(i);
    let mut v = sel.record(e);
    v["line"] = if direct {
        json!(norm.apply(call_site(ix, i)))
    } else {
        json!(call_site(ix, i))
    };
    v["caller"] = json!(ix.call_event(e.parent).map(|c| c.name()).unwrap_or(""));
    v
}

pub(crate) fn call_sequence(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let sel = CallSel::new(p)?;
    let Some(function) = p.opt_str("function")? else {
        return calls_in_trace(ix, p, &sel);
    };
    let chosen: Vec<Invocation> = if p.bool_or("all_invocations", false)? {
        all_invocations(ix, p, function)?
    } else {
        vec![pick_invocation(ix, p, function)?.1]
    };
    let mut seq: Vec<Value> = Vec::new();
    for inv in chosen {
        seq.extend(invocation_calls(ix, p, &inv, &sel)?);
    }
    Ok(json!({ "call_sequence": seq }))
}

/// The entries of one invocation: its own start first with `include_self`, then the calls
/// made under it.
fn invocation_calls(
    ix: &Ix<'_>,
    p: &Params,
    inv: &Invocation,
    sel: &CallSel<'_>,
) -> Result<Vec<Value>, ExtractError> {
    let norm = Norm::new(ix, p, inv)?;
    let mut seq: Vec<Value> = Vec::new();
    let include_self = p.bool_or("include_self", false)?;
    if include_self {
        if let Some(first) = inv.events.first() {
            let mut v = sel.record(ix.event(*first));
            v["line"] = json!(0);
            v["caller"] = json!(ix
                .call_event(ix.event(*first).parent)
                .map(|c| c.name())
                .unwrap_or(""));
            seq.push(v);
        }
    }
    let own: HashSet<u64> = inv.activations.iter().copied().collect();
    let mut calls = calls_under(ix, inv, sel);
    if include_self && sel.resumptions {
        // The invocation's own resumptions are `call` events too (SWE-Flux's tracer logs one
        // per resumption): each at its place, its line the call site in the resumer's frame.
        calls.extend(
            inv.activations
                .iter()
                .skip(1)
                .filter_map(|&a| ix.span(a).map(|(c, _)| c)),
        );
        calls.sort_unstable();
        calls.dedup();
    }
    for i in calls {
        let direct = own.contains(&ix.event(i).parent);
        seq.push(call_record(ix, sel, norm, i, direct));
    }
    Ok(seq)
}

/// Without `function`: every start (fresh call) of the selected functions in the trace (in
/// `test`, under `file`), in trace order; `line` is the call site in the caller's frame.
fn calls_in_trace(ix: &Ix<'_>, p: &Params, sel: &CallSel<'_>) -> Result<Value, ExtractError> {
    let filter = crate::common::filter(p)?;
    let mut seq = Vec::new();
    for first in ix.fresh_starts() {
        if sel.keeps(ix.event(first)) && Ix::call_passes(ix.event(first), filter) {
            let mut v = sel.record(ix.event(first));
            v["line"] = json!(call_site(ix, first));
            v["caller"] = json!(ix
                .call_event(ix.event(first).parent)
                .map(|c| c.name())
                .unwrap_or(""));
            seq.push(v);
        }
    }
    Ok(json!({ "call_sequence": seq }))
}

pub(crate) fn callees_count(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let sel = CallSel::new(p)?;
    let (_, inv) = pick_invocation(ix, p, function)?;
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for i in calls_under(ix, &inv, &sel) {
        let c = counts.entry(ix.event(i).name()).or_insert((0, i));
        c.0 += 1;
    }
    let list: Vec<Value> = counts
        .into_iter()
        .map(|(_, (c, i))| {
            let mut v = sel.record(ix.event(i));
            v["count"] = json!(c);
            v
        })
        .collect();
    Ok(json!({ "callees": list }))
}

/// `callees_across_tests` reads the targets' direct calls only unless `transitive`
/// (`Extractor::target_calls_only`).
pub(crate) fn direct_callees_only(p: &Params) -> bool {
    !p.bool_or("transitive", false).unwrap_or(true)
}

pub(crate) fn callees_across_tests(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let sel = CallSel::new(p)?;
    let invs = all_invocations(ix, p, function)?;
    let mut per_test: HashMap<String, BTreeSet<String>> = HashMap::new();
    for inv in invs.iter().filter(|i| !i.test.is_empty()) {
        let set = per_test.entry(inv.test.to_string()).or_default();
        for i in calls_under(ix, inv, &sel) {
            set.insert(ix.event(i).name().to_string());
        }
    }
    let list: Vec<Value> = ix
        .test_ids()
        .into_iter()
        .filter_map(|test| {
            per_test
                .remove(&test)
                .map(|c| json!({"test": test, "callees": c.into_iter().collect::<Vec<_>>()}))
        })
        .collect();
    Ok(json!({ "callees_per_test": list }))
}

pub(crate) fn callers(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let loc = Loc::new(p)?;
    let calls = p.choice_or("count", &["invocations", "calls"], "invocations")? == "calls";
    let mut callers: BTreeSet<String> = BTreeSet::new();
    let mut count = 0usize;
    for (n, inv) in all_invocations(ix, p, function)?.into_iter().enumerate() {
        let starts: Vec<usize> = if calls {
            inv.activations
                .iter()
                .filter_map(|&a| ix.span(a).map(|(c, _)| c))
                .collect()
        } else {
            inv.events.first().copied().into_iter().collect()
        };
        for i in starts {
            let e = ix.event(i);
            let caller = ix.call_event(e.parent).ok_or_else(|| {
                ExtractError::NotObserved(format!(
                    "the caller of invocation {} of `{function}` (line {}) is not in the trace",
                    n + 1,
                    e.line
                ))
            })?;
            callers.insert(loc.func_by_name_mode(caller));
            count += 1;
        }
    }
    Ok(json!({ "callers": callers.into_iter().collect::<Vec<_>>(), "invocation_count": count }))
}

pub(crate) fn covered_functions(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let loc = Loc::new(p)?;
    let sel = CallSel {
        within: p.opt_str("within")?,
        functions: p
            .opt_str_list("functions")?
            .map(|v| v.into_iter().collect()),
        transitive: true,
        resumptions: false,
        lifetime: false,
        loc,
    };
    let test = p.opt_str("test")?;
    let mut starts: Vec<usize> = Vec::new();
    if let Some(function) = p.opt_str("function")? {
        for inv in all_invocations(ix, p, function)? {
            if let Some(&first) = inv.events.first().filter(|_| inv.starts_here()) {
                if sel.keeps(ix.event(first)) {
                    starts.push(first);
                }
            }
            starts.extend(calls_under(ix, &inv, &sel));
        }
    } else {
        for first in ix.fresh_starts() {
            let e = ix.event(first);
            if sel.keeps(e) && test.is_none_or(|t| test_matches(&e.test, t)) {
                starts.push(first);
            }
        }
    }
    let mut seen: BTreeMap<(String, String), Value> = BTreeMap::new();
    for i in starts {
        let e = ix.event(i);
        let key = (loc.file(e.file()), loc.func(e));
        seen.entry(key).or_insert_with(|| sel.record(e));
    }
    Ok(json!({"covered_functions": seen.into_values().collect::<Vec<_>>()}))
}

/// A function of the set `invocation_counts` reports.
struct Member {
    qualname: String,
    file: String,
}

fn members(ix: &Ix<'_>, p: &Params) -> Result<Vec<Member>, ExtractError> {
    if let Some(fs) = p.opt_str_list("functions")? {
        let file = p.opt_str("file")?;
        return Ok(fs
            .into_iter()
            .map(|q| {
                let f = ix
                    .invocations(&q, Default::default())
                    .first()
                    .and_then(|inv| inv.first_call(ix.trace))
                    .map(|e| e.file().clone())
                    .or_else(|| file.map(Name::from))
                    .unwrap_or_default();
                Member {
                    qualname: q,
                    file: f.into(),
                }
            })
            .collect());
    }
    let file = p
        .opt_str("file")?
        .ok_or_else(|| ExtractError::MissingParam {
            param: "file (whose static facts list the functions), or functions".into(),
        })?;
    let facts: Vec<&flux_trace::FileFacts> = ix
        .trace
        .facts
        .values()
        .filter(|f| file_within(&f.file, file))
        .collect();
    let facts = match facts.as_slice() {
        [one] => *one,
        [] => {
            return Err(ExtractError::NotObserved(format!(
                "the trace has no static facts of a file under `{file}`"
            )))
        }
        many => {
            return Err(ExtractError::Ambiguous {
                function: file.to_string(),
                files: many.iter().map(|f| f.file.clone()).collect(),
            })
        }
    };
    let class = p.opt_str("class")?;
    let classes = p.opt_str_list("classes")?;
    let nested = p.bool_or("nested", false)?;
    if class.is_none() && classes.is_none() && !p.bool_or("module", false)? {
        return Err(ExtractError::MissingParam {
            param: "class, classes, module = true, or functions".into(),
        });
    }
    let excluded = p.opt_str_list("exclude_decorated")?.unwrap_or_default();
    let decorated = |decos: &[String]| {
        decos.iter().any(|d| {
            excluded
                .iter()
                .any(|x| d == x || d.rsplit('.').next() == Some(x.as_str()))
        })
    };
    let dunder = p.bool_or("exclude_dunder", false)?;
    let decorated = |f: &flux_trace::facts::FunctionFacts| {
        decorated(&f.decorators)
            || dunder && {
                let name = f.qualname.rsplit('.').next().unwrap_or("");
                name.len() > 4 && name.starts_with("__") && name.ends_with("__")
            }
    };
    let roots: Vec<String> = match (&classes, class) {
        (Some(cs), _) => cs.clone(),
        (None, Some(c)) => vec![c.to_string()],
        (None, None) => vec!["<module>".to_string()],
    };
    let is_function = |k: &str| matches!(k, "function" | "async_function");
    // `methods`: with `module`, the methods of the module's classes too (a function whose
    // parent is not a function: a class, not inside any function's `<locals>`).
    let methods = p.bool_or("methods", false)?;
    let functions: HashSet<&str> = facts
        .functions
        .iter()
        .filter(|f| is_function(&f.kind))
        .map(|f| f.qualname.as_str())
        .collect();
    let mut out: Vec<Member> = Vec::new();
    let code_objects = p.bool_or("code_objects", false)?;
    for root in &roots {
        if code_objects {
            // Every code object under the class (or module): functions and methods at any depth,
            // lambdas, comprehensions and generator expressions (those with a frame of their own).
            for f in &facts.functions {
                let under = root == "<module>" || f.qualname.starts_with(&format!("{root}."));
                if f.code
                    && under
                    && !matches!(f.kind.as_str(), "class" | "module")
                    && !decorated(f)
                {
                    out.push(Member {
                        qualname: f.qualname.clone(),
                        file: facts.file.clone(),
                    });
                }
            }
        }
        for f in &facts.functions {
            if !is_function(&f.kind) || decorated(f) {
                continue;
            }
            // With a class, `methods` takes the methods of classes nested in it too.
            let method = methods
                && (root == "<module>" || f.qualname.starts_with(&format!("{root}.")))
                && !f.qualname.contains("<locals>")
                && f.parent
                    .as_deref()
                    .is_some_and(|p| p != "<module>" && !functions.contains(p));
            let direct = f.parent.as_deref() == Some(root.as_str()) || method;
            let inside = if root == "<module>" {
                true
            } else {
                f.qualname.starts_with(&format!("{root}."))
            };
            if direct || (nested && inside) {
                out.push(Member {
                    qualname: f.qualname.clone(),
                    file: facts.file.clone(),
                });
            }
        }
    }
    // a nested class's methods are under two roots
    let mut seen = HashSet::new();
    out.retain(|m| seen.insert(m.qualname.clone()));
    if out.is_empty() {
        return Err(ExtractError::NotObserved(format!(
            "the static facts of {} show no function{}",
            facts.file,
            if roots == ["<module>"] {
                String::new()
            } else {
                format!(" in class `{}`", roots.join("`, `"))
            }
        )));
    }
    Ok(out)
}

pub(crate) fn invocation_counts(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let loc = Loc::new(p)?;
    let test = p.opt_str("test")?;
    let calls = p.choice_or("count", &["invocations", "calls"], "invocations")? == "calls";
    let mut rows: Vec<(String, Value)> = Vec::new();
    let mut seen = HashSet::new();
    for m in members(ix, p)? {
        if !seen.insert((m.qualname.clone(), m.file.clone())) {
            continue;
        }
        let filter = flux_trace::query::Filter {
            test: None,
            file: (!m.file.is_empty()).then_some(m.file.as_str()),
        };
        let mut count = 0usize;
        for inv in ix.invocations(&m.qualname, filter) {
            let in_test = |e: &Event| test.is_none_or(|t| test_matches(&e.test, t));
            if calls {
                count += inv
                    .activations
                    .iter()
                    .filter_map(|a| ix.call_event(*a))
                    .filter(|e| in_test(e))
                    .count();
            } else if inv.starts_here() && inv.first_call(ix.trace).is_some_and(in_test) {
                count += 1;
            }
        }
        let module = if m.file.is_empty() {
            String::new()
        } else {
            loc.module(&m.file)
        };
        let func = if module.is_empty() {
            m.qualname.clone()
        } else {
            format!("{module}.{}", m.qualname)
        };
        rows.push((
            func.clone(),
            json!({"func": func, "file": loc.file(&m.file), "abs_file": m.file,
                   "module": module, "qualname": m.qualname, "function": m.qualname,
                   "count": count}),
        ));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(json!({"invocation_counts": rows.into_iter().map(|(_, v)| v).collect::<Vec<_>>()}))
}

pub(crate) fn call_graph(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let within = p.opt_str("within")?;
    let test = p.opt_str("test")?;
    let from = p.opt_str("file")?;
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
            format!("{}.{}", module_of(e.file(), within), e.name())
        } else {
            e.name().to_string()
        }
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in ix.fresh_starts() {
        let e = ix.event(i);
        let Some(caller) = ix.call_event(e.parent) else {
            continue;
        };
        let inside = |ev: &Event| within.is_none_or(|w| file_within(ev.file(), w));
        if !inside(e)
            || !inside(caller)
            || test.is_some_and(|tt| !test_matches(&e.test, tt))
            || from.is_some_and(|f| !file_within(caller.file(), f))
        {
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

/// Selected invocations, for the candidate enumeration.
pub(crate) fn direct_callees(ix: &Ix<'_>, inv: &Invocation) -> Vec<usize> {
    let sel = CallSel {
        within: None,
        functions: None,
        transitive: false,
        resumptions: false,
        lifetime: false,
        loc: Loc::default(),
    };
    calls_under(ix, inv, &sel)
}

#[cfg(test)]
mod tests;
