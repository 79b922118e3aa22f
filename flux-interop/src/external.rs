//! Running SWE-Flux's `parser.py` on flux's trace, in the instance's container.
//!
//! The parser is third-party code: it runs in a fresh container of the instance's image
//! (network off, user 1000, flux-container's limits), never on the host. What it sees:
//! - the instance's files (a copy, read-only) at `<root>/<qa_dir>/`, where SWE-Flux's harness
//!   puts them, because parsers find the repository's source through their own path;
//! - flux's trace as SWE-Flux's log (`crate::sweflux_log`, configured by the instance's
//!   TRACE_* variables) at `/flux/run/trace.log`;
//! - `/flux/out/` writable (the parser's `--out`; `/flux/run` is read-only to programs since
//!   h-iso), read back as untrusted: a link there is refused, never followed.
//!
//! It runs as their `eval.sh` runs it: `<interpreter> <qa_dir>/parser.py --trace-log LOG
//! --out OUT` from `<root>`, with the option their `eval.sh` passes pytest's output through
//! (`--pytest-log`), when it does, given the traced run's output (`/flux/run/pytest.log`). Its answer is the `oracle_answer` of what it writes; it must fit
//! the instance's template. A parser that fails, times out or writes no answer is an error
//! with its output's end: no gold answer is made from it.
use crate::sweflux_log::{self, LogConfig};
use anyhow::{bail, Context, Result};
use flux_container::runtime::{OUT_IN_CONTAINER, RUN_DIR_IN_CONTAINER};
use flux_container::{ContainerSpec, Mount};
use flux_instance::external::ExternalParser;
use flux_instance::Instance;
use flux_trace::Trace;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The directory of a run that holds the parser's inputs and outputs.
pub const PARSER_DIR: &str = "swe-flux-parser";
/// The log it reads, in [`PARSER_DIR`].
pub const LOG_FILE: &str = "trace.log";
/// The test's pytest output, in [`PARSER_DIR`], for a parser that reads it.
pub const PYTEST_OUTPUT_FILE: &str = "pytest.log";
/// What it writes, in [`PARSER_DIR`].
pub const OUT_FILE: &str = "parser-oracle.json";
/// How long a parser may run.
pub const PARSER_TIMEOUT: Duration = Duration::from_secs(300);

/// The label every answer made by an external parser carries.
pub const EXTERNAL_LABEL: &str =
    "external parser: SWE-Flux's parser.py (third-party code, run in the container)";

/// What the parser produced.
#[derive(Clone, Debug)]
pub struct ParserAnswer {
    /// `oracle_answer` of what it wrote (checked against the template).
    pub answer: Value,
    /// The whole of what it wrote.
    pub written: Value,
    /// Lines of the log it read.
    pub log_lines: usize,
    /// The log, on the host.
    pub log: PathBuf,
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC now (ns): the log's times are wall-clock times.
pub fn wall_offset_ns() -> i128 {
    let read = |clock| {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec we own.
        unsafe { libc::clock_gettime(clock, &mut t) };
        t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128
    };
    read(libc::CLOCK_REALTIME) - read(libc::CLOCK_MONOTONIC)
}

/// Write `trace` as SWE-Flux's log for the instance's variables into `dir/trace.log`.
pub fn write_log(ext: &ExternalParser, trace: &Trace, dir: &Path) -> Result<(PathBuf, usize)> {
    let cfg = LogConfig::from_pairs(&ext.log);
    let path = dir.join(LOG_FILE);
    let f = std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    let stats = sweflux_log::write_log(trace, &cfg, wall_offset_ns(), &mut w)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok((path, stats.lines))
}

/// The traced run's pytest output as their harness gave it to a parser (`pytest … 2>&1 | tee`):
/// the run's `stdout.txt`, then its `stderr.txt` (kept apart by the run, so their interleaving
/// is lost; pytest's progress and `-rA` summary are on stdout), into `dir`.
pub fn write_pytest_output(run_dir: &Path, dir: &Path) -> Result<PathBuf> {
    let mut text = Vec::new();
    for f in ["stdout.txt", "stderr.txt"] {
        let p = run_dir.join(f);
        let bytes = std::fs::read(&p).with_context(|| {
            format!(
                "reading {} (the parser reads the test's pytest output)",
                p.display()
            )
        })?;
        text.extend_from_slice(&bytes);
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            text.push(b'\n');
        }
    }
    let path = dir.join(PYTEST_OUTPUT_FILE);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Run the instance's parser on `trace` in a container of its image; `run_dir` is the
/// harvest's run directory (its `instance/` holds the copy of the instance the test saw).
pub async fn run_parser(
    rt: &flux_container::Runtime,
    inst: &Instance,
    trace: &Trace,
    run_dir: &Path,
) -> Result<ParserAnswer> {
    let ext = inst
        .external_parser()
        .context("the instance is not answered by an external parser")?;
    let dir = run_dir.join(PARSER_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (log, log_lines) = write_log(&ext, trace, &dir)?;
    if log_lines == 0 {
        bail!(
            "the SWE-Flux log of this run is empty (no test ran with TRACE_ON=1?): the parser would \
             have nothing to read ({})",
            log.display()
        );
    }
    let parser_in = format!("{}/{}", ext.qa_dir, ext.parser);
    let mut cmd = vec![
        inst.spec.interpreter.clone(),
        parser_in.clone(),
        "--trace-log".into(),
        format!("{RUN_DIR_IN_CONTAINER}/{LOG_FILE}"),
        "--out".into(),
        format!("{OUT_IN_CONTAINER}/{OUT_FILE}"),
    ];
    if let Some(opt) = &ext.pytest_output {
        write_pytest_output(run_dir, &dir)?;
        cmd.push(opt.clone());
        cmd.push(format!("{RUN_DIR_IN_CONTAINER}/{PYTEST_OUTPUT_FILE}"));
    }
    // The one place the parser writes on the host: `<parser dir>/out`, the container user's.
    let out_dir = dir.join("out");
    std::fs::create_dir(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&out_dir, Some(1000), Some(1000))
            .with_context(|| format!("chown {}", out_dir.display()))?;
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o777))?;
    }
    let mut spec = ContainerSpec::new(&inst.spec.image, cmd, &dir);
    spec.mounts
        .push(Mount::read_write(&out_dir, OUT_IN_CONTAINER));
    spec.mounts.push(Mount::read_only(
        run_dir.join("instance"),
        format!("{}/{}", ext.root, ext.qa_dir),
    ));
    spec.workdir = Some(ext.root.clone());
    spec.timeout = PARSER_TIMEOUT;
    spec.labels.insert(
        "flux.instance".into(),
        format!("{}/{} (parser)", inst.spec.repository, inst.id()),
    );
    let outcome = rt
        .run(spec)
        .await
        .with_context(|| format!("running {parser_in} in {}", inst.spec.image))?;
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(12)..].join("\n    | ")
    };
    if outcome.timed_out || outcome.exit_code != 0 {
        bail!(
            "SWE-Flux's parser {parser_in} {} on flux's log ({log_lines} lines, {}):\n    | {}\n    | {}",
            if outcome.timed_out {
                format!("timed out after {}s", PARSER_TIMEOUT.as_secs())
            } else {
                format!("failed with exit code {}", outcome.exit_code)
            },
            log.display(),
            tail(&outcome.stdout),
            tail(&outcome.stderr)
        );
    }
    let out = out_dir.join(OUT_FILE);
    if std::fs::symlink_metadata(&out).is_ok_and(|m| !m.file_type().is_file()) {
        bail!(
            "{} is not a plain file (refused, never followed)",
            out.display()
        );
    }
    let text = std::fs::read_to_string(&out)
        .with_context(|| format!("SWE-Flux's parser exited 0 but wrote no {}", out.display()))?;
    let written: Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: what the parser wrote is not JSON", out.display()))?;
    let answer = written
        .get("oracle_answer")
        .cloned()
        .with_context(|| format!("{}: no `oracle_answer`", out.display()))?;
    inst.template
        .validate(&answer)
        .map_err(|e| anyhow::anyhow!("the parser's answer does not fit the template {e}"))?;
    Ok(ParserAnswer {
        answer,
        written,
        log_lines,
        log,
    })
}

/// SWE-Flux's parsers and stored answers, handed to the harvest
/// (`flux_harvest::HarvestOptions::external`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SweFluxAnswers;

impl flux_harvest::ExternalAnswers for SweFluxAnswers {
    fn label(&self) -> &str {
        EXTERNAL_LABEL
    }

    fn answer<'a>(
        &'a self,
        rt: &'a flux_container::Runtime,
        inst: &'a Instance,
        trace: &'a Trace,
        run_dir: &'a Path,
    ) -> flux_harvest::external::BoxFuture<'a, Result<Value>> {
        Box::pin(async move { Ok(run_parser(rt, inst, trace, run_dir).await?.answer) })
    }

    fn check_reference(&self, inst: &Instance, fresh: &Value) -> Result<bool> {
        Ok(check_reference(inst, fresh)?.is_some())
    }
}

/// The harvest's options with SWE-Flux's answers handed in.
pub fn harvest_options(cache_dir: impl Into<PathBuf>) -> flux_harvest::HarvestOptions {
    let mut o = flux_harvest::HarvestOptions::new(cache_dir);
    o.external = Some(std::sync::Arc::new(SweFluxAnswers));
    o
}

/// `flux harvest --check` of an imported instance: the fresh answer against SWE-Flux's
/// stored one, under their scoring rules (flux-score's SWE-Flux comparison with the
/// instance's order-insensitive lists). `None` when the instance has no stored answer of
/// theirs.
pub fn check_reference(inst: &Instance, fresh: &Value) -> Result<Option<()>> {
    let Some(theirs) = flux_instance::external::read_reference(&inst.dir)? else {
        return Ok(None);
    };
    let opts = flux_score::compare::CompareOptions {
        order_insensitive: inst.spec.order_insensitive.clone(),
    };
    flux_score::compare::compare(&theirs, fresh, &opts).map_err(|m| {
        anyhow::anyhow!(
            "not SWE-Flux's stored answer ({}/oracle.json) under their scoring rules: {m}",
            flux_instance::external::REFERENCE_DIR
        )
    })?;
    Ok(Some(()))
}
