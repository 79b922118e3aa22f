//! One thread's timeline turned into events: the stack of activations.
//!
//! Rules (names as in the merge's module doc): `activation-stack`, `unwind-reconcile`,
//! `join-returns`, `hook-end-closes`, `hook-lines-win`, `generator-frames`,
//! `fresh-frames`, `unmatched-returns`, `unseen-thread`,
//! `extent-edges`, `never-returned`; the entry rules are in [`super::codes`], the hook's own work in
//! [`super::hook_work`].
use super::codes::{identify, one_identity, unnamed, CodeIndex, Dropped, Entry, Named};
use super::counters::Counters;
use super::hook_work::{is_entryless_shim, is_hook_file, HookWork};
use super::scopes::{Item, Timeline};
use super::{close_inferred, decorate, value, with_delta, Open};
use crate::plan::Plan;
use crate::protocol::{CodeDef, How, Rec, Stream, CODE_GEN, CODE_TARGET};
use crate::usdt::UsdtEvent;
use flux_trace::{Codes, Event, ExcInfo, Kind, Name, Source};
use std::collections::HashMap;

/// What every thread shares: the plan and the hook's code definitions.
pub(super) struct Shared<'a> {
    pub plan: &'a Plan,
    pub codes: &'a CodeIndex,
    /// Rule `keep`'s cut, when the plan asks for one.
    pub cut: Option<&'a super::keep::Cut>,
    /// The modules events are named with (dialect `swe-flux`).
    pub modules: &'a super::Modules<'a>,
}

/// Where a thread's merge goes, shared by the threads one after another.
pub(super) struct Outputs<'o> {
    pub next_act: &'o mut u64,
    pub out: &'o mut Vec<Event>,
    /// Every event, when the run keeps less and writes the whole trace.
    pub whole: Option<&'o mut super::whole::WholeStore>,
    /// The codes the output's events share (`Event::code`).
    pub interned: &'o mut Codes,
    pub c: &'o mut Counters,
}

pub(super) struct Thread<'a, 'o> {
    pid: u32,
    tid: u32,
    sh: &'a Shared<'a>,
    stack: Vec<Open>,
    /// frame_key -> (frame id, file, func) of a suspended generator/coroutine frame.
    suspended: HashMap<u64, (u64, Name, Name)>,
    work: HookWork,
    /// (file, func) of activations closed by `unwind-reconcile`, with how many: a later USDT
    /// return of one of them means the inference was wrong.
    inferred: HashMap<(Name, Name), u32>,
    next_act: &'o mut u64,
    out: &'o mut Vec<Event>,
    /// Every event, when the run keeps less and writes the whole trace.
    whole: Option<&'o mut super::whole::WholeStore>,
    /// Where in `out` the thread's events since its last extent edge begin (rule `keep`).
    chunk_from: usize,
    /// The codes the output's events share (`Event::code`).
    interned: &'o mut Codes,
    /// A hook code definition's code (by its address: the definitions outlive the merge).
    hook_codes: HashMap<usize, flux_trace::Code>,
    c: &'o mut Counters,
}

impl<'a, 'o> Thread<'a, 'o> {
    pub(super) fn new((pid, tid): (u32, u32), sh: &'a Shared<'a>, o: Outputs<'o>) -> Self {
        Thread {
            pid,
            tid,
            sh,
            chunk_from: o.out.len(),
            stack: Vec::new(),
            suspended: HashMap::new(),
            work: HookWork::default(),
            inferred: HashMap::new(),
            next_act: o.next_act,
            out: o.out,
            whole: o.whole,
            interned: o.interned,
            hook_codes: HashMap::new(),
            c: o.c,
        }
    }

    /// `timeline`: the thread's records, its USDT events compact until each is placed (most
    /// are dropped, never becoming a trace event's size).
    pub(super) fn run(mut self, mut timeline: Timeline<'_, UsdtEvent>) {
        if self.sh.plan.hook_entries() && !timeline.has_hook() {
            // `unseen-thread` (3.11): the hook reports every start in the threads it traces;
            // a thread with USDT events and no hook record ran untraced (started with
            // `_thread.start_new_thread`, or by C code): none of its calls can be placed.
            let n = timeline.count_usdt();
            if n == 0 {
                return; // every USDT event of it was out of scope
            }
            let (pid, tid) = (self.pid, self.tid);
            return self.problem(format!(
                "thread {pid}/{tid} made {n} USDT events but the hook never traced it (started with _thread.start_new_thread, or from C?): its calls are missing"
            ));
        }
        for item in timeline.into_items() {
            let item = match item {
                Item::Usdt(u) => Item::Usdt(u.into_event()),
                Item::Hook(s, r) => Item::Hook(s, r),
            };
            self.settle_hook_end(&item);
            match &item {
                Item::Usdt(e) => self.usdt(e),
                Item::Hook(s, r) => self.hook(s, r),
            }
        }
        self.finish();
    }

    fn problem(&mut self, p: String) {
        self.c.problems.push(p);
    }

    /// `join-returns`: the top activation's end was reported by the hook and USDT's return is
    /// expected next; anything else of the program's comes first means the probe did not fire
    /// (3.15 exception exits), and the hook's record closes it. USDT records of the hook's own
    /// work in between do not count.
    fn settle_hook_end(&mut self, item: &Item<'_, Event>) {
        let Some(top) = self.stack.last() else { return };
        if top.hook_end.is_none() {
            return;
        }
        let keep_waiting = match item {
            Item::Usdt(e) => {
                let same = *e.file() == top.file && *e.func() == top.func;
                self.work.inside()
                    || self.work.busy_at(e.ts)
                    || is_hook_file(e.file())
                    || (same && e.ev == Kind::Return)
                    || (e.ev != Kind::Call && !same)
            }
            Item::Hook(_, r) => matches!(**r, Rec::Internal { .. }),
        };
        if !keep_waiting {
            let top = self.stack.pop().expect("non-empty");
            let edge = matches!(
                item,
                Item::Hook(_, r) if matches!(**r, Rec::ExtentOpen { .. } | Rec::ExtentClose { .. })
            );
            if self.sh.plan.hook_entries() && !edge {
                // 3.11's return probe fires at every frame exit, after the trace function's
                // work: before the program goes on, USDT's return of an activation whose end
                // the hook reported comes. (A return swapped into the hook's `hx` span was
                // dropped as its work and the hook's record stood in, complete.) Only an
                // extent's edge (scope "targets": the probes go off) closes it without.
                let (pid, tid) = (self.pid, self.tid);
                self.problem(format!(
                    "the hook reported the end of {} ({}) in thread {pid}/{tid} and USDT's return of it did not come before the program went on",
                    top.func, top.file
                ));
            }
            self.close_by_hook_end(top);
        }
    }

    /// `hook-end-closes`: an activation whose end only the hook reported (USDT's return did not
    /// fire, or fired outside the extent: scope "targets" closes an extent right after a
    /// targeted generator's yield) is closed by the hook's record, and a suspension keeps its
    /// frame for the resumption exactly as a return joined with USDT's does. (17.3: with scope
    /// "targets" the `finally` of a @contextmanager after its `with` body got a frame of its
    /// own.)
    fn close_by_hook_end(&mut self, o: Open) {
        let Some(ev) = o.hook_end else { return };
        if ev.suspended {
            if let Some(k) = o.frame_key {
                self.suspended.insert(k, (o.frame, o.file, o.func));
            }
        }
        self.out.push(ev);
    }

    fn usdt(&mut self, e: &Event) {
        if !self.awaited_return(e) && self.work.claims(e) {
            self.c.hook_internal_dropped += 1;
            return;
        }
        match e.ev {
            Kind::Call => self.usdt_call(e),
            Kind::Return => self.usdt_return(e),
            Kind::Line => self.usdt_line(e),
            _ => self.out.push(e.clone()),
        }
    }

    /// `join-returns` (3.11): the hook reported the top activation's end and USDT's return of
    /// that code is awaited; inside a span of the hook's own work it would be claimed and the
    /// hook's record stand in unchecked, but the interpreter fires the return probe after the
    /// trace function's work, never inside it: it is the program's return.
    fn awaited_return(&self, e: &Event) -> bool {
        self.sh.plan.hook_entries()
            && e.ev == Kind::Return
            && !is_hook_file(e.file())
            && self
                .stack
                .last()
                .is_some_and(|o| o.hook_end.is_some() && o.file == *e.file() && o.func == *e.func())
    }

    fn usdt_call(&mut self, e: &Event) {
        match self.sh.codes.entry(self.sh.plan, e) {
            Entry::Drop(Dropped::Generator) => self.c.generator_entries_dropped += 1,
            Entry::Drop(Dropped::Lineless) => self.c.lineless_dropped += 1,
            Entry::Drop(Dropped::Target) => self.c.target_entries_dropped += 1,
            Entry::Problem(p) => self.problem(p),
            Entry::Open {
                qualname,
                line,
                by_return,
                named,
                maybe_target,
            } => {
                if let (Some(Named::Lineless), false) = (named, maybe_target) {
                    self.c.lineless_named += 1;
                }
                let mut e = e.clone();
                e.line = line;
                let ev = self.open(e, qualname, None, None);
                let top = self.stack.last_mut().expect("just opened");
                top.call_idx = Some(self.out.len());
                top.by_return = by_return;
                top.maybe_target = maybe_target;
                self.out.push(ev);
            }
        }
    }

    /// `activation-stack`: a call opens an activation (a generator resumption keeps its
    /// frame's id: `generator-frames`).
    fn open(
        &mut self,
        mut ev: Event,
        qualname: Name,
        frame_key: Option<u64>,
        frame: Option<u64>,
    ) -> Event {
        let act = *self.next_act;
        *self.next_act += 1;
        let o = Open {
            act,
            frame: frame.unwrap_or(act),
            file: ev.file().clone(),
            func: ev.func().clone(),
            qualname,
            depth: self.stack.len() as u32,
            parent: self.stack.last().map_or(0, |o| o.act),
            frame_key,
            hook_end: None,
            call_idx: None,
            identified: frame_key.is_some(),
            by_return: false,
            maybe_target: false,
        };
        decorate(&mut ev, &o, self.interned);
        self.stack.push(o);
        ev
    }

    /// `unwind-reconcile`: a return of a frame lower in the stack than the top means the
    /// frames above it were left by an exception without a return probe (3.15): they are
    /// closed as unwound just before it.
    fn unwind_above(&mut self, pos: usize, ts: u64) {
        while self.stack.len() > pos + 1 {
            let o = self.stack.pop().expect("len > pos+1");
            self.c.reconciled_unwind += 1;
            if o.hook_end.is_none() {
                *self
                    .inferred
                    .entry((o.file.clone(), o.func.clone()))
                    .or_default() += 1;
            }
            if o.by_return && !o.identified {
                self.problem(unnamed(&o, None, self.pid, self.tid));
            } else if o.maybe_target {
                self.problem(format!(
                    "a line-0 USDT entry of {} ({}) in thread {}/{} was neither the start the hook reported of targeted code of that name nor anything that returned",
                    o.func, o.file, self.pid, self.tid
                ));
            }
            let ev = close_inferred(&o, ts, self.pid, self.tid, self.interned);
            self.out.push(ev);
        }
    }

    fn usdt_return(&mut self, e: &Event) {
        let same = |o: &Open| o.file == *e.file() && o.func == *e.func();
        let found = if self.sh.plan.hook_entries() {
            self.stack
                .last()
                .filter(|o| same(o))
                .map(|_| self.stack.len() - 1)
        } else {
            self.stack.iter().rposition(same)
        };
        let Some(pos) = found else {
            return self.unmatched_return(e);
        };
        self.unwind_above(pos, e.ts);
        let mut o = self.stack.pop().expect("pos exists");
        if o.by_return && !o.identified {
            let cands = self.sh.codes.lineless_holding(self.pid, &o, e.line);
            if let Some(only) = one_identity(cands.iter().copied()) {
                identify(&mut o, only, self.out, self.interned);
                self.c.lineless_named += 1;
            } else {
                let p = unnamed(&o, Some((e.line, cands.len())), self.pid, self.tid);
                self.problem(p);
            }
        }
        let mut ev = e.clone();
        decorate(&mut ev, &o, self.interned);
        if let Some(mut h) = o.hook_end {
            self.c.joined_returns += 1;
            ev.unwind = h.unwind;
            ev.suspended = h.suspended;
            let (theirs, mut d) = (h.take_detail(), ev.take_detail());
            d.value = theirs.value;
            d.exc = theirs.exc;
            d.locals = theirs.locals;
            d.deleted = theirs.deleted;
            ev.set_detail(d);
        }
        if ev.suspended {
            if let Some(k) = o.frame_key {
                self.suspended
                    .insert(k, (o.frame, o.file.clone(), o.func.clone()));
            }
        }
        self.out.push(ev);
    }

    /// `unmatched-returns`: a USDT return no open activation matches.
    fn unmatched_return(&mut self, e: &Event) {
        let plan = self.sh.plan;
        if plan.hook_entries() {
            // Without USDT entries (3.11) the hook reports every start it sees, and the work of
            // its own frames is dropped by `hook-own-work` (its files, its `hx` spans). A return
            // with nothing open is a frame below the ones it traced in this thread
            // (threading's `_bootstrap`, started before the thread's trace function). With
            // something open, a return that is not the top activation's ran unseen by the hook
            // (the program's own `sys.settrace` in force: 17.2) or out of order: its calls, or
            // the place of the open ones, are unknown. (It was taken for the hook's unbracketed
            // work when of untargeted code: two returns swapped then left the outer activation
            // open, and everything after it too deep, in a complete trace.)
            let key = (self.pid, e.file().clone(), e.func().clone());
            if self.stack.is_empty() {
                self.c.pre_hook_returns += 1;
            } else {
                let top = self.stack.last().expect("non-empty");
                let what = if self.sh.codes.targeted.contains(&key) {
                    "targeted "
                } else {
                    ""
                };
                let p = format!(
                    "USDT return of {what}{} ({}:{}) in thread {}/{} while {} runs, with no start the hook reported: code the hook did not see ran (the program's own sys.settrace?), its calls are missing",
                    e.func(), e.file(), e.line, self.pid, self.tid, top.func
                );
                self.problem(p);
            }
        } else if plan.merged() {
            let key = (e.file().clone(), e.func().clone());
            if let Some(n) = self.inferred.get_mut(&key).filter(|n| **n > 0) {
                // The frame was closed as unwound (no return probe, it seemed), and here is its
                // return after all: the inference was wrong, and so are the parents since.
                *n -= 1;
                let (pid, tid) = (self.pid, self.tid);
                return self.problem(format!(
                    "USDT return of {} ({}:{}) in thread {pid}/{tid} after its activation was inferred unwound",
                    e.func(), e.file(), e.line
                ));
            }
            // With USDT entries, a return no activation matches is expected in two cases:
            // nothing is open (a frame below the traced ones, started before the hook was
            // installed: its entry was left out), or it is the interpreter's shim frame that
            // fires no entry (3.13+'s `__init__` cleanup frame, file `__init__`). Anything else
            // with activations open is a frame whose entry was lost or misplaced: its
            // activation is missing, the trace cannot be complete. (An entry an entry rule
            // drops — `generator-entries`, `target-entries`, `line0-naming` — licenses nothing:
            // the hook reports that start and its activation is the hook's, which the return
            // joins. It used to license a lone return of its code, and so a generator's yield
            // swapped after the next resumption's entry passed, the hook's record standing in.)
            if self.work.escaped_entry(e) {
                let (pid, tid) = (self.pid, self.tid);
                return self.problem(format!(
                    "USDT return of {} ({}:{}) in thread {pid}/{tid} whose entry came inside the hook's own work: its activation is missing",
                    e.func(), e.file(), e.line
                ));
            }
            if !self.stack.is_empty() && !is_entryless_shim(e) {
                let top = self.stack.last().expect("non-empty");
                let p = format!(
                    "USDT return of {} ({}:{}) in thread {}/{} while {} runs, with no entry to match: its activation is missing",
                    e.func(), e.file(), e.line, self.pid, self.tid, top.func
                );
                return self.problem(p);
            }
            self.c.pre_hook_returns += 1;
        } else {
            self.problem(format!(
                "return of {} ({}:{}) with no open activation in thread {}/{}",
                e.func(),
                e.file(),
                e.line,
                self.pid,
                self.tid
            ));
        }
    }

    /// `hook-lines-win`: lines in frames the hook traces come from the hook (they carry
    /// values); USDT's lines of that code are dropped, and so are lines of code that is not
    /// the running activation's (code the hook ran).
    fn usdt_line(&mut self, e: &Event) {
        if self
            .sh
            .codes
            .hook_line_codes
            .contains(&(self.pid, e.file().clone(), e.func().clone()))
        {
            self.c.usdt_lines_dropped += 1;
            return;
        }
        let mut ev = e.clone();
        match self.stack.last() {
            Some(o) if o.file == *e.file() && o.func == *e.func() => {
                decorate(&mut ev, o, self.interned)
            }
            _ => {
                self.c.hook_internal_dropped += 1;
                return;
            }
        }
        self.out.push(ev);
    }

    fn hook(&mut self, s: &Stream, r: &Rec) {
        match r {
            Rec::Call { .. } => self.hook_call(s, r),
            Rec::Ret { .. } => self.hook_ret(s, r),
            Rec::Line { .. } | Rec::Exc { .. } | Rec::Handled { .. } | Rec::Check { .. } => {
                self.hook_code_event(s, r)
            }
            Rec::Internal { until, .. } => self.work.busy(*until),
            Rec::WindowOpen { .. } | Rec::WindowClose { .. } => {}
            Rec::ExtentOpen { .. } | Rec::ExtentClose { .. } => self.extent_edge(r),
            Rec::TestStart { ts, nodeid, .. } => {
                let mut ev = Event::new(*ts, self.pid, self.tid, Kind::TestStart, Source::Hook);
                ev.test = nodeid.clone();
                self.out.push(ev);
            }
            Rec::TestEnd {
                ts,
                nodeid,
                outcome,
                ..
            } => {
                let mut ev = Event::new(*ts, self.pid, self.tid, Kind::TestEnd, Source::Hook);
                ev.test = nodeid.clone();
                ev.detail_mut().outcome = outcome.clone();
                self.out.push(ev);
            }
        }
    }

    /// The code a hook record names, or a problem (the stream never defined it).
    fn code_of<'s>(&mut self, s: &'s Stream, what: &str, id: u32) -> Option<&'s CodeDef> {
        let cd = s.codes.get(&id);
        if cd.is_none() {
            self.problem(format!(
                "hook {what} of undefined code {id} in thread {}/{}",
                self.pid, self.tid
            ));
        }
        cd
    }

    fn hook_event(&mut self, ts: u64, kind: Kind, cd: &CodeDef, line: u32) -> Event {
        let mut ev = Event::new(ts, self.pid, self.tid, kind, Source::Hook);
        let interned = &mut *self.interned;
        ev.code = self
            .hook_codes
            .entry(cd as *const CodeDef as usize)
            .or_insert_with(|| {
                interned.intern(flux_trace::CodeNames {
                    file: cd.file.clone(),
                    func: cd.name.clone(),
                    ..Default::default()
                })
            })
            .clone();
        ev.line = line;
        ev
    }

    fn hook_call(&mut self, s: &Stream, r: &Rec) {
        let Rec::Call {
            ts,
            code,
            frame,
            line,
            thrown,
            fresh,
            delta,
            ..
        } = r
        else {
            return;
        };
        let Some(cd) = self.code_of(s, "call", *code) else {
            return;
        };
        self.take_target_entry(cd);
        let mut ev = self.hook_event(*ts, Kind::Call, cd, *line);
        if *thrown {
            ev.detail_mut().outcome = "throw".into();
        }
        with_delta(&mut ev, delta);
        // `fresh-frames`: a fresh start never resumes a frame, even one its key last named (a
        // generator abandoned while suspended is freed without any event, and the next one
        // often gets its address).
        let left = self.suspended.remove(frame);
        if *fresh && left.is_some() {
            self.c.fresh_at_suspended_key += 1;
        }
        let mut reuse = left
            .filter(|(_, f, n)| !*fresh && *f == cd.file && *n == cd.name)
            .map(|(id, _, _)| id);
        // `unseen-starts`: generator code started neither fresh (the hook marks every fresh
        // start) nor as a frame known here resumes a frame started untraced (before the test
        // window, outside every extent, in another thread). It gets a frame id no activation
        // has, so it reads as a resumption, never as a call the code it runs under made.
        let marked = s.hello.as_ref().is_some_and(|h| h.gen_starts_marked);
        if reuse.is_none() && !*fresh && marked && cd.has(CODE_GEN) {
            self.c.unseen_starts += 1;
            let id = *self.next_act;
            *self.next_act += 1;
            reuse = Some(id);
        }
        let ev = self.open(ev, cd.qualname.clone(), Some(*frame), reuse);
        self.out.push(ev);
    }

    /// `target-entries`: the hook's start of targeted code `cd` takes the place of the line-0
    /// USDT entry just before it that may have been that start (its activation, the last
    /// event out, is withdrawn; its id is given back).
    fn take_target_entry(&mut self, cd: &CodeDef) {
        let last = self.out.len().checked_sub(1);
        let Some(top) = self.stack.last() else {
            return;
        };
        if !(top.maybe_target
            && cd.has(CODE_TARGET)
            && top.file == cd.file
            && top.func == cd.name
            && top.call_idx.is_some()
            && top.call_idx == last)
        {
            return;
        }
        let o = self.stack.pop().expect("top exists");
        self.out.pop();
        if o.act + 1 == *self.next_act {
            *self.next_act -= 1;
        }
        self.c.target_entries_dropped += 1;
    }

    fn hook_ret(&mut self, s: &Stream, r: &Rec) {
        let Rec::Ret {
            ts,
            code,
            frame,
            line,
            how,
            payload,
            delta,
            ..
        } = r
        else {
            return;
        };
        let Some(cd) = self.code_of(s, "return", *code) else {
            return;
        };
        let mut ev = self.hook_event(*ts, Kind::Return, cd, *line);
        with_delta(&mut ev, delta);
        ev.suspended = *how == How::Yield;
        ev.unwind = *how == How::Unwind;
        match (how, payload.as_deref()) {
            (How::Unwind, Some(p)) => {
                ev.detail_mut().exc = Some(Box::new(ExcInfo {
                    ty: p.0.clone(),
                    msg: p.1.clone(),
                }))
            }
            (_, Some(p)) => ev.detail_mut().value = Some(Box::new(value(p))),
            _ => {}
        }
        let Some(pos) = self
            .stack
            .iter()
            .rposition(|o| o.file == cd.file && o.func == cd.name)
        else {
            let (pid, tid) = (self.pid, self.tid);
            return self.problem(format!(
                "hook return of {} ({}:{line}) with no open activation in thread {pid}/{tid}",
                cd.qualname, cd.file
            ));
        };
        if self.sh.plan.hook_entries() && pos + 1 < self.stack.len() {
            // `unwind-reconcile` is 3.15's: 3.11's return probe fires on exception exits too,
            // so an activation still open above the one the hook saw end lost its return (or
            // it came out of order): where it ended is unknown.
            let above = &self.stack[self.stack.len() - 1];
            let (pid, tid) = (self.pid, self.tid);
            let p = format!(
                "hook return of {} ({}:{line}) in thread {pid}/{tid} while {} ({}) is still open above it: USDT's return of that is missing or out of order",
                cd.qualname, cd.file, above.func, above.file
            );
            self.problem(p);
        }
        self.unwind_above(pos, *ts);
        let top = self.stack.last_mut().expect("pos exists");
        identify(top, cd, self.out, self.interned);
        decorate(&mut ev, top, self.interned);
        if self.sh.plan.merged() {
            // Wait for USDT's return of this activation to carry the data.
            top.hook_end = Some(ev);
            return;
        }
        let o = self.stack.pop().expect("pos exists");
        if ev.suspended {
            self.suspended
                .insert(*frame, (o.frame, o.file.clone(), o.func.clone()));
        }
        self.out.push(ev);
    }

    /// Lines, exceptions and handlers of the running activation.
    fn hook_code_event(&mut self, s: &Stream, r: &Rec) {
        let (code, what) = match r {
            Rec::Line { code, .. } => (*code, "line"),
            Rec::Exc { code, .. } => (*code, "exception"),
            Rec::Handled { code, .. } => (*code, "handler"),
            Rec::Check { code, .. } => (*code, "check"),
            _ => return,
        };
        let Some(cd) = self.code_of(s, what, code) else {
            return;
        };
        let mut ev = match r {
            Rec::Line {
                ts, line, delta, ..
            } => {
                let mut ev = self.hook_event(*ts, Kind::Line, cd, *line);
                with_delta(&mut ev, delta);
                ev
            }
            Rec::Exc {
                ts,
                line,
                kind,
                text,
                delta,
                ..
            } => {
                let mut ev = self.hook_event(*ts, Kind::Exception, cd, *line);
                ev.detail_mut().exc = Some(Box::new(ExcInfo {
                    ty: text.ty.clone(),
                    msg: text.msg.clone(),
                }));
                ev.detail_mut().outcome = kind.as_str().into();
                ev.detail_mut().origin = text.origin.clone().map(Box::new);
                with_delta(&mut ev, delta);
                ev.detail_mut().value = text.object.as_ref().map(value).map(Box::new);
                ev
            }
            Rec::Handled { ts, line, exc, .. } => {
                let mut ev = self.hook_event(*ts, Kind::Handled, cd, *line);
                ev.detail_mut().exc = Some(Box::new(ExcInfo {
                    ty: exc.0.clone(),
                    msg: exc.1.clone(),
                }));
                ev
            }
            Rec::Check {
                ts, line, check, ..
            } => {
                let mut ev = self.hook_event(*ts, Kind::Check, cd, *line);
                ev.detail_mut().predicate = check.expr.as_str().into();
                match &check.result {
                    Ok(b) => {
                        ev.detail_mut().value = Some(Box::new(flux_trace::Value {
                            repr: if *b { "True" } else { "False" }.into(),
                            ty: "bool".into(),
                        }))
                    }
                    Err(ty) => {
                        ev.detail_mut().exc = Some(Box::new(ExcInfo {
                            ty: ty.clone(),
                            msg: String::new(),
                        }))
                    }
                }
                ev
            }
            _ => return,
        };
        match self.stack.last_mut() {
            Some(o) if o.file == *ev.file() && o.func == *ev.func() => {
                identify(o, cd, self.out, self.interned);
                decorate(&mut ev, o, self.interned);
            }
            _ => {
                let (pid, tid) = (self.pid, self.tid);
                return self.problem(format!(
                    "{} event of {} ({}:{}) outside its activation in thread {pid}/{tid}",
                    ev.ev.as_str(),
                    ev.func(),
                    ev.file(),
                    ev.line
                ));
            }
        }
        self.out.push(ev);
    }

    /// `extent-edges`: between extents nothing of the thread's is open (the pending hook end
    /// of the outermost targeted activation was closed before): anything still open is a
    /// problem, never silently closed.
    fn extent_edge(&mut self, r: &Rec) {
        self.work.reset_bracket();
        let edge = if matches!(r, Rec::ExtentOpen { .. }) {
            "start"
        } else {
            "end"
        };
        while let Some(o) = self.stack.pop() {
            let (pid, tid) = (self.pid, self.tid);
            self.problem(format!(
                "activation of {} ({}) still open at the {edge} of a target extent in thread {pid}/{tid}",
                o.func, o.file
            ));
            self.close_by_hook_end(o);
        }
        self.settle();
    }

    /// With nothing of the thread open, its events since the last edge are final (no rule
    /// patches them any more): they are named with their modules, handed to the whole trace
    /// when the run writes it, and cut to what the run keeps (rule `keep`).
    fn settle(&mut self) {
        let chunk = &mut self.out[self.chunk_from..];
        self.sh.modules.name(chunk, self.interned);
        if let Some(whole) = self.whole.as_deref_mut() {
            whole.push((self.pid, self.tid), chunk);
        }
        if let Some(cut) = self.sh.cut {
            cut.apply(self.out, self.chunk_from, self.c);
        }
        self.chunk_from = self.out.len();
    }

    /// `never-returned`: the thread ended; an end the hook reported and USDT never did closes
    /// its activation, anything else still open is a problem.
    fn finish(mut self) {
        if let Some((file, func)) = self.work.open_bracket() {
            // `hook-own-work`: a callback of the hook's returns before the program goes on;
            // one whose return never came took everything after its entry for the hook's
            // work (an entry and return swapped: the program's calls since vanished).
            let (pid, tid) = (self.pid, self.tid);
            self.problem(format!(
                "the hook's {func} ({file}) entered in thread {pid}/{tid} and never returned: what ran after it cannot be told from the hook's own work"
            ));
        }
        while let Some(top) = self.stack.pop() {
            match top.hook_end {
                Some(_) => self.close_by_hook_end(top),
                None => {
                    // Frames still open at exit (the interpreter's own bottom frames when the
                    // process ended in os._exit, or a thread killed at exit).
                    let (pid, tid) = (self.pid, self.tid);
                    self.problem(format!(
                        "activation of {} ({}) never returned in thread {pid}/{tid}",
                        top.func, top.file
                    ));
                }
            }
        }
        self.settle();
    }
}
