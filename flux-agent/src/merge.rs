//! The two-witness merge lives in `flux-merge` (it builds without aya, tokio or nightly, and its
//! offline corpus runs without root); this module plans for an [`Interpreter`] and re-exports it.
use crate::interp::Interpreter;
use anyhow::Result;
use flux_trace::Scope;

pub use flux_merge::merge;
pub use flux_merge::plan::{CallsMode, Plan};
pub use flux_merge::scrub_addresses;

/// What the interpreter's probes can be trusted with.
pub fn capabilities(interp: &Interpreter) -> flux_merge::Capabilities {
    flux_merge::Capabilities {
        entry: interp.entry.usable(),
        ret: interp.ret.usable(),
        line: interp.line.usable(),
    }
}

/// The plan for tracing with `interp` in `mode` and `scope`.
pub fn plan(interp: &Interpreter, mode: CallsMode, scope: Scope) -> Result<Plan> {
    flux_merge::plan(capabilities(interp), mode, scope).map_err(|_| {
        anyhow::anyhow!(
            "{} (CPython {}) has no usable USDT return probe: use --calls hook (or auto)",
            interp.exe.display(),
            interp.version_string()
        )
    })
}

/// The trace's label of an interpreter: `/usr/bin/python3.11 (3.11.2)`.
pub fn interpreter_label(interp: &Interpreter) -> String {
    format!("{} ({})", interp.exe.display(), interp.version_string())
}
