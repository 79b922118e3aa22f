//! A hook stream's records, kept per thread in arrival order (a thread's program order: rule
//! `stream-order`), and what the merge reads of the whole stream before any thread
//! ([`Summary`], kept as the records arrive).
//!
//! Issue 28: on a heavy suite part the hook's records (48 bytes each, and the merge's 16-byte
//! reference to each) were most of what the agent held once the USDT records went to a file
//! (`raw_store`). A stream given a file ([`HookStore::spill_to`]) writes each thread's records
//! past a bound as the lines they came as, a block at a time, and the merge parses them again
//! a block at a time ([`HookStore::thread`]); what it holds of them is bounded by that bound
//! and a block of text per thread. A block the file cannot take stays in memory as text; one
//! it cannot give back, or a line that no longer parses, is a problem of the merged trace
//! ([`crate::raw_store::ReadBack`]), never a silent gap.
use crate::protocol::Rec;
use crate::spill::{Kept, ReadBack};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;

/// Records per written block.
pub const BLOCK: usize = 4096;

/// The count (`meta.counts`) of a merged trace's hook records that went through the streams'
/// spill files.
pub const SPILLED: &str = "hook.records_spilled";

/// What the merge reads of a whole stream before its threads, noted as each record arrives.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The earliest record's time.
    pub first_ts: Option<u64>,
    /// The latest time a record stands for (`hx`: the end of the hook's work it spans).
    pub last_ts: Option<u64>,
    /// `wo`/`wc` marks, in arrival order (open: true).
    pub windows: Vec<(u64, bool)>,
    /// Per thread, its `xo`/`xc` marks in arrival order.
    pub extents: HashMap<u32, Vec<(u64, bool)>>,
    /// Tests' spans (`t` to the next `T`), in arrival order.
    pub tests: Vec<(u64, u64)>,
    open_test: Option<u64>,
    /// Code ids with a line record.
    pub line_codes: HashSet<u32>,
    /// The first record stamped before its thread's previous one (`hx` aside): (its index in
    /// the stream, its thread, its time, the previous time).
    pub out_of_order: Option<(u64, u32, u64, u64)>,
    last: HashMap<u32, u64>,
    index: u64,
}

impl Summary {
    pub fn note(&mut self, r: &Rec) {
        let ts = r.ts();
        self.first_ts = Some(self.first_ts.map_or(ts, |t| t.min(ts)));
        let end = match r {
            Rec::Internal { until, .. } => *until,
            _ => ts,
        };
        self.last_ts = Some(self.last_ts.map_or(end, |t| t.max(end)));
        match r {
            Rec::WindowOpen { .. } => self.windows.push((ts, true)),
            Rec::WindowClose { .. } => self.windows.push((ts, false)),
            Rec::ExtentOpen { tid, .. } => self.extents.entry(*tid).or_default().push((ts, true)),
            Rec::ExtentClose { tid, .. } => self.extents.entry(*tid).or_default().push((ts, false)),
            Rec::TestStart { .. } => self.open_test = Some(ts),
            Rec::TestEnd { .. } => {
                if let Some(o) = self.open_test.take() {
                    self.tests.push((o, ts));
                }
            }
            Rec::Line { code, .. } => {
                self.line_codes.insert(*code);
            }
            _ => {}
        }
        if !matches!(r, Rec::Internal { .. }) {
            let prev = self.last.insert(r.tid(), ts).unwrap_or(0);
            if ts < prev && self.out_of_order.is_none() {
                self.out_of_order = Some((self.index, r.tid(), ts, prev));
            }
        }
        self.index += 1;
    }
}

/// A part of a thread's records.
#[derive(Clone, Debug)]
enum Seg {
    Held(Vec<Rec>),
    /// (offset, bytes, records) of lines in the file.
    Spilled(u64, u32, u32),
    /// Lines the file could not take.
    Text(String),
}

#[derive(Clone, Debug)]
struct Chain {
    segs: Vec<Seg>,
    /// The records after `segs`, held parsed (before the store spills), in time order.
    held: Vec<Rec>,
    /// The records after `segs` as lines with their times (once the store spills), in time
    /// order; written a block at a time, the last `MARGIN` kept back.
    lines: Vec<(u64, String)>,
    /// The latest time of a record in `segs`.
    flushed: u64,
    /// Whether every record found its place in time order (else the reader sorts them all).
    ordered: bool,
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            segs: Vec::new(),
            held: Vec::new(),
            lines: Vec::new(),
            flushed: 0,
            ordered: true,
        }
    }
}

/// Records kept back from a written block: an `hx` (stamped with the start of the hook's work
/// it spans, written after it) is placed among the records before it as it arrives, so a
/// thread's records are stored in time order, as the merge reads them (rule `timeline`).
const MARGIN: usize = 1024;

/// Where a record stamped `ts` goes among `times` (in order): after every one not later.
fn place(times: impl DoubleEndedIterator<Item = u64> + ExactSizeIterator, ts: u64) -> usize {
    let n = times.len();
    n - times.rev().take_while(|t| *t > ts).count()
}

/// A stream's records per thread (see the module doc).
#[derive(Clone, Debug)]
pub struct HookStore {
    threads: BTreeMap<u32, Chain>,
    /// Records stored, those held parsed in memory, and the file.
    kept: Kept,
    /// Records per written block (`BLOCK`, unless a test asks for less).
    block: usize,
}

impl Default for HookStore {
    fn default() -> Self {
        HookStore {
            threads: BTreeMap::new(),
            kept: Kept::default(),
            block: BLOCK,
        }
    }
}

impl HookStore {
    /// Write records past `after` held to `file` (the caller's: an unlinked temporary file).
    pub fn spill_to(&mut self, file: File, after: usize) {
        self.spill_in_blocks(file, after, BLOCK);
    }

    /// [`HookStore::spill_to`] in blocks of `block` records (tests: many blocks of a small
    /// stream).
    pub fn spill_in_blocks(&mut self, file: File, after: usize, block: usize) {
        self.kept.spill_to(file, after, "the hook records");
        self.block = block.max(1);
    }

    /// Records stored, those held parsed in memory, and why records stayed in memory although
    /// the store spills, if a write failed.
    pub fn kept(&self) -> &Kept {
        &self.kept
    }

    /// Store `r`, which arrived as `line`.
    pub fn push(&mut self, r: Rec, line: &str) {
        let ts = r.ts();
        let chain = self.threads.entry(r.tid()).or_default();
        // A record stamped before one already written cannot take its place: the reader then
        // sorts the thread's records whole (a hook out of program order: `stream-order`).
        chain.ordered &= ts >= chain.flushed || chain.segs.is_empty();
        // Spill once the record would be past the bound.
        let Some(spill) = self.kept.due(self.kept.held() + 1) else {
            if !chain.lines.is_empty() {
                let text = join(chain.lines.drain(..), &mut chain.flushed);
                chain.segs.push(Seg::Text(text));
            }
            let at = place(chain.held.iter().map(Rec::ts), ts);
            chain.held.insert(at, r);
            self.kept.stored(1, true);
            return;
        };
        let at = place(chain.lines.iter().map(|(t, _)| *t), ts);
        if at == 0 && chain.held.last().is_some_and(|h| h.ts() > ts) {
            // Its place is among the records held from before the store spilled.
            let at = place(chain.held.iter().map(Rec::ts), ts);
            chain.held.insert(at, r);
            self.kept.stored(1, true);
            return;
        }
        chain.lines.insert(at, (ts, line.to_string()));
        if chain.lines.len() >= self.block + MARGIN {
            if !chain.held.is_empty() {
                let last = chain.held.iter().map(Rec::ts).max().unwrap_or(0);
                chain.flushed = chain.flushed.max(last);
                chain.segs.push(Seg::Held(std::mem::take(&mut chain.held)));
            }
            let n = self.block;
            let text = join(chain.lines.drain(..n), &mut chain.flushed);
            chain.segs.push(match spill.append(text.as_bytes()) {
                Some(at) => Seg::Spilled(at, text.len() as u32, n as u32),
                None => Seg::Text(text),
            });
        }
        self.kept.stored(1, false);
    }

    /// The threads with records.
    pub fn tids(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads.keys().copied()
    }

    /// Thread `tid`'s records in time order (a thread whose records came out of order is read
    /// whole and sorted stably); those written to the file are parsed again a block at a time,
    /// and what cannot be is noted in `back`.
    pub fn thread<'a>(
        &'a self,
        tid: u32,
        pid: u32,
        back: &ReadBack,
    ) -> Box<dyn Iterator<Item = Cow<'a, Rec>> + 'a> {
        let Some(chain) = self.threads.get(&tid) else {
            return Box::new(std::iter::empty());
        };
        let file = self.kept.file();
        let back = back.clone();
        let segs = chain.segs.iter().map(Some).chain(std::iter::once(None));
        let it = segs.flat_map(move |seg| -> Box<dyn Iterator<Item = Cow<'a, Rec>> + 'a> {
            match seg {
                Some(Seg::Held(v)) => Box::new(v.iter().map(Cow::Borrowed)),
                Some(Seg::Text(t)) => {
                    Box::new(parse(t, pid, tid, &back).into_iter().map(Cow::Owned))
                }
                Some(Seg::Spilled(at, bytes, n)) => Box::new(
                    read_back(file.as_deref(), (*at, *bytes, *n), (pid, tid), &back)
                        .into_iter()
                        .map(Cow::Owned),
                ),
                None => Box::new(chain.held.iter().map(Cow::Borrowed).chain({
                    let back = back.clone();
                    chain
                        .lines
                        .iter()
                        .filter_map(move |(_, l)| parse(l, pid, tid, &back).pop().map(Cow::Owned))
                })),
            }
        });
        if chain.ordered {
            return Box::new(it);
        }
        let mut all: Vec<Cow<'a, Rec>> = it.collect();
        all.sort_by_key(|r| r.ts());
        Box::new(all.into_iter())
    }

    /// Every record, each thread's in order, threads by id (for tests).
    pub fn all(&self) -> Vec<Rec> {
        let back = ReadBack::default();
        self.tids()
            .flat_map(|t| {
                self.thread(t, 0, &back)
                    .map(Cow::into_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// The records of a block written to `file` at `at` (`bytes` long, `n` records), parsed
/// again; what cannot be read or parsed is noted in `back`.
fn read_back(
    file: Option<&File>,
    (at, bytes, n): (u64, u32, u32),
    (pid, tid): (u32, u32),
    back: &ReadBack,
) -> Vec<Rec> {
    let why = match crate::spill::read_text(file, at, bytes as usize) {
        Ok(text) => return parse(&text, pid, tid, back),
        Err(why) => why,
    };
    back.note(
        format!(
            "{n} hook records of thread {pid}/{tid} written to the spill file at offset {at} {why}"
        ),
        u64::from(n),
    );
    Vec::new()
}

/// Lines as one text, noting the latest time among them in `flushed`.
fn join(lines: impl Iterator<Item = (u64, String)>, flushed: &mut u64) -> String {
    let mut text = String::new();
    for (t, l) in lines {
        *flushed = (*flushed).max(t);
        text.push_str(&l);
        text.push('\n');
    }
    text
}

/// Records written as lines, parsed again.
fn parse(text: &str, pid: u32, tid: u32, back: &ReadBack) -> Vec<Rec> {
    let mut out = Vec::new();
    for line in text.lines() {
        match crate::protocol::reparse(line) {
            Ok(r) => out.push(r),
            Err(e) => back.note(
                format!("a hook record of thread {pid}/{tid} read back from the spill file does not parse again ({e}): {line:.100}"),
                1,
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Stream;

    /// The lines of a thread's records: calls stamped 10, 20, 30, …, and after every fifth an
    /// `hx` stamped with the start of the hook's work, before the last two calls.
    fn lines(n: u64) -> Vec<String> {
        let mut out = Vec::new();
        for i in 1..=n {
            out.push(format!(r#"["c",{},7,1,{},3]"#, i * 10, 500 + i));
            if i % 5 == 0 {
                out.push(format!(r#"["hx",{},7,{}]"#, i * 10 - 15, i * 10 + 1));
            }
        }
        out
    }

    /// Issue 28: a thread's records come back in time order (an `hx` before the records its
    /// span began before, as a stable sort by time put it), whether held or spilled, without
    /// the reader sorting the thread whole.
    #[test]
    fn a_late_hx_takes_its_place_in_time_and_nothing_is_sorted_whole() {
        let lines = lines(5000);
        let mut want: Vec<Rec> = lines
            .iter()
            .map(|l| crate::protocol::reparse(l).unwrap())
            .collect();
        want.sort_by_key(Rec::ts);
        for (after, block) in [(usize::MAX, BLOCK), (0, 7), (100, BLOCK), (0, BLOCK)] {
            let mut st = Stream::default();
            if after != usize::MAX {
                st.records
                    .spill_in_blocks(tempfile::tempfile().unwrap(), after, block);
            }
            for l in &lines {
                st.feed(l);
            }
            assert!(st.bad.is_empty(), "{:?}", st.bad);
            let chain = &st.records.threads[&7];
            assert!(chain.ordered, "after {after}, blocks of {block}");
            let back = ReadBack::default();
            let got: Vec<Rec> = st
                .records
                .thread(7, 1, &back)
                .map(Cow::into_owned)
                .collect();
            assert!(back.problems().is_empty());
            assert_eq!(got, want, "after {after}, blocks of {block}");
        }
    }
}
