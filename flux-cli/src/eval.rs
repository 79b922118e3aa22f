//! `flux eval` and `flux validate`: ask a model (or a reference solver: `--model oracle`,
//! `--model static-baseline`) every harvested question and write answers (flux-eval).
//!
//! API keys come only from the environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`) and are
//! never printed.
use anyhow::{Context, Result};
use flux_eval::{Api, EvalOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Model name; `oracle` and `static-baseline` are built-in solvers that need no API.
    #[arg(long)]
    model: String,
    /// API protocol: openai (any OpenAI-compatible endpoint) or anthropic.
    #[arg(long, default_value = "openai")]
    api: Api,
    /// Base URL of the API (default: https://api.openai.com/v1 or https://api.anthropic.com).
    #[arg(long)]
    base_url: Option<String>,
    /// Instance root (repeatable).
    #[arg(long = "instances", default_value = "instances")]
    instances: Vec<PathBuf>,
    /// Answers directory (default: answers/<model> for eval, validation/<model> for validate).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Instances answered at the same time.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Prompt budget in tokens (~4 characters each).
    #[arg(long, default_value_t = 100_000)]
    max_context_tokens: usize,
    /// Package source root (default: .flux-cache/src/<name>-<version>/ per instance).
    #[arg(long)]
    source_root: Option<PathBuf>,
    /// Price in USD per million input tokens (overrides the built-in table).
    #[arg(long, requires = "price_out")]
    price_in: Option<f64>,
    /// Price in USD per million output tokens (overrides the built-in table).
    #[arg(long, requires = "price_in")]
    price_out: Option<f64>,
    /// Offer read-only list_files/read_file tools over the source root.
    #[arg(long)]
    tools: bool,
    /// Re-answer instances that already have an ok answer.
    #[arg(long)]
    force: bool,
    /// No per-instance progress lines on stderr.
    #[arg(long, short)]
    quiet: bool,
}

fn options(a: Args, default_out_under: Option<&str>) -> EvalOptions {
    let base_url = a.base_url.unwrap_or_else(|| {
        match a.api {
            Api::OpenAi => "https://api.openai.com/v1",
            Api::Anthropic => "https://api.anthropic.com",
        }
        .to_string()
    });
    let mut o = EvalOptions::new(&a.model, a.api, &base_url);
    o.instances = a.instances;
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
    o.source_root = a.source_root;
    o.price_in = a.price_in;
    o.price_out = a.price_out;
    o.tools = a.tools;
    o.force = a.force;
    o.progress = !a.quiet;
    o
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")
}

fn check_roots(o: &EvalOptions) -> Result<()> {
    for root in &o.instances {
        if !root.is_dir() {
            let what = if root.exists() {
                "not a directory"
            } else {
                "no such directory"
            };
            anyhow::bail!("instances directory {}: {what}", root.display());
        }
    }
    Ok(())
}

/// `flux eval`: exit 0 when the run finished (whatever the accuracy), 1 when some instance
/// directories could not be read (listed in the summary).
pub fn run_eval(a: Args) -> Result<ExitCode> {
    let o = options(a, None);
    check_roots(&o)?;
    let summary = runtime()?.block_on(flux_eval::run_eval(&o))?;
    print!("{}", summary.to_text());
    println!("answers in {}", o.out.display());
    for i in &summary.invalid_instances {
        eprintln!("flux: invalid instance {}: {}", i.path, i.error);
    }
    Ok(if summary.invalid_instances.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `flux validate`: a strong model answers with its reasoning; failures are listed for review
/// in `<out>/validation.txt` and `<out>/validation.json` (default out `validation/<model>`).
pub fn run_validate(a: Args) -> Result<ExitCode> {
    let o = options(a, Some("validation"));
    check_roots(&o)?;
    let v = runtime()?.block_on(flux_eval::run_validate(&o))?;
    print!("{}", flux_eval::validation_text(&v));
    println!(
        "review list in {} and {}",
        o.out.join("validation.txt").display(),
        o.out.join("validation.json").display()
    );
    let invalid = &v.summary.invalid_instances;
    for i in invalid {
        eprintln!("flux: invalid instance {}: {}", i.path, i.error);
    }
    Ok(if invalid.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
