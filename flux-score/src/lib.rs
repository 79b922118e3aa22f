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
//! Beside the verdict, each instance gets partial credit ([`partial`]: multiset F1 of lists,
//! per-field accuracy) and, when it failed, a failure class ([`failure`]); groups get 95 %
//! intervals ([`stats`]: Wilson for accuracy, bootstrap for means); samples written by
//! `flux eval --samples N` (`answer-K.json`) give pass@k; several answers directories are
//! compared pairwise on the instances both scored ([`multi`]).
//!
//! Answers are read with a size limit ([`ScoreConfig::max_answer_bytes`]): a huge answer is a
//! failure named by its size, never a reason to exhaust memory. An answer file that exists but
//! cannot be read is an infrastructure error, not "no answer".
//!
//! A run covers the instances a [`select::Selection`] keeps (`--filter`, `--limit`; the same
//! selection `flux eval` uses); answers come from a directory or a predictions JSONL file
//! ([`source`], [`predictions`]). Answers that match no instance of the set make the run an
//! error unless allowed ([`ScoreOptions::allow_unmatched`]), and every run can be written as a
//! results file with the set's digest and flux's version ([`results`]).
//!
//! Architecture invariant: this crate knows nothing about how answers were produced; it only
//! reads files. It does not depend on `flux-instance`.

pub mod callgraph;
pub mod compare;
pub mod dataset;
pub mod failure;
mod html;
pub mod instance;
pub mod multi;
pub mod partial;
pub mod predictions;
pub mod report;
pub mod results;
pub mod select;
pub mod source;
pub mod stats;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use callgraph::EdgeCounts;
pub use compare::{compare, CompareOptions, Mismatch};
pub use failure::FailureClass;
pub use instance::{discover, discover_all, Discovered, Instance, InvalidInstance};
pub use multi::{Comparison, MultiReport};
pub use results::Results;
pub use select::{discover_selected, Selection};
pub use source::AnswerSource;

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
    /// `--filter` / `--limit` that cannot be applied.
    #[error("{0}")]
    Selection(String),
    /// A predictions file that cannot be read (names the line).
    #[error("{0}")]
    Predictions(String),
    /// Answers that match no instance of the set scored.
    #[error("{0}")]
    Unmatched(String),
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

/// Default limit on one answer file: 8 MiB (a gold answer of the starter set is < 100 kB;
/// serde's tree of a JSON document takes tens of times its size in memory).
pub const MAX_ANSWER_BYTES: u64 = 8 << 20;

/// Options of `flux score`.
#[derive(Debug, Clone)]
pub struct ScoreOptions {
    /// Answers directories (`<answers>/<repo>/<id>/answer.json`); several are compared.
    pub answers: Vec<PathBuf>,
    /// Predictions JSONL files ([`predictions`]), scored as runs after the directories.
    pub predictions: Vec<PathBuf>,
    /// Which instances are scored (default: all).
    pub selection: Selection,
    /// Score even when some answers match no instance of the set (listed in the report);
    /// by default that is an error naming them.
    pub allow_unmatched: bool,
    /// flux's version and git commit, for the results file.
    pub flux_version: String,
    pub flux_commit: Option<String>,
    /// Instance roots (default `instances`).
    pub instances: Vec<PathBuf>,
    /// Pass threshold on edge F1 for call-graph instances (default 1.0).
    pub call_graph_threshold: f64,
    /// Larger answer files fail unread (default [`MAX_ANSWER_BYTES`]).
    pub max_answer_bytes: u64,
    pub format: Format,
    /// Write the rendered report here; `None` means the caller prints [`ScoreOutput::rendered`].
    pub out: Option<PathBuf>,
}

impl ScoreOptions {
    pub fn new(answers: impl Into<PathBuf>) -> Self {
        ScoreOptions {
            answers: vec![answers.into()],
            predictions: Vec::new(),
            selection: Selection::default(),
            allow_unmatched: false,
            flux_version: env!("CARGO_PKG_VERSION").to_string(),
            flux_commit: None,
            instances: vec![PathBuf::from("instances")],
            call_graph_threshold: 1.0,
            max_answer_bytes: MAX_ANSWER_BYTES,
            format: Format::Text,
            out: None,
        }
    }

    fn config(&self) -> ScoreConfig {
        ScoreConfig {
            call_graph_threshold: self.call_graph_threshold,
            max_answer_bytes: self.max_answer_bytes,
        }
    }
}

/// How one answers directory is scored.
#[derive(Debug, Clone, Copy)]
pub struct ScoreConfig {
    pub call_graph_threshold: f64,
    pub max_answer_bytes: u64,
}

impl Default for ScoreConfig {
    fn default() -> Self {
        ScoreConfig {
            call_graph_threshold: 1.0,
            max_answer_bytes: MAX_ANSWER_BYTES,
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
    /// Partial credit in [0, 1] (scored instances only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<f64>,
    /// Per top-level field scores (per-field accuracy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<BTreeMap<String, f64>>,
    /// Why it failed, by class (failures only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
    /// Samples scored and passed (`flux eval --samples`; absent with one sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<SampleCount>,
    /// Question, gold and answer, kept for failures (to show side by side).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gold: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
}

/// Samples of one instance.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SampleCount {
    /// Samples with a verdict (infrastructure errors left out).
    pub n: usize,
    pub passed: usize,
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
    /// 95 % Wilson interval of the accuracy.
    #[serde(default)]
    pub ci: [f64; 2],
    /// Mean partial credit over scored instances.
    #[serde(default)]
    pub partial: f64,
}

impl Bucket {
    fn add(&mut self, r: &InstanceResult) {
        let scored_before = self.total;
        match r.status {
            Status::Pass => {
                self.total += 1;
                self.passed += 1;
            }
            Status::Fail => self.total += 1,
            Status::InfraError => self.infra_errors += 1,
            Status::NotHarvested => {}
        }
        if self.total > scored_before {
            let p = r
                .partial
                .unwrap_or(if r.status == Status::Pass { 1.0 } else { 0.0 });
            self.partial += (p - self.partial) / self.total as f64;
        }
        self.accuracy = if self.total == 0 {
            0.0
        } else {
            self.passed as f64 / self.total as f64
        };
        let (lo, hi) = stats::wilson(self.passed, self.total);
        self.ci = [lo, hi];
    }
}

/// A mean with its 95 % bootstrap interval.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
    /// Instances it is over.
    pub n: usize,
}

impl Estimate {
    pub fn of(v: &[f64]) -> Estimate {
        let (mean, low, high) = stats::bootstrap_mean(v);
        Estimate {
            mean,
            low,
            high,
            n: v.len(),
        }
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
    /// Answers whose cost is known (a model without a price writes `cost: null`): with none,
    /// the cost is unknown, not $0.
    #[serde(default)]
    pub priced: usize,
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
    /// The run's name: its model (from meta.json) or the directory's name.
    #[serde(default)]
    pub name: String,
    /// 95 % Wilson interval of the accuracy.
    #[serde(default)]
    pub accuracy_ci: [f64; 2],
    /// Mean partial credit over scored instances, with its bootstrap interval.
    #[serde(default)]
    pub partial_credit: Estimate,
    /// pass@k for k = 1, 2, 5, 10, … up to the fewest samples of any instance (when the run
    /// has more than one sample per instance); bootstrap intervals over instances.
    #[serde(default)]
    pub pass_at_k: BTreeMap<String, Estimate>,
    /// Failures per class.
    #[serde(default)]
    pub failure_classes: BTreeMap<String, usize>,
    /// The instance roots scored against, and the set's name ([`results::set_name`]).
    #[serde(default)]
    pub scored_against: Vec<String>,
    #[serde(default)]
    pub set: String,
    /// The selection scored (`--filter`, `--limit`).
    #[serde(default)]
    pub selection: Selection,
    /// Answers that match no instance of the set (kept only with `--allow-unmatched`).
    #[serde(default)]
    pub unmatched_answers: Vec<String>,
}

/// A report and its rendering in the requested format.
#[derive(Debug, Clone)]
pub struct ScoreOutput {
    /// The first answers directory's report.
    pub report: Report,
    /// Every run and their comparisons (one run: no comparisons).
    pub multi: MultiReport,
    pub rendered: String,
    /// What the results file holds ([`results::write`]).
    pub results: Results,
}

/// Score the answers directories, render the report (one run's, or all runs compared) and
/// write it to `opts.out` when set.
pub fn run_score(opts: &ScoreOptions) -> Result<ScoreOutput, ScoreError> {
    let found = discover_all(&opts.instances)?;
    let mut sources: Vec<AnswerSource> = opts
        .answers
        .iter()
        .cloned()
        .map(AnswerSource::Dir)
        .collect();
    for p in &opts.predictions {
        sources.push(AnswerSource::Predictions(predictions::read(
            p,
            opts.max_answer_bytes,
        )?));
    }
    if sources.is_empty() {
        return Err(ScoreError::Serialize(
            "no answers directory or predictions file given".into(),
        ));
    }
    let selected = opts.selection.apply(found.instances.clone())?;
    let set = results::set_name(&opts.instances, &selected);
    let roots: Vec<String> = opts
        .instances
        .iter()
        .map(|r| r.display().to_string())
        .collect();
    let against = format!("{} ({} instances)", roots.join(", "), found.instances.len());
    let invalid_names = invalid_names(&found.invalid);
    let mut runs = Vec::new();
    for src in &sources {
        if !opts.allow_unmatched && src.is_empty()? {
            return Err(ScoreError::Unmatched(format!(
                "{}: holds no answers (<repo>/<id>/answer.json or meta.json; for predictions, \
                 no line): is it one run's answers (e.g. answers/<model>)? Pass \
                 --allow-unmatched to score it anyway",
                src.path().display()
            )));
        }
        let mut unmatched = src.unmatched(&found.instances)?;
        // An answer of an instance directory that could not be read belongs to the set: that
        // instance is reported as invalid, not its answer as unmatched.
        unmatched.retain(|u| !invalid_names.iter().any(|(key, id)| u == key || u == id));
        if !unmatched.is_empty() && !opts.allow_unmatched {
            return Err(ScoreError::Unmatched(source::unmatched_message(
                src, &unmatched, &against,
            )));
        }
        let mut r = score_source(&selected, src, &opts.config())?;
        r.invalid_instances = found.invalid.clone();
        r.scored_against = roots.clone();
        r.set = set.clone();
        r.selection = opts.selection.clone();
        r.unmatched_answers = unmatched;
        runs.push(r);
    }
    multi::name_runs(&mut runs);
    let results = Results {
        flux_version: opts.flux_version.clone(),
        flux_commit: opts.flux_commit.clone(),
        date: results::now_utc(),
        set: results::SetInfo {
            name: set,
            roots,
            instances: selected.len(),
            digest: results::digest(&selected),
        },
        selection: opts.selection.clone(),
        call_graph_threshold: opts.call_graph_threshold,
        runs: runs
            .iter()
            .zip(&sources)
            .map(|(r, src)| results::run_result(r, src, &selected, opts.max_answer_bytes))
            .collect(),
    };
    let multi = multi::compare_runs(runs);
    let report = multi.runs[0].clone();
    let rendered = if multi.runs.len() == 1 {
        report::render(&report, opts.format)?
    } else {
        report::render_multi(&multi, opts.format)?
    };
    if let Some(out) = &opts.out {
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| ScoreError::Io(parent.to_path_buf(), e))?;
        }
        std::fs::write(out, &rendered).map_err(|e| ScoreError::Io(out.clone(), e))?;
    }
    Ok(ScoreOutput {
        report,
        multi,
        rendered,
        results,
    })
}

/// `(repo/id, id)` of each instance directory that could not be read, from its path.
fn invalid_names(invalid: &[InvalidInstance]) -> Vec<(String, String)> {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    invalid
        .iter()
        .map(|i| {
            let p = Path::new(&i.path);
            let id = name(Some(p));
            (format!("{}/{id}", name(p.parent())), id)
        })
        .collect()
}

/// Score already-loaded instances against a run's answers, from a directory or predictions.
pub fn score_source(
    instances: &[Instance],
    src: &AnswerSource,
    cfg: &ScoreConfig,
) -> Result<Report, ScoreError> {
    let p = match src {
        AnswerSource::Dir(d) => return Ok(score_instances_with(instances, d, cfg)),
        AnswerSource::Predictions(p) => p,
    };
    let (found, _) = p.resolve(instances)?;
    let results = instances
        .iter()
        .map(|i| {
            score_loaded(i, "answer.json", cfg, || match found.get(&i.key()) {
                Some(Some(v)) => LoadedAnswer::Answer(v.clone()),
                Some(None) | None => LoadedAnswer::Missing,
            })
        })
        .collect();
    let mut report = build_report(&p.path, results, cfg.call_graph_threshold);
    report.usage.models = p.models();
    Ok(report)
}

/// Score already-loaded instances against an answers directory.
pub fn score_instances(
    instances: &[Instance],
    answers: &Path,
    call_graph_threshold: f64,
) -> Report {
    score_instances_with(
        instances,
        answers,
        &ScoreConfig {
            call_graph_threshold,
            ..Default::default()
        },
    )
}

/// [`score_instances`] with every setting.
pub fn score_instances_with(instances: &[Instance], answers: &Path, cfg: &ScoreConfig) -> Report {
    let results: Vec<InstanceResult> = instances
        .iter()
        .map(|i| score_one_with(i, &answers.join(&i.rel), cfg))
        .collect();
    let mut report = build_report(answers, results, cfg.call_graph_threshold);
    report.usage = usage(instances, answers, cfg.max_answer_bytes);
    report
}

impl Usage {
    /// The cost for a report: `$X`, `$X (N of M answers priced)`, or `unknown (no price)`.
    pub fn cost_text(&self, decimals: usize) -> String {
        match self.priced {
            0 => "unknown (no price)".to_string(),
            n if n < self.with_meta => format!(
                "${:.decimals$} ({n} of {} answers priced)",
                self.cost, self.with_meta
            ),
            _ => format!("${:.decimals$}", self.cost),
        }
    }
}

fn usage(instances: &[Instance], answers: &Path, limit: u64) -> Usage {
    let mut u = Usage::default();
    for i in instances.iter().filter(|i| i.oracle.is_some()) {
        let Ok(Some(m)) = read_json_limited(&answers.join(&i.rel).join("meta.json"), limit) else {
            continue;
        };
        u.with_meta += 1;
        let n = |k: &str| m.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        u.tokens_in += n("tokens_in") as u64;
        u.tokens_out += n("tokens_out") as u64;
        if let Some(c) = m.get("cost").and_then(Value::as_f64) {
            u.cost += c;
            u.priced += 1;
        }
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
    /// Over the size limit: a failure, unread.
    TooLarge(u64),
    Answer(Value),
}

/// Why a file could not be used.
enum ReadError {
    /// It exists but cannot be read (permissions, I/O, a directory): infrastructure.
    Unreadable(String),
    TooLarge(u64),
}

/// Read at most `limit` bytes of `path`; `Ok(None)` when it does not exist. The size is
/// checked before reading and enforced while reading (a file that grows, or one whose size
/// the filesystem does not report, is cut at the limit and refused).
fn read_limited(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, ReadError> {
    use std::io::Read;
    // Only a regular file is opened: opening a FIFO (or a device) blocks until someone writes.
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Ok(m) if !m.is_file() && !m.is_dir() => {
            return Err(ReadError::Unreadable(format!(
                "{}: not a regular file (a FIFO, socket or device is not read)",
                path.display()
            )))
        }
        _ => {}
    }
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ReadError::Unreadable(format!("{}: {e}", path.display()))),
    };
    let meta = f
        .metadata()
        .map_err(|e| ReadError::Unreadable(format!("{}: {e}", path.display())))?;
    if meta.is_dir() {
        return Err(ReadError::Unreadable(format!(
            "{}: is a directory",
            path.display()
        )));
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge(meta.len()));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ReadError::Unreadable(format!("{}: {e}", path.display())))?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge(buf.len() as u64));
    }
    Ok(Some(buf))
}

fn read_json_limited(path: &Path, limit: u64) -> Result<Option<Value>, String> {
    match read_limited(path, limit) {
        Ok(None) => Ok(None),
        Ok(Some(b)) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{}: not JSON: {e}", path.display())),
        Err(ReadError::Unreadable(e)) => Err(e),
        Err(ReadError::TooLarge(n)) => Err(format!(
            "{}: {n} bytes, over the limit {limit}",
            path.display()
        )),
    }
}

/// Read `answer.json` (and `meta.json`'s status) from one answer directory, with the default
/// size limit.
pub fn load_answer(dir: &Path) -> LoadedAnswer {
    load_answer_file(dir, "answer.json", MAX_ANSWER_BYTES)
}

/// Read one answer file of an answer directory (`answer.json`, `answer-2.json`, …).
pub fn load_answer_file(dir: &Path, file: &str, limit: u64) -> LoadedAnswer {
    // meta.json is written by flux eval: unreadable or corrupt means the run's bookkeeping
    // broke, which says nothing about the model.
    let meta = match read_json_limited(&dir.join("meta.json"), limit) {
        Ok(m) => m,
        Err(e) => return LoadedAnswer::InfraError(format!("meta.json unreadable: {e}")),
    };
    let sample_meta = file
        .strip_prefix("answer-")
        .and_then(|r| r.strip_suffix(".json"))
        .and_then(|k| k.parse::<usize>().ok())
        .and_then(|k| meta.as_ref()?.get("samples")?.get(k - 1).cloned());
    let m = sample_meta.as_ref().or(meta.as_ref());
    let status = m.and_then(|m| m.get("status")).and_then(|s| s.as_str());
    let error = m
        .and_then(|m| m.get("error"))
        .and_then(|s| s.as_str())
        .unwrap_or("")
        .to_string();
    // With samples, the top-level status is the worst sample's: sample 1 has its own.
    let status = if file == "answer.json" {
        meta.as_ref()
            .and_then(|m| m.get("samples"))
            .and_then(|s| s.get(0))
            .and_then(|s| s.get("status"))
            .and_then(|s| s.as_str())
            .or(status)
    } else {
        status
    };
    match status {
        Some("infra_error") => return LoadedAnswer::InfraError(error),
        Some("unparseable") => return LoadedAnswer::Unparseable(error),
        _ => {}
    }
    let path = dir.join(file);
    match read_limited(&path, limit) {
        Ok(None) => LoadedAnswer::Missing,
        Err(ReadError::Unreadable(e)) => {
            LoadedAnswer::InfraError(format!("answer unreadable: {e}"))
        }
        Err(ReadError::TooLarge(n)) => LoadedAnswer::TooLarge(n),
        Ok(Some(b)) => match serde_json::from_slice::<Value>(&b) {
            Ok(v) => LoadedAnswer::Answer(v),
            Err(e) => LoadedAnswer::Unparseable(format!("{file} is not JSON: {e}")),
        },
    }
}

/// How many samples an answer directory holds (meta's `samples`, else 1).
fn sample_count(dir: &Path, limit: u64) -> usize {
    read_json_limited(&dir.join("meta.json"), limit)
        .ok()
        .flatten()
        .and_then(|m| m.get("samples").and_then(Value::as_array).map(Vec::len))
        .unwrap_or(1)
        .max(1)
}

/// Score one instance against the answer directory `answer_dir`.
pub fn score_one(inst: &Instance, answer_dir: &Path, call_graph_threshold: f64) -> InstanceResult {
    score_one_with(
        inst,
        answer_dir,
        &ScoreConfig {
            call_graph_threshold,
            ..Default::default()
        },
    )
}

/// [`score_one`] with every setting: sample 1 (`answer.json`) decides the verdict; further
/// samples count for pass@k.
pub fn score_one_with(inst: &Instance, answer_dir: &Path, cfg: &ScoreConfig) -> InstanceResult {
    let mut r = score_file(inst, answer_dir, "answer.json", cfg);
    let n = sample_count(answer_dir, cfg.max_answer_bytes);
    if n > 1 && inst.oracle.is_some() {
        let mut c = SampleCount { n: 0, passed: 0 };
        for k in 1..=n {
            let file = if k == 1 {
                "answer.json".to_string()
            } else {
                format!("answer-{k}.json")
            };
            let v = if k == 1 {
                r.status
            } else {
                score_file(inst, answer_dir, &file, cfg).status
            };
            match v {
                Status::Pass => {
                    c.n += 1;
                    c.passed += 1;
                }
                Status::Fail => c.n += 1,
                _ => {}
            }
        }
        r.samples = Some(c);
    }
    r
}

fn score_file(inst: &Instance, answer_dir: &Path, file: &str, cfg: &ScoreConfig) -> InstanceResult {
    score_loaded(inst, file, cfg, || {
        load_answer_file(answer_dir, file, cfg.max_answer_bytes)
    })
}

/// Score one answer of `inst` (`file` names it in messages); `load` is called only when the
/// instance has gold.
fn score_loaded(
    inst: &Instance,
    file: &str,
    cfg: &ScoreConfig,
    load: impl FnOnce() -> LoadedAnswer,
) -> InstanceResult {
    let mut r = InstanceResult {
        id: inst.id.clone(),
        repo: inst.repository.clone(),
        kind: inst.kind.clone(),
        pass: None,
        status: Status::Fail,
        reason: None,
        path: None,
        call_graph: None,
        partial: None,
        fields: None,
        failure: None,
        samples: None,
        question: None,
        gold: None,
        answer: None,
    };
    let Some(gold) = &inst.oracle else {
        r.status = Status::NotHarvested;
        r.reason = Some("not harvested (no oracle.json)".into());
        return r;
    };
    let format_fail = |mut r: InstanceResult, reason: String| {
        r.partial = Some(0.0);
        r.failure = Some(FailureClass::Format);
        r.question = Some(inst.question.clone());
        r.gold = Some(gold.clone());
        fail(r, reason, None)
    };
    let answer = match load() {
        LoadedAnswer::Answer(a) => a,
        LoadedAnswer::Missing => return format_fail(r, "no answer".into()),
        LoadedAnswer::Unparseable(e) => return format_fail(r, format!("unparseable answer: {e}")),
        LoadedAnswer::TooLarge(n) => {
            return format_fail(
                r,
                format!(
                    "{file} is {n} bytes, over the limit of {} (--max-answer-bytes); not read",
                    cfg.max_answer_bytes
                ),
            )
        }
        LoadedAnswer::InfraError(e) => {
            r.status = Status::InfraError;
            r.reason = Some(format!("infra error: {e}"));
            return r;
        }
    };
    let keep = |mut r: InstanceResult, answer: Value| {
        r.question = Some(inst.question.clone());
        r.gold = Some(gold.clone());
        r.answer = Some(answer);
        r
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
        r.partial = Some(s.f1);
        if s.f1 + 1e-12 >= cfg.call_graph_threshold {
            r.status = Status::Pass;
            r.pass = Some(true);
            return r;
        }
        r.failure = Some(failure::classify_call_graph(c.fp, c.fn_));
        let reason = format!(
            "call graph F1 {:.3} < {:.3} (P {:.3}, R {:.3}; {} missing, {} extra edges)",
            s.f1, cfg.call_graph_threshold, s.precision, s.recall, c.fn_, c.fp
        );
        return keep(fail(r, reason, Some("/call_graph".into())), answer);
    }
    let opts = CompareOptions {
        order_insensitive: inst.order_insensitive.clone(),
    };
    let fields = partial::fields(gold, &answer, &opts);
    r.partial = Some(partial::score(gold, &answer, &opts));
    r.fields = (!fields.is_empty()).then_some(fields);
    match compare::compare(gold, &answer, &opts) {
        Ok(()) => {
            r.status = Status::Pass;
            r.pass = Some(true);
            r.partial = Some(1.0);
            r
        }
        Err(m) => {
            let path = if m.path.is_empty() {
                "/".to_string()
            } else {
                m.path.clone()
            };
            r.failure = Some(failure::classify(gold, &answer, &m.path));
            keep(fail(r, m.to_string(), Some(path)), answer)
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
    let scored: Vec<&InstanceResult> = results
        .iter()
        .filter(|r| matches!(r.status, Status::Pass | Status::Fail))
        .collect();
    let partials: Vec<f64> = scored.iter().map(|r| r.partial.unwrap_or(0.0)).collect();
    let mut failure_classes = BTreeMap::new();
    for r in &scored {
        if let Some(c) = r.failure {
            *failure_classes.entry(c.as_str().to_string()).or_insert(0) += 1;
        }
    }
    let mut pass_at_k = BTreeMap::new();
    let min_n = scored
        .iter()
        .map(|r| r.samples.map_or(1, |s| s.n))
        .min()
        .unwrap_or(1);
    if min_n > 1 {
        let mut ks: Vec<usize> = [1, 2, 5, 10, 20, 50, 100]
            .into_iter()
            .filter(|k| *k <= min_n)
            .collect();
        if !ks.contains(&min_n) {
            ks.push(min_n);
        }
        for k in ks {
            let v: Vec<f64> = scored
                .iter()
                .map(|r| {
                    let s = r.samples.unwrap_or(SampleCount {
                        n: 1,
                        passed: usize::from(r.status == Status::Pass),
                    });
                    stats::pass_at_k(s.n, s.passed, k)
                })
                .collect();
            pass_at_k.insert(k.to_string(), Estimate::of(&v));
        }
    }
    Report {
        answers: answers.display().to_string(),
        name: String::new(),
        accuracy_ci: all.ci,
        partial_credit: Estimate::of(&partials),
        pass_at_k,
        failure_classes,
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
        scored_against: Vec::new(),
        set: String::new(),
        selection: Selection::default(),
        unmatched_answers: Vec::new(),
    }
}
