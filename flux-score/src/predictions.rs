//! Predictions JSONL, SWE-bench's exchange format for answers: one JSON object a line,
//! `{"instance_id": "…", "answer": {…}, "model_name_or_path": "…"}` (the last optional).
//!
//! `instance_id` is an instance's `id` or its `repo/id` key; `answer` is what `answer.json`
//! would hold (`null`: no answer). Blank lines are skipped. A line that is not such an object,
//! a duplicate `instance_id`, or a line over the answer size limit is an error naming the line:
//! a predictions file is read whole or not at all. Answers directories (`flux eval`'s output)
//! convert to this format with [`write`]; only sample 1 of each instance is carried, and an
//! answer that is missing, unreadable or an infrastructure error is left out (so scored as no
//! answer).

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use crate::{Instance, LoadedAnswer, ScoreError};

/// One line of a predictions file.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub instance_id: String,
    /// `None` for `"answer": null`.
    pub answer: Option<Value>,
    pub model_name_or_path: Option<String>,
    /// 1-based line number.
    pub line: usize,
}

/// Predictions by the `repo/id` key of their instance (`None`: `"answer": null`).
pub type Resolved = BTreeMap<String, Option<Value>>;

/// A whole predictions file.
#[derive(Debug, Clone, PartialEq)]
pub struct Predictions {
    pub path: PathBuf,
    pub predictions: Vec<Prediction>,
}

fn bad(path: &Path, line: usize, why: impl std::fmt::Display) -> ScoreError {
    ScoreError::Predictions(format!("{}:{line}: {why}", path.display()))
}

/// Read one line of at most `limit` bytes (without its newline); `None` at the end.
fn next_line(
    r: &mut impl BufRead,
    limit: u64,
    path: &Path,
    n: usize,
) -> Result<Option<Vec<u8>>, ScoreError> {
    use std::io::Read;
    let mut buf = Vec::new();
    r.by_ref()
        .take(limit + 2)
        .read_until(b'\n', &mut buf)
        .map_err(|e| ScoreError::Io(path.to_path_buf(), e))?;
    if buf.is_empty() {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() as u64 > limit {
        return Err(bad(
            path,
            n,
            format!("longer than the answer size limit of {limit} bytes (--max-answer-bytes)"),
        ));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(buf))
}

/// Read a predictions file; every line over `limit` bytes, not an object with a string
/// `instance_id` and an `answer`, or repeating an `instance_id`, is an error naming its line.
pub fn read(path: &Path, limit: u64) -> Result<Predictions, ScoreError> {
    // Opening a FIFO would block until someone writes to it.
    let m = std::fs::metadata(path).map_err(|e| ScoreError::Io(path.to_path_buf(), e))?;
    if !m.is_file() {
        return Err(ScoreError::Io(
            path.to_path_buf(),
            std::io::Error::other("not a regular file (a FIFO, socket or device is not read)"),
        ));
    }
    let f = std::fs::File::open(path).map_err(|e| ScoreError::Io(path.to_path_buf(), e))?;
    let mut r = std::io::BufReader::new(f);
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut n = 0;
    while let Some(bytes) = next_line(&mut r, limit, path, n + 1)? {
        n += 1;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(path, n, format!("not JSON: {e}")))?;
        let Some(o) = v.as_object() else {
            return Err(bad(path, n, "not a JSON object"));
        };
        let id = match o.get("instance_id") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            Some(_) => return Err(bad(path, n, "`instance_id` is not a non-empty string")),
            None => return Err(bad(path, n, "no `instance_id`")),
        };
        let answer = match o.get("answer") {
            Some(Value::Null) => None,
            Some(a) => Some(a.clone()),
            None => return Err(bad(path, n, format!("{id}: no `answer`"))),
        };
        let model = match o.get("model_name_or_path") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad(path, n, "`model_name_or_path` is not a string")),
        };
        if let Some(first) = seen.insert(id.clone(), n) {
            return Err(bad(
                path,
                n,
                format!("duplicate instance_id {id} (first on line {first})"),
            ));
        }
        out.push(Prediction {
            instance_id: id,
            answer,
            model_name_or_path: model,
            line: n,
        });
    }
    Ok(Predictions {
        path: path.to_path_buf(),
        predictions: out,
    })
}

impl Predictions {
    /// The models named by `model_name_or_path`, in first-seen order.
    pub fn models(&self) -> Vec<String> {
        let mut m: Vec<String> = Vec::new();
        for p in &self.predictions {
            if let Some(x) = &p.model_name_or_path {
                if !m.contains(x) {
                    m.push(x.clone());
                }
            }
        }
        m
    }

    /// Each prediction's instance (`repo/id` key → answer), and the ids that name no instance
    /// of `instances`. An `id` that two repositories share is ambiguous: an error unless it is
    /// written `repo/id`.
    pub fn resolve(&self, instances: &[Instance]) -> Result<(Resolved, Vec<String>), ScoreError> {
        let mut by_id: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for i in instances {
            by_id.entry(i.id.as_str()).or_default().push(i.key());
        }
        let keys: std::collections::BTreeSet<String> =
            instances.iter().map(Instance::key).collect();
        let mut found = BTreeMap::new();
        let mut unmatched = Vec::new();
        for p in &self.predictions {
            let key = if keys.contains(&p.instance_id) {
                p.instance_id.clone()
            } else {
                match by_id.get(p.instance_id.as_str()).map(Vec::as_slice) {
                    Some([k]) => k.clone(),
                    Some(ks) => {
                        return Err(bad(
                            &self.path,
                            p.line,
                            format!(
                                "instance_id {} is ambiguous ({}): write repo/id",
                                p.instance_id,
                                ks.join(", ")
                            ),
                        ))
                    }
                    None => {
                        unmatched.push(p.instance_id.clone());
                        continue;
                    }
                }
            };
            if found.insert(key.clone(), p.answer.clone()).is_some() {
                return Err(bad(
                    &self.path,
                    p.line,
                    format!("instance_id {} names {key} a second time", p.instance_id),
                ));
            }
        }
        Ok((found, unmatched))
    }
}

/// Write the answers of `instances` found in the answers directory `answers` as predictions
/// JSONL (`model_name_or_path` from each answer's meta.json when there is one); returns how
/// many lines were written.
pub fn write(
    instances: &[Instance],
    answers: &Path,
    limit: u64,
    out: &mut impl Write,
) -> std::io::Result<usize> {
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    for i in instances {
        *ids.entry(i.id.as_str()).or_default() += 1;
    }
    let mut n = 0;
    for i in instances {
        // The id alone when no other instance has it, as SWE-bench's ids; else `repo/id`.
        let id = if ids.get(i.id.as_str()) == Some(&1) {
            i.id.clone()
        } else {
            i.key()
        };
        let dir = answers.join(&i.rel);
        let answer = match crate::load_answer_file(&dir, "answer.json", limit) {
            LoadedAnswer::Answer(a) => a,
            LoadedAnswer::Unparseable(_) | LoadedAnswer::TooLarge(_) => Value::Null,
            LoadedAnswer::Missing | LoadedAnswer::InfraError(_) => continue,
        };
        let model = crate::read_json_limited(&dir.join("meta.json"), limit)
            .ok()
            .flatten()
            .and_then(|m| m.get("model").and_then(Value::as_str).map(String::from));
        let mut line = json!({"instance_id": id, "answer": answer});
        if let Some(m) = model {
            line["model_name_or_path"] = Value::String(m);
        }
        writeln!(out, "{line}")?;
        n += 1;
    }
    Ok(n)
}
