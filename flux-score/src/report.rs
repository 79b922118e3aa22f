//! Rendering a [`Report`] as text, JSON or one self-contained HTML page (inline CSS and inline
//! SVG bar charts; no scripts, fonts or images from elsewhere).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::{Bucket, Format, Report, ScoreError, Status};

/// Render in the given format.
pub fn render(r: &Report, format: Format) -> Result<String, ScoreError> {
    Ok(match format {
        Format::Text => text(r),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(r)
                .map_err(|e| ScoreError::Serialize(e.to_string()))?;
            s.push('\n');
            s
        }
        Format::Html => html(r),
    })
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
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
        "{title:<w$}  {:>6}  {:>6}  {:>8}  {:>5}",
        "passed", "total", "accuracy", "infra"
    );
    let _ = writeln!(out, "{}", "-".repeat(w + 33));
    for (k, b) in m {
        let _ = writeln!(
            out,
            "{k:<w$}  {:>6}  {:>6}  {:>8}  {:>5}",
            b.passed,
            b.total,
            pct(b.accuracy),
            b.infra_errors
        );
    }
    out.push('\n');
}

/// A readable plain-text report.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "flux score: {}", r.answers);
    let _ = writeln!(
        out,
        "accuracy {} ({}/{} passed), {} infra errors (excluded), {} not harvested\n",
        pct(r.accuracy),
        r.passed,
        r.total,
        r.infra_errors,
        r.not_harvested
    );
    if r.usage.with_meta > 0 {
        let u = &r.usage;
        let _ = writeln!(
            out,
            "model {}: {} tokens in, {} out, ${:.4}, {:.1} s over {} answers\n",
            u.models.join(", "),
            u.tokens_in,
            u.tokens_out,
            u.cost,
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
            let _ = writeln!(
                out,
                "  {tag} {}/{} [{}]: {}",
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

/// A horizontal bar chart as inline SVG: one row per bucket, bar length = accuracy.
fn bar_chart(title: &str, m: &BTreeMap<String, Bucket>) -> String {
    let row_h = 26;
    let label_w = 230;
    let bar_w = 520;
    let h = 30 + row_h * m.len().max(1) + 10;
    let w = label_w + bar_w + 150;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<figure><svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{}">"#,
        esc(title)
    );
    // Grid at 0, 25, 50, 75, 100 %.
    for q in 0..=4 {
        let x = label_w + bar_w * q / 4;
        let _ = write!(
            s,
            r##"<line x1="{x}" y1="22" x2="{x}" y2="{}" stroke="#ddd"/><text x="{x}" y="16" font-size="11" text-anchor="middle" fill="#666">{}%</text>"##,
            h - 8,
            q * 25
        );
    }
    if m.is_empty() {
        let _ = write!(
            s,
            r##"<text x="{label_w}" y="46" font-size="13" fill="#666">no scored instances</text>"##
        );
    }
    for (i, (k, b)) in m.iter().enumerate() {
        let y = 30 + row_h * i;
        let len = (b.accuracy.clamp(0.0, 1.0) * bar_w as f64).round() as usize;
        let color = if b.accuracy >= 0.75 {
            "#2e7d32"
        } else if b.accuracy >= 0.4 {
            "#f9a825"
        } else {
            "#c62828"
        };
        let label: String = if k.chars().count() > 32 {
            format!("{}…", k.chars().take(31).collect::<String>())
        } else {
            k.clone()
        };
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" font-size="13" text-anchor="end" fill="#222">{}</text><rect x="{label_w}" y="{}" width="{bar_w}" height="{}" fill="#f1f1f1"/><rect x="{label_w}" y="{}" width="{len}" height="{}" fill="{color}"><title>{}: {}/{}</title></rect><text x="{}" y="{}" font-size="12" fill="#222">{} ({}/{}{})</text>"##,
            label_w - 8,
            y + 17,
            esc(&label),
            y + 4,
            row_h - 8,
            y + 4,
            row_h - 8,
            esc(k),
            b.passed,
            b.total,
            label_w + bar_w + 8,
            y + 17,
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
    s.push_str("</svg></figure>");
    s
}

const CSS: &str = r#"
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px 32px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e3e3e3;padding-bottom:4px}
.sub{color:#666;font-size:13px;margin-bottom:16px}
.cards{display:flex;gap:14px;flex-wrap:wrap;margin:12px 0}
.card{border:1px solid #e3e3e3;border-radius:6px;padding:10px 16px;min-width:110px}
.card .v{font-size:24px;font-weight:600}.card .l{font-size:12px;color:#666}
figure{margin:8px 0}figcaption{font-weight:600;font-size:14px;margin-bottom:4px}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#fafafa}td.r{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;word-break:break-word}
.fail{color:#c62828;font-weight:600}.infra{color:#8d6e00;font-weight:600}.skip{color:#666}
"#;

/// One self-contained HTML page.
pub fn html(r: &Report) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>flux score report</title><style>");
    s.push_str(CSS);
    s.push_str("</style></head><body>");
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
    s.push_str("<div class=\"cards\">");
    for (v, l) in [
        (pct(r.accuracy), "accuracy"),
        (format!("{}/{}", r.passed, r.total), "passed / scored"),
        (r.failed.to_string(), "failed"),
        (r.infra_errors.to_string(), "infra errors (excluded)"),
        (r.not_harvested.to_string(), "not harvested"),
    ]
    .into_iter()
    .chain((r.usage.with_meta > 0).then(|| (format!("${:.2}", r.usage.cost), "cost")))
    .chain((r.usage.with_meta > 0).then(|| {
        (
            format!(
                "{}k / {}k",
                r.usage.tokens_in / 1000,
                r.usage.tokens_out / 1000
            ),
            "tokens in / out",
        )
    })) {
        let _ = write!(
            s,
            "<div class=\"card\"><div class=\"v\">{}</div><div class=\"l\">{}</div></div>",
            esc(&v),
            esc(l)
        );
    }
    s.push_str("</div>");
    s.push_str("<h2>Accuracy by kind</h2>");
    s.push_str(&bar_chart("Accuracy by kind", &r.by_kind));
    s.push_str("<h2>Accuracy by repository</h2>");
    s.push_str(&bar_chart("Accuracy by repository", &r.by_repository));
    if r.call_graph.instances > 0 {
        let c = &r.call_graph;
        let _ = write!(
            s,
            "<h2>Call graph</h2><p>{} instances, {} passed (F1 ≥ {}). Micro precision {:.3}, recall {:.3}, F1 {:.3} (tp {}, fp {}, fn {}).</p>",
            c.instances, c.passed, c.threshold, c.precision, c.recall, c.f1, c.tp, c.fp, c.fn_
        );
    }
    s.push_str("<h2>Kind × repository</h2><table><tr><th>kind</th><th>repository</th><th>passed</th><th>scored</th><th>accuracy</th><th>infra</th></tr>");
    for (k, m) in &r.by_kind_repository {
        for (repo, b) in m {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(k),
                esc(repo),
                b.passed,
                b.total,
                pct(b.accuracy),
                b.infra_errors
            );
        }
    }
    s.push_str("</table>");
    let failures: Vec<_> = r
        .instances
        .iter()
        .filter(|i| i.status != Status::Pass)
        .collect();
    let _ = write!(s, "<h2>Not passed ({})</h2>", failures.len());
    if failures.is_empty() {
        s.push_str("<p>Every scored instance passed.</p>");
    } else {
        s.push_str("<table><tr><th>status</th><th>repository</th><th>instance</th><th>kind</th><th>reason</th></tr>");
        for i in failures {
            let (cls, tag) = match i.status {
                Status::Fail => ("fail", "fail"),
                Status::InfraError => ("infra", "infra error"),
                _ => ("skip", "not harvested"),
            };
            let _ = write!(
                s,
                "<tr><td class=\"{cls}\">{tag}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"r\">{}</td></tr>",
                esc(&i.repo),
                esc(&i.id),
                esc(&i.kind),
                esc(i.reason.as_deref().unwrap_or(""))
            );
        }
        s.push_str("</table>");
    }
    if !r.invalid_instances.is_empty() {
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
    s.push_str("</body></html>\n");
    s
}
