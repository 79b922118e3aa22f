//! The HTML report: one self-contained page (inline CSS and SVG; no script, font, image or
//! style sheet from elsewhere, so it opens offline and can be mailed as one file).
//!
//! Plots: accuracy per kind and per repository with 95 % Wilson whiskers (one bar per run),
//! failure classes per run, pass@k curves when runs have samples, and a forest plot of the
//! paired differences. Then the tables, and every failure with its question, gold and answer
//! side by side (`<details>`, so the page stays short).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::failure::FailureClass;
use crate::report::{ci, esc, pass_at_k_sorted, pct};
use crate::{Bucket, MultiReport, Report, Status};

const CSS: &str = r#"
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px 32px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e3e3e3;padding-bottom:4px}
.sub{color:#666;font-size:13px;margin-bottom:16px}
.cards{display:flex;gap:14px;flex-wrap:wrap;margin:12px 0}
.card{border:1px solid #e3e3e3;border-radius:6px;padding:10px 16px;min-width:110px}
.card .v{font-size:24px;font-weight:600}.card .l{font-size:12px;color:#666}
figure{margin:8px 0}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#fafafa}td.r{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;word-break:break-word}
.fail{color:#c62828;font-weight:600}.infra{color:#8d6e00;font-weight:600}.skip{color:#666}
details{border:1px solid #eee;border-radius:4px;margin:6px 0;padding:4px 8px}
summary{cursor:pointer;font-size:13px}
.sbs{display:grid;grid-template-columns:1fr 1fr 1fr;gap:10px;margin-top:6px}
.sbs pre{background:#f7f7f7;padding:6px;font-size:12px;white-space:pre-wrap;word-break:break-word;max-height:420px;overflow:auto;margin:2px 0}
.sbs h4{margin:2px 0;font-size:12px;color:#555}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
"#;

const PALETTE: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn head(s: &mut String, title: &str) {
    s.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
    s.push_str(&esc(title));
    s.push_str("</title><style>");
    s.push_str(CSS);
    s.push_str("</style></head><body>");
}

fn legend(s: &mut String, names: &[String]) {
    if names.len() < 2 {
        return;
    }
    s.push_str("<div class=\"legend\">");
    for (i, n) in names.iter().enumerate() {
        let _ = write!(
            s,
            "<span><i style=\"background:{}\"></i>{}</span>",
            color(i),
            esc(n)
        );
    }
    s.push_str("</div>");
}

fn label(k: &str) -> String {
    if k.chars().count() > 32 {
        format!("{}…", k.chars().take(31).collect::<String>())
    } else {
        k.to_string()
    }
}

/// Horizontal bars, one group per row key and one bar per run, each with its Wilson whisker.
fn grouped_bars(
    title: &str,
    rows: &BTreeMap<String, BTreeMap<String, Bucket>>,
    runs: &[String],
) -> String {
    let bar_h = 14;
    let group_h = bar_h * runs.len().max(1) + 10;
    let label_w = 230;
    let bar_w = 520;
    let h = 30 + group_h * rows.len().max(1) + 10;
    let w = label_w + bar_w + 190;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<figure><svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{}">"#,
        esc(title)
    );
    for q in 0..=4 {
        let x = label_w + bar_w * q / 4;
        let _ = write!(
            s,
            r##"<line x1="{x}" y1="22" x2="{x}" y2="{}" stroke="#ddd"/><text x="{x}" y="16" font-size="11" text-anchor="middle" fill="#666">{}%</text>"##,
            h - 8,
            q * 25
        );
    }
    if rows.is_empty() {
        let _ = write!(
            s,
            r##"<text x="{label_w}" y="46" font-size="13" fill="#666">no scored instances</text>"##
        );
    }
    let x_of = |v: f64| label_w as f64 + v.clamp(0.0, 1.0) * bar_w as f64;
    for (gi, (k, by_run)) in rows.iter().enumerate() {
        let y0 = 30 + group_h * gi;
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" font-size="13" text-anchor="end" fill="#222">{}</text>"##,
            label_w - 8,
            y0 + group_h / 2,
            esc(&label(k))
        );
        for (ri, run) in runs.iter().enumerate() {
            let Some(b) = by_run.get(run) else { continue };
            let y = y0 + ri * bar_h;
            let len = x_of(b.accuracy) - label_w as f64;
            let _ = write!(
                s,
                r##"<rect x="{label_w}" y="{y}" width="{len:.1}" height="{}" fill="{}"><title>{} · {}: {}/{} {} {}</title></rect>"##,
                bar_h - 3,
                color(ri),
                esc(k),
                esc(run),
                b.passed,
                b.total,
                pct(b.accuracy),
                ci(b.ci)
            );
            // The Wilson whisker.
            let ym = y as f64 + (bar_h - 3) as f64 / 2.0;
            let _ = write!(
                s,
                r##"<line x1="{:.1}" y1="{ym:.1}" x2="{:.1}" y2="{ym:.1}" stroke="#111" stroke-width="1.2"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#111"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#111"/>"##,
                x_of(b.ci[0]),
                x_of(b.ci[1]),
                x_of(b.ci[0]),
                ym - 3.0,
                x_of(b.ci[0]),
                ym + 3.0,
                x_of(b.ci[1]),
                ym - 3.0,
                x_of(b.ci[1]),
                ym + 3.0
            );
            let _ = write!(
                s,
                r##"<text x="{}" y="{}" font-size="11" fill="#222">{} ({}/{}{})</text>"##,
                label_w + bar_w + 8,
                y + bar_h - 4,
                pct(b.accuracy),
                b.passed,
                b.total,
                if b.infra_errors > 0 {
                    format!(", {} infra", b.infra_errors)
                } else {
                    String::new()
                }
            );
        }
    }
    s.push_str("</svg></figure>");
    s
}

/// Failure classes per run: one stacked horizontal bar per run.
fn failure_bars(runs: &[&Report]) -> String {
    let label_w = 230;
    let bar_w = 520;
    let row_h = 24;
    let h = 20 + row_h * runs.len() + 40;
    let w = label_w + bar_w + 60;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<figure><svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="failure classes">"#
    );
    let max = runs
        .iter()
        .map(|r| r.failure_classes.values().sum::<usize>())
        .max()
        .unwrap_or(0)
        .max(1);
    for (i, r) in runs.iter().enumerate() {
        let y = 10 + row_h * i;
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" font-size="13" text-anchor="end" fill="#222">{}</text>"##,
            label_w - 8,
            y + 15,
            esc(&label(&r.name))
        );
        let mut x = label_w as f64;
        for (ci, c) in FailureClass::ALL.iter().enumerate() {
            let n = r.failure_classes.get(c.as_str()).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let len = n as f64 / max as f64 * bar_w as f64;
            let _ = write!(
                s,
                r##"<rect x="{x:.1}" y="{y}" width="{len:.1}" height="{}" fill="{}"><title>{}: {n}</title></rect>"##,
                row_h - 6,
                color(ci),
                c.as_str()
            );
            x += len;
        }
        let total: usize = r.failure_classes.values().sum();
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{}" font-size="11" fill="#222">{total}</text>"##,
            x + 6.0,
            y + 14
        );
    }
    let mut lx = 10;
    let ly = h - 14;
    for (ci, c) in FailureClass::ALL.iter().enumerate() {
        let _ = write!(
            s,
            r##"<rect x="{lx}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{ly}" font-size="11" fill="#444">{}</text>"##,
            ly - 9,
            color(ci),
            lx + 14,
            c.as_str()
        );
        lx += 14 + c.as_str().len() * 7 + 10;
    }
    s.push_str("</svg></figure>");
    s
}

/// pass@k curves (k on a log-like index axis), one line per run, bootstrap band as whiskers.
fn pass_at_k_chart(runs: &[&Report]) -> String {
    let all: Vec<Vec<(usize, crate::Estimate)>> =
        runs.iter().map(|r| pass_at_k_sorted(r)).collect();
    let ks: Vec<usize> = {
        let mut v: Vec<usize> = all.iter().flatten().map(|(k, _)| *k).collect();
        v.sort();
        v.dedup();
        v
    };
    if ks.is_empty() {
        return String::new();
    }
    let (w, h, left, top, pw, ph) = (640, 260, 50, 20, 560, 200);
    let x_of = |k: usize| {
        let i = ks.iter().position(|x| *x == k).unwrap_or(0);
        left as f64
            + if ks.len() == 1 {
                pw as f64 / 2.0
            } else {
                i as f64 * pw as f64 / (ks.len() - 1) as f64
            }
    };
    let y_of = |v: f64| top as f64 + (1.0 - v.clamp(0.0, 1.0)) * ph as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<figure><svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="pass@k">"#
    );
    for q in 0..=4 {
        let y = y_of(q as f64 / 4.0);
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#666">{}%</text>"##,
            left + pw,
            left - 6,
            y + 4.0,
            q * 25
        );
    }
    for k in &ks {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{}" font-size="11" text-anchor="middle" fill="#666">k={k}</text>"##,
            x_of(*k),
            top + ph + 16
        );
    }
    for (ri, pts) in all.iter().enumerate() {
        let path: Vec<String> = pts
            .iter()
            .map(|(k, e)| format!("{:.1},{:.1}", x_of(*k), y_of(e.mean)))
            .collect();
        let _ = write!(
            s,
            r##"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"##,
            path.join(" "),
            color(ri)
        );
        for (k, e) in pts {
            let x = x_of(*k);
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{}"/><circle cx="{x:.1}" cy="{:.1}" r="3" fill="{}"><title>{} pass@{k}: {} [{:.1}–{:.1}]</title></circle>"##,
                y_of(e.low),
                y_of(e.high),
                color(ri),
                y_of(e.mean),
                color(ri),
                esc(&runs[ri].name),
                pct(e.mean),
                e.low * 100.0,
                e.high * 100.0
            );
        }
    }
    s.push_str("</svg></figure>");
    s
}

/// Paired differences (b − a) with their intervals: a forest plot on [−100, +100] points.
fn forest(m: &MultiReport) -> String {
    let row_h = 26;
    let (label_w, pw) = (300, 440);
    let h = 30 + row_h * m.comparisons.len() + 10;
    let w = label_w + pw + 40;
    let x_of = |d: f64| label_w as f64 + (d.clamp(-1.0, 1.0) + 1.0) / 2.0 * pw as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<figure><svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="paired differences">"#
    );
    for q in [-1.0, -0.5, 0.0, 0.5, 1.0] {
        let x = x_of(q);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="22" x2="{x:.1}" y2="{}" stroke="{}"/><text x="{x:.1}" y="16" font-size="11" text-anchor="middle" fill="#666">{:+}</text>"##,
            h - 6,
            if q == 0.0 { "#999" } else { "#eee" },
            (q * 100.0) as i64
        );
    }
    for (i, c) in m.comparisons.iter().enumerate() {
        let y = 30 + row_h * i + row_h / 2;
        let d = &c.accuracy_diff;
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" font-size="12" text-anchor="end" fill="#222">{} − {}</text><line x1="{:.1}" y1="{y}" x2="{:.1}" y2="{y}" stroke="#333" stroke-width="1.5"/><circle cx="{:.1}" cy="{y}" r="4" fill="#1f77b4"><title>{:+.1} points [{:+.1}, {:+.1}], McNemar p = {:.4}</title></circle>"##,
            label_w - 8,
            y + 4,
            esc(&label(&c.b)),
            esc(&label(&c.a)),
            x_of(d.low),
            x_of(d.high),
            x_of(d.mean),
            d.mean * 100.0,
            d.low * 100.0,
            d.high * 100.0,
            c.mcnemar_p
        );
    }
    s.push_str("</svg></figure>");
    s
}

fn cards(s: &mut String, r: &Report) {
    s.push_str("<div class=\"cards\">");
    let p = &r.partial_credit;
    let mut items = vec![
        (pct(r.accuracy), "accuracy".to_string()),
        (ci(r.accuracy_ci), "95% Wilson interval".to_string()),
        (
            format!("{}/{}", r.passed, r.total),
            "passed / scored".to_string(),
        ),
        (
            format!("{:.3}", p.mean),
            format!("partial credit [{:.3}–{:.3}]", p.low, p.high),
        ),
        (r.failed.to_string(), "failed".to_string()),
        (
            r.infra_errors.to_string(),
            "infra errors (excluded)".to_string(),
        ),
        (r.not_harvested.to_string(), "not harvested".to_string()),
    ];
    for (k, e) in pass_at_k_sorted(r) {
        items.push((
            pct(e.mean),
            format!("pass@{k} [{:.1}–{:.1}]", e.low * 100.0, e.high * 100.0),
        ));
    }
    if r.usage.with_meta > 0 {
        items.push((r.usage.cost_text(2), "cost".into()));
        items.push((
            format!(
                "{}k / {}k",
                r.usage.tokens_in / 1000,
                r.usage.tokens_out / 1000
            ),
            "tokens in / out".into(),
        ));
    }
    for (v, l) in items {
        let _ = write!(
            s,
            "<div class=\"card\"><div class=\"v\">{}</div><div class=\"l\">{}</div></div>",
            esc(&v),
            esc(&l)
        );
    }
    s.push_str("</div>");
}

fn pretty(v: Option<&serde_json::Value>) -> String {
    let t = v
        .map(|v| serde_json::to_string_pretty(v).unwrap_or_default())
        .unwrap_or_else(|| "(none)".into());
    if t.chars().count() > 6000 {
        format!(
            "{}\n… ({} characters in all)",
            t.chars().take(6000).collect::<String>(),
            t.chars().count()
        )
    } else {
        t
    }
}

/// Every instance that did not pass: a line each, opening to question, gold and answer.
fn failures(s: &mut String, r: &Report) {
    let failures: Vec<_> = r
        .instances
        .iter()
        .filter(|i| i.status != Status::Pass)
        .collect();
    let _ = write!(s, "<h2>Not passed ({})</h2>", failures.len());
    if failures.is_empty() {
        s.push_str("<p>Every scored instance passed.</p>");
        return;
    }
    for i in failures {
        let (cls, tag) = match i.status {
            Status::Fail => ("fail", "fail"),
            Status::InfraError => ("infra", "infra error"),
            _ => ("skip", "not harvested"),
        };
        let class = i
            .failure
            .map(|c| format!(" · <b>{}</b>", esc(c.as_str())))
            .unwrap_or_default();
        let partial = i
            .partial
            .map(|p| format!(" · partial {p:.3}"))
            .unwrap_or_default();
        let _ = write!(
            s,
            "<details><summary><span class=\"{cls}\">{tag}</span> {}/{} [{}]{class}{partial} — <span class=\"r\">{}</span></summary>",
            esc(&i.repo),
            esc(&i.id),
            esc(&i.kind),
            esc(i.reason.as_deref().unwrap_or(""))
        );
        if i.status == Status::Fail {
            let _ = write!(
                s,
                "<div class=\"sbs\"><div><h4>question</h4><pre>{}</pre></div><div><h4>gold</h4><pre>{}</pre></div><div><h4>answer</h4><pre>{}</pre></div></div>",
                esc(i.question.as_deref().unwrap_or("")),
                esc(&pretty(i.gold.as_ref())),
                esc(&pretty(i.answer.as_ref()))
            );
        }
        s.push_str("</details>");
    }
}

fn invalid(s: &mut String, r: &Report) {
    if r.invalid_instances.is_empty() {
        return;
    }
    let _ = write!(
        s,
        "<h2>Invalid instances ({})</h2><table><tr><th>directory</th><th>error</th></tr>",
        r.invalid_instances.len()
    );
    for i in &r.invalid_instances {
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"r\">{}</td></tr>",
            esc(&i.path),
            esc(&i.error)
        );
    }
    s.push_str("</table>");
}

fn one_run(m: &BTreeMap<String, Bucket>, name: &str) -> BTreeMap<String, BTreeMap<String, Bucket>> {
    m.iter()
        .map(|(k, b)| (k.clone(), BTreeMap::from([(name.to_string(), b.clone())])))
        .collect()
}

fn class_legend(s: &mut String) {
    s.push_str("<table><tr><th>class</th><th>meaning</th></tr>");
    for c in FailureClass::ALL {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td></tr>",
            c.as_str(),
            esc(c.describe())
        );
    }
    s.push_str("</table>");
}

/// One run as one self-contained HTML page.
pub fn html(r: &Report) -> String {
    let mut s = String::new();
    head(&mut s, "flux score report");
    let _ = write!(
        s,
        "<h1>flux score report</h1><div class=\"sub\">answers: {}{}</div>",
        esc(&r.answers),
        if r.usage.models.is_empty() {
            String::new()
        } else {
            format!(" &middot; model: {}", esc(&r.usage.models.join(", ")))
        }
    );
    cards(&mut s, r);
    let name = vec![r.name.clone()];
    s.push_str("<h2>Accuracy by kind</h2>");
    s.push_str(&grouped_bars(
        "Accuracy by kind",
        &one_run(&r.by_kind, &r.name),
        &name,
    ));
    s.push_str("<h2>Accuracy by repository</h2>");
    s.push_str(&grouped_bars(
        "Accuracy by repository",
        &one_run(&r.by_repository, &r.name),
        &name,
    ));
    if !r.pass_at_k.is_empty() {
        s.push_str("<h2>pass@k</h2>");
        s.push_str(&pass_at_k_chart(&[r]));
    }
    if !r.failure_classes.is_empty() {
        s.push_str("<h2>Failure classes</h2>");
        s.push_str(&failure_bars(&[r]));
        class_legend(&mut s);
    }
    if r.call_graph.instances > 0 {
        let c = &r.call_graph;
        let _ = write!(
            s,
            "<h2>Call graph</h2><p>{} instances, {} passed (F1 ≥ {}). Micro precision {:.3}, recall {:.3}, F1 {:.3} (tp {}, fp {}, fn {}).</p>",
            c.instances, c.passed, c.threshold, c.precision, c.recall, c.f1, c.tp, c.fp, c.fn_
        );
    }
    s.push_str("<h2>Kind × repository</h2><table><tr><th>kind</th><th>repository</th><th>passed</th><th>scored</th><th>accuracy</th><th>95% Wilson</th><th>partial</th><th>infra</th></tr>");
    for (k, m) in &r.by_kind_repository {
        for (repo, b) in m {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{}</td></tr>",
                esc(k),
                esc(repo),
                b.passed,
                b.total,
                pct(b.accuracy),
                ci(b.ci),
                b.partial,
                b.infra_errors
            );
        }
    }
    s.push_str("</table>");
    failures(&mut s, r);
    invalid(&mut s, r);
    s.push_str("</body></html>\n");
    s
}

/// Several runs, compared, as one self-contained HTML page.
pub fn html_multi(m: &MultiReport) -> String {
    let mut s = String::new();
    head(&mut s, "flux score comparison");
    let names: Vec<String> = m.runs.iter().map(|r| r.name.clone()).collect();
    let _ = write!(
        s,
        "<h1>flux score: {} runs compared</h1><div class=\"sub\">{}</div>",
        m.runs.len(),
        esc(&m
            .runs
            .iter()
            .map(|r| format!("{} ({})", r.name, r.answers))
            .collect::<Vec<_>>()
            .join(" · "))
    );
    s.push_str("<h2>Runs</h2><table><tr><th>run</th><th>passed</th><th>scored</th><th>accuracy</th><th>95% Wilson</th><th>partial credit [bootstrap 95%]</th><th>infra</th><th>cost</th></tr>");
    for (i, r) in m.runs.iter().enumerate() {
        let p = &r.partial_credit;
        let _ = write!(
            s,
            "<tr><td><i style=\"display:inline-block;width:10px;height:10px;background:{}\"></i> {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3} [{:.3}–{:.3}]</td><td>{}</td><td>{}</td></tr>",
            color(i),
            esc(&r.name),
            r.passed,
            r.total,
            pct(r.accuracy),
            ci(r.accuracy_ci),
            p.mean,
            p.low,
            p.high,
            r.infra_errors,
            if r.usage.with_meta > 0 { esc(&r.usage.cost_text(2)) } else { "-".into() }
        );
    }
    s.push_str("</table>");
    s.push_str("<h2>Accuracy by kind</h2>");
    legend(&mut s, &names);
    s.push_str(&grouped_bars(
        "Accuracy by kind and run",
        &m.by_kind,
        &names,
    ));
    s.push_str("<h2>Accuracy by repository</h2>");
    legend(&mut s, &names);
    s.push_str(&grouped_bars(
        "Accuracy by repository and run",
        &m.by_repository,
        &names,
    ));
    let runs: Vec<&Report> = m.runs.iter().collect();
    if runs.iter().any(|r| !r.pass_at_k.is_empty()) {
        s.push_str("<h2>pass@k</h2>");
        legend(&mut s, &names);
        s.push_str(&pass_at_k_chart(&runs));
    }
    s.push_str("<h2>Failure classes</h2>");
    s.push_str(&failure_bars(&runs));
    class_legend(&mut s);
    if !m.comparisons.is_empty() {
        s.push_str("<h2>Paired comparisons</h2><p>On the instances both runs scored: difference of accuracy (b − a, points) with a 95 % paired-bootstrap interval, and the exact McNemar test on the instances only one run passed.</p>");
        s.push_str(&forest(m));
        s.push_str("<table><tr><th>b − a</th><th>n</th><th>accuracy a</th><th>accuracy b</th><th>difference [95%]</th><th>partial difference [95%]</th><th>only a</th><th>only b</th><th>McNemar p</th></tr>");
        for c in &m.comparisons {
            let _ = write!(
                s,
                "<tr><td>{} − {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4}</td></tr>",
                esc(&c.b),
                esc(&c.a),
                c.n,
                pct(c.accuracy_a),
                pct(c.accuracy_b),
                c.accuracy_text(),
                c.partial_text(),
                c.only_a,
                c.only_b,
                c.mcnemar_p
            );
        }
        s.push_str("</table>");
    }
    for r in &m.runs {
        let _ = write!(s, "<h2>{}</h2>", esc(&r.name));
        failures(&mut s, r);
    }
    if let Some(r) = m.runs.first() {
        invalid(&mut s, r);
    }
    s.push_str("</body></html>\n");
    s
}
