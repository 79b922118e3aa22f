//! The bridge to the Python mutator (`py/flux_perturb.py`, embedded in the binary): one JSON
//! request on its stdin, one JSON reply on its stdout. The module docs of that file define the
//! sites, the operators, the assertion policy and the rendering.
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The mutator's source, shipped inside the binary.
pub const MUTATOR_PY: &str = include_str!("../py/flux_perturb.py");

/// The interpreter that runs the mutator: `$FLUX_PYTHON`, else `python3` on the `PATH`.
pub fn default_python() -> PathBuf {
    std::env::var_os("FLUX_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// What to do with assertions of a test function whose inputs changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Assertions {
    /// Stale exact-value assertions keep only what they compute (`assert f(x) == 3` becomes
    /// `(f(x))`): the old value, now wrong, never stays in the test a model reads.
    Relax,
    /// Every assertion is kept; a variant whose test now fails is discarded.
    Keep,
}

impl Assertions {
    pub fn as_str(self) -> &'static str {
        match self {
            Assertions::Relax => "relax",
            Assertions::Keep => "keep",
        }
    }
}

/// A test file, relative to the instance directory, and its text.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TestFile {
    pub path: String,
    pub source: String,
}

/// One applied mutation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Mutation {
    pub file: String,
    pub line: u32,
    /// 1-based character column.
    pub col: u32,
    /// The test function (or `<module> NAME` for a module-level constant).
    pub function: String,
    pub op: String,
    pub old: String,
    pub new: String,
}

impl Mutation {
    /// `file:line:col function op: old -> new` (one line, values cut at 120 characters).
    pub fn describe(&self) -> String {
        let cut = |s: &str| {
            let one = s.replace('\n', "\\n");
            if one.chars().count() > 120 {
                format!("{}...", one.chars().take(117).collect::<String>())
            } else {
                one
            }
        };
        format!(
            "{}:{}:{} {} {}: {} -> {}",
            self.file,
            self.line,
            self.col,
            self.function,
            self.op,
            cut(&self.old),
            cut(&self.new)
        )
    }
}

/// An assertion reduced to what it computes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Relaxed {
    pub file: String,
    pub line: u32,
    pub function: String,
    /// The assertion's first line as it was.
    pub was: String,
}

impl Relaxed {
    pub fn describe(&self) -> String {
        format!("{}:{} {}", self.file, self.line, self.function)
    }
}

/// A proposed edit that could not be applied, and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Rejected {
    pub edit: Value,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MutatedFile {
    pub path: String,
    pub source: String,
    pub changed: bool,
}

/// The mutator's answer for one variant.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Mutated {
    pub files: Vec<MutatedFile>,
    pub mutations: Vec<Mutation>,
    pub relaxed: Vec<Relaxed>,
    #[serde(default)]
    pub rejected: Vec<Rejected>,
    /// `splice` (only the changed nodes re-rendered) or `unparse` (the whole tree).
    pub render: String,
}

impl Mutated {
    /// True when some file's text changed.
    pub fn changed(&self) -> bool {
        self.files.iter().any(|f| f.changed)
    }
}

/// A literal replacement proposed from outside (e.g. by a model).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Edit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub line: u32,
    #[serde(default)]
    pub col: u32,
    pub old: String,
    pub new: String,
}

/// A mutation site as listed by the mutator.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Site {
    pub id: usize,
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub end_line: u32,
    pub function: String,
    pub kind: String,
    pub text: String,
    pub ops: Vec<String>,
}

/// The mutator run by one interpreter.
#[derive(Clone, Debug)]
pub struct Mutator {
    pub python: PathBuf,
}

impl Default for Mutator {
    fn default() -> Self {
        Mutator {
            python: default_python(),
        }
    }
}

impl Mutator {
    pub fn new(python: impl Into<PathBuf>) -> Self {
        Mutator {
            python: python.into(),
        }
    }

    /// Send one request; the reply, or an error naming the interpreter and what it said.
    pub fn request(&self, req: &Value) -> Result<Value> {
        let mut child = Command::new(&self.python)
            .args(["-I", "-c", MUTATOR_PY])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!(
                    "running the mutator with `{}` (set FLUX_PYTHON or --python to a Python 3.9+)",
                    self.python.display()
                )
            })?;
        let body = serde_json::to_vec(req)?;
        {
            let mut stdin = child.stdin.take().context("mutator stdin")?;
            stdin
                .write_all(&body)
                .context("writing the mutator's request")?;
        }
        let out = child
            .wait_with_output()
            .context("waiting for the mutator")?;
        if !out.status.success() {
            bail!(
                "the mutator (`{}`) failed ({}): {}",
                self.python.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let v: Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "the mutator's reply is not JSON: {}",
                String::from_utf8_lossy(&out.stdout)
                    .chars()
                    .take(300)
                    .collect::<String>()
            )
        })?;
        if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            bail!("the mutator refused: {e}");
        }
        Ok(v)
    }

    /// `max_mutations` (at least 1) seeded mutations at distinct input sites.
    pub fn mutate(
        &self,
        files: &[TestFile],
        question: &str,
        seed: u64,
        max_mutations: usize,
        assertions: Assertions,
    ) -> Result<Mutated> {
        let v = self.request(&json!({
            "op": "mutate", "files": files, "question": question, "seed": seed,
            "max_mutations": max_mutations.max(1), "assertions": assertions.as_str(),
        }))?;
        serde_json::from_value(v).context("the mutator's reply")
    }

    /// Apply literal replacements (validated: each must hit an input site and be a literal).
    pub fn apply(
        &self,
        files: &[TestFile],
        question: &str,
        edits: &[Edit],
        assertions: Assertions,
    ) -> Result<Mutated> {
        let v = self.request(&json!({
            "op": "apply", "files": files, "question": question, "edits": edits,
            "assertions": assertions.as_str(),
        }))?;
        serde_json::from_value(v).context("the mutator's reply")
    }

    /// Every input site and the operators that apply to it; also the test function names.
    pub fn sites(&self, files: &[TestFile], question: &str) -> Result<(Vec<Site>, Vec<String>)> {
        let v = self.request(&json!({"op": "sites", "files": files, "question": question}))?;
        let sites = serde_json::from_value(v["sites"].clone()).context("the mutator's sites")?;
        let tests = serde_json::from_value(v["tests"].clone()).context("the mutator's tests")?;
        Ok((sites, tests))
    }
}

/// Read an instance's test files (paths relative to `dir`).
pub fn read_test_files(dir: &Path, files: &[String]) -> Result<Vec<TestFile>> {
    files
        .iter()
        .filter(|f| f.ends_with(".py"))
        .map(|f| {
            let p = dir.join(f);
            Ok(TestFile {
                path: f.clone(),
                source: std::fs::read_to_string(&p)
                    .with_context(|| format!("reading {}", p.display()))?,
            })
        })
        .collect()
}
