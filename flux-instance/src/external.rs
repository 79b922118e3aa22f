//! Instances whose gold answer comes from an external parser: SWE-Flux's `parser.py`, run on
//! flux's trace written as SWE-Flux's log (`flux import swe-flux`, crate `flux-interop`).
//!
//! Such an instance names the extractor [`SWE_FLUX_PARSER`] and keeps everything the parser
//! needs in its parameters:
//!
//! ```toml
//! [extractor]
//! name = "swe-flux-parser"
//! params = { parser = "parser.py", root = "/testbed", qa_dir = "flask_qa/app_x/files",
//!            log = { TRACE_ON = "1", TRACE_FILE = "src/flask/app.py", TRACE_FUNC = "f" },
//!            origin = "out/flask/run_…/instances/app_x" }
//! ```
//!
//! - `parser`: the parser file, in the instance directory; third-party code: it is only ever
//!   run inside the instance's container (never on the host), as
//!   `<interpreter> <qa_dir>/parser.py --trace-log LOG --out OUT` from `root`, with the
//!   instance's files laid out at `root/qa_dir/` as SWE-Flux's harness lays them out (parsers
//!   find the source through their own path);
//! - `log`: SWE-Flux's tracer variables (from `eval.sh`), which configure the log the parser
//!   reads (`flux_interop::sweflux_log::LogConfig`);
//! - `pytest_output`: the option through which the parser reads the test's pytest output, when
//!   it does (`--pytest-log`: their `eval.sh` tees pytest's output to a file and passes it);
//!   flux gives it the traced run's stdout followed by its stderr;
//! - `origin`: where the instance came from.
//!
//! The template is the instance's own (there is no built-in answer shape to check it against).
//! SWE-Flux's stored answer, when the instance was imported from their store, is kept in
//! [`REFERENCE_DIR`]`/oracle.json` (with their `eval.sh`): `flux harvest --check` compares
//! fresh answers with it under their scoring rules. That directory is gold: it is never copied
//! into a run.
use crate::{invalid, InstanceError, InstanceSpec};
use serde_json::{Map, Value};
use std::path::Path;

/// The extractor name of instances answered by SWE-Flux's `parser.py`.
pub const SWE_FLUX_PARSER: &str = "swe-flux-parser";

/// The directory of an instance that holds what came from SWE-Flux's store unchanged
/// (`oracle.json` with their answer, `eval.sh`).
pub const REFERENCE_DIR: &str = "swe-flux";

/// Beside their TRACE_* variables in `log`: the interpreter their run used (`3.9`), which
/// decides how their tracer named frames (flux-interop's `sweflux_log::THEIR_PYTHON`).
pub const THEIR_PYTHON: &str = "SWE_FLUX_PYTHON";

/// The parameters of a [`SWE_FLUX_PARSER`] instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalParser {
    /// The parser file, relative to the instance directory.
    pub parser: String,
    /// The directory the parser and the test run from (`/testbed`).
    pub root: String,
    /// Where SWE-Flux's layout puts the instance's files under `root` (`<repo>_qa/<id>/files`).
    pub qa_dir: String,
    /// SWE-Flux's tracer variables (sorted by name: each is set once).
    pub log: Vec<(String, String)>,
    /// The parser's option that takes the test's pytest output (`--pytest-log`), if any.
    pub pytest_output: Option<String>,
    pub origin: String,
}

impl ExternalParser {
    /// Read and check the parameters (errors say which parameter and why).
    pub fn from_params(p: &Map<String, Value>) -> Result<ExternalParser, String> {
        let known = ["parser", "root", "qa_dir", "log", "pytest_output", "origin"];
        if let Some(k) = p.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(format!(
                "unknown parameter `{k}` of {SWE_FLUX_PARSER} (expected {})",
                known.join(", ")
            ));
        }
        let s = |k: &str, required: bool| -> Result<String, String> {
            match p.get(k) {
                Some(Value::String(v)) if !v.trim().is_empty() => Ok(v.clone()),
                None if !required => Ok(String::new()),
                None => Err(format!("parameter `{k}` is required")),
                Some(other) => Err(format!(
                    "parameter `{k}` must be a non-empty string, not {other}"
                )),
            }
        };
        let parser = s("parser", true)?;
        let qa_dir = s("qa_dir", true)?;
        let root = match s("root", false)? {
            r if r.is_empty() => "/testbed".to_string(),
            r => r,
        };
        if !root.starts_with('/') {
            return Err(format!("parameter `root` must be absolute, not {root:?}"));
        }
        let rel_ok = |v: &str| {
            !v.starts_with('/')
                && !Path::new(v)
                    .components()
                    .any(|c| c == std::path::Component::ParentDir)
        };
        for (k, v) in [("parser", &parser), ("qa_dir", &qa_dir)] {
            if !rel_ok(v) {
                return Err(format!(
                    "parameter `{k}` must be a relative path without `..`, not {v:?}"
                ));
            }
        }
        let log = match p.get("log") {
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) if k.starts_with("TRACE_") || k == THEIR_PYTHON => {
                        Ok((k.clone(), s.clone()))
                    }
                    _ => Err(format!(
                        "parameter `log.{k}` must be a TRACE_* variable (or {THEIR_PYTHON}) with a \
                         string value"
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => return Err("parameter `log` (SWE-Flux's TRACE_* variables) is required".into()),
            Some(other) => return Err(format!("parameter `log` must be a table, not {other}")),
        };
        let pytest_output = Some(s("pytest_output", false)?).filter(|o| !o.is_empty());
        if let Some(o) = &pytest_output {
            let name_ok = o.len() > 2
                && o.starts_with("--")
                && o[2..]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !name_ok {
                return Err(format!(
                    "parameter `pytest_output` must be a long option (`--pytest-log`), not {o:?}"
                ));
            }
        }
        Ok(ExternalParser {
            parser,
            root,
            qa_dir,
            log,
            pytest_output,
            origin: s("origin", false)?,
        })
    }

    /// The parameters as written in `instance.toml`.
    pub fn to_params(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("parser".into(), self.parser.clone().into());
        m.insert("root".into(), self.root.clone().into());
        m.insert("qa_dir".into(), self.qa_dir.clone().into());
        let log: Map<String, Value> = self
            .log
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        m.insert("log".into(), Value::Object(log));
        if let Some(o) = &self.pytest_output {
            m.insert("pytest_output".into(), o.clone().into());
        }
        if !self.origin.is_empty() {
            m.insert("origin".into(), self.origin.clone().into());
        }
        m
    }
}

/// `load_instance`'s checks of a [`SWE_FLUX_PARSER`] instance.
pub(crate) fn validate(dir: &Path, path: &Path, spec: &InstanceSpec) -> Result<(), InstanceError> {
    let ext = ExternalParser::from_params(&spec.extractor.params)
        .map_err(|e| invalid(path, "extractor.params", e))?;
    if !dir.join(&ext.parser).is_file() {
        return Err(invalid(
            path,
            "extractor.params",
            format!(
                "parameter `parser`: `{}` does not exist in {}",
                ext.parser,
                dir.display()
            ),
        ));
    }
    if spec.tracing.dialect != flux_trace::Dialect::SweFlux || !spec.tracing.tests {
        return Err(invalid(
            path,
            "tracing.dialect",
            "an instance answered by SWE-Flux's parser must be traced with dialect \"swe-flux\" and \
             the test boundaries (its parser reads their log)",
        ));
    }
    Ok(())
}

/// SWE-Flux's stored answer of an instance imported from their store, if it has one.
pub fn read_reference(dir: &Path) -> Result<Option<Value>, InstanceError> {
    let path = dir.join(REFERENCE_DIR).join(crate::ORACLE_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|source| InstanceError::Io {
        path: path.clone(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| invalid(&path, "(document)", format!("not JSON: {e}")))?;
    match v.get("oracle_answer") {
        Some(a) => Ok(Some(a.clone())),
        None => Err(invalid(&path, "oracle_answer", "missing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_are_checked_and_round_trip() {
        let p = json!({"parser": "parser.py", "qa_dir": "flask_qa/x/files",
                       "log": {"TRACE_ON": "1", "TRACE_FILE": "src/a.py"}, "origin": "o"});
        let e = ExternalParser::from_params(p.as_object().unwrap()).unwrap();
        assert_eq!(e.root, "/testbed");
        assert!(e
            .log
            .contains(&("TRACE_FILE".to_string(), "src/a.py".to_string())));
        assert_eq!(ExternalParser::from_params(&e.to_params()).unwrap(), e);
        assert_eq!(e.pytest_output, None);
        let mut with = p.as_object().unwrap().clone();
        with.insert("pytest_output".into(), "--pytest-log".into());
        let e = ExternalParser::from_params(&with).unwrap();
        assert_eq!(e.pytest_output.as_deref(), Some("--pytest-log"));
        assert_eq!(ExternalParser::from_params(&e.to_params()).unwrap(), e);
        for (bad, says) in [
            (
                json!({"parser": "p.py", "qa_dir": "q", "log": {}, "pytest_output": "-x; rm"}),
                "long option",
            ),
            (json!({"qa_dir": "q", "log": {}}), "`parser` is required"),
            (
                json!({"parser": "../p.py", "qa_dir": "q", "log": {}}),
                "without `..`",
            ),
            (
                json!({"parser": "p.py", "qa_dir": "q", "log": {"HOME": "x"}}),
                "log.HOME",
            ),
            (json!({"parser": "p.py", "qa_dir": "q"}), "`log`"),
            (
                json!({"parser": "p.py", "qa_dir": "q", "log": {}, "root": "rel"}),
                "absolute",
            ),
            (
                json!({"parser": "p.py", "qa_dir": "q", "log": {}, "extra": 1}),
                "unknown parameter `extra`",
            ),
        ] {
            let err = ExternalParser::from_params(bad.as_object().unwrap()).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
