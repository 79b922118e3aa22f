//! flux-eval: asks a model (or a reference solver) every benchmark question and writes the
//! answers in the SWE-Flux layout that `flux-score` reads.
//!
//! For each instance: build a prompt (question, template, test files, repository source under
//! a context budget), call the model at temperature 0, take the first JSON object of the reply,
//! check it against the template's shape, and on failure send the error back (up to
//! [`EvalOptions::repair_rounds`] times). Transient HTTP failures are retried with backoff;
//! what still fails is an `infra_error`, recorded and never scored as wrong. Each instance gets
//! `<out>/<repo>/<id>/answer.json` and `meta.json`; the run gets `<out>/summary.json`. A rerun
//! skips instances whose meta status is `ok` (resumable).
//!
//! Architecture invariants: API keys come from options or the environment and are never
//! written or logged; the library never panics on model output.

pub mod client;
pub mod parse;
pub mod price;
pub mod prompt;
pub mod solvers;
pub mod tools;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use client::{
    Api, ChatClient, Completion, InfraError, Message, RetryPolicy, ToolCall, ToolSpec,
};
use flux_score::Instance;

/// Errors that stop a whole run (one instance's trouble never does).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Score(#[from] flux_score::ScoreError),
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("no API key: set {0}")]
    NoApiKey(&'static str),
    #[error("{0}")]
    Config(String),
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
    /// e.g. `https://api.openai.com/v1` (OpenAI) or `https://api.anthropic.com` (Anthropic).
    pub base_url: String,
    /// Instance roots (default `instances`).
    pub instances: Vec<PathBuf>,
    /// Answers directory (default `answers/<model>`).
    pub out: PathBuf,
    pub concurrency: usize,
    pub max_context_tokens: usize,
    /// Source root; default `.flux-cache/src/<name>-<version>/` per instance.
    pub source_root: Option<PathBuf>,
    /// Price per million input / output tokens, overriding the table.
    pub price_in: Option<f64>,
    pub price_out: Option<f64>,
    /// Repair rounds after an unparseable or ill-shaped reply (default 2).
    pub repair_rounds: u32,
    pub retry: RetryPolicy,
    pub request_timeout: Duration,
    /// `max_tokens` for Anthropic requests.
    pub max_output_tokens: u32,
    /// API key; `None` reads `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`.
    pub api_key: Option<String>,
    /// Ask for a `"reasoning"` field alongside the answer (validate mode).
    pub reasoning: bool,
    /// Re-answer instances that already have an ok answer.
    pub force: bool,
    /// Print one progress line per instance to stderr.
    pub progress: bool,
    /// Offer the read-only `list_files` / `read_file` tools over the source root.
    pub tools: bool,
    /// Most tool-call rounds per instance (tools mode).
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
            .field("source_root", &self.source_root)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("tools", &self.tools)
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
            out: PathBuf::from("answers").join(sanitize(model)),
            concurrency: 4,
            max_context_tokens: 100_000,
            source_root: None,
            price_in: None,
            price_out: None,
            repair_rounds: 2,
            retry: RetryPolicy::default(),
            request_timeout: Duration::from_secs(600),
            max_output_tokens: 8192,
            api_key: None,
            reasoning: false,
            force: false,
            progress: false,
            tools: false,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStatus {
    Ok,
    InfraError,
    Unparseable,
}

/// `<out>/<repo>/<id>/meta.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub id: String,
    pub repository: String,
    pub kind: String,
    pub model: String,
    pub api: String,
    pub status: AnswerStatus,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub seconds: f64,
    /// USD; `null` when the model has no known price.
    pub cost: Option<f64>,
    /// Model calls made (1 + repair rounds used).
    pub attempts: u32,
    /// HTTP retries after transient failures.
    pub retries: u32,
    /// Tool calls executed (tools mode).
    #[serde(default)]
    pub tool_calls: u32,
    pub error: Option<String>,
    /// Source files put in the prompt, and what was cut.
    #[serde(default)]
    pub context_files: Vec<String>,
    #[serde(default)]
    pub context_notes: Vec<String>,
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
    /// Skipped because an ok answer was already there.
    pub skipped_existing: usize,
    pub not_harvested: usize,
    pub ok: usize,
    pub infra_errors: usize,
    pub unparseable: usize,
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
        for i in &self.invalid_instances {
            s.push_str(&format!("invalid instance {}: {}\n", i.path, i.error));
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

/// True when the instance already has an ok answer in `dir`.
pub fn has_ok_answer(dir: &Path) -> bool {
    if !dir.join("answer.json").is_file() {
        return false;
    }
    match std::fs::read_to_string(dir.join("meta.json")) {
        Err(_) => true, // an answer without meta (e.g. written by another tool)
        Ok(s) => serde_json::from_str::<Value>(&s)
            .ok()
            .and_then(|m| m.get("status").and_then(|x| x.as_str()).map(|x| x == "ok"))
            .unwrap_or(false),
    }
}

/// Run the evaluation: answer every harvested instance, write answers, meta and summary.
pub async fn run_eval(opts: &EvalOptions) -> Result<Summary, EvalError> {
    let start = Instant::now();
    let found = flux_score::discover_all(&opts.instances)?;
    let instances = found.instances;
    let solver = Solver::for_model(&opts.model);
    let client = if solver == Solver::Model {
        let key = match &opts.api_key {
            Some(k) => Some(k.clone()),
            None => std::env::var(opts.api.key_env())
                .ok()
                .filter(|k| !k.is_empty()),
        };
        let key = key.ok_or(EvalError::NoApiKey(opts.api.key_env()))?;
        Some(
            ChatClient::new(
                opts.api,
                &opts.base_url,
                &opts.model,
                Some(key),
                opts.max_output_tokens,
                opts.request_timeout,
                opts.retry.clone(),
            )
            .map_err(EvalError::Config)?,
        )
    } else {
        None
    };
    let price = price::Price::resolve(&opts.model, opts.price_in, opts.price_out);
    let mut summary = Summary {
        model: opts.model.clone(),
        api: opts.api.name().to_string(),
        out: opts.out.display().to_string(),
        invalid_instances: found.invalid,
        ..Default::default()
    };
    std::fs::create_dir_all(&opts.out).map_err(|e| EvalError::Io(opts.out.clone(), e))?;

    let sem = Arc::new(tokio::sync::Semaphore::new(opts.concurrency.max(1)));
    let mut set = tokio::task::JoinSet::new();
    let opts_arc = Arc::new(opts.clone());
    for inst in instances {
        if inst.oracle.is_none() {
            summary.not_harvested += 1;
            continue;
        }
        summary.instances += 1;
        let dir = opts.out.join(&inst.rel);
        if !opts.force && has_ok_answer(&dir) {
            summary.skipped_existing += 1;
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
            let (answer, mut meta) = answer_instance(&inst, &o, &solver, client.as_ref()).await;
            meta.cost = price.map(|p| p.cost(meta.tokens_in, meta.tokens_out));
            if let Some(a) = &answer {
                write_json(&dir.join("answer.json"), a)?;
            } else {
                let _ = std::fs::remove_file(dir.join("answer.json"));
            }
            write_json(&dir.join("meta.json"), &meta)?;
            if o.progress {
                eprintln!(
                    "{} {}: {:?}{}",
                    o.model,
                    inst.key(),
                    meta.status,
                    meta.error
                        .as_deref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                );
            }
            Ok::<Meta, EvalError>(meta)
        });
    }
    let mut first_err = None;
    while let Some(res) = set.join_next().await {
        match res {
            Ok(Ok(m)) => {
                summary.answered += 1;
                match m.status {
                    AnswerStatus::Ok => summary.ok += 1,
                    AnswerStatus::InfraError => summary.infra_errors += 1,
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
    if summary.cost.is_none() && price.is_some() {
        summary.cost = Some(0.0);
    }
    // Score what is there now (including answers from earlier runs).
    let report =
        flux_score::score_instances(&flux_score::discover(&opts.instances)?, &opts.out, 1.0);
    summary.accuracy = report.accuracy;
    summary.passed = report.passed;
    summary.scored = report.total;
    summary.wall_seconds = start.elapsed().as_secs_f64();
    write_json(&opts.out.join("summary.json"), &summary)?;
    Ok(summary)
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
        context_files: Vec::new(),
        context_notes: Vec::new(),
        reasoning: None,
        raw_reply: None,
    }
}

/// Answer one instance. Returns the answer (when one could be parsed) and its meta.
pub async fn answer_instance(
    inst: &Instance,
    o: &EvalOptions,
    solver: &Solver,
    client: Option<&ChatClient>,
) -> (Option<Value>, Meta) {
    let t0 = Instant::now();
    let mut meta = new_meta(inst, o);
    let answer = match (solver, client) {
        (Solver::Oracle, _) => {
            meta.attempts = 0;
            solvers::oracle_answer(inst)
        }
        (Solver::StaticBaseline, _) => Some(solvers::static_baseline_answer(
            inst,
            o.source_root.as_deref(),
        )),
        (Solver::Model, Some(c)) => ask_model(inst, o, c, &mut meta).await,
        (Solver::Model, None) => {
            meta.status = AnswerStatus::InfraError;
            meta.error = Some("no client configured".into());
            None
        }
    };
    meta.seconds = t0.elapsed().as_secs_f64();
    (answer, meta)
}

async fn ask_model(
    inst: &Instance,
    o: &EvalOptions,
    c: &ChatClient,
    meta: &mut Meta,
) -> Option<Value> {
    let mut p = prompt::build(
        inst,
        o.source_root.as_deref(),
        o.max_context_tokens,
        o.reasoning,
    );
    meta.context_files = p.files.clone();
    meta.context_notes = p.notes.clone();
    let specs = if o.tools { tools::specs() } else { Vec::new() };
    let mut toolbox = None;
    if o.tools {
        p.user.push_str("\nYou may call the read-only tools list_files and read_file to read more of the package source before answering; then reply with the JSON object.\n");
        let used = (p.user.len() + p.system.len()) / prompt::CHARS_PER_TOKEN;
        let root = prompt::source_root_for(inst, o.source_root.as_deref());
        toolbox = Some(tools::Toolbox::new(
            root,
            o.max_context_tokens.saturating_sub(used + 2_000),
        ));
    }
    let mut messages = vec![Message {
        role: "user",
        content: p.user,
    }
    .to_value()];
    let mut last_parsed: Option<Value> = None;
    let mut tool_rounds = 0u32;
    for round in 0..=o.repair_rounds {
        // One model turn, possibly through several tool rounds.
        let reply = loop {
            meta.attempts += 1;
            let reply = match c.complete_with(&p.system, &messages, &specs).await {
                Ok(r) => r,
                Err(e) => {
                    meta.retries += e.requests.saturating_sub(1);
                    meta.status = AnswerStatus::InfraError;
                    meta.error = Some(e.message);
                    return None;
                }
            };
            meta.tokens_in += reply.tokens_in;
            meta.tokens_out += reply.tokens_out;
            meta.retries += reply.retries;
            let Some(tb) = toolbox.as_mut().filter(|_| !reply.tool_calls.is_empty()) else {
                break reply;
            };
            if tool_rounds >= o.max_tool_rounds + 2 {
                // The model ignores the refusals: stop here with what it said.
                break reply;
            }
            tool_rounds += 1;
            let results: Vec<(String, String)> = reply
                .tool_calls
                .iter()
                .map(|call| {
                    let out = if tool_rounds > o.max_tool_rounds {
                        "error: no more tool calls allowed; answer now with the JSON object"
                            .to_string()
                    } else {
                        meta.tool_calls += 1;
                        tb.run(call)
                    };
                    (call.id.clone(), out)
                })
                .collect();
            messages.push(reply.assistant.clone());
            messages.extend(c.tool_results(&results));
        };
        let problem = match parse::extract_json(&reply.text) {
            Err(e) => e,
            Ok(v) => match parse::validate_shape(&inst.template, &v) {
                Ok(()) => {
                    meta.status = AnswerStatus::Ok;
                    meta.error = None;
                    let mut v = v;
                    if let Some(obj) = v.as_object_mut() {
                        if let Some(r) = obj.remove("reasoning") {
                            meta.reasoning = Some(match r {
                                Value::String(s) => s,
                                other => other.to_string(),
                            });
                        }
                    }
                    return Some(v);
                }
                Err(e) => {
                    last_parsed = Some(v);
                    format!("the JSON does not match the template: {e}")
                }
            },
        };
        meta.status = AnswerStatus::Unparseable;
        meta.error = Some(problem.clone());
        meta.raw_reply = Some(reply.text.chars().take(4000).collect());
        if round < o.repair_rounds {
            if !reply.tool_calls.is_empty() {
                // Tool calls need answers before another user message; end them here.
                let results: Vec<(String, String)> = reply
                    .tool_calls
                    .iter()
                    .map(|c| {
                        (
                            c.id.clone(),
                            "error: no more tool calls allowed".to_string(),
                        )
                    })
                    .collect();
                messages.push(reply.assistant.clone());
                messages.extend(c.tool_results_then(
                    &results,
                    &format!("Your reply could not be used: {problem}. Reply with only one JSON object of the template's shape."),
                ));
            } else {
                messages.push(reply.assistant.clone());
                messages.push(
                    Message {
                        role: "user",
                        content: format!(
                            "Your reply could not be used: {problem}. Reply again with only one JSON object of the template's shape."
                        ),
                    }
                    .to_value(),
                );
            }
        }
    }
    // Keep the last parsed (ill-shaped) answer for inspection; meta says unparseable.
    last_parsed
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
    let instances = flux_score::discover(&o.instances)?;
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
