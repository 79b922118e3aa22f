//! Prompt construction under a context budget.
//!
//! Order of priority: the question and the template, the instance's test files (of a long one,
//! the tests the question names), the repository's tests the question names
//! ([`crate::testsrc`]), then the repository source chosen around the target
//! ([`crate::context`]) — or, in agent mode, a note that the source is read through tools (and
//! which tests the question names). Source lines are numbered as in their files
//! (questions ask about line numbers). What does not fit is cut, and the prompt says so in a
//! closing "Context notes" section. The budget counts about four characters per token.

use std::path::Path;

use crate::source::Located;
use flux_score::Instance;

/// An instance directory's test file up to this long is shown whole; of a longer one, only the
/// tests the question names by id and what they use ([`crate::testsrc`]).
pub const WHOLE_TEST_FILE_LINES: usize = 200;

/// Characters per token used for budgeting.
pub const CHARS_PER_TOKEN: usize = 4;

pub const SYSTEM: &str = "You are an expert at predicting the runtime behaviour of Python programs by reading their source code. You cannot run anything. Answer with exactly one JSON object of the requested shape and nothing else.";

/// [`SYSTEM`] for an instance of a JVM repository ([`crate::javasrc::is_java`]).
pub const SYSTEM_JAVA: &str = "You are an expert at predicting the runtime behaviour of Java programs by reading their source code. You cannot run anything. Answer with exactly one JSON object of the requested shape and nothing else.";

/// All `.py` files under `root` (relative paths, sorted), bounded.
pub fn list_py_files(root: &Path) -> Vec<String> {
    list_files_ending(root, ".py")
}

/// All files under `root` whose name ends with `suffix` (relative paths, sorted), bounded.
pub fn list_files_ending(root: &Path, suffix: &str) -> Vec<String> {
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
            // Never through a symbolic link: the tree read is the source tree only.
            let Ok(ft) = e.file_type() else {
                continue;
            };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && name.ends_with(suffix) {
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
        // Every file the name ends with, or that ends with the name, at a `/` boundary (as a
        // tracing config's path suffix matches); an absolute path names its longest match.
        let n = name.trim().trim_start_matches("./").replace('\\', "/");
        if n.is_empty() {
            return Vec::new();
        }
        if files.contains(&n) {
            return vec![n];
        }
        let longest_inside = files
            .iter()
            .filter(|f| n.strip_suffix(f.as_str()).is_some_and(|h| h.ends_with('/')))
            .max_by_key(|f| f.len());
        if let Some(f) = longest_inside {
            return vec![f.clone()];
        }
        return files
            .iter()
            .filter(|f| f.strip_suffix(n.as_str()).is_some_and(|h| h.ends_with('/')))
            .cloned()
            .collect();
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
    /// Source shown, as `file:ranges` (relative to the source root).
    pub files: Vec<String>,
    /// Targets located in the source (`file:qualname`).
    pub targets: Vec<String>,
    /// What was cut or left out.
    pub notes: Vec<String>,
    /// The test code shown (the instance's test files and the repository's tests the question
    /// names), as in `user`: what a dataset row ships as its test source.
    pub test_source: String,
    /// The repository source shown around the target, as in `user` (empty in agent mode).
    pub context: String,
}

/// How the source reaches the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Source chosen around the target in the prompt ([`crate::context`]).
    #[default]
    Context,
    /// A small prompt and read-only tools over the source tree ([`crate::tools`]).
    Agent,
    /// Both: the chosen source in the prompt and the tools for more.
    ContextTools,
}

impl Mode {
    pub fn tools(self) -> bool {
        matches!(self, Mode::Agent | Mode::ContextTools)
    }
    pub fn name(self) -> &'static str {
        match self {
            Mode::Context => "context",
            Mode::Agent => "agent",
            Mode::ContextTools => "context+tools",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "context" => Ok(Mode::Context),
            "agent" | "tools" => Ok(Mode::Agent),
            "context+tools" | "both" => Ok(Mode::ContextTools),
            o => Err(format!(
                "unknown mode {o:?} (context, agent, context+tools)"
            )),
        }
    }
}

/// What a prompt is built from besides the instance.
#[derive(Debug, Clone)]
pub struct PromptConfig<'a> {
    pub source: &'a Located,
    pub max_context_tokens: usize,
    /// Ask for a `"reasoning"` field (validate mode).
    pub reasoning: bool,
    pub mode: Mode,
    /// Replaces [`SYSTEM`].
    pub system: Option<&'a str>,
}

/// The body of the "Test file(s)" section: the instance directory's test files, each whole or (a long one
/// of which the question names tests) those tests and what they use.
fn instance_test_files(inst: &Instance, remaining: &mut usize, notes: &mut Vec<String>) -> String {
    let mut out = String::new();
    for tf in &inst.test_files {
        let text = match std::fs::read_to_string(inst.dir.join(tf)) {
            Ok(t) => t,
            Err(e) => {
                notes.push(format!("test file {tf} could not be read: {e}"));
                continue;
            }
        };
        // A long file of which the question names tests: those tests and what they use.
        let own = crate::testsrc::own_tests(inst, tf);
        let total = text.lines().count();
        if total > WHOLE_TEST_FILE_LINES && !own.is_empty() {
            let c = crate::testsrc::choose(inst, &own, &inst.dir, *remaining / 2);
            if !c.targets.is_empty() {
                let sec = format!(
                    "\nOf {tf} ({total} lines), the test(s) the question names and what they use:\n{}",
                    c.text
                );
                *remaining = remaining.saturating_sub(sec.len());
                out.push_str(&sec);
                notes.extend(c.notes);
                continue;
            }
        }
        let (num, shown, total) = numbered(&text, remaining.saturating_sub(200));
        let sec = format!("\n### {tf}\n```python\n{num}```\n");
        if shown < total {
            notes.push(format!(
                "test file {tf} truncated: lines 1-{shown} of {total} shown"
            ));
        }
        *remaining = remaining.saturating_sub(sec.len());
        out.push_str(&sec);
    }
    out
}

/// The conventions `inst`'s question was written against (its `preamble`), sent once in the
/// system prompt; a preamble this flux does not have is noted and its kind's current one sent.
pub fn preamble(
    inst: &Instance,
    notes: &mut Vec<String>,
) -> Option<&'static flux_instance::preamble::Preamble> {
    let id = inst.preamble.as_deref()?;
    if let Some(p) = flux_instance::preamble::by_id(id) {
        return Some(p);
    }
    let kind: flux_extract::QuestionKind =
        serde_json::from_value(serde_json::Value::String(inst.kind.clone())).ok()?;
    let p = flux_instance::preamble::for_kind(kind);
    notes.push(format!(
        "the question was written against preamble {id}, which this flux does not have; {} is sent",
        p.id()
    ));
    Some(p)
}

/// Build the prompt of one instance.
pub fn build(inst: &Instance, cfg: &PromptConfig) -> Prompt {
    let mut notes = Vec::new();
    let java = crate::javasrc::is_java(inst);
    let mut system = cfg
        .system
        .unwrap_or(if java { SYSTEM_JAVA } else { SYSTEM })
        .to_string();
    if let Some(p) = preamble(inst, &mut notes) {
        system.push_str("\n\n");
        system.push_str(p.text);
    }
    let template =
        serde_json::to_string_pretty(&inst.template).unwrap_or_else(|_| inst.template.to_string());
    let mut head = format!(
        "Instance: {}  (kind: {})\n\n## Question\n{}\n\n## Answer format\nReply with one JSON object of exactly this shape; the leaves of the template name the type of each value (\"int\", \"str\", \"float\", \"bool\", \"any\"), and a list shows the shape of its elements.\n```json\n{}\n```\n",
        inst.key(),
        inst.kind,
        inst.question.trim(),
        template
    );
    if cfg.reasoning {
        head.push_str("Also include a top-level \"reasoning\" string field explaining, step by step, how you derived the answer.\n");
    } else {
        head.push_str("Output only the JSON object.\n");
    }
    // Budget in characters, keeping room for the reply.
    let budget = cfg
        .max_context_tokens
        .saturating_mul(CHARS_PER_TOKEN)
        .saturating_sub(system.len() + 8_000);
    let mut remaining = budget.saturating_sub(head.len());
    let mut body = String::new();
    let mut test_source = String::new();
    let mut context = String::new();

    if !inst.test_files.is_empty() {
        let sec = instance_test_files(inst, &mut remaining, &mut notes);
        body.push_str(
            "\n## Test file(s)\nThe test(s) below drive the code the question is about.\n",
        );
        body.push_str(&sec);
        test_source.push_str(&sec);
    }

    let pkg = inst.package.as_deref().unwrap_or("the package");
    let mut files = Vec::new();
    let mut targets = Vec::new();
    // The repository's own tests the question names, from the source tree.
    let tests = crate::testsrc::named_tests(inst);
    match cfg.source {
        Located::Dir(root) if (java || !tests.is_empty()) && cfg.mode != Mode::Agent => {
            let share = remaining.saturating_sub(500) / 2;
            let c = if java {
                crate::javasrc::choose_tests(inst, root, share)
            } else {
                crate::testsrc::choose(inst, &tests, root, share)
            };
            if !c.text.is_empty() {
                let sec = format!(
                    "\n## Test code ({pkg}'s test suite)\nThe test(s) the question names, with {}, with the files' own line numbers (`⋮` marks lines not shown).\n{}",
                    if java {
                        "their class's fields and set-up methods and the helpers they call"
                    } else {
                        "the fixtures and helpers they use from their file and its conftest.py files"
                    },
                    c.text
                );
                remaining = remaining.saturating_sub(sec.len());
                body.push_str(&sec);
                test_source.push_str(&c.text);
            }
            notes.extend(c.notes);
            files.extend(c.files);
        }
        Located::Dir(_) => {}
        Located::Off => notes.extend(crate::testsrc::unshown_note(
            &tests,
            "no repository source is given for this run",
        )),
        Located::Missing { path, .. } => notes.extend(crate::testsrc::unshown_note(
            &tests,
            &format!("the source tree {} is missing", path.display()),
        )),
    }
    match (cfg.source, cfg.mode) {
        (Located::Off, _) => notes.push(format!(
            "no repository source is given for this run (package {pkg})"
        )),
        (Located::Missing { path, .. }, _) => notes.push(format!(
            "repository source not available (package {pkg}; {} is missing)",
            path.display()
        )),
        (Located::Dir(_), Mode::Agent) => {
            let mut what: Vec<String> = tests
                .iter()
                .map(|t| format!("the test `{}`", t.id))
                .collect();
            what.extend(inst.tracing_files.iter().cloned());
            what.extend(inst.extractor_function.iter().map(|f| format!("`{f}`")));
            what.extend(
                inst.tracing_functions
                    .iter()
                    .filter(|f| inst.extractor_function.as_deref() != Some(f.as_str()))
                    .map(|f| format!("`{f}`")),
            );
            body.push_str(&format!(
                "\n## Repository source\nThe source of {pkg} is not in this prompt: read it with the tools `list_files`, `read_file` and `search` (paths relative to the source root; the tools' output counts against a budget).{}\n",
                if what.is_empty() {
                    String::new()
                } else {
                    format!(" The question is about {}.", what.join(", "))
                }
            ));
        }
        (Located::Dir(root), _) => {
            let c = if java {
                crate::javasrc::choose_source(inst, root, remaining.saturating_sub(500))
            } else {
                crate::context::choose(inst, root, remaining.saturating_sub(500))
            };
            files.extend(c.files);
            if !c.text.is_empty() {
                body.push_str(&format!(
                    "\n## Repository source ({pkg})\nThe code the question is about and what it calls, with the files' own line numbers (`⋮` marks lines not shown).\n"
                ));
                body.push_str(&c.text);
                context = c.text;
            }
            notes.extend(c.notes);
            targets = c.targets;
        }
    }
    if cfg.mode == Mode::ContextTools && cfg.source.dir().is_some() {
        body.push_str("\nYou may call the read-only tools list_files, read_file and search to read more of the package source before answering; then reply with the JSON object.\n");
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
        system,
        user,
        files,
        targets,
        notes,
        test_source,
        context,
    }
}
