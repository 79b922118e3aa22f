//! `flux`: the command-line face of flux. This crate is argument definitions and glue; the
//! work lives in the library crates (see ARCHITECTURE.md). It never calls bpf() itself.
use clap::{Parser, Subcommand};
use std::process::ExitCode;

// std's print macros panic on a closed stream (`flux harvest --json | head`); these shadow them
// in every module of the binary (textual scope: defined before the `mod`s) and write through
// `out`, which drops output to a closed stream and goes on.
macro_rules! println {
    () => { $crate::out::write($crate::out::Stream::Stdout, format_args!(""), true) };
    ($($t:tt)*) => { $crate::out::write($crate::out::Stream::Stdout, format_args!($($t)*), true) };
}
macro_rules! print {
    ($($t:tt)*) => { $crate::out::write($crate::out::Stream::Stdout, format_args!($($t)*), false) };
}
macro_rules! eprintln {
    () => { $crate::out::write($crate::out::Stream::Stderr, format_args!(""), true) };
    ($($t:tt)*) => { $crate::out::write($crate::out::Stream::Stderr, format_args!($($t)*), true) };
}
#[expect(
    unused_macros,
    reason = "no `eprint!` today; defined so that std's, which panics on a closed stderr, is never the one used"
)]
macro_rules! eprint {
    ($($t:tt)*) => { $crate::out::write($crate::out::Stream::Stderr, format_args!($($t)*), false) };
}

mod out;

mod bench_extract;
mod cache;
mod eval;
mod export;
mod extractors;
mod gc;
mod gen;
mod harvest;
mod images;
mod import;
mod perturb;
mod probes;
mod release;
mod run_instance;
mod score;
mod sweflux;
mod trace;

#[derive(Parser)]
#[command(
    name = "flux",
    version,
    about = "Execution-grounded benchmarks of runtime reasoning, harvested from traced Python test runs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a command under the tracer and write its trace.
    Trace(trace::Args),
    /// Show the USDT probes of a Python binary and what flux can trace with it.
    Probes(probes::Args),
    /// Score answers (a directory, or predictions JSONL) against the harvested gold answers.
    Score(score::Args),
    /// Ask a model (or `oracle`, `static-baseline`) every question; write answers and a summary.
    Eval(eval::Args),
    /// Answer every question with a strong model and list failures for review.
    Validate(eval::Args),
    /// Build or list the reproducible container images.
    Images(images::Args),
    /// Print each extractor's definition, parameters and answer shapes.
    Extractors(extractors::Args),
    /// Write instances in a peer layout (SWE-Flux, TraceEval) or as a dataset (hf, inspect).
    Export(export::Args),
    /// Turn instances of a peer benchmark's layout (SWE-Flux) into flux instances.
    Import(import::Args),
    /// Run instances' tests traced in their pinned images and write their gold oracle.json.
    Harvest(harvest::Args),
    /// Remove run directories, stale build scratch and orphaned containers from the cache.
    Gc(gc::Args),
    /// Perturb instances' test inputs, re-harvest, keep variants whose gold answer changed.
    Perturb(perturb::Args),
    /// Generate a benchmark set from repositories' own test suites (`sets/<name>/gen.toml`).
    Gen(gen::Args),
    /// Count instances per kind and repository, and their difficulty features.
    Stats(gen::StatsArgs),
    /// Run one instance's test once (flux, untraced or a reference tracer) and print its cost
    /// as JSON (for `cargo xtask bench harvest`).
    #[command(hide = true)]
    BenchRun(run_instance::Args),
    /// Time answering many questions of one trace, per question and with one index (for
    /// `cargo xtask bench extract`).
    #[command(hide = true)]
    BenchExtract(bench_extract::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Trace(a) => trace::run(a),
        Cmd::Probes(a) => probes::run(a),
        Cmd::Score(a) => score::run(a),
        Cmd::Eval(a) => eval::run_eval(a),
        Cmd::Validate(a) => eval::run_validate(a),
        Cmd::Images(a) => images::run(a),
        Cmd::Export(a) => export::run(a),
        Cmd::Extractors(a) => extractors::run(a),
        Cmd::Import(a) => import::run(a),
        Cmd::Harvest(a) => harvest::run(a),
        Cmd::Gc(a) => gc::run(a),
        Cmd::Perturb(a) => perturb::run(a),
        Cmd::Gen(a) => gen::run(a),
        Cmd::Stats(a) => gen::run_stats(a),
        Cmd::BenchRun(a) => run_instance::run(a),
        Cmd::BenchExtract(a) => bench_extract::run(a),
    };
    match result {
        Ok(code) => code,
        // Output to a closed pipe (`flux trace … | head`): what the reader wanted it has; end
        // quietly with the status a SIGPIPE death would give.
        Err(e) if out::is_broken_pipe(&e) => ExitCode::from(128 + 13),
        Err(e) => {
            eprintln!("flux: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
