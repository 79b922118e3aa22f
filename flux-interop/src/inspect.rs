//! An Inspect task over an exported dataset (`flux export --format inspect OUT`): the dataset of
//! [`crate::hf`] in `OUT` and, beside it, `OUT/flux_task.py`, an Inspect task that asks each
//! row's system and user messages and scores the reply with `flux score` against the row
//! (`flux score --instances OUT/data/<split>.jsonl --predictions …`), so that its verdicts are
//! flux's own. The reply's JSON object is taken as `flux eval` takes it (a port of
//! `flux_eval::parse::extract_json`, the only rule the task carries itself).
//!
//! `inspect eval OUT/flux_task.py --model PROVIDER/MODEL -T split=test` runs it; the scorer
//! finds `flux` on PATH, in `$FLUX_BIN` or from `-T flux=PATH`.

use crate::hf::{self, HfError, HfOptions, HfReport};
use std::path::{Path, PathBuf};

/// The task file (Python), written as is.
pub const TASK: &str = include_str!("flux_task.py");

/// The task file's name in the output directory.
pub const TASK_FILE: &str = "flux_task.py";

/// Export the dataset to `out` and the task beside it.
pub fn export(roots: &[PathBuf], out: &Path, opts: &HfOptions) -> Result<HfReport, HfError> {
    let mut report = hf::export(roots, out, opts)?;
    let p = out.join(TASK_FILE);
    std::fs::write(&p, TASK).map_err(|e| HfError::Io(p.clone(), e))?;
    report.files.push(p);
    Ok(report)
}
