//! flux-score: pass/fail scoring of answers against harvested gold, with SWE-Flux semantics.
//!
//! Inputs are an instance store (`<root>/<repo>/<id>/instance.toml` + `oracle.json`) and an
//! answers directory in the SWE-Flux layout (`<answers>/<repo>/<id>/answer.json`, plus an
//! optional `meta.json` written by `flux-eval` whose `status` is `ok`, `infra_error` or
//! `unparseable`). Every instance gets a verdict and, when it fails, the reason (JSON pointer,
//! expected, got). Infrastructure errors are excluded from accuracy and counted on their own;
//! instances without `oracle.json` are "not harvested" and only listed.
//!
//! Call-graph answers (`{"call_graph": {caller: [callees]}}`) are scored by edge F1 (pass when
//! F1 ≥ [`ScoreOptions::call_graph_threshold`]) and summarised separately by micro P/R/F1.
//!
//! Architecture invariant: this crate knows nothing about how answers were produced; it only
//! reads files. It does not depend on `flux-instance`.

pub mod callgraph;
pub mod compare;
pub mod instance;
pub mod report;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use callgraph::EdgeCounts;
pub use compare::{compare, CompareOptions, Mismatch};
pub use instance::{discover, discover_all, Discovered, Instance, InvalidInstance};

/// Errors of the scorer. Problems with one answer are verdicts, not errors; these are only
/// for inputs the scorer cannot read at all.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    #[error("{0}: not a directory")]
    NotADirectory(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("{0}: invalid instance file: {1}")]
    Instance(PathBuf, String),
    #[error("serialising the report: {0}")]
    Serialize(String),
}

/// Output format of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Text,
    Json,
    Html,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "text" | "txt" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "html" => Ok(Format::Html),
            other => Err(format!("unknown format {other:?} (text, json, html)")),
        }
    }
}

/// Options of `flux score`.
#[derive(Debug, Clone)]
pub struct ScoreOptions {
    /// Answers directory (`<answers>/<repo>/<id>/answer.json`).
    pub answers: PathBuf,
    /// Instance roots (default `instances`).
    pub instances: Vec<PathBuf>,
    /// Pass threshold on edge F1 for call-graph instances (default 1.0).
    pub call_graph_threshold: f64,
    pub format: Format,
    /// Write the rendered report here; `None` means the caller prints [`ScoreOutput::rendered`].
    pub out: Option<PathBuf>,
}

impl ScoreOptions {
    pub fn new(answers: impl Into<PathBuf>) -> Self {
        ScoreOptions {
            answers: answers.into(),
            instances: vec![PathBuf::from("instances")],
            call_graph_threshold: 1.0,
            format: Format::Text,
            out: None,
        }
    }
}

/// Verdict of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    /// Excluded from accuracy: the answer could not be obtained for infrastructure reasons.
    InfraError,
    /// No oracle.json: not scored.
    NotHarvested,
}

/// Call-graph metrics of one instance.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct CallGraphScore {
    pub tp: usize,
    pub fp: usize,
    #[serde(rename = "fn")]
    pub fn_: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceResult {
    pub id: String,
    pub repo: String,
    pub kind: String,
    /// `true`/`false`; `null` when the instance was not scored (infra error, not harvested).
    pub pass: Option<bool>,
    pub status: Status,
    /// Why it failed (or why it was not scored); `null` on pass.
    pub reason: Option<String>,
    /// JSON pointer of the first difference, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_graph: Option<CallGraphScore>,
}

/// Totals of a group of instances.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Bucket {
    /// Scored instances (infra errors and not-harvested ones excluded).
    pub total: usize,
    pub passed: usize,
    /// passed / total (0 when total is 0).
    pub accuracy: f64,
    pub infra_errors: usize,
}

impl Bucket {
    fn add(&mut self, r: &InstanceResult) {
        match r.status {
            Status::Pass => {
                self.total += 1;
                self.passed += 1;
            }
            Status::Fail => self.total += 1,
            Status::InfraError => self.infra_errors += 1,
            Status::NotHarvested => {}
        }
        self.accuracy = if self.total == 0 {
            0.0
        } else {
            self.passed as f64 / self.total as f64
        };
    }
}

/// Micro-averaged call-graph metrics over all call-graph instances.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CallGraphSummary {
    pub instances: usize,
    pub passed: usize,
    pub threshold: f64,
    pub tp: usize,
    pub fp: usize,
    #[serde(rename = "fn")]
    pub fn_: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// Usage recorded by `flux-eval` in the answers' meta.json files (zero when there are none).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    /// Answers that have a meta.json.
    pub with_meta: usize,
    pub models: Vec<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// USD, summed over answers with a known price.
    pub cost: f64,
    /// Sum of per-instance wall time.
    pub seconds: f64,
}

/// The scoring report (its JSON form is the `--format json` output).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub answers: String,
    /// passed / total over scored instances (0–1).
    pub accuracy: f64,
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    pub infra_errors: usize,
    pub not_harvested: usize,
    pub by_kind: BTreeMap<String, Bucket>,
    pub by_repository: BTreeMap<String, Bucket>,
    /// kind → repository → bucket.
    pub by_kind_repository: BTreeMap<String, BTreeMap<String, Bucket>>,
    pub instances: Vec<InstanceResult>,
    pub call_graph: CallGraphSummary,
    pub usage: Usage,
    /// Instance directories that could not be read (not counted anywhere else).
    pub invalid_instances: Vec<InvalidInstance>,
}

/// A report and its rendering in the requested format.
#[derive(Debug, Clone)]
pub struct ScoreOutput {
    pub report: Report,
    pub rendered: String,
}

/// Score an answers directory, render the report and write it to `opts.out` when set.
pub fn run_score(opts: &ScoreOptions) -> Result<ScoreOutput, ScoreError> {
    let found = discover_all(&opts.instances)?;
    let mut report = score_instances(&found.instances, &opts.answers, opts.call_graph_threshold);
    report.invalid_instances = found.invalid;
    let rendered = report::render(&report, opts.format)?;
    if let Some(out) = &opts.out {
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| ScoreError::Io(parent.to_path_buf(), e))?;
        }
        std::fs::write(out, &rendered).map_err(|e| ScoreError::Io(out.clone(), e))?;
    }
    Ok(ScoreOutput { report, rendered })
}

/// Score already-loaded instances against an answers directory.
pub fn score_instances(
    instances: &[Instance],
    answers: &Path,
    call_graph_threshold: f64,
) -> Report {
    let results: Vec<InstanceResult> = instances
        .iter()
        .map(|i| score_one(i, &answers.join(&i.rel), call_graph_threshold))
        .collect();
    let mut report = build_report(answers, results, call_graph_threshold);
    report.usage = usage(instances, answers);
    report
}

fn usage(instances: &[Instance], answers: &Path) -> Usage {
    let mut u = Usage::default();
    for i in instances.iter().filter(|i| i.oracle.is_some()) {
        let Some(m) = std::fs::read_to_string(answers.join(&i.rel).join("meta.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        else {
            continue;
        };
        u.with_meta += 1;
        let n = |k: &str| m.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        u.tokens_in += n("tokens_in") as u64;
        u.tokens_out += n("tokens_out") as u64;
        u.cost += n("cost");
        u.seconds += n("seconds");
        if let Some(model) = m.get("model").and_then(Value::as_str) {
            if !u.models.iter().any(|x| x == model) {
                u.models.push(model.to_string());
            }
        }
    }
    u
}

/// What is in an answer directory.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadedAnswer {
    Missing,
    InfraError(String),
    Unparseable(String),
    Answer(Value),
}

/// Read `answer.json` (and `meta.json`'s status) from one answer directory.
pub fn load_answer(dir: &Path) -> LoadedAnswer {
    let meta: Option<Value> = std::fs::read_to_string(dir.join("meta.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    let status = meta
        .as_ref()
        .and_then(|m| m.get("status"))
        .and_then(|s| s.as_str());
    let error = meta
        .as_ref()
        .and_then(|m| m.get("error"))
        .and_then(|s| s.as_str())
        .unwrap_or("")
        .to_string();
    match status {
        Some("infra_error") => return LoadedAnswer::InfraError(error),
        Some("unparseable") => return LoadedAnswer::Unparseable(error),
        _ => {}
    }
    let path = dir.join("answer.json");
    match std::fs::read_to_string(&path) {
        Err(_) => LoadedAnswer::Missing,
        Ok(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v) => LoadedAnswer::Answer(v),
            Err(e) => LoadedAnswer::Unparseable(format!("answer.json is not JSON: {e}")),
        },
    }
}

/// Score one instance against the answer directory `answer_dir`.
pub fn score_one(inst: &Instance, answer_dir: &Path, call_graph_threshold: f64) -> InstanceResult {
    let mut r = InstanceResult {
        id: inst.id.clone(),
        repo: inst.repository.clone(),
        kind: inst.kind.clone(),
        pass: None,
        status: Status::Fail,
        reason: None,
        path: None,
        call_graph: None,
    };
    let Some(gold) = &inst.oracle else {
        r.status = Status::NotHarvested;
        r.reason = Some("not harvested (no oracle.json)".into());
        return r;
    };
    let answer = match load_answer(answer_dir) {
        LoadedAnswer::Answer(a) => a,
        LoadedAnswer::Missing => return fail(r, "no answer".into(), None),
        LoadedAnswer::Unparseable(e) => return fail(r, format!("unparseable answer: {e}"), None),
        LoadedAnswer::InfraError(e) => {
            r.status = Status::InfraError;
            r.reason = Some(format!("infra error: {e}"));
            return r;
        }
    };
    if callgraph::is_call_graph(gold) {
        let c = callgraph::score_edges(gold, &answer);
        let s = CallGraphScore {
            tp: c.tp,
            fp: c.fp,
            fn_: c.fn_,
            precision: c.precision(),
            recall: c.recall(),
            f1: c.f1(),
        };
        r.call_graph = Some(s);
        if s.f1 + 1e-12 >= call_graph_threshold {
            r.status = Status::Pass;
            r.pass = Some(true);
            return r;
        }
        return fail(
            r,
            format!(
                "call graph F1 {:.3} < {:.3} (P {:.3}, R {:.3}; {} missing, {} extra edges)",
                s.f1, call_graph_threshold, s.precision, s.recall, c.fn_, c.fp
            ),
            Some("/call_graph".into()),
        );
    }
    let opts = CompareOptions {
        order_insensitive: inst.order_insensitive.clone(),
    };
    match compare::compare(gold, &answer, &opts) {
        Ok(()) => {
            r.status = Status::Pass;
            r.pass = Some(true);
            r
        }
        Err(m) => {
            let path = if m.path.is_empty() {
                "/".to_string()
            } else {
                m.path.clone()
            };
            fail(r, m.to_string(), Some(path))
        }
    }
}

fn fail(mut r: InstanceResult, reason: String, path: Option<String>) -> InstanceResult {
    r.status = Status::Fail;
    r.pass = Some(false);
    r.reason = Some(reason);
    r.path = path;
    r
}

fn build_report(answers: &Path, results: Vec<InstanceResult>, threshold: f64) -> Report {
    let mut all = Bucket::default();
    let mut by_kind: BTreeMap<String, Bucket> = BTreeMap::new();
    let mut by_repo: BTreeMap<String, Bucket> = BTreeMap::new();
    let mut by_kr: BTreeMap<String, BTreeMap<String, Bucket>> = BTreeMap::new();
    let mut cg = CallGraphSummary {
        threshold,
        ..Default::default()
    };
    let mut counts = EdgeCounts::default();
    let mut not_harvested = 0;
    for r in &results {
        if r.status == Status::NotHarvested {
            not_harvested += 1;
            continue;
        }
        all.add(r);
        by_kind.entry(r.kind.clone()).or_default().add(r);
        by_repo.entry(r.repo.clone()).or_default().add(r);
        by_kr
            .entry(r.kind.clone())
            .or_default()
            .entry(r.repo.clone())
            .or_default()
            .add(r);
        if let Some(c) = &r.call_graph {
            cg.instances += 1;
            if r.status == Status::Pass {
                cg.passed += 1;
            }
            counts.add(EdgeCounts {
                tp: c.tp,
                fp: c.fp,
                fn_: c.fn_,
            });
        }
    }
    cg.tp = counts.tp;
    cg.fp = counts.fp;
    cg.fn_ = counts.fn_;
    if cg.instances > 0 {
        cg.precision = counts.precision();
        cg.recall = counts.recall();
        cg.f1 = counts.f1();
    }
    Report {
        answers: answers.display().to_string(),
        accuracy: all.accuracy,
        total: all.total,
        passed: all.passed,
        failed: all.total - all.passed,
        infra_errors: all.infra_errors,
        not_harvested,
        by_kind,
        by_repository: by_repo,
        by_kind_repository: by_kr,
        instances: results,
        call_graph: cg,
        usage: Usage::default(),
        invalid_instances: Vec::new(),
    }
}
