//! `flux stats [--json] PATH…`: what a set of instances holds — counts per kind, repository
//! and split, and the distributions of the difficulty features — beside the SWE-Flux paper's
//! median instance.
use flux_instance::Difficulty;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The SWE-Flux paper's median instance (calls, functions, lines, files, classes, depth).
pub const PAPER_MEDIAN: [(&str, f64); 6] = [
    ("calls", 603.0),
    ("functions", 28.0),
    ("lines", 192.0),
    ("files", 7.0),
    ("classes", 5.5),
    ("depth", 8.0),
];

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    pub instances: usize,
    pub repositories: BTreeMap<String, usize>,
    pub by_kind: BTreeMap<String, usize>,
    /// Share of each kind, in percent of `instances`.
    pub kind_percent: BTreeMap<String, f64>,
    /// Generated instances per split (`train`, `test`).
    pub splits: BTreeMap<String, usize>,
    /// Repositories per split.
    pub split_repositories: BTreeMap<String, Vec<String>>,
    /// Generated instances the static baseline answers right.
    pub easy: usize,
    /// Instances whose gold an independent witness re-derived (their oracle's
    /// `provenance.witness`), per kind (issue 23.1).
    pub witnessed: BTreeMap<String, usize>,
    /// Instances with difficulty features (generated ones).
    pub with_features: usize,
    /// Median of each feature over those.
    pub median: BTreeMap<String, f64>,
    /// 10th and 90th percentiles.
    pub p10: BTreeMap<String, f64>,
    pub p90: BTreeMap<String, f64>,
    /// The paper's median, for comparison.
    pub paper_median: BTreeMap<String, f64>,
    /// Directories that did not load, with the reason.
    pub invalid: Vec<(PathBuf, String)>,
}

fn features(d: &Difficulty) -> [(&'static str, f64); 6] {
    [
        ("calls", d.calls as f64),
        ("functions", d.functions as f64),
        ("lines", d.lines as f64),
        ("files", d.files as f64),
        ("classes", d.classes as f64),
        ("depth", d.depth as f64),
    ]
}

/// The `q`-quantile (0..=1) of sorted `v`, interpolating between neighbours (the median of an
/// even count is the mean of the middle two).
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Stats of every instance at or under `paths`.
pub fn stats(paths: &[PathBuf]) -> anyhow::Result<Stats> {
    let dirs = flux_instance::discover(paths)?;
    let mut s = Stats {
        paper_median: PAPER_MEDIAN
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        ..Stats::default()
    };
    let mut values: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut split_repos: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for d in dirs {
        let inst = match flux_instance::load_instance(&d) {
            Ok(i) => i,
            Err(e) => {
                s.invalid.push((d, e.to_string()));
                continue;
            }
        };
        s.instances += 1;
        *s.repositories
            .entry(inst.spec.repository.clone())
            .or_insert(0) += 1;
        *s.by_kind
            .entry(inst.kind().as_str().to_string())
            .or_insert(0) += 1;
        let witnessed = flux_instance::read_oracle(&d)
            .ok()
            .is_some_and(|o| o.provenance.witness.is_some());
        if witnessed {
            *s.witnessed
                .entry(inst.kind().as_str().to_string())
                .or_insert(0) += 1;
        }
        if let Some(g) = &inst.spec.generated {
            *s.splits.entry(g.split.clone()).or_insert(0) += 1;
            split_repos
                .entry(g.split.clone())
                .or_default()
                .insert(inst.spec.repository.clone());
            s.easy += usize::from(g.easy);
            s.with_features += 1;
            for (k, v) in features(&g.difficulty) {
                values.entry(k).or_default().push(v);
            }
        }
    }
    for (k, mut v) in values {
        v.sort_by(f64::total_cmp);
        s.median.insert(k.to_string(), quantile(&v, 0.5));
        s.p10.insert(k.to_string(), quantile(&v, 0.1));
        s.p90.insert(k.to_string(), quantile(&v, 0.9));
    }
    for (k, n) in &s.by_kind {
        s.kind_percent
            .insert(k.clone(), 100.0 * *n as f64 / s.instances.max(1) as f64);
    }
    s.split_repositories = split_repos
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().collect()))
        .collect();
    Ok(s)
}

/// The text report.
pub fn render(s: &Stats) -> String {
    let mut out = format!(
        "{} instances over {} repositories",
        s.instances,
        s.repositories.len()
    );
    if s.with_features > 0 {
        out += &format!(
            " ({} generated: {}; {} easy for the static baseline)",
            s.with_features,
            s.splits
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            s.easy
        );
    }
    out.push('\n');
    out += "\nrepository                     instances\n";
    for (r, n) in &s.repositories {
        out += &format!("{r:<30} {n:>9}\n");
    }
    out += "\nkind                           instances      %   witnessed\n";
    for (k, n) in &s.by_kind {
        let w = s.witnessed.get(k).copied().unwrap_or(0);
        out += &format!(
            "{k:<30} {n:>9} {:>6.1} {w:>6} ({:>3.0} %)\n",
            s.kind_percent[k],
            100.0 * w as f64 / (*n).max(1) as f64
        );
    }
    let w: usize = s.witnessed.values().sum();
    out += &format!(
        "(witnessed: the gold re-derived by the plain settrace reference witness: {w} of {})\n",
        s.instances
    );
    if !s.median.is_empty() {
        out += "\nfeature        p10     median      p90   paper median\n";
        for (k, paper) in PAPER_MEDIAN {
            out += &format!(
                "{k:<10} {:>8.1} {:>10.1} {:>8.1} {:>14.1}\n",
                s.p10.get(k).copied().unwrap_or(0.0),
                s.median.get(k).copied().unwrap_or(0.0),
                s.p90.get(k).copied().unwrap_or(0.0),
                paper
            );
        }
    }
    for (d, e) in &s.invalid {
        out += &format!("invalid: {}: {e}\n", d.display());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate() {
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert_eq!(quantile(&[5.0], 0.9), 5.0);
        assert_eq!(quantile(&[0.0, 10.0], 0.1), 1.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn stats_of_the_starter_set_count_kinds_and_repositories() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../instances");
        let s = stats(&[root]).unwrap();
        assert!(s.invalid.is_empty(), "{:?}", s.invalid);
        assert_eq!(s.repositories.len(), 4);
        assert_eq!(s.by_kind.len(), 14);
        assert_eq!(s.instances, s.by_kind.values().sum::<usize>());
        assert_eq!(s.with_features, 0);
        let text = render(&s);
        assert!(text.contains("over 4 repositories"), "{text}");
        let j = serde_json::to_value(&s).unwrap();
        for k in ["instances", "repositories", "by_kind", "median"] {
            assert!(j.get(k).is_some(), "{k}");
        }
    }
}
