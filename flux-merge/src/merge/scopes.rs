//! Which records take part at all: the per-thread timelines, cut to what was traced.
//!
//! Rules (names as in the merge's module doc):
//! - `before-hook`: with USDT calls, USDT events of a process before its hook's first record
//!   (interpreter start-up, before `sitecustomize`) are left out and counted; a process with USDT
//!   events and no hook stream is a problem (its calls cannot be placed). A stream without a
//!   timed record (a hello and a bye: a process that never entered a window) is a hook stream.
//! - `after-hook` (3.11, the hook reports every start): USDT events of a process after its
//!   hook's last record (interpreter shutdown after `bye`, finalizers) cannot be placed and are
//!   left out and counted.
//! - `test-windows` (scope `tests`/`targets`): per process, only what lies inside the windows its
//!   hook opened and closed (`wo`/`wc`) counts; the rest (start-up before the hook zeroed the
//!   semaphores, shutdown after it gave them back) is left out and counted.
//! - `target-extents` (scope `targets`): per thread, only USDT events and hook records about code
//!   inside the thread's extents (`xo`/`xc`) count; the rest (another thread's calls while this
//!   one is inside an extent) is left out and counted. Marks that do not pair are a problem.
//! - `timeline`: each thread's records from both sources ordered by time, the hook's first at
//!   equal times (its callbacks run before the probe of the same instruction: PY_RETURN before
//!   function__return).
use super::counters::Counters;
use crate::plan::Plan;
use crate::protocol::{HookCapture, Rec, Stream};
use crate::raw_store::ReadBack;
use crate::usdt::UsdtEvent;
use flux_trace::{Event, Scope};
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

/// One record from either source, placed in a thread's timeline. The merge owns the USDT
/// events (`E = UsdtEvent`: compact until placed, each freed once placed); a fixture's reader
/// borrows trace events.
pub(super) enum Item<'a, E = &'a Event> {
    Usdt(E),
    Hook(&'a Stream, Cow<'a, Rec>),
}

/// When and where a USDT event happened, `(ts, pid, tid)`: all the timelines read of one.
pub(crate) trait Stamped {
    fn at(&self) -> (u64, u32, u32);
}

impl Stamped for &Event {
    fn at(&self) -> (u64, u32, u32) {
        (self.ts, self.pid, self.tid)
    }
}

impl Stamped for UsdtEvent {
    fn at(&self) -> (u64, u32, u32) {
        (self.ts, self.pid, self.tid)
    }
}

/// Per (pid, tid), the thread's records.
pub(super) type Timelines<'a, E> = BTreeMap<(u32, u32), Timeline<'a, E>>;

/// One thread's records from each source, each in time order; [`Timeline::into_items`] gives
/// them merged in program order (rule `timeline`). Each source comes in order already (a thread
/// reserves its USDT records in program order in one ring, and a USDT source is read per thread
/// in time order; rule `stream-order` holds the hook's records to it), so merging the two is
/// what a stable sort of both by (time, hook first) gave, without the sort's copy of the run.
/// Both sources are read as the merge takes them, each record left out of scope counted then
/// ([`Tally`]).
pub(super) struct Timeline<'a, E> {
    usdt: Box<dyn Iterator<Item = E> + 'a>,
    hook: std::iter::Peekable<HookRecs<'a>>,
}

/// A thread's hook records in time order, read as the merge takes them.
type HookRecs<'a> = Box<dyn Iterator<Item = (&'a Stream, Cow<'a, Rec>)> + 'a>;

impl<'a, E: Stamped + 'a> Timeline<'a, E> {
    /// Whether the hook reported anything in scope in this thread.
    pub(super) fn has_hook(&mut self) -> bool {
        self.hook.peek().is_some()
    }

    /// How many USDT events are in scope (reading them all).
    pub(super) fn count_usdt(self) -> usize {
        self.usdt.count()
    }

    /// The records in program order, the hook's first at equal times; each USDT event is read
    /// as it is taken.
    pub(super) fn into_items(self) -> impl Iterator<Item = Item<'a, E>> {
        let mut usdt = self.usdt.peekable();
        let mut hook = self.hook;
        std::iter::from_fn(move || {
            let hook_first = match (hook.peek(), usdt.peek()) {
                (Some((_, r)), Some(e)) => r.ts() <= e.at().0,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if hook_first {
                hook.next().map(|(s, r)| Item::Hook(s, r))
            } else {
                usdt.next().map(Item::Usdt)
            }
        })
    }
}

/// Records the scope rules left out as the timelines were read, per rule (hook records only
/// outside windows or extents).
#[derive(Clone, Copy, Debug, Default)]
struct Left {
    outside_windows: u64,
    outside_extents: u64,
    before_hook: u64,
    after_hook: u64,
}

/// What the timelines' readers left out, shared by them: [`Tally::add_to`] once they are read.
#[derive(Clone, Default)]
pub(super) struct Tally(Rc<Cell<Left>>);

impl Tally {
    pub(super) fn add_to(&self, c: &mut Counters) {
        let l = self.0.get();
        c.outside_windows += l.outside_windows;
        c.outside_extents += l.outside_extents;
        c.before_hook_install += l.before_hook;
        c.after_hook += l.after_hook;
    }
}

/// Yields a vector's elements front to back and gives its memory back as it empties (the
/// merge holds the run's events once: what it has placed is freed as its output grows; the
/// raw records likewise as they become events, `usdt::usdt_trace`).
pub(crate) struct Freeing<T>(Vec<T>);

impl<T> Freeing<T> {
    pub(crate) fn new(mut v: Vec<T>) -> Freeing<T> {
        v.reverse();
        Freeing(v)
    }
}

impl<T> Iterator for Freeing<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        let x = self.0.pop();
        if self.0.capacity() > 4096 && self.0.len() < self.0.capacity() / 2 {
            self.0.shrink_to_fit();
        }
        x
    }
}

/// The spans in which each process and thread was traced.
struct Spans {
    /// Per process: the time of its hook's first record.
    hook_start: HashMap<u32, u64>,
    /// Per process: the time of its hook's last record.
    hook_end: HashMap<u32, u64>,
    /// Per process: its test windows (scope `tests`/`targets`).
    windows: HashMap<u32, Vec<(u64, u64)>>,
    /// Per thread: its target extents (scope `targets`).
    extents: HashMap<(u32, u32), Vec<(u64, u64)>>,
    /// Processes traced with scope `targets`.
    targets_scoped: HashSet<u32>,
}

impl Spans {
    fn new(hook: &HookCapture, plan: &Plan, problems: &mut Vec<String>) -> Spans {
        let mut sp = Spans {
            hook_start: HashMap::new(),
            hook_end: HashMap::new(),
            windows: HashMap::new(),
            extents: HashMap::new(),
            targets_scoped: HashSet::new(),
        };
        for s in &hook.streams {
            if let Some(t) = s.summary.first_ts {
                let e = sp.hook_start.entry(s.pid).or_insert(t);
                *e = (*e).min(t);
            }
            if let Some(t) = s.summary.last_ts {
                let e = sp.hook_end.entry(s.pid).or_insert(t);
                *e = (*e).max(t);
            }
            if plan.scope.windows() {
                sp.add_windows(s, problems);
            }
            if plan.scope == Scope::Targets {
                sp.add_extents(s, problems);
            }
        }
        sp
    }

    fn add_windows(&mut self, s: &Stream, problems: &mut Vec<String>) {
        let marks = s.summary.windows.iter().copied();
        // (A process that exec'd has two streams: their windows are one list.)
        if !add_spans(self.windows.entry(s.pid).or_default(), marks) {
            problems.push(format!(
                "process {}: test windows do not nest as open/close pairs",
                s.pid
            ));
        }
    }

    fn add_extents(&mut self, s: &Stream, problems: &mut Vec<String>) {
        self.targets_scoped.insert(s.pid);
        for (tid, m) in &s.summary.extents {
            let tid = *tid;
            if !add_spans(
                self.extents.entry((s.pid, tid)).or_default(),
                m.iter().copied(),
            ) {
                problems.push(format!(
                    "process {} thread {tid}: target extents do not nest as open/close pairs",
                    s.pid
                ));
            }
        }
    }

    fn in_window(&self, pid: u32, ts: u64, l: &mut Left) -> bool {
        let inside = self.windows.get(&pid).is_none_or(|w| within(w, ts));
        if !inside {
            l.outside_windows += 1;
        }
        inside
    }

    fn in_extent(&self, pid: u32, tid: u32, ts: u64, l: &mut Left) -> bool {
        if !self.targets_scoped.contains(&pid) {
            return true;
        }
        let inside = self.extents.get(&(pid, tid)).is_some_and(|x| within(x, ts));
        if !inside {
            l.outside_extents += 1;
        }
        inside
    }

    /// Whether a USDT event of a hooked process at `ts` takes part (rules `test-windows`,
    /// `target-extents`, `before-hook`, `after-hook`).
    fn takes_part(&self, plan: &Plan, (ts, pid, tid): (u64, u32, u32), l: &mut Left) -> bool {
        if !self.in_window(pid, ts, l) || !self.in_extent(pid, tid, ts, l) {
            return false;
        }
        if plan.merged() && self.hook_start.get(&pid).is_some_and(|t| ts < *t) {
            l.before_hook += 1;
            return false;
        }
        if plan.hook_entries() && self.hook_end.get(&pid).is_some_and(|t| ts > *t) {
            l.after_hook += 1;
            return false;
        }
        true
    }
}

/// Each thread's timeline of the records that were traced (see the module doc), from each
/// thread's USDT events in time order and each stream's records of the thread; what the scope
/// rules leave out is counted as it is read, into the [`Tally`].
pub(super) fn timelines<'a, E: Stamped + 'a>(
    usdt: BTreeMap<(u32, u32), Box<dyn Iterator<Item = E> + 'a>>,
    hook: &'a HookCapture,
    plan: &'a Plan,
    back: &ReadBack,
    problems: &mut Vec<String>,
) -> (Timelines<'a, E>, Tally) {
    let sp = Rc::new(Spans::new(hook, plan, problems));
    let tally = Tally::default();
    let mut threads: Timelines<'a, E> = BTreeMap::new();
    let mut unhooked: BTreeMap<u32, u64> = BTreeMap::new();
    // A process that sent a stream is hooked, whether or not it recorded anything: one that
    // never entered a window (a child the test started, scope `tests`/`targets`) sends a hello
    // and a bye alone, and its events are left out by the scope rules below.
    let hooked: HashSet<u32> = hook.streams.iter().map(|s| s.pid).collect();
    for ((pid, tid), events) in usdt {
        if plan.merged() && !hooked.contains(&pid) {
            // A process with no hook stream: none of its events can be placed.
            *unhooked.entry(pid).or_insert(0) += events.count() as u64;
            continue;
        }
        let (sp, tally) = (sp.clone(), tally.clone());
        let kept = events.filter(move |e| {
            let mut l = tally.0.get();
            let keep = sp.takes_part(plan, e.at(), &mut l);
            tally.0.set(l);
            keep
        });
        threads.insert(
            (pid, tid),
            Timeline {
                usdt: Box::new(kept),
                hook: empty_hook(),
            },
        );
    }
    for (pid, n) in &unhooked {
        problems.push(format!(
            "process {pid} produced {n} USDT events but no hook stream (started with -S/-I, or the hook failed): its calls cannot be placed"
        ));
    }
    // Each thread's hook records, from each stream that has some (a process that exec'd has
    // two), read and cut to scope as the merge takes them.
    let mut hooked: BTreeMap<(u32, u32), Vec<HookRecs<'a>>> = BTreeMap::new();
    for s in &hook.streams {
        for tid in s.records.tids() {
            let (sp, tally) = (sp.clone(), tally.clone());
            let recs = s.records.thread(tid, s.pid, back).filter(move |r| {
                let mut l = tally.0.get();
                let keep = !matches!(**r, Rec::WindowOpen { .. } | Rec::WindowClose { .. })
                    && sp.in_window(s.pid, r.ts(), &mut l)
                    // What the hook reports about code counts only inside the thread's extents.
                    && (!r.about_code() || sp.in_extent(s.pid, r.tid(), r.ts(), &mut l));
                tally.0.set(l);
                keep
            });
            let recs: HookRecs<'a> = Box::new(recs.map(move |r| (s, r)));
            hooked.entry((s.pid, tid)).or_default().push(recs);
        }
    }
    for (key, sources) in hooked {
        // Stably by time across streams, the earlier stream's first at equal times (as a
        // stable sort of them one after the other gave).
        let one = sources
            .into_iter()
            .reduce(|a, b| Box::new(by_time(a, b)))
            .expect("a thread with records");
        threads
            .entry(key)
            .or_insert_with(|| Timeline {
                usdt: Box::new(std::iter::empty()),
                hook: empty_hook(),
            })
            .hook = one.peekable();
    }
    (threads, tally)
}

fn empty_hook<'a>() -> std::iter::Peekable<HookRecs<'a>> {
    let none: HookRecs<'a> = Box::new(std::iter::empty());
    none.peekable()
}

/// Two time-ordered sources as one, `a`'s first at equal times.
fn by_time<'a>(
    a: HookRecs<'a>,
    b: HookRecs<'a>,
) -> impl Iterator<Item = (&'a Stream, Cow<'a, Rec>)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || {
        let a_first = match (a.peek(), b.peek()) {
            (Some((_, x)), Some((_, y))) => x.ts() <= y.ts(),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if a_first {
            a.next()
        } else {
            b.next()
        }
    })
}

/// Indices of the events of `usdt` outside the scope: every test window (scope `tests`,
/// `targets`) or the thread's target extents (scope `targets`).
pub(super) fn out_of_scope(usdt: &[Event], hook: &HookCapture, plan: &Plan) -> Vec<usize> {
    let sp = Spans::new(hook, plan, &mut Vec::new());
    let mut l = Left::default();
    (0..usdt.len())
        .filter(|i| {
            let e = &usdt[*i];
            !sp.in_window(e.pid, e.ts, &mut l) || !sp.in_extent(e.pid, e.tid, e.ts, &mut l)
        })
        .collect()
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
pub(super) fn within(spans: &[(u64, u64)], ts: u64) -> bool {
    let i = spans.partition_point(|(start, _)| *start <= ts);
    i > 0 && ts <= spans[i - 1].1
}

#[cfg(test)]
mod tests {
    use super::Freeing;

    #[test]
    fn freeing_yields_in_order_and_gives_memory_back() {
        let mut it = Freeing::new((0..100_000u64).collect::<Vec<_>>());
        let first: Vec<u64> = it.by_ref().take(3).collect();
        assert_eq!(first, [0, 1, 2]);
        let start = it.0.capacity();
        let rest: Vec<u64> = it.by_ref().take(60_000).collect();
        assert_eq!(rest[0], 3);
        assert!(
            it.0.capacity() < start / 2 + 1,
            "capacity {} of {start} after 60,003 of 100,000 taken",
            it.0.capacity()
        );
        assert_eq!(it.count(), 100_000 - 60_003);
    }
}
