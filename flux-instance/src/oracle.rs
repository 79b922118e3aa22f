//! `oracle.json`: the harvested gold answer with its provenance, and the solver's view of it.
use crate::{InstanceError, Template};
use flux_extract::QuestionKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The name of the oracle file in an instance directory.
pub const ORACLE_FILE: &str = "oracle.json";

/// The SWE-Flux four keys plus flux's provenance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Oracle {
    pub question_kind: QuestionKind,
    pub question: String,
    /// The template, as JSON (not text).
    pub template_answer: Value,
    pub oracle_answer: Value,
    pub provenance: Provenance,
}

/// Where a gold answer came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The container image the traced test ran in (the instance's `image`).
    pub image: String,
    /// The image's content id (`sha256:…`), set by the harvest when it knows it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    /// The image's content identity (`flux-id:…`), which, unlike `image_id`, two builds of one
    /// image definition share (flux-container's `images::identity`); set by the harvest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_identity: String,
    /// The interpreter version the trace reports.
    pub interpreter: String,
    pub flux_version: String,
    /// sha256 (hex) of the trace's JSONL serialisation ([`trace_digest`]).
    pub trace_sha256: String,
    /// RFC 3339 UTC.
    pub harvested_at: String,
    /// The trace was complete (always true for a harvested oracle).
    pub complete: bool,
    /// The trace's labels (e.g. "not reproducible"), carried by everything derived from it.
    #[serde(default)]
    pub labels: Vec<String>,
    pub extractor: String,
    #[serde(default)]
    pub params: Map<String, Value>,
    /// Lists of the answer compared as multisets.
    #[serde(default)]
    pub order_insensitive: Vec<String>,
    /// The independent witness that re-derived this answer from a run of its own, when one did
    /// (issue 23.1: `flux gen` witnesses a seeded sample of its instances, every one of some
    /// kinds; absent: not witnessed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness: Option<Witnessed>,
}

/// How a gold answer was witnessed (`provenance.witness`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Witnessed {
    /// Which witness: `reference` (the plain settrace reference, `flux_harvest::witness`).
    pub by: String,
    /// sha256 (hex) of the witness's trace ([`trace_digest`]): it names the witnessing run.
    pub trace_sha256: String,
    /// `X.Y.Z` of the interpreter it ran under.
    pub interpreter: String,
}

/// What [`write_oracle`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// No oracle existed; it was written.
    Created,
    /// An oracle with the same answer existed; the file was left untouched.
    Unchanged,
    /// An oracle with a different answer existed and was replaced ([`OnConflict::Replace`]).
    Replaced,
}

/// What to do when `oracle.json` holds a different answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnConflict {
    /// Keep the existing file and return [`InstanceError::OracleConflict`].
    Refuse,
    /// Replace it.
    Replace,
}

/// sha256 (lowercase hex) of the trace's JSONL serialisation (`Trace::write_jsonl`).
pub fn trace_digest(trace: &flux_trace::Trace) -> String {
    // Writing into nothing cannot fail.
    write_trace_jsonl(trace, std::io::sink()).unwrap_or_default()
}

/// Write the trace's JSONL serialisation (`Trace::write_jsonl`) into `w`, and return its
/// [`trace_digest`], computed from what was written.
pub fn write_trace_jsonl(trace: &flux_trace::Trace, w: impl Write) -> std::io::Result<String> {
    let mut w = flux_trace::Sha256Writer::new(w);
    trace.write_jsonl(&mut w)?;
    w.finish()
}

/// RFC 3339 UTC timestamp (seconds precision) of a system time.
pub fn utc_timestamp(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Read `dir/oracle.json`, checking its answer against its own template.
pub fn read_oracle(dir: impl AsRef<Path>) -> Result<Oracle, InstanceError> {
    let path = dir.as_ref().join(ORACLE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| InstanceError::Io {
        path: path.clone(),
        source,
    })?;
    parse_oracle(&path, &text)
}

/// Parse `text` as the oracle file `path`, checking its answer against its own template
/// (what [`read_oracle`] does once it has read the file).
pub fn parse_oracle(path: &Path, text: &str) -> Result<Oracle, InstanceError> {
    let path = path.to_path_buf();
    let oracle: Oracle = serde_json::from_str(text).map_err(|e| {
        let msg = e.to_string();
        let field = msg
            .split('`')
            .nth(1)
            .filter(|_| msg.starts_with("unknown field") || msg.starts_with("missing field"))
            .unwrap_or("(document)")
            .to_string();
        InstanceError::Invalid {
            path: path.clone(),
            at: format!(":{}:{}", e.line(), e.column()),
            field,
            problem: msg,
        }
    })?;
    let template =
        Template::from_value(&oracle.template_answer).map_err(|e| InstanceError::Invalid {
            path: path.clone(),
            at: String::new(),
            field: "template_answer".into(),
            problem: e.to_string(),
        })?;
    template
        .validate(&oracle.oracle_answer)
        .map_err(|e| InstanceError::Invalid {
            path: path.clone(),
            at: String::new(),
            field: "oracle_answer".into(),
            problem: format!("does not fit template_answer {e}"),
        })?;
    Ok(oracle)
}

/// The directory of an instance holding the gold files it once had: `history/<UTC time>-<file>`,
/// one per replacement (`flux harvest --replace`). Run directories are pruned; this is not.
pub const HISTORY_DIR: &str = "history";

/// Copy `dir/name` into `dir/history/<now>-<name>` (a `-1`, `-2`, … suffix when that exists)
/// before it is replaced. Returns the copy's path.
fn keep_in_history(dir: &Path, name: &str) -> Result<std::path::PathBuf, InstanceError> {
    use std::os::unix::fs::OpenOptionsExt;
    let history = dir.join(HISTORY_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InstanceError::Io { path, source }
    };
    std::fs::create_dir_all(&history).map_err(io(&history))?;
    let old = std::fs::read(dir.join(name)).map_err(io(&dir.join(name)))?;
    let stamp: String = utc_timestamp(std::time::SystemTime::now())
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    for n in 0.. {
        let file = match n {
            0 => format!("{stamp}-{name}"),
            n => format!("{stamp}-{n}-{name}"),
        };
        let p = history.join(file);
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p);
        match opened {
            Ok(mut f) => {
                f.write_all(&old)
                    .and_then(|_| f.sync_all())
                    .map_err(io(&p))?;
                return Ok(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(&p)(e)),
        }
    }
    unreachable!("an unbounded range ends only by returning")
}

/// What an instance holds where a new answer (`oracle.json`'s `oracle_answer`, or
/// `callgraph.json`) would be written: checked once, then written over with
/// [`write_oracle_over`] / [`write_call_graph_over`] (a harvest checks both files before it
/// writes either).
#[derive(Debug)]
pub enum Stored {
    /// No file: writing creates it.
    Absent,
    /// The same answer: writing changes nothing.
    Same,
    /// A different answer, this one.
    Differs(Value),
    /// A file that cannot be read as one: it counts as different.
    Unreadable(InstanceError),
}

impl Stored {
    /// The conflict `on_conflict` makes of it, if any (`new`: the answer to be written).
    fn conflict(
        &self,
        path: PathBuf,
        new: &Value,
        on_conflict: OnConflict,
    ) -> Option<InstanceError> {
        let old = match self {
            Stored::Absent | Stored::Same => return None,
            _ if on_conflict == OnConflict::Replace => return None,
            Stored::Differs(old) => old.to_string(),
            Stored::Unreadable(_) => "(unreadable)".into(),
        };
        Some(InstanceError::OracleConflict {
            path,
            old,
            new: new.to_string(),
        })
    }
}

/// What `dir/oracle.json` holds where `oracle`'s answer would go.
pub fn stored_oracle(dir: impl AsRef<Path>, oracle: &Oracle) -> Stored {
    let dir = dir.as_ref();
    if !dir.join(ORACLE_FILE).exists() {
        return Stored::Absent;
    }
    match read_oracle(dir) {
        Ok(old) if old.oracle_answer == oracle.oracle_answer => Stored::Same,
        Ok(old) => Stored::Differs(old.oracle_answer),
        Err(e) => Stored::Unreadable(e),
    }
}

/// Write `dir/oracle.json` atomically (a temporary file in `dir`, then rename). An existing
/// oracle with the same `oracle_answer` is left untouched; one with a different answer is kept
/// and reported as a conflict unless `on_conflict` is [`OnConflict::Replace`], and then kept in
/// [`HISTORY_DIR`]. An existing file that cannot be read as an oracle counts as different.
pub fn write_oracle(
    dir: impl AsRef<Path>,
    oracle: &Oracle,
    on_conflict: OnConflict,
) -> Result<WriteOutcome, InstanceError> {
    let dir = dir.as_ref();
    let stored = stored_oracle(dir, oracle);
    if let Some(e) = stored.conflict(dir.join(ORACLE_FILE), &oracle.oracle_answer, on_conflict) {
        return Err(e);
    }
    write_oracle_over(dir, oracle, &stored)
}

/// Write `dir/oracle.json` over what [`stored_oracle`] found there: nothing when it is the same
/// answer, a different one replaced (and kept in [`HISTORY_DIR`]).
pub fn write_oracle_over(
    dir: impl AsRef<Path>,
    oracle: &Oracle,
    stored: &Stored,
) -> Result<WriteOutcome, InstanceError> {
    write_over(dir.as_ref(), ORACLE_FILE, oracle, stored)
}

/// Write `value` as `dir/name` over what was found there (see [`Stored`]).
fn write_over(
    dir: &Path,
    name: &str,
    value: &impl Serialize,
    stored: &Stored,
) -> Result<WriteOutcome, InstanceError> {
    let outcome = match stored {
        Stored::Same => return Ok(WriteOutcome::Unchanged),
        Stored::Absent => WriteOutcome::Created,
        Stored::Differs(_) | Stored::Unreadable(_) => {
            keep_in_history(dir, name)?;
            WriteOutcome::Replaced
        }
    };
    write_json_atomically(dir, name, value)?;
    Ok(outcome)
}

/// Write `value` as pretty JSON to `dir/name` through a temporary file in `dir` and a rename.
fn write_json_atomically(
    dir: &Path,
    name: &str,
    value: &impl Serialize,
) -> Result<(), InstanceError> {
    let path = dir.join(name);
    let io = |source| InstanceError::Io {
        path: path.clone(),
        source,
    };
    let mut text = serde_json::to_string_pretty(value).map_err(|e| io(std::io::Error::other(e)))?;
    text.push('\n');
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        // A stale temporary file of a crashed process with this pid is removed, never written
        // through (`O_NOFOLLOW`, `O_EXCL`).
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

/// The name of the TraceEval-style call graph file in an instance directory.
pub const CALL_GRAPH_FILE: &str = "callgraph.json";

/// Read `dir/callgraph.json` (`{caller: [callees]}`).
pub fn read_call_graph(dir: impl AsRef<Path>) -> Result<Value, InstanceError> {
    let path = dir.as_ref().join(CALL_GRAPH_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| InstanceError::Io {
        path: path.clone(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| InstanceError::Invalid {
        path: path.clone(),
        at: format!(":{}:{}", e.line(), e.column()),
        field: "(document)".into(),
        problem: e.to_string(),
    })?;
    let shape = Template::parse(r#"{"*": ["str"]}"#).map_err(|e| InstanceError::Invalid {
        path: path.clone(),
        at: String::new(),
        field: "(document)".into(),
        problem: e.to_string(),
    })?;
    shape.validate(&v).map_err(|e| InstanceError::Invalid {
        path: path.clone(),
        at: String::new(),
        field: "(document)".into(),
        problem: format!("not a {{caller: [callees]}} map {e}"),
    })?;
    Ok(v)
}

/// What `dir/callgraph.json` holds where `graph` would go.
pub fn stored_call_graph(dir: impl AsRef<Path>, graph: &Value) -> Stored {
    let dir = dir.as_ref();
    if !dir.join(CALL_GRAPH_FILE).exists() {
        return Stored::Absent;
    }
    match read_call_graph(dir) {
        Ok(old) if &old == graph => Stored::Same,
        Ok(old) => Stored::Differs(old),
        Err(e) => Stored::Unreadable(e),
    }
}

/// Write `dir/callgraph.json` atomically, with the same conflict rule as [`write_oracle`].
pub fn write_call_graph(
    dir: impl AsRef<Path>,
    graph: &Value,
    on_conflict: OnConflict,
) -> Result<WriteOutcome, InstanceError> {
    let dir = dir.as_ref();
    let stored = stored_call_graph(dir, graph);
    if let Some(e) = stored.conflict(dir.join(CALL_GRAPH_FILE), graph, on_conflict) {
        return Err(e);
    }
    write_call_graph_over(dir, graph, &stored)
}

/// Write `dir/callgraph.json` over what [`stored_call_graph`] found there.
pub fn write_call_graph_over(
    dir: impl AsRef<Path>,
    graph: &Value,
    stored: &Stored,
) -> Result<WriteOutcome, InstanceError> {
    write_over(dir.as_ref(), CALL_GRAPH_FILE, graph, stored)
}

/// What a solver sees: the oracle without `oracle_answer` (and without provenance), i.e.
/// SWE-Flux's `question.json`: `question_kind`, `question`, `template_answer`.
pub fn question_json(oracle: &Oracle) -> Value {
    serde_json::json!({
        "question_kind": oracle.question_kind,
        "question": oracle.question,
        "template_answer": oracle.template_answer,
    })
}
