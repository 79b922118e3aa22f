//! The tracing config: what the in-process hook records, and where.
//!
//! It is part of every instance (`[tracing]` in `instance.toml`) and can be given to
//! `flux trace --config FILE` (TOML or JSON). The agent hands it to the hook as JSON in the
//! `FLUX_HOOK_CONFIG` environment variable. Untargeted code pays nothing for lines and values:
//! the hook turns itself off for code objects that match no target.
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TracingConfig {
    /// Source files whose code is targeted: each entry matches a code object's `co_filename`
    /// when it is a suffix of it at a path-component boundary (`sympy/core/add.py`) or a glob
    /// with `*` (`*/sympy/core/*.py`).
    #[serde(default)]
    pub files: Vec<String>,
    /// Qualified names of targeted functions (`Add.flatten`, `_parse_token`); empty = every
    /// function in the targeted files. A nested function is targeted if its qualname matches.
    #[serde(default)]
    pub functions: Vec<String>,
    /// What to record in targeted code.
    #[serde(default = "default_events")]
    pub events: Vec<HookEvent>,
    #[serde(default)]
    pub limits: Limits,
    /// Record pytest test boundaries (test id, start, end, outcome).
    #[serde(default = "yes")]
    pub tests: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookEvent {
    Line,
    Call,
    Return,
    Exception,
    Variables,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Longest `repr` kept, in characters; longer ones are cut and end with `...`.
    #[serde(default = "d_repr")]
    pub repr: usize,
    /// Most locals recorded per event.
    #[serde(default = "d_locals")]
    pub locals: usize,
    /// Nesting depth of containers shown by the bounded repr.
    #[serde(default = "d_depth")]
    pub depth: usize,
}

fn d_repr() -> usize {
    200
}
fn d_locals() -> usize {
    50
}
fn d_depth() -> usize {
    3
}
fn yes() -> bool {
    true
}
fn default_events() -> Vec<HookEvent> {
    vec![
        HookEvent::Line,
        HookEvent::Call,
        HookEvent::Return,
        HookEvent::Exception,
        HookEvent::Variables,
    ]
}

impl Default for Limits {
    fn default() -> Self {
        Limits { repr: d_repr(), locals: d_locals(), depth: d_depth() }
    }
}

impl Default for TracingConfig {
    fn default() -> Self {
        TracingConfig {
            files: Vec::new(),
            functions: Vec::new(),
            events: default_events(),
            limits: Limits::default(),
            tests: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_missing_fields_and_unknown_fields_are_rejected() {
        let c: TracingConfig = serde_json::from_str(r#"{"files":["a.py"]}"#).unwrap();
        assert_eq!(c.limits.repr, 200);
        assert!(c.tests);
        assert_eq!(c.events.len(), 5);
        let err = serde_json::from_str::<TracingConfig>(r#"{"file":["a.py"]}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `file`"), "{err}");
    }
}
