//! Which instances a run covers: `--filter key=value` and `--limit N`, one selection shared by
//! `flux eval` and `flux score` so that both pick the same instances in the same order.
//!
//! Filters: `kind`, `repository`, `split` (see [`Instance::split`]) and `id` (an instance's id
//! or its `repo/id` key). Several values of one key select any of them; different keys must
//! all hold. A key flux does not know, or a value no instance of the set has, is an error
//! naming it and the values there are: a typo never silently selects nothing.
//!
//! `--released-after DAY` keeps the instances whose repository version was released after
//! that day (`[generated.release] date`, `flux gen --release`); an undated instance is left
//! out. The results file records it with the rest of the selection.
//!
//! Order: instances are discovered sorted by `repo/id` ([`crate::discover_all`]); filtering
//! keeps that order and `--limit N` keeps the first N *harvested* instances of it (an instance
//! without gold is never asked nor scored, so it does not count, and is dropped).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::{Discovered, Instance, ScoreError};

/// The filter keys, in the order they are listed in messages.
pub const FILTER_KEYS: [&str; 4] = ["kind", "repository", "split", "id"];

/// A selection of instances: filters (key → accepted values) and a limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    /// key → the values it accepts (any of them).
    #[serde(default)]
    pub filters: BTreeMap<String, Vec<String>>,
    /// Keep the first N harvested instances (after the filters).
    #[serde(default)]
    pub limit: Option<usize>,
    /// `--released-after DAY` (`YYYY-MM-DD`): only instances whose repository version was
    /// released after that day (`[generated.release] date`), so a model is scored on
    /// questions newer than its training cutoff. An instance without a release date is left
    /// out (nothing shows it is newer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_after: Option<String>,
}

/// The day (`YYYY-MM-DD`) a date or ISO 8601 timestamp starts with, if it is a valid one.
pub fn release_day(date: &str) -> Option<&str> {
    let day = date.get(..10)?;
    let b = day.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let ok = digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10);
    if !ok || !(date.len() == 10 || date[10..].starts_with('T')) {
        return None;
    }
    let (m, d): (u32, u32) = (day[5..7].parse().ok()?, day[8..10].parse().ok()?);
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then_some(day)
}

fn err(msg: String) -> ScoreError {
    ScoreError::Selection(msg)
}

impl Selection {
    /// Parse `--filter` arguments (each `key=value`, or several comma-joined) and `--limit`.
    pub fn parse(filters: &[String], limit: Option<usize>) -> Result<Selection, ScoreError> {
        let mut sel = Selection {
            filters: BTreeMap::new(),
            limit,
            released_after: None,
        };
        if limit == Some(0) {
            return Err(err("--limit 0: must be at least 1".into()));
        }
        for arg in filters {
            for part in arg.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let Some((k, v)) = part.split_once('=') else {
                    return Err(err(format!(
                        "--filter {part:?}: expected key=value (keys: {})",
                        FILTER_KEYS.join(", ")
                    )));
                };
                let (k, v) = (k.trim(), v.trim());
                if !FILTER_KEYS.contains(&k) {
                    return Err(err(format!(
                        "--filter {part:?}: unknown key {k:?} (keys: {})",
                        FILTER_KEYS.join(", ")
                    )));
                }
                if v.is_empty() {
                    return Err(err(format!("--filter {part:?}: empty value")));
                }
                let vals = sel.filters.entry(k.to_string()).or_default();
                if !vals.iter().any(|x| x == v) {
                    vals.push(v.to_string());
                }
            }
        }
        Ok(sel)
    }

    /// The selection with `--released-after DAY` (checked: `YYYY-MM-DD`).
    pub fn released_after(mut self, day: Option<&str>) -> Result<Selection, ScoreError> {
        if let Some(d) = day {
            if release_day(d) != Some(d) {
                return Err(err(format!(
                    "--released-after {d:?}: expected a day, YYYY-MM-DD"
                )));
            }
        }
        self.released_after = day.map(String::from);
        Ok(self)
    }

    /// True when it selects every instance.
    pub fn is_all(&self) -> bool {
        self.filters.is_empty() && self.limit.is_none() && self.released_after.is_none()
    }

    /// Is `i` released after `--released-after`'s day (true without one)?
    fn fresh(&self, i: &Instance) -> bool {
        match &self.released_after {
            None => true,
            Some(after) => i
                .released
                .as_deref()
                .and_then(release_day)
                .is_some_and(|d| d > after.as_str()),
        }
    }

    /// `kind=A,kind=B,repository=r limit 5`, or `all instances`.
    pub fn describe(&self) -> String {
        if self.is_all() {
            return "all instances".into();
        }
        let mut parts: Vec<String> = Vec::new();
        for (k, vs) in &self.filters {
            parts.extend(vs.iter().map(|v| format!("{k}={v}")));
        }
        let mut s = parts.join(",");
        if let Some(d) = &self.released_after {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(&format!("released after {d}"));
        }
        if let Some(n) = self.limit {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(&format!("limit {n}"));
        }
        s
    }

    /// The selected instances, in the order given (discovery's `repo/id` order). Every filter
    /// value must match some instance of `instances`, and the whole selection must keep one.
    pub fn apply(&self, instances: Vec<Instance>) -> Result<Vec<Instance>, ScoreError> {
        for (key, vals) in &self.filters {
            for v in vals {
                if !instances.iter().any(|i| matches(i, key, v)) {
                    return Err(err(no_match(&instances, key, v)));
                }
            }
        }
        let total = instances.len();
        let mut out: Vec<Instance> = instances
            .into_iter()
            .filter(|i| {
                self.filters
                    .iter()
                    .all(|(k, vs)| vs.iter().any(|v| matches(i, k, v)))
            })
            .filter(|i| self.fresh(i))
            .collect();
        if let Some(n) = self.limit {
            out = out
                .into_iter()
                .filter(|i| i.oracle.is_some())
                .take(n)
                .collect();
        }
        if out.is_empty() && !self.is_all() {
            return Err(err(format!(
                "the selection {} keeps none of the {total} instances",
                self.describe()
            )));
        }
        Ok(out)
    }
}

/// The value of `key` of an instance (`id` also matches the `repo/id` key).
fn matches(i: &Instance, key: &str, v: &str) -> bool {
    match key {
        "kind" => i.kind == v,
        "repository" => i.repository == v,
        "split" => i.split == v,
        "id" => i.id == v || i.key() == v,
        _ => false,
    }
}

fn value_of(i: &Instance, key: &str) -> String {
    match key {
        "kind" => i.kind.clone(),
        "repository" => i.repository.clone(),
        "split" => i.split.clone(),
        _ => i.id.clone(),
    }
}

fn no_match(instances: &[Instance], key: &str, v: &str) -> String {
    let there: BTreeSet<String> = instances.iter().map(|i| value_of(i, key)).collect();
    let shown: Vec<&str> = there.iter().take(12).map(String::as_str).collect();
    let more = there.len().saturating_sub(shown.len());
    format!(
        "--filter {key}={v}: no instance has it (the {} instance(s) have {key} {}{})",
        instances.len(),
        shown.join(", "),
        if more > 0 {
            format!(", … {more} more")
        } else {
            String::new()
        }
    )
}

/// Discover the instances under `roots` and keep the selected ones: the one way `flux eval`
/// and `flux score` find the instances of a run. Invalid instance directories are listed, as
/// by [`crate::discover_all`].
pub fn discover_selected(roots: &[PathBuf], sel: &Selection) -> Result<Discovered, ScoreError> {
    let found = crate::discover_all(roots)?;
    Ok(Discovered {
        instances: sel.apply(found.instances)?,
        invalid: found.invalid,
    })
}
