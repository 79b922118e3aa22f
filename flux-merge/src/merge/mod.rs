//! Merge the two witnesses into one oracle trace.
//!
//! USDT gives calls and returns where the interpreter has the probes (and lines on 3.11); the
//! hook gives what it cannot: lines, values and exceptions in targeted code, test boundaries,
//! 3.11's missing entries, 3.15's generator starts (its entry probe also fires when a generator
//! object is created, indistinguishably from the first resumption), and on 3.12–3.14 everything.
//! Both sources stamp CLOCK_MONOTONIC nanoseconds on the thread that did the work, so one
//! thread's records from both, ordered by time, are in program order.
//!
//! The core is small: [`scopes`] cuts each thread's timeline to what was traced, [`thread`]
//! walks it with a stack of open activations that gives every event its activation, frame,
//! parent and depth. Every special case is a named rule with its home and its evidence: its
//! counter ([`counters`]) not zero in a fixture of the offline corpus (`tests/corpus/`), or a
//! test that names it and fails without it (`rules` checks that each has one; ARCHITECTURE.md's
//! copy of this table is generated from it):
//!
//! | rule | home | what it says |
//! |---|---|---|
//! | `stream-order` | [`crate::protocol`] | a thread's hook records are written in program order: a stream whose times go back (`hx` aside, stamped with its start) is a problem |
//! | `timeline` | [`scopes`] | per thread, both sources by time, the hook's record first at equal times |
//! | `before-hook` | [`scopes`] | USDT events of a process before its hook's first record are left out (counted); USDT events of a process with no hook stream are a problem (a hello and a bye alone are a stream) |
//! | `test-windows` | [`scopes`] | scope `tests`: only what lies inside a process's test windows |
//! | `target-extents` | [`scopes`] | scope `targets`: only what lies inside the thread's extents of targeted code |
//! | `activation-stack` | [`thread`] | a call opens an activation, a return closes the top one of the same code |
//! | `generator-frames` | [`thread`] | a resumption (hook `c` of a suspended frame's key) keeps that frame's id |
//! | `fresh-frames` | [`thread`] | a fresh start of generator code (hook `c` marked `new`) opens a new frame even if its key names a suspended one (abandoned generators are freed without an event and their addresses reused) |
//! | `unseen-starts` | [`thread`] | a hook `c` of generator code neither marked `new` nor resuming a known frame (hooks whose hello says `gen_starts: marked`) resumes a frame started untraced: it gets a frame id of its own (≠ its activation), so it is no fresh call |
//! | `unwind-reconcile` | [`thread`] | a USDT return of a frame lower in the stack closes the ones above as `unwind` (3.15: no return probe on exception exits); 3.11's return probe fires on exception exits too, so there an activation still open above one the hook saw end is a problem |
//! | `join-returns` | [`thread`] | the hook's return of an activation (value, exception, locals) is joined to USDT's; if USDT never reports it, the hook's closes it; 3.11: USDT's awaited return of that activation is the program's even inside an `hx` span, and the program going on before it comes is a problem (only an extent's edge closes it without) |
//! | `hook-end-closes` | [`thread`] | an activation only the hook saw end is closed by the hook's record; a suspension keeps its frame for the resumption as a joined return does (17.3) |
//! | `hook-lines-win` | [`thread`] | lines of code the hook traces come from the hook; USDT's lines of it are dropped |
//! | `unmatched-returns` | [`thread`] | a USDT return no activation matches: with nothing open, a frame below the traced ones (counted); with something open, 3.11: code the hook did not see or a return out of order (a problem); 3.15: only the entryless `__init__` shim (counted), any other is a lost entry (a problem; an entry an entry rule dropped licenses none: the hook opened that activation); of an activation inferred unwound (a problem) |
//! | `unseen-thread` | [`thread`] | 3.11: a thread with USDT events and no hook record ran untraced (`_thread.start_new_thread`): a problem |
//! | `after-hook` | [`scopes`] | 3.11: USDT events of a process after its hook's last record (shutdown, after `bye`) are left out (counted) |
//! | `extent-edges` | [`thread`] | anything still open at an extent's edge is a problem, never silently closed |
//! | `never-returned` | [`thread`] | an activation still open when its thread's timeline ends is a problem |
//! | `hook-own-work` | [`hook_work`] | USDT events of the hook's files, of what runs inside its frames (3.15) or its `hx` spans (3.11) are dropped; a bracket of its frames still open when the thread's timeline ends, having taken other code's events, is a problem |
//! | `bracket-returns` | [`hook_work`] | 3.15: inside the hook's frames a return of other code is the hook's only if its entry came inside them too, any other is the program's; an entry of other code still unreturned when the bracket closes makes a later return of that code no activation matches a problem |
//! | `shared-first-line` | [`codes`] | USDT names an entry's code by (file, name, line): two code objects sharing all three (a lambda nested in a lambda on one line) get neither's qualified name, only the name, unless a hook record of the activation identifies it |
//! | `generator-entries` | [`codes`] | 3.15: USDT entries of generator code are dropped (the hook reports generator starts) |
//! | `target-entries` | [`codes`] | scope `targets`: USDT entries of targeted code are dropped (the hook reports its starts); a line-0 entry of a name targeted code without a first line has opens an activation the hook's start of that code replaces when it comes next, else it is untargeted code of that name (`line0-naming`), and closed without its own return it is a problem |
//! | `line0-naming` | [`codes`] | a line-0 entry is named from the hook's definitions of code without a first line (or by its return's line); dropped when the hook reports such starts |
//! | `identify` | [`codes`] | the first hook record of an activation USDT opened names its code object |
//! | `checks` | [`thread`] | a predicate's `k` record is a `check` event of its activation (value `True`/`False`, or the exception evaluating it raised) |
//! | `keep` | [`keep`] | with the plan's `keep` (scope `targets`, a run asked only an answer whose extractor reads no deeper than the targets' direct calls), each extent's events are cut, as it closes, to test boundaries, targeted activations' events and those of the activations they call directly (`flux_trace::keep`; counted) |
//! | `static-facts` | here | the facts of a targeted file (`F` records) are the first stream's that has them |
//!
//! Anything that cannot be placed is a problem: the trace is marked incomplete with the reason.
use crate::plan::Plan;
use crate::protocol::{HookCapture, Pair};
use crate::spill::ReadBack;
use crate::usdt::UsdtEvents;
use flux_trace::{Event, Kind, Meta, Name, Source, Trace, Value};
use std::collections::HashMap;

mod codes;
mod counters;
mod hook_work;
pub(crate) use hook_work::is_hook_file;
mod keep;
#[cfg(test)]
mod rules;
mod scopes;
pub(crate) use scopes::{Freeing, Stamped};
mod thread;
mod whole;
pub use whole::Whole;

/// An open activation.
pub(crate) struct Open {
    act: u64,
    frame: u64,
    file: Name,
    func: Name,
    qualname: Name,
    depth: u32,
    parent: u64,
    frame_key: Option<u64>,
    /// The hook already reported this activation's end; USDT's return is expected next.
    hook_end: Option<Event>,
    /// Index in the output of the call event, when USDT reported it (the hook may later
    /// identify the code object exactly: rule `identify`).
    call_idx: Option<usize>,
    /// The code object is known exactly (from a hook record of this activation).
    identified: bool,
    /// Opened by a line-0 USDT entry of a name several such code objects share: its USDT
    /// return's line says which.
    by_return: bool,
    /// Opened by a line-0 USDT entry that may be targeted code's start (`target-entries`):
    /// the hook's start of that code, coming next, takes its place.
    maybe_target: bool,
}

/// Merge a USDT capture (its events compact: [`crate::usdt::usdt_capture`]) and the hook's
/// streams, as `plan` had them traced. `interpreter` labels a trace without USDT
/// (`/usr/bin/python3.14 (3.14.0)`).
pub fn merge(
    usdt: Option<UsdtEvents>,
    hook: &HookCapture,
    interpreter: &str,
    plan: &Plan,
) -> Trace {
    merge_into(usdt, hook, interpreter, plan, None)
}

/// [`merge`], and the whole trace written to `whole.to` as [`Trace::write_jsonl`] writes it,
/// whatever the returned trace keeps (`plan.keep`). With rule `keep`'s cut, the events are
/// written as the merge goes, past a bound through `whole.spill`, so the merge holds only what
/// it keeps ([`whole`]); without it, the returned trace is the whole one, written at the end.
/// A failed write is an error; what the spill file cannot give back is a problem of the
/// returned trace.
pub fn merge_writing(
    usdt: Option<UsdtEvents>,
    hook: &HookCapture,
    interpreter: &str,
    plan: &Plan,
    whole: Whole<'_>,
) -> std::io::Result<Trace> {
    let Whole { to, spill, after } = whole;
    let mut store = whole::WholeStore::new(spill, after);
    let cuts = plan.keeps_target_calls();
    let mut trace = merge_into(usdt, hook, interpreter, plan, cuts.then_some(&mut store));
    if !cuts {
        trace.write_jsonl(to)?;
        return Ok(trace);
    }
    let back = ReadBack::default();
    let spilled = store.spilled();
    store.write(&trace.facts, to, &back)?;
    if spilled > 0 {
        trace.meta.counts.insert(whole::SPILLED.into(), spilled);
    }
    crate::usdt::add_read_back(&mut trace.meta, &back);
    Ok(trace)
}

fn merge_into(
    usdt: Option<UsdtEvents>,
    hook: &HookCapture,
    interpreter: &str,
    plan: &Plan,
    whole: Option<&mut whole::WholeStore>,
) -> Trace {
    let mut meta = match &usdt {
        Some(t) => t.meta.clone(),
        None => Meta {
            complete: true,
            interpreter: interpreter.to_string(),
            ..Meta::default()
        },
    };
    meta.calls = plan.calls_label();
    meta.problems.extend(hook.problems.iter().cloned());
    for s in &hook.streams {
        meta.problems.extend(s.problems());
        meta.problems.extend(disagreement(s, plan));
    }
    let n_usdt = usdt.as_ref().map_or(0, |t| t.len() as usize);
    let spilled = usdt.as_ref().map_or(0, UsdtEvents::spilled);
    // Each thread's USDT events are read (made events, from the capture's spill file) as its
    // timeline is merged, and freed once placed: the merge never holds the run's USDT events.
    let (usdt_threads, read_back) = usdt.map(UsdtEvents::into_threads).unwrap_or_default();
    let codes = codes::CodeIndex::new(hook, plan);
    let mut c = counters::Counters::default();
    // The hook's records likewise, from each stream's spill file (what cannot be read back
    // is noted with the USDT events').
    let (threads, tally) =
        scopes::timelines(usdt_threads, hook, plan, &read_back, &mut meta.problems);
    let cut = keep::Cut::new(hook, plan);
    meta.kept = cut.as_ref().map(keep::Cut::kept);
    let modules = Modules::new(hook);
    let shared = thread::Shared {
        plan,
        codes: &codes,
        cut: cut.as_ref(),
        modules: &modules,
    };
    // Room for every USDT event placed, unless rule `keep` cuts most of them as they come.
    let mut out: Vec<Event> = Vec::with_capacity(if cut.is_some() { 0 } else { n_usdt });
    let mut next_act = 1u64;
    let mut interned = flux_trace::Codes::default();
    let mut whole = whole;
    for (key, items) in threads {
        let outputs = thread::Outputs {
            next_act: &mut next_act,
            out: &mut out,
            whole: whole.as_deref_mut(),
            interned: &mut interned,
            c: &mut c,
        };
        thread::Thread::new(key, &shared, outputs).run(items);
    }
    tally.add_to(&mut c);
    crate::usdt::add_read_back(&mut meta, &read_back);
    out.sort_by_key(|e| e.ts);
    assign_tests(&mut out);
    // Rule `static-facts`: the facts of a targeted file are the first stream's that has them
    // (every process computes them from the same file).
    let mut facts = std::collections::BTreeMap::new();
    for s in &hook.streams {
        for (file, f) in &s.facts {
            facts.entry(file.clone()).or_insert_with(|| f.clone());
        }
    }
    let mut trace = Trace {
        meta,
        events: out,
        facts,
    };
    c.write_to(&mut trace);
    if spilled > 0 {
        trace
            .meta
            .counts
            .insert(crate::usdt::SPILLED.into(), spilled);
    }
    let hook_spilled: u64 = hook
        .streams
        .iter()
        .map(|s| s.records.kept().len() - s.records.kept().held() as u64)
        .sum();
    if hook_spilled > 0 {
        trace
            .meta
            .counts
            .insert(crate::hook_store::SPILLED.into(), hook_spilled);
    }
    trace
}

/// Indices into `usdt` (a USDT trace's events) of the events rule `hook-own-work` drops without
/// any rule reading them: those inside a span of the hook's own work (`hx`), those of other
/// files inside a bracket of the hook's frames, and those of the hook's files that open or
/// close no bracket. A fixture may leave them out (all but a few)
/// without changing the merge; see `fixture::Fixture::normalise`.
pub fn hook_work_interior(usdt: &[Event], hook: &HookCapture, plan: &Plan) -> Vec<usize> {
    let mut problems = Vec::new();
    let by_thread = crate::usdt::by_thread(usdt.iter().collect());
    let back = ReadBack::default();
    let (threads, _) = scopes::timelines(by_thread, hook, plan, &back, &mut problems);
    let base = usdt.as_ptr() as usize;
    let size = std::mem::size_of::<Event>().max(1);
    let mut out = Vec::new();
    for timeline in threads.into_values() {
        let mut work = hook_work::HookWork::default();
        for item in timeline.into_items() {
            match item {
                scopes::Item::Hook(_, r) => match *r {
                    crate::protocol::Rec::Internal { until, .. } => work.busy(until),
                    crate::protocol::Rec::ExtentOpen { .. }
                    | crate::protocol::Rec::ExtentClose { .. } => work.reset_bracket(),
                    _ => {}
                },
                scopes::Item::Usdt(e) => {
                    let interior = work.busy_at(e.ts)
                        || (work.inside() && !is_hook_file(e.file()))
                        || work.inert(e);
                    if work.claims(e) && interior {
                        out.push((e as *const Event as usize - base) / size);
                    }
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// Indices into `usdt` (a USDT trace's events) of the events rules `test-windows` and
/// `target-extents` leave out unread (outside every test window or target extent). A fixture
/// may leave them out (all but a few) without changing the merge.
pub fn out_of_scope(usdt: &[Event], hook: &HookCapture, plan: &Plan) -> Vec<usize> {
    scopes::out_of_scope(usdt, hook, plan)
}

/// A hook that says it runs under another policy than the plan's cannot be merged by it.
fn disagreement(s: &crate::protocol::Stream, plan: &Plan) -> Option<String> {
    let h = s.hello.as_ref()?;
    let leave = plan.leave.as_list();
    let ok = h.calls == plan.hook_calls.as_str()
        && h.scope == plan.scope.as_str()
        && h.leave.iter().map(String::as_str).eq(leave.iter().copied());
    (!ok).then(|| {
        format!(
            "hook of pid {} runs with calls={} scope={} leave={:?}, but the plan is calls={} scope={} leave={:?}",
            s.pid,
            h.calls,
            h.scope,
            h.leave,
            plan.hook_calls.as_str(),
            plan.scope.as_str(),
            leave
        )
    })
}

fn value(p: &Pair) -> Value {
    Value {
        repr: scrub_addresses(&p.0),
        ty: p.1.clone(),
    }
}

/// A hook record's locals (changed and gone) onto its event.
fn with_delta(ev: &mut Event, delta: &crate::protocol::Delta) {
    if let Some(d) = delta {
        ev.detail_mut().locals = d
            .locals
            .iter()
            .map(|(k, v)| (k.clone(), value(v)))
            .collect();
        ev.detail_mut().deleted = d.deleted.iter().cloned().collect();
    }
}

/// Reprs like `<function f at 0x7f3a…>` carry a memory address that changes from run to run;
/// a gold answer must not. The address is replaced by `0x?`.
pub fn scrub_addresses(repr: &str) -> String {
    if !repr.contains(" at 0x") {
        return repr.to_string();
    }
    let mut out = String::with_capacity(repr.len());
    let mut rest = repr;
    while let Some(i) = rest.find(" at 0x") {
        out.push_str(&rest[..i + 6]);
        rest = &rest[i + 6..];
        let n = rest.bytes().take_while(|b| b.is_ascii_hexdigit()).count();
        out.push_str(if n > 0 { "?" } else { "" });
        rest = &rest[n..];
    }
    out.push_str(rest);
    out
}

fn decorate(ev: &mut Event, o: &Open, interned: &mut flux_trace::Codes) {
    ev.activation = o.act;
    ev.frame = o.frame;
    ev.parent = o.parent;
    ev.depth = o.depth;
    if ev.qualname().is_empty() {
        ev.code = interned.with_qualname(&ev.code, &o.qualname);
    }
}

/// The return of an activation left by an exception that fired no return probe, placed just
/// before the return that revealed it (or the hook's record of it, if it sent one).
fn close_inferred(
    o: &Open,
    ts: u64,
    pid: u32,
    tid: u32,
    interned: &mut flux_trace::Codes,
) -> Event {
    if let Some(h) = &o.hook_end {
        return h.clone();
    }
    let mut ev = Event::new(ts.saturating_sub(1), pid, tid, Kind::Return, Source::Usdt);
    ev.code = interned.intern(flux_trace::CodeNames {
        file: o.file.clone(),
        func: o.func.clone(),
        ..Default::default()
    });
    ev.unwind = true;
    decorate(&mut ev, o, interned);
    ev
}

/// Dialect `swe-flux`: the hook sends the module of targeted code in its `C` records; every
/// event of that code (whichever witness reported it) is named with it. Code of one file and
/// qualified name defined under two modules in one process is left unnamed (the log writer
/// then refuses it rather than guess). Applied to each thread's events as they become final.
pub(crate) struct Modules<'h>(HashMap<(u32, &'h str, &'h str), Option<&'h Name>>);

impl<'h> Modules<'h> {
    fn new(hook: &'h HookCapture) -> Modules<'h> {
        let mut modules: HashMap<(u32, &str, &str), Option<&Name>> = HashMap::new();
        for s in &hook.streams {
            for c in s.codes.values() {
                let Some(m) = c.module.as_ref() else {
                    continue;
                };
                modules
                    .entry((s.pid, c.file.as_str(), c.qualname.as_str()))
                    .and_modify(|old| {
                        if *old != Some(m) {
                            *old = None
                        }
                    })
                    .or_insert(Some(m));
            }
        }
        Modules(modules)
    }

    pub(crate) fn name(&self, events: &mut [Event], interned: &mut flux_trace::Codes) {
        if self.0.is_empty() {
            return;
        }
        for e in events.iter_mut() {
            if let Some(Some(m)) = self.0.get(&(e.pid, e.file().as_str(), e.name())) {
                e.code = interned.with_module(&e.code, m);
            }
        }
    }
}

/// Every event inside a test's window gets the test's id (tests run one at a time per process).
pub(crate) fn assign_tests(events: &mut [Event]) {
    let mut tests = Tests::default();
    for e in events.iter_mut() {
        tests.assign(e);
    }
}

/// The test running in each process, as a trace's events are read in time order.
#[derive(Default)]
pub(crate) struct Tests(HashMap<u32, Name>);

impl Tests {
    /// Give `e` (the next event in time order) the test running in its process.
    pub(crate) fn assign(&mut self, e: &mut Event) {
        match e.ev {
            Kind::TestStart => {
                self.0.insert(e.pid, e.test.clone());
            }
            Kind::TestEnd => {
                self.0.remove(&e.pid);
            }
            _ => {
                if let Some(t) = self.0.get(&e.pid) {
                    e.test = t.clone();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{CallsMode, Capabilities};
    use crate::protocol::Stream;

    /// The merge of one hook stream (no USDT events) under the plan for `caps`, `mode`, `scope`.
    fn merge_hook_only(
        st: Stream,
        caps: Capabilities,
        mode: CallsMode,
        scope: flux_trace::Scope,
        version: &str,
    ) -> Trace {
        let cap = HookCapture {
            streams: vec![st],
            problems: Vec::new(),
        };
        let plan = crate::plan::plan(caps, mode, scope).unwrap();
        merge(None, &cap, &format!("/usr/bin/python ({version})"), &plan)
    }

    /// 17.3, rule `hook-end-closes`: with scope "targets" the extent closes right after a
    /// targeted generator's yield, before USDT's return could join the hook's; the resumption
    /// (a @contextmanager's `finally` after its `with` body) must still be the same frame.
    #[test]
    fn scope_targets_keeps_a_resumed_generators_frame() {
        let mut st = Stream::default();
        for l in [
            r#"{"hello":1,"pid":7,"python":"3.15.0","mode":"monitoring","calls":"generators","scope":"targets","leave":["lineless"],"clock":"monotonic_ns"}"#,
            r#"["wo",1,7]"#,
            r#"["C",1,"/t.py","tag","tag",6,12,5]"#,
            r#"["xo",10,7]"#,
            r#"["c",11,7,1,500,6]"#,
            r#"["r",20,7,1,500,10,"yield",["'A'","str"],null]"#,
            r#"["xc",21,7]"#,
            r#"["xo",30,7]"#,
            r#"["c",31,7,1,500,10]"#,
            r#"["r",40,7,1,500,12,"return",["None","NoneType"],null]"#,
            r#"["xc",41,7]"#,
            r#"["wc",50,7]"#,
            r#"["bye",11]"#,
        ] {
            st.feed(l);
        }
        let usdt = Capabilities {
            entry: true,
            ret: true,
            line: true,
        };
        let t = merge_hook_only(
            st,
            usdt,
            CallsMode::Usdt,
            flux_trace::Scope::Targets,
            "3.15.0",
        );
        assert!(t.meta.complete, "{:?}", t.meta.problems);
        let acts: Vec<(Kind, u64, u64, bool)> = t
            .events
            .iter()
            .filter(|e| e.func() == "tag")
            .map(|e| (e.ev, e.activation, e.frame, e.suspended))
            .collect();
        assert_eq!(acts.len(), 4, "{acts:?}");
        let (first, second) = (acts[0].1, acts[2].1);
        assert_ne!(first, second, "two activations");
        assert!(acts[1].3, "the first ends suspended");
        assert!(
            acts.iter().all(|a| a.2 == first),
            "one frame for both activations: {acts:?}"
        );
    }

    /// Rule `fresh-frames` (found by the witness program `genexpr_abandoned.py` on 3.13): a
    /// generator abandoned while suspended is freed without any event, and the next generator
    /// of the same code often gets its address, so its frame key. Its start (`"new"`) is a
    /// fresh call, not a resumption of the freed frame.
    #[test]
    fn a_fresh_generator_at_a_freed_ones_address_is_a_new_frame() {
        let frames = |second_start: &str| {
            let mut st = Stream::default();
            for l in [
                r#"{"hello":1,"pid":7,"python":"3.13.5","mode":"monitoring","calls":"all","scope":"run","leave":[],"clock":"monotonic_ns"}"#,
                r#"["C",1,"/t.py","g","g",6,8,5]"#,
                r#"["c",11,7,1,500,6,"new"]"#,
                r#"["r",20,7,1,500,7,"yield",["1","int"],null]"#,
                second_start,
                r#"["r",40,7,1,500,7,"yield",["1","int"],null]"#,
                r#"["bye",5]"#,
            ] {
                st.feed(l);
            }
            let none = Capabilities {
                entry: false,
                ret: false,
                line: false,
            };
            let t = merge_hook_only(st, none, CallsMode::Hook, flux_trace::Scope::Run, "3.13.5");
            assert!(t.meta.complete, "{:?}", t.meta.problems);
            let counted = t
                .meta
                .counts
                .get("merge.fresh_generator_starts_at_a_suspended_frames_key")
                .copied();
            let calls = t
                .events
                .iter()
                .filter(|e| e.ev == Kind::Call)
                .map(|e| (e.activation, e.frame))
                .collect::<Vec<_>>();
            (calls, counted)
        };
        let (fresh, counted) = frames(r#"["c",31,7,1,500,6,"new"]"#);
        assert_eq!(fresh.len(), 2);
        assert!(
            fresh.iter().all(|(a, f)| a == f),
            "two fresh frames: {fresh:?}"
        );
        assert_eq!(counted, Some(1));
        let (resumed, counted) = frames(r#"["c",31,7,1,500,7]"#);
        assert_eq!(
            resumed[1].1, resumed[0].1,
            "a resumption keeps the frame: {resumed:?}"
        );
        assert_eq!(counted, None);
    }

    /// Rule `unseen-starts` (the scoped witness `test_gen_resumed_in_scope.py` on 3.13 and
    /// 3.14): a generator started outside every extent and resumed inside one is resumed
    /// there, not called. Its first traced activation gets a frame id of its own, so nothing
    /// reads it as a fresh call of the targeted code it runs under. Only a hook that marks
    /// every fresh start says so in its hello; the records of older hooks mean what they did.
    #[test]
    fn a_generator_started_outside_the_extents_is_resumed_in_one_not_called() {
        let calls = |hello_tail: &str| {
            let mut st = Stream::default();
            for l in [
                format!(
                    r#"{{"hello":1,"pid":7,"python":"3.13.5","mode":"monitoring","calls":"all","scope":"targets","leave":[]{hello_tail},"clock":"monotonic_ns"}}"#
                ),
                r#"["wo",1,7]"#.into(),
                r#"["C",1,"/t.py","drain","drain",20,24,4]"#.into(),
                r#"["C",2,"/t.py","numbers","numbers",6,8,1]"#.into(),
                r#"["xo",10,7]"#.into(),
                r#"["c",11,7,1,400,20]"#.into(),
                r#"["c",12,7,2,500,8]"#.into(),
                r#"["r",13,7,2,500,8,"yield",["1","int"],null]"#.into(),
                r#"["c",14,7,2,500,8]"#.into(),
                r#"["r",15,7,2,500,7,"return",["None","NoneType"],null]"#.into(),
                r#"["r",16,7,1,400,24,"return",["1","int"],null]"#.into(),
                r#"["xc",17,7]"#.into(),
                r#"["wc",50,7]"#.into(),
                r#"["bye",12]"#.into(),
            ] {
                st.feed(&l);
            }
            let none = Capabilities {
                entry: false,
                ret: false,
                line: false,
            };
            let t = merge_hook_only(
                st,
                none,
                CallsMode::Hook,
                flux_trace::Scope::Targets,
                "3.13.5",
            );
            assert!(t.meta.complete, "{:?}", t.meta.problems);
            let counted = t
                .meta
                .counts
                .get("merge.resumptions_of_generator_frames_started_untraced")
                .copied();
            let ix = flux_trace::TraceIndex::new(&t);
            let drain = ix.invocations("drain", Default::default())[0].activations[0];
            let fresh_callees = ix.fresh_calls_under(drain).len();
            let numbers: Vec<(u64, u64)> = t
                .events
                .iter()
                .filter(|e| e.ev == Kind::Call && e.func() == "numbers")
                .map(|e| (e.activation, e.frame))
                .collect();
            (numbers, fresh_callees, counted)
        };
        let (numbers, fresh_callees, counted) = calls(r#","gen_starts":"marked""#);
        assert_eq!(numbers.len(), 2, "{numbers:?}");
        assert!(
            numbers.iter().all(|(a, f)| a != f && *f == numbers[0].1),
            "two resumptions of one frame started untraced: {numbers:?}"
        );
        assert_eq!(fresh_callees, 0, "resumed, not called");
        assert_eq!(counted, Some(1));
        // Before the hook marked fresh starts, an unmarked start may be a fresh one.
        let (numbers, fresh_callees, counted) = calls("");
        assert_eq!(numbers[0].0, numbers[0].1, "{numbers:?}");
        assert_eq!(fresh_callees, 1);
        assert_eq!(counted, None);
    }

    #[test]
    fn addresses_are_scrubbed_from_reprs() {
        assert_eq!(
            scrub_addresses("<function f at 0x7f3a12bc>"),
            "<function f at 0x?>"
        );
        assert_eq!(
            scrub_addresses("[<A at 0xdead>, <B at 0xbeef>]"),
            "[<A at 0x?>, <B at 0x?>]"
        );
        assert_eq!(scrub_addresses("'at 0x'"), "'at 0x'");
        assert_eq!(scrub_addresses("plain"), "plain");
    }
}
