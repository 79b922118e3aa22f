//! flux-eval: asks a model (or a reference solver) every benchmark question and writes the
//! answers in the SWE-Flux layout that `flux-score` reads.
//!
//! For each instance: find its package source ([`source`]; a missing source stops the run
//! unless the run asks for none), build a prompt (question, template, test files and the
//! source chosen around the target, [`context`]; or, in agent mode, a small prompt and
//! read-only tools over the source tree, [`tools`]), call the model with the run's sampling
//! settings ([`client::GenParams`]), take the first JSON object of the reply, check it against
//! the template's shape, and on failure send the error back (up to
//! [`EvalOptions::repair_rounds`] times). Transient HTTP failures are retried with backoff;
//! what still fails is an `infra_error`, recorded and never scored as wrong. With
//! [`EvalOptions::samples`] > 1 each instance is asked that many times independently (pass@k).
//!
//! Each instance gets `<out>/<repo>/<id>/answer.json` (the first sample; `answer-K.json` for
//! sample K ≥ 2), `meta.json` (status, usage, cost, per-sample statuses) and `transcript.json`
//! (every request's messages, reply, tool calls, usage, latency, cost); the run gets
//! `<out>/summary.json`. A rerun skips instances whose meta status is `ok` with as many samples
//! as asked (resumable).
//!
//! Architecture invariants: API keys come from options or the environment and are never
//! written or logged; the library never panics on model output.

mod ask;
pub mod client;
pub mod context;
pub mod javasrc;
pub mod parse;
pub mod price;
pub mod prompt;
/// The static reader of Python source lives in flux-extract (flux-instance checks instances
/// with it too); re-exported under its old path.
pub use flux_extract::pysrc;
pub mod solvers;
pub mod source;
pub mod testsrc;
pub mod tools;
pub mod transcript;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use client::{
    Api, ChatClient, Completion, GenParams, InfraError, MaxTokensField, Message, RetryPolicy,
    ToolCall, ToolSpec,
};
use flux_score::Instance;
pub use prompt::Mode;
pub use source::{Located, Source};

/// Errors that stop a whole run (one instance's trouble never does).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Score(#[from] flux_score::ScoreError),
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("no API key: set {0} (a server other than the vendor's own may need none: pass its --base-url)")]
    NoApiKey(&'static str),
    #[error("{0}")]
    NoSource(String),
    #[error("{0}")]
    Config(String),
    /// Nothing answers at the base URL: the run stopped at the first refused connection.
    #[error("{0}; the run stopped (answers written so far are kept)")]
    Unreachable(String),
}

/// Which solver answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Solver {
    /// A model behind an HTTP API.
    Model,
    /// `--model oracle`.
    Oracle,
    /// `--model static-baseline`.
    StaticBaseline,
}

impl Solver {
    pub fn for_model(model: &str) -> Solver {
        match model {
            "oracle" => Solver::Oracle,
            "static-baseline" => Solver::StaticBaseline,
            _ => Solver::Model,
        }
    }
}

/// Options of `flux eval` (and `flux validate`, see [`run_validate`]).
#[derive(Clone)]
pub struct EvalOptions {
    /// Model name; `oracle` and `static-baseline` select the reference solvers.
    pub model: String,
    pub api: Api,
    /// e.g. `https://api.openai.com/v1` (OpenAI), `http://localhost:8000/v1` (vLLM),
    /// `https://api.anthropic.com` (Anthropic).
    pub base_url: String,
    /// Instance roots (default `instances`).
    pub instances: Vec<PathBuf>,
    /// Which instances are asked (`--filter`, `--limit`): the selection `flux score` applies
    /// too ([`flux_score::select`]).
    pub selection: flux_score::Selection,
    /// Answers directory (default `answers/<model>`).
    pub out: PathBuf,
    pub concurrency: usize,
    pub max_context_tokens: usize,
    /// Where package sources are (default: the cache `.flux-cache`).
    pub source: Source,
    /// How the source reaches the model.
    pub mode: Mode,
    /// Sampling settings of every request.
    pub params: GenParams,
    /// Replaces the built-in system prompt ([`prompt::SYSTEM`]).
    pub system: Option<String>,
    /// Independent answers per instance (pass@k); default 1.
    pub samples: u32,
    /// Price per million input / output tokens, overriding the table.
    pub price_in: Option<f64>,
    pub price_out: Option<f64>,
    /// Repair rounds after an unparseable or ill-shaped reply (default 2).
    pub repair_rounds: u32,
    pub retry: RetryPolicy,
    pub request_timeout: Duration,
    /// API key; `None` reads `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`. Required only by the
    /// vendors' own URLs.
    pub api_key: Option<String>,
    /// Ask for a `"reasoning"` field alongside the answer (validate mode).
    pub reasoning: bool,
    /// Re-answer instances that already have an ok answer.
    pub force: bool,
    /// Ask again instances whose earlier answer was unparseable (kept by default: it is the
    /// model's answer, scored as wrong, and asking again would change the run's result).
    pub retry_unparseable: bool,
    /// Print one progress line per instance to stderr.
    pub progress: bool,
    /// Most tool-call rounds per sample (agent and context+tools modes).
    pub max_tool_rounds: u32,
}

impl std::fmt::Debug for EvalOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalOptions")
            .field("model", &self.model)
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("instances", &self.instances)
            .field("out", &self.out)
            .field("concurrency", &self.concurrency)
            .field("max_context_tokens", &self.max_context_tokens)
            .field("source", &self.source)
            .field("mode", &self.mode)
            .field("params", &self.params)
            .field("samples", &self.samples)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl EvalOptions {
    pub fn new(model: &str, api: Api, base_url: &str) -> Self {
        EvalOptions {
            model: model.to_string(),
            api,
            base_url: base_url.to_string(),
            instances: vec![PathBuf::from("instances")],
            selection: flux_score::Selection::default(),
            out: PathBuf::from("answers").join(sanitize(model)),
            concurrency: 4,
            max_context_tokens: 100_000,
            source: Source::Cache(PathBuf::from(".flux-cache")),
            mode: Mode::Context,
            params: GenParams::default(),
            system: None,
            samples: 1,
            price_in: None,
            price_out: None,
            repair_rounds: 2,
            retry: RetryPolicy::default(),
            request_timeout: Duration::from_secs(600),
            api_key: None,
            reasoning: false,
            force: false,
            retry_unparseable: false,
            progress: false,
            max_tool_rounds: 16,
        }
    }
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Status of one answer, as written in meta.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStatus {
    #[default]
    Ok,
    InfraError,
    Unparseable,
}

impl AnswerStatus {
    /// How bad: the status of an instance is its worst sample's.
    fn rank(self) -> u8 {
        match self {
            AnswerStatus::Ok => 0,
            AnswerStatus::Unparseable => 1,
            AnswerStatus::InfraError => 2,
        }
    }
}

/// One sample's part of meta.json.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SampleMeta {
    pub status: AnswerStatus,
    pub error: Option<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost: Option<f64>,
    pub seconds: f64,
    /// Model calls made (1 + repair rounds + tool rounds).
    pub attempts: u32,
    /// HTTP retries after transient failures.
    pub retries: u32,
    pub tool_calls: u32,
    /// The model's `"reasoning"` (validate mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reasoning: Option<String>,
    /// The last raw reply when it could not be used.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub raw_reply: Option<String>,
}

/// `<out>/<repo>/<id>/meta.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub id: String,
    pub repository: String,
    pub kind: String,
    pub model: String,
    pub api: String,
    /// The worst status of its samples.
    pub status: AnswerStatus,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub seconds: f64,
    /// USD; `null` when the model has no known price.
    pub cost: Option<f64>,
    /// Model calls made (all samples).
    pub attempts: u32,
    /// HTTP retries after transient failures.
    pub retries: u32,
    /// Tool calls executed.
    #[serde(default)]
    pub tool_calls: u32,
    pub error: Option<String>,
    /// `context`, `agent` or `context+tools`.
    #[serde(default)]
    pub mode: String,
    /// Sampling settings sent.
    #[serde(default)]
    pub params: Value,
    /// Source shown in the prompt (`file:ranges`), targets located, and what was cut.
    #[serde(default)]
    pub context_files: Vec<String>,
    #[serde(default)]
    pub targets: Vec<String>,
    #[serde(default)]
    pub context_notes: Vec<String>,
    /// The source directory read (`null` with `--no-source` or for the oracle).
    #[serde(default)]
    pub source: Option<String>,
    /// Per sample (sample 1's answer is `answer.json`, sample K's `answer-K.json`).
    #[serde(default)]
    pub samples: Vec<SampleMeta>,
    /// The model's `"reasoning"` (validate mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reasoning: Option<String>,
    /// The last raw reply when it could not be used.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub raw_reply: Option<String>,
}

/// `<out>/summary.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    pub model: String,
    pub api: String,
    pub out: String,
    /// Harvested instances considered.
    pub instances: usize,
    /// Answered in this run.
    pub answered: usize,
    /// Skipped because an ok answer (or a kept unparseable one) was already there.
    pub skipped_existing: usize,
    /// Of those, unparseable answers kept (asked again only with `retry_unparseable`).
    #[serde(default)]
    pub kept_unparseable: usize,
    pub not_harvested: usize,
    pub ok: usize,
    pub infra_errors: usize,
    pub unparseable: usize,
    /// Samples asked per instance.
    #[serde(default)]
    pub samples: u32,
    /// The instances asked (`--filter`, `--limit`).
    #[serde(default)]
    pub selection: flux_score::Selection,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Sum of per-instance wall time (seconds).
    pub seconds: f64,
    /// Wall time of the run.
    pub wall_seconds: f64,
    pub cost: Option<f64>,
    /// Score of the answers directory after the run.
    pub accuracy: f64,
    pub passed: usize,
    pub scored: usize,
    /// Instance directories that could not be read (skipped).
    #[serde(default)]
    pub invalid_instances: Vec<flux_score::InvalidInstance>,
    /// Instances still an infrastructure error after retries (`repo/id: error`).
    #[serde(default)]
    pub infra_error_instances: Vec<String>,
}

impl Summary {
    /// A few readable lines for the terminal.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "flux eval {} ({}): {} instances, {} answered now, {} already answered, {} not harvested\n\
             ok {}, infra errors {}, unparseable {}; tokens {} in / {} out; cost {}; {:.1} s\n\
             score of {}: {}/{} passed ({:.1}%), infra errors excluded\n",
            self.model,
            self.api,
            self.instances,
            self.answered,
            self.skipped_existing,
            self.not_harvested,
            self.ok,
            self.infra_errors,
            self.unparseable,
            self.tokens_in,
            self.tokens_out,
            self.cost.map(|c| format!("${c:.4}")).unwrap_or_else(|| "unknown (no price; use --price-in/--price-out)".into()),
            self.wall_seconds,
            self.out,
            self.passed,
            self.scored,
            self.accuracy * 100.0
        );
        if !self.selection.is_all() {
            s.push_str(&format!("selection: {}\n", self.selection.describe()));
        }
        if self.kept_unparseable > 0 {
            s.push_str(&format!(
                "kept {} unparseable answer(s) of an earlier run (--retry-unparseable asks again)\n",
                self.kept_unparseable
            ));
        }
        for i in &self.invalid_instances {
            s.push_str(&format!("invalid instance {}: {}\n", i.path, i.error));
        }
        for i in &self.infra_error_instances {
            s.push_str(&format!("infra error (after retries): {i}\n"));
        }
        s
    }
}

fn write_json(path: &Path, v: &impl Serialize) -> Result<(), EvalError> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(|e| EvalError::Io(p.to_path_buf(), e))?;
    }
    let mut s = serde_json::to_string_pretty(v).map_err(|e| EvalError::Config(e.to_string()))?;
    s.push('\n');
    // Write then rename, so an interrupted run never leaves half a file.
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, s).map_err(|e| EvalError::Io(tmp.clone(), e))?;
    std::fs::rename(&tmp, path).map_err(|e| EvalError::Io(path.to_path_buf(), e))
}

fn read_meta(dir: &Path) -> Option<Meta> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).ok()?).ok()
}

/// True when the instance already has an ok answer in `dir` (with at least `samples` samples
/// when its meta lists them).
pub fn has_ok_answer(dir: &Path, samples: u32) -> bool {
    if !dir.join("answer.json").is_file() {
        return false;
    }
    match std::fs::read_to_string(dir.join("meta.json")) {
        Err(_) => samples <= 1, // an answer without meta (e.g. written by another tool)
        Ok(s) => serde_json::from_str::<Value>(&s).ok().is_some_and(|m| {
            let ok = m.get("status").and_then(|x| x.as_str()) == Some("ok");
            let n = m
                .get("samples")
                .and_then(Value::as_array)
                .map(|a| a.len().max(1))
                .unwrap_or(1);
            ok && n >= samples as usize
        }),
    }
}

/// What an earlier run left in an answer directory: an answer to keep (`Some(true)` when it is
/// an unparseable one), or `None` when the instance is to be asked (nothing, an infrastructure
/// error, fewer samples than asked, or an unparseable answer with `retry_unparseable`).
pub fn kept_answer(dir: &Path, samples: u32, retry_unparseable: bool) -> Option<bool> {
    if has_ok_answer(dir, samples) {
        return Some(false);
    }
    if retry_unparseable {
        return None;
    }
    let m = read_meta(dir)?;
    let n = m.samples.len().max(1);
    (m.status == AnswerStatus::Unparseable && n >= samples as usize).then_some(true)
}

/// The file of sample `k` (1-based) in an answer directory.
pub fn sample_file(k: u32) -> String {
    if k <= 1 {
        "answer.json".into()
    } else {
        format!("answer-{k}.json")
    }
}

fn make_client(opts: &EvalOptions) -> Result<ChatClient, EvalError> {
    let key = match &opts.api_key {
        Some(k) => Some(k.clone()),
        None => std::env::var(opts.api.key_env())
            .ok()
            .filter(|k| !k.is_empty()),
    };
    if key.is_none() && ChatClient::is_vendor_url(opts.api, &opts.base_url) {
        return Err(EvalError::NoApiKey(opts.api.key_env()));
    }
    opts.params.check(opts.api).map_err(EvalError::Config)?;
    Ok(ChatClient::new(
        opts.api,
        &opts.base_url,
        &opts.model,
        key,
        opts.params.max_tokens.unwrap_or(8192),
        opts.request_timeout,
        opts.retry.clone(),
    )
    .map_err(EvalError::Config)?
    .with_params(opts.params.clone()))
}

/// Run the evaluation: answer every harvested instance, write answers, meta, transcripts and
/// the summary.
pub async fn run_eval(opts: &EvalOptions) -> Result<Summary, EvalError> {
    let start = Instant::now();
    let found = flux_score::discover_selected(&opts.instances, &opts.selection)?;
    let instances = found.instances;
    let asked: Vec<Instance> = instances.clone();
    let solver = Solver::for_model(&opts.model);
    let client = match solver {
        Solver::Model => Some(make_client(opts)?),
        _ => None,
    };
    if opts.samples == 0 {
        return Err(EvalError::Config("samples must be at least 1".into()));
    }
    // Every source first: a run whose models could not read the code is refused up front.
    let needs_source = solver != Solver::Oracle;
    let mut located = Vec::new();
    let mut missing = Vec::new();
    for inst in &instances {
        let l = if needs_source {
            source::locate(inst, &opts.source)
        } else {
            Located::Off
        };
        if let (Located::Missing { path, hint }, Some(_)) = (&l, &inst.oracle) {
            missing.push((inst.key(), path.clone(), hint.clone()));
        }
        located.push(l);
    }
    if !missing.is_empty() {
        return Err(EvalError::NoSource(source::missing_report(&missing)));
    }
    let price = price::Price::resolve(&opts.model, opts.price_in, opts.price_out);
    let mut summary = Summary {
        model: opts.model.clone(),
        api: opts.api.name().to_string(),
        out: opts.out.display().to_string(),
        invalid_instances: found.invalid,
        samples: opts.samples,
        selection: opts.selection.clone(),
        ..Default::default()
    };
    std::fs::create_dir_all(&opts.out).map_err(|e| EvalError::Io(opts.out.clone(), e))?;

    let sem = Arc::new(tokio::sync::Semaphore::new(opts.concurrency.max(1)));
    let mut set = tokio::task::JoinSet::new();
    let opts_arc = Arc::new(opts.clone());
    for (inst, loc) in instances.into_iter().zip(located) {
        if inst.oracle.is_none() {
            summary.not_harvested += 1;
            continue;
        }
        summary.instances += 1;
        let dir = opts.out.join(&inst.rel);
        if let Some(unparseable) =
            kept_answer(&dir, opts.samples, opts.retry_unparseable).filter(|_| !opts.force)
        {
            summary.skipped_existing += 1;
            summary.kept_unparseable += usize::from(unparseable);
            continue;
        }
        let sem = sem.clone();
        let client = client.clone();
        let o = opts_arc.clone();
        let solver = solver.clone();
        set.spawn(async move {
            let Ok(_permit) = sem.acquire_owned().await else {
                return Err(EvalError::Config("semaphore closed".into()));
            };
            // Nothing listening at the base URL: every other instance would fail the same way.
            let unreachable = || client.as_ref().and_then(|c| c.unreachable()).is_some();
            if unreachable() {
                return Ok(None);
            }
            let done = answer_instance(&inst, &o, &solver, client.as_ref(), &loc, price).await;
            if unreachable() {
                return Ok(None); // not written: a rerun asks it again
            }
            write_answers(&dir, &done, o.samples)?;
            if o.progress {
                let m = &done.meta;
                eprintln!(
                    "{} {}: {:?}{}",
                    o.model,
                    inst.key(),
                    m.status,
                    m.error
                        .as_deref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                );
            }
            Ok::<_, EvalError>(Some((inst.key(), done.meta)))
        });
    }
    let mut first_err = None;
    while let Some(res) = set.join_next().await {
        match res {
            Ok(Ok(None)) => {}
            Ok(Ok(Some((key, m)))) => {
                summary.answered += 1;
                match m.status {
                    AnswerStatus::Ok => summary.ok += 1,
                    AnswerStatus::InfraError => {
                        summary.infra_errors += 1;
                        summary
                            .infra_error_instances
                            .push(format!("{key}: {}", m.error.as_deref().unwrap_or("")));
                    }
                    AnswerStatus::Unparseable => summary.unparseable += 1,
                }
                summary.tokens_in += m.tokens_in;
                summary.tokens_out += m.tokens_out;
                summary.seconds += m.seconds;
                if let Some(c) = m.cost {
                    *summary.cost.get_or_insert(0.0) += c;
                }
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(EvalError::Config(format!("task failed: {e}")));
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if let Some(why) = client.as_ref().and_then(|c| c.unreachable()) {
        return Err(EvalError::Unreachable(why.to_string()));
    }
    summary.infra_error_instances.sort();
    if summary.cost.is_none() && price.is_some() {
        summary.cost = Some(0.0);
    }
    // Score what is there now (including answers from earlier runs).
    let report = flux_score::score_instances(&asked, &opts.out, 1.0);
    summary.accuracy = report.accuracy;
    summary.passed = report.passed;
    summary.scored = report.total;
    summary.wall_seconds = start.elapsed().as_secs_f64();
    write_json(&opts.out.join("summary.json"), &summary)?;
    Ok(summary)
}

/// Everything one instance produced.
#[derive(Debug, Clone)]
pub struct Answered {
    /// One answer per sample (`None` when none could be parsed).
    pub answers: Vec<Option<Value>>,
    pub meta: Meta,
    /// `None` for the reference solvers, which make no request.
    pub transcript: Option<transcript::Transcript>,
}

fn write_answers(dir: &Path, done: &Answered, samples: u32) -> Result<(), EvalError> {
    for k in 1..=samples.max(done.answers.len() as u32) {
        let path = dir.join(sample_file(k));
        match done.answers.get(k as usize - 1).and_then(|a| a.as_ref()) {
            Some(a) => write_json(&path, a)?,
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    if let Some(t) = &done.transcript {
        write_json(&dir.join("transcript.json"), t)?;
    }
    write_json(&dir.join("meta.json"), &done.meta)
}

fn new_meta(inst: &Instance, o: &EvalOptions) -> Meta {
    Meta {
        id: inst.id.clone(),
        repository: inst.repository.clone(),
        kind: inst.kind.clone(),
        model: o.model.clone(),
        api: o.api.name().to_string(),
        status: AnswerStatus::Ok,
        tokens_in: 0,
        tokens_out: 0,
        seconds: 0.0,
        cost: None,
        attempts: 0,
        retries: 0,
        tool_calls: 0,
        error: None,
        mode: o.mode.name().to_string(),
        params: o.params.to_json(),
        context_files: Vec::new(),
        targets: Vec::new(),
        context_notes: Vec::new(),
        source: None,
        samples: Vec::new(),
        reasoning: None,
        raw_reply: None,
    }
}

/// Answer one instance (every sample).
pub async fn answer_instance(
    inst: &Instance,
    o: &EvalOptions,
    solver: &Solver,
    client: Option<&ChatClient>,
    source: &Located,
    price: Option<price::Price>,
) -> Answered {
    let t0 = Instant::now();
    let mut meta = new_meta(inst, o);
    meta.source = source.dir().map(|d| d.display().to_string());
    let mut answers = Vec::new();
    let mut transcript = None;
    match (solver, client) {
        (Solver::Oracle, _) => answers.push(solvers::oracle_answer(inst)),
        (Solver::StaticBaseline, _) => {
            answers.push(Some(solvers::static_baseline_answer(inst, source.dir())))
        }
        (Solver::Model, None) => {
            meta.status = AnswerStatus::InfraError;
            meta.error = Some("no client configured".into());
        }
        (Solver::Model, Some(c)) => {
            let p = prompt::build(
                inst,
                &prompt::PromptConfig {
                    source,
                    max_context_tokens: o.max_context_tokens,
                    reasoning: o.reasoning,
                    mode: o.mode,
                    system: o.system.as_deref(),
                },
            );
            meta.context_files = p.files.clone();
            meta.targets = p.targets.clone();
            meta.context_notes = p.notes.clone();
            let mut t = transcript::Transcript {
                id: inst.id.clone(),
                repository: inst.repository.clone(),
                model: o.model.clone(),
                api: o.api.name().to_string(),
                base_url: o.base_url.clone(),
                mode: o.mode.name().to_string(),
                params: o.params.to_json(),
                system: p.system.clone(),
                tools: if o.mode.tools() && source.dir().is_some() {
                    tools::specs().iter().map(|s| s.name.to_string()).collect()
                } else {
                    Vec::new()
                },
                context_files: p.files.clone(),
                targets: p.targets.clone(),
                context_notes: p.notes.clone(),
                samples: Vec::new(),
            };
            for k in 1..=o.samples.max(1) {
                let (a, sm, st) = ask::ask_sample(inst, o, c, &p, source.dir(), k, price).await;
                answers.push(a);
                meta.samples.push(sm);
                t.samples.push(st);
            }
            transcript = Some(t);
            fold_samples(&mut meta);
        }
    }
    meta.seconds = t0.elapsed().as_secs_f64();
    if meta.samples.is_empty() {
        meta.cost = price.map(|p| p.cost(meta.tokens_in, meta.tokens_out));
    }
    Answered {
        answers,
        meta,
        transcript,
    }
}

/// The instance's totals and status from its samples.
fn fold_samples(meta: &mut Meta) {
    let worst = meta
        .samples
        .iter()
        .max_by_key(|s| s.status.rank())
        .cloned()
        .unwrap_or_default();
    meta.status = worst.status;
    meta.error = worst.error.clone();
    meta.raw_reply = worst.raw_reply.clone();
    meta.reasoning = meta.samples.first().and_then(|s| s.reasoning.clone());
    meta.tokens_in = meta.samples.iter().map(|s| s.tokens_in).sum();
    meta.tokens_out = meta.samples.iter().map(|s| s.tokens_out).sum();
    meta.attempts = meta.samples.iter().map(|s| s.attempts).sum();
    meta.retries = meta.samples.iter().map(|s| s.retries).sum();
    meta.tool_calls = meta.samples.iter().map(|s| s.tool_calls).sum();
    meta.cost = meta
        .samples
        .iter()
        .map(|s| s.cost)
        .try_fold(0.0, |acc, c| c.map(|c| acc + c));
}

/// One entry of `validation.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ValidationEntry {
    pub id: String,
    pub repository: String,
    pub kind: String,
    pub status: String,
    pub reason: Option<String>,
    pub reasoning: Option<String>,
    pub answer: Option<Value>,
    pub question: String,
}

/// `<out>/validation.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ValidationReport {
    pub model: String,
    pub total: usize,
    pub passed: usize,
    pub infra_errors: usize,
    /// Instances whose answer failed: to be reviewed (wrong gold or hard question).
    pub review: Vec<ValidationEntry>,
    pub summary: Summary,
}

/// `flux validate`: a strong model answers every instance with its reasoning; failed instances
/// are listed for review in `<out>/validation.json` and `<out>/validation.txt`.
pub async fn run_validate(opts: &EvalOptions) -> Result<ValidationReport, EvalError> {
    let mut o = opts.clone();
    o.reasoning = true;
    let summary = run_eval(&o).await?;
    let instances = flux_score::discover_selected(&o.instances, &o.selection)?.instances;
    let report = flux_score::score_instances(&instances, &o.out, 1.0);
    let mut review = Vec::new();
    for r in &report.instances {
        if r.status != flux_score::Status::Fail {
            continue;
        }
        let Some(inst) = instances
            .iter()
            .find(|i| i.id == r.id && i.repository == r.repo)
        else {
            continue;
        };
        let dir = o.out.join(&inst.rel);
        let meta = read_meta(&dir);
        let answer = std::fs::read_to_string(dir.join("answer.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok());
        review.push(ValidationEntry {
            id: r.id.clone(),
            repository: r.repo.clone(),
            kind: r.kind.clone(),
            status: meta
                .as_ref()
                .map(|m| json!(m.status).as_str().unwrap_or("").to_string())
                .unwrap_or_else(|| "missing".into()),
            reason: r.reason.clone(),
            reasoning: meta.and_then(|m| m.reasoning),
            answer,
            question: inst.question.clone(),
        });
    }
    let v = ValidationReport {
        model: o.model.clone(),
        total: report.total,
        passed: report.passed,
        infra_errors: report.infra_errors,
        review,
        summary,
    };
    write_json(&o.out.join("validation.json"), &v)?;
    let txt = validation_text(&v);
    std::fs::write(o.out.join("validation.txt"), txt)
        .map_err(|e| EvalError::Io(o.out.join("validation.txt"), e))?;
    Ok(v)
}

/// The human-readable list of instances to review.
pub fn validation_text(v: &ValidationReport) -> String {
    let mut s = format!(
        "flux validate ({}): {}/{} passed, {} infra errors; {} to review\n",
        v.model,
        v.passed,
        v.total,
        v.infra_errors,
        v.review.len()
    );
    for e in &v.review {
        s.push_str(&format!(
            "\n== {}/{} [{}]\nquestion: {}\nwhy it failed: {}\nmodel reasoning: {}\n",
            e.repository,
            e.id,
            e.kind,
            e.question.lines().next().unwrap_or(""),
            e.reason.as_deref().unwrap_or(""),
            e.reasoning.as_deref().unwrap_or("(none)")
        ));
    }
    s
}
