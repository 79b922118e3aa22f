//! One measured run of an instance's test in its container, without screening or writing any
//! gold file: what `flux bench-run` and `cargo xtask bench harvest` time. A traced run's
//! complete trace is handed to the instance's extractor ([`TestRun::gold`]): a cost figure
//! counts only with the gold answer it was paid for.
//!
//! The run is the harvest's own (same run directory layout, container, gate and command); only
//! the witness differs ([`Witness`]): flux's tracer with [`HarvestOptions::calls`], or none at
//! all with extra files and environment (an untraced baseline, or another tracer injected the
//! way flux's hook is: `PYTHONPATH` into the run directory, `PYTEST_PLUGINS`).
use crate::{docker, rundir, HarvestOptions, TracedRun};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What watches the program in [`run_test`].
#[derive(Clone, Debug)]
pub enum Witness {
    /// flux's tracer: USDT and the hook as [`HarvestOptions::calls`] plans them.
    Flux,
    /// No flux tracer. `files` (path relative to the run directory's `shared/`, contents) are
    /// written there, readable by everyone, before the container is created; `env` is added
    /// to the container's environment. `shared/` is at
    /// [`flux_container::runtime::RUN_DIR_IN_CONTAINER`] in the container (read-only), and
    /// `<run dir>/out` at [`flux_container::runtime::OUT_IN_CONTAINER`] (writable; read it as
    /// untrusted: [`read_untrusted`]).
    Untraced {
        env: Vec<(String, String)>,
        files: Vec<(String, Vec<u8>)>,
    },
}

/// What one [`run_test`] measured.
#[derive(Clone, Debug, Serialize)]
pub struct TestRun {
    /// `<repository>/<id>`.
    pub name: String,
    pub run_dir: PathBuf,
    /// The test command's exit code (128 + signal when killed).
    pub exit_code: i32,
    pub timed_out: bool,
    /// The program's wall time: from the gate's release to its exit.
    pub program_seconds: f64,
    /// From the run directory's creation to the container removed and (traced) the trace merged.
    pub total_seconds: f64,
    /// Traced runs: events in the merged trace, lost events, completeness, counts per
    /// `source.kind`, and why the trace is incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_events: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
    /// Traced runs: events (test boundaries aside) that fall inside a pytest test window (from a
    /// test's start to its end, by timestamp): what a tracer on only while tests run would keep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_in_tests: Option<u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Traced runs: the instance's extractor applied to the trace (after the program's wall
    /// time was taken), or why there is no gold answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gold: Option<RunGold>,
}

/// The gold answer of one traced run ([`TestRun::gold`]).
#[derive(Clone, Debug, Serialize)]
pub struct RunGold {
    /// `sha256:` of the answer's canonical JSON; `None` when there is none.
    pub sha256: Option<String>,
    /// The answer's size (`flux_extract::answer_size`).
    pub size: Option<u64>,
    /// Why there is no answer: an incomplete trace or the extractor's refusal.
    pub error: Option<String>,
}

impl RunGold {
    fn of(inst: &flux_instance::Instance, trace: &flux_trace::Trace) -> RunGold {
        if !trace.meta.complete {
            return RunGold {
                sha256: None,
                size: None,
                error: Some("the trace is incomplete".into()),
            };
        }
        match inst.extract(trace) {
            Ok(answer) => {
                use sha2::Digest;
                let text = serde_json::to_string(&answer).unwrap_or_default();
                RunGold {
                    sha256: Some(format!(
                        "sha256:{:x}",
                        sha2::Sha256::digest(text.as_bytes())
                    )),
                    size: Some(flux_extract::answer_size(&answer) as u64),
                    error: None,
                }
            }
            Err(e) => RunGold {
                sha256: None,
                size: None,
                error: Some(e.to_string()),
            },
        }
    }
}

/// Run the test of the instance in `dir` once in its image (Docker only), watched by `witness`.
/// `stdout.txt`, `stderr.txt` (and `trace-meta.json` when traced) are kept in the run
/// directory; nothing is written to the instance.
pub async fn run_test(dir: &Path, opts: &HarvestOptions, witness: &Witness) -> Result<TestRun> {
    let t0 = Instant::now();
    let inst = flux_instance::load_instance(dir)?;
    let name = format!("{}/{}", inst.spec.repository, inst.id());
    let rt = flux_container::Runtime::connect()
        .await
        .context("run_test runs in Docker only")?;
    let (run_dir, _in_use) = rundir::make(&opts.cache_dir, &inst, opts.runs_max_bytes)?;
    match witness {
        Witness::Flux => {
            flux_agent::tracer::can_trace()
                .map_err(|e| anyhow::anyhow!("cannot trace here: {e}"))?;
            // Nothing of the trace is written here: the run keeps what the answer reads.
            let scope = opts.scope.unwrap_or(inst.spec.tracing.scope);
            let keep = inst.keep_for_answer(scope);
            let keeps = docker::Keeps {
                keep,
                whole_trace: None,
            };
            let out = docker::run(&rt, &inst, &run_dir, opts, keeps).await?;
            let total_seconds = t0.elapsed().as_secs_f64();
            rundir::write_new(&run_dir, "stdout.txt", &out.stdout)?;
            rundir::write_new(&run_dir, "stderr.txt", &out.stderr)?;
            let m = &out.trace.meta;
            rundir::write_new(
                &run_dir,
                "trace-meta.json",
                (serde_json::to_string_pretty(m)? + "\n").as_bytes(),
            )?;
            Ok(TestRun {
                name,
                run_dir,
                exit_code: out.exit_code,
                timed_out: out.timed_out.is_some(),
                program_seconds: out.program_seconds,
                total_seconds,
                events: Some(out.trace.events.len() as u64 + not_kept(m, "")),
                lost_events: Some(m.lost_events),
                complete: Some(m.complete),
                events_in_tests: Some(events_in_tests(&out.trace) + not_kept(m, "_in_tests")),
                counts: m.counts.clone(),
                problems: m.problems.clone(),
                gold: Some(RunGold::of(&inst, &out.trace)),
            })
        }
        Witness::Untraced { env, files } => {
            write_files(&rundir::shared(&run_dir), files)?;
            let mut env = env.clone();
            // As traced runs have it (the instance is mounted read-only).
            env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
            let (outcome, took) = docker::run_untraced(&rt, &inst, &run_dir, &env).await?;
            rundir::write_new(&run_dir, "stdout.txt", &outcome.stdout)?;
            rundir::write_new(&run_dir, "stderr.txt", &outcome.stderr)?;
            Ok(TestRun {
                name,
                run_dir,
                exit_code: if outcome.timed_out {
                    128 + libc::SIGKILL
                } else {
                    i32::try_from(outcome.exit_code).unwrap_or(-1)
                },
                timed_out: outcome.timed_out,
                program_seconds: took.as_secs_f64(),
                total_seconds: t0.elapsed().as_secs_f64(),
                events: None,
                lost_events: None,
                complete: None,
                events_in_tests: None,
                counts: BTreeMap::new(),
                problems: Vec::new(),
                gold: None,
            })
        }
    }
}

/// Run `inst`'s test once in its image (Docker only) under flux's tracer, exactly as a harvest
/// does, and hand back the merged trace without extracting, screening or writing anything to
/// the instance: what `flux gen` builds its scout profiles and shared module traces from.
/// The instance need not be on disk as loaded; `inst.dir` is copied into the run directory.
pub async fn run_traced(
    rt: &flux_container::Runtime,
    inst: &flux_instance::Instance,
    opts: &HarvestOptions,
) -> Result<TracedRun> {
    flux_agent::tracer::can_trace().map_err(|e| anyhow::anyhow!("cannot trace here: {e}"))?;
    let (run_dir, _in_use) = rundir::make(&opts.cache_dir, inst, opts.runs_max_bytes)?;
    let out = docker::run(rt, inst, &run_dir, opts, docker::Keeps::all()).await?;
    rundir::write_new(&run_dir, "stdout.txt", &out.stdout)?;
    rundir::write_new(&run_dir, "stderr.txt", &out.stderr)?;
    rundir::write_new(
        &run_dir,
        "trace-meta.json",
        (serde_json::to_string_pretty(&out.trace.meta)? + "\n").as_bytes(),
    )?;
    Ok(out)
}

/// The merge's count of events its rule `keep` cut (`merge.events_not_kept{suffix}`): a run's
/// event figures are of everything it merged, kept or not.
pub(crate) fn not_kept(m: &flux_trace::Meta, suffix: &str) -> u64 {
    m.counts
        .get(&format!("merge.events_not_kept{suffix}"))
        .copied()
        .unwrap_or(0)
}

/// Events of `trace` (test boundaries aside) with a timestamp inside a test's window.
fn events_in_tests(trace: &flux_trace::Trace) -> u64 {
    use flux_trace::Kind;
    let mut windows = Vec::new();
    let mut open: Option<u64> = None;
    let mut ts: Vec<u64> = Vec::with_capacity(trace.events.len());
    for e in &trace.events {
        match e.ev {
            Kind::TestStart => open = Some(e.ts),
            Kind::TestEnd => {
                if let Some(s) = open.take() {
                    windows.push((s, e.ts));
                }
            }
            _ => ts.push(e.ts),
        }
    }
    windows.sort_unstable();
    ts.iter()
        .filter(|t| {
            let i = windows.partition_point(|w| w.0 <= **t);
            i > 0 && **t <= windows[i - 1].1
        })
        .count() as u64
}

/// The regular files directly in `dir` (made writable for a container) whose name passes
/// `keep`, read as hostile ([`open_untrusted`]), each read through a callback in pieces rather
/// than held. Returns how many files were read.
pub fn read_untrusted(
    dir: &Path,
    keep: impl Fn(&str) -> bool,
    mut piece: impl FnMut(&[u8]),
) -> Result<u64> {
    use std::io::Read;
    let mut files = 0;
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !keep(&name) {
            continue;
        }
        let p = e.path();
        let mut f = open_untrusted(&p)?;
        files += 1;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let k = f
                .read(&mut buf)
                .with_context(|| format!("{}", p.display()))?;
            if k == 0 {
                break;
            }
            piece(&buf[..k]);
        }
    }
    Ok(files)
}

/// Open a file test code could have made, as hostile: no link followed (`O_NOFOLLOW`), nothing
/// but a regular file (a FIFO is opened non-blocking and refused).
pub(crate) fn open_untrusted(p: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)
        .with_context(|| format!("{} (links are not followed)", p.display()))?;
    if !f.metadata()?.is_file() {
        anyhow::bail!("{} is not a regular file", p.display());
    }
    Ok(f)
}

/// Write `files` under `run_dir` (no absolute paths, no `..`), directories 0755, files 0644.
pub(crate) fn write_files(run_dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for (rel, bytes) in files {
        let r = Path::new(rel);
        if r.is_absolute() || r.components().any(|c| c == std::path::Component::ParentDir) {
            anyhow::bail!("{rel}: must be relative to the run directory, without `..`");
        }
        let p = run_dir.join(r);
        let mut made = Vec::new();
        let mut d = p.parent();
        while let Some(x) = d {
            if x == run_dir || x.exists() {
                break;
            }
            made.push(x.to_path_buf());
            d = x.parent();
        }
        for x in made.iter().rev() {
            std::fs::create_dir(x).with_context(|| format!("creating {}", x.display()))?;
            std::fs::set_permissions(x, std::fs::Permissions::from_mode(0o755))?;
        }
        let dir = p.parent().unwrap_or(run_dir);
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or(rel);
        rundir::write_new(dir, name, bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_written_under_the_run_dir_readable_by_all() {
        let d = tempfile::tempdir().unwrap();
        super::write_files(
            d.path(),
            &[
                ("ref/tracer.py".into(), b"x = 1\n".to_vec()),
                ("top.txt".into(), b"t".to_vec()),
            ],
        )
        .unwrap();
        let p = d.path().join("ref/tracer.py");
        assert_eq!(std::fs::read(&p).unwrap(), b"x = 1\n");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        let dir = d.path().join("ref");
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert!(d.path().join("top.txt").is_file());
    }

    #[test]
    fn files_outside_the_run_dir_are_refused() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["../x", "/etc/x", "a/../../x"] {
            assert!(
                super::write_files(d.path(), &[(bad.into(), Vec::new())]).is_err(),
                "{bad}"
            );
        }
    }

    /// 17.6: what a container wrote is read back without following links or blocking on FIFOs.
    #[test]
    fn untrusted_files_are_read_without_following_links_or_fifos() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("reference-1.log"), "a\nb\n").unwrap();
        let mut all = Vec::new();
        let n = super::read_untrusted(
            d.path(),
            |n| n.starts_with("reference-"),
            |b| all.extend_from_slice(b),
        )
        .unwrap();
        assert_eq!((n, all.as_slice()), (1, &b"a\nb\n"[..]));
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("reference-2.log")).unwrap();
        let e = super::read_untrusted(d.path(), |n| n == "reference-2.log", |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("links are not followed"), "{e:#}");
        let c = std::ffi::CString::new(d.path().join("reference-3.log").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = super::read_untrusted(d.path(), |n| n == "reference-3.log", |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("is not a regular file"), "{e:#}");
    }

    #[test]
    fn events_in_tests_counts_what_falls_inside_test_windows() {
        use flux_trace::{Event, Kind, Source, Trace};
        let mut t = Trace::default();
        for (ts, k) in [
            (1, Kind::Call),
            (2, Kind::TestStart),
            (3, Kind::Call),
            (4, Kind::Return),
            (5, Kind::TestEnd),
            (6, Kind::Call),
            (7, Kind::TestStart),
            (8, Kind::Line),
            (9, Kind::TestEnd),
        ] {
            t.events.push(Event::new(ts, 1, 1, k, Source::Hook));
        }
        assert_eq!(super::events_in_tests(&t), 3);
    }

    #[test]
    fn harvest_options_default_to_auto_calls() {
        let o = crate::HarvestOptions::new("/tmp/x");
        assert_eq!(o.calls, flux_agent::merge::CallsMode::Auto);
    }
}
