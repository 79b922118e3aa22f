//! A capture's raw USDT records ([`RawEvent`]), kept per thread in arrival order, which is the
//! thread's program order (a thread reserves its records in one ring, one after another).
//!
//! Issue 28: a heavy run's records were held in one vector until the merge (32 bytes each, and
//! twice that while the vector grew): the agent's memory grew with the run. A store made with
//! [`RawStore::spilling`] writes each thread's records, a block at a time, to an unlinked file
//! once more than a bound are held, and the merge reads each thread's back a block at a time
//! ([`RawStore::into_threads`]); so what the agent holds of them is bounded by that bound and a
//! block per thread, whatever the run's length. A store that cannot write its file keeps the
//! blocks (and says why: [`Kept::spill_error`]); a block it cannot read back is a problem
//! of the merged trace ([`ReadBack::problems`]), never a silent gap.
use crate::spill::Kept;
pub use crate::spill::ReadBack;
use crate::usdt::RawEvent;
use std::collections::BTreeMap;
use std::fs::File;
use std::sync::Arc;

/// Records per block: 128 KiB.
pub const BLOCK: usize = 4096;
/// Bytes of one record in the file.
const REC: usize = 32;

/// One thread's records.
#[derive(Debug)]
struct Chain {
    /// Full blocks, in order.
    blocks: Vec<Block>,
    /// The records after them.
    tail: Vec<RawEvent>,
    last_ts: u64,
    /// Whether the records came in time order (else the reader sorts them, stably).
    ordered: bool,
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            blocks: Vec::new(),
            tail: Vec::new(),
            last_ts: 0,
            ordered: true,
        }
    }
}

#[derive(Debug)]
enum Block {
    Held(Vec<RawEvent>),
    /// This many records at this offset of the file.
    Spilled(u64, u32),
}

/// The raw records of a capture, per thread (see the module doc).
#[derive(Debug)]
pub struct RawStore {
    threads: BTreeMap<(u32, u32), Chain>,
    /// Records stored, those held in memory, and the file.
    kept: Kept,
    kinds: BTreeMap<u32, u64>,
    /// Records per block (`BLOCK`, unless a test asks for less).
    block: usize,
}

impl Default for RawStore {
    fn default() -> Self {
        RawStore {
            threads: BTreeMap::new(),
            kept: Kept::default(),
            kinds: BTreeMap::new(),
            block: BLOCK,
        }
    }
}

impl RawStore {
    /// The same store with blocks of `n` records (tests: many blocks of a small capture).
    pub fn with_block(mut self, n: usize) -> RawStore {
        self.block = n.max(1);
        self
    }

    /// A store that writes blocks to `file` (the caller's: an unlinked temporary file) once
    /// more than `after` records are held.
    pub fn spilling(file: File, after: usize) -> RawStore {
        let mut store = RawStore::default();
        store.kept.spill_to(file, after, "the USDT records");
        store
    }

    /// How many records of each kind (`flux_common::KIND_*`) were stored.
    pub fn kinds(&self) -> &BTreeMap<u32, u64> {
        &self.kinds
    }

    /// Records stored, those held in memory (the rest are in the file), and why blocks stayed
    /// in memory although the store spills, if a write failed.
    pub fn kept(&self) -> &Kept {
        &self.kept
    }

    pub fn push(&mut self, r: RawEvent) {
        let chain = self.threads.entry((r.pid, r.tid)).or_default();
        chain.ordered &= r.ts >= chain.last_ts;
        chain.last_ts = r.ts;
        chain.tail.push(r);
        *self.kinds.entry(r.kind).or_insert(0) += 1;
        self.kept.stored(1, true);
        if chain.tail.len() < self.block {
            return;
        }
        let full = std::mem::take(&mut chain.tail);
        let written = self
            .kept
            .due(self.kept.held())
            .and_then(|s| s.append(&encode_block(&full)));
        let block = match written {
            Some(at) => {
                self.kept.written(full.len());
                Block::Spilled(at, full.len() as u32)
            }
            None => Block::Held(full),
        };
        chain.blocks.push(block);
    }

    /// Every record, each thread's in order, all stably by time (for what reads a whole
    /// capture: a USDT-only trace, a fixture). A block the file cannot give back is left out,
    /// and said in the result's second part.
    pub fn records(&self) -> (Vec<RawEvent>, ReadBack) {
        let mut out = Vec::with_capacity(self.kept.len() as usize);
        let failed = ReadBack::default();
        let file = self.kept.file();
        for (key, chain) in &self.threads {
            let from = out.len();
            for b in &chain.blocks {
                match b {
                    Block::Held(v) => out.extend_from_slice(v),
                    Block::Spilled(at, n) => match read_block(file.as_deref(), *at, *n) {
                        Ok(v) => out.extend(v),
                        Err(e) => note(&failed, *key, *at, *n, &e),
                    },
                }
            }
            out.extend_from_slice(&chain.tail);
            if !chain.ordered {
                out[from..].sort_by_key(|r| r.ts);
            }
        }
        out.sort_by_key(|r| r.ts);
        (out, failed)
    }

    /// Each thread's records in time order (a thread whose records came out of order is read
    /// whole and sorted stably), read back from the file a block at a time.
    pub fn into_threads(self) -> (BTreeMap<(u32, u32), ThreadRecords>, ReadBack) {
        let back = ReadBack::default();
        let file = self.kept.file();
        let threads = self
            .threads
            .into_iter()
            .map(|(key, chain)| {
                let ordered = chain.ordered;
                let mut it = ThreadRecords {
                    file: file.clone(),
                    blocks: chain.blocks.into_iter(),
                    tail: Some(chain.tail),
                    current: Vec::new().into_iter(),
                    back: back.clone(),
                    key,
                };
                if !ordered {
                    let mut all: Vec<RawEvent> = it.by_ref().collect();
                    all.sort_by_key(|r| r.ts);
                    it.blocks = Vec::new().into_iter();
                    it.tail = Some(all);
                }
                (key, it)
            })
            .collect();
        (threads, back)
    }
}

/// A block of thread `(pid, tid)` at `at` that could not be read back.
fn note(back: &ReadBack, (pid, tid): (u32, u32), at: u64, n: u32, e: &std::io::Error) {
    back.note(
        format!("{n} USDT records of thread {pid}/{tid} could not be read back from the spill file at offset {at}: {e}"),
        u64::from(n),
    );
}

/// One thread's records, in order (an iterator reading the file a block at a time).
pub struct ThreadRecords {
    file: Option<Arc<File>>,
    blocks: std::vec::IntoIter<Block>,
    tail: Option<Vec<RawEvent>>,
    current: std::vec::IntoIter<RawEvent>,
    back: ReadBack,
    key: (u32, u32),
}

impl Iterator for ThreadRecords {
    type Item = RawEvent;

    fn next(&mut self) -> Option<RawEvent> {
        loop {
            if let Some(r) = self.current.next() {
                return Some(r);
            }
            self.current = match self.blocks.next() {
                Some(Block::Held(v)) => v.into_iter(),
                Some(Block::Spilled(at, n)) => self.read(at, n).into_iter(),
                None => self.tail.take()?.into_iter(),
            };
        }
    }
}

impl ThreadRecords {
    fn read(&self, at: u64, n: u32) -> Vec<RawEvent> {
        read_block(self.file.as_deref(), at, n).unwrap_or_else(|e| {
            note(&self.back, self.key, at, n, &e);
            Vec::new()
        })
    }
}

fn read_block(file: Option<&File>, at: u64, n: u32) -> std::io::Result<Vec<RawEvent>> {
    let buf = crate::spill::read(file, at, n as usize * REC)?;
    Ok(buf.chunks_exact(REC).map(decode).collect())
}

fn encode_block(block: &[RawEvent]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(block.len() * REC);
    for r in block {
        encode(r, &mut buf);
    }
    buf
}

fn encode(r: &RawEvent, out: &mut Vec<u8>) {
    out.extend_from_slice(&r.ts.to_le_bytes());
    for v in [r.pid, r.tid, r.kind, r.line as u32, r.file, r.func] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn decode(b: &[u8]) -> RawEvent {
    let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&b[..8]);
    RawEvent {
        ts: u64::from_le_bytes(ts),
        pid: w(8),
        tid: w(12),
        kind: w(16),
        line: w(20) as i32,
        file: w(24),
        func: w(28),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u64, tid: u32) -> RawEvent {
        RawEvent {
            ts: i / 3 * 3,
            pid: 7,
            tid,
            kind: 1 + (i % 3) as u32,
            line: i as i32 - 5,
            file: i as u32,
            func: u32::MAX - i as u32,
        }
    }

    /// Issue 28: records spilled to the file read back as they were pushed, per thread and in
    /// order, with a bounded number held; a thread whose times go back is sorted stably.
    #[test]
    fn spilled_records_read_back_per_thread_in_order_with_few_held() {
        let mut held = RawStore::default();
        let mut spilled = RawStore::spilling(tempfile::tempfile().unwrap(), BLOCK);
        let mut most = 0;
        for i in 0..(BLOCK as u64 * 7 + 123) {
            let mut r = rec(i, (i % 3) as u32);
            if r.tid == 2 && i % 1000 == 0 {
                r.ts = 1; // out of order
            }
            held.push(r);
            spilled.push(r);
            most = most.max(spilled.kept().held());
        }
        assert!(most <= 5 * BLOCK, "held at most {most}");
        assert_eq!(spilled.kept().spill_error(), None);
        assert_eq!(held.kept().len(), spilled.kept().len());
        let (a, _) = held.into_threads();
        let (b, back) = spilled.into_threads();
        let a: Vec<(_, Vec<RawEvent>)> = a.into_iter().map(|(k, t)| (k, t.collect())).collect();
        let b: Vec<(_, Vec<RawEvent>)> = b.into_iter().map(|(k, t)| (k, t.collect())).collect();
        assert_eq!(a, b);
        assert!(back.problems().is_empty());
        for (key, recs) in &a {
            assert!(recs.is_sorted_by_key(|r| r.ts), "{key:?}");
            assert!(recs.iter().all(|r| (r.pid, r.tid) == *key));
        }
        assert_eq!(
            a.iter().map(|(_, v)| v.len()).sum::<usize>(),
            BLOCK * 7 + 123
        );
        // Thread 0 came in order: exactly as pushed.
        let t0: Vec<RawEvent> = (0..(BLOCK as u64 * 7 + 123))
            .filter(|i| i % 3 == 0)
            .map(|i| rec(i, 0))
            .collect();
        assert_eq!(a[0].1, t0);
    }
}
