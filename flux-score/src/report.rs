//! Rendering a [`Report`] (one run) or a [`MultiReport`] (several, compared) as text, JSON or
//! one self-contained HTML page ([`crate::html`]: inline CSS and SVG, no scripts, fonts or
//! images from elsewhere).

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use crate::html::{html, html_multi};
use crate::{Bucket, Format, MultiReport, Report, ScoreError, Status};

fn json<T: serde::Serialize>(v: &T) -> Result<String, ScoreError> {
    let mut s =
        serde_json::to_string_pretty(v).map_err(|e| ScoreError::Serialize(e.to_string()))?;
    s.push('\n');
    Ok(s)
}

/// Render one run in the given format.
pub fn render(r: &Report, format: Format) -> Result<String, ScoreError> {
    Ok(match format {
        Format::Text => text(r),
        Format::Json => json(r)?,
        Format::Html => html(r),
    })
}

/// Render several runs, compared, in the given format.
pub fn render_multi(m: &MultiReport, format: Format) -> Result<String, ScoreError> {
    Ok(match format {
        Format::Text => text_multi(m),
        Format::Json => json(m)?,
        Format::Html => html_multi(m),
    })
}

pub(crate) fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// `[lo, hi]` as `[48.2–91.0]` (percent).
pub(crate) fn ci(c: [f64; 2]) -> String {
    format!("[{:.1}–{:.1}]", c[0] * 100.0, c[1] * 100.0)
}

fn table_rows(out: &mut String, title: &str, m: &BTreeMap<String, Bucket>) {
    let w = m
        .keys()
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(0)
        .max(title.len());
    let _ = writeln!(
        out,
        "{title:<w$}  {:>6}  {:>6}  {:>8}  {:>13}  {:>7}  {:>5}",
        "passed", "total", "accuracy", "95% Wilson", "partial", "infra"
    );
    let _ = writeln!(out, "{}", "-".repeat(w + 58));
    for (k, b) in m {
        let _ = writeln!(
            out,
            "{k:<w$}  {:>6}  {:>6}  {:>8}  {:>13}  {:>7}  {:>5}",
            b.passed,
            b.total,
            pct(b.accuracy),
            ci(b.ci),
            format!("{:.3}", b.partial),
            b.infra_errors
        );
    }
    out.push('\n');
}

/// A readable plain-text report.
/// `scored against ROOTS (set NAME), SELECTION; K of N without an answer`: what a run was
/// scored against (`None` for a report made without [`crate::run_score`]).
pub fn against(r: &Report) -> Option<String> {
    if r.scored_against.is_empty() {
        return None;
    }
    let unanswered = r
        .instances
        .iter()
        .filter(|i| i.reason.as_deref() == Some("no answer"))
        .count();
    let scored = r.total + r.infra_errors;
    Some(format!(
        "scored against {} (set {}), {}; {unanswered} of {scored} without an answer",
        r.scored_against.join(", "),
        r.set,
        r.selection.describe()
    ))
}

pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "flux score: {}", r.answers);
    if let Some(l) = against(r) {
        let _ = writeln!(out, "{l}");
    }
    if !r.unmatched_answers.is_empty() {
        let _ = writeln!(
            out,
            "{} answer(s) match no instance of the set (not scored): {}{}",
            r.unmatched_answers.len(),
            r.unmatched_answers[..r.unmatched_answers.len().min(5)].join(", "),
            if r.unmatched_answers.len() > 5 {
                ", …"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        out,
        "accuracy {} ({}/{} passed), {} infra errors (excluded), {} not harvested",
        pct(r.accuracy),
        r.passed,
        r.total,
        r.infra_errors,
        r.not_harvested
    );
    let p = &r.partial_credit;
    let _ = writeln!(
        out,
        "95% interval (Wilson) {}; partial credit {:.3} [{:.3}–{:.3}] (bootstrap)\n",
        ci(r.accuracy_ci),
        p.mean,
        p.low,
        p.high
    );
    if !r.pass_at_k.is_empty() {
        let parts: Vec<String> = pass_at_k_sorted(r)
            .iter()
            .map(|(k, e)| {
                format!(
                    "pass@{k} {} [{:.1}–{:.1}]",
                    pct(e.mean),
                    e.low * 100.0,
                    e.high * 100.0
                )
            })
            .collect();
        let _ = writeln!(out, "{}\n", parts.join(", "));
    }
    if !r.failure_classes.is_empty() {
        let parts: Vec<String> = r
            .failure_classes
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(out, "failures by class: {}\n", parts.join(", "));
    }
    if r.usage.with_meta > 0 {
        let u = &r.usage;
        let _ = writeln!(
            out,
            "model {}: {} tokens in, {} out, cost {}, {:.1} s over {} answers\n",
            u.models.join(", "),
            u.tokens_in,
            u.tokens_out,
            u.cost_text(4),
            u.seconds,
            u.with_meta
        );
    }
    table_rows(&mut out, "kind", &r.by_kind);
    table_rows(&mut out, "repository", &r.by_repository);
    let flat: BTreeMap<String, Bucket> = r
        .by_kind_repository
        .iter()
        .flat_map(|(k, m)| {
            m.iter()
                .map(move |(repo, b)| (format!("{k} / {repo}"), b.clone()))
        })
        .collect();
    if r.by_repository.len() > 1 {
        table_rows(&mut out, "kind / repository", &flat);
    }
    if r.call_graph.instances > 0 {
        let c = &r.call_graph;
        let _ = writeln!(
            out,
            "call graph: {} instances, {} passed (F1 >= {}), micro P {:.3} R {:.3} F1 {:.3} (tp {}, fp {}, fn {})\n",
            c.instances, c.passed, c.threshold, c.precision, c.recall, c.f1, c.tp, c.fp, c.fn_
        );
    }
    if !r.invalid_instances.is_empty() {
        let _ = writeln!(out, "invalid instances (not scored):");
        for i in &r.invalid_instances {
            let _ = writeln!(out, "  {}: {}", i.path, i.error);
        }
        out.push('\n');
    }
    let failures: Vec<_> = r
        .instances
        .iter()
        .filter(|i| i.status != Status::Pass)
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "not passed:");
        for i in failures {
            let tag = match i.status {
                Status::Fail => "FAIL ",
                Status::InfraError => "INFRA",
                Status::NotHarvested => "SKIP ",
                Status::Pass => "PASS ",
            };
            let class = i
                .failure
                .map(|c| format!(" ({})", c.as_str()))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {tag} {}/{} [{}]{class}: {}",
                i.repo,
                i.id,
                i.kind,
                i.reason.as_deref().unwrap_or("")
            );
        }
    }
    out
}

/// Escape text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// pass@k entries in numeric order of k.
pub(crate) fn pass_at_k_sorted(r: &Report) -> Vec<(usize, crate::Estimate)> {
    let mut v: Vec<(usize, crate::Estimate)> = r
        .pass_at_k
        .iter()
        .filter_map(|(k, e)| Some((k.parse().ok()?, *e)))
        .collect();
    v.sort_by_key(|(k, _)| *k);
    v
}

/// Several runs as text: one line per run, the tables per kind and per repository (one column
/// per run), then every paired comparison.
pub fn text_multi(m: &MultiReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "flux score: {} runs", m.runs.len());
    if let Some(l) = m.runs.first().and_then(against) {
        let _ = writeln!(out, "{l}");
    }
    let _ = writeln!(out);
    let runs: BTreeMap<String, Bucket> = m
        .runs
        .iter()
        .map(|r| {
            let b = Bucket {
                total: r.total,
                passed: r.passed,
                accuracy: r.accuracy,
                infra_errors: r.infra_errors,
                ci: r.accuracy_ci,
                partial: r.partial_credit.mean,
            };
            (r.name.clone(), b)
        })
        .collect();
    table_rows(&mut out, "run", &runs);
    for (title, table) in [("kind", &m.by_kind), ("repository", &m.by_repository)] {
        let kw = table
            .keys()
            .map(|k| k.chars().count())
            .max()
            .unwrap_or(0)
            .max(title.len());
        let mut head = format!("{title:<kw$}");
        for r in &m.runs {
            let _ = write!(head, "  {:>22}", r.name);
        }
        let _ = writeln!(out, "{head}");
        for (k, runs) in table {
            let mut line = format!("{k:<kw$}");
            for r in &m.runs {
                let cell = runs
                    .get(&r.name)
                    .map(|b| format!("{}/{} {}", b.passed, b.total, pct(b.accuracy)))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(line, "  {cell:>22}");
            }
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    if !m.comparisons.is_empty() {
        let _ = writeln!(
            out,
            "paired comparisons (b − a on instances scored by both):"
        );
        for c in &m.comparisons {
            let _ = writeln!(
                out,
                "  {} vs {} (n {}): accuracy {} pts (paired bootstrap), partial {}; only a {}, only b {}, McNemar exact p = {:.4}",
                c.b,
                c.a,
                c.n,
                c.accuracy_text(),
                c.partial_text(),
                c.only_a,
                c.only_b,
                c.mcnemar_p
            );
        }
    }
    out
}
