//! Hand-written extractor parameters checked against the static facts of the target's source,
//! before anything runs (issue 24.6).
//!
//! Why: a loop `header` that is no loop line, or a `body_end` past the function, is harvested
//! without complaint and gives a plausible gold answer to a question about something else. The
//! parameters name lines, variables and functions of the target's source, so where that source
//! is on the host they are checked against it: the `function` (and `raised_in`) is defined in a
//! targeted file (its `co_qualname`); every line parameter lies inside the function; `header` is
//! the first line of a `for`/`while` statement of the function's own body; `body_end` and
//! `body_line` come after it; every variable named occurs in the function's code (assigned,
//! read, or a parameter). The source is read with `flux_extract::pysrc`, the static reader
//! flux-eval's prompts use.
//!
//! Where the source is looked for: each `[tracing] files` entry in the instance directory (as
//! given, or its file name alone), then under each source root given (`<root>/<entry>`,
//! `<root>/src/<entry>`): [`crate::load_instance`] looks only in the instance directory; `flux
//! harvest` adds the cache's unpacked package source. When no source is found the check is
//! skipped, and [`SourceCheck::Skipped`] says why (the harvest reports it).
use crate::{external, invalid, locate, Instance, InstanceError, InstanceSpec, INSTANCE_FILE};
use flux_extract::pysrc::{Def, Module};
use flux_extract::{ParamType, Params};
use std::path::{Path, PathBuf};

/// What [`check_source`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceCheck {
    /// The parameters agree with these source files.
    Checked { files: Vec<PathBuf> },
    /// The parameters name no function of Python source (or the target is JVM classes):
    /// nothing to check.
    Nothing,
    /// Not checked, and why (the source is not on the host, …).
    Skipped { reason: String },
}

/// Check `inst`'s extractor parameters against its source, looked for in the instance
/// directory, then under each of `roots` (see the module docs). An error names the instance
/// file, the position of the parameter, the parameter and the line.
pub fn check_source(inst: &Instance, roots: &[PathBuf]) -> Result<SourceCheck, InstanceError> {
    let path = inst.dir.join(INSTANCE_FILE);
    check(&inst.dir, &path, &inst.spec, &inst.params, roots).map_err(|e| match e {
        InstanceError::Invalid {
            path,
            at,
            field,
            problem,
        } if at.is_empty() => {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            InstanceError::Invalid {
                at: locate(&text, &field)
                    .map(|(l, c)| format!(":{l}:{c}"))
                    .unwrap_or_default(),
                path,
                field,
                problem,
            }
        }
        other => other,
    })
}

/// A targeted file found on the host, read.
struct Source {
    path: PathBuf,
    text: String,
    module: Module,
}

/// [`check_source`] on a spec being validated (`path` is used in errors).
pub(crate) fn check(
    dir: &Path,
    path: &Path,
    spec: &InstanceSpec,
    params: &Params,
    roots: &[PathBuf],
) -> Result<SourceCheck, InstanceError> {
    if spec.extractor.name == external::SWE_FLUX_PARSER {
        return Ok(SourceCheck::Nothing);
    }
    let Some(ex) = flux_extract::find(&spec.extractor.name) else {
        return Ok(SourceCheck::Nothing);
    };
    let named = |k: &str| params.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let (function, raised_in) = (named("function"), named("raised_in"));
    if function.is_none() && raised_in.is_none() {
        return Ok(SourceCheck::Nothing);
    }
    if !spec.tracing.classes.is_empty() {
        // JVM classes: no Python source to read (nothing of the kind to check).
        return Ok(SourceCheck::Nothing);
    }
    let entries: Vec<&str> = spec
        .tracing
        .files
        .iter()
        .map(|f| f.trim_start_matches('/'))
        .filter(|f| !f.is_empty() && !f.contains('*'))
        .collect();
    if entries.is_empty() {
        return Ok(skipped(
            "[tracing] files names no source file (none, or only globs), so where the function \
             is defined is not known",
        ));
    }
    let mut sources = Vec::new();
    let mut missing = Vec::new();
    for e in &entries {
        match find_file(dir, e, roots) {
            Some(p) => match std::fs::read_to_string(&p) {
                Ok(text) => sources.push(Source {
                    module: Module::parse(&text),
                    path: p,
                    text,
                }),
                Err(err) => return Ok(skipped(&format!("{}: {err}", p.display()))),
            },
            None => missing.push(*e),
        }
    }
    if sources.is_empty() {
        let mut looked = vec![dir.display().to_string()];
        looked.extend(roots.iter().map(|r| r.display().to_string()));
        return Ok(skipped(&format!(
            "the source ({}) is not on the host (looked in {}); generated instances keep it in \
             the image only",
            entries.join(", "),
            looked.join(", ")
        )));
    }
    if let Some(r) = raised_in.as_deref() {
        if defs_named(&sources, r).is_empty() {
            return not_defined(path, "raised_in", r, &sources, &missing);
        }
    }
    let Some(f) = function.as_deref() else {
        return Ok(checked(&sources));
    };
    let defs = defs_named(&sources, f);
    let mut first_err = None;
    for (src, def) in &defs {
        match check_def(path, ex, params, f, src, def) {
            Ok(()) => return Ok(checked(&sources)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => not_defined(path, "function", f, &sources, &missing),
    }
}

fn skipped(reason: &str) -> SourceCheck {
    SourceCheck::Skipped {
        reason: reason.to_string(),
    }
}

fn checked(sources: &[Source]) -> SourceCheck {
    SourceCheck::Checked {
        files: sources.iter().map(|s| s.path.clone()).collect(),
    }
}

/// The file a `[tracing] files` entry names, on the host.
fn find_file(dir: &Path, entry: &str, roots: &[PathBuf]) -> Option<PathBuf> {
    let rel = Path::new(entry);
    let mut cands = Vec::new();
    // Inside the instance directory only a plain relative path (never `..`).
    if rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        cands.push(dir.join(rel));
        if let Some(name) = rel.file_name() {
            cands.push(dir.join(name));
        }
    }
    for r in roots {
        cands.push(r.join(rel));
        cands.push(r.join("src").join(rel));
    }
    cands.into_iter().find(|p| p.is_file())
}

/// Every function (not class) whose qualified name is `name`, in every source.
fn defs_named<'a>(sources: &'a [Source], name: &str) -> Vec<(&'a Source, &'a Def)> {
    sources
        .iter()
        .flat_map(|s| s.module.defs.iter().map(move |d| (s, d)))
        .filter(|(_, d)| !d.is_class && d.qualname == name)
        .collect()
}

/// A function named by `key` is not defined: an error when every targeted file was read, else
/// a skip (it may be in the file not found).
fn not_defined(
    path: &Path,
    key: &str,
    name: &str,
    sources: &[Source],
    missing: &[&str],
) -> Result<SourceCheck, InstanceError> {
    let files: Vec<String> = sources
        .iter()
        .map(|s| s.path.display().to_string())
        .collect();
    if !missing.is_empty() {
        return Ok(skipped(&format!(
            "`{name}` (extractor.params.{key}) is not defined in {}, and {} is not on the host",
            files.join(", "),
            missing.join(", ")
        )));
    }
    let mut known: Vec<&str> = sources
        .iter()
        .flat_map(|s| s.module.defs.iter())
        .filter(|d| !d.is_class && d.qualname.rsplit('.').next() == name.rsplit('.').next())
        .map(|d| d.qualname.as_str())
        .collect();
    known.dedup();
    let hint = if known.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", quoted(&known))
    };
    Err(invalid(
        path,
        &format!("extractor.params.{key}"),
        format!(
            "no function `{name}` is defined in {} (a qualified name as co_qualname: \
             `Class.method`, `outer.<locals>.inner`){hint}",
            files.join(", ")
        ),
    ))
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The source text of line `l` (trimmed, shortened), for messages.
fn line_text(text: &str, l: u64) -> String {
    let t = usize::try_from(l)
        .ok()
        .and_then(|l| l.checked_sub(1))
        .and_then(|i| text.lines().nth(i))
        .unwrap_or("")
        .trim();
    let short: String = t.chars().take(60).collect();
    if short.len() < t.len() {
        format!("`{short}…`")
    } else {
        format!("`{short}`")
    }
}

/// Check the parameters against one definition of the function.
fn check_def(
    path: &Path,
    ex: &flux_extract::Extractor,
    params: &Params,
    function: &str,
    src: &Source,
    def: &Def,
) -> Result<(), InstanceError> {
    let file = src.path.display();
    let span = format!(
        "`{function}` (lines {}-{} of {file})",
        def.def_line, def.end
    );
    let inside = |l: u64| (def.def_line as u64..=def.end as u64).contains(&l);
    let header = params.get("header").and_then(|v| v.as_u64());
    let bad =
        |key: &str, problem: String| invalid(path, &format!("extractor.params.{key}"), problem);
    for doc in ex.params {
        let Some(v) = params.get(doc.name) else {
            continue;
        };
        let lines: Vec<u64> = match doc.ty {
            ParamType::Line => v.as_u64().into_iter().collect(),
            ParamType::LineList => v
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                .unwrap_or_default(),
            ParamType::LineNames => v
                .as_object()
                .map(|m| m.keys().filter_map(|k| k.parse().ok()).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        // `def_line` and `source_first_line` say where the function (or a given text) starts.
        if matches!(doc.name, "def_line" | "source_first_line") {
            continue;
        }
        for l in lines {
            if !inside(l) {
                return Err(bad(
                    doc.name,
                    format!(
                        "line {l} ({}) is not inside {span}",
                        line_text(&src.text, l)
                    ),
                ));
            }
        }
    }
    if let Some(h) = header {
        let loops = src.module.loops_in(def);
        if !loops.iter().any(|(first, _)| *first as u64 == h) {
            let starts: Vec<String> = loops.iter().map(|(f, _)| f.to_string()).collect();
            let has = if starts.is_empty() {
                "it has no loop".to_string()
            } else {
                format!("its loops start at lines {}", starts.join(", "))
            };
            return Err(bad(
                "header",
                format!(
                    "line {h} ({}) is not a `for`/`while` line of {span}; {has}",
                    line_text(&src.text, h)
                ),
            ));
        }
        for key in ["body_end", "body_line"] {
            if let Some(l) = params.get(key).and_then(|v| v.as_u64()) {
                if l <= h {
                    return Err(bad(
                        key,
                        format!("line {l} is not after the loop's header (line {h})"),
                    ));
                }
            }
        }
    }
    check_names(path, params, function, src, def, &span)
}

/// Every variable the parameters name occurs in the function's code.
fn check_names(
    path: &Path,
    params: &Params,
    function: &str,
    src: &Source,
    def: &Def,
    span: &str,
) -> Result<(), InstanceError> {
    let strs = |v: &serde_json::Value| -> Vec<String> {
        match v {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect(),
            serde_json::Value::Object(m) => m.values().flat_map(strs_of).collect(),
            _ => Vec::new(),
        }
    };
    for key in ["variable", "variables", "uses"] {
        let Some(v) = params.get(key) else {
            continue;
        };
        for name in strs(v) {
            // A local's name (its leading identifier, should a path be given).
            let ident: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !ident.is_empty() && !src.module.mentions(def, &ident) {
                return Err(invalid(
                    path,
                    &format!("extractor.params.{key}"),
                    format!(
                        "`{name}` occurs nowhere in {span}: not a parameter of `{function}`, \
                         nor assigned or read in it"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn strs_of(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
