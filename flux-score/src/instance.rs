//! Reading benchmark instances from disk.
//!
//! This crate deliberately does not depend on `flux-instance`: it reads `instance.toml` and
//! `oracle.json` directly and tolerates missing optional fields, so that the scorer keeps
//! working on any instance store laid out as `<root>/<repo>/<id>/`.

use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::ScoreError;

/// What the scorer and the evaluator need from one instance directory.
#[derive(Debug, Clone)]
pub struct Instance {
    /// `id` from instance.toml (defaults to the directory name).
    pub id: String,
    /// `repository` from instance.toml (defaults to the parent directory name).
    pub repository: String,
    /// Question kind, e.g. `S4_DataFlow` (instance.toml `kind`, else oracle `question_kind`).
    pub kind: String,
    pub question: String,
    /// The shared conventions the question was written against (`preamble`, `family@version`:
    /// flux-instance's `preamble` module), if any: sent once, in the system prompt.
    pub preamble: Option<String>,
    /// The answer template (JSON), from oracle.json `template_answer` or instance.toml `template`.
    pub template: Value,
    /// JSON-pointer patterns whose lists compare as multisets.
    pub order_insensitive: Vec<String>,
    /// `package`, e.g. `sympy==1.13.3`.
    pub package: Option<String>,
    /// `image`, e.g. `flux/sympy:1.13.3-py3.11` (names the command that builds its source).
    pub image: Option<String>,
    /// Test files, relative to the instance directory (`[test] files`).
    pub test_files: Vec<String>,
    /// Test files inside the image (`[test] image_files`, e.g. `/testbed/tests/test_x.py`): the
    /// repository's own tests, which live in its source tree rather than the instance directory.
    pub test_image_files: Vec<String>,
    /// The command that runs the tests (`[test] command`); its pytest node ids name the tests.
    pub test_command: Vec<String>,
    /// Source files named by the tracing config (`[tracing] files`).
    pub tracing_files: Vec<String>,
    /// Target functions named by the tracing config (`[tracing] functions`), if any.
    pub tracing_functions: Vec<String>,
    /// The extractor's `function` parameter (`[extractor] params.function`), if any.
    pub extractor_function: Option<String>,
    /// The extractor's `file` parameter, if any: which targeted file holds `function`.
    pub extractor_file: Option<String>,
    /// The extractor's name and all its parameters (`[extractor]`), as JSON.
    pub extractor_name: Option<String>,
    pub extractor_params: Value,
    /// The split it belongs to: `[generated] split` (`train` or `test`); `variants` for a
    /// perturbation variant (`[variant]`); `test` otherwise (the starter set is all test).
    pub split: String,
    /// The set it was generated for (`[generated] set`), if any.
    pub set: Option<String>,
    /// When its repository version was released (`[generated.release] date`, ISO 8601), if
    /// the set dates its releases: what `--released-after` reads.
    pub released: Option<String>,
    /// The gold answer; `None` when the instance is not harvested.
    pub oracle: Option<Value>,
    /// The `oracle.json` text as read (the set digest hashes it, [`crate::results::digest`]);
    /// `None` when the instance is not harvested.
    pub oracle_json: Option<String>,
    /// The instance directory.
    pub dir: PathBuf,
    /// `<repo-dir>/<id-dir>`: where the answer lives under an answers directory.
    pub rel: PathBuf,
}

impl Instance {
    /// Display key `repo/id`.
    pub fn key(&self) -> String {
        self.rel.to_string_lossy().into_owned()
    }

    /// Package name and version from `package` (`name==version`).
    pub fn package_name_version(&self) -> Option<(String, String)> {
        let p = self.package.as_deref()?;
        let (n, v) = p.split_once("==")?;
        Some((n.trim().to_string(), v.trim().to_string()))
    }

    /// True when the gold is a TraceEval-style call graph `{"call_graph": {caller: [callees]}}`.
    pub fn is_call_graph(&self) -> bool {
        self.oracle
            .as_ref()
            .is_some_and(crate::callgraph::is_call_graph)
    }
}

/// An instance directory that could not be read.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct InvalidInstance {
    pub path: String,
    pub error: String,
}

/// What [`discover_all`] found.
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    pub instances: Vec<Instance>,
    /// Directories with an unreadable `instance.toml` or `oracle.json`: reported, not fatal.
    pub invalid: Vec<InvalidInstance>,
}

/// Find every instance under the given roots (directories holding `instance.toml`, searched
/// down to four levels), sorted by `rel`. A root may be the store, one repository, one
/// instance directory, or an exported dataset (a `.jsonl` file of rows or its directory,
/// [`crate::dataset`]). A root that is neither is an error; an unreadable instance is listed in
/// [`Discovered::invalid`] and the others are still returned.
pub fn discover_all(roots: &[PathBuf]) -> Result<Discovered, ScoreError> {
    let mut dirs = Vec::new();
    let mut out = Discovered::default();
    for root in roots {
        if crate::dataset::is_dataset(root) {
            let rows = crate::dataset::read(root)?;
            out.instances.extend(rows.instances);
            out.invalid.extend(rows.invalid);
            continue;
        }
        if !root.is_dir() {
            return Err(ScoreError::NotADirectory(root.clone()));
        }
        walk(root, 0, &mut dirs);
    }
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        match load(&d) {
            Ok(i) => out.instances.push(i),
            Err(e) => out.invalid.push(InvalidInstance {
                path: d.display().to_string(),
                error: e.to_string(),
            }),
        }
    }
    out.instances.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// [`discover_all`] without the list of invalid instances.
pub fn discover(roots: &[PathBuf]) -> Result<Vec<Instance>, ScoreError> {
    Ok(discover_all(roots)?.instances)
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if dir.join("instance.toml").is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    if depth >= 4 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subs: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    subs.sort();
    for s in subs {
        walk(&s, depth + 1, out);
    }
}

fn str_list(v: Option<&toml::Value>) -> Vec<String> {
    match v {
        Some(toml::Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        Some(toml::Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn toml_to_json(v: &toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Load one instance directory.
pub fn load(dir: &Path) -> Result<Instance, ScoreError> {
    let toml_path = dir.join("instance.toml");
    let text =
        std::fs::read_to_string(&toml_path).map_err(|e| ScoreError::Io(toml_path.clone(), e))?;
    let t: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ScoreError::Instance(toml_path.clone(), e.to_string()))?;
    let get_str = |k: &str| t.get(k).and_then(|v| v.as_str()).map(String::from);

    let oracle_path = dir.join("oracle.json");
    let oracle_json = if oracle_path.is_file() {
        Some(
            std::fs::read_to_string(&oracle_path)
                .map_err(|e| ScoreError::Io(oracle_path.clone(), e))?,
        )
    } else {
        None
    };
    let oracle_doc: Option<Value> = match &oracle_json {
        Some(s) => Some(
            serde_json::from_str(s)
                .map_err(|e| ScoreError::Instance(oracle_path.clone(), e.to_string()))?,
        ),
        None => None,
    };
    let oracle = oracle_doc
        .as_ref()
        .and_then(|d| d.get("oracle_answer"))
        .cloned();

    let dir_name = |p: Option<&Path>| {
        p.and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let id_dir = dir_name(Some(dir));
    let repo_dir = dir_name(dir.parent());

    let template = match t.get("template") {
        Some(toml::Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        Some(other) => toml_to_json(other),
        None => oracle_doc
            .as_ref()
            .and_then(|d| d.get("template_answer"))
            .cloned()
            .unwrap_or(Value::Null),
    };
    let template = if template.is_null() {
        oracle_doc
            .as_ref()
            .and_then(|d| d.get("template_answer"))
            .cloned()
            .unwrap_or(Value::Null)
    } else {
        template
    };

    let kind = get_str("kind")
        .or_else(|| {
            oracle_doc
                .as_ref()
                .and_then(|d| d.get("question_kind"))
                .and_then(|v| v.as_str())
                .map(String::from)
        })
        .unwrap_or_else(|| "unknown".to_string());
    let question = get_str("question")
        .or_else(|| {
            oracle_doc
                .as_ref()
                .and_then(|d| d.get("question"))
                .and_then(|v| v.as_str())
                .map(String::from)
        })
        .unwrap_or_default();
    let test = t.get("test").and_then(|v| v.as_table());
    let extractor_param = |k: &str| {
        t.get("extractor")
            .and_then(|e| e.get("params"))
            .and_then(|p| p.get(k))
            .map(toml_to_json)
    };
    let tracing = t.get("tracing").and_then(|v| v.as_table());

    // Order-insensitive paths: instance.toml's, plus the ones recorded in the oracle's provenance.
    let mut order_insensitive = str_list(t.get("order_insensitive"));
    let prov = oracle_doc
        .as_ref()
        .and_then(|d| d.pointer("/provenance/order_insensitive"))
        .and_then(|v| v.as_array());
    for p in prov.into_iter().flatten().filter_map(|x| x.as_str()) {
        if !order_insensitive.iter().any(|o| o == p) {
            order_insensitive.push(p.to_string());
        }
    }

    let generated = t.get("generated").and_then(|v| v.as_table());
    let gen_str = |k: &str| {
        generated
            .and_then(|g| g.get(k))
            .and_then(|v| v.as_str())
            .map(String::from)
    };
    let split = gen_str("split").unwrap_or_else(|| {
        if t.contains_key("variant") {
            "variants".into()
        } else {
            "test".into()
        }
    });

    let released = generated
        .and_then(|g| g.get("release"))
        .and_then(|r| r.get("date"))
        .and_then(|v| v.as_str())
        .map(String::from);
    Ok(Instance {
        split,
        set: gen_str("set"),
        released,
        id: get_str("id").unwrap_or_else(|| id_dir.clone()),
        repository: get_str("repository").unwrap_or_else(|| repo_dir.clone()),
        kind,
        question,
        preamble: get_str("preamble"),
        template,
        order_insensitive,
        package: get_str("package"),
        image: get_str("image"),
        test_files: str_list(test.and_then(|x| x.get("files"))),
        test_image_files: str_list(test.and_then(|x| x.get("image_files"))),
        test_command: str_list(test.and_then(|x| x.get("command"))),
        tracing_files: str_list(tracing.and_then(|x| x.get("files"))),
        tracing_functions: str_list(tracing.and_then(|x| x.get("functions"))),
        extractor_function: t
            .get("extractor")
            .and_then(|e| e.get("params"))
            .and_then(|p| p.get("function"))
            .and_then(|f| f.as_str())
            .map(String::from),
        extractor_file: extractor_param("file").and_then(|f| f.as_str().map(String::from)),
        extractor_name: t
            .get("extractor")
            .and_then(|e| e.get("name"))
            .and_then(|n| n.as_str())
            .map(String::from),
        extractor_params: t
            .get("extractor")
            .and_then(|e| e.get("params"))
            .map(toml_to_json)
            .unwrap_or(Value::Null),
        oracle,
        oracle_json,
        dir: dir.to_path_buf(),
        rel: PathBuf::from(repo_dir).join(id_dir),
    })
}
