//! Glue for SWE-Flux's formats: their TRACE_* variables from flux's environment, and the log
//! writer (`flux_interop::sweflux_log`) on flux's clock.
use anyhow::Result;
use flux_interop::sweflux_log::{self, LogConfig};
use flux_trace::{Dialect, Trace, TracingConfig};

/// Their tracer's configuration from this process's environment (the one the traced command
/// inherits, as their conftest and tracer read it).
pub fn log_config() -> LogConfig {
    let vars: Vec<(String, String)> = sweflux_log::VARIABLES
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    LogConfig::from_pairs(&vars)
}

/// A tracing config given with `--format swe-flux-log` must record what the log needs.
pub fn check_config(c: &TracingConfig) -> Result<()> {
    if c.dialect != Dialect::SweFlux {
        anyhow::bail!(
            "--format swe-flux-log needs `dialect = \"swe-flux\"` in the tracing config \
             (or no --config: it is then made from the TRACE_* variables)"
        );
    }
    if !c.tests {
        anyhow::bail!("--format swe-flux-log needs the test boundaries (`tests = true`)");
    }
    Ok(())
}

/// Write `trace` as their log, configured by this process's TRACE_* variables.
pub fn write_log(trace: &Trace, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let cfg = log_config();
    if !cfg.on {
        eprintln!(
            "flux: note: TRACE_ON is not 1: the log is empty, as SWE-Flux's tracer leaves it"
        );
    }
    let stats = sweflux_log::write_log(trace, &cfg, flux_interop::external::wall_offset_ns(), w)
        .map_err(|e| match e {
            sweflux_log::LogError::Io(e) => e,
            other => std::io::Error::other(other.to_string()),
        })?;
    eprintln!(
        "flux:   swe-flux-log: {} lines, {} tests, {} events of matching frames",
        stats.lines, stats.tests, stats.matched
    );
    Ok(())
}
