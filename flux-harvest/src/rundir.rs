//! The per-run directory `<cache>/runs/<id>-<utc time>/`: what ran, and what came out.
//!
//! - `instance/`: a copy of the instance directory without its gold files (the program under
//!   test never sees `oracle.json`), readable by the container's user; this is what is mounted
//!   read-only at `/flux/instance` (and the working directory of host runs);
//! - `hook/`, `hook.sock`: the in-process hook and its socket;
//! - `trace.jsonl`, `trace-meta.json`, `stdout.txt`, `stderr.txt`, `oracle.json`: kept for
//!   inspection.
use crate::RunOutput;
use anyhow::{Context, Result};
use flux_instance::Instance;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Files of an instance directory that are not copied into a run.
const GOLD_FILES: &[&str] = &[
    flux_instance::ORACLE_FILE,
    flux_instance::CALL_GRAPH_FILE,
    // SWE-Flux's stored answer of an imported instance.
    flux_instance::external::REFERENCE_DIR,
];

/// Make a fresh run directory for `inst` and copy the instance into `instance/`.
pub(crate) fn make(cache_dir: &Path, inst: &Instance) -> Result<PathBuf> {
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
    set_mode(&dir, 0o755)?;
    copy_instance(&inst.dir, &dir.join("instance"))?;
    prune(&runs, inst.id(), KEEP_RUNS);
    prune_total(&runs, KEEP_RUNS_TOTAL);
    Ok(dir)
}

/// Run directories kept per instance (the newest; a sympy trace is ~0.5 GB).
pub const KEEP_RUNS: usize = 3;

/// Run directories kept in all: perturbation makes a new instance id per variant, and the
/// per-instance limit alone let a starter-set perturbation fill a 250 GB disk.
pub const KEEP_RUNS_TOTAL: usize = 40;

/// Remove all but the `keep` most recently modified run directories.
fn prune_total(runs: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    let mut all: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    all.sort();
    let drop = all.len().saturating_sub(keep);
    for (_, p) in all.into_iter().take(drop) {
        let _ = std::fs::remove_dir_all(p);
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
        let _ = std::fs::remove_dir_all(p);
    }
}

fn set_mode(p: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", p.display()))
}

/// Copy `from` into `to` recursively (regular files and directories; symlinks are followed
/// only when they point to files), readable by everyone, without the gold files at the top.
fn copy_instance(from: &Path, to: &Path) -> Result<()> {
    fn copy_dir(from: &Path, to: &Path, top: bool) -> Result<()> {
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
            if n == "__pycache__" || n == ".pytest_cache" || n.starts_with(".oracle.json.tmp") {
                continue;
            }
            let src = e.path();
            let dst = to.join(&name);
            let meta = std::fs::metadata(&src).with_context(|| format!("{}", src.display()))?;
            if meta.is_dir() {
                copy_dir(&src, &dst, false)?;
            } else if meta.is_file() {
                std::fs::copy(&src, &dst)
                    .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
                let exec = meta.permissions().mode() & 0o111 != 0;
                set_mode(&dst, if exec { 0o755 } else { 0o644 })?;
            }
        }
        Ok(())
    }
    copy_dir(from, to, true)
}

/// Writes to a file and hashes what it wrote.
struct HashingWriter<W> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Keep the trace, its meta, the logs of a run. Returns the sha256 (hex) of `trace.jsonl`,
/// which is `flux_instance::trace_digest` of the trace.
pub(crate) fn keep_outputs(dir: &Path, out: &RunOutput) -> Result<String> {
    let f = std::fs::File::create(dir.join("trace.jsonl"))?;
    let mut w = HashingWriter {
        inner: std::io::BufWriter::with_capacity(1 << 20, f),
        hash: Sha256::new(),
    };
    out.trace.write_jsonl(&mut w)?;
    let digest: String = w
        .hash
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
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
    }
    std::fs::write(
        dir.join("trace-meta.json"),
        serde_json::to_string_pretty(&meta)? + "\n",
    )?;
    std::fs::write(dir.join("stdout.txt"), &out.stdout)?;
    std::fs::write(dir.join("stderr.txt"), &out.stderr)?;
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

    #[test]
    fn the_digest_of_trace_jsonl_is_flux_instance_trace_digest() {
        let mut trace = Trace::default();
        for i in 0..1000u64 {
            let mut e = Event::new(i, 1, 1, Kind::Call, Source::Hook);
            e.func = format!("f{i}");
            trace.events.push(e);
        }
        let out = crate::RunOutput {
            trace,
            exit_code: 0,
            timed_out: None,
            killed: None,
            stdout: b"out".to_vec(),
            stderr: Vec::new(),
            image_id: String::new(),
            interpreter_version: "3.11.2".into(),
            labels: Vec::new(),
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
