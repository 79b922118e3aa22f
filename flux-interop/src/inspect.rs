//! An Inspect task over an exported dataset (`flux export --format inspect OUT`): the dataset of
//! [`crate::hf`] in `OUT` and, beside it, `OUT/flux_task.py`, an Inspect task that asks each
//! row's system and user messages and scores the reply against the row's gold with
//! `OUT/flux_scoring.py`, flux's scoring rules in pure Python (a port of flux-score's
//! comparison, partial credit, call-graph edge F1 and failure classes, and of
//! `flux_eval::parse::extract_json`), so an Inspect user needs no flux binary. The port's
//! verdicts are `flux score --predictions`'s instance by instance (flux-cli's dataset tests
//! check it on fixtures covering every rule).
//!
//! `inspect eval OUT/flux_task.py --model PROVIDER/MODEL -T split=test` runs it; `-T
//! scorer=flux` scores with the binary instead (`flux` on PATH, `$FLUX_BIN` or `-T flux=PATH`).

use crate::hf::{self, HfError, HfOptions, HfReport};
use std::path::{Path, PathBuf};

/// The task file (Python), written as is.
pub const TASK: &str = include_str!("flux_task.py");

/// The task file's name in the output directory.
pub const TASK_FILE: &str = "flux_task.py";

/// flux's scoring rules in Python, written as is beside the task (which loads it).
pub const SCORING: &str = include_str!("flux_scoring.py");

/// The scoring module's name in the output directory.
pub const SCORING_FILE: &str = "flux_scoring.py";

/// Export the dataset to `out` and the task and its scoring module beside it.
pub fn export(roots: &[PathBuf], out: &Path, opts: &HfOptions) -> Result<HfReport, HfError> {
    let mut report = hf::export(roots, out, opts)?;
    for (name, text) in [(TASK_FILE, TASK), (SCORING_FILE, SCORING)] {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(|e| HfError::Io(p.clone(), e))?;
        report.files.push(p);
    }
    Ok(report)
}
