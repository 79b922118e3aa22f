//! Traced runs of one interpreter file take turns by probe set (determinism, 17.4).
//!
//! A uprobe is attached for every process that maps the interpreter's file (pid -1), and the
//! kernel raises the probe's semaphore in each of them: in the programs of other flux runs too.
//! CPython does other work while a semaphore is up. With 3.11's `line` semaphore up every
//! instruction goes through its tracing path, deoptimised, so the program's heap differs and a
//! set hashed by identity iterates in another order: `det.py` of the determinism tests changed
//! its order in 5 of 10 runs while another agent traced another program with `line` (none in
//! 10 without), the flake of `python311_two_runs_of_a_program_make_the_same_calls` in CI, whose
//! tests trace side by side. A per-process event (`perf_event_open` with the program's PID,
//! inherited at fork) would keep other runs out, but on this kernel (6.18) the inherited events
//! of a local uprobe make `clone` fail ("can't start new thread"), and with tracefs events the
//! children's events were lost (a `fork`'s all, a subprocess's in part): measured, not used.
//!
//! So runs take turns: runs of one interpreter file with one probe set share it (attaching a
//! probe whose breakpoint is already in a process changes no semaphore there), runs with
//! another set wait until none of those is running. A hook-only run (no probe) is a set too:
//! its program is perturbed like the others. Locks are `flock(2)`s on files in [`LOCK_DIR`],
//! released by the kernel when their holder dies: a killed agent blocks nobody. A waiting run
//! asks again every 50 ms ([`Request::try_take`] never blocks on another run), and once waiting
//! it keeps new runs from joining the set that runs (no set starves).
//!
//! What this cannot stop: a tracer that is not flux (bpftrace, perf) attaching to the same
//! file meanwhile. The hook watches for it (`FLUX_HOOK_FOREIGN_SEMAPHORES`, [`crate::hook`]):
//! such a run's trace is incomplete.
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the locks live: one directory per host, shared by every flux agent on it (a fleet's
/// pods mount it from the node).
pub const LOCK_DIR: &str = "/run/flux/probe-turns";

/// A turn: held until dropped.
#[derive(Debug)]
pub struct Turn {
    _mine: File,
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("taking a turn on {file}'s probes (lock {lock}): {source}")]
    Io {
        file: String,
        lock: String,
        source: std::io::Error,
    },
}

/// A run asking for a turn with probe set `set` (a name, `none` for a hook-only or untraced
/// run) on the interpreter file `file`. Once it has had to wait it says so to the others (a
/// shared lock on its set's `.want` file): runs of a set already running then stop joining
/// it, so a set never waits behind an endless overlap of another's runs (flux gen's pipelines).
#[derive(Debug)]
pub struct Request {
    file: PathBuf,
    dir: PathBuf,
    key: String,
    set: String,
    want: Option<File>,
}

impl Request {
    pub fn new(file: &Path, set: &str, dir: &Path) -> Result<Request, TurnError> {
        let meta = std::fs::metadata(file).map_err(io_err(file, file))?;
        std::fs::create_dir_all(dir).map_err(io_err(file, dir))?;
        // Private: a process that could open a lock file could hold it, and stop every traced
        // run of the host (a test run on the host runs as nobody).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io_err(file, dir))?;
        Ok(Request {
            file: file.to_path_buf(),
            dir: dir.to_path_buf(),
            key: format!("{:x}-{:x}", meta.dev(), meta.ino()),
            set: set.to_string(),
            want: None,
        })
    }

    /// The turn, or `None` while a run with another set holds one (or waits for one while
    /// this set runs): ask again later. Never blocks on another run.
    pub fn try_take(&mut self) -> Result<Option<Turn>, TurnError> {
        let gate_path = self.path("gate");
        let mine_path = self.path(&format!("{}.set", self.set));
        let err = |p: &Path| io_err(&self.file, p);
        // The gate is held only while the sets are looked at (never across a wait), and only
        // tried: a run that finds it taken asks again.
        let gate = open(&gate_path).map_err(err(&gate_path))?;
        if !try_flock(&gate, libc::LOCK_EX | libc::LOCK_NB).map_err(err(&gate_path))? {
            return Ok(None); // another run is looking: ask again
        }
        let others_run = self.others_hold(".set").map_err(err(&self.dir))?;
        let mine = open(&mine_path).map_err(err(&mine_path))?;
        let take = !others_run
            && match try_flock(&mine, libc::LOCK_EX | libc::LOCK_NB).map_err(err(&mine_path))? {
                true => true, // no run of this set: start it
                false => !self.others_hold(".want").map_err(err(&self.dir))?,
            };
        if !take {
            if self.want.is_none() {
                let want_path = self.path(&format!("{}.want", self.set));
                let want = open(&want_path).map_err(err(&want_path))?;
                flock(&want, libc::LOCK_SH).map_err(err(&want_path))?;
                self.want = Some(want);
            }
            return Ok(None);
        }
        flock(&mine, libc::LOCK_SH).map_err(err(&mine_path))?;
        self.want = None;
        Ok(Some(Turn { _mine: mine }))
    }

    /// Whether this request has found another set in its way (and said so to the others).
    pub fn is_waiting(&self) -> bool {
        self.want.is_some()
    }

    fn path(&self, what: &str) -> PathBuf {
        self.dir.join(format!("{}.{what}", self.key))
    }

    /// Whether another set's file ending in `suffix` (`.set`: runs; `.want`: waiters) is held.
    fn others_hold(&self, suffix: &str) -> std::io::Result<bool> {
        let prefix = format!("{}.", self.key);
        let own = format!("{}.{}{suffix}", self.key, self.set);
        for entry in std::fs::read_dir(&self.dir)? {
            let p = entry?.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == own || !name.starts_with(&prefix) || !name.ends_with(suffix) {
                continue;
            }
            if !try_flock(&open(&p)?, libc::LOCK_EX | libc::LOCK_NB)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

fn io_err(file: &Path, lock: &Path) -> impl FnOnce(std::io::Error) -> TurnError {
    let file = file.display().to_string();
    let lock = lock.display().to_string();
    move |source| TurnError::Io { file, lock, source }
}

/// `flock` that reports a lock held elsewhere (`LOCK_NB`) as `false`.
fn try_flock(f: &File, op: libc::c_int) -> std::io::Result<bool> {
    match flock(f, op) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

fn open(p: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .append(true)
        .open(p)
}

fn flock(f: &File, op: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor owned by `f`; no memory is passed.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "flux-turns-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(d.join("locks")).unwrap();
        for f in ["python", "python2"] {
            std::fs::write(d.join(f), f).unwrap();
        }
        d
    }

    fn take(file: &Path, set: &str, locks: &Path) -> Option<Turn> {
        Request::new(file, set, locks).unwrap().try_take().unwrap()
    }

    #[test]
    fn runs_of_one_set_share_a_turn_and_another_set_waits_for_all_of_them() {
        let d = tmp();
        let (file, locks) = (d.join("python"), d.join("locks"));
        let a = take(&file, "ret", &locks).expect("a free file");
        let b = take(&file, "ret", &locks).expect("the same set shares");
        assert!(take(&file, "ret-line", &locks).is_none());
        assert!(take(&file, "none", &locks).is_none());
        drop(a);
        assert!(take(&file, "ret-line", &locks).is_none(), "one run is left");
        drop(b);
        let c = take(&file, "ret-line", &locks).expect("no run is left");
        assert!(take(&file, "ret", &locks).is_none(), "and the other way");
        // Another interpreter file is another key.
        assert!(take(&d.join("python2"), "ret", &locks).is_some());
        drop(c);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_waiting_set_stops_runs_joining_the_running_one() {
        let d = tmp();
        let (file, locks) = (d.join("python"), d.join("locks"));
        let a = take(&file, "ret", &locks).expect("a free file");
        let mut witness = Request::new(&file, "none", &locks).unwrap();
        assert!(witness.try_take().unwrap().is_none());
        // Without the witness waiting this run would join `ret`; it waits behind it.
        let mut late = Request::new(&file, "ret", &locks).unwrap();
        assert!(late.try_take().unwrap().is_none());
        drop(a);
        let w = witness
            .try_take()
            .unwrap()
            .expect("the waiting set goes first");
        assert!(late.try_take().unwrap().is_none());
        drop(w);
        assert!(late.try_take().unwrap().is_some());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A lock file anyone could open, anyone could hold: a test on the host (run as nobody)
    /// could have stopped every traced run. The directory is root's alone.
    #[test]
    fn the_lock_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = tmp();
        let locks = d.join("fresh");
        let _r = Request::new(&d.join("python"), "ret", &locks).unwrap();
        let mode = std::fs::metadata(&locks).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_missing_interpreter_file_is_an_error_naming_it() {
        let d = tmp();
        let e = Request::new(&d.join("nope"), "ret", &d.join("locks")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
