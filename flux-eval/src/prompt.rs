//! Prompt construction under a context budget.
//!
//! Order of priority: the question and the template, the instance's test files, then
//! repository source from the source root: first the files named by `[tracing] files` and in
//! the question, then the other `.py` files of the same directories. Source lines are numbered
//! (questions ask about line numbers). A file that does not fit is cut, and the prompt says so
//! in a closing "Context notes" section, together with the files left out. The budget counts
//! about four characters per token.

use std::path::{Path, PathBuf};

use flux_score::Instance;

/// Characters per token used for budgeting.
pub const CHARS_PER_TOKEN: usize = 4;

pub const SYSTEM: &str = "You are an expert at predicting the runtime behaviour of Python programs by reading their source code. You cannot run anything. Answer with exactly one JSON object of the requested shape and nothing else.";

/// Where the unpacked source of an instance's package is.
pub fn source_root_for(inst: &Instance, source_root: Option<&Path>) -> Option<PathBuf> {
    let pv = inst.package_name_version();
    let named = pv.as_ref().map(|(n, v)| format!("{n}-{v}"));
    let candidates: Vec<PathBuf> = match (source_root, &named) {
        (Some(r), Some(n)) => vec![r.join(n), r.to_path_buf()],
        (Some(r), None) => vec![r.to_path_buf()],
        (None, Some(n)) => vec![Path::new(".flux-cache/src").join(n)],
        (None, None) => vec![],
    };
    candidates.into_iter().find(|p| p.is_dir())
}

/// All `.py` files under `root` (relative paths, sorted), bounded.
pub fn list_py_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "__pycache__" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if name.ends_with(".py") {
                if let Ok(rel) = p.strip_prefix(root) {
                    out.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
            if out.len() > 50_000 {
                break;
            }
        }
    }
    out.sort();
    out
}

/// Resolve a file name (relative, absolute, or any path ending) against the source files.
pub fn resolve(name: &str, files: &[String]) -> Option<String> {
    let n = name.trim().trim_start_matches("./").replace('\\', "/");
    if n.is_empty() {
        return None;
    }
    if let Some(f) = files.iter().find(|f| **f == n) {
        return Some(f.clone());
    }
    // The name ends with a known file (absolute path into site-packages) ...
    let mut best: Option<&String> = None;
    for f in files {
        let suffix_of_name = n.strip_suffix(f.as_str()).is_some_and(|h| h.ends_with('/'));
        let name_suffix_of_f = f
            .strip_suffix(n.as_str())
            .is_some_and(|h| h.ends_with('/') || h.is_empty());
        if (suffix_of_name || name_suffix_of_f)
            && best.is_none_or(|b| f.len() > b.len() && suffix_of_name)
        {
            best = Some(f);
        }
    }
    best.cloned()
}

/// Like [`resolve`], and a name with `*` is a glob over the files (each `*` matches any run of
/// characters, `/` included; the glob may match any path ending): all matches, sorted.
pub fn resolve_all(name: &str, files: &[String]) -> Vec<String> {
    if !name.contains('*') {
        return resolve(name, files).into_iter().collect();
    }
    let g = name.trim().trim_start_matches("./");
    files
        .iter()
        .filter(|f| {
            let full = format!("/{f}");
            // Match against every path ending at a component boundary.
            full.match_indices('/')
                .any(|(i, _)| glob(g, &full[i + 1..]))
                || glob(g, &full)
        })
        .take(200)
        .cloned()
        .collect()
}

fn glob(p: &str, s: &str) -> bool {
    let (p, s) = (p.as_bytes(), s.as_bytes());
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && p[pi] != b'*' && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            pi += 1;
            mark = si;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// File-like mentions in the question: `something/like/this.py` or `this.py`.
pub fn mentioned_files(question: &str) -> Vec<String> {
    let mut out = Vec::new();
    for tok in question.split(|c: char| c.is_whitespace() || "`'\"(),;:[]{}<>".contains(c)) {
        let t = tok.trim_end_matches('.');
        if t.ends_with(".py") && t.len() > 3 && !out.iter().any(|o: &String| o == t) {
            out.push(t.to_string());
        }
    }
    out
}

fn numbered(text: &str, max_chars: usize) -> (String, usize, usize) {
    let total = text.lines().count();
    let mut out = String::new();
    let mut shown = 0;
    for (i, line) in text.lines().enumerate() {
        let l = format!("{:>5}  {}\n", i + 1, line);
        if out.len() + l.len() > max_chars {
            break;
        }
        out.push_str(&l);
        shown += 1;
    }
    (out, shown, total)
}

/// A built prompt.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub system: String,
    pub user: String,
    /// Source files included (whole or cut), relative to the source root.
    pub files: Vec<String>,
    /// What was cut or left out.
    pub notes: Vec<String>,
}

/// Build the prompt of one instance. `reasoning` asks for a `"reasoning"` field (validate mode).
pub fn build(
    inst: &Instance,
    source_root: Option<&Path>,
    max_context_tokens: usize,
    reasoning: bool,
) -> Prompt {
    let mut notes = Vec::new();
    let template =
        serde_json::to_string_pretty(&inst.template).unwrap_or_else(|_| inst.template.to_string());
    let mut head = format!(
        "Instance: {}  (kind: {})\n\n## Question\n{}\n\n## Answer format\nReply with one JSON object of exactly this shape; the leaves of the template name the type of each value (\"int\", \"str\", \"float\", \"bool\", \"any\"), and a list shows the shape of its elements.\n```json\n{}\n```\n",
        inst.key(),
        inst.kind,
        inst.question.trim(),
        template
    );
    if reasoning {
        head.push_str("Also include a top-level \"reasoning\" string field explaining, step by step, how you derived the answer.\n");
    } else {
        head.push_str("Output only the JSON object.\n");
    }
    // Budget in characters, keeping room for the reply.
    let budget = max_context_tokens
        .saturating_mul(CHARS_PER_TOKEN)
        .saturating_sub(SYSTEM.len() + 8_000);
    let mut remaining = budget.saturating_sub(head.len());
    let mut body = String::new();

    if !inst.test_files.is_empty() {
        body.push_str(
            "\n## Test file(s)\nThe test(s) below drive the code the question is about.\n",
        );
        for tf in &inst.test_files {
            let text = match std::fs::read_to_string(inst.dir.join(tf)) {
                Ok(t) => t,
                Err(e) => {
                    notes.push(format!("test file {tf} could not be read: {e}"));
                    continue;
                }
            };
            let (num, shown, total) = numbered(&text, remaining.saturating_sub(200));
            let sec = format!("\n### {tf}\n```python\n{num}```\n");
            if shown < total {
                notes.push(format!(
                    "test file {tf} truncated: lines 1-{shown} of {total} shown"
                ));
            }
            remaining = remaining.saturating_sub(sec.len());
            body.push_str(&sec);
        }
    }

    let mut included = Vec::new();
    match source_root_for(inst, source_root) {
        None => notes.push(format!(
            "repository source not available (package {})",
            inst.package.as_deref().unwrap_or("unknown")
        )),
        Some(root) => {
            let files = list_py_files(&root);
            let mut order: Vec<String> = Vec::new();
            let mut names: Vec<String> = inst.tracing_files.clone();
            names.extend(mentioned_files(&inst.question));
            for n in &names {
                let found = resolve_all(n, &files);
                if found.is_empty() {
                    notes.push(format!("named file {n} not found in the source"));
                }
                for f in found {
                    if !order.contains(&f) {
                        order.push(f);
                    }
                }
            }
            let dirs: Vec<String> = order
                .iter()
                .map(|f| {
                    f.rsplit_once('/')
                        .map(|(d, _)| d.to_string())
                        .unwrap_or_default()
                })
                .collect();
            for f in &files {
                let d = f.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                if dirs.iter().any(|x| x == d) && !order.contains(f) {
                    order.push(f.clone());
                }
            }
            if !order.is_empty() {
                body.push_str(&format!(
                    "\n## Repository source ({})\nLines are numbered as in the file.\n",
                    inst.package.as_deref().unwrap_or("source")
                ));
            }
            let mut omitted = Vec::new();
            for f in &order {
                if remaining < 2_000 {
                    omitted.push(f.clone());
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(root.join(f)) else {
                    notes.push(format!("source file {f} could not be read"));
                    continue;
                };
                let (num, shown, total) = numbered(&text, remaining.saturating_sub(200));
                if shown == 0 && total > 0 {
                    omitted.push(f.clone());
                    continue;
                }
                let sec = format!("\n### {f}\n```python\n{num}```\n");
                if shown < total {
                    notes.push(format!(
                        "source file {f} truncated: lines 1-{shown} of {total} shown"
                    ));
                }
                remaining = remaining.saturating_sub(sec.len());
                body.push_str(&sec);
                included.push(f.clone());
            }
            if !omitted.is_empty() {
                notes.push(format!(
                    "{} source file(s) left out for the context budget: {}",
                    omitted.len(),
                    omitted.join(", ")
                ));
            }
        }
    }
    let mut user = head;
    user.push_str(&body);
    if !notes.is_empty() {
        user.push_str("\n## Context notes\n");
        for n in &notes {
            user.push_str(&format!("- {n}\n"));
        }
    }
    Prompt {
        system: SYSTEM.to_string(),
        user,
        files: included,
        notes,
    }
}
