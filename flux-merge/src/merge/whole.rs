//! The whole trace written as the merge goes, while the run keeps only what its answer reads
//! (issue 28: `flux harvest` writes every event of a heavy run, and its answer reads few).
//!
//! With rule `keep`'s cut, each thread's events since its last extent edge are final at that
//! edge; before they are cut, they are handed here ([`WholeStore::push`]). Up to a bound they
//! are held; past it they are written to a file the caller gives, a chunk at a time, as the
//! lines of the trace (`flux_trace::write_event_jsonl`). When every thread is merged, the
//! threads' events are read back a chunk at a time, merged by time (the earlier thread first at
//! equal times, as the stable sort of the held trace orders them), given their tests, and
//! written: the same bytes as [`flux_trace::Trace::write_jsonl`] of the merge that keeps
//! every event. A thread whose chunks overlap in time is read back whole and sorted. A chunk
//! the file cannot take stays in memory; one it cannot give back is a problem of the trace,
//! its events counted lost.
use crate::spill::{Kept, ReadBack};
use flux_trace::{Codes, Event};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fs::File;
use std::io::Write;
use std::sync::Arc;

/// The count (`meta.counts`) of merged events that went through the spill file on their way
/// to the whole trace.
pub const SPILLED: &str = "merge.events_spilled";

/// Where the whole trace goes when the run keeps less ([`crate::merge::merge_writing`]).
pub struct Whole<'w> {
    /// The trace's lines, as [`flux_trace::Trace::write_jsonl`] writes them.
    pub to: &'w mut dyn Write,
    /// A file for the events held past `after` (the caller's: an unlinked temporary file);
    /// without one, every event is held until written.
    pub spill: Option<File>,
    /// Events held in memory before chunks go to `spill`.
    pub after: usize,
}

/// Bytes of lines written to the file at a time.
const PIECE: usize = 1 << 20;

/// A part of a thread's events, in time order.
enum Seg {
    Held(Vec<Event>),
    /// (offset, bytes, events) of lines in the file.
    Spilled(u64, u32, u32),
}

#[derive(Default)]
struct Chain {
    segs: Vec<Seg>,
    /// The latest time of an event stored.
    last: u64,
    /// Whether each chunk began no earlier than the one before ended (else the reader sorts the
    /// thread's events whole).
    ordered: bool,
}

/// Every event of a merge that keeps less, per thread in the merge's order (see the module doc).
#[derive(Default)]
pub(crate) struct WholeStore {
    threads: Vec<((u32, u32), Chain)>,
    kept: Kept,
}

impl WholeStore {
    pub(crate) fn new(spill: Option<File>, after: usize) -> WholeStore {
        let mut s = WholeStore::default();
        if let Some(f) = spill {
            s.kept.spill_to(f, after, "the merged events");
        }
        s
    }

    /// Events written to the file.
    pub(crate) fn spilled(&self) -> u64 {
        self.kept.len() - self.kept.held() as u64
    }

    /// Thread `key`'s events since its last edge (final: no rule changes them any more).
    pub(crate) fn push(&mut self, key: (u32, u32), chunk: &[Event]) {
        if chunk.is_empty() {
            return;
        }
        if self.threads.last().is_none_or(|(k, _)| *k != key) {
            self.threads.push((
                key,
                Chain {
                    ordered: true,
                    ..Chain::default()
                },
            ));
        }
        let mut order: Vec<usize> = (0..chunk.len()).collect();
        order.sort_by_key(|&i| chunk[i].ts); // stable: a thread's order at equal times
        let chain = &mut self.threads.last_mut().expect("pushed above").1;
        let first = chunk[order[0]].ts;
        chain.ordered &= chain.segs.is_empty() || first >= chain.last;
        chain.last = chain.last.max(chunk[order[order.len() - 1]].ts);
        let n = chunk.len();
        if self.kept.due(self.kept.held() + n).is_none() {
            chain
                .segs
                .push(Seg::Held(order.iter().map(|&i| chunk[i].clone()).collect()));
            self.kept.stored(n, true);
            return;
        }
        // Written a piece at a time: an extent of millions of events never becomes one buffer.
        let mut buf = Vec::new();
        let mut from = 0;
        for (k, &i) in order.iter().enumerate() {
            // Writing into a vector cannot fail.
            let _ = flux_trace::write_event_jsonl(&chunk[i], &mut buf);
            if buf.len() >= PIECE || k + 1 == n {
                let piece = &order[from..=k];
                let at = self.kept.writable().and_then(|s| s.append(&buf));
                chain.segs.push(match at {
                    Some(at) => Seg::Spilled(at, buf.len() as u32, piece.len() as u32),
                    None => Seg::Held(piece.iter().map(|&i| chunk[i].clone()).collect()),
                });
                self.kept.stored(piece.len(), at.is_none());
                buf.clear();
                from = k + 1;
            }
        }
    }

    /// Write `facts` and every event, merged by time and given its test, to `to`; what cannot
    /// be read back is noted in `back`.
    pub(crate) fn write(
        self,
        facts: &BTreeMap<String, flux_trace::FileFacts>,
        to: &mut dyn Write,
        back: &ReadBack,
    ) -> std::io::Result<()> {
        flux_trace::write_facts_jsonl(facts, &mut *to)?;
        let file = self.kept.file();
        let mut readers: Vec<Reader> = self
            .threads
            .into_iter()
            .map(|(key, chain)| Reader::new(key, chain, file.clone(), back.clone()))
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(ts) = r.peek_ts() {
                heap.push(Reverse((ts, i)));
            }
        }
        let mut tests = super::Tests::default();
        while let Some(Reverse((_, i))) = heap.pop() {
            let mut e = readers[i].next().expect("peeked");
            tests.assign(&mut e);
            flux_trace::write_event_jsonl(&e, &mut *to)?;
            if let Some(ts) = readers[i].peek_ts() {
                heap.push(Reverse((ts, i)));
            }
        }
        to.flush()
    }
}

/// One thread's events read back in time order, a chunk at a time.
struct Reader {
    key: (u32, u32),
    segs: std::vec::IntoIter<Seg>,
    current: std::iter::Peekable<std::vec::IntoIter<Event>>,
    file: Option<Arc<File>>,
    back: ReadBack,
    codes: Codes,
}

impl Reader {
    fn new(key: (u32, u32), chain: Chain, file: Option<Arc<File>>, back: ReadBack) -> Reader {
        let ordered = chain.ordered;
        let mut r = Reader {
            key,
            segs: chain.segs.into_iter(),
            current: Vec::new().into_iter().peekable(),
            file,
            back,
            codes: Codes::default(),
        };
        if !ordered {
            let mut all = Vec::new();
            while let Some(seg) = r.segs.next() {
                all.extend(r.read(seg));
            }
            all.sort_by_key(|e| e.ts);
            r.current = all.into_iter().peekable();
        }
        r
    }

    fn peek_ts(&mut self) -> Option<u64> {
        loop {
            if let Some(e) = self.current.peek() {
                return Some(e.ts);
            }
            let seg = self.segs.next()?;
            self.current = self.read(seg).into_iter().peekable();
        }
    }

    fn next(&mut self) -> Option<Event> {
        self.peek_ts()?;
        self.current.next()
    }

    fn read(&mut self, seg: Seg) -> Vec<Event> {
        let (at, bytes, n) = match seg {
            Seg::Held(v) => return v,
            Seg::Spilled(at, bytes, n) => (at, bytes, n),
        };
        let (pid, tid) = self.key;
        let text = crate::spill::read_text(self.file.as_deref(), at, bytes as usize);
        // Read once (the reader owns its segments): the piece's disk is given back now.
        let _ = crate::spill::release(self.file.as_deref(), at, bytes as usize);
        let parsed = text.and_then(|t| {
            t.lines()
                .map(|l| flux_trace::read_event_jsonl(l, &mut self.codes))
                .collect::<Result<Vec<Event>, _>>()
                .map_err(|e| format!("do not parse again: {e}"))
        });
        parsed.unwrap_or_else(|why| {
            self.back.note(
                format!("{n} merged events of thread {pid}/{tid} written to the spill file at offset {at} {why}"),
                u64::from(n),
            );
            Vec::new()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flux_trace::{Kind, Source, Trace};
    use std::os::unix::fs::MetadataExt;

    /// What `Trace::write_jsonl` writes of `events`.
    fn jsonl(events: Vec<Event>) -> Vec<u8> {
        let mut out = Vec::new();
        let t = Trace {
            events,
            ..Trace::default()
        };
        t.write_jsonl(&mut out).unwrap();
        out
    }

    fn ev(ts: u64, tid: u32, line: u32) -> Event {
        let mut e = Event::new(ts, 1, tid, Kind::Line, Source::Hook);
        e.line = line;
        e
    }

    /// Issue 28: threads' chunks written (held or spilled) read back as the stable sort of the
    /// threads' events in merge order: at equal times the earlier thread first, a thread's
    /// order kept, and a thread whose second chunk begins before its first ended sorted whole.
    #[test]
    fn chunks_read_back_as_the_stable_sort_of_the_threads_events() {
        let a1 = vec![ev(10, 1, 1), ev(30, 1, 2), ev(30, 1, 3)];
        let a2 = vec![ev(20, 1, 4), ev(40, 1, 5)]; // begins before a1 ended
        let b1 = vec![ev(30, 2, 6), ev(10, 2, 7), ev(50, 2, 8)];
        let mut all: Vec<Event> = [&a1[..], &a2[..], &b1[..]].concat();
        all.sort_by_key(|e| e.ts);
        let want = jsonl(all);
        for (spill, after) in [(false, 0), (true, 0), (true, 3)] {
            let file = spill.then(|| tempfile::tempfile().unwrap());
            let mut store = WholeStore::new(file, after);
            store.push((1, 1), &a1);
            store.push((1, 1), &a2);
            store.push((1, 2), &b1);
            assert_eq!(store.spilled() > 0, spill, "spill {spill} after {after}");
            let mut got = Vec::new();
            let back = ReadBack::default();
            store.write(&BTreeMap::new(), &mut got, &back).unwrap();
            assert!(back.problems().is_empty());
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(want.clone()).unwrap(),
                "spill {spill} after {after}"
            );
        }
    }

    /// Issue 28 (`spilled-trace-disk-twice`): a spilled run held its merged events on disk
    /// twice at the end, in the spill file and in the trace written from it. Each piece read
    /// back is read once, so its disk is given back as it is read: after the write the spill
    /// file holds no blocks, whatever its length.
    #[test]
    fn the_spill_files_disk_is_given_back_as_the_trace_is_written() {
        let probe = tempfile::tempfile().unwrap();
        probe.set_len(1 << 16).unwrap();
        if let Err(e) = crate::spill::release(Some(&probe), 0, 1 << 16) {
            flux_skip::not_applicable(
                "punching holes in the temporary directory's files",
                &e.to_string(),
            );
            return;
        }
        let chunk: Vec<Event> = (0..40_000u32).map(|i| ev(u64::from(i), 1, i)).collect();
        let file = tempfile::tempfile().unwrap();
        let seen = file.try_clone().unwrap();
        let mut store = WholeStore::new(Some(file), 0);
        store.push((1, 1), &chunk[..25_000]);
        store.push((1, 2), &chunk[25_000..]);
        let m = seen.metadata().unwrap();
        let (len, blocks) = (m.len(), m.blocks());
        assert!(
            len > 2 * PIECE as u64 && blocks * 512 >= len,
            "{len} bytes in {blocks} blocks"
        );
        let pieces = store
            .threads
            .iter()
            .map(|t| t.1.segs.len() as u64)
            .sum::<u64>();
        let mut got = Vec::new();
        let back = ReadBack::default();
        store.write(&BTreeMap::new(), &mut got, &back).unwrap();
        assert!(back.problems().is_empty());
        assert!(got == jsonl(chunk));
        // A piece's ends rarely fall on a block's: the file system keeps the block a piece
        // shares with the next (zeroed), at most one a piece.
        let m = seen.metadata().unwrap();
        assert_eq!(m.len(), len, "the spill file's length");
        assert!(
            m.blocks() * 512 <= pieces * m.blksize(),
            "{} bytes still held for {pieces} pieces of {len} bytes",
            m.blocks() * 512
        );
    }

    /// Issue 28: an extent's chunk larger than a piece is written a piece at a time (never one
    /// buffer of the whole extent) and read back whole and in order.
    #[test]
    fn a_chunk_larger_than_a_piece_is_written_a_piece_at_a_time() {
        let chunk: Vec<Event> = (0..20_000u32).map(|i| ev(u64::from(i / 3), 1, i)).collect();
        let mut store = WholeStore::new(Some(tempfile::tempfile().unwrap()), 0);
        store.push((1, 1), &chunk);
        let segs = &store.threads[0].1.segs;
        assert!(segs.len() > 1, "{} segments", segs.len());
        assert!(segs
            .iter()
            .all(|s| matches!(s, Seg::Spilled(_, bytes, _) if (*bytes as usize) < 2 * PIECE)));
        let want = jsonl(chunk);
        let mut got = Vec::new();
        let back = ReadBack::default();
        store.write(&BTreeMap::new(), &mut got, &back).unwrap();
        assert!(back.problems().is_empty());
        assert!(got == want);
    }
}
