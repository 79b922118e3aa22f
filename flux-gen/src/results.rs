//! What one module gives, its [`ModuleResult`] with the screened [`Candidate`]s: written by
//! phase 1 per module, and with the repository's source the only input of phase 2 (the set's
//! assembly). Its own module so that the phases' modules (`module`, `screen`, `set`) all read
//! it without reading each other.
use crate::artifact::TraceArtifact;
use flux_extract::QuestionKind;
use flux_instance::{InstanceSpec, Oracle};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// A screened instance, before the set's selection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub id: String,
    pub kind: QuestionKind,
    pub extractor: String,
    /// The target's qualname and file (relative to the repository's root).
    pub function: String,
    pub file: String,
    pub tests: Vec<String>,
    /// Its place in the set's seeded order.
    pub priority: u64,
    pub spec: InstanceSpec,
    pub oracle: Oracle,
}

/// What one module gave.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModuleResult {
    pub repository: String,
    pub module: String,
    /// Why the module gave nothing, when it did not run through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<TraceArtifact>,
    /// Functions, drafts and instances left out, per rule (plan and screens).
    pub left_out: BTreeMap<String, usize>,
    /// Drafts made, per kind.
    pub drafted: BTreeMap<String, usize>,
    pub candidates: Vec<Candidate>,
    /// Seconds per phase.
    pub seconds: BTreeMap<String, f64>,
    /// Events of the scout trace.
    pub scout_events: usize,
    /// Runs made for the cross-check.
    pub check_runs: usize,
    /// Chosen instances whose config was widened to share an own run (`[budget] own_runs`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub configs_widened: usize,
    /// Instances the third witness (the spec's `[witness]`) agreed with (issue 23.1).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub witnessed: usize,
    /// Instances it was asked about and did not confirm (not kept), with both answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub witness: Vec<crate::witness::WitnessReport>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl ModuleResult {
    pub(crate) fn count(&mut self, rule: &str) {
        *self.left_out.entry(rule.to_string()).or_insert(0) += 1;
    }

    pub(crate) fn time(&mut self, phase: &str, t: Instant) {
        *self.seconds.entry(phase.to_string()).or_insert(0.0) += t.elapsed().as_secs_f64();
    }
}
