//! The per-run directory `<cache>/runs/<id>-<utc time>/`: what ran, and what came out.
//!
//! - `instance/`: a copy of the instance directory without its gold files (the program under
//!   test never sees `oracle.json`), readable by the container's user; this is what is mounted
//!   read-only at `/flux/instance` (and the working directory of host runs);
//! - `shared/`: what the test's side needs from flux — the gate FIFO, the in-process hook
//!   (`hook/`) and its socket (`hook.sock`) — mounted **read-only** at `/flux/run`;
//! - `trace.jsonl`, `trace-meta.json`, `stdout.txt`, `stderr.txt`, `oracle.json`: kept for
//!   inspection.
//!
//! Rule (in use): a run directory is in use from [`make`] until its run is done ([`InUse`], a
//! shared `flock` on the directory), and pruning — by this process, by another flux process
//! sharing the cache, by `flux gc` — removes a directory only while holding an exclusive lock
//! on it ([`remove_unless_in_use`]). (Two `flux gen` processes on one cache, or one with
//! long module traces beside many short runs, pruned a directory whose run was still going:
//! pruning goes by modification time, and a long run's directory looks old.)
//!
//! Rule (17.6): test code can create nothing flux later writes through or reads. Every
//! directory here is root's (flux's) and mode 0755, nothing of it is mounted writable, and
//! every output is created with `O_CREAT | O_EXCL | O_NOFOLLOW` ([`write_new`]): something
//! already there — a link, a FIFO, a file — is an error naming it, never followed or truncated.
//! (It once was the container user's directory, mounted read-write, and a test planted links
//! named `stdout.txt` and `oracle.json` to a host file and to another instance's gold answer.)
use crate::TracedRun;
use anyhow::{Context, Result};
use flux_instance::Instance;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The directory of a run shared (read-only) with the program under test: `/flux/run` in a
/// container.
/// The run's whole trace, in its directory (`Trace::write_jsonl`'s lines).
pub(crate) const TRACE_FILE: &str = "trace.jsonl";

pub(crate) fn shared(run_dir: &Path) -> PathBuf {
    run_dir.join("shared")
}

/// Create `dir/name` for writing: it must not exist, and nothing is followed (`O_EXCL`,
/// `O_NOFOLLOW`); mode 0644.
pub(crate) fn create_new(dir: &Path, name: &str) -> Result<std::fs::File> {
    let p = dir.join(name);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&p)
        .map_err(|e| {
            let what = match std::fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_symlink() => format!(
                    "a symbolic link to {} is already there",
                    std::fs::read_link(&p)
                        .map(|t| t.display().to_string())
                        .unwrap_or_else(|_| "?".into())
                ),
                Ok(_) => "something is already there".to_string(),
                Err(_) => e.to_string(),
            };
            anyhow::anyhow!("refusing to write {}: {what} (never followed)", p.display())
        })
}

/// [`create_new`] `dir/name` and write `bytes` into it.
pub(crate) fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let mut f = create_new(dir, name)?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", dir.join(name).display()))
}

/// Files of an instance directory that are not copied into a run: the gold files and their
/// history.
const GOLD_FILES: &[&str] = &[
    flux_instance::ORACLE_FILE,
    flux_instance::CALL_GRAPH_FILE,
    flux_instance::HISTORY_DIR,
    // SWE-Flux's stored answer of an imported instance.
    flux_instance::external::REFERENCE_DIR,
];

/// A run directory in use: while this lives (and its process), no pruning removes the
/// directory (see the module docs). Drop it when the run's outputs are written.
#[derive(Debug)]
pub struct InUse {
    _lock: std::fs::File,
}

/// Take the shared lock that marks `dir` in use.
pub(crate) fn mark_in_use(dir: &Path) -> Result<InUse> {
    let f = std::fs::File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    let r = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_SH) };
    if r != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("locking {}", dir.display()));
    }
    Ok(InUse { _lock: f })
}

/// Does a run hold `p` ([`InUse`], in any process)?
pub(crate) fn in_use(p: &Path) -> bool {
    matches!(try_exclusive(p), Some((_, false)))
}

/// Open `p` and try its exclusive lock without waiting: `None` when it cannot be opened, else
/// the descriptor (holding the lock while it lives) and whether the lock was taken.
fn try_exclusive(p: &Path) -> Option<(std::fs::File, bool)> {
    let f = std::fs::File::open(p).ok()?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    let r = unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    };
    Some((f, r == 0))
}

/// Remove the run directory `p` unless a run holds it ([`InUse`], in any process): true when
/// it was removed. The exclusive lock is held while removing.
pub(crate) fn remove_unless_in_use(p: &Path) -> bool {
    let Some((_lock, true)) = try_exclusive(p) else {
        return false;
    };
    let removed = std::fs::remove_dir_all(p).is_ok();
    drop(_lock);
    removed
}

/// Make a fresh run directory for `inst` and copy the instance into `instance/`; older run
/// directories are pruned first (per instance, in number, in bytes: at most `max_bytes` in
/// all besides the new one), never one in use. The new one is in use until the guard drops.
pub(crate) fn make(cache_dir: &Path, inst: &Instance, max_bytes: u64) -> Result<(PathBuf, InUse)> {
    let runs = std::path::absolute(cache_dir.join("runs"))
        .with_context(|| format!("{}/runs", cache_dir.display()))?;
    std::fs::create_dir_all(&runs).with_context(|| format!("creating {}", runs.display()))?;
    let now = std::time::SystemTime::now();
    // `2026-11-29T09:00:00Z` → `20261129T090000Z`; no `:` (Docker bind mounts refuse it).
    let stamp: String = flux_instance::utc_timestamp(now)
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    let millis = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_millis())
        .unwrap_or(0);
    let mut dir = runs.join(format!("{}-{stamp}", inst.id()));
    let mut n = 0;
    while dir.exists() {
        n += 1;
        dir = runs.join(format!("{}-{stamp}.{millis:03}-{n}", inst.id()));
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let in_use = mark_in_use(&dir)?;
    set_mode(&dir, 0o755)?;
    copy_instance(&inst.dir, &dir.join("instance"))?;
    let shared = shared(&dir);
    std::fs::create_dir(&shared).with_context(|| format!("creating {}", shared.display()))?;
    set_mode(&shared, 0o755)?;
    prune(&runs, inst.id(), KEEP_RUNS);
    prune_total(&runs, KEEP_RUNS_TOTAL);
    prune_bytes(&runs, max_bytes, &dir);
    Ok((dir, in_use))
}

/// Run directories kept in all, in bytes (a sympy trace is ~0.5 GB; 40 of them filled disks).
pub const RUNS_MAX_BYTES: u64 = 20 << 30;

/// Bytes under `p`, links not followed, unreadable entries counted as 0.
pub(crate) fn dir_size(p: &Path) -> u64 {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !m.is_dir() {
        return m.len();
    }
    std::fs::read_dir(p)
        .map(|es| es.filter_map(|e| e.ok()).map(|e| dir_size(&e.path())).sum())
        .unwrap_or(0)
}

/// Run directories under `runs` with their last modification, oldest first.
pub(crate) fn runs_by_age(runs: &Path) -> Vec<(std::time::SystemTime, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return Vec::new();
    };
    let mut all: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    all.sort();
    all
}

/// Remove the oldest run directories until the rest (`current` aside) fits in `max` bytes.
fn prune_bytes(runs: &Path, max: u64, current: &Path) {
    let all: Vec<(PathBuf, u64)> = runs_by_age(runs)
        .into_iter()
        .filter(|(_, p)| p != current)
        .map(|(_, p)| {
            let n = dir_size(&p);
            (p, n)
        })
        .collect();
    let mut total: u64 = all.iter().map(|(_, n)| n).sum();
    for (p, n) in all {
        if total <= max {
            break;
        }
        if remove_unless_in_use(&p) {
            total -= n;
        }
    }
}

/// `(instance id, stamp)` of a run directory's name `<id>-<YYYYMMDD>T<hhmmss>Z[.mmm-n]`.
pub(crate) fn split_run_name(name: &str) -> Option<(&str, &str)> {
    let mut from = name.len();
    while let Some(i) = name[..from].rfind('-') {
        let stamp = &name[i + 1..];
        let b = stamp.as_bytes();
        if b.len() >= 16 && b[..8].iter().all(u8::is_ascii_digit) && b[8] == b'T' {
            return Some((&name[..i], stamp));
        }
        from = i;
    }
    None
}

/// Run directories kept per instance (the newest; a sympy trace is ~0.5 GB).
pub const KEEP_RUNS: usize = 3;

/// Run directories kept in all: perturbation makes a new instance id per variant, and the
/// per-instance limit alone let a starter-set perturbation fill a 250 GB disk.
pub const KEEP_RUNS_TOTAL: usize = 40;

/// Remove all but the `keep` most recently modified run directories.
fn prune_total(runs: &Path, keep: usize) {
    let all = runs_by_age(runs);
    let drop = all.len().saturating_sub(keep);
    for (_, p) in all.into_iter().take(drop) {
        remove_unless_in_use(&p);
    }
}

/// Remove all but the newest `keep` run directories of instance `id` (names `<id>-<stamp>`,
/// the stamp starting with 8 digits and `T`; `<id>--v1-…` is another instance's).
fn prune(runs: &Path, id: &str, keep: usize) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    let prefix = format!("{id}-");
    let mut mine: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stamp = name.strip_prefix(&prefix)?;
            let b = stamp.as_bytes();
            let ok = b.len() >= 9 && b[..8].iter().all(u8::is_ascii_digit) && b[8] == b'T';
            ok.then(|| (stamp.to_string(), e.path()))
        })
        .collect();
    mine.sort();
    let drop = mine.len().saturating_sub(keep);
    for (_, p) in mine.into_iter().take(drop) {
        remove_unless_in_use(&p);
    }
}

fn set_mode(p: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", p.display()))
}

/// Copy `from` into `to` recursively (regular files and directories; symlinks are followed
/// only when they point to files inside `from`: a link leaving the instance directory is an
/// error naming it, so an instance cannot show the test a host file), readable by everyone,
/// without the gold files at the top. A directory of the instance that holds `to` (a cache made
/// inside the instance directory, with the run directory in it) is left out: copied, it would
/// copy itself.
fn copy_instance(from: &Path, to: &Path) -> Result<()> {
    struct Ends<'a> {
        root: &'a Path,
        dest: &'a Path,
    }
    fn copy_dir(ends: &Ends, from: &Path, to: &Path, top: bool) -> Result<()> {
        let root = ends.root;
        std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
        set_mode(to, 0o755)?;
        let entries =
            std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("reading {}", from.display()))?;
            let name = e.file_name();
            let n = name.to_string_lossy();
            if top && GOLD_FILES.contains(&n.as_ref()) {
                continue;
            }
            let temporary =
                n.starts_with(".oracle.json.tmp") || n.starts_with(".callgraph.json.tmp");
            if n == "__pycache__" || n == ".pytest_cache" || temporary {
                continue;
            }
            let src = e.path();
            let dst = to.join(&name);
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                let target = std::fs::canonicalize(&src)
                    .with_context(|| format!("{} is a dangling link", src.display()))?;
                if !target.starts_with(root) {
                    anyhow::bail!(
                        "{} is a link leaving the instance directory (to {}): not shown to the test",
                        src.display(),
                        target.display()
                    );
                }
            }
            let meta = std::fs::metadata(&src).with_context(|| format!("{}", src.display()))?;
            if meta.is_dir() {
                if std::fs::canonicalize(&src).is_ok_and(|c| ends.dest.starts_with(c)) {
                    continue;
                }
                copy_dir(ends, &src, &dst, false)?;
            } else if meta.is_file() {
                std::fs::copy(&src, &dst)
                    .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
                let exec = meta.permissions().mode() & 0o111 != 0;
                set_mode(&dst, if exec { 0o755 } else { 0o644 })?;
            }
        }
        Ok(())
    }
    let root = std::fs::canonicalize(from).with_context(|| format!("{}", from.display()))?;
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let dest = std::fs::canonicalize(to).with_context(|| format!("{}", to.display()))?;
    let ends = Ends {
        root: &root,
        dest: &dest,
    };
    copy_dir(&ends, from, to, true)
}

/// Keep the trace, its meta, the logs of a run. Returns the sha256 (hex) of `trace.jsonl`,
/// which is `flux_instance::trace_digest` of the trace.
pub(crate) fn keep_outputs(dir: &Path, out: &TracedRun) -> Result<String> {
    // A run that kept less wrote the whole trace as it merged (`TracedRun::whole_sha256`).
    let digest = match &out.whole_sha256 {
        Some(d) => d.clone(),
        None => flux_instance::write_trace_jsonl(
            &out.trace,
            std::io::BufWriter::with_capacity(1 << 20, create_new(dir, TRACE_FILE)?),
        )?,
    };
    let mut meta = serde_json::to_value(&out.trace.meta)?;
    if let Some(m) = meta.as_object_mut() {
        m.insert("exit_code".into(), out.exit_code.into());
        m.insert("image_id".into(), out.image_id.clone().into());
        m.insert("labels".into(), serde_json::to_value(&out.labels)?);
        m.insert(
            "timed_out".into(),
            out.timed_out.map(|d| d.as_secs()).into(),
        );
        m.insert("killed".into(), out.killed.clone().into());
        m.insert("stdout_truncated".into(), out.stdout_truncated.into());
        m.insert("stderr_truncated".into(), out.stderr_truncated.into());
        if out.whole_sha256.is_some() {
            // The file holds every event, whatever the run kept in memory for its answer.
            m.remove("kept");
        }
    }
    write_new(
        dir,
        "trace-meta.json",
        (serde_json::to_string_pretty(&meta)? + "\n").as_bytes(),
    )?;
    write_new(dir, "stdout.txt", &out.stdout)?;
    write_new(dir, "stderr.txt", &out.stderr)?;
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use flux_trace::{Event, Kind, Source, Trace};

    #[test]
    fn prune_keeps_the_newest_runs_of_that_instance_only() {
        let t = tempfile::tempdir().unwrap();
        for n in [
            "a-20261129T090000Z",
            "a-20261129T090100Z",
            "a-20261129T090100Z.123-1",
            "a-20261129T090200Z",
            "a--v1-20261129T080000Z",
            "ab-20261129T080000Z",
        ] {
            std::fs::create_dir(t.path().join(n)).unwrap();
        }
        super::prune(t.path(), "a", 2);
        let mut left: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "a--v1-20261129T080000Z",
                "a-20261129T090100Z.123-1",
                "a-20261129T090200Z",
                "ab-20261129T080000Z"
            ]
        );
    }

    /// 14.9: run directories were capped only in number (3 per instance, 40 in all), and 40
    /// sympy runs of ~0.5 GB each filled disks; they are capped in bytes too.
    #[test]
    fn run_directories_are_capped_in_bytes_oldest_first_never_the_current() {
        let t = tempfile::tempdir().unwrap();
        for (i, n) in ["a-old", "b-mid", "c-new", "d-current"].iter().enumerate() {
            let d = t.path().join(n);
            std::fs::create_dir_all(d.join("sub")).unwrap();
            std::fs::write(d.join("sub/trace.jsonl"), vec![b'x'; 1000]).unwrap();
            let at = std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::from_secs(1_000_000 * (i as u64 + 1));
            std::fs::File::open(&d).unwrap().set_modified(at).unwrap();
        }
        assert_eq!(super::dir_size(&t.path().join("a-old")), 1000);
        super::prune_bytes(t.path(), 2500, &t.path().join("d-current"));
        let mut left: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["b-mid", "c-new", "d-current"]);
        super::prune_bytes(t.path(), 0, &t.path().join("d-current"));
        assert!(t.path().join("d-current").is_dir());
        assert!(!t.path().join("c-new").exists());
    }

    /// `run-dir-inside-instance`: run from an instance's own directory with no cache, flux made
    /// its cache there, so the run directory lay inside the instance it copies: the copy
    /// copied itself until a path was too long (ENAMETOOLONG). The directory holding the copy
    /// is left out of it.
    #[test]
    fn a_run_directory_inside_the_instance_is_not_copied_into_itself() {
        let t = tempfile::tempdir().unwrap();
        let inst = t.path().join("repo/id");
        std::fs::create_dir_all(&inst).unwrap();
        std::fs::write(inst.join("test_x.py"), "def test(): pass").unwrap();
        let out = inst.join(".flux-cache/runs/id-20261207T221127Z/instance");
        std::fs::create_dir_all(&out).unwrap();
        super::copy_instance(&inst, &out).unwrap();
        assert!(out.join("test_x.py").is_file());
        assert!(!out.join(".flux-cache").exists());
    }

    /// An instance directory holding a link to a host file would have shown that file to the
    /// test (copied into its read-only mount); links inside the instance are still followed.
    #[test]
    fn links_leaving_the_instance_directory_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let inst = t.path().join("repo/id");
        std::fs::create_dir_all(inst.join("data")).unwrap();
        std::fs::write(inst.join("data/input.txt"), "in").unwrap();
        std::fs::write(inst.join("oracle.json"), "gold").unwrap();
        std::fs::create_dir(inst.join("history")).unwrap();
        std::os::unix::fs::symlink("data/input.txt", inst.join("alias.txt")).unwrap();
        let out = t.path().join("run/instance");
        super::copy_instance(&inst, &out).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("alias.txt")).unwrap(),
            "in"
        );
        assert!(!out.join("oracle.json").exists() && !out.join("history").exists());
        std::fs::write(t.path().join("secret"), "host").unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), inst.join("leak.txt")).unwrap();
        let e = super::copy_instance(&inst, &t.path().join("run2/instance")).unwrap_err();
        assert!(
            format!("{e:#}").contains("leak.txt is a link leaving the instance directory"),
            "{e:#}"
        );
    }

    #[test]
    fn run_names_split_into_instance_and_stamp() {
        for (name, want) in [
            ("a-20261129T090000Z", Some(("a", "20261129T090000Z"))),
            (
                "a--v1-20261129T080000Z",
                Some(("a--v1", "20261129T080000Z")),
            ),
            (
                "x-y-20261129T090100Z.123-1",
                Some(("x-y", "20261129T090100Z.123-1")),
            ),
            ("plain", None),
            ("a-2026", None),
        ] {
            assert_eq!(super::split_run_name(name), want, "{name}");
        }
    }

    #[test]
    fn prune_total_keeps_the_most_recently_modified_runs() {
        let t = tempfile::tempdir().unwrap();
        for (i, n) in ["z-old", "a-mid", "m-new"].iter().enumerate() {
            let d = t.path().join(n);
            std::fs::create_dir(&d).unwrap();
            let at = std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::from_secs(1_000_000 * (i as u64 + 1));
            std::fs::File::open(&d).unwrap().set_modified(at).unwrap();
        }
        super::prune_total(t.path(), 2);
        let mut left: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["a-mid", "m-new"]);
    }

    /// Pruning removed a run directory whose run was still going in another flux process
    /// sharing the cache (it goes by modification time, and a long run's directory looks old):
    /// one in use is left, in every pruning rule, and goes once its run is done.
    #[test]
    fn pruning_leaves_a_run_directory_another_process_is_using() {
        let t = tempfile::tempdir().unwrap();
        let mk = |n: &str, age: u64| {
            let d = t.path().join(n);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("trace.jsonl"), vec![b'x'; 1000]).unwrap();
            let at = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(age);
            std::fs::File::open(&d).unwrap().set_modified(at).unwrap();
            d
        };
        let busy = mk("a-20260101T000000Z", 1_000);
        for i in 0..4 {
            mk(&format!("b{i}-20260101T00000{i}Z"), 2_000 + i);
        }
        // The other process's guard: a lock on its own descriptor, as a second process has.
        let guard = super::mark_in_use(&busy).unwrap();
        super::prune_total(t.path(), 2);
        assert!(busy.exists(), "prune_total removed a directory in use");
        super::prune_bytes(t.path(), 0, &t.path().join("none"));
        assert!(busy.exists(), "prune_bytes removed a directory in use");
        mk("a-20260102T000000Z", 3_000);
        mk("a-20260103T000000Z", 4_000);
        super::prune(t.path(), "a", 1);
        assert!(busy.exists(), "prune removed a directory in use");
        drop(guard);
        super::prune_total(t.path(), 0);
        assert!(
            !busy.exists(),
            "once its run is done it is pruned as any other"
        );
    }

    /// 17.6: flux wrote its outputs through links planted where it writes. Whatever is already
    /// there is an error naming it, and what it points to is untouched.
    #[test]
    fn outputs_are_never_written_through_what_is_already_there() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("stdout.txt")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/x", dir.path().join("dangling")).unwrap();
        std::fs::hard_link(&victim, dir.path().join("hard")).unwrap();
        let c = std::ffi::CString::new(dir.path().join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        for name in ["stdout.txt", "dangling", "hard", "fifo"] {
            let e = super::write_new(dir.path(), name, b"overwritten").unwrap_err();
            let msg = format!("{e:#}");
            assert!(
                msg.starts_with(&format!(
                    "refusing to write {}: ",
                    dir.path().join(name).display()
                )),
                "{msg}"
            );
            if name == "stdout.txt" {
                assert!(msg.contains("a symbolic link to"), "{msg}");
            }
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::path::Path::new("/nonexistent/x").exists());
        super::write_new(dir.path(), "fresh", b"ok").unwrap();
        assert_eq!(std::fs::read(dir.path().join("fresh")).unwrap(), b"ok");
    }

    #[test]
    fn the_digest_of_trace_jsonl_is_flux_instance_trace_digest() {
        let mut trace = Trace::default();
        for i in 0..1000u64 {
            let mut e = Event::new(i, 1, 1, Kind::Call, Source::Hook);
            e.code_mut().func = format!("f{i}").into();
            trace.events.push(e);
        }
        let out = crate::TracedRun {
            trace,
            run_dir: std::path::PathBuf::new(),
            exit_code: 0,
            timed_out: None,
            killed: None,
            stdout: b"out".to_vec(),
            stderr: Vec::new(),
            stdout_truncated: false,
            stderr_truncated: true,
            image_id: String::new(),
            image_identity: String::new(),
            interpreter_version: "3.11.2".into(),
            labels: Vec::new(),
            program_seconds: 0.0,
            whole_sha256: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let digest = super::keep_outputs(dir.path(), &out).unwrap();
        assert_eq!(digest, flux_instance::trace_digest(&out.trace));
        let back = Trace::read_jsonl(
            std::io::BufReader::new(std::fs::File::open(dir.path().join("trace.jsonl")).unwrap()),
            "trace.jsonl",
        )
        .unwrap();
        assert_eq!(back.events, out.trace.events);
        assert_eq!(
            std::fs::read(dir.path().join("stdout.txt")).unwrap(),
            b"out"
        );
    }
}
