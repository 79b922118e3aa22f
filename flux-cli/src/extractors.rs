//! `flux extractors [NAME] [--json]`: every extractor's definition, parameters and shapes, as
//! the registry in `flux-extract` holds them (the one source; nothing here is hand-written).
use anyhow::{bail, Result};
use flux_extract::{Extractor, ParamType, Params};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Only this extractor.
    name: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// A value of the type, to see how a parameter changes an extractor's shape.
fn sample(ty: ParamType) -> Value {
    match ty {
        ParamType::Str => json!("x"),
        ParamType::Pos | ParamType::Nat | ParamType::Line => json!(1),
        ParamType::Bool => json!(true),
        ParamType::StrList => json!(["x"]),
        ParamType::LineList => json!([1]),
        ParamType::Choice(c) => json!(c.first().copied().unwrap_or("")),
        ParamType::LineNames => json!({"1": ["x"]}),
        ParamType::StrLines => json!({"x": 1}),
    }
}

/// The distinct shapes the extractor computes: with no optional parameter, then with each one
/// that changes it (e.g. `coverage_across_tests` with `line`).
fn shapes(ex: &Extractor) -> Vec<(Option<&'static str>, &'static str)> {
    let base = (ex.shape)(&Params::default());
    let mut out = vec![(None, base)];
    let mut seen: BTreeSet<&str> = BTreeSet::from([base]);
    for p in ex.params.iter().filter(|p| !p.required) {
        let mut m = Map::new();
        m.insert(p.name.to_string(), sample(p.ty));
        let s = (ex.shape)(&Params::new(m));
        if seen.insert(s) {
            out.push((Some(p.name), s));
        }
    }
    out
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::String(text.to_string()))
}

fn to_json(ex: &Extractor) -> Value {
    let params: Vec<Value> = ex
        .params
        .iter()
        .map(|p| {
            json!({"name": p.name, "type": p.ty.describe(), "required": p.required,
                   "doc": p.doc})
        })
        .collect();
    let shapes: Vec<Value> = shapes(ex)
        .into_iter()
        .map(|(with, s)| json!({"with": with, "shape": parse(s)}))
        .collect();
    let conventions: Vec<Value> = flux_extract::conventions(ex)
        .into_iter()
        .map(|(t, d)| json!({"title": t, "text": d}))
        .collect();
    json!({
        "name": ex.name,
        "kinds": ex.kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "doc": ex.doc,
        "params": params,
        "shapes": shapes,
        "template": parse((ex.template)(&Params::default())),
        "conventions": conventions,
        "targets_scope": ex.targets_scope,
        "targeted": ex.targeted,
    })
}

/// `text` wrapped at `width` columns, each line indented by `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn to_text(ex: &Extractor) -> String {
    let mut s = String::new();
    let kinds: Vec<&str> = ex.kinds.iter().map(|k| k.as_str()).collect();
    s.push_str(&format!("{}  ({})\n", ex.name, kinds.join(", ")));
    s.push_str(&wrap(ex.doc, "  ", 96));
    s.push_str("  parameters:\n");
    for p in ex.params {
        let req = if p.required { ", required" } else { "" };
        s.push_str(&format!("    {} ({}{req})\n", p.name, p.ty.describe()));
        s.push_str(&wrap(p.doc, "        ", 96));
    }
    for (with, shape) in shapes(ex) {
        match with {
            None => s.push_str(&format!("  shape: {shape}\n")),
            Some(p) => s.push_str(&format!("  shape with `{p}`: {shape}\n")),
        }
    }
    s.push_str(&format!(
        "  usual template: {}\n",
        (ex.template)(&Params::default())
    ));
    for (title, text) in flux_extract::conventions(ex) {
        s.push_str(&format!("  {title}:\n"));
        s.push_str(&wrap(text, "    ", 96));
    }
    if !ex.targets_scope {
        s.push_str("  not for [tracing] scope = \"targets\" (it reads code outside targets)\n");
    }
    s
}

pub fn run(a: Args) -> Result<ExitCode> {
    let chosen: Vec<&Extractor> = match &a.name {
        Some(n) => match flux_extract::find(n) {
            Some(ex) => vec![ex],
            None => {
                let known: Vec<&str> = flux_extract::extractors().iter().map(|e| e.name).collect();
                bail!(
                    "unknown extractor `{n}`; known extractors: {}",
                    known.join(", ")
                )
            }
        },
        None => flux_extract::extractors().iter().collect(),
    };
    if a.json {
        let v: Vec<Value> = chosen.iter().map(|e| to_json(e)).collect();
        let out = if a.name.is_some() {
            v.into_iter().next().unwrap_or(Value::Null)
        } else {
            Value::Array(v)
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let texts: Vec<String> = chosen.iter().map(|e| to_text(e)).collect();
        print!("{}", texts.join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}
