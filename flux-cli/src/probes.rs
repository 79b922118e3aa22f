//! `flux probes RUNTIME`: the USDT probes a runtime has (a CPython interpreter, or a JVM's
//! `java` launcher, whose probes are in its `libjvm.so`) and what flux can trust of them
//! (entry, return, line), as the planner sees them: decided from the ELF notes, never a name.
use anyhow::{Context, Result};
use flux_agent::interp::Interpreter;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The Python executable (or libpython), or a JDK's `java`, to inspect.
    python: PathBuf,
    /// Filesystem root the interpreter lives in (to find its libpython), e.g. a container rootfs.
    #[arg(long, default_value = "/")]
    root: PathBuf,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let path = std::fs::canonicalize(&a.python).with_context(|| a.python.display().to_string())?;
    let i = Interpreter::inspect(&path, &a.root)?;
    println!(
        "interpreter: {} ({} {})",
        i.exe.display(),
        i.family_name(),
        i.version_string()
    );
    println!("probes in:   {}", i.probes.path.display());
    if i.probes.sites.is_empty() {
        println!("  (no USDT probes: built without --with-dtrace)");
    }
    let hotspot = i.family == flux_agent::interp::Family::HotSpot;
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
    if hotspot {
        println!("  lines:           none (HotSpot has no line probe)");
        println!(
            "  the method probes fire only in a JVM started with -XX:+DTraceMethodProbes; flux \
             trace runs it with {} (through JAVA_TOOL_OPTIONS: inlined methods fire no return \
             when an exception leaves them); they have no semaphore",
            flux_agent::interp::JVM_TRACE_FLAGS
        );
        println!("  values, exceptions: none (no in-process hook for the JVM); tests: the test methods named in the config");
    } else {
        println!("  lines:           {}", i.line.describe());
        println!("  values, exceptions, tests: hook");
    }
    Ok(ExitCode::SUCCESS)
}
