//! Export instances into peer benchmarks' layouts (see `benchmark-formats` notes).
//!
//! * SWE-Flux: `<out>/<repo>__<id>/` with `oracle.json` (exactly the four SWE-Flux keys),
//!   `question.json` (the same without `oracle_answer`), `files/testcase.py` (the instance's
//!   first test file; further test files beside it under `files/`, at their relative paths) and
//!   `eval.sh`, which runs the instance's test command in `files/` (arguments naming the first
//!   test file are rewritten to `testcase.py`). flux has no `parser.py`: the gold is harvested by
//!   flux's own tracer, so none is written.
//! * TraceEval: `<out>/<repo>/<id>/callgraph.json` (`{caller: [callees]}`) from the instance's
//!   harvested `callgraph.json`, else from a `call_graph` oracle answer; plus `<out>/splits.json`
//!   = `{"python": ["<repo>/<id>", …]}` (program directories relative to `<out>`).
//!
//! One instance's trouble never stops the export (ripgrep's rule): instances without
//! `oracle.json` are skipped with a note, malformed ones are reported as errors naming the file
//! and field, and the rest are still exported. The caller decides the exit code from
//! [`ExportReport::errors`].
use crate::{load_instance, question_json, read_call_graph, read_oracle, InstanceError};
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
        let oracle = match read_oracle(dir) {
            Ok(o) => o,
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
                    programs.push(rel.clone());
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
        programs.sort();
        if let Err(e) = write_json(&out.join(SPLITS_FILE), &json!({ "python": programs })) {
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
    let rel = format!("{}__{}", inst.spec.repository, inst.spec.id);
    let dir = out.join(&rel);
    let files = dir.join("files");
    mkdir(&files)?;
    write_json(&dir.join(ORACLE_FILE), &swe_flux_oracle(oracle))?;
    write_json(&dir.join("question.json"), &question_json(oracle))?;
    for (i, f) in inst.spec.test.files.iter().enumerate() {
        let dest = if i == 0 {
            files.join(SWE_FLUX_TESTCASE)
        } else {
            files.join(f)
        };
        if let Some(p) = dest.parent() {
            mkdir(p)?;
        }
        std::fs::copy(inst.dir.join(f), &dest).map_err(|source| InstanceError::Io {
            path: inst.dir.join(f),
            source,
        })?;
    }
    let eval = dir.join("eval.sh");
    write_text(&eval, &eval_sh(inst))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&eval, std::fs::Permissions::from_mode(0o755));
    }
    Ok(rel)
}

/// `eval.sh`: run the test command from `files/`, with the first test file renamed.
pub fn eval_sh(inst: &Instance) -> String {
    let first = inst
        .spec
        .test
        .files
        .first()
        .map(String::as_str)
        .unwrap_or("");
    let argv: Vec<String> = inst
        .spec
        .test
        .command
        .iter()
        .map(|a| {
            let renamed = if !first.is_empty() && a == first {
                SWE_FLUX_TESTCASE.to_string()
            } else if let Some(rest) = a.strip_prefix(first).filter(|r| r.starts_with("::")) {
                format!("{SWE_FLUX_TESTCASE}{rest}")
            } else {
                a.clone()
            };
            shell_quote(&renamed)
        })
        .collect();
    format!(
        "#!/bin/sh\n\
         # flux instance {repo}/{id} ({kind}), exported in SWE-Flux layout.\n\
         # Runs in image {image} with {interp}; the test is expected to {expect}.\n\
         set -e\n\
         cd \"$(dirname \"$0\")/files\"\n\
         exec {cmd}\n",
        repo = inst.spec.repository,
        id = inst.spec.id,
        kind = inst.spec.kind,
        image = inst.spec.image,
        interp = inst.spec.interpreter,
        expect = match inst.spec.test.expect {
            crate::Expect::Pass => "pass",
            crate::Expect::Fail => "fail",
        },
        cmd = argv.join(" "),
    )
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
