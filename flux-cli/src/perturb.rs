//! `flux perturb [--n N] [--seed S] [--proposer ast|llm] [--out DIR] [--report FILE] INSTANCE…`:
//! glue over `flux_perturb::perturb`. Progress on stderr, the per-instance table (attempted,
//! harvested, kept, and why each discarded variant was discarded) on stdout, the same as JSON
//! with `--report FILE`. Exit status: 0 when every instance was processed (kept or not), 1 when
//! an instance failed as a whole, 2 when nothing could run.
use anyhow::{Context, Result};
use flux_eval::Api;
use flux_harvest::Runtime;
use flux_perturb::{llm::LlmOptions, Assertions, Mutator, PerturbOptions, Proposer};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ProposerArg {
    /// Seeded mutations of the test's syntax tree (python3, stdlib only).
    Ast,
    /// A model proposes literal replacements, applied through the same syntax-tree path.
    Llm,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum AssertionsArg {
    /// Assertions comparing against literals of the old inputs become plain expressions.
    Relax,
    /// Keep every assertion; variants whose test now fails are discarded.
    Keep,
}

#[derive(clap::Args)]
pub struct Args {
    /// Variants attempted per instance (at most, with --keep).
    #[arg(long, default_value_t = 3)]
    n: usize,
    /// Stop trying seeds for an instance once K variants are kept (seeds are tried in rounds of
    /// max(K, 2), up to --n in all).
    #[arg(long, value_name = "K")]
    keep: Option<usize>,
    /// Seed of the first variant; variant k uses seed S+k-1 and is named <id>--v<seed>.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, value_enum, default_value = "ast")]
    proposer: ProposerArg,
    /// Root for the variants (<out>/<repository>/<id>--v<seed>/); default: the origin's
    /// instances root.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the report as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// At most this many mutations per variant.
    #[arg(long, default_value_t = 3)]
    max_mutations: usize,
    #[arg(long, value_enum, default_value = "relax")]
    assertions: AssertionsArg,
    /// Write the proposed variants without harvesting them (nothing is kept).
    #[arg(long)]
    no_harvest: bool,
    /// Re-harvest each kept variant from a clean run; drop it unless it reproduces.
    #[arg(long)]
    check: bool,
    /// Replace variant directories that already exist.
    #[arg(long)]
    force: bool,
    #[arg(long, value_enum, default_value = "auto")]
    runtime: Runtime,
    #[command(flatten)]
    cache: crate::cache::CacheArg,
    /// The Python that runs the mutator (default: $FLUX_PYTHON, else python3).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Model for --proposer llm.
    #[arg(long)]
    model: Option<String>,
    /// API protocol for --proposer llm: openai (any OpenAI-compatible endpoint) or anthropic.
    #[arg(long, default_value = "openai")]
    api: Api,
    /// Base URL of the API (default: https://api.openai.com/v1 or https://api.anthropic.com).
    #[arg(long)]
    base_url: Option<String>,
    /// Instance directories, or directories to search for them.
    #[arg(required = true)]
    instances: Vec<PathBuf>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let harvest = if a.no_harvest {
        None
    } else {
        let mut h = flux_interop::external::harvest_options(a.cache.dir());
        h.runtime = a.runtime;
        Some(h)
    };
    let mut o = PerturbOptions::new(harvest);
    o.n = a.n.max(1);
    o.keep = a.keep.map(|k| k.max(1));
    o.seed = a.seed;
    o.max_mutations = a.max_mutations.max(1);
    o.assertions = match a.assertions {
        AssertionsArg::Relax => Assertions::Relax,
        AssertionsArg::Keep => Assertions::Keep,
    };
    o.out = a.out.clone();
    o.check = a.check;
    o.force = a.force;
    if let Some(p) = &a.python {
        o.mutator = Mutator::new(p);
    }
    o.proposer = match a.proposer {
        ProposerArg::Ast => Proposer::Ast,
        ProposerArg::Llm => {
            let model = a.model.clone().context("--proposer llm needs --model")?;
            let base = a.base_url.clone().unwrap_or_else(|| {
                match a.api {
                    Api::OpenAi => "https://api.openai.com/v1",
                    Api::Anthropic => "https://api.anthropic.com",
                }
                .to_string()
            });
            Proposer::Llm(LlmOptions::new(a.api, &base, &model))
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting tokio")?;
    let mut progress = |l: &str| eprintln!("flux: {l}");
    let report = match rt.block_on(flux_perturb::perturb(&a.instances, &o, &mut progress)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flux: error: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    print!("{}", report.to_text());
    if let Some(path) = &a.report {
        write_report(path, &report)?;
    }
    Ok(if report.instances.iter().any(|i| i.error.is_some()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_report(path: &Path, r: &flux_perturb::Report) -> Result<()> {
    if let Some(p) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))?;
    }
    std::fs::write(path, serde_json::to_string_pretty(r)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}
