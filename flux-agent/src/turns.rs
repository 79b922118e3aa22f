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
//! asks again every 50 ms ([`try_take`] never blocks on another run).
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

/// Take a turn to run a program traced with probe set `set` (a name, `none` for a hook-only
/// or untraced run) on the interpreter file `file`, or `None` while a run with another set
/// holds one: the caller waits and asks again.
pub fn try_take(file: &Path, set: &str, dir: &Path) -> Result<Option<Turn>, TurnError> {
    let err = |lock: &Path| {
        let file = file.display().to_string();
        let lock = lock.display().to_string();
        move |source| TurnError::Io { file, lock, source }
    };
    let meta = std::fs::metadata(file).map_err(err(file))?;
    let key = format!("{:x}-{:x}", meta.dev(), meta.ino());
    std::fs::create_dir_all(dir).map_err(err(dir))?;
    let gate_path = dir.join(format!("{key}.gate"));
    let mine_path = set_path(dir, &key, set);
    // The gate is held only while the sets are looked at (never across a wait).
    let gate = open(&gate_path).map_err(err(&gate_path))?;
    flock(&gate, libc::LOCK_EX).map_err(err(&gate_path))?;
    if other_set_running(dir, &key, &mine_path).map_err(err(dir))? {
        return Ok(None);
    }
    let mine = open(&mine_path).map_err(err(&mine_path))?;
    flock(&mine, libc::LOCK_SH).map_err(err(&mine_path))?;
    Ok(Some(Turn { _mine: mine }))
}

fn set_path(dir: &Path, key: &str, set: &str) -> PathBuf {
    dir.join(format!("{key}.{set}.set"))
}

/// Whether a run with another set than `mine` holds its set's file (called with the gate
/// held, so no run starts meanwhile).
fn other_set_running(dir: &Path, key: &str, mine: &Path) -> std::io::Result<bool> {
    let prefix = format!("{key}.");
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p == mine || !name.starts_with(&prefix) || !name.ends_with(".set") {
            continue;
        }
        let f = open(&p)?;
        match flock(&f, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => return Ok(true),
            Err(e) => return Err(e),
        }
    }
    Ok(false)
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

    #[test]
    fn runs_of_one_set_share_a_turn_and_another_set_waits_for_all_of_them() {
        let d = tmp();
        let (file, locks) = (d.join("python"), d.join("locks"));
        let a = try_take(&file, "ret", &locks)
            .unwrap()
            .expect("a free file");
        let b = try_take(&file, "ret", &locks)
            .unwrap()
            .expect("the same set shares");
        assert!(try_take(&file, "ret-line", &locks).unwrap().is_none());
        assert!(try_take(&file, "none", &locks).unwrap().is_none());
        drop(a);
        assert!(
            try_take(&file, "ret-line", &locks).unwrap().is_none(),
            "one run is left"
        );
        drop(b);
        let c = try_take(&file, "ret-line", &locks)
            .unwrap()
            .expect("no run is left");
        assert!(
            try_take(&file, "ret", &locks).unwrap().is_none(),
            "and the other way"
        );
        // Another interpreter file is another key.
        let other = d.join("python2");
        assert!(try_take(&other, "ret", &locks).unwrap().is_some());
        drop(c);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_missing_interpreter_file_is_an_error_naming_it() {
        let d = tmp();
        let e = try_take(&d.join("nope"), "ret", &d.join("locks")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
