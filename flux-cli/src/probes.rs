//! `flux probes PYTHON`: the USDT probes an interpreter has and what flux can trust of them
//! (entry, return, line), as the planner sees them.
use anyhow::{Context, Result};
use flux_agent::interp::Interpreter;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The Python executable (or libpython) to inspect.
    python: PathBuf,
    /// Filesystem root the interpreter lives in (to find its libpython), e.g. a container rootfs.
    #[arg(long, default_value = "/")]
    root: PathBuf,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let path = std::fs::canonicalize(&a.python).with_context(|| a.python.display().to_string())?;
    let i = Interpreter::inspect(&path, &a.root)?;
    println!(
        "interpreter: {} (CPython {})",
        i.exe.display(),
        i.version_string()
    );
    println!("probes in:   {}", i.probes.path.display());
    if i.probes.sites.is_empty() {
        println!("  (no USDT probes: built without --with-dtrace)");
    }
    for s in &i.probes.sites {
        let args: Vec<&str> = s.args.iter().map(|a| a.text.as_str()).collect();
        println!(
            "  {}:{:<26} site {:#x} (file offset {:#x}) semaphore {:#x}  args: {}",
            s.provider,
            s.name,
            s.addr,
            s.offset,
            s.semaphore_offset,
            args.join(" ")
        );
    }
    println!("flux can trace with it:");
    println!("  calls (entries): {}", i.entry.describe());
    println!("  returns:         {}", i.ret.describe());
    println!("  lines:           {}", i.line.describe());
    println!("  values, exceptions, tests: hook");
    Ok(ExitCode::SUCCESS)
}
