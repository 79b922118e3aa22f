//! What a capture's two stores ([`crate::raw_store`], [`crate::hook_store`]) share: counts of
//! the records stored and held, the file records go to past a bound, and what could not be read
//! back from it.
//!
//! Issue 28: each store writes a thread's records a block at a time once more than a bound are
//! held, in its own format (the USDT records as 32-byte rows, the hook's as the lines they came
//! as). The file, its end, the bound, and what happens when a write fails (the block stays in
//! memory, the store stops writing and says why) are the same for both, and live here once.
use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::Arc;

/// A store's records: how many, how many held in memory, and its spill file, if it has one.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    len: u64,
    held: usize,
    spill: Option<SpillFile>,
}

impl Kept {
    /// Write records past `after` held to `file` (the caller's: an unlinked temporary file);
    /// `what` names the records in an error ("the USDT records").
    pub(crate) fn spill_to(&mut self, file: File, after: usize, what: &'static str) {
        self.spill = Some(SpillFile {
            file: Arc::new(file),
            end: 0,
            after,
            failed: None,
            what,
        });
    }

    /// Records stored.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records held in memory as the store counts them (the rest are in the file).
    pub fn held(&self) -> usize {
        self.held
    }

    /// Why records stayed in memory although the store spills, if a write failed.
    pub fn spill_error(&self) -> Option<&str> {
        self.spill.as_ref()?.failed.as_deref()
    }

    /// `n` records stored, held (`held`) or not.
    pub(crate) fn stored(&mut self, n: usize, held: bool) {
        self.len += n as u64;
        if held {
            self.held += n;
        }
    }

    /// `n` held records were written to the file.
    pub(crate) fn written(&mut self, n: usize) {
        self.held -= n;
    }

    /// The file, if records should go there now: the store spills, `held` (what it would
    /// hold) is past its bound, and no write has failed.
    pub(crate) fn due(&mut self, held: usize) -> Option<&mut SpillFile> {
        let after = self.spill.as_ref()?.after;
        if held > after {
            self.writable()
        } else {
            None
        }
    }

    /// The file, if the store spills and no write has failed.
    pub(crate) fn writable(&mut self) -> Option<&mut SpillFile> {
        self.spill.as_mut().filter(|s| s.failed.is_none())
    }

    /// The file to read blocks back from (`None`: the store never spilled).
    pub(crate) fn file(&self) -> Option<Arc<File>> {
        self.spill.as_ref().map(|s| s.file.clone())
    }
}

/// The file a store writes blocks to.
#[derive(Clone, Debug)]
pub(crate) struct SpillFile {
    file: Arc<File>,
    /// Bytes written.
    end: u64,
    /// Records held in memory before blocks go to the file.
    after: usize,
    failed: Option<String>,
    what: &'static str,
}

impl SpillFile {
    /// Write `bytes` at the file's end: their offset, or `None` if the write failed (the store
    /// then keeps the block, and writes no more: [`Kept::spill_error`] says why).
    pub(crate) fn append(&mut self, bytes: &[u8]) -> Option<u64> {
        match self.file.write_all_at(bytes, self.end) {
            Ok(()) => {
                let at = self.end;
                self.end += bytes.len() as u64;
                Some(at)
            }
            Err(e) => {
                self.failed = Some(format!("writing {}' spill file: {e}", self.what));
                None
            }
        }
    }
}

/// `len` bytes written to `file` at `at`.
pub(crate) fn read(file: Option<&File>, at: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.ok_or_else(|| std::io::Error::other("no spill file"))?
        .read_exact_at(&mut buf, at)?;
    Ok(buf)
}

/// Give the disk under `len` bytes at `at` of `file` back (a hole punched, the file's length
/// kept): the whole trace's spill is read once, so once read its bytes are only disk the run
/// holds twice (issue 28: a spilled run wrote its merged events to this file and the trace).
/// Where the file system cannot punch, the bytes stay until the file is closed (the error says
/// so; callers go on either way).
pub(crate) fn release(file: Option<&File>, at: u64, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = file.ok_or_else(|| std::io::Error::other("no spill file"))?;
    let at = libc::off_t::try_from(at).map_err(std::io::Error::other)?;
    let len = libc::off_t::try_from(len).map_err(std::io::Error::other)?;
    // SAFETY: fallocate on a descriptor this `File` owns, with plain integers; it changes no
    // memory of this process.
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            at,
            len,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `bytes` of lines written to `file` at `at`, as text; else why not, as a problem says it
/// ("could not be read: …", "are not text: …").
pub(crate) fn read_text(file: Option<&File>, at: u64, bytes: usize) -> Result<String, String> {
    let b = read(file, at, bytes).map_err(|e| format!("could not be read: {e}"))?;
    String::from_utf8(b).map_err(|e| format!("are not text: {e}"))
}

/// What could not be read back from the spill files, shared by the threads' readers.
#[derive(Clone, Debug, Default)]
pub struct ReadBack(Rc<RefCell<(Vec<String>, u64)>>);

impl ReadBack {
    /// Each failed read, as a problem of the trace.
    pub fn problems(&self) -> Vec<String> {
        self.0.borrow().0.clone()
    }

    /// The records those reads lost.
    pub fn lost(&self) -> u64 {
        self.0.borrow().1
    }

    /// A read that failed: why, and how many records it lost.
    pub fn note(&self, problem: String, lost: u64) {
        let mut b = self.0.borrow_mut();
        b.0.push(problem);
        b.1 += lost;
    }
}

#[cfg(test)]
mod tests {
    use crate::hook_store::HookStore;
    use crate::raw_store::RawStore;
    use crate::usdt::RawEvent;
    use std::borrow::Cow;
    use std::fs::File;

    /// A file open for reading only: every write to it fails.
    fn refusing() -> (tempfile::NamedTempFile, File) {
        let f = tempfile::NamedTempFile::new().unwrap();
        let ro = File::open(f.path()).unwrap();
        (f, ro)
    }

    /// Issue 28: a store whose file refuses a write keeps its records in memory, says why, and
    /// gives every record back, for both kinds of record.
    #[test]
    fn a_store_whose_file_refuses_a_write_keeps_every_record_and_says_why() {
        let (_f, ro) = refusing();
        let mut raw = RawStore::spilling(ro, 0).with_block(4);
        for i in 0..100u64 {
            raw.push(RawEvent {
                ts: i,
                pid: 1,
                tid: 2,
                kind: 1,
                line: i as i32,
                file: 0,
                func: 0,
            });
        }
        let why = raw.kept().spill_error().expect("the write failed");
        assert!(
            why.starts_with("writing the USDT records' spill file"),
            "{why}"
        );
        assert_eq!(raw.kept().held(), 100);
        let (threads, back) = raw.into_threads();
        let lines: Vec<i32> = threads.into_values().flatten().map(|r| r.line).collect();
        assert_eq!(lines, (0..100).collect::<Vec<_>>());
        assert!(back.problems().is_empty());

        let (_f, ro) = refusing();
        let mut hook = HookStore::default();
        hook.spill_in_blocks(ro, 0, 4);
        for i in 1..=2000u64 {
            let line = format!(r#"["c",{},7,1,{},3]"#, i * 10, 500 + i);
            hook.push(crate::protocol::reparse(&line).unwrap(), &line);
        }
        let why = hook.kept().spill_error().expect("the write failed");
        assert!(
            why.starts_with("writing the hook records' spill file"),
            "{why}"
        );
        let back = super::ReadBack::default();
        let times: Vec<u64> = hook
            .thread(7, 1, &back)
            .map(|r| Cow::into_owned(r).ts())
            .collect();
        assert_eq!(times, (1..=2000).map(|i| i * 10).collect::<Vec<_>>());
        assert!(back.problems().is_empty());
    }
}
