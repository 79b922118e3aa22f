//! Several runs at once (`flux score --answers A --answers B …`): each run's report, tables
//! per kind × run and repository × run, and a paired comparison of every pair of runs on the
//! instances both scored (infrastructure errors of either run left out): the difference of
//! accuracy and of partial credit with 95 % paired-bootstrap intervals, and the exact McNemar
//! test on the instances only one of them passed.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::{stats, Bucket, Estimate, Report, Status};

/// Two runs on the same instances.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    /// Instances scored in both.
    pub n: usize,
    pub accuracy_a: f64,
    pub accuracy_b: f64,
    /// Accuracy of `b` minus accuracy of `a`, paired bootstrap interval.
    pub accuracy_diff: Estimate,
    /// Partial credit of `b` minus `a`, paired bootstrap interval.
    pub partial_diff: Estimate,
    /// Passed by `a` only, by `b` only.
    pub only_a: usize,
    pub only_b: usize,
    /// Two-sided exact McNemar p-value.
    pub mcnemar_p: f64,
}

impl Comparison {
    /// `-40.0 [-70.0, -10.0]`: the accuracy difference in points with its interval.
    pub fn accuracy_text(&self) -> String {
        let d = &self.accuracy_diff;
        format!(
            "{:+.1} [{:+.1}, {:+.1}]",
            d.mean * 100.0,
            d.low * 100.0,
            d.high * 100.0
        )
    }
    /// The partial-credit difference with its interval.
    pub fn partial_text(&self) -> String {
        let d = &self.partial_diff;
        format!("{:+.3} [{:+.3}, {:+.3}]", d.mean, d.low, d.high)
    }
}

/// Every run, compared.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MultiReport {
    pub runs: Vec<Report>,
    pub comparisons: Vec<Comparison>,
    /// kind → run → bucket.
    pub by_kind: BTreeMap<String, BTreeMap<String, Bucket>>,
    /// repository → run → bucket.
    pub by_repository: BTreeMap<String, BTreeMap<String, Bucket>>,
}

/// Name each run by its model (from meta.json), else its directory; names are made unique.
pub fn name_runs(runs: &mut [Report]) {
    let mut used: Vec<String> = Vec::new();
    for r in runs.iter_mut() {
        let base = if r.usage.models.is_empty() {
            std::path::Path::new(&r.answers)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| r.answers.clone())
        } else {
            r.usage.models.join("+")
        };
        let mut name = base.clone();
        let mut k = 2;
        while used.contains(&name) {
            name = format!("{base} #{k}");
            k += 1;
        }
        used.push(name.clone());
        r.name = name;
    }
}

fn scored(r: &Report) -> BTreeMap<(String, String), (bool, f64)> {
    r.instances
        .iter()
        .filter(|i| matches!(i.status, Status::Pass | Status::Fail))
        .map(|i| {
            (
                (i.repo.clone(), i.id.clone()),
                (i.status == Status::Pass, i.partial.unwrap_or(0.0)),
            )
        })
        .collect()
}

/// The paired comparison of `b` against `a`.
pub fn compare_pair(a: &Report, b: &Report) -> Comparison {
    let (sa, sb) = (scored(a), scored(b));
    let both: Vec<_> = sa.iter().filter(|(k, _)| sb.contains_key(*k)).collect();
    let pa: Vec<f64> = both.iter().map(|(_, v)| f64::from(u8::from(v.0))).collect();
    let pb: Vec<f64> = both
        .iter()
        .map(|(k, _)| f64::from(u8::from(sb[*k].0)))
        .collect();
    let qa: Vec<f64> = both.iter().map(|(_, v)| v.1).collect();
    let qb: Vec<f64> = both.iter().map(|(k, _)| sb[*k].1).collect();
    let only_a = pa.iter().zip(&pb).filter(|(x, y)| **x > **y).count();
    let only_b = pa.iter().zip(&pb).filter(|(x, y)| **x < **y).count();
    let est = |x: &[f64], y: &[f64]| {
        let (mean, low, high) = stats::paired_bootstrap(x, y);
        Estimate {
            mean,
            low,
            high,
            n: x.len(),
        }
    };
    Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        n: both.len(),
        accuracy_a: stats::mean(&pa),
        accuracy_b: stats::mean(&pb),
        accuracy_diff: est(&pa, &pb),
        partial_diff: est(&qa, &qb),
        only_a,
        only_b,
        mcnemar_p: stats::mcnemar_exact(only_a, only_b),
    }
}

/// Tables and pairwise comparisons of `runs` (named already).
pub fn compare_runs(runs: Vec<Report>) -> MultiReport {
    let mut comparisons = Vec::new();
    for i in 0..runs.len() {
        for j in i + 1..runs.len() {
            comparisons.push(compare_pair(&runs[i], &runs[j]));
        }
    }
    let mut by_kind: BTreeMap<String, BTreeMap<String, Bucket>> = BTreeMap::new();
    let mut by_repository: BTreeMap<String, BTreeMap<String, Bucket>> = BTreeMap::new();
    for r in &runs {
        for (k, b) in &r.by_kind {
            by_kind
                .entry(k.clone())
                .or_default()
                .insert(r.name.clone(), b.clone());
        }
        for (k, b) in &r.by_repository {
            by_repository
                .entry(k.clone())
                .or_default()
                .insert(r.name.clone(), b.clone());
        }
    }
    MultiReport {
        runs,
        comparisons,
        by_kind,
        by_repository,
    }
}
