//! [`TraceIndex`]: the views of a trace every extractor needs, built once per trace.
//!
//! Why: one traced run answers hundreds of questions (`flux gen`), and the plain queries of
//! [`crate::query`] rebuild owners and frames over the whole trace on every call. The index
//! makes one pass for owners, one for frames and invocations, and keys invocations by their
//! function's name, so that selecting the invocations of a function is a hash lookup. Nothing
//! is kept per event that the event itself says (its owner is its own activation but for a few
//! lines and values): the index of a suite part is millions of events.
//!
//! It follows the conventions of [`crate::query`] exactly (an invocation is a frame object, its
//! events are those of its activations, USDT lines are dropped where the hook reports lines,
//! a name matches a qualname exactly or a bare `co_name` by its last dotted component), and
//! the tests below check it against them (`lookups_by_name_and_filters`,
//! `owners_are_kept_only_where_an_event_names_none`).
use crate::query::{file_within, test_matches, Filter, Invocation, TestRun};
use crate::{Event, FileFacts, Kind, Source, Trace};
use std::collections::HashMap;

/// The owner of every event ([`TraceIndex::owner`]). An event's owner is its own `activation`
/// but for events that carry none (a line or a value reported with activation 0 under an open
/// activation): only those are kept (`Sparse`, by index) unless they are so many that a vector
/// of every owner is smaller (`Dense`, a trace of lines). 8 bytes an event saved on a trace of
/// calls, most of what is indexed.
enum Owners {
    Sparse(Vec<(usize, u64)>),
    Dense(Vec<u64>),
}

impl Owners {
    fn of(trace: &Trace) -> Owners {
        let n = trace.events.len();
        let mut sparse: Vec<(usize, u64)> = Vec::new();
        let mut dense: Option<Vec<u64>> = None;
        crate::query::each_owner(trace, |i, owner| {
            if let Some(d) = &mut dense {
                d.push(owner);
                return;
            }
            if owner == trace.events[i].activation {
                return;
            }
            sparse.push((i, owner));
            // Past half the events as exceptions (16 bytes each) a plain vector is smaller.
            if sparse.len() > n / 2 {
                let mut d: Vec<u64> = Vec::with_capacity(n);
                d.extend(trace.events[..=i].iter().map(|e| e.activation));
                for &(j, o) in &sparse {
                    d[j] = o;
                }
                sparse = Vec::new();
                dense = Some(d);
            }
        });
        match dense {
            Some(d) => Owners::Dense(d),
            None => Owners::Sparse(sparse),
        }
    }

    fn get(&self, trace: &Trace, i: usize) -> u64 {
        match self {
            Owners::Dense(d) => d[i],
            Owners::Sparse(s) => match s.binary_search_by_key(&i, |&(j, _)| j) {
                Ok(k) => s[k].1,
                Err(_) => trace.events[i].activation,
            },
        }
    }
}

/// A map from activation or frame ids to a number (a frame id, an event or invocation index).
/// The merge numbers activations 1, 2, … as it opens them (and a frame is named by an
/// activation's id), so below `dense.len()` a vector holds them at 4 bytes an id where a hash
/// map took ~24; ids past it (a trace written by something else), and values past `u32` (a
/// trace of four billion events), go to the hash map.
struct IdMap {
    dense: Vec<u32>,
    sparse: HashMap<u64, u64>,
}

impl IdMap {
    const NONE: u32 = u32::MAX;

    /// A map whose dense part covers ids up to `bound`.
    fn new(bound: u64) -> IdMap {
        let len = usize::try_from(bound.saturating_add(1)).unwrap_or(0);
        IdMap {
            dense: vec![Self::NONE; len],
            sparse: HashMap::new(),
        }
    }

    fn get(&self, id: u64) -> Option<u64> {
        match usize::try_from(id).ok().and_then(|i| self.dense.get(i)) {
            Some(&v) if v != Self::NONE => Some(u64::from(v)),
            _ => self.sparse.get(&id).copied(),
        }
    }

    fn insert(&mut self, id: u64, v: u64) {
        let small = u32::try_from(v).ok().filter(|&v| v != Self::NONE);
        match usize::try_from(id).ok().and_then(|i| self.dense.get_mut(i)) {
            Some(slot) if small.is_some() => {
                *slot = small.unwrap_or(Self::NONE);
                self.sparse.remove(&id);
            }
            Some(slot) => {
                *slot = Self::NONE;
                self.sparse.insert(id, v);
            }
            None => {
                self.sparse.insert(id, v);
            }
        }
    }

    /// Insert unless `id` has a value already.
    fn insert_first(&mut self, id: u64, v: u64) {
        if self.get(id).is_none() {
            self.insert(id, v);
        }
    }
}

/// One test of the trace: its run and the span of event indices from its `test_start` to its
/// `test_end` (or the last event carrying its id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestSpan {
    pub run: TestRun,
    pub first: usize,
    pub last: usize,
}

/// The index of one trace. Borrowing the trace keeps it cheap: no event is copied.
///
/// Event indices are kept as `u32` ([`crate::MAX_EVENTS`] bounds a trace): an index of a suite
/// part holds millions of frames, most of them a call and its return.
pub struct TraceIndex<'t> {
    pub trace: &'t Trace,
    /// The activation each event belongs to (0 for test events).
    owner: Owners,
    /// Activation id → frame id.
    frame_of: IdMap,
    /// Activation id → index of its (first) `call` event.
    call_of: IdMap,
    /// Activation id → index of its `return` event.
    return_of: IdMap,
    /// The frame table: invocation `k` (numbered in order of first call) holds the events
    /// `members[starts[k]..starts[k + 1]]`, in trace order, its first call first. An
    /// [`Invocation`] is made from it when asked for (a frame's own struct took 64 bytes, the
    /// table takes 4 a frame and 4 an event).
    starts: Vec<u32>,
    members: Vec<u32>,
    /// Frame id → invocation number.
    by_frame: IdMap,
    /// Qualname → invocations whose first call carries that qualname.
    by_qualname: HashMap<&'t str, Vec<u32>>,
    /// `co_name` → invocations whose first call carries no qualname.
    by_bare_name: HashMap<&'t str, Vec<u32>>,
    /// The `call` events that start a new frame, sorted by their `parent` and in trace order
    /// within one (the event says its parent: 4 bytes a call).
    children: Vec<u32>,
    tests: Vec<TestSpan>,
}

/// Drop the USDT lines of every frame the hook reports lines of (its lines are the ones a
/// question reads), compacting the frame table in place.
fn drop_usdt_lines(t: &Trace, starts: &mut [u32], members: &mut Vec<u32>) {
    let ev = |i: u32| &t.events[i as usize];
    let mut w = 0usize;
    let mut from = 0usize;
    for k in 0..starts.len().saturating_sub(1) {
        let to = starts[k + 1] as usize;
        let hook_lines = members[from..to]
            .iter()
            .any(|&i| ev(i).ev == Kind::Line && ev(i).src == Source::Hook);
        for r in from..to {
            let i = members[r];
            if !(hook_lines && ev(i).ev == Kind::Line && ev(i).src == Source::Usdt) {
                members[w] = i;
                w += 1;
            }
        }
        from = to;
        starts[k + 1] = w as u32;
    }
    members.truncate(w);
    members.shrink_to_fit();
}

/// The fresh calls `fresh` (in trace order) sorted by their event's `parent`, stably: counted
/// into place when every parent is a merge's dense id (at most `bound`), else sorted.
fn by_parent(t: &Trace, mut fresh: Vec<u32>, bound: u64) -> Vec<u32> {
    let parent = |i: u32| t.events[i as usize].parent;
    if fresh.iter().any(|&i| parent(i) > bound) {
        fresh.sort_by_cached_key(|&i| parent(i));
        return fresh;
    }
    let mut at = vec![0u32; usize::try_from(bound).unwrap_or(0) + 2];
    for &i in &fresh {
        at[parent(i) as usize + 1] += 1;
    }
    for p in 1..at.len() {
        at[p] += at[p - 1];
    }
    let mut out = vec![0u32; fresh.len()];
    for &i in &fresh {
        let slot = &mut at[parent(i) as usize];
        out[*slot as usize] = i;
        *slot += 1;
    }
    out
}

/// An event index as the index keeps it (below [`crate::MAX_EVENTS`]).
fn small(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

impl<'t> TraceIndex<'t> {
    /// Index `trace` (four passes over the events).
    pub fn new(trace: &'t Trace) -> TraceIndex<'t> {
        let n = trace.events.len();
        let owner = Owners::of(trace);
        // Ids past twice the events are no merge's numbering: they go to the hash maps.
        let bound = trace
            .events
            .iter()
            .map(|e| e.activation.max(e.frame))
            .filter(|&id| id <= 2 * n as u64)
            .max()
            .unwrap_or(0);
        let mut frame_of = IdMap::new(bound);
        let mut call_of = IdMap::new(bound);
        let mut return_of = IdMap::new(bound);
        for (i, e) in trace.events.iter().enumerate() {
            if e.ev == Kind::Call && e.activation != 0 {
                frame_of.insert(
                    e.activation,
                    if e.frame == 0 { e.activation } else { e.frame },
                );
                call_of.insert_first(e.activation, i as u64);
            } else if e.ev == Kind::Return && e.activation != 0 {
                return_of.insert(e.activation, i as u64);
            }
        }
        let mut ix = TraceIndex {
            trace,
            owner,
            frame_of,
            call_of,
            return_of,
            starts: Vec::new(),
            members: Vec::new(),
            by_frame: IdMap::new(bound),
            by_qualname: HashMap::new(),
            by_bare_name: HashMap::new(),
            children: Vec::new(),
            tests: Vec::new(),
        };
        ix.build_frames(bound);
        ix.build_tests();
        ix
    }

    /// The frame (by invocation number) event `i` is counted in, if any: its owner's frame
    /// once a call has started it; `None` for a second `call` of an activation already
    /// counted (the same activation reported by both witnesses).
    fn counted_in(&self, i: usize, e: &Event) -> Option<(u64, u64)> {
        let owner = self.owner.get(self.trace, i);
        if owner == 0 {
            return None;
        }
        let frame = self.frame_of.get(owner).unwrap_or(owner);
        if e.ev == Kind::Call && self.call_of.get(owner) != Some(i as u64) {
            return None;
        }
        Some((owner, frame))
    }

    /// The frame table: frames numbered in order of first call and counted (one pass), then
    /// filled (a second), then USDT lines dropped from frames the hook reports lines of.
    fn build_frames(&mut self, bound: u64) {
        let t = self.trace;
        let mut counts: Vec<u32> = Vec::new();
        let mut fresh: Vec<u32> = Vec::new();
        // (Past `MAX_EVENTS`, which no trace reaches, events are in no frame.)
        for (i, e) in t.events.iter().enumerate().take(crate::MAX_EVENTS) {
            let Some((owner, frame)) = self.counted_in(i, e) else {
                continue;
            };
            if e.ev == Kind::Call && self.by_frame.get(frame).is_none() {
                let k = counts.len() as u32;
                self.by_frame.insert(frame, u64::from(k));
                let map = if e.qualname().is_empty() {
                    &mut self.by_bare_name
                } else {
                    &mut self.by_qualname
                };
                map.entry(e.name()).or_default().push(k);
                if frame == owner {
                    // (A frame started untraced is resumed here, not called: `starts_here`.)
                    fresh.push(small(i));
                }
                counts.push(0);
            }
            if let Some(k) = self.by_frame.get(frame) {
                counts[k as usize] += 1;
            }
        }
        // Counts become each frame's next free slot, then (once filled) its end.
        let mut starts: Vec<u32> = Vec::with_capacity(counts.len() + 1);
        let mut at = 0u32;
        starts.push(0);
        for c in &mut counts {
            let n = *c;
            *c = at;
            at += n;
            starts.push(at);
        }
        let mut members = vec![0u32; at as usize];
        for (i, e) in t.events.iter().enumerate().take(crate::MAX_EVENTS) {
            let Some((_, frame)) = self.counted_in(i, e) else {
                continue;
            };
            if let Some(k) = self.by_frame.get(frame) {
                let slot = &mut counts[k as usize];
                members[*slot as usize] = small(i);
                *slot += 1;
            }
        }
        drop(counts);
        drop_usdt_lines(t, &mut starts, &mut members);
        for v in self
            .by_qualname
            .values_mut()
            .chain(self.by_bare_name.values_mut())
        {
            v.shrink_to_fit();
        }
        self.starts = starts;
        self.members = members;
        self.children = by_parent(t, fresh, bound);
    }

    fn build_tests(&mut self) {
        let mut at: HashMap<&'t str, usize> = HashMap::new();
        // Runs of events share their test: the last one's span is looked up once per run.
        let mut last: Option<(&'t str, usize)> = None;
        for (i, e) in self.trace.events.iter().enumerate() {
            let test = e.test.as_str();
            if test.is_empty() {
                continue;
            }
            let k = match last {
                Some((name, k)) if name == test => k,
                _ => *at.entry(test).or_insert_with(|| {
                    self.tests.push(TestSpan {
                        run: TestRun {
                            id: test.to_string(),
                            outcome: String::new(),
                        },
                        first: i,
                        last: i,
                    });
                    self.tests.len() - 1
                }),
            };
            last = Some((test, k));
            let span = &mut self.tests[k];
            span.last = i;
            if e.ev == Kind::TestEnd {
                span.run.outcome = e.detail().outcome.to_string();
            }
        }
    }

    /// The event at index `i`.
    pub fn event(&self, i: usize) -> &'t Event {
        &self.trace.events[i]
    }

    /// The activation event `i` belongs to (0 for test events).
    pub fn owner(&self, i: usize) -> u64 {
        self.owner.get(self.trace, i)
    }

    /// The frame of an activation.
    pub fn frame(&self, activation: u64) -> Option<u64> {
        self.frame_of.get(activation)
    }

    /// The `call` event of an activation.
    pub fn call_event(&self, activation: u64) -> Option<&'t Event> {
        self.call_of
            .get(activation)
            .map(|i| &self.trace.events[i as usize])
    }

    /// The index span `[call, return]` of an activation (to the trace's end when it has no
    /// return, which a complete trace never shows).
    pub fn span(&self, activation: u64) -> Option<(usize, usize)> {
        let c = self.call_of.get(activation)? as usize;
        let r = self
            .return_of
            .get(activation)
            .map_or(self.trace.events.len().saturating_sub(1), |r| r as usize);
        Some((c, r))
    }

    /// How many invocations (frames) the trace has.
    pub fn invocation_count(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// The event indices of invocation `k`, in trace order (its first call first).
    fn members(&self, k: usize) -> &[u32] {
        match (self.starts.get(k), self.starts.get(k + 1)) {
            (Some(&a), Some(&b)) => &self.members[a as usize..b as usize],
            _ => &[],
        }
    }

    /// The index of invocation `k`'s first `call` event (the call that made it).
    pub fn first_call_index(&self, k: usize) -> Option<usize> {
        self.members(k).first().map(|&i| i as usize)
    }

    /// Every invocation's number and first `call` event, in order of first call: what a scan
    /// of the frames reads without making each invocation.
    pub fn first_calls(&self) -> impl Iterator<Item = (usize, &'t Event)> + '_ {
        (0..self.invocation_count())
            .filter_map(|k| Some((k, &self.trace.events[self.first_call_index(k)?])))
    }

    /// The first `call` event of every invocation that starts in the trace (see
    /// [`Invocation::starts_here`]), by index, in order of first call.
    pub fn fresh_starts(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.invocation_count())
            .filter_map(|k| self.first_call_index(k))
            .filter(|&i| {
                let e = &self.trace.events[i];
                e.frame == 0 || e.frame == e.activation
            })
    }

    /// Invocation `k` ([`TraceIndex::invocation_count`] of them, in order of first call).
    pub fn invocation(&self, k: usize) -> Option<Invocation> {
        let members = self.members(k);
        let first = &self.trace.events[*members.first()? as usize];
        let owner = |i: usize| self.owner.get(self.trace, i);
        Some(Invocation {
            frame: self
                .frame_of
                .get(first.activation)
                .unwrap_or(first.activation),
            activations: members
                .iter()
                .map(|&i| i as usize)
                .filter(|&i| self.trace.events[i].ev == Kind::Call)
                .map(owner)
                .collect(),
            events: members.iter().map(|&i| i as usize).collect(),
            test: first.test.clone(),
        })
    }

    /// Every invocation, in order of first call, each made as it is reached.
    pub fn all_invocations(&self) -> impl Iterator<Item = Invocation> + '_ {
        (0..self.invocation_count()).filter_map(|k| self.invocation(k))
    }

    /// The event indices of the invocation of a frame, in trace order.
    pub fn frame_events(&self, frame: u64) -> Option<&[u32]> {
        self.by_frame.get(frame).map(|k| self.members(k as usize))
    }

    /// The invocation of a frame.
    pub fn invocation_of_frame(&self, frame: u64) -> Option<Invocation> {
        self.invocation(self.by_frame.get(frame)? as usize)
    }

    /// Number (for [`TraceIndex::invocation`]) of the invocation holding event `i`.
    pub fn invocation_holding(&self, i: usize) -> Option<usize> {
        let owner = self.owner(i);
        if owner == 0 {
            return None;
        }
        let frame = self.frame_of.get(owner).unwrap_or(owner);
        self.by_frame.get(frame).map(|k| k as usize)
    }

    /// Numbers (for [`TraceIndex::invocation`]) of the invocations of the function `name`
    /// (see [`crate::query::name_matches`]), in order of first call.
    pub fn invocation_ids(&self, name: &str) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        if let Some(v) = self.by_qualname.get(name) {
            out.extend(v.iter().map(|&k| k as usize));
        }
        let last = name.rsplit('.').next().unwrap_or(name);
        if let Some(v) = self.by_bare_name.get(last) {
            out.extend(v.iter().map(|&k| k as usize));
            out.sort_unstable();
        }
        out
    }

    /// Numbers of the invocations of `name` that pass `filter`, in order of first call.
    pub fn invocation_ids_passing(&self, name: &str, filter: Filter<'_>) -> Vec<usize> {
        self.invocation_ids(name)
            .into_iter()
            .filter(|&k| {
                self.first_call_index(k)
                    .is_some_and(|i| Self::call_passes(self.event(i), filter))
            })
            .collect()
    }

    /// The invocations of `name` that pass `filter`, in order of first call (equal to
    /// [`crate::query::invocations`]).
    pub fn invocations(&self, name: &str, filter: Filter<'_>) -> Vec<Invocation> {
        self.invocation_ids_passing(name, filter)
            .into_iter()
            .filter_map(|k| self.invocation(k))
            .collect()
    }

    /// Every invocation whose first call satisfies `pred` and passes `filter`, in order of
    /// first call; only those are made.
    pub fn invocations_where(
        &self,
        filter: Filter<'_>,
        pred: impl Fn(&Event) -> bool,
    ) -> Vec<Invocation> {
        self.first_calls()
            .filter(|(_, first)| pred(first) && Self::call_passes(first, filter))
            .filter_map(|(k, _)| self.invocation(k))
            .collect()
    }

    /// Does the invocation's first call pass the `test` and `file` filters?
    pub fn passes(&self, inv: &Invocation, filter: Filter<'_>) -> bool {
        inv.first_call(self.trace)
            .is_some_and(|first| Self::call_passes(first, filter))
    }

    /// Does a first call pass the `test` and `file` filters?
    pub fn call_passes(first: &Event, filter: Filter<'_>) -> bool {
        filter.test.is_none_or(|t| test_matches(&first.test, t))
            && filter.file.is_none_or(|f| file_within(first.file(), f))
    }

    /// The distinct (qualname-or-name, file) pairs of invocations named `name`: more than one
    /// file means the name is ambiguous without a `file` filter.
    pub fn files_of(&self, name: &str) -> Vec<&'t str> {
        let mut files: Vec<&str> = self
            .invocation_ids(name)
            .into_iter()
            .filter_map(|k| self.first_call_index(k))
            .map(|i| self.trace.events[i].file().as_str())
            .collect();
        files.sort_unstable();
        files.dedup();
        files
    }

    /// Indices of the `call` events that start a new frame directly under `activation`, in
    /// trace order.
    pub fn fresh_calls_under(&self, activation: u64) -> impl ExactSizeIterator<Item = usize> + '_ {
        let parent = |i: &u32| self.trace.events[*i as usize].parent;
        let from = self.children.partition_point(|i| parent(i) < activation);
        let to = self.children.partition_point(|i| parent(i) <= activation);
        self.children[from..to].iter().map(|&i| i as usize)
    }

    /// The bytes the index holds on the heap (its vectors' and maps' room; what the trace
    /// holds is not counted): what `FLUX_MEMLOG` reports, and the tests bound per frame.
    pub fn held_bytes(&self) -> usize {
        fn vec<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        fn map<K, V>(m: &HashMap<K, V>) -> usize {
            // hashbrown: one control byte and one (key, value) slot per bucket.
            m.capacity() * (std::mem::size_of::<(K, V)>() + 1)
        }
        fn ids(m: &IdMap) -> usize {
            vec(&m.dense) + map(&m.sparse)
        }
        let owners = match &self.owner {
            Owners::Sparse(s) => vec(s),
            Owners::Dense(d) => vec(d),
        };
        let names = |m: &HashMap<&str, Vec<u32>>| map(m) + m.values().map(vec).sum::<usize>();
        owners
            + ids(&self.frame_of)
            + ids(&self.call_of)
            + ids(&self.return_of)
            + ids(&self.by_frame)
            + vec(&self.starts)
            + vec(&self.members)
            + names(&self.by_qualname)
            + names(&self.by_bare_name)
            + vec(&self.children)
            + vec(&self.tests)
    }

    /// The tests of the trace in order of first appearance (as [`crate::query::tests`]).
    pub fn tests(&self) -> &[TestSpan] {
        &self.tests
    }

    /// The test ids in start order.
    pub fn test_ids(&self) -> Vec<String> {
        self.tests.iter().map(|t| t.run.id.clone()).collect()
    }

    /// The static facts of the file of invocation `inv`'s code, and the scope that is its code
    /// (matched by qualname and first line), when the trace carries them.
    pub fn facts_of_invocation(
        &self,
        inv: &Invocation,
    ) -> Option<(&'t FileFacts, &'t crate::facts::FunctionFacts)> {
        let call = inv.first_call(self.trace)?;
        let facts = self.trace.facts.get(call.file().as_str())?;
        let f = facts
            .function_by_code(call.name(), call.line)
            .or_else(|| facts.function_at(call.name(), 0))?;
        Some((facts, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query;
    use crate::Meta;

    fn ev(ev: Kind, act: u64, frame: u64, parent: u64, line: u32, name: &str, test: &str) -> Event {
        let mut e = Event::new(0, 1, 1, ev, Source::Hook);
        e.activation = act;
        e.frame = frame;
        e.parent = parent;
        e.line = line;
        e.code_mut().qualname = name.into();
        e.code_mut().func = name.rsplit('.').next().unwrap_or("").into();
        e.code_mut().file = "/p/m.py".into();
        e.test = test.into();
        e
    }

    fn sample() -> Trace {
        let a = "t.py::test_a";
        let b = "t.py::test_b";
        let mut bare = ev(Kind::Call, 20, 20, 0, 30, "", b);
        bare.code_mut().func = "helper".into();
        let mut bare_ret = ev(Kind::Return, 20, 20, 0, 31, "", b);
        bare_ret.code_mut().func = "helper".into();
        let mut start = Event::new(0, 1, 1, Kind::TestStart, Source::Hook);
        start.test = a.into();
        let mut end = Event::new(0, 1, 1, Kind::TestEnd, Source::Hook);
        end.test = a.into();
        end.detail_mut().outcome = "passed".into();
        Trace {
            meta: Meta::default(),
            events: vec![
                start,
                ev(Kind::Call, 10, 10, 0, 1, "gen", a),
                ev(Kind::Line, 10, 10, 0, 2, "gen", a),
                ev(Kind::Return, 10, 10, 0, 2, "gen", a),
                ev(Kind::Call, 12, 12, 0, 20, "C.f", a),
                ev(Kind::Call, 13, 13, 12, 40, "C.helper", a),
                ev(Kind::Return, 13, 13, 12, 41, "C.helper", a),
                ev(Kind::Line, 0, 0, 0, 21, "", a),
                ev(Kind::Return, 12, 12, 0, 21, "C.f", a),
                ev(Kind::Call, 11, 10, 0, 2, "gen", a),
                ev(Kind::Line, 11, 10, 0, 3, "gen", a),
                ev(Kind::Return, 11, 10, 0, 3, "gen", a),
                end,
                bare,
                bare_ret,
            ],
            facts: Default::default(),
        }
    }

    #[test]
    fn an_id_map_keeps_values_past_four_bytes() {
        // The dense part holds 4-byte values; a value that does not fit (or is its "none")
        // goes to the hash map, and a later small value of the same id takes its place back.
        let mut m = IdMap::new(10);
        for (id, v) in [(1, 7), (2, u64::from(u32::MAX)), (3, 1 << 40), (20, 5)] {
            m.insert(id, v);
            assert_eq!(m.get(id), Some(v), "{id}");
        }
        m.insert(3, 9);
        assert_eq!(m.get(3), Some(9));
        m.insert_first(1, 8);
        assert_eq!((m.get(1), m.get(4), m.get(99)), (Some(7), None, None));
        assert_eq!(std::mem::size_of_val(&m.dense[0]), 4);
    }

    #[test]
    fn ids_the_merge_did_not_number_are_indexed_the_same() {
        // A trace whose ids are not 1, 2, … (written by something else) takes the hash maps:
        // the same answers as with the merge's dense numbering.
        let dense = sample();
        let mut sparse = sample();
        let far = |id: u64| if id == 0 { 0 } else { (1 << 40) + id };
        for e in &mut sparse.events {
            (e.activation, e.frame, e.parent) = (far(e.activation), far(e.frame), far(e.parent));
        }
        let (a, b) = (TraceIndex::new(&dense), TraceIndex::new(&sparse));
        assert_eq!(a.invocation_count(), b.invocation_count());
        for (x, y) in a.all_invocations().zip(b.all_invocations()) {
            assert_eq!((far(x.frame), &x.events), (y.frame, &y.events));
        }
        for act in [10, 11, 12, 13, 20] {
            assert_eq!(a.span(act), b.span(far(act)), "{act}");
            assert_eq!(a.frame(act).map(far), b.frame(far(act)), "{act}");
            assert!(
                a.fresh_calls_under(act).eq(b.fresh_calls_under(far(act))),
                "{act}"
            );
        }
        assert!(a.fresh_calls_under(12).eq([5]));
        assert!(a.fresh_calls_under(0).eq(b.fresh_calls_under(0)));
        assert!(a.span(99).is_none() && b.span(far(99)).is_none());
    }

    #[test]
    fn a_call_and_its_return_need_no_allocation() {
        // Most frames of a suite's trace are one activation with a call and a return: the
        // index keeps those inline (it held ~100 bytes of heap for each).
        let t = sample();
        let ix = TraceIndex::new(&t);
        let helper = ix.invocations("C.helper", Filter::default());
        let one = helper
            .iter()
            .find(|i| i.events.len() == 2)
            .expect("C.helper");
        assert!(!one.events.spilled() && !one.activations.spilled());
        assert_eq!(std::mem::size_of::<Invocation>(), 64);
    }

    #[test]
    fn an_index_of_calls_holds_a_few_bytes_a_frame() {
        // A suite part's trace is millions of frames, most a call and its return: the index
        // keeps each in its frame table (4 bytes a frame, 4 an event) and makes an
        // `Invocation` (64 bytes) only when asked. With one kept per frame, and children as
        // (parent, index) pairs, it held ~120 bytes a frame here.
        let frames = 20_000u64;
        let mut events = Vec::new();
        for a in 1..=frames {
            let name = if a % 2 == 0 { "C.f" } else { "C.g" };
            events.push(ev(Kind::Call, a, a, a / 2, 1, name, "t.py::test_a"));
            events.push(ev(Kind::Return, a, a, a / 2, 2, name, "t.py::test_a"));
        }
        let t = Trace {
            meta: Meta::default(),
            events,
            facts: Default::default(),
        };
        let ix = TraceIndex::new(&t);
        assert_eq!(ix.invocation_count() as u64, frames);
        let per_frame = ix.held_bytes() as u64 / frames;
        assert!(per_frame <= 40, "{per_frame} bytes a frame");
        // What is made on demand is what was kept.
        let inv = ix.invocation(6).expect("frame 7");
        assert_eq!(
            (inv.frame, &inv.events[..], &inv.activations[..]),
            (7, &[12, 13][..], &[7][..])
        );
        assert!(ix.fresh_calls_under(3).eq([10, 12]));
        assert_eq!(ix.invocations("C.g", Filter::default()).len(), 10_000);
    }

    #[test]
    fn an_invocation_shares_its_tests_name_with_the_trace() {
        // An index of a suite part holds millions of invocations: each names its test by the
        // trace's own `Name`, never a copy of the text.
        let t = sample();
        let ix = TraceIndex::new(&t);
        for inv in ix.all_invocations() {
            let first = inv.first_call(&t).expect("a call");
            assert!(inv.test.ptr_eq(&first.test), "{inv:?}");
        }
        assert!(ix.invocation_count() > 0);
    }

    #[test]
    fn lookups_by_name_and_filters() {
        let t = sample();
        let ix = TraceIndex::new(&t);
        let count = |name: &str, filter: Filter<'_>| ix.invocations(name, filter).len();
        // `helper` names the bare-name invocation (no qualname) only; `C.helper` names the
        // qualified one and, by its last component, the bare one too.
        assert_eq!(count("gen", Filter::default()), 1);
        assert_eq!(count("C.helper", Filter::default()), 2);
        assert_eq!(count("helper", Filter::default()), 1);
        assert_eq!(count("f", Filter::default()), 0);
        assert_eq!(count("nope", Filter::default()), 0);
        let in_b = Filter {
            test: Some("test_b"),
            file: None,
        };
        assert_eq!((count("helper", in_b), count("C.f", in_b)), (1, 0));
        let under = |f| Filter {
            test: None,
            file: Some(f),
        };
        assert_eq!(
            (count("C.f", under("p/")), count("C.f", under("q/"))),
            (1, 0)
        );
        // query::invocations is the index's view.
        assert_eq!(
            query::invocations(&t, "gen", Filter::default()),
            vec![ix.invocations("gen", Filter::default())[0].clone()]
        );
        assert_eq!(
            query::tests(&t),
            ix.tests().iter().map(|s| s.run.clone()).collect::<Vec<_>>()
        );
        assert_eq!(ix.tests()[0].first, 0);
        assert_eq!(ix.tests()[0].last, 12);
    }

    #[test]
    fn generator_activations_and_children() {
        let t = sample();
        let ix = TraceIndex::new(&t);
        let g = ix.invocations("gen", Filter::default());
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].activations[..], [10, 11]);
        assert_eq!(ix.frame(11), Some(10));
        // C.f (activation 12) makes one fresh call, C.helper; the bare `helper` is the bare
        // name's only invocation, and `C.helper` does not match it.
        let under: Vec<&str> = ix
            .fresh_calls_under(12)
            .map(|i| ix.event(i).name())
            .collect();
        assert_eq!(under, vec!["C.helper"]);
        assert_eq!(ix.invocations("helper", Filter::default()).len(), 1);
        assert_eq!(ix.invocations("x.helper", Filter::default()).len(), 1);
        assert_eq!(ix.files_of("C.f"), vec!["/p/m.py"]);
        // The line with activation 0 belongs to the innermost open activation, C.f.
        assert_eq!(ix.owner(7), 12);
        assert_eq!(ix.invocation_holding(7), Some(1));
    }

    #[test]
    fn owners_are_kept_only_where_an_event_names_none() {
        // A trace of calls and returns keeps no owner at all (each is its own activation's);
        // a line with activation 0 is kept as an exception; a trace of such lines past half
        // its events keeps them all in a vector. Either way the owners are query::owners'.
        let t = sample();
        let ix = TraceIndex::new(&t);
        assert!(matches!(&ix.owner, Owners::Sparse(s) if s == &[(7, 12)]));
        let mut lines = sample();
        let at = lines
            .events
            .iter()
            .position(|e| e.ev == Kind::Line && e.activation == 0);
        let line = lines.events[at.expect("a line of activation 0")].clone();
        lines.events.splice(8..8, std::iter::repeat_n(line, 40));
        let dense = TraceIndex::new(&lines);
        assert!(matches!(dense.owner, Owners::Dense(_)));
        for (trace, ix) in [(&t, &ix), (&lines, &dense)] {
            let plain = query::owners(trace);
            let indexed: Vec<u64> = (0..trace.events.len()).map(|i| ix.owner(i)).collect();
            assert_eq!(indexed, plain);
        }
        assert_eq!(
            dense.invocations("C.f", Filter::default())[0].events.len(),
            ix.invocations("C.f", Filter::default())[0].events.len() + 40
        );
    }
}
