//! `flux eval` and `flux validate`: ask a model (or a reference solver: `--model oracle`,
//! `--model static-baseline`) every harvested question and write answers, meta and
//! transcripts (flux-eval).
//!
//! API keys come only from the environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, or the
//! variable `--api-key-env` names) and are never printed; a `--base-url` other than the
//! vendor's own may need none (vLLM, Ollama, llama.cpp).
use anyhow::{Context, Result};
use flux_eval::{Api, EvalOptions, GenParams, MaxTokensField, Mode, RetryPolicy, Source};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, clap::ValueEnum)]
enum TokensField {
    MaxTokens,
    MaxCompletionTokens,
}

#[derive(clap::Args)]
pub struct Args {
    /// Model name; `oracle` and `static-baseline` are built-in solvers that need no API.
    #[arg(long)]
    model: String,
    /// API protocol: openai (any OpenAI-compatible server: vLLM, Ollama, llama.cpp, …) or
    /// anthropic.
    #[arg(long, default_value = "openai")]
    api: Api,
    /// Base URL of the API (default: https://api.openai.com/v1 or https://api.anthropic.com;
    /// e.g. http://localhost:8000/v1 for vLLM, http://localhost:11434/v1 for Ollama).
    #[arg(long)]
    base_url: Option<String>,
    /// The environment variable holding the API key (default OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY). Needed only by the vendors' own URLs.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// Instance root (repeatable).
    #[arg(long = "instances", default_value = "instances")]
    instances: Vec<PathBuf>,
    #[command(flatten)]
    select: crate::score::SelectArgs,
    /// Answers directory (default: answers/<model> for eval, validation/<model> for validate).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    cache: crate::cache::CacheArg,
    /// Package sources under this root (`<root>/<name>-<version>/`, or the root itself)
    /// instead of the cache's `<cache>/src/`.
    #[arg(long, conflicts_with = "no_source")]
    source_root: Option<PathBuf>,
    /// Ask without any repository source, on purpose (else a missing source is an error).
    #[arg(long)]
    no_source: bool,
    /// How the source reaches the model: `context` (chosen around the target, in the prompt),
    /// `agent` (a small prompt and list/read/search tools over the source tree) or
    /// `context+tools` (both).
    #[arg(long, default_value = "context")]
    mode: Mode,
    /// Same as `--mode context+tools` (the old flag).
    #[arg(long, hide = true)]
    tools: bool,
    /// Most tool rounds per sample (agent and context+tools modes).
    #[arg(long, default_value_t = 16)]
    max_tool_rounds: u32,
    /// Instances answered at the same time.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Prompt budget in tokens (~4 characters each); tool output counts against it too.
    #[arg(long, default_value_t = 100_000)]
    max_context_tokens: usize,
    /// Sampling temperature, or `default` to send none (reasoning models accept only theirs).
    #[arg(long, default_value = "0")]
    temperature: String,
    /// Output limit per reply (Anthropic: default 8192; OpenAI-compatible: sent only if set).
    #[arg(long)]
    max_tokens: Option<u32>,
    /// The field that carries --max-tokens on the OpenAI protocol (default:
    /// max-completion-tokens for api.openai.com, max-tokens elsewhere).
    #[arg(long, value_enum)]
    max_tokens_field: Option<TokensField>,
    /// OpenAI `reasoning_effort` (minimal, low, medium, high).
    #[arg(long)]
    reasoning_effort: Option<String>,
    /// Anthropic extended-thinking budget in tokens (>= 1024; needs `--temperature default`).
    #[arg(long)]
    thinking_budget: Option<u32>,
    /// System prompt text (replaces the built-in one).
    #[arg(long, conflicts_with = "system_file")]
    system: Option<String>,
    /// Read the system prompt from this file.
    #[arg(long)]
    system_file: Option<PathBuf>,
    /// Independent answers per instance, for pass@k (`flux score` reports pass@1..k).
    #[arg(long, default_value_t = 1)]
    samples: u32,
    /// Repair rounds after an unparseable or ill-shaped reply.
    #[arg(long, default_value_t = 2)]
    repair_rounds: u32,
    /// HTTP retries after a transient failure (429, 408, 5xx, timeouts; a refused connection
    /// stops the run at once).
    #[arg(long, default_value_t = 4)]
    retries: u32,
    /// First backoff in seconds (doubled each retry; a Retry-After header wins).
    #[arg(long, default_value_t = 2.0)]
    backoff: f64,
    /// Longest backoff in seconds.
    #[arg(long, default_value_t = 60.0)]
    max_backoff: f64,
    /// Timeout of one HTTP request in seconds.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// Price in USD per million input tokens (overrides the built-in table).
    #[arg(long, requires = "price_out")]
    price_in: Option<f64>,
    /// Price in USD per million output tokens (overrides the built-in table).
    #[arg(long, requires = "price_in")]
    price_out: Option<f64>,
    /// Re-answer instances that already have an ok answer.
    #[arg(long)]
    force: bool,
    /// Ask again the instances whose earlier answer was unparseable (a rerun keeps them: they
    /// are the model's answers, scored as wrong).
    #[arg(long)]
    retry_unparseable: bool,
    /// No per-instance progress lines on stderr.
    #[arg(long, short)]
    quiet: bool,
}

fn secs(name: &str, s: f64) -> Result<Duration> {
    anyhow::ensure!(
        s.is_finite() && s >= 0.0,
        "--{name} {s}: must be a number of seconds >= 0"
    );
    Ok(Duration::from_secs_f64(s))
}

fn options(a: Args, default_out_under: Option<&str>) -> Result<EvalOptions> {
    let base_url = a.base_url.unwrap_or_else(|| {
        match a.api {
            Api::OpenAi => "https://api.openai.com/v1",
            Api::Anthropic => "https://api.anthropic.com",
        }
        .to_string()
    });
    let mut o = EvalOptions::new(&a.model, a.api, &base_url);
    o.instances = a.instances;
    o.selection = a.select.selection()?;
    match (a.out, default_out_under) {
        (Some(out), _) => o.out = out,
        // EvalOptions::new's default is answers/<sanitised model>: keep the sanitised name.
        (None, Some(under)) => {
            let name = o
                .out
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_else(|| "model".into());
            o.out = PathBuf::from(under).join(name);
        }
        (None, None) => {}
    }
    o.concurrency = a.concurrency.max(1);
    o.max_context_tokens = a.max_context_tokens;
    o.source = match (a.no_source, a.source_root) {
        (true, _) => Source::Off,
        (false, Some(r)) => Source::Root(r),
        (false, None) => Source::Cache(a.cache.dir()),
    };
    o.mode = if a.tools { Mode::ContextTools } else { a.mode };
    o.max_tool_rounds = a.max_tool_rounds;
    let temperature =
        match a.temperature.as_str() {
            "default" | "none" => None,
            t => Some(t.parse::<f64>().with_context(|| {
                format!("--temperature {t}: a number, or `default` to send none")
            })?),
        };
    o.params = GenParams {
        temperature,
        max_tokens: a.max_tokens,
        max_tokens_field: a.max_tokens_field.map(|f| match f {
            TokensField::MaxTokens => MaxTokensField::MaxTokens,
            TokensField::MaxCompletionTokens => MaxTokensField::MaxCompletionTokens,
        }),
        reasoning_effort: a.reasoning_effort,
        thinking_budget: a.thinking_budget,
    };
    o.params.check(a.api).map_err(anyhow::Error::msg)?;
    o.system = match (a.system, a.system_file) {
        (Some(s), _) => Some(s),
        (None, Some(f)) => Some(
            std::fs::read_to_string(&f)
                .with_context(|| format!("reading the system prompt {}", f.display()))?,
        ),
        (None, None) => None,
    };
    anyhow::ensure!(a.samples >= 1, "--samples must be at least 1");
    o.samples = a.samples;
    o.repair_rounds = a.repair_rounds;
    o.retry = RetryPolicy {
        max_retries: a.retries,
        initial_backoff: secs("backoff", a.backoff)?,
        max_backoff: secs("max-backoff", a.max_backoff)?,
    };
    o.request_timeout = secs("timeout", a.timeout)?;
    if let Some(var) = &a.api_key_env {
        o.api_key = std::env::var(var).ok().filter(|k| !k.is_empty());
        anyhow::ensure!(
            o.api_key.is_some() || !flux_eval::ChatClient::is_vendor_url(a.api, &base_url),
            "no API key: {var} is not set"
        );
    }
    o.price_in = a.price_in;
    o.price_out = a.price_out;
    o.force = a.force;
    o.retry_unparseable = a.retry_unparseable;
    o.progress = !a.quiet;
    Ok(o)
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")
}

fn check_roots(o: &EvalOptions) -> Result<()> {
    for root in &o.instances {
        crate::score::require_dir("instances", root)?;
    }
    Ok(())
}

/// Exit 1 when some answers are still infrastructure errors after retries (listed) or some
/// instance directories could not be read; 0 otherwise, whatever the accuracy.
fn exit_code(summary: &flux_eval::Summary) -> ExitCode {
    for i in &summary.invalid_instances {
        eprintln!("flux: invalid instance {}: {}", i.path, i.error);
    }
    if summary.infra_errors > 0 {
        eprintln!(
            "flux: {} answer(s) still an infrastructure error after retries (not scored); \
             run the same command again to retry only those",
            summary.infra_errors
        );
    }
    if summary.invalid_instances.is_empty() && summary.infra_errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `flux eval`.
pub fn run_eval(a: Args) -> Result<ExitCode> {
    let o = options(a, None)?;
    check_roots(&o)?;
    let summary = runtime()?.block_on(flux_eval::run_eval(&o))?;
    print!("{}", summary.to_text());
    println!("answers in {}", o.out.display());
    Ok(exit_code(&summary))
}

/// `flux validate`: a strong model answers with its reasoning; failures are listed for review
/// in `<out>/validation.txt` and `<out>/validation.json` (default out `validation/<model>`).
pub fn run_validate(a: Args) -> Result<ExitCode> {
    let o = options(a, Some("validation"))?;
    check_roots(&o)?;
    let v = runtime()?.block_on(flux_eval::run_validate(&o))?;
    print!("{}", flux_eval::validation_text(&v));
    println!(
        "review list in {} and {}",
        o.out.join("validation.txt").display(),
        o.out.join("validation.json").display()
    );
    Ok(exit_code(&v.summary))
}
