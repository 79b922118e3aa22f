//! The USDT witness's records: ring-buffer bytes decoded through the shared ABI types
//! (`flux_common::Event`, `flux_common::StrDef`), strings resolved, and the capture's
//! completeness verdict.
//!
//! The kernel names a string by (process, pointer, fingerprint) and sends its bytes once per
//! process ([`flux_common::StrDef`]); [`Drained::strings`] numbers each key on first sight
//! (a record names its file and function by number) and holds each string once, as a shared
//! [`Name`] the events that name it clone (a count, not a copy).
use crate::raw_store::{RawStore, ReadBack, ThreadRecords};
use flux_common::{
    Event as RawAbi, MethodEvent, StrDef, KIND_CALL, KIND_LINE, KIND_RETURN, STR_COUNTED, STR_MAX,
    STR_TRUNCATED, TAG_METHOD_CALL, TAG_METHOD_RETURN, TAG_STR,
};
use flux_trace::{Event, Kind, Meta, Name, Source, Trace};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// A USDT event as it came out of the ring buffer, strings still named by their number in
/// [`Drained::strings`] (32 bytes: a capture holds millions of them until the merge; with
/// the keys in each record it was 64, `a_raw_record_is_32_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub kind: u32,
    pub line: i32,
    /// [`Strings`] numbers of the file and function names.
    pub file: u32,
    pub func: u32,
}

/// A capture's strings: every key a record or a definition names, numbered on first sight,
/// and the string each definition gave it. The keys are the program's (its strings'
/// addresses and hashes): the map hashes them with std's randomly keyed hasher, so no program
/// can choose keys that collide in it.
#[derive(Clone, Debug, Default)]
pub struct Strings {
    ids: HashMap<StrKey, u32>,
    names: Vec<Option<Name>>,
}

impl Strings {
    /// The number of `key` (given one now if it has none).
    pub fn id(&mut self, key: StrKey) -> u32 {
        let next = self.names.len() as u32;
        let id = *self.ids.entry(key).or_insert(next);
        if id == next {
            self.names.push(None);
        }
        id
    }

    /// Define the string of `key` (a later definition replaces it).
    pub fn insert(&mut self, key: StrKey, s: Name) {
        let id = self.id(key);
        self.names[id as usize] = Some(s);
    }

    /// The string numbered `id`, once defined.
    pub fn name(&self, id: u32) -> Option<&Name> {
        self.names.get(id as usize).and_then(Option::as_ref)
    }

    /// Whether every numbered key has its string.
    pub fn all_defined(&self) -> bool {
        self.names.iter().all(Option::is_some)
    }

    /// The string of `key`, once defined.
    pub fn get(&self, key: &StrKey) -> Option<&Name> {
        self.name(*self.ids.get(key)?)
    }
}

/// A JVM method event as it came out of the ring buffer (`flux_common::MethodEvent`): class,
/// method and signature still named by key; `kind` is `KIND_CALL` or `KIND_RETURN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawMethod {
    pub kind: u32,
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub host_tgid: u32,
    pub jtid: u32,
    /// (pointer, fingerprint) of class, method and signature.
    pub strs: [(u64, u64); 3],
}

/// What draining produced.
#[derive(Debug, Default)]
pub struct Drained {
    /// Per thread, in arrival order; spilled to a file past a bound when the drainer gave it
    /// one ([`RawStore::spilling`]).
    pub events: RawStore,
    /// JVM method events (`flux_common::LAYOUT_METHOD` sites).
    pub methods: Vec<RawMethod>,
    /// (host tgid, pointer, fingerprint) → number → string.
    pub strings: Strings,
    /// Records that could not be decoded (wrong size or tag).
    pub malformed: u64,
    /// String definitions whose copy failed in the kernel.
    pub unreadable_strings: u64,
    /// String definitions cut at `STR_MAX` bytes (a JVM name longer than that).
    pub truncated_strings: u64,
    /// Events dropped past the budget (`TracerOptions::max_events`).
    pub over_budget: u64,
    /// Events of the program: all but those in the hook's own files, which the merge drops
    /// (the event budget counts these, not the hook's own work).
    pub program_events: u64,
}

impl Drained {
    /// Records delivered: events and JVM method events.
    pub fn delivered(&self) -> u64 {
        self.events.kept().len() + self.methods.len() as u64
    }

    /// Whether the program's events are past `budget` (or all events past four times it: the
    /// agent holds them in memory, the hook's own included).
    pub fn over(&self, budget: usize) -> bool {
        self.program_events >= budget as u64
            || self.delivered() >= (budget as u64).saturating_mul(4)
    }
}

/// The first words of the problem a trace gets when its program was stopped by the budget.
pub const BUDGET_PROBLEM: &str = "the event budget ran out";

/// Kernel-side counters, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub events: u64,
    pub lost: u64,
    pub read_errors: u64,
    pub filtered: u64,
    pub no_spec: u64,
    pub strdefs: u64,
    /// JVM method hits the kernel's class filter left out, on purpose.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub class_filtered: u64,
    /// (total run time in ns, runs) of the attached program, when the kernel timed it.
    pub program: Option<(u64, u64)>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Decode one ring-buffer record into `out`. Any length or tag the ABI does not define is
/// counted as malformed, never guessed at.
pub fn decode_record(bytes: &[u8], out: &mut Drained) {
    let Some(tag) = bytes
        .get(0..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    else {
        out.malformed += 1;
        return;
    };
    if tag == TAG_STR {
        if bytes.len() < std::mem::size_of::<StrDef>() {
            out.malformed += 1;
            return;
        }
        // SAFETY: StrDef is repr(C), Copy and valid for any bit pattern (integers and a byte
        // array); the slice holds at least size_of::<StrDef>() bytes; read_unaligned copes
        // with the ring buffer's 8-byte record alignment.
        let d: StrDef = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<StrDef>()) };
        if d.len <= 0 {
            out.unreadable_strings += 1;
            return;
        }
        let data = &d.data[..(d.len as usize).min(STR_MAX)];
        let data = if d.flags & STR_COUNTED != 0 {
            data
        } else {
            data.strip_suffix(&[0]).unwrap_or(data)
        };
        if d.flags & STR_TRUNCATED != 0 {
            out.truncated_strings += 1;
        }
        let s = Name::from(String::from_utf8_lossy(data).as_ref());
        out.strings.insert((d.host_tgid, d.ptr, d.fp), s);
        return;
    }
    if tag == TAG_METHOD_CALL || tag == TAG_METHOD_RETURN {
        if bytes.len() < std::mem::size_of::<MethodEvent>() {
            out.malformed += 1;
            return;
        }
        let ptr = bytes.as_ptr().cast::<MethodEvent>();
        // SAFETY: MethodEvent is repr(C), Copy and valid for any bit pattern; the slice is long
        // enough; read_unaligned copes with the ring buffer's 8-byte alignment.
        let m: MethodEvent = unsafe { std::ptr::read_unaligned(ptr) };
        out.program_events += 1;
        out.methods.push(RawMethod {
            kind: if tag == TAG_METHOD_CALL {
                KIND_CALL
            } else {
                KIND_RETURN
            },
            ts: m.ts,
            pid: m.pid,
            tid: m.tid,
            host_tgid: m.host_tgid,
            jtid: m.jtid,
            strs: [0, 1, 2].map(|i| (m.ptr[i], m.fp[i] as u64)),
        });
        return;
    }
    if bytes.len() < std::mem::size_of::<RawAbi>() {
        out.malformed += 1;
        return;
    }
    // SAFETY: Event is repr(C), Copy and valid for any bit pattern; the slice is long enough;
    // read_unaligned copes with the ring buffer's 8-byte alignment anyway.
    let e: RawAbi = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<RawAbi>()) };
    if ![KIND_CALL, KIND_RETURN, KIND_LINE].contains(&e.tag) {
        out.malformed += 1;
        return;
    }
    let file = out.strings.id((e.host_tgid, e.file_ptr, e.file_fp as u64));
    let func = out.strings.id((e.host_tgid, e.func_ptr, e.func_fp as u64));
    if !out
        .strings
        .name(file)
        .is_some_and(|f| crate::merge::is_hook_file(f))
    {
        out.program_events += 1;
    }
    out.events.push(RawEvent {
        ts: e.ts,
        pid: e.pid,
        tid: e.tid,
        kind: e.tag,
        line: e.lineno,
        file,
        func,
    });
}

/// A USDT event as the merge takes it: 40 bytes where a trace [`Event`] is 192, until the
/// merge places it and makes it one. Most of a heavy run's records are never placed (the
/// hook's own work, records outside the scope: 9.8 M of a SymPy suite part's 23.6 M), so they
/// never cost an event's size (`a_usdt_event_is_compact`).
#[derive(Clone, Debug, PartialEq)]
pub struct UsdtEvent {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub line: u32,
    pub ev: Kind,
    /// `file` and `func` (USDT names no more), one per pair of strings, shared.
    pub code: flux_trace::Code,
}

impl UsdtEvent {
    pub fn file(&self) -> &Name {
        &self.code.file
    }

    pub fn func(&self) -> &Name {
        &self.code.func
    }

    /// The trace event it stands for (source `usdt`).
    pub fn to_event(&self) -> Event {
        self.clone().into_event()
    }

    pub fn into_event(self) -> Event {
        let mut e = Event::new(self.ts, self.pid, self.tid, self.ev, Source::Usdt);
        e.code = self.code;
        e.line = self.line;
        e
    }
}

/// A capture's USDT events, compact, with the completeness verdict and counts a USDT trace
/// of them has ([`UsdtEvents::into_trace`]): what the merge takes.
pub struct UsdtEvents {
    pub meta: Meta,
    pub events: UsdtSource,
}

/// The count (`meta.counts`) of a merged trace's USDT records that went through the drainer's
/// spill file.
pub const SPILLED: &str = "usdt.records_spilled";

/// Where a capture's USDT events come from.
pub enum UsdtSource {
    /// Events in time order (a fixture's, a test's).
    Events(Vec<UsdtEvent>),
    /// A capture's raw records per thread, made events as each thread's are read (from the
    /// spill file, a block at a time: the agent never holds a heavy run's events at once).
    Raw { store: Box<RawStore>, namer: Namer },
}

/// Per thread, its USDT events in time order: the form the merge reads them in.
pub type ThreadEvents = BTreeMap<(u32, u32), Box<dyn Iterator<Item = UsdtEvent>>>;

impl UsdtEvents {
    /// Events in time order, all in memory.
    pub fn from_events(meta: Meta, events: Vec<UsdtEvent>) -> UsdtEvents {
        UsdtEvents {
            meta,
            events: UsdtSource::Events(events),
        }
    }

    /// How many events.
    pub fn len(&self) -> u64 {
        match &self.events {
            UsdtSource::Events(v) => v.len() as u64,
            UsdtSource::Raw { store, .. } => store.kept().len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many records the capture wrote to its spill file (the merge counts them in
    /// [`SPILLED`]).
    pub fn spilled(&self) -> u64 {
        match &self.events {
            UsdtSource::Events(_) => 0,
            UsdtSource::Raw { store, .. } => store.kept().len() - store.kept().held() as u64,
        }
    }

    /// Each thread's events, in time order, and what of them could not be read back.
    pub fn into_threads(self) -> (ThreadEvents, ReadBack) {
        match self.events {
            UsdtSource::Events(v) => (by_thread(v), ReadBack::default()),
            UsdtSource::Raw { store, namer } => {
                let (threads, back) = store.into_threads();
                let namer = Rc::new(RefCell::new(namer));
                let out = threads
                    .into_iter()
                    .map(|(key, recs): (_, ThreadRecords)| {
                        let namer = namer.clone();
                        let it: Box<dyn Iterator<Item = UsdtEvent>> =
                            Box::new(recs.filter_map(move |r| namer.borrow_mut().event(r)));
                        (key, it)
                    })
                    .collect();
                (out, back)
            }
        }
    }

    /// The USDT witness's trace alone (no merge).
    pub fn into_trace(self) -> Trace {
        let mut meta = self.meta.clone();
        if self.spilled() > 0 {
            meta.counts.insert(SPILLED.into(), self.spilled());
        }
        let (threads, back) = self.into_threads();
        let mut events: Vec<Event> = threads
            .into_values()
            .flatten()
            .map(UsdtEvent::into_event)
            .collect();
        events.sort_by_key(|e| e.ts);
        add_read_back(&mut meta, &back);
        Trace {
            meta,
            events,
            facts: Default::default(),
        }
    }
}

/// Records the spill file could not give back make the trace incomplete.
pub fn add_read_back(meta: &mut Meta, back: &ReadBack) {
    let p = back.problems();
    if !p.is_empty() {
        meta.complete = false;
        meta.problems.extend(p);
        meta.lost_events += back.lost();
    }
}

/// Events in time order, per thread (each thread's in the order they came, stably by time).
pub(crate) fn by_thread<'a, E: crate::merge::Stamped + 'a>(
    v: Vec<E>,
) -> BTreeMap<(u32, u32), Box<dyn Iterator<Item = E> + 'a>> {
    let mut threads: BTreeMap<(u32, u32), Vec<E>> = BTreeMap::new();
    for e in crate::merge::Freeing::new(v) {
        let (_, pid, tid) = e.at();
        threads.entry((pid, tid)).or_default().push(e);
    }
    threads
        .into_iter()
        .map(|(k, mut v)| {
            if !v.is_sorted_by_key(|e| e.at().0) {
                v.sort_by_key(|e| e.at().0);
            }
            let it: Box<dyn Iterator<Item = E> + 'a> = Box::new(crate::merge::Freeing::new(v));
            (k, it)
        })
        .collect()
}

/// Raw records' strings made names, one code per pair of strings (events share it).
pub struct Namer {
    strings: Strings,
    codes: HashMap<(u32, u32), flux_trace::Code>,
}

impl Namer {
    pub fn new(strings: Strings) -> Namer {
        Namer {
            strings,
            codes: HashMap::new(),
        }
    }

    /// Whether every string a record names is defined.
    fn resolves(&self, r: &RawEvent) -> bool {
        self.strings.name(r.file).is_some() && self.strings.name(r.func).is_some()
    }

    /// The event of `r` (none for a kind no probe has); strings never defined leave it
    /// unnamed ([`flux_trace::Code::NONE`]).
    pub fn event(&mut self, r: RawEvent) -> Option<UsdtEvent> {
        let ev = match r.kind {
            KIND_CALL => Kind::Call,
            KIND_RETURN => Kind::Return,
            KIND_LINE => Kind::Line,
            _ => return None,
        };
        let keys = (r.file, r.func);
        let code = match self.codes.get(&keys) {
            Some(c) => c.clone(),
            None => match (self.strings.name(keys.0), self.strings.name(keys.1)) {
                (Some(f), Some(g)) => {
                    let c = flux_trace::Code::new(flux_trace::CodeNames {
                        file: f.clone(),
                        func: g.clone(),
                        ..Default::default()
                    });
                    self.codes.insert(keys, c.clone());
                    c
                }
                _ => flux_trace::Code::NONE,
            },
        };
        Some(UsdtEvent {
            ts: r.ts,
            pid: r.pid,
            tid: r.tid,
            line: r.line.max(0) as u32,
            ev,
            code,
        })
    }
}

/// Events in (ts, arrival) order and the number whose strings could not be resolved (or
/// that the spill file could not give back).
pub fn usdt_events(drained: &Drained) -> (Vec<Event>, u64) {
    let (raw, failed) = drained.events.records();
    let mut namer = Namer::new(drained.strings.clone());
    let (events, unresolved) = events_of(raw, &mut namer);
    (
        events.into_iter().map(UsdtEvent::into_event).collect(),
        unresolved + failed.lost(),
    )
}

/// A string's key in a capture's table: (host tgid, address, fingerprint).
pub type StrKey = (u32, u64, u64);

/// Time-ordered `raw` made events, each record's memory given back as it becomes one (a
/// SymPy slice is 12 M records, ~0.9 GB, which the agent otherwise held beside their events),
/// and the number whose strings could not be resolved.
fn events_of(raw: Vec<RawEvent>, namer: &mut Namer) -> (Vec<UsdtEvent>, u64) {
    let mut unresolved = 0;
    let mut out = Vec::with_capacity(raw.len());
    for r in crate::merge::Freeing::new(raw) {
        unresolved += u64::from(!namer.resolves(&r));
        out.extend(namer.event(r));
    }
    (out, unresolved)
}

/// Trace events from a capture, and the completeness verdict: every lost, malformed or
/// unresolvable record makes the trace incomplete, with the reason written down.
/// `interpreter` labels the trace (`/usr/bin/python3.11 (3.11.2)`). The records are consumed.
pub fn usdt_trace(drained: Drained, c: &Counters, interpreter: &str) -> Trace {
    usdt_capture(drained, c, interpreter).into_trace()
}

/// [`usdt_trace`], its events kept compact for the merge: each thread's made events only as
/// the merge reads them, unless some record names a string never defined (then all are made
/// at once, to count them).
pub fn usdt_capture(mut drained: Drained, c: &Counters, interpreter: &str) -> UsdtEvents {
    let delivered = drained.delivered();
    let store = std::mem::take(&mut drained.events);
    let mut namer = Namer::new(std::mem::take(&mut drained.strings));
    let mut counts = BTreeMap::new();
    let (mut problems_read, mut lost) = (Vec::new(), 0);
    let (events, unresolved) = if namer.strings.all_defined() {
        for (kind, n) in store.kinds() {
            let name = match *kind {
                KIND_CALL => Kind::Call,
                KIND_RETURN => Kind::Return,
                KIND_LINE => Kind::Line,
                _ => continue,
            };
            counts.insert(format!("usdt.{}", name.as_str()), *n);
        }
        (
            UsdtSource::Raw {
                store: Box::new(store),
                namer,
            },
            0,
        )
    } else {
        let (raw, failed) = store.records();
        let (events, unresolved) = events_of(raw, &mut namer);
        for e in &events {
            *counts.entry(format!("usdt.{}", e.ev.as_str())).or_insert(0) += 1;
        }
        // (An in-memory store, or a file that fails to give back what it took: then the
        // records it lost count as lost, and say why.)
        lost = failed.lost();
        problems_read.extend(failed.problems());
        (UsdtSource::Events(events), unresolved)
    };
    let mut meta = Meta {
        complete: true,
        interpreter: interpreter.to_string(),
        calls: "usdt".into(),
        lost_events: c.lost + unresolved + lost,
        ..Meta::default()
    };
    let mut problems = capture_problems(&drained, delivered, c, unresolved);
    problems.extend(problems_read);
    meta.complete = problems.is_empty();
    meta.problems = problems;
    meta.counts.extend(counts);
    UsdtEvents { meta, events }
}

/// What makes a capture incomplete: every lost, malformed, cut or unresolvable record, and
/// a kernel count of events that differs from what was `delivered` ([`Drained::delivered`]
/// before any were taken). `unresolved`: events that name strings never defined.
pub fn capture_problems(
    drained: &Drained,
    delivered: u64,
    c: &Counters,
    unresolved: u64,
) -> Vec<String> {
    let mut problems = Vec::new();
    if drained.over_budget > 0 {
        problems.push(format!(
            "{BUDGET_PROBLEM}: the program made more than {} USDT events, over the event budget (--max-events), so it was stopped (killed) and {} events were not kept",
            drained.program_events,
            drained.over_budget
        ));
    }
    if c.lost > 0 {
        problems.push(format!("{} records lost (ring buffer full)", c.lost));
    }
    if c.read_errors > 0 {
        problems.push(format!("{} probe argument reads failed", c.read_errors));
    }
    if drained.malformed > 0 {
        problems.push(format!("{} malformed records", drained.malformed));
    }
    if drained.unreadable_strings > 0 {
        problems.push(format!("{} strings unreadable", drained.unreadable_strings));
    }
    if drained.truncated_strings > 0 {
        problems.push(format!(
            "{} strings longer than {STR_MAX} bytes were cut",
            drained.truncated_strings
        ));
    }
    if unresolved > 0 {
        problems.push(format!("{unresolved} events name strings never defined"));
    }
    if delivered != c.events {
        problems.push(format!(
            "kernel counted {} events but {} were delivered",
            c.events, delivered
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T: Copy>(v: &T) -> Vec<u8> {
        // SAFETY: T is one of the ABI's repr(C) Copy types with explicit padding: every byte
        // is initialised.
        unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        }
        .to_vec()
    }

    /// Issue 28: the agent held every raw record of a SymPy suite part as a 192-byte trace
    /// event before the merge dropped four in ten of them (9.8 M of 23.6 M on part 29: the
    /// hook's own work), 9 GB for 12.7 M events kept; the merge now takes them compact.
    /// Issue 28: a capture held every raw record with its strings' keys (64 bytes: 420 MB of
    /// the 3.15 SymPy slice's 6.6 M records, most of the capture stage's peak); it now names
    /// them by number.
    #[test]
    fn a_raw_record_is_32_bytes() {
        assert_eq!(std::mem::size_of::<RawEvent>(), 32);
    }

    #[test]
    fn a_string_is_numbered_once_and_defined_before_or_after_it_is_named() {
        let mut s = Strings::default();
        let a = s.id((1, 0x10, 7));
        assert_eq!((s.id((1, 0x10, 7)), s.name(a)), (a, None));
        // The same pointer in another process, or with another fingerprint, is another string.
        let b = s.id((2, 0x10, 7));
        let c = s.id((1, 0x10, 8));
        assert!(a != b && b != c && a != c);
        s.insert((1, 0x10, 7), Name::from("/a.py"));
        s.insert((1, 0x20, 1), Name::from("f"));
        assert_eq!(s.name(a).map(Name::as_str), Some("/a.py"));
        assert_eq!(s.get(&(1, 0x20, 1)).map(Name::as_str), Some("f"));
        assert!(s.get(&(2, 0x10, 7)).is_none() && s.get(&(3, 0, 0)).is_none());
    }

    #[test]
    fn a_usdt_event_is_compact() {
        assert!(std::mem::size_of::<UsdtEvent>() <= 32);
        // (An `Event` was 192 bytes then, 112 since its rare fields are boxed, 80 since its
        // names are one `Code`; this one 32.)
        assert!(std::mem::size_of::<UsdtEvent>() * 2 <= std::mem::size_of::<Event>());
    }

    #[test]
    fn records_decode_through_the_abi_types() {
        let mut out = Drained::default();
        let mut d = StrDef {
            tag: TAG_STR,
            len: 5,
            host_tgid: 9,
            flags: 0,
            ptr: 0x1000,
            fp: 77,
            data: [0; STR_MAX],
        };
        d.data[..5].copy_from_slice(b"/a.p\0");
        decode_record(&bytes_of(&d), &mut out);
        let e = RawAbi {
            tag: KIND_RETURN,
            lineno: 12,
            ts: 5,
            host_tgid: 9,
            pid: 1,
            tid: 2,
            file_fp: 77,
            file_ptr: 0x1000,
            func_ptr: 0x1000,
            func_fp: 77,
            _pad: 0,
        };
        decode_record(&bytes_of(&e), &mut out);
        assert_eq!(
            out.strings.get(&(9, 0x1000, 77)).map(Name::as_str),
            Some("/a.p")
        );
        let (evs, unresolved) = usdt_events(&out);
        assert_eq!((evs.len(), unresolved), (1, 0));
        assert_eq!(
            (evs[0].file().as_str(), evs[0].line, evs[0].ev),
            ("/a.p", 12, Kind::Return)
        );
        // Short records and unknown tags are counted, never read.
        decode_record(&bytes_of(&e)[..20], &mut out);
        decode_record(&[1, 2], &mut out);
        decode_record(&bytes_of(&RawAbi { tag: 9, ..e }), &mut out);
        decode_record(&bytes_of(&d)[..40], &mut out);
        assert_eq!(out.malformed, 4);
        decode_record(&bytes_of(&StrDef { len: -14, ..d }), &mut out);
        assert_eq!(out.unreadable_strings, 1);
    }

    #[test]
    fn method_records_and_counted_strings_decode_through_the_abi_types() {
        let mut out = Drained::default();
        let mut d = StrDef {
            tag: TAG_STR,
            len: 3,
            host_tgid: 9,
            flags: STR_COUNTED,
            ptr: 0x2000,
            fp: 5,
            data: [0; STR_MAX],
        };
        // A JVM Symbol is not NUL-terminated: only `len` bytes count.
        d.data[..5].copy_from_slice(b"fooXY");
        decode_record(&bytes_of(&d), &mut out);
        assert_eq!(
            out.strings.get(&(9, 0x2000, 5)).map(Name::as_str),
            Some("foo")
        );
        let m = MethodEvent {
            tag: TAG_METHOD_RETURN,
            jtid: 1,
            ts: 10,
            host_tgid: 9,
            pid: 1,
            tid: 2,
            fp: [5, 6, 7],
            ptr: [0x2000, 0x3000, 0x4000],
        };
        decode_record(&bytes_of(&m), &mut out);
        assert_eq!(out.methods.len(), 1);
        assert_eq!(out.methods[0].kind, KIND_RETURN);
        assert_eq!(out.methods[0].strs[2], (0x4000, 7));
        decode_record(&bytes_of(&m)[..40], &mut out);
        assert_eq!(out.malformed, 1);
        decode_record(
            &bytes_of(&StrDef {
                flags: STR_COUNTED | STR_TRUNCATED,
                ..d
            }),
            &mut out,
        );
        let c = Counters {
            events: 1,
            ..Counters::default()
        };
        let p = capture_problems(&out, out.delivered(), &c, 0);
        assert!(p.iter().any(|p| p.contains("were cut")), "{p:?}");
    }
}
