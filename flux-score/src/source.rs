//! Where a run's answers come from (an answers directory or a predictions file), and which of
//! its answers match no instance of the set being scored.
//!
//! An answer that matches no instance is the sign of answers scored against the wrong set
//! (`flux score --answers answers/X` over `./instances` when X was made for another set): its
//! instances would all score "no answer" while the answers it has are never looked at. The
//! scorer refuses such a run by default ([`crate::ScoreOptions::allow_unmatched`]), naming them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::predictions::Predictions;
use crate::{Instance, ScoreError};

/// A run's answers.
#[derive(Debug, Clone)]
pub enum AnswerSource {
    /// `<dir>/<repo>/<id>/answer.json` (+ `meta.json`), as `flux eval` writes.
    Dir(PathBuf),
    /// A predictions JSONL file ([`crate::predictions`]).
    Predictions(Predictions),
}

impl AnswerSource {
    /// The directory or file, for messages and reports.
    pub fn path(&self) -> &Path {
        match self {
            AnswerSource::Dir(d) => d,
            AnswerSource::Predictions(p) => &p.path,
        }
    }

    /// True when it holds no answer at all (no `<repo>/<id>/` with an answer or meta file, or
    /// no prediction): the sign of a wrong directory, e.g. the parent of a run's (`answers/`
    /// for `answers/<model>`).
    pub fn is_empty(&self) -> Result<bool, ScoreError> {
        match self {
            AnswerSource::Dir(d) => Ok(answered_keys(d)?.is_empty()),
            AnswerSource::Predictions(p) => Ok(p.predictions.is_empty()),
        }
    }

    /// The answers (`repo/id` directories, or predictions' `instance_id`s) that name no
    /// instance of `all`, sorted.
    pub fn unmatched(&self, all: &[Instance]) -> Result<Vec<String>, ScoreError> {
        match self {
            AnswerSource::Dir(d) => {
                let keys: BTreeSet<String> = all.iter().map(Instance::key).collect();
                Ok(answered_keys(d)?
                    .into_iter()
                    .filter(|k| !keys.contains(k))
                    .collect())
            }
            AnswerSource::Predictions(p) => {
                let mut u = p.resolve(all)?.1;
                u.sort();
                Ok(u)
            }
        }
    }
}

/// True when `dir` holds an answer or its meta (`answer.json`, `answer-K.json`, `meta.json`).
fn holds_answer(dir: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n == "meta.json" || (n.starts_with("answer") && n.ends_with(".json"))
    })
}

fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, ScoreError> {
    let rd = std::fs::read_dir(dir).map_err(|e| ScoreError::Io(dir.to_path_buf(), e))?;
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// The `repo/id` of every answer directory under an answers directory, sorted.
pub fn answered_keys(answers: &Path) -> Result<Vec<String>, ScoreError> {
    let mut out = Vec::new();
    for repo in subdirs(answers)? {
        for inst in subdirs(&repo)? {
            if holds_answer(&inst) {
                if let Ok(rel) = inst.strip_prefix(answers) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    Ok(out)
}

/// The message of a refused run: how many answers match nothing, the first few, and the set.
pub fn unmatched_message(src: &AnswerSource, unmatched: &[String], against: &str) -> String {
    let shown: Vec<&str> = unmatched.iter().take(5).map(String::as_str).collect();
    let more = unmatched.len() - shown.len();
    format!(
        "{}: {} answer(s) match no instance of {against}: {}{}; score them against the set \
         they were made for (--instances DIR), or pass --allow-unmatched to score anyway",
        src.path().display(),
        unmatched.len(),
        shown.join(", "),
        if more > 0 {
            format!(", … {more} more")
        } else {
            String::new()
        }
    )
}
