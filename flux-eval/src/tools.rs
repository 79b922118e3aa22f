//! Read-only tools over the source root, offered to the model by function calling in the
//! `agent` and `context+tools` modes ([`crate::prompt::Mode`]): `list_files`, `read_file` and
//! `search`.
//!
//! Confined to the source tree: paths are relative to the source root; `..` components are
//! refused, symbolic links are never listed or searched, and a path read must resolve inside
//! the root (symlinks included). Any path ending that names one file is
//! accepted too (`/usr/lib/python3.11/site-packages/pkg/mod.py`). What the tools return counts
//! against the context budget; once it is spent the tools say so and the model must answer.

use serde_json::{json, Value};
use std::path::{Component, Path, PathBuf};

use crate::client::{ToolCall, ToolSpec};
use crate::prompt::{list_py_files, resolve, CHARS_PER_TOKEN};

/// Most lines one `read_file` returns.
pub const MAX_LINES_PER_READ: usize = 400;
/// Most entries one `list_files` returns.
pub const MAX_LIST: usize = 400;

/// The tool definitions.
pub fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "list_files",
            description: "List files under a directory of the package source (recursively). Paths are relative to the source root; use \"\" for the root.",
            parameters: json!({"type": "object", "properties": {"path": {"type": "string", "description": "directory, relative to the source root"}}, "required": []}),
        },
        ToolSpec {
            name: "search",
            description: "Search the package's Python files for a literal text (not a regular expression); returns file:line: text for each matching line, at most 100.",
            parameters: json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "the text to find"},
                "path": {"type": "string", "description": "only under this directory (relative to the source root)"},
                "ignore_case": {"type": "boolean"}},
                "required": ["query"]}),
        },
        ToolSpec {
            name: "read_file",
            description: "Read a source file with line numbers. Optionally a line range (1-based, inclusive); at most 400 lines per call.",
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "file path, relative to the source root"},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"}},
                "required": ["path"]}),
        },
    ]
}

/// Executes tool calls against one source root under a character budget.
#[derive(Debug)]
pub struct Toolbox {
    root: Option<PathBuf>,
    files: Vec<String>,
    /// Characters the tools may still return.
    pub remaining: usize,
    /// Calls executed.
    pub calls: u32,
}

impl Toolbox {
    pub fn new(root: Option<PathBuf>, budget_tokens: usize) -> Self {
        let files = root.as_deref().map(list_py_files).unwrap_or_default();
        Toolbox {
            root,
            files,
            remaining: budget_tokens.saturating_mul(CHARS_PER_TOKEN),
            calls: 0,
        }
    }

    /// Run one call; the result is text for the model (errors included, never a panic).
    pub fn run(&mut self, call: &ToolCall) -> String {
        self.calls += 1;
        let Some(root) = self.root.clone() else {
            return "error: no source is available for this instance".into();
        };
        let arg = |k: &str| call.arguments.get(k);
        let out = match call.name.as_str() {
            "list_files" => {
                let p = arg("path").and_then(Value::as_str).unwrap_or("");
                self.list(&root, p)
            }
            "read_file" => match arg("path").and_then(Value::as_str) {
                None => "error: read_file needs a \"path\" string argument".into(),
                Some(p) => {
                    let num = |k: &str| {
                        arg(k).and_then(|v| {
                            v.as_u64()
                                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                        })
                    };
                    self.read(&root, p, num("start_line"), num("end_line"))
                }
            },
            "search" => match arg("query").and_then(Value::as_str) {
                None | Some("") => {
                    "error: search needs a non-empty \"query\" string argument".into()
                }
                Some(q) => {
                    let under = arg("path").and_then(Value::as_str).unwrap_or("");
                    let ic = arg("ignore_case").and_then(Value::as_bool).unwrap_or(false);
                    self.search(&root, q, under, ic)
                }
            },
            other => format!(
                "error: unknown tool {other:?}; the tools are list_files, read_file and search"
            ),
        };
        if out.len() > self.remaining {
            let cut: String = out.chars().take(self.remaining).collect();
            self.remaining = 0;
            if cut.is_empty() {
                return "error: the context budget is spent; answer now with the JSON object"
                    .into();
            }
            return format!(
                "{cut}\n[truncated: the context budget is spent; answer now with the JSON object]"
            );
        }
        self.remaining -= out.len();
        out
    }

    fn list(&self, root: &Path, dir: &str) -> String {
        let prefix = match dir_prefix(dir) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let d = prefix.trim_end_matches('/');
        let mut out: Vec<&str> = self
            .files
            .iter()
            .filter(|f| f.starts_with(&prefix))
            .map(String::as_str)
            .collect();
        // Non-Python files of the directory itself are listed too.
        let mut others = Vec::new();
        let inside = match (root.canonicalize(), root.join(d).canonicalize()) {
            (Ok(r), Ok(x)) => x.starts_with(r),
            _ => false,
        };
        if let Ok(rd) = std::fs::read_dir(root.join(d))
            .map_err(|_| ())
            .and_then(|rd| if inside { Ok(rd) } else { Err(()) })
        {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_file())
                    && !n.ends_with(".py")
                    && !n.starts_with('.')
                {
                    others.push(format!("{prefix}{n}"));
                }
            }
        }
        others.sort();
        out.extend(others.iter().map(String::as_str));
        if out.is_empty() {
            return format!("no files under {dir:?}");
        }
        let n = out.len();
        let mut s = out
            .into_iter()
            .take(MAX_LIST)
            .collect::<Vec<_>>()
            .join("\n");
        if n > MAX_LIST {
            s.push_str(&format!(
                "\n[{} more files not shown; list a subdirectory]",
                n - MAX_LIST
            ));
        }
        s
    }

    fn search(&self, root: &Path, query: &str, under: &str, ignore_case: bool) -> String {
        let prefix = match dir_prefix(under) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let Ok(canon_root) = root.canonicalize() else {
            return "error: the source root cannot be opened".into();
        };
        let needle = if ignore_case {
            query.to_lowercase()
        } else {
            query.to_string()
        };
        let mut hits = Vec::new();
        let mut total = 0usize;
        for f in self.files.iter().filter(|f| f.starts_with(&prefix)) {
            let Ok(canon) = root.join(f).canonicalize() else {
                continue;
            };
            if !canon.starts_with(&canon_root) {
                continue;
            }
            let Ok(bytes) = std::fs::read(&canon) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            for (i, line) in text.lines().enumerate() {
                let hay = if ignore_case {
                    line.to_lowercase()
                } else {
                    line.to_string()
                };
                if hay.contains(&needle) {
                    total += 1;
                    if hits.len() < 100 {
                        let l: String = line.trim().chars().take(200).collect();
                        hits.push(format!("{f}:{}: {l}", i + 1));
                    }
                }
            }
        }
        if hits.is_empty() {
            return format!("no match for {query:?}");
        }
        let mut s = hits.join("\n");
        if total > hits.len() {
            s.push_str(&format!(
                "\n[{} more matches not shown; narrow the query or the path]",
                total - hits.len()
            ));
        }
        s
    }

    fn read(&self, root: &Path, path: &str, start: Option<u64>, end: Option<u64>) -> String {
        let p = path.trim();
        if has_parent(p) {
            return "error: \"..\" is not allowed".into();
        }
        let rel = if root.join(p.trim_start_matches('/')).is_file() && !p.starts_with('/') {
            p.to_string()
        } else {
            match resolve(p, &self.files) {
                Some(r) => r,
                None => return format!("error: no file {p:?} in the source (use list_files)"),
            }
        };
        let full = root.join(&rel);
        let (Ok(canon_root), Ok(canon)) = (root.canonicalize(), full.canonicalize()) else {
            return format!("error: cannot open {rel:?}");
        };
        if !canon.starts_with(&canon_root) {
            return "error: path leaves the source root".into();
        }
        let text = match std::fs::read(&canon) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => return format!("error: cannot read {rel:?}: {e}"),
        };
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        let s = start.unwrap_or(1).max(1) as usize;
        let e = (end.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize).min(total);
        if s > total.max(1) || (total > 0 && s > e) {
            return format!("error: {rel} has {total} lines; the range {s}-{e} is empty");
        }
        let e = e.min(s + MAX_LINES_PER_READ - 1);
        let mut out = format!("{rel} (lines {s}-{e} of {total})\n");
        for (i, l) in lines.iter().enumerate().take(e).skip(s - 1) {
            out.push_str(&format!("{:>5}  {}\n", i + 1, l));
        }
        if e < total && end.is_none_or(|x| x as usize > e) {
            out.push_str(&format!(
                "[more: lines {}-{total}; call read_file with start_line]\n",
                e + 1
            ));
        }
        out
    }
}

/// `dir/` for a directory argument (`""` for the root); `..` is refused.
fn dir_prefix(dir: &str) -> Result<String, String> {
    let d = dir.trim().trim_matches('/');
    if has_parent(d) {
        return Err("error: \"..\" is not allowed".into());
    }
    Ok(if d.is_empty() || d == "." {
        String::new()
    } else {
        format!("{d}/")
    })
}

fn has_parent(p: &str) -> bool {
    Path::new(p)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
}
