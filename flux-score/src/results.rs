//! The results file of a scoring run (`flux score --results FILE`, by default beside the
//! answers): what was scored, by which flux, against which instances, with which selection,
//! and the scores, so that a number can be traced back to its inputs.
//!
//! The set is named ([`set_name`]) and pinned by a content digest: sha256 over the selected
//! instances' `repo/id` keys, sorted, each followed by its `oracle.json` bytes (length-prefixed,
//! so that no two different sets hash alike). Each run records the models and sampling settings
//! `flux eval` wrote in its answers' `meta.json` and `summary.json`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::select::Selection;
use crate::source::AnswerSource;
use crate::{Bucket, CallGraphSummary, Estimate, Instance, Report, ScoreError};

/// The set scored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SetInfo {
    pub name: String,
    /// The instance roots given.
    pub roots: Vec<String>,
    /// Instances selected (harvested or not).
    pub instances: usize,
    /// `sha256:<hex>` of the selected instances' keys and gold ([`digest`]).
    pub digest: String,
}

/// One run's scores and where they come from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub name: String,
    /// The answers directory or predictions file.
    pub answers: String,
    /// `answers_dir` or `predictions`.
    pub source: String,
    pub models: Vec<String>,
    /// Each distinct `{model, api, mode, params}` of the answers' meta.json (sampling
    /// settings as sent by `flux eval`).
    pub generation: Vec<Value>,
    /// `summary.json` of the answers directory as `flux eval` wrote it (model, api, samples,
    /// its own selection), without its per-instance lists; `null` when there is none.
    pub eval: Value,
    pub accuracy: f64,
    pub accuracy_ci: [f64; 2],
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    pub infra_errors: usize,
    pub not_harvested: usize,
    pub partial_credit: Estimate,
    pub pass_at_k: BTreeMap<String, Estimate>,
    pub by_kind: BTreeMap<String, Bucket>,
    pub by_repository: BTreeMap<String, Bucket>,
    pub call_graph: CallGraphSummary,
    /// Answers that match no instance of the set (only with `--allow-unmatched`).
    pub unmatched_answers: Vec<String>,
}

/// The whole results file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub flux_version: String,
    /// The git commit flux was built from, when known.
    pub flux_commit: Option<String>,
    /// When it was scored (UTC, RFC 3339).
    pub date: String,
    pub set: SetInfo,
    pub selection: Selection,
    pub call_graph_threshold: f64,
    pub runs: Vec<RunResult>,
}

/// sha256 over the instances' `repo/id` keys, sorted, each with its `oracle.json` bytes
/// (`key\n<len>\n<bytes>\n`; an instance without gold hashes as length `-`).
pub fn digest(instances: &[Instance]) -> String {
    let mut v: Vec<&Instance> = instances.iter().collect();
    v.sort_by_key(|i| i.key());
    let mut h = Sha256::new();
    for i in v {
        h.update(i.key().as_bytes());
        h.update(b"\n");
        match &i.oracle_json {
            Some(b) => {
                h.update(b.len().to_string().as_bytes());
                h.update(b"\n");
                h.update(b.as_bytes());
            }
            None => h.update(b"-"),
        }
        h.update(b"\n");
    }
    let out = h.finalize();
    let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The set's name: the `[generated] set` all its instances share, else the roots as given.
pub fn set_name(roots: &[PathBuf], instances: &[Instance]) -> String {
    let first = instances.first().and_then(|i| i.set.clone());
    if first.is_some() && instances.iter().all(|i| i.set == first) {
        return first.unwrap_or_default();
    }
    roots
        .iter()
        .map(|r| r.display().to_string())
        .collect::<Vec<_>>()
        .join("+")
}

fn generation(instances: &[Instance], answers: &Path, limit: u64) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for i in instances {
        let Ok(Some(m)) = crate::read_json_limited(&answers.join(&i.rel).join("meta.json"), limit)
        else {
            continue;
        };
        let g = json!({
            "model": m.get("model"), "api": m.get("api"),
            "mode": m.get("mode"), "params": m.get("params"),
        });
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

fn eval_summary(answers: &Path, limit: u64) -> Value {
    let Ok(Some(mut s)) = crate::read_json_limited(&answers.join("summary.json"), limit) else {
        return Value::Null;
    };
    if let Some(o) = s.as_object_mut() {
        o.remove("invalid_instances");
        o.remove("infra_error_instances");
    }
    s
}

/// One run's entry.
pub fn run_result(r: &Report, src: &AnswerSource, instances: &[Instance], limit: u64) -> RunResult {
    let (source, generation, eval) = match src {
        AnswerSource::Dir(d) => (
            "answers_dir",
            generation(instances, d, limit),
            eval_summary(d, limit),
        ),
        AnswerSource::Predictions(p) => (
            "predictions",
            p.models()
                .into_iter()
                .map(|m| json!({"model": m}))
                .collect(),
            Value::Null,
        ),
    };
    RunResult {
        name: r.name.clone(),
        answers: r.answers.clone(),
        source: source.into(),
        models: r.usage.models.clone(),
        generation,
        eval,
        accuracy: r.accuracy,
        accuracy_ci: r.accuracy_ci,
        total: r.total,
        passed: r.passed,
        failed: r.failed,
        infra_errors: r.infra_errors,
        not_harvested: r.not_harvested,
        partial_credit: r.partial_credit,
        pass_at_k: r.pass_at_k.clone(),
        by_kind: r.by_kind.clone(),
        by_repository: r.by_repository.clone(),
        call_graph: r.call_graph.clone(),
        unmatched_answers: r.unmatched_answers.clone(),
    }
}

/// Now, UTC, RFC 3339 to the second.
pub fn now_utc() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Write `results` as pretty JSON (creating the parent directory).
pub fn write(path: &Path, results: &Results) -> Result<(), ScoreError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| ScoreError::Io(parent.to_path_buf(), e))?;
    }
    let mut s =
        serde_json::to_string_pretty(results).map_err(|e| ScoreError::Serialize(e.to_string()))?;
    s.push('\n');
    std::fs::write(path, s).map_err(|e| ScoreError::Io(path.to_path_buf(), e))
}
