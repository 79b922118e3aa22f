//! The merge's inputs as a recorded fixture, and the merged trace as stable text.
//!
//! A fixture holds what [`crate::merge()`] needs of one traced run: the interpreter's label and
//! the [`Plan`], the USDT records with their strings and the kernel's counters, and every line
//! each hook connection sent, as it sent it. `cargo xtask record-merge-corpus` writes them
//! (through `flux trace --record-merge-input`); `tests/corpus.rs` merges each one and compares
//! [`render`]'s text with a snapshot.
//!
//! Recording is made reproducible by [`Fixture::normalise`]: timestamps become their rank
//! (order and equality are all the merge reads of them), process and thread ids, frame keys and
//! string keys become small ordinals by first appearance, run-directory names lose their pid
//! and clock, and addresses in reprs become `0x?`. It also trims what no rule needs in bulk:
//! of the USDT events a process made before its hook's first record (interpreter start-up,
//! which rule `before-hook` drops), only the last [`KEEP_BEFORE_HOOK`] are kept, and the
//! kernel's event count is reduced to match (`trimmed_before_hook` says how many went); of the
//! USDT events that rule `hook-own-work` drops unread (inside the hook's own work, and those of
//! the hook's own files that open or close no bracket: on 3.11 all of them), only the first
//! [`KEEP_HOOK_WORK`] per thread are kept (`trimmed_hook_work`), and so of those outside the
//! scope's test windows and target extents (`trimmed_out_of_scope`). Normalising a normalised
//! fixture changes nothing but what a newer trim leaves out.
//!
//! Format (JSON lines): a header object, then `["S", index, string]` (a string of the table),
//! `["U", kind, dts, pid, tid, line, file, func]` (a USDT record; kind as in `flux-common`,
//! file/func index the table, `dts` its time less the previous USDT record's), `["h", stream,
//! line]` (a hook line of connection `stream` whose times are deltas: `ts`/`t0` less the
//! previous such time of that stream, `t1` less the record's own `t0`) and `["H", stream,
//! line]` (a hook line as it was sent, when it is no record with times). Deltas (fixture
//! version 2) keep the numbers small, which is most of what makes the corpus compress
//! (4× smaller than version 1's absolute times, which [`Fixture::read`] still reads).
use crate::plan::Plan;
use crate::protocol::{spec, HookCapture, Stream};
use crate::raw_store::RawStore;
use crate::usdt::{usdt_capture, Counters, Drained, RawEvent, UsdtEvents};
use flux_trace::{Event, Kind, Name, Trace};
use serde::{Deserialize, Serialize};
use serde_json::Value as J;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};

/// USDT events before a process's hook that a fixture keeps (see the module doc).
pub const KEEP_BEFORE_HOOK: usize = 8;
/// USDT events per thread inside the hook's own work that a fixture keeps.
pub const KEEP_HOOK_WORK: usize = 32;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    /// `1`.
    pub fixture: u32,
    /// What was traced, for the reader (the corpus program's file name).
    pub program: String,
    /// The trace's interpreter label.
    pub interpreter: String,
    pub plan: Plan,
    /// Problems of the hook capture outside any stream.
    pub hook_problems: Vec<String>,
    /// The USDT side, when any probe was attached.
    pub usdt: Option<UsdtHeader>,
    #[serde(default)]
    pub trimmed_before_hook: u64,
    #[serde(default)]
    pub trimmed_hook_work: u64,
    #[serde(default)]
    pub trimmed_out_of_scope: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct UsdtHeader {
    pub counters: Counters,
    pub malformed: u64,
    pub unreadable_strings: u64,
    pub over_budget: u64,
}

/// One USDT record: kind, ts, pid, tid, line, file and func (string-table indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsdtRec {
    pub kind: u32,
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub line: i32,
    pub file: u32,
    pub func: u32,
}

#[derive(Clone, Debug)]
pub struct Fixture {
    pub header: Header,
    pub strings: Vec<String>,
    pub usdt: Vec<UsdtRec>,
    /// Per hook connection, its lines.
    pub hook: Vec<Vec<String>>,
}

impl Fixture {
    /// The inputs of one run as captured. `hook`'s streams must have kept their raw lines
    /// ([`Stream::recording`]).
    pub fn capture(
        program: &str,
        interpreter: &str,
        plan: &Plan,
        usdt: Option<(&Drained, &Counters)>,
        hook: &HookCapture,
    ) -> Fixture {
        let mut strings = Vec::new();
        let mut index: HashMap<u32, u32> = HashMap::new();
        let mut by_text: HashMap<Name, u32> = HashMap::new();
        let mut key = |k: u32, d: &Drained| -> u32 {
            *index.entry(k).or_insert_with(|| {
                let s = d.strings.name(k).cloned().unwrap_or_default();
                *by_text.entry(s.clone()).or_insert_with(|| {
                    strings.push(s.to_string());
                    strings.len() as u32 - 1
                })
            })
        };
        let mut recs = Vec::new();
        if let Some((d, _)) = usdt {
            for e in &d.events.records().0 {
                let file = key(e.file, d);
                let func = key(e.func, d);
                recs.push(UsdtRec {
                    kind: e.kind,
                    ts: e.ts,
                    pid: e.pid,
                    tid: e.tid,
                    line: e.line,
                    file,
                    func,
                });
            }
        }
        Fixture {
            header: Header {
                fixture: VERSION,
                program: program.to_string(),
                interpreter: interpreter.to_string(),
                plan: *plan,
                hook_problems: hook.problems.clone(),
                usdt: usdt.map(|(d, c)| UsdtHeader {
                    counters: *c,
                    malformed: d.malformed,
                    unreadable_strings: d.unreadable_strings,
                    over_budget: d.over_budget,
                }),
                trimmed_before_hook: 0,
                trimmed_hook_work: 0,
                trimmed_out_of_scope: 0,
            },
            strings,
            usdt: recs,
            hook: hook
                .streams
                .iter()
                .map(|s| s.raw.clone().unwrap_or_default())
                .collect(),
        }
    }

    /// The merge's inputs again: the USDT events (as `usdt_capture` made them) and the hook
    /// capture.
    pub fn inputs(&self) -> (Option<UsdtEvents>, HookCapture) {
        self.inputs_in(RawStore::default(), &mut |_| {})
    }

    /// [`Fixture::inputs`], the USDT records put in `store` (one that spills, in a test) as a
    /// drainer would, and each hook stream made ready by `prepare` (given a spill file, in a
    /// test) before its lines are fed.
    pub fn inputs_in(
        &self,
        store: RawStore,
        prepare: &mut dyn FnMut(&mut Stream),
    ) -> (Option<UsdtEvents>, HookCapture) {
        let usdt = self.header.usdt.as_ref().map(|h| {
            let mut d = Drained {
                malformed: h.malformed,
                unreadable_strings: h.unreadable_strings,
                over_budget: h.over_budget,
                events: store,
                ..Drained::default()
            };
            let table: Vec<Name> = self
                .strings
                .iter()
                .map(|s| Name::from(s.as_str()))
                .collect();
            for r in &self.usdt {
                for i in [r.file, r.func] {
                    if let Some(s) = table.get(i as usize) {
                        d.strings.insert((r.pid, i as u64, 0), s.clone());
                    }
                }
                let file = d.strings.id((r.pid, r.file as u64, 0));
                let func = d.strings.id((r.pid, r.func as u64, 0));
                d.events.push(RawEvent {
                    ts: r.ts,
                    pid: r.pid,
                    tid: r.tid,
                    kind: r.kind,
                    line: r.line,
                    file,
                    func,
                });
            }
            usdt_capture(d, &h.counters, &self.header.interpreter)
        });
        let streams = self
            .hook
            .iter()
            .map(|lines| {
                let mut s = Stream::default();
                prepare(&mut s);
                for l in lines {
                    s.feed(l);
                }
                s
            })
            .collect();
        let hook = HookCapture {
            streams,
            problems: self.header.hook_problems.clone(),
        };
        (usdt, hook)
    }

    /// The merged trace of this fixture.
    pub fn merged(&self) -> Trace {
        self.merged_in(RawStore::default(), &mut |_| {})
    }

    /// [`Fixture::merged`], its USDT records read back from `store` and its hook streams made
    /// ready by `prepare` ([`Fixture::inputs_in`]).
    pub fn merged_in(&self, store: RawStore, prepare: &mut dyn FnMut(&mut Stream)) -> Trace {
        let (usdt, hook) = self.inputs_in(store, prepare);
        crate::merge(usdt, &hook, &self.header.interpreter, &self.header.plan)
    }

    /// Write the fixture (the current version, see the module doc).
    pub fn write(&self, w: &mut dyn Write) -> std::io::Result<()> {
        let mut header = self.header.clone();
        header.fixture = VERSION;
        serde_json::to_writer(&mut *w, &header)?;
        writeln!(w)?;
        for (i, s) in self.strings.iter().enumerate() {
            serde_json::to_writer(&mut *w, &("S", i, s))?;
            writeln!(w)?;
        }
        let mut prev = 0u64;
        for r in &self.usdt {
            let dts = r.ts as i64 - prev as i64;
            prev = r.ts;
            serde_json::to_writer(
                &mut *w,
                &("U", r.kind, dts, r.pid, r.tid, r.line, r.file, r.func),
            )?;
            writeln!(w)?;
        }
        for (i, lines) in self.hook.iter().enumerate() {
            let mut times = Times::default();
            for l in lines {
                match times.encode(l) {
                    Some(d) => serde_json::to_writer(&mut *w, &("h", i, d))?,
                    None => serde_json::to_writer(&mut *w, &("H", i, l))?,
                }
                writeln!(w)?;
            }
        }
        Ok(())
    }

    pub fn read(r: impl BufRead) -> Result<Fixture, String> {
        let mut lines = r.lines();
        let head = lines
            .next()
            .ok_or("empty fixture")?
            .map_err(|e| e.to_string())?;
        let header: Header = serde_json::from_str(&head).map_err(|e| format!("header: {e}"))?;
        if header.fixture == 0 || header.fixture > VERSION {
            return Err(format!(
                "fixture version {} (this reads 1 to {VERSION})",
                header.fixture
            ));
        }
        let deltas = header.fixture >= 2;
        let (mut prev, mut times) = (0u64, Vec::<Times>::new());
        let mut f = Fixture {
            header,
            strings: Vec::new(),
            usdt: Vec::new(),
            hook: Vec::new(),
        };
        for (n, l) in lines.enumerate() {
            let l = l.map_err(|e| e.to_string())?;
            let bad = |e: &dyn std::fmt::Display| format!("line {}: {e}: {l:.80}", n + 2);
            let v: J = serde_json::from_str(&l).map_err(|e| bad(&e))?;
            match v.get(0).and_then(J::as_str) {
                Some("S") => {
                    let (_, i, s): (String, usize, String) =
                        serde_json::from_value(v).map_err(|e| bad(&e))?;
                    if i != f.strings.len() {
                        return Err(bad(&"strings out of order"));
                    }
                    f.strings.push(s);
                }
                Some("U") => {
                    let (_, kind, ts, pid, tid, line, file, func): (
                        String,
                        u32,
                        i64,
                        u32,
                        u32,
                        i32,
                        u32,
                        u32,
                    ) = serde_json::from_value(v).map_err(|e| bad(&e))?;
                    let ts = if deltas {
                        let t = prev as i64 + ts;
                        prev = u64::try_from(t).map_err(|_| bad(&"time before 0"))?;
                        prev
                    } else {
                        u64::try_from(ts).map_err(|_| bad(&"negative time"))?
                    };
                    f.usdt.push(UsdtRec {
                        kind,
                        ts,
                        pid,
                        tid,
                        line,
                        file,
                        func,
                    });
                }
                Some(tag @ ("H" | "h")) => {
                    let encoded = tag == "h";
                    let (_, i, s): (String, usize, String) =
                        serde_json::from_value(v).map_err(|e| bad(&e))?;
                    if i >= f.hook.len() {
                        f.hook.resize(i + 1, Vec::new());
                        times.resize_with(i + 1, Times::default);
                    }
                    let s = match encoded {
                        true if deltas => times[i].decode(&s).ok_or_else(|| bad(&"bad times"))?,
                        true => return Err(bad(&"an encoded hook line in a version 1 fixture")),
                        false => s,
                    };
                    f.hook[i].push(s);
                }
                _ => return Err(bad(&"unknown line")),
            }
        }
        Ok(f)
    }

    /// Make the recording reproducible and small (see the module doc).
    pub fn normalise(&mut self) {
        self.trim_before_hook();
        self.trim_hook_work();
        self.trim_out_of_scope();
        let mut hook: Vec<Vec<J>> = self
            .hook
            .iter()
            .map(|ls| {
                ls.iter()
                    .map(|l| serde_json::from_str(l).unwrap_or(J::String(l.clone())))
                    .collect()
            })
            .collect();
        // Timestamps: their rank among all of them.
        let mut times: Vec<u64> = self.usdt.iter().map(|r| r.ts).collect();
        for v in hook.iter().flatten() {
            each_field(v, |name, x| {
                if matches!(name, "ts" | "t0" | "t1") {
                    times.extend(x.as_u64());
                }
            });
        }
        times.sort_unstable();
        times.dedup();
        let rank = |t: u64| times.binary_search(&t).map_or(t, |i| i as u64 + 1);
        // Task ids (pids and tids share one numbering: a main thread's tid is its pid) and
        // frame keys: ordinals by first appearance in time.
        let mut order: Vec<(u64, u8, u64)> = Vec::new();
        for r in &self.usdt {
            order.push((r.ts, 0, r.pid as u64));
            order.push((r.ts, 0, r.tid as u64));
        }
        let mut frames: Vec<(u64, u64)> = Vec::new();
        for v in hook.iter().flatten() {
            let ts = v.get(1).and_then(J::as_u64).unwrap_or(0);
            if let Some(p) = v.get("pid").and_then(J::as_u64) {
                order.push((0, 1, p));
            }
            each_field(v, |name, x| match name {
                "tid" => order.extend(x.as_u64().map(|t| (ts, 0, t))),
                "frame_key" => frames.extend(x.as_u64().map(|k| (ts, k))),
                _ => {}
            });
        }
        let tasks = ordinals(order.into_iter().map(|(ts, pri, id)| ((ts, pri), id)));
        let frames = ordinals(frames.into_iter().map(|(ts, k)| ((ts, 0), k)));
        for r in &mut self.usdt {
            r.ts = rank(r.ts);
            r.pid = tasks[&(r.pid as u64)] as u32;
            r.tid = tasks[&(r.tid as u64)] as u32;
        }
        for s in &mut self.strings {
            *s = normal_text(s);
        }
        for (lines, vals) in self.hook.iter_mut().zip(&mut hook) {
            for (l, v) in lines.iter_mut().zip(vals.iter_mut()) {
                rewrite(v, &|name, x| match name {
                    "ts" | "t0" | "t1" => x.as_u64().map(|t| J::from(rank(t))),
                    "tid" | "pid" => x.as_u64().and_then(|t| tasks.get(&t)).map(|t| J::from(*t)),
                    "frame_key" => x.as_u64().and_then(|k| frames.get(&k)).map(|k| J::from(*k)),
                    _ => None,
                });
                *l = serde_json::to_string(v).unwrap_or_default();
            }
        }
        self.usdt.sort_by_key(|r| r.ts);
        self.compact_strings();
    }

    /// Keep only the strings the records name, in order of first use.
    fn compact_strings(&mut self) {
        let mut map: HashMap<u32, u32> = HashMap::new();
        let mut table = Vec::new();
        for r in &mut self.usdt {
            for i in [&mut r.file, &mut r.func] {
                *i = *map.entry(*i).or_insert_with(|| {
                    table.push(self.strings.get(*i as usize).cloned().unwrap_or_default());
                    table.len() as u32 - 1
                });
            }
        }
        self.strings = table;
    }

    /// Of the USDT events inside the hook's own work that no rule reads (see
    /// [`crate::merge::hook_work_interior`]), keep the first few per thread.
    fn trim_hook_work(&mut self) {
        let n = self.trim_unread(crate::merge::hook_work_interior);
        self.header.trimmed_hook_work += n;
    }

    /// Of the USDT events the scope leaves out unread (see [`crate::merge::out_of_scope`]),
    /// keep the first few per thread.
    fn trim_out_of_scope(&mut self) {
        let n = self.trim_unread(crate::merge::out_of_scope);
        self.header.trimmed_out_of_scope += n;
    }

    /// Leave out all but the first [`KEEP_HOOK_WORK`] per thread of the USDT events `unread`
    /// names (indices into the USDT trace's events); how many went.
    fn trim_unread(&mut self, unread: fn(&[Event], &HookCapture, &Plan) -> Vec<usize>) -> u64 {
        let Some((Some(usdt), hook)) = Some(self.inputs()) else {
            return 0;
        };
        // The trace's events are `self.usdt` stably sorted by time, then thread (a capture is
        // read per thread: `RawStore::records`).
        let mut order: Vec<usize> = (0..self.usdt.len()).collect();
        order.sort_by_key(|i| {
            let r = &self.usdt[*i];
            (r.ts, r.pid, r.tid)
        });
        let events: Vec<Event> = usdt.into_trace().events;
        let interior = unread(&events, &hook, &self.header.plan);
        let mut per_thread: HashMap<(u32, u32), usize> = HashMap::new();
        let mut drop = vec![false; self.usdt.len()];
        for i in interior {
            let r = &self.usdt[order[i]];
            let n = per_thread.entry((r.pid, r.tid)).or_default();
            *n += 1;
            if *n > KEEP_HOOK_WORK {
                drop[order[i]] = true;
            }
        }
        let mut i = 0;
        self.usdt.retain(|_| {
            i += 1;
            !drop[i - 1]
        });
        let trimmed = drop.iter().filter(|d| **d).count() as u64;
        if let Some(u) = &mut self.header.usdt {
            u.counters.events = u.counters.events.saturating_sub(trimmed);
        }
        trimmed
    }

    /// Of each process's USDT events before its hook's first record, keep the last few.
    fn trim_before_hook(&mut self) {
        let mut start: HashMap<u32, u64> = HashMap::new();
        for lines in &self.hook {
            let mut s = Stream::default();
            for l in lines {
                s.feed(l);
            }
            if let Some(t) = s.summary.first_ts {
                let e = start.entry(s.pid).or_insert(t);
                *e = (*e).min(t);
            }
        }
        if start.is_empty() {
            return;
        }
        let mut before: HashMap<u32, usize> = HashMap::new();
        for r in &self.usdt {
            if start.get(&r.pid).is_some_and(|t| r.ts < *t) {
                *before.entry(r.pid).or_default() += 1;
            }
        }
        let mut seen: HashMap<u32, usize> = HashMap::new();
        let n0 = self.usdt.len();
        self.usdt.sort_by_key(|r| r.ts);
        self.usdt.retain(|r| {
            if start.get(&r.pid).is_none_or(|t| r.ts >= *t) {
                return true;
            }
            let k = seen.entry(r.pid).or_default();
            *k += 1;
            *k + KEEP_BEFORE_HOOK > before[&r.pid]
        });
        let trimmed = (n0 - self.usdt.len()) as u64;
        self.header.trimmed_before_hook += trimmed;
        if let Some(u) = &mut self.header.usdt {
            u.counters.events = u.counters.events.saturating_sub(trimmed);
            // What a recording cannot reproduce and the merge does not read.
            u.counters.filtered = 0;
            u.counters.strdefs = 0;
            u.counters.program = None;
        }
    }
}

/// The fixture version [`Fixture::write`] writes.
pub const VERSION: u32 = 2;

/// One hook stream's times while its lines are written or read with deltas (see the module
/// doc): the previous `ts`/`t0`.
#[derive(Default)]
struct Times {
    last: i64,
}

impl Times {
    /// The record's times as deltas; `None` for a line that is no record with times (written
    /// as sent).
    fn encode(&mut self, line: &str) -> Option<String> {
        self.map(line, true)
    }

    fn decode(&mut self, line: &str) -> Option<String> {
        self.map(line, false)
    }

    fn map(&mut self, line: &str, encode: bool) -> Option<String> {
        let mut v: J = serde_json::from_str(line).ok()?;
        // Only a line that comes back exactly is written with deltas.
        if encode && serde_json::to_string(&v).ok()? != line {
            return None;
        }
        let a = v.as_array_mut()?;
        let sp = spec(a.first()?.as_str()?)?;
        let (mut last, mut t0, mut any) = (self.last, None, false);
        for (name, x) in sp
            .fields
            .iter()
            .chain(sp.optional)
            .zip(a.iter_mut().skip(1))
        {
            let base = match *name {
                "ts" | "t0" => last,
                "t1" => t0?,
                _ => continue,
            };
            let (abs, out) = if encode {
                let abs = i64::try_from(x.as_u64()?).ok()?;
                (abs, abs - base)
            } else {
                let abs = base.checked_add(x.as_i64()?).filter(|t| *t >= 0)?;
                (abs, abs)
            };
            if *name != "t1" {
                last = abs;
                t0 = Some(abs);
            }
            *x = J::from(out);
            any = true;
        }
        if !any {
            return None;
        }
        self.last = last;
        serde_json::to_string(&v).ok()
    }
}

/// Call `f(name, value)` for every field of a protocol record (by its spec's names), and for
/// the hello's `pid`.
fn each_field(v: &J, mut f: impl FnMut(&str, &J)) {
    if let Some(p) = v.get("pid") {
        f("pid", p);
    }
    let Some(a) = v.as_array() else { return };
    let Some(sp) = a.first().and_then(J::as_str).and_then(spec) else {
        return;
    };
    for (name, x) in sp.fields.iter().chain(sp.optional).zip(&a[1..]) {
        f(name, x);
    }
}

/// Replace fields (by name) where `f` says, and normalise every string in the record.
fn rewrite(v: &mut J, f: &dyn Fn(&str, &J) -> Option<J>) {
    if let Some(o) = v.as_object_mut() {
        if let Some(n) = o.get("pid").and_then(|p| f("pid", p)) {
            o.insert("pid".into(), n);
        }
        return;
    }
    let Some(a) = v.as_array_mut() else { return };
    let Some(sp) = a.first().and_then(J::as_str).and_then(spec) else {
        return;
    };
    for (name, x) in sp
        .fields
        .iter()
        .chain(sp.optional)
        .zip(a.iter_mut().skip(1))
    {
        if let Some(n) = f(name, x) {
            *x = n;
        }
        strings_in(x);
    }
}

fn strings_in(x: &mut J) {
    match x {
        J::String(s) => *s = normal_text(s),
        J::Array(a) => a.iter_mut().for_each(strings_in),
        J::Object(o) => o.values_mut().for_each(strings_in),
        _ => {}
    }
}

/// A string without what changes from run to run: addresses in reprs, the run directory's pid
/// and clock (`flux-run-<pid>-<ns>`).
pub fn normal_text(s: &str) -> String {
    let s = crate::scrub_addresses(s);
    const RUN: &str = "flux-run-";
    if !s.contains(RUN) {
        return s;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(i) = rest.find(RUN) {
        out.push_str(&rest[..i]);
        out.push_str("flux-run");
        rest = &rest[i + RUN.len()..];
        let n = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'-')
            .count();
        rest = &rest[n..];
    }
    out.push_str(rest);
    out
}

/// Ordinals (from 1) of ids by their first (key-ordered) appearance.
fn ordinals(items: impl Iterator<Item = ((u64, u8), u64)>) -> HashMap<u64, u64> {
    let mut v: Vec<((u64, u8), u64)> = items.collect();
    v.sort_by_key(|(k, _)| *k);
    let mut out = HashMap::new();
    for (_, id) in v {
        let n = out.len() as u64 + 1;
        out.entry(id).or_insert(n);
    }
    out
}

/// The merged trace as stable text: its verdict, problems and counts, then per thread (in an
/// order that does not depend on thread ids) every event of `file` in full and a count of the
/// others by file. Activation and frame ids are renumbered per thread by first appearance.
pub fn render(t: &Trace, file_suffix: &str) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "complete: {}\ncalls: {}\n",
        t.meta.complete, t.meta.calls
    ));
    for p in &t.meta.problems {
        s.push_str(&format!("problem: {p}\n"));
    }
    for (k, v) in &t.meta.counts {
        s.push_str(&format!("count {k} = {v}\n"));
    }
    let mut threads: BTreeMap<(u32, u32), Vec<&Event>> = BTreeMap::new();
    for e in &t.events {
        threads.entry((e.pid, e.tid)).or_default().push(e);
    }
    let mut blocks: Vec<String> = threads
        .values()
        .map(|evs| render_thread(evs, file_suffix))
        .collect();
    blocks.sort();
    for (i, b) in blocks.iter().enumerate() {
        s.push_str(&format!("thread #{i}:\n{b}"));
    }
    s
}

fn render_thread(evs: &[&Event], file_suffix: &str) -> String {
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut id = |a: u64| -> String {
        if a == 0 {
            return "-".into();
        }
        let n = ids.len() as u64 + 1;
        ids.entry(a).or_insert(n).to_string()
    };
    let mut s = String::new();
    let mut others: BTreeMap<String, BTreeMap<&str, u64>> = BTreeMap::new();
    for e in evs {
        // Ids are numbered over every event of the thread, so the program's stay stable.
        let (a, f, p) = (id(e.activation), id(e.frame), id(e.parent));
        let mine =
            e.file().ends_with(file_suffix) || matches!(e.ev, Kind::TestStart | Kind::TestEnd);
        if !mine {
            *others
                .entry(e.file().to_string())
                .or_default()
                .entry(e.ev.as_str())
                .or_default() += 1;
            continue;
        }
        let name = if e.qualname().is_empty() {
            &e.func()
        } else {
            &e.qualname()
        };
        s.push_str(&format!(
            "  {} {name} {} d{} a{a} f{f} p{p} {}",
            e.ev.as_str(),
            e.line,
            e.depth,
            match e.src {
                flux_trace::Source::Usdt => "usdt",
                flux_trace::Source::Hook => "hook",
                flux_trace::Source::Reference => "reference",
            }
        ));
        if let Some(v) = &e.detail().value {
            s.push_str(&format!(" v={}:{}", v.repr, v.ty));
        }
        if e.unwind {
            s.push_str(" unwind");
        }
        if e.suspended {
            s.push_str(" suspended");
        }
        if let Some(x) = &e.detail().exc {
            s.push_str(&format!(" exc={}({})", x.ty, x.msg));
        }
        if !e.detail().outcome.is_empty() {
            s.push_str(&format!(" outcome={}", e.detail().outcome));
        }
        if !e.test.is_empty() {
            s.push_str(&format!(" test={}", e.test));
        }
        for (k, v) in &e.detail().locals {
            s.push_str(&format!(" {k}={}:{}", v.repr, v.ty));
        }
        s.push('\n');
    }
    for (file, kinds) in others {
        let k: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        s.push_str(&format!("  [{file}: {}]\n", k.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_directories_and_addresses_are_normalised() {
        assert_eq!(
            normal_text("/tmp/flux-run-123-456789/hook/flux_hook/_core.py"),
            "/tmp/flux-run/hook/flux_hook/_core.py"
        );
        assert_eq!(normal_text("<A object at 0x7f00>"), "<A object at 0x?>");
        assert_eq!(normal_text("plain"), "plain");
    }
}
