//! Merge the two witnesses into one oracle trace.
//!
//! USDT gives calls and returns where the interpreter has the probes (and lines on 3.11); the
//! hook gives what it cannot: lines, values and exceptions in targeted code, test boundaries,
//! 3.11's missing entries, 3.15's generator starts (its entry probe also fires when a generator
//! object is created, indistinguishably from the first resumption), and on 3.12–3.14 everything.
//!
//! Both sources stamp CLOCK_MONOTONIC nanoseconds on the thread that did the work, so one
//! thread's records from both, ordered by time, are in program order. Per thread a stack of open
//! activations gives every event its activation, frame, parent and depth:
//! - a call opens an activation; a generator resumption (hook `c` whose `frame_key` belongs to a
//!   suspended frame) keeps the frame id of that frame;
//! - a return closes the top activation when it is the same code; when USDT reports the return
//!   of a frame lower in the stack, the frames above it were left by an exception without a
//!   return probe (3.15) and are closed as `unwind`, counted as `reconciled.unwind`;
//! - in `usdt` mode the hook's return in targeted code carries the value or exception and is
//!   joined to USDT's return of the same activation; if USDT never reports it, the hook's return
//!   closes the activation (`src = hook`);
//! - lines in frames the hook traces come from the hook (they carry values); USDT's lines of the
//!   same code are dropped.
//! - USDT names code only by (file, name, line), and 3.15's entry line is that of the frame's
//!   first instruction (0 when it has none: cell variables, closures, generator expressions).
//!   A USDT entry is a generator's (creation or resumption, dropped: the hook reports generator
//!   starts) only when its line lies in a generator code of that name (the hook's `C` record
//!   gives each code's last line and traits). Line 0 names no code object (code whose first
//!   instruction has no line: cells, closures): the hook defines such code objects, and a
//!   line-0 entry is the one of that (file, name) — or, when several share it, the one whose
//!   lines hold the line of the activation's USDT return (an activation that never returns
//!   through the probe cannot be told apart: a problem). The first hook record of an
//!   activation USDT opened identifies its code object: qualname and first line come from it.
//! - with scope "targets" (3.15) the hook reports neither starts of code without a first line
//!   nor generator expressions (their callbacks outside the extents were most of the cost):
//!   line-0 entries are named as above, a genexpr's line-0 entry is its creation (dropped) and
//!   any other its resumption, named by the genexpr whose lines hold it — among nested ones,
//!   the one the running code created, never one already running. A name shared with a
//!   generator without a first line, or no single genexpr, is a problem.
//! - code the hook itself runs (its callbacks, and what they call: a local's `__repr__`) is
//!   invisible to the hook but not to USDT: everything between a call into the hook's files
//!   and that frame's return (3.15), or inside a span the hook reports as its own work (`hx`
//!   records of the settrace back-end, 3.11, which has no USDT entries to bracket with), is
//!   dropped.
//! Anything that cannot be placed (a return with no open activation, a line outside any) is a
//! problem: the trace is marked incomplete with the reason.
use crate::hook::{
    CodeDef, HookCalls, HookCapture, How, Rec, Stream, CODE_GEN, CODE_NO_FIRST_LINE,
    CODE_TARGET,
};
use crate::interp::Interpreter;
use crate::tracer::ProbeSet;
use anyhow::{bail, Result};
use flux_trace::{Event, ExcInfo, Kind, Meta, Source, Trace, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Where calls come from (`flux trace --calls`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallsMode {
    /// USDT where the interpreter can supply returns, else the hook.
    Auto,
    /// Calls/returns from USDT; the hook adds only what the interpreter lacks.
    Usdt,
    /// Everything from the hook: the in-process reference witness.
    Hook,
}

/// What to attach and what to ask of the hook for one interpreter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `Usdt` or `Hook` (never `Auto`).
    pub mode: CallsMode,
    pub probes: ProbeSet,
    pub hook_calls: HookCalls,
}

pub fn plan(interp: &Interpreter, mode: CallsMode) -> Result<Plan> {
    let usdt_ok = interp.ret.usable();
    let mode = match mode {
        CallsMode::Auto if usdt_ok => CallsMode::Usdt,
        CallsMode::Auto => CallsMode::Hook,
        CallsMode::Usdt if !usdt_ok => bail!(
            "{} (CPython {}) has no usable USDT return probe: use --calls hook (or auto)",
            interp.exe.display(),
            interp.version_string()
        ),
        m => m,
    };
    Ok(match mode {
        CallsMode::Hook => Plan {
            mode,
            probes: ProbeSet::default(),
            hook_calls: HookCalls::All,
        },
        _ => Plan {
            mode,
            // No USDT `line` probe with the hook: lines come from the hook in targeted code
            // (with values), and 3.11's line probe fires on every line of every frame, the
            // hook's own included (one small sympy test: 16 M events), for no answer's benefit.
            // `flux trace --no-hook` still attaches it.
            probes: ProbeSet {
                line: false,
                ..crate::run::default_probes(interp)
            },
            hook_calls: if interp.entry.usable() {
                HookCalls::Generators
            } else {
                HookCalls::Entries
            },
        },
    })
}

/// One record from either source, placed in a thread's timeline.
enum Item<'a> {
    Usdt(&'a Event),
    Hook(&'a Stream, &'a Rec),
}

impl Item<'_> {
    fn ts(&self) -> u64 {
        match self {
            Item::Usdt(e) => e.ts,
            Item::Hook(_, r) => r.ts(),
        }
    }
    /// At equal timestamps the hook's record comes first: its callbacks run before the probe
    /// of the same instruction (e.g. PY_RETURN before function__return).
    fn order(&self) -> u8 {
        match self {
            Item::Hook(..) => 0,
            Item::Usdt(_) => 1,
        }
    }
}

struct Open {
    act: u64,
    frame: u64,
    file: String,
    func: String,
    qualname: String,
    depth: u32,
    parent: u64,
    frame_key: Option<u64>,
    /// The hook already reported this activation's end; USDT's return is expected next.
    hook_end: Option<Event>,
    /// Index in the output of the call event, when USDT reported it (the hook may later
    /// identify the code object exactly: see [`identify`]).
    call_idx: Option<usize>,
    /// The code object is known exactly (from a hook record of this activation).
    identified: bool,
    /// Opened by a line-0 USDT entry of a name several such code objects share: its USDT
    /// return's line says which.
    by_return: bool,
}

#[derive(Default)]
struct Counters {
    hook_internal_dropped: u64,
    pre_hook_returns: u64,
    reconciled_unwind: u64,
    usdt_lines_dropped: u64,
    usdt_creation_entries_dropped: u64,
    usdt_lineless_entries_named: u64,
    usdt_lineless_entries_dropped: u64,
    usdt_genexpr_entries_named: u64,
    usdt_target_entries_dropped: u64,
    joined_returns: u64,
    problems: Vec<String>,
}

fn value(p: &(String, String)) -> Value {
    Value {
        repr: scrub_addresses(&p.0),
        ty: p.1.clone(),
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

fn locals(l: &[(String, (String, String))]) -> Vec<(String, Value)> {
    l.iter().map(|(k, v)| (k.clone(), value(v))).collect()
}

/// Merge a USDT capture (already turned into events) and the hook's streams.
pub fn merge(usdt: Option<Trace>, hook: &HookCapture, interp: &Interpreter, plan: &Plan) -> Trace {
    let mut meta = match &usdt {
        Some(t) => t.meta.clone(),
        None => Meta {
            complete: true,
            interpreter: format!("{} ({})", interp.exe.display(), interp.version_string()),
            ..Meta::default()
        },
    };
    meta.calls = match plan.mode {
        CallsMode::Hook => "hook".into(),
        _ => format!("usdt+hook({})", plan.hook_calls.as_str()),
    };
    for p in &hook.problems {
        meta.problems.push(p.clone());
    }
    for s in &hook.streams {
        meta.problems.extend(s.problems());
    }
    let usdt_events: Vec<Event> = usdt.map(|t| t.events).unwrap_or_default();

    // Per pid: the code identities the hook traces lines for, and generator codes (3.15).
    let mut hook_line_codes: HashSet<(u32, String, String)> = HashSet::new();
    let mut gen_codes: HashMap<(u32, String, String), Vec<CodeDef>> = HashMap::new();
    // Non-generator codes whose first instruction has no line (3.15: USDT says line 0 for them),
    // by (pid, file, name): a line-0 entry is one of them. The hook reports their starts
    // (then USDT's line-0 entries are dropped), except with scope "targets" (then they are
    // named here).
    let mut lineless_codes: HashMap<(u32, String, String), Vec<CodeDef>> = HashMap::new();
    let mut lineless_reported: HashSet<u32> = HashSet::new();
    let mut qualnames: HashMap<(u32, String, String, u32), String> = HashMap::new();
    // Scope "targets": the hook reports every start of targeted code (it opens the extent),
    // so USDT's entries of those codes are dropped like generators'.
    let mut target_codes: HashMap<(u32, String, String), Vec<CodeDef>> = HashMap::new();
    for s in &hook.streams {
        for r in &s.records {
            if let Rec::Line { code, .. } = r {
                if let Some(c) = s.codes.get(code) {
                    hook_line_codes.insert((s.pid, c.file.clone(), c.name.clone()));
                }
            }
            if let (Rec::Call { code, .. }, "generators") = (r, s.calls.as_str()) {
                if let Some(c) = s.codes.get(code) {
                    add_code(&mut gen_codes, s.pid, c);
                }
            }
        }
        if s.calls == "generators" && s.scope != "targets" {
            lineless_reported.insert(s.pid);
        }
        for c in s.codes.values() {
            if s.calls == "generators"
                && c.traits
                    .is_some_and(|t| t & CODE_NO_FIRST_LINE != 0 && t & CODE_GEN == 0)
            {
                add_code(&mut lineless_codes, s.pid, c);
            }
            // The hook defines every generator code it finds nested in code it saw (one
            // created and never started included).
            if s.calls == "generators" && c.traits.is_some_and(|t| t & CODE_GEN != 0) {
                add_code(&mut gen_codes, s.pid, c);
            }
            if s.scope == "targets" && c.traits.is_some_and(|t| t & CODE_TARGET != 0) {
                add_code(&mut target_codes, s.pid, c);
            }
            qualnames.insert(
                (s.pid, c.file.clone(), c.name.clone(), c.firstlineno),
                c.qualname.clone(),
            );
        }
    }

    // When the hook supplies the entries (3.11), USDT events of a process before its hook was
    // installed (interpreter start-up, before `sitecustomize`) cannot be placed: their entries
    // were never seen by anyone. They are left out, and counted; a Python process with no hook
    // stream at all cannot be placed either, which is a problem.
    let mut hook_start: HashMap<u32, u64> = HashMap::new();
    for s in &hook.streams {
        if let Some(t) = s.records.iter().map(|r| r.ts()).min() {
            let e = hook_start.entry(s.pid).or_insert(t);
            *e = (*e).min(t);
        }
    }
    // Scope "tests": per process, the test windows its hook opened and closed. Outside them
    // the hook records nothing and the probes are off; what still arrives from there (the
    // interpreter's start-up before the hook zeroed the semaphores, its shutdown after the
    // hook gave them back) is left out and counted.
    let mut windows: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for s in hook
        .streams
        .iter()
        .filter(|s| s.scope == "tests" || s.scope == "targets")
    {
        let marks = s.records.iter().filter_map(|r| match r {
            Rec::WindowOpen { ts, .. } => Some((*ts, true)),
            Rec::WindowClose { ts, .. } => Some((*ts, false)),
            _ => None,
        });
        // (A process that exec'd has two streams: their windows are one list.)
        if !add_spans(windows.entry(s.pid).or_default(), marks) {
            meta.problems.push(format!(
                "process {}: test windows do not nest as open/close pairs",
                s.pid
            ));
        }
    }
    let mut outside_windows = 0u64;
    let mut in_window = |pid: u32, ts: u64| -> bool {
        let inside = windows.get(&pid).is_none_or(|w| within(w, ts));
        if !inside {
            outside_windows += 1;
        }
        inside
    };
    // Scope "targets": per thread, the extents of targeted code its hook opened and closed.
    // Outside them the probes are off while no other thread is inside one; what still arrives
    // (another thread's calls meanwhile) is left out and counted.
    let mut extents: HashMap<(u32, u32), Vec<(u64, u64)>> = HashMap::new();
    let mut targets_scoped: HashSet<u32> = HashSet::new();
    for s in hook.streams.iter().filter(|s| s.scope == "targets") {
        targets_scoped.insert(s.pid);
        // One pass over the stream: each thread's marks.
        let mut marks: HashMap<u32, Vec<(u64, bool)>> = HashMap::new();
        for r in &s.records {
            match r {
                Rec::ExtentOpen { ts, tid } => marks.entry(*tid).or_default().push((*ts, true)),
                Rec::ExtentClose { ts, tid } => marks.entry(*tid).or_default().push((*ts, false)),
                _ => {}
            }
        }
        for (tid, m) in marks {
            if !add_spans(extents.entry((s.pid, tid)).or_default(), m.into_iter()) {
                meta.problems.push(format!(
                    "process {} thread {tid}: target extents do not nest as open/close pairs",
                    s.pid
                ));
            }
        }
    }
    let mut outside_extents = 0u64;
    let mut in_extent = |pid: u32, tid: u32, ts: u64| -> bool {
        if !targets_scoped.contains(&pid) {
            return true;
        }
        let inside = extents.get(&(pid, tid)).is_some_and(|x| within(x, ts));
        if !inside {
            outside_extents += 1;
        }
        inside
    };
    let needs_hook_entries = plan.mode != CallsMode::Hook && plan.hook_calls == HookCalls::Entries;
    // The hook reports generator starts; USDT's entries of generator code are dropped.
    let hook_gen_starts = plan.mode != CallsMode::Hook && plan.hook_calls == HookCalls::Generators;
    let merged = plan.mode != CallsMode::Hook;
    let mut pre_hook = 0u64;
    let mut unhooked: BTreeMap<u32, u64> = BTreeMap::new();
    // Timelines per (pid, tid).
    let mut threads: BTreeMap<(u32, u32), Vec<Item>> = BTreeMap::new();
    for e in &usdt_events {
        if !in_window(e.pid, e.ts) || !in_extent(e.pid, e.tid, e.ts) {
            continue;
        }
        if merged {
            match hook_start.get(&e.pid) {
                Some(t) if e.ts < *t => {
                    pre_hook += 1;
                    continue;
                }
                None => {
                    *unhooked.entry(e.pid).or_insert(0) += 1;
                    continue;
                }
                _ => {}
            }
        }
        threads
            .entry((e.pid, e.tid))
            .or_default()
            .push(Item::Usdt(e));
    }
    for (pid, n) in &unhooked {
        meta.problems.push(format!(
            "process {pid} produced {n} USDT events but no hook stream (started with -S/-I, or the hook failed): its calls cannot be placed"
        ));
    }
    for s in &hook.streams {
        for r in &s.records {
            if matches!(r, Rec::WindowOpen { .. } | Rec::WindowClose { .. })
                || !in_window(s.pid, r.ts())
            {
                continue;
            }
            // What the hook reports about code (not test boundaries or its own work) counts
            // only inside the thread's extents.
            let about_code = matches!(
                r,
                Rec::Call { .. }
                    | Rec::Ret { .. }
                    | Rec::Line { .. }
                    | Rec::Exc { .. }
                    | Rec::Handled { .. }
            );
            if about_code && !in_extent(s.pid, r.tid(), r.ts()) {
                continue;
            }
            threads
                .entry((s.pid, r.tid()))
                .or_default()
                .push(Item::Hook(s, r));
        }
    }

    let mut c = Counters::default();
    let mut out: Vec<Event> = Vec::with_capacity(usdt_events.len());
    let mut next_act = 1u64;
    for ((pid, tid), mut items) in threads {
        items.sort_by_key(|i| (i.ts(), i.order()));
        let mut stack: Vec<Open> = Vec::new();
        // frame_key -> frame id of a suspended generator/coroutine frame.
        let mut suspended: HashMap<u64, (u64, String, String)> = HashMap::new();
        // USDT sees the hook's own frames (and what they call); the hook never reports them.
        // With USDT entries (3.15) they are bracketed: everything from a call into the hook's
        // files to its return is dropped. Without (3.11), a return that is not the top
        // activation's is such a frame's (3.11 fires a return for every frame exit, exception
        // exits included, so nothing else can produce one).
        // (file, func, nesting) of the outermost hook frame USDT is inside; counting only that
        // code's own calls and returns (a generator created in there fires an entry and no
        // return, so a plain depth count would never come back to zero).
        let mut hook_frame: Option<(String, String, u32)> = None;
        // The end of the latest span the hook reported as its own work (`hx`, 3.11).
        let mut hook_busy_until = 0u64;
        for item in &items {
            // A pending hook end not followed by USDT's return of that activation: the probe
            // did not fire (3.15 exception exits); the hook's record closes it. USDT records of
            // the hook's own work in between do not count.
            if let Some(top) = stack.last() {
                if top.hook_end.is_some() {
                    let keep_waiting = match item {
                        Item::Usdt(e) => {
                            hook_frame.is_some()
                                || e.ts <= hook_busy_until
                                || is_hook_file(&e.file)
                                || (e.file == top.file
                                    && e.func == top.func
                                    && e.ev == Kind::Return)
                                || (e.ev != Kind::Call
                                    && (e.file != top.file || e.func != top.func))
                        }
                        Item::Hook(_, Rec::Internal { .. }) => true,
                        Item::Hook(..) => false,
                    };
                    if !keep_waiting {
                        let top = stack.pop().expect("non-empty");
                        out.push(top.hook_end.expect("checked"));
                    }
                }
            }
            match item {
                Item::Usdt(e) => {
                    let e: &Event = e;
                    if e.ts <= hook_busy_until {
                        c.hook_internal_dropped += 1;
                        continue;
                    }
                    if hook_frame.is_some() || is_hook_file(&e.file) {
                        let same = |h: &(String, String, u32)| h.0 == e.file && h.1 == e.func;
                        match (&mut hook_frame, e.ev) {
                            // (Without USDT entries, 3.11, the hook's own returns are dropped
                            // here one by one, and what its trace functions run is bracketed
                            // by its `hx` records.)
                            (None, Kind::Call) => {
                                hook_frame = Some((e.file.clone(), e.func.clone(), 1))
                            }
                            (Some(h), Kind::Call) if same(h) => h.2 += 1,
                            (Some(h), Kind::Return) if same(h) => {
                                h.2 -= 1;
                                if h.2 == 0 {
                                    hook_frame = None;
                                }
                            }
                            _ => {}
                        }
                        c.hook_internal_dropped += 1;
                        continue;
                    }
                    match e.ev {
                        Kind::Call => {
                            let key = (pid, e.file.clone(), e.func.clone());
                            let reported = lineless_reported.contains(&pid);
                            if e.line == 0
                                && !reported
                                && lineless_codes.contains_key(&key)
                                && gen_codes.get(&key).is_some_and(|gs| {
                                    gs.iter().any(|g| {
                                        g.traits.is_some_and(|t| {
                                            t & CODE_NO_FIRST_LINE != 0 && t & CODE_GEN != 0
                                        })
                                    })
                                })
                            {
                                c.problems.push(format!(
                                "a line-0 USDT entry of {} ({}) in thread {pid}/{tid} is the creation of a generator or the start of another code of that name, neither with a first line: scope \"targets\" cannot tell which",
                                e.func, e.file
                            ));
                                continue;
                            }
                            // USDT names code by (file, name, line) only: a generator's entry is one
                            // whose line falls in that generator's code (line 0: its first instruction has none),
                            // not merely one with the same name (`__iter__` as a generator in one
                            // class and a plain method in another).
                            // A generator expression's code is a generator whatever its line; the
                            // hook may never have seen it (created, never iterated: only USDT's
                            // creation entry exists).
                            // Scope "targets": generator expressions are left to USDT (the hook
                            // only defines them): line 0 is one's creation, any other line a
                            // resumption, named by the genexpr whose lines hold it (targeted
                            // genexprs, whose starts the hook reports, are dropped below).
                            let mut genexpr_name: Option<(String, u32)> = None;
                            if hook_gen_starts && !reported && e.func == "<genexpr>" {
                                let targeted = target_codes.get(&key).is_some_and(|ts| {
                                    ts.iter().any(|t| t.may_enter_at(e.line).unwrap_or(true))
                                });
                                if e.line == 0 && !targeted {
                                    c.usdt_creation_entries_dropped += 1;
                                    continue;
                                }
                                if !targeted {
                                    let cands = gen_codes.get(&key).map(|gs| {
                                        gs.iter()
                                            .filter(|g| {
                                                g.traits.is_some_and(|t| t & CODE_TARGET == 0)
                                                    && g.holds_line(e.line)
                                            })
                                            .collect::<Vec<_>>()
                                    });
                                    let cands = cands.unwrap_or_default();
                                    // Nested genexprs share lines: the one resumed is the one created
                                    // by the running code (its qualname's parent), and never one
                                    // already running (a generator cannot be entered twice).
                                    // (The running code's qualname, or, when USDT opened it and no
                                    // hook record named it, its file and name.)
                                    let created_by_top = |g: &CodeDef| -> bool {
                                        let (Some(par), Some(o)) = (
                                            g.qualname.strip_suffix(".<locals>.<genexpr>"),
                                            stack.last(),
                                        ) else {
                                            return false;
                                        };
                                        if o.qualname.is_empty() {
                                            o.file == g.file
                                                && par.rsplit('.').next() == Some(o.func.as_str())
                                        } else {
                                            par == o.qualname
                                        }
                                    };
                                    let by_parent = one_identity(
                                        cands.iter().copied().filter(|g| created_by_top(g)),
                                    );
                                    let not_running = || {
                                        one_identity(cands.iter().copied().filter(|g| {
                                            !stack.iter().any(|o| o.qualname == g.qualname)
                                        }))
                                    };
                                    match one_identity(cands.iter().copied())
                                        .or(by_parent)
                                        .or_else(not_running)
                                    {
                                        Some(g) => {
                                            genexpr_name = Some((g.qualname.clone(), g.firstlineno))
                                        }
                                        None => {
                                            c.problems.push(format!(
                                            "a USDT entry of <genexpr> at {}:{} in thread {pid}/{tid} names no single generator expression the hook defined",
                                            e.file, e.line
                                        ));
                                            continue;
                                        }
                                    }
                                }
                            }
                            let is_gen = genexpr_name.is_none()
                                && ((hook_gen_starts && e.func == "<genexpr>")
                                    || gen_codes.get(&key).is_some_and(|gs| {
                                        gs.iter().any(|g| g.may_enter_at(e.line).unwrap_or(true))
                                    }));
                            if is_gen {
                                c.usdt_creation_entries_dropped += 1;
                                continue;
                            }
                            let is_target = target_codes.get(&key).is_some_and(|ts| {
                                ts.iter().any(|t| t.may_enter_at(e.line).unwrap_or(true))
                            });
                            if is_target {
                                c.usdt_target_entries_dropped += 1;
                                continue;
                            }
                            let mut q = qualnames
                                .get(&(pid, e.file.clone(), e.func.clone(), e.line))
                                .cloned()
                                .unwrap_or_default();
                            let mut e = e.clone();
                            // Line 0: code without a first line; which one, if several share the
                            // name, is known at its return.
                            let mut by_return = false;
                            if let Some((qn, _)) = genexpr_name {
                                q = qn;
                                c.usdt_genexpr_entries_named += 1;
                            }
                            if e.line == 0 && reported && lineless_codes.contains_key(&key) {
                                c.usdt_lineless_entries_dropped += 1;
                                continue;
                            }
                            if e.line == 0 {
                                if let Some(v) = lineless_codes.get(&key) {
                                    match one_identity(v.iter()) {
                                        Some(only) => {
                                            q = only.qualname.clone();
                                            e.line = only.firstlineno;
                                            c.usdt_lineless_entries_named += 1;
                                        }
                                        None => by_return = true,
                                    }
                                }
                            }
                            // 3.15 reports line 0 for a module's entry; its code starts at line 1.
                            if e.line == 0 && e.func == "<module>" {
                                e.line = 1;
                            }
                            let ev = open(&mut stack, &mut next_act, e, q, None, None);
                            let top = stack.last_mut().expect("just opened");
                            top.call_idx = Some(out.len());
                            top.by_return = by_return;
                            out.push(ev);
                        }
                        Kind::Return => {
                            let found = if needs_hook_entries {
                                stack
                                    .last()
                                    .filter(|o| o.file == e.file && o.func == e.func)
                                    .map(|_| stack.len() - 1)
                            } else {
                                stack
                                    .iter()
                                    .rposition(|o| o.file == e.file && o.func == e.func)
                            };
                            let Some(pos) = found else {
                                if needs_hook_entries {
                                    c.hook_internal_dropped += 1;
                                    continue;
                                }
                                // With USDT entries: a frame that started before the hook was
                                // installed (its entry was left out above), or an interpreter shim
                                // frame that fires no entry (3.13+'s `__init__` cleanup frame).
                                if merged {
                                    c.pre_hook_returns += 1;
                                    continue;
                                }
                                c.problems.push(format!(
                                "return of {} ({}:{}) with no open activation in thread {pid}/{tid}",
                                e.func, e.file, e.line
                            ));
                                continue;
                            };
                            while stack.len() > pos + 1 {
                                let o = stack.pop().expect("len > pos+1");
                                c.reconciled_unwind += 1;
                                if o.by_return && !o.identified {
                                    c.problems.push(unnamed(&o, None, pid, tid));
                                }
                                out.push(close_inferred(&o, e.ts, pid, tid));
                            }
                            let mut o = stack.pop().expect("pos exists");
                            if o.by_return && !o.identified {
                                let cands: Vec<&CodeDef> = lineless_codes
                                    .get(&(pid, o.file.clone(), o.func.clone()))
                                    .map(|v| v.iter().filter(|d| d.holds_line(e.line)).collect())
                                    .unwrap_or_default();
                                if let Some(only) = one_identity(cands.iter().copied()) {
                                    identify(&mut o, only, &mut out);
                                    c.usdt_lineless_entries_named += 1;
                                } else {
                                    c.problems.push(unnamed(
                                        &o,
                                        Some((e.line, cands.len())),
                                        pid,
                                        tid,
                                    ));
                                }
                            }
                            let mut ev = e.clone();
                            decorate(&mut ev, &o);
                            if let Some(h) = o.hook_end {
                                c.joined_returns += 1;
                                ev.value = h.value;
                                ev.unwind = h.unwind;
                                ev.suspended = h.suspended;
                                ev.exc = h.exc;
                                ev.locals = h.locals;
                                ev.deleted = h.deleted;
                            }
                            if ev.suspended {
                                if let Some(k) = o.frame_key {
                                    suspended.insert(k, (o.frame, o.file.clone(), o.func.clone()));
                                }
                            }
                            out.push(ev);
                        }
                        Kind::Line => {
                            if hook_line_codes.contains(&(pid, e.file.clone(), e.func.clone())) {
                                c.usdt_lines_dropped += 1;
                                continue;
                            }
                            let mut ev = e.clone();
                            match stack.last() {
                                Some(o) if o.file == e.file && o.func == e.func => {
                                    decorate(&mut ev, o)
                                }
                                // Not the running activation's: a line of code the hook ran.
                                _ => {
                                    c.hook_internal_dropped += 1;
                                    continue;
                                }
                            }
                            out.push(ev);
                        }
                        _ => out.push(e.clone()),
                    }
                }
                Item::Hook(s, r) => {
                    let code = |id: &u32| s.codes.get(id);
                    match r {
                        Rec::Call {
                            ts,
                            code: cid,
                            frame,
                            line,
                            thrown,
                            locals: l,
                            deleted,
                            ..
                        } => {
                            let Some(cd) = code(cid) else {
                                c.problems
                                    .push(format!("hook call of undefined code {cid}"));
                                continue;
                            };
                            let mut ev = Event::new(*ts, pid, tid, Kind::Call, Source::Hook);
                            ev.file = cd.file.clone();
                            ev.func = cd.name.clone();
                            ev.line = *line;
                            if *thrown {
                                ev.outcome = "throw".into();
                            }
                            ev.locals = locals(l);
                            ev.deleted = deleted.clone();
                            let reuse = suspended
                                .remove(frame)
                                .filter(|(_, f, n)| *f == cd.file && *n == cd.name)
                                .map(|(id, _, _)| id);
                            let ev = open(
                                &mut stack,
                                &mut next_act,
                                ev,
                                cd.qualname.clone(),
                                Some(*frame),
                                reuse,
                            );
                            out.push(ev);
                        }
                        Rec::Ret {
                            ts,
                            code: cid,
                            frame,
                            line,
                            how,
                            payload,
                            locals: l,
                            deleted,
                            ..
                        } => {
                            let Some(cd) = code(cid) else {
                                c.problems
                                    .push(format!("hook return of undefined code {cid}"));
                                continue;
                            };
                            let mut ev = Event::new(*ts, pid, tid, Kind::Return, Source::Hook);
                            ev.file = cd.file.clone();
                            ev.func = cd.name.clone();
                            ev.line = *line;
                            ev.locals = locals(l);
                            ev.deleted = deleted.clone();
                            ev.suspended = *how == How::Yield;
                            ev.unwind = *how == How::Unwind;
                            match (how, payload) {
                                (How::Unwind, Some(p)) => {
                                    ev.exc = Some(ExcInfo {
                                        ty: p.0.clone(),
                                        msg: p.1.clone(),
                                    })
                                }
                                (_, Some(p)) => ev.value = Some(value(p)),
                                _ => {}
                            }
                            let Some(pos) = stack
                                .iter()
                                .rposition(|o| o.file == cd.file && o.func == cd.name)
                            else {
                                c.problems.push(format!(
                                    "hook return of {} ({}:{}) with no open activation in thread {pid}/{tid}",
                                    cd.qualname, cd.file, line
                                ));
                                continue;
                            };
                            while stack.len() > pos + 1 {
                                let o = stack.pop().expect("len > pos+1");
                                c.reconciled_unwind += 1;
                                if o.by_return && !o.identified {
                                    c.problems.push(unnamed(&o, None, pid, tid));
                                }
                                out.push(close_inferred(&o, *ts, pid, tid));
                            }
                            let usdt_returns = plan.mode != CallsMode::Hook;
                            let top = stack.last_mut().expect("pos exists");
                            identify(top, cd, &mut out);
                            decorate(&mut ev, top);
                            if usdt_returns {
                                // Wait for USDT's return of this activation to carry the data.
                                top.hook_end = Some(ev);
                            } else {
                                let o = stack.pop().expect("pos exists");
                                if ev.suspended {
                                    suspended
                                        .insert(*frame, (o.frame, o.file.clone(), o.func.clone()));
                                }
                                out.push(ev);
                            }
                        }
                        Rec::Line {
                            ts,
                            code: cid,
                            line,
                            locals: l,
                            deleted,
                            ..
                        } => {
                            let Some(cd) = code(cid) else { continue };
                            let mut ev = Event::new(*ts, pid, tid, Kind::Line, Source::Hook);
                            ev.file = cd.file.clone();
                            ev.func = cd.name.clone();
                            ev.line = *line;
                            ev.locals = locals(l);
                            ev.deleted = deleted.clone();
                            attach(&mut ev, &mut stack, cd, &mut out, &mut c, pid, tid);
                            out.push(ev);
                        }
                        Rec::Exc {
                            ts,
                            code: cid,
                            line,
                            ty,
                            msg,
                            kind,
                            locals: l,
                            deleted,
                            object,
                            ..
                        } => {
                            let Some(cd) = code(cid) else { continue };
                            let mut ev = Event::new(*ts, pid, tid, Kind::Exception, Source::Hook);
                            ev.file = cd.file.clone();
                            ev.func = cd.name.clone();
                            ev.line = *line;
                            ev.exc = Some(ExcInfo {
                                ty: ty.clone(),
                                msg: msg.clone(),
                            });
                            ev.outcome = kind.as_str().into();
                            ev.locals = locals(l);
                            ev.deleted = deleted.clone();
                            ev.value = object.as_ref().map(value);
                            attach(&mut ev, &mut stack, cd, &mut out, &mut c, pid, tid);
                            out.push(ev);
                        }
                        Rec::Handled {
                            ts,
                            code: cid,
                            line,
                            ty,
                            msg,
                            ..
                        } => {
                            let Some(cd) = code(cid) else { continue };
                            let mut ev = Event::new(*ts, pid, tid, Kind::Handled, Source::Hook);
                            ev.file = cd.file.clone();
                            ev.func = cd.name.clone();
                            ev.line = *line;
                            ev.exc = Some(ExcInfo {
                                ty: ty.clone(),
                                msg: msg.clone(),
                            });
                            attach(&mut ev, &mut stack, cd, &mut out, &mut c, pid, tid);
                            out.push(ev);
                        }
                        Rec::Internal { until, .. } => {
                            hook_busy_until = hook_busy_until.max(*until);
                        }
                        Rec::WindowOpen { .. } | Rec::WindowClose { .. } => {}
                        // Between extents nothing of the thread's is open (the pending hook
                        // end of the outermost targeted activation was closed above).
                        Rec::ExtentOpen { .. } | Rec::ExtentClose { .. } => {
                            // The probes went on (off) inside the hook's own frames: USDT saw
                            // their returns (entries) only, so no bracket crosses an edge.
                            hook_frame = None;
                            let edge = if matches!(r, Rec::ExtentOpen { .. }) {
                                "start"
                            } else {
                                "end"
                            };
                            while let Some(o) = stack.pop() {
                                c.problems.push(format!(
                                    "activation of {} ({}) still open at the {edge} of a target extent in thread {pid}/{tid}",
                                    o.func, o.file
                                ));
                                if let Some(ev) = o.hook_end {
                                    out.push(ev);
                                }
                            }
                        }
                        Rec::TestStart { ts, nodeid, .. } => {
                            let mut ev = Event::new(*ts, pid, tid, Kind::TestStart, Source::Hook);
                            ev.test = nodeid.clone();
                            out.push(ev);
                        }
                        Rec::TestEnd {
                            ts,
                            nodeid,
                            outcome,
                            ..
                        } => {
                            let mut ev = Event::new(*ts, pid, tid, Kind::TestEnd, Source::Hook);
                            ev.test = nodeid.clone();
                            ev.outcome = outcome.clone();
                            out.push(ev);
                        }
                    }
                }
            }
        }
        // The thread ended: an end the hook reported and USDT never did closes its activation.
        while let Some(top) = stack.pop() {
            match top.hook_end {
                Some(ev) => out.push(ev),
                None => {
                    // Frames still open at exit (the interpreter's own bottom frames when the
                    // process ended in os._exit, or a thread killed at exit).
                    c.problems.push(format!(
                        "activation of {} ({}) never returned in thread {pid}/{tid}",
                        top.func, top.file
                    ));
                }
            }
        }
    }
    name_modules(&mut out, hook);
    out.sort_by_key(|e| e.ts);
    assign_tests(&mut out);

    let mut trace = Trace { meta, events: out };
    for p in c.problems.iter().take(20) {
        trace.meta.problems.push(p.clone());
    }
    if c.problems.len() > 20 {
        trace.meta.problems.push(format!(
            "… and {} more placement problems",
            c.problems.len() - 20
        ));
    }
    trace.meta.complete = trace.meta.problems.is_empty();
    trace.meta.counts = trace.count_by_kind();
    for (k, v) in [
        ("merge.reconciled_unwind", c.reconciled_unwind),
        (
            "merge.usdt_lines_dropped_for_hook_lines",
            c.usdt_lines_dropped,
        ),
        (
            "merge.usdt_generator_entries_dropped",
            c.usdt_creation_entries_dropped,
        ),
        (
            "merge.usdt_line0_entries_named",
            c.usdt_lineless_entries_named,
        ),
        (
            "merge.usdt_genexpr_resumptions_named",
            c.usdt_genexpr_entries_named,
        ),
        (
            "merge.usdt_line0_entries_dropped_for_hook_starts",
            c.usdt_lineless_entries_dropped,
        ),
        ("merge.returns_joined", c.joined_returns),
        (
            "merge.usdt_returns_of_frames_started_before_hook",
            c.pre_hook_returns,
        ),
        (
            "merge.usdt_events_of_hook_internals_dropped",
            c.hook_internal_dropped,
        ),
        ("merge.usdt_events_before_hook_install", pre_hook),
        ("merge.events_outside_test_windows", outside_windows),
        ("merge.events_outside_target_extents", outside_extents),
        (
            "merge.usdt_target_entries_dropped_for_hook_starts",
            c.usdt_target_entries_dropped,
        ),
    ] {
        if v > 0 {
            trace.meta.counts.insert(k.into(), v);
        }
    }
    trace
}

fn open(
    stack: &mut Vec<Open>,
    next_act: &mut u64,
    mut ev: Event,
    qualname: String,
    frame_key: Option<u64>,
    frame: Option<u64>,
) -> Event {
    let act = *next_act;
    *next_act += 1;
    let parent = stack.last().map_or(0, |o| o.act);
    let o = Open {
        act,
        frame: frame.unwrap_or(act),
        file: ev.file.clone(),
        func: ev.func.clone(),
        qualname,
        depth: stack.len() as u32,
        parent,
        frame_key,
        hook_end: None,
        call_idx: None,
        identified: frame_key.is_some(),
        by_return: false,
    };
    decorate(&mut ev, &o);
    stack.push(o);
    ev
}

/// A hook record of an activation USDT opened names its code object exactly: take the
/// qualified name from it, and the first line where USDT said 0 (3.15 reports the line of the
/// frame's first instruction, which has none when the code has cell or free variables: class
/// bodies, closures, methods using `super()`). USDT's (file, name, line) alone cannot tell
/// same-named code objects apart at line 0.
fn identify(o: &mut Open, cd: &CodeDef, out: &mut [Event]) {
    if o.identified {
        return;
    }
    o.identified = true;
    o.qualname = cd.qualname.clone();
    if let Some(e) = o.call_idx.and_then(|i| out.get_mut(i)) {
        e.qualname = cd.qualname.clone();
        if e.line == 0 {
            e.line = cd.firstlineno;
        }
    }
}

fn decorate(ev: &mut Event, o: &Open) {
    ev.activation = o.act;
    ev.frame = o.frame;
    ev.parent = o.parent;
    ev.depth = o.depth;
    if ev.qualname.is_empty() {
        ev.qualname = o.qualname.clone();
    }
}

fn attach(
    ev: &mut Event,
    stack: &mut [Open],
    cd: &CodeDef,
    out: &mut [Event],
    c: &mut Counters,
    pid: u32,
    tid: u32,
) {
    match stack.last_mut() {
        Some(o) if o.file == ev.file && o.func == ev.func => {
            identify(o, cd, out);
            decorate(ev, o)
        }
        _ => c.problems.push(format!(
            "{} event of {} ({}:{}) outside its activation in thread {pid}/{tid}",
            ev.ev.as_str(),
            ev.func,
            ev.file,
            ev.line
        )),
    }
}

/// The return of an activation left by an exception that fired no return probe, placed just
/// before the return that revealed it.
/// Add a code definition to a per-(pid, file, name) map, once.
fn add_code(map: &mut HashMap<(u32, String, String), Vec<CodeDef>>, pid: u32, c: &CodeDef) {
    let v = map
        .entry((pid, c.file.clone(), c.name.clone()))
        .or_default();
    if !v.contains(c) {
        v.push(c.clone());
    }
}

/// Open/close marks (any order) as closed spans in time order, an unclosed one running to the
/// end; false when they do not pair up.
fn spans(marks: impl Iterator<Item = (u64, bool)>) -> (Vec<(u64, u64)>, bool) {
    let mut marks: Vec<(u64, bool)> = marks.collect();
    marks.sort_unstable();
    let (mut out, mut paired, mut open) = (Vec::new(), true, None);
    for (ts, is_open) in marks {
        match (is_open, open) {
            (true, None) => open = Some(ts),
            (false, Some(o)) => {
                out.push((o, ts));
                open = None;
            }
            _ => paired = false,
        }
    }
    if let Some(o) = open {
        out.push((o, u64::MAX));
    }
    (out, paired)
}

/// Add the spans of `marks` to `all` (kept in time order); false if the marks do not pair.
fn add_spans(all: &mut Vec<(u64, u64)>, marks: impl Iterator<Item = (u64, bool)>) -> bool {
    let (new, paired) = spans(marks);
    all.extend(new);
    all.sort_unstable();
    paired
}

/// Whether `ts` lies in one of these time-ordered spans.
fn within(spans: &[(u64, u64)], ts: u64) -> bool {
    let i = spans.partition_point(|(start, _)| *start <= ts);
    i > 0 && ts <= spans[i - 1].1
}

/// The code of these candidates if they all name the same function (qualname and first line:
/// what a trace records of a call; e.g. the `__create_fn__` each dataclass `exec`s), else None.
fn one_identity<'a>(mut cands: impl Iterator<Item = &'a CodeDef>) -> Option<&'a CodeDef> {
    let first = cands.next()?;
    cands
        .all(|d| d.qualname == first.qualname && d.firstlineno == first.firstlineno)
        .then_some(first)
}

/// The problem of an activation opened by a line-0 entry that nothing identified.
fn unnamed(o: &Open, ret: Option<(u32, usize)>, pid: u32, tid: u32) -> String {
    let how = match ret {
        Some((line, n)) => format!("its USDT return at line {line} lies in {n} of them"),
        None => "it ended without a USDT return".to_string(),
    };
    format!(
        "cannot tell which code object named {} in {} ran in thread {pid}/{tid}: its USDT entry says line 0, several such code objects share the name, and {how}",
        o.func, o.file
    )
}

fn close_inferred(o: &Open, ts: u64, pid: u32, tid: u32) -> Event {
    if let Some(h) = &o.hook_end {
        return h.clone();
    }
    let mut ev = Event::new(ts.saturating_sub(1), pid, tid, Kind::Return, Source::Usdt);
    ev.file = o.file.clone();
    ev.func = o.func.clone();
    ev.unwind = true;
    decorate(&mut ev, o);
    ev
}

/// Dialect `swe-flux`: the hook sends the module of targeted code in its `C` records; every
/// event of that code (whichever witness reported it) is named with it. Code of one file and
/// qualified name defined under two modules in one process is left unnamed (the log writer
/// then refuses it rather than guess).
fn name_modules(events: &mut [Event], hook: &HookCapture) {
    let mut modules: HashMap<(u32, &str, &str), Option<&str>> = HashMap::new();
    for s in &hook.streams {
        for c in s.codes.values() {
            let Some(m) = c.module.as_deref() else {
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
    if modules.is_empty() {
        return;
    }
    for e in events.iter_mut() {
        if let Some(Some(m)) = modules.get(&(e.pid, e.file.as_str(), e.name())) {
            e.module = m.to_string();
        }
    }
}

/// Every event inside a test's window gets the test's id (tests run one at a time per process).
fn assign_tests(events: &mut [Event]) {
    let mut current: HashMap<u32, String> = HashMap::new();
    for e in events.iter_mut() {
        match e.ev {
            Kind::TestStart => {
                current.insert(e.pid, e.test.clone());
            }
            Kind::TestEnd => {
                current.remove(&e.pid);
            }
            _ => {
                if let Some(t) = current.get(&e.pid) {
                    e.test = t.clone();
                }
            }
        }
    }
}

/// The hook's own files (the `flux_hook` package and its `sitecustomize`).
fn is_hook_file(file: &str) -> bool {
    file.contains("/flux_hook/") || file.ends_with("/hook/sitecustomize.py")
}

#[cfg(test)]
mod tests {
    use super::*;

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
