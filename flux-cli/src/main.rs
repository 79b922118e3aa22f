//! `flux`: the command-line face of flux. This crate is argument definitions and glue; the
//! work lives in the library crates (see ARCHITECTURE.md). It never calls bpf() itself.
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod probes;
mod trace;

#[derive(Parser)]
#[command(name = "flux", version, about = "Execution-grounded benchmarks of runtime reasoning, harvested from traced Python test runs")]
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Trace(a) => trace::run(a),
        Cmd::Probes(a) => probes::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flux: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
