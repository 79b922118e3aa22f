//! Export instances into peer benchmarks' layouts (see `benchmark-formats` notes).
//!
//! * SWE-Flux: `<out>/<repo>_qa/<id>/`, their harness's layout (`<repo>_qa/<id>/files/…`
//!   under the directory their `eval.sh` runs from, here `<out>`), with
//!   - `files/testcase.py` (the instance's first test file; further test files beside it under
//!     `files/`, at their relative paths);
//!   - `eval.sh` in their skeleton: `TEST_ID`, their tracer's variables for the instance's
//!     targets (`TRACE_FILE`, `TRACE_FUNC`, every event, every line), and the test command run
//!     from `<out>` with the test file named by its new path (`<repo>_qa/<id>/files/testcase.py`);
//!   - `oracle.json` (exactly the four SWE-Flux keys) and `question.json` (without
//!     `oracle_answer`), where the question's mentions of the test file and the answer's test
//!     ids (`test_x.py::test_a`) follow the rename (`<repo>_qa/<id>/files/testcase.py::test_a`),
//!     as pytest names the tests when `eval.sh` runs them;
//!   - `flux/`: the instance as flux has it (`instance.toml`, the harvested `oracle.json` with
//!     its provenance, `callgraph.json`), so that `flux import swe-flux` gives it back
//!     unchanged ([`FLUX_DIR`]).
//!
//!   flux has no `parser.py` of its own: the gold is harvested by flux's tracer and extractor,
//!   and `eval.sh` runs no parser. An instance imported from SWE-Flux (answered by their parser,
//!   `crate::external`) is exported as it came: its parser, their `eval.sh`, and flux's
//!   harvested answer.
//! * TraceEval: `<out>/<repo>/<id>/callgraph.json` (`{caller: [callees]}`) from the instance's
//!   harvested `callgraph.json`, else from a `call_graph` oracle answer; plus `<out>/splits.json`
//!   = `{"python": ["<repo>/<id>", …], "java": […]}` (program directories relative to `<out>`,
//!   by the language of the instance: [`language`]).
//!
//! One instance's trouble never stops the export (ripgrep's rule): instances without
//! `oracle.json` are skipped with a note, malformed ones are reported as errors naming the file
//! and field, and the rest are still exported. The caller decides the exit code from
//! [`ExportReport::errors`].
use crate::{load_instance, question_json, read_call_graph, InstanceError};
use crate::{Instance, Oracle, CALL_GRAPH_FILE, ORACLE_FILE};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A peer benchmark layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    SweFlux,
    TraceEval,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "swe-flux" | "sweflux" | "swe_flux" => Ok(ExportFormat::SweFlux),
            "traceeval" | "trace-eval" => Ok(ExportFormat::TraceEval),
            other => Err(format!(
                "unknown export format {other:?} (swe-flux, traceeval)"
            )),
        }
    }
}

impl std::fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExportFormat::SweFlux => "swe-flux",
            ExportFormat::TraceEval => "traceeval",
        })
    }
}

/// An instance that was not exported, and why (not an error: e.g. not harvested yet).
#[derive(Debug)]
pub struct Skipped {
    pub dir: PathBuf,
    pub reason: String,
}

/// What [`export`] did.
#[derive(Debug, Default)]
pub struct ExportReport {
    /// Directories written, relative to the output directory (`sympy__<id>`, `sympy/<id>`).
    pub exported: Vec<String>,
    pub skipped: Vec<Skipped>,
    /// Malformed instances (and write failures); each names its file.
    pub errors: Vec<InstanceError>,
}

/// The SWE-Flux name of the first test file in `files/`.
pub const SWE_FLUX_TESTCASE: &str = "testcase.py";
/// The directory of an exported instance that holds flux's own files (round trip).
pub const FLUX_DIR: &str = "flux";
/// TraceEval's splits file in the output directory.
pub const SPLITS_FILE: &str = "splits.json";

/// Export the instances in `dirs` (instance directories, e.g. from [`crate::discover`]) to
/// `out` in `format`.
pub fn export(format: ExportFormat, dirs: &[PathBuf], out: &Path) -> ExportReport {
    let mut report = ExportReport::default();
    if let Err(source) = std::fs::create_dir_all(out) {
        report.errors.push(InstanceError::Io {
            path: out.to_path_buf(),
            source,
        });
        return report;
    }
    let mut programs = Vec::new();
    for dir in dirs {
        let inst = match load_instance(dir) {
            Ok(i) => i,
            Err(e) => {
                report.errors.push(e);
                continue;
            }
        };
        if !dir.join(ORACLE_FILE).is_file() {
            report.skipped.push(Skipped {
                dir: dir.clone(),
                reason: format!("not harvested (no {ORACLE_FILE})"),
            });
            continue;
        }
        // The instance's question, not the one oracle.json was harvested under (re-authoring
        // rewrites instance.toml only); SWE-Flux's layout has no system prompt, so the
        // conventions of the question's preamble go with it.
        let oracle = match inst.read_oracle() {
            Ok(mut o) => {
                o.question = inst.self_contained_question();
                o
            }
            Err(e) => {
                report.errors.push(e);
                continue;
            }
        };
        let result = match format {
            ExportFormat::SweFlux => swe_flux(&inst, &oracle, out).map(Some),
            ExportFormat::TraceEval => trace_eval(&inst, &oracle, out),
        };
        match result {
            Ok(Some(rel)) => {
                if format == ExportFormat::TraceEval {
                    programs.push((language(&inst), rel.clone()));
                }
                report.exported.push(rel);
            }
            Ok(None) => report.skipped.push(Skipped {
                dir: dir.clone(),
                reason: format!(
                    "no call graph ({CALL_GRAPH_FILE} absent, oracle is not a call_graph answer)"
                ),
            }),
            Err(e) => report.errors.push(e),
        }
    }
    if format == ExportFormat::TraceEval {
        // `{lang: [programs]}`, TraceEval's splits: "python" always, each other language
        // when it has a program.
        let mut splits: std::collections::BTreeMap<&str, Vec<String>> =
            std::collections::BTreeMap::from([("python", Vec::new())]);
        for (lang, rel) in programs {
            splits.entry(lang).or_default().push(rel);
        }
        for v in splits.values_mut() {
            v.sort();
        }
        if let Err(e) = write_json(&out.join(SPLITS_FILE), &json!(splits)) {
            report.errors.push(e);
        }
    }
    report
}

/// SWE-Flux's `oracle.json`: exactly `question_kind`, `question`, `template_answer`,
/// `oracle_answer`.
pub fn swe_flux_oracle(oracle: &Oracle) -> Value {
    json!({
        "question_kind": oracle.question_kind,
        "question": oracle.question,
        "template_answer": oracle.template_answer,
        "oracle_answer": oracle.oracle_answer,
    })
}

fn swe_flux(inst: &Instance, oracle: &Oracle, out: &Path) -> Result<String, InstanceError> {
    let rel = format!("{}_qa/{}", inst.spec.repository, inst.spec.id);
    let dir = out.join(&rel);
    let files = dir.join("files");
    mkdir(&files)?;
    let names = Renames::new(inst);
    let theirs = names.oracle(oracle);
    write_json(&dir.join(ORACLE_FILE), &swe_flux_oracle(&theirs))?;
    write_json(&dir.join("question.json"), &question_json(&theirs))?;
    for (i, f) in inst.spec.test.files.iter().enumerate() {
        let dest = if i == 0 {
            files.join(SWE_FLUX_TESTCASE)
        } else {
            files.join(f)
        };
        copy(&inst.dir.join(f), &dest)?;
    }
    let external = inst.external_parser();
    if let Some(ext) = &external {
        copy(&inst.dir.join(&ext.parser), &files.join(&ext.parser))?;
    }
    // flux's own files: what import needs to give the instance back.
    let flux = dir.join(FLUX_DIR);
    mkdir(&flux)?;
    for f in [crate::INSTANCE_FILE, ORACLE_FILE, CALL_GRAPH_FILE] {
        if inst.dir.join(f).is_file() {
            copy(&inst.dir.join(f), &flux.join(f))?;
        }
    }
    let reference = inst.dir.join(crate::external::REFERENCE_DIR);
    for f in ["eval.sh", ORACLE_FILE] {
        if reference.join(f).is_file() {
            let to = flux.join(crate::external::REFERENCE_DIR).join(f);
            copy(&reference.join(f), &to)?;
        }
    }
    let eval = dir.join("eval.sh");
    let their_eval = inst
        .dir
        .join(crate::external::REFERENCE_DIR)
        .join("eval.sh");
    if external.is_some() && their_eval.is_file() {
        copy(&their_eval, &eval)?;
    } else {
        write_text(&eval, &eval_sh(inst))?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&eval, std::fs::Permissions::from_mode(0o755));
    }
    Ok(rel)
}

/// Where an instance's test files go in SWE-Flux's layout, and the renames that follow: the
/// first test file becomes `<repo>_qa/<id>/files/testcase.py`, the others
/// `<repo>_qa/<id>/files/<their path>` (paths as pytest names them from the layout's root).
pub struct Renames {
    pairs: Vec<(String, String)>,
}

impl Renames {
    pub fn new(inst: &Instance) -> Renames {
        let qa = format!("{}_qa/{}/files", inst.spec.repository, inst.spec.id);
        let pairs = inst
            .spec
            .test
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let to = if i == 0 {
                    format!("{qa}/{SWE_FLUX_TESTCASE}")
                } else {
                    format!("{qa}/{f}")
                };
                (f.clone(), to)
            })
            .collect();
        Renames { pairs }
    }

    /// A command argument or test id: `test_x.py` or `test_x.py::sel` renamed.
    pub fn arg(&self, a: &str) -> String {
        for (from, to) in &self.pairs {
            if a == from {
                return to.clone();
            }
            if let Some(rest) = a
                .strip_prefix(from.as_str())
                .filter(|r| r.starts_with("::"))
            {
                return format!("{to}{rest}");
            }
        }
        a.to_string()
    }

    /// Prose: every mention of a test file (as a whole path: not inside a longer name).
    pub fn text(&self, t: &str) -> String {
        let mut out = t.to_string();
        for (from, to) in &self.pairs {
            out = replace_whole(&out, from, to);
        }
        out
    }

    /// A JSON answer: every string that is a test id (or a test file) renamed.
    pub fn value(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.arg(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.value(x)).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (self.arg(k), self.value(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// The oracle as SWE-Flux's layout names things.
    pub fn oracle(&self, o: &Oracle) -> Oracle {
        let mut o = o.clone();
        o.question = self.text(&o.question);
        o.oracle_answer = self.value(&o.oracle_answer);
        o
    }
}

/// `from` replaced by `to` where it stands as a whole path: the character before it is not
/// part of a file name, nor the one after it (a `.` that ends a sentence is not).
fn replace_whole(text: &str, from: &str, to: &str) -> String {
    if from.is_empty() {
        return text.to_string();
    }
    let part = |c: char| c.is_alphanumeric() || "_-./".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let tail = &rest[i + from.len()..];
        let mut after = tail.chars();
        let whole_before = !rest[..i].chars().next_back().is_some_and(part);
        let whole_after = match after.next() {
            None => true,
            Some('.') => !after.next().is_some_and(|c| c.is_alphanumeric()),
            Some(c) => !part(c),
        };
        out.push_str(&rest[..i]);
        out.push_str(if whole_before && whole_after {
            to
        } else {
            from
        });
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// `eval.sh` in SWE-Flux's skeleton for a flux instance: their tracer's variables for the
/// instance's targets, and its test command run from the layout's root with the test files
/// renamed. It runs no parser: flux harvests the gold.
pub fn eval_sh(inst: &Instance) -> String {
    let names = Renames::new(inst);
    let argv: Vec<String> = inst
        .spec
        .test
        .command
        .iter()
        .map(|a| shell_quote(&names.arg(a)))
        .collect();
    let test_id = names.arg(inst.spec.test.files.first().map_or("", String::as_str));
    let t = &inst.spec.tracing;
    let trace_file = t.files.first().map_or("", String::as_str);
    format!(
        "#!/bin/bash\n\
         # flux instance {repo}/{id} ({kind}), exported in SWE-Flux's layout by `flux export`.\n\
         # Runs in image {image} with {interp}; the test is expected to {expect}. Its gold answer\n\
         # was harvested by flux (flux/oracle.json, with its provenance): there is no parser.py.\n\
         set -euo pipefail\n\
         \n\
         ROOT_DIR=\"${{1:-$(cd \"$(dirname \"$0\")/../..\" && pwd)}}\"\n\
         INSTANCE_ID={id_q}\n\
         TEST_ID={test_id}\n\
         \n\
         cd \"$ROOT_DIR\"\n\
         \n\
         export TRACE_ON=\"1\"\n\
         export TRACE_FILE={trace_file}\n\
         export TRACE_FUNC={trace_func}\n\
         export TRACE_EVENTS=\"line,call,return,exception\"\n\
         export TRACE_LOG_ALL_LINES=\"1\"\n\
         \n\
         {cmd}\n",
        repo = inst.spec.repository,
        id = inst.spec.id,
        id_q = shell_quote(&inst.spec.id),
        kind = inst.spec.kind,
        image = inst.spec.image,
        interp = inst.spec.interpreter,
        expect = match inst.spec.test.expect {
            crate::Expect::Pass => "pass",
            crate::Expect::Fail => "fail",
        },
        test_id = shell_quote(&test_id),
        trace_file = shell_quote(trace_file),
        trace_func = shell_quote(&t.functions.join(",")),
        cmd = argv.join(" "),
    )
}

fn copy(from: &Path, to: &Path) -> Result<(), InstanceError> {
    if let Some(p) = to.parent() {
        mkdir(p)?;
    }
    std::fs::copy(from, to).map_err(|source| InstanceError::Io {
        path: from.to_path_buf(),
        source,
    })?;
    Ok(())
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The language of an instance's program, as TraceEval's splits name it: a JVM target (its
/// tracing names classes) is "java", any other "python".
pub fn language(inst: &Instance) -> &'static str {
    if inst.spec.tracing.classes.is_empty() {
        "python"
    } else {
        "java"
    }
}

fn trace_eval(
    inst: &Instance,
    oracle: &Oracle,
    out: &Path,
) -> Result<Option<String>, InstanceError> {
    let graph = if inst.dir.join(CALL_GRAPH_FILE).is_file() {
        read_call_graph(&inst.dir)?
    } else if let Some(g) = oracle
        .oracle_answer
        .get("call_graph")
        .filter(|_| inst.spec.extractor.name == "call_graph")
    {
        g.clone()
    } else {
        return Ok(None);
    };
    let rel = format!("{}/{}", inst.spec.repository, inst.spec.id);
    let dir = out.join(&rel);
    mkdir(&dir)?;
    write_json(&dir.join(CALL_GRAPH_FILE), &graph)?;
    Ok(Some(rel))
}

fn mkdir(p: &Path) -> Result<(), InstanceError> {
    std::fs::create_dir_all(p).map_err(|source| InstanceError::Io {
        path: p.to_path_buf(),
        source,
    })
}

fn write_text(path: &Path, text: &str) -> Result<(), InstanceError> {
    std::fs::write(path, text).map_err(|source| InstanceError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn write_json(path: &Path, v: &Value) -> Result<(), InstanceError> {
    let mut text = serde_json::to_string_pretty(v).map_err(|e| InstanceError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    text.push('\n');
    write_text(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        for (arg, quoted) in [
            ("pytest", "pytest"),
            ("test_x.py::test_a", "test_x.py::test_a"),
            ("-k", "-k"),
            ("not slow", "'not slow'"),
            ("it's", r"'it'\''s'"),
            ("", "''"),
            ("$HOME", "'$HOME'"),
        ] {
            assert_eq!(shell_quote(arg), quoted, "{arg:?}");
        }
    }

    #[test]
    fn mentions_of_test_files_are_renamed_as_whole_paths() {
        for (text, want) in [
            (
                "Running test_x.py, which lines",
                "Running Q/testcase.py, which lines",
            ),
            ("`test_x.py::test_a` ends.", "`Q/testcase.py::test_a` ends."),
            ("in test_x.py.", "in Q/testcase.py."),
            (
                "mytest_x.py and test_x.pyc and test_x.py.bak",
                "mytest_x.py and test_x.pyc and test_x.py.bak",
            ),
            ("dir/test_x.py", "dir/test_x.py"),
        ] {
            assert_eq!(
                replace_whole(text, "test_x.py", "Q/testcase.py"),
                want,
                "{text}"
            );
        }
    }

    #[test]
    fn format_names() {
        for (name, format) in [
            ("swe-flux", Some(ExportFormat::SweFlux)),
            ("SWE-Flux", Some(ExportFormat::SweFlux)),
            ("traceeval", Some(ExportFormat::TraceEval)),
            ("swe-bench", None),
        ] {
            assert_eq!(name.parse::<ExportFormat>().ok(), format, "{name}");
        }
    }
}
