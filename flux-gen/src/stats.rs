//! `flux stats [--json] PATH…`: what a set of instances holds — counts per kind, repository
//! and split, the distributions of the difficulty features beside the SWE-Flux paper's median
//! instance, question lengths, and what the screens of [`crate::discriminate`] dropped (a
//! set's `screened.json`) and would drop now.
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
    /// Characters of the questions of generated instances: median and largest.
    pub question_chars_median: f64,
    pub question_chars_max: usize,
    /// Generated instances over [`QUESTION_CHARS_MAX`] characters.
    pub questions_over_max: usize,
    /// Instances per preamble (`family@version`).
    pub preambles: BTreeMap<String, usize>,
    /// Values in the gold answers (`flux_extract::answer_size`): p10, median, p90.
    pub answer_size: [f64; 3],
    /// Instances each screen dropped from the set (its `screened.json`).
    pub screened: BTreeMap<String, usize>,
    /// Share of the instances before the screens (kept + dropped), per screen, in percent.
    pub screened_percent: BTreeMap<String, f64>,
    /// Generated instances a screen of the degenerate class would drop now (`echoed-literal`,
    /// which needs the source, not asked), and their share.
    pub degenerate: usize,
    pub degenerate_percent: f64,
    /// Directories that did not load, with the reason.
    pub invalid: Vec<(PathBuf, String)>,
}

/// The longest generated question issue 24 allows (its median: at most 450).
pub const QUESTION_CHARS_MAX: usize = 1000;

/// The set holding `path` (the set directory, its `instances/` or below), if it has a
/// `screened.json`.
fn set_of(path: &std::path::Path) -> Option<PathBuf> {
    path.ancestors()
        .find(|d| d.join(crate::discriminate::SCREENED_FILE).is_file())
        .map(PathBuf::from)
}

/// Would a degenerate screen drop `inst` (with gold `gold`) now?
fn degenerate_now(inst: &flux_instance::Instance, gold: &serde_json::Value) -> bool {
    let tests = crate::discriminate::command_tests(&inst.spec.test.command);
    let item = crate::discriminate::Item {
        id: inst.id(),
        kind: inst.kind(),
        extractor: &inst.spec.extractor.name,
        params: &inst.spec.extractor.params,
        tests: &tests,
        gold,
        easy: inst.spec.generated.as_ref().is_some_and(|g| g.easy),
        test_source: None,
        first_with_key: None,
        question: &inst.spec.question,
    };
    crate::discriminate::SCREENS
        .iter()
        .any(|s| s.class == crate::discriminate::Class::Degenerate && (s.fires)(&item))
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
    let mut qchars: Vec<f64> = Vec::new();
    let mut sizes: Vec<f64> = Vec::new();
    let sets: std::collections::BTreeSet<PathBuf> =
        paths.iter().filter_map(|p| set_of(p)).collect();
    for set in &sets {
        for d in crate::reauthor::read_screened(set)? {
            *s.screened.entry(d.screen).or_insert(0) += 1;
        }
    }
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
        let oracle = flux_instance::read_oracle(&d).ok();
        let witnessed = oracle
            .as_ref()
            .is_some_and(|o| o.provenance.witness.is_some());
        if let Some(o) = &oracle {
            sizes.push(flux_extract::answer_size(&o.oracle_answer) as f64);
            if inst.spec.generated.is_some() && degenerate_now(&inst, &o.oracle_answer) {
                s.degenerate += 1;
            }
        }
        if let Some(p) = &inst.spec.preamble {
            *s.preambles.entry(p.clone()).or_insert(0) += 1;
        }
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
            let n = inst.spec.question.chars().count();
            qchars.push(n as f64);
            s.question_chars_max = s.question_chars_max.max(n);
            s.questions_over_max += usize::from(n > QUESTION_CHARS_MAX);
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
    qchars.sort_by(f64::total_cmp);
    s.question_chars_median = quantile(&qchars, 0.5);
    sizes.sort_by(f64::total_cmp);
    s.answer_size = [0.1, 0.5, 0.9].map(|q| quantile(&sizes, q));
    let before = s.instances + s.screened.values().sum::<usize>();
    s.screened_percent = s
        .screened
        .iter()
        .map(|(k, n)| (k.clone(), 100.0 * *n as f64 / before.max(1) as f64))
        .collect();
    s.degenerate_percent = 100.0 * s.degenerate as f64 / s.with_features.max(1) as f64;
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
    out += &render_screens(s);
    for (d, e) in &s.invalid {
        out += &format!("invalid: {}: {e}\n", d.display());
    }
    out
}

/// Answer sizes, question lengths, preambles, the degenerate share and the screens' drops.
fn render_screens(s: &Stats) -> String {
    let mut out = format!(
        "\nanswer size (values)  p10 {:.0}, median {:.0}, p90 {:.0}\n",
        s.answer_size[0], s.answer_size[1], s.answer_size[2]
    );
    if s.with_features > 0 {
        let preambles: Vec<String> = s
            .preambles
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out += &format!(
            "question length (generated, characters)  median {:.0}, max {} ({} over \
             {QUESTION_CHARS_MAX}); preambles: {}\n",
            s.question_chars_median,
            s.question_chars_max,
            s.questions_over_max,
            if preambles.is_empty() {
                "none".to_string()
            } else {
                preambles.join(", ")
            }
        );
        out += &format!(
            "degenerate now (empty, constant, static-baseline): {} ({:.1} %)\n",
            s.degenerate, s.degenerate_percent
        );
    }
    if !s.screened.is_empty() {
        let before = s.instances + s.screened.values().sum::<usize>();
        out += &format!("\nscreen            class          dropped   % of {before}\n");
        for sc in &crate::discriminate::SCREENS {
            let n = s.screened.get(sc.name).copied().unwrap_or(0);
            out += &format!(
                "{:<17} {:<12} {n:>9} {:>6.1}\n",
                sc.name,
                format!("{:?}", sc.class).to_lowercase(),
                s.screened_percent.get(sc.name).copied().unwrap_or(0.0)
            );
        }
        let total: usize = s.screened.values().sum();
        out += &format!(
            "{:<17} {:<12} {total:>9} {:>6.1}\n",
            "all",
            "",
            100.0 * total as f64 / before.max(1) as f64
        );
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

    /// Generated questions repeated their conventions: median 1,469 characters, about half of
    /// it the same paragraph on line events (issue 24.2). Every committed set's (`sets/*`,
    /// `instances/`) generated questions now name a current preamble and keep to the bounds.
    #[test]
    fn every_committed_generated_question_is_short_and_names_its_preamble() {
        let ws = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut roots = vec![ws.join("instances")];
        for e in std::fs::read_dir(ws.join("sets")).unwrap().flatten() {
            roots.push(e.path().join("instances"));
        }
        for root in roots.iter().filter(|r| r.is_dir()) {
            let s = stats(std::slice::from_ref(root)).unwrap();
            assert!(s.invalid.is_empty(), "{:?}", s.invalid);
            if s.with_features == 0 {
                continue;
            }
            let over: Vec<String> = flux_instance::discover(std::slice::from_ref(root))
                .unwrap()
                .iter()
                .filter_map(|d| {
                    let i = flux_instance::load_instance(d).ok()?;
                    let n = i.spec.question.chars().count();
                    (i.spec.generated.is_some() && n > QUESTION_CHARS_MAX)
                        .then(|| format!("{} ({n})", d.display()))
                })
                .collect();
            assert!(
                over.is_empty(),
                "{} over {QUESTION_CHARS_MAX}, as {:?}",
                over.len(),
                &over[..over.len().min(5)]
            );
            assert_eq!(s.questions_over_max, 0);
            assert!(
                s.question_chars_median <= 450.0,
                "{}: median {}",
                root.display(),
                s.question_chars_median
            );
            assert_eq!(
                s.preambles.values().sum::<usize>(),
                s.with_features,
                "{}: every generated instance names its preamble",
                root.display()
            );
        }
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
