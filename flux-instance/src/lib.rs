//! The flux benchmark instance format: `instances/<repository>/<id>/instance.toml`, the test
//! file(s) beside it, and the harvested `oracle.json`.
//!
//! Why a crate of its own: the instance is the unit every other part of flux exchanges (the CLI
//! runs it, the harvest writes its oracle, the scorer reads the oracle, exporters turn it into
//! SWE-Flux layout). This crate owns the schema and its validation, answer templates, and the
//! oracle file; it reads and writes nothing but instance files, and runs no process.
//!
//! Two stages, as in ripgrep's argument handling: [`load_instance`] parses and validates
//! everything that can be checked without running the test (ids match directories, the
//! package is pinned, the template parses, the extractor exists, serves the kind, accepts the
//! parameters and answers in the template's shape, the test files exist, and the parameters
//! agree with the target's source where it is on the host: [`check_source`]);
//! [`Instance::build_oracle`] then turns a merged trace and the run's [`RunFacts`] into an
//! [`Oracle`] (extract, validate against the template, screen by answer size), and
//! [`write_oracle`] stores it atomically
//! without silently changing an existing gold answer (a replaced one is kept in the instance's
//! `history/`). The schema is documented in `instances/README.md`.
use flux_extract::{ExtractError, Params, QuestionKind};
use flux_trace::TracingConfig;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

pub mod export;
pub mod external;
mod oracle;
pub mod preamble;
mod source_check;
pub mod template;

pub use oracle::{
    parse_oracle, question_json, read_call_graph, read_oracle, stored_call_graph, stored_oracle,
    trace_digest, utc_timestamp, write_call_graph, write_call_graph_over, write_oracle,
    write_oracle_over, write_trace_jsonl, OnConflict, Oracle, Provenance, Stored, Witnessed,
    WriteOutcome, CALL_GRAPH_FILE, HISTORY_DIR, ORACLE_FILE,
};
pub use source_check::{check_source, SourceCheck};
pub use template::{Projection, Template, TemplateError};

/// The name of the instance file in an instance directory.
pub const INSTANCE_FILE: &str = "instance.toml";

/// `instance.toml`, as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    /// Equal to the instance directory's name.
    pub id: String,
    /// Equal to the parent directory's name.
    pub repository: String,
    /// The pinned package under test, `name==version`.
    pub package: String,
    /// The container image the test runs in.
    pub image: String,
    /// The interpreter inside the image.
    pub interpreter: String,
    pub kind: QuestionKind,
    /// The question, in English: with its conventions spelled out, or, with `preamble`, what
    /// to compute under the conventions of that preamble.
    pub question: String,
    /// The shared conventions the question was written against (`family@version`, see
    /// [`preamble`]): sent once as (part of) the system prompt. Generated instances have one;
    /// a question that spells its conventions out has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preamble: Option<String>,
    /// The answer template, JSON text (see [`template`]).
    pub template: String,
    /// Paths (template pointers, `/*` for list items) of lists compared as multisets.
    #[serde(default)]
    pub order_insensitive: Vec<String>,
    /// Screening minimum of `flux_extract::answer_size`; the kind's default if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_answer_size: Option<usize>,
    pub test: TestSpec,
    pub tracing: TracingConfig,
    pub extractor: ExtractorSpec,
    /// Present when this instance is a perturbation variant of another (`flux perturb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<VariantSpec>,
    /// Present when `flux gen` made this instance (informational, like `[variant]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<GeneratedSpec>,
}

/// `[generated]`: where a generated instance comes from, and how hard it is. Informational:
/// nothing here is read when the instance runs; `flux stats` reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratedSpec {
    /// The set (`sets/<name>/`) it belongs to.
    pub set: String,
    /// `train` or `test` (the set's split is by repository).
    pub split: String,
    /// The repository's test module its test comes from (path relative to the test root).
    pub module: String,
    /// The trace artifact its gold was taken from (`<repository>/<module>`), before its own
    /// harvest reproduced it with the narrowed `[tracing]` config.
    pub trace: String,
    /// The static-baseline solver answers it right (kept, marked easy).
    #[serde(default)]
    pub easy: bool,
    /// Difficulty features of the instance's test run (see `Difficulty`).
    pub difficulty: Difficulty,
    /// The repository release it was generated from, when the set dates its releases (`flux
    /// eval/score --released-after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleaseStamp>,
}

/// `[generated.release]`: the release of the repository an instance was generated from, when
/// it was published, and whether its target function changed since the release before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseStamp {
    /// The repository's version (the `package` pin's).
    pub version: String,
    /// When it was published: ISO 8601 in UTC (`2025-08-19T19:34:51Z`), or a day
    /// (`2025-08-19`). [`release_day`] reads its day.
    pub date: String,
    /// Where the date comes from (`pypi:flask-3.1.2.tar.gz`: PyPI's upload time of that file;
    /// `given`: `flux gen --released`).
    pub source: String,
    /// The release before it in the set, whose instances the set keeps (`<id>@<version>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// The target function's source text against `previous`'s: `changed`, `unchanged` or
    /// `new` (not in the previous release); absent when it could not be compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The day (`YYYY-MM-DD`) a release date or timestamp names, if it starts with a valid one.
pub fn release_day(date: &str) -> Option<&str> {
    let day = date.get(..10)?;
    let b = day.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let ok = digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10);
    if !ok || !(date.len() == 10 || date[10..].starts_with('T')) {
        return None;
    }
    let (m, d): (u32, u32) = (day[5..7].parse().ok()?, day[8..10].parse().ok()?);
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then_some(day)
}

/// How much runs in an instance's test, SWE-Flux's paper's measures (its median instance: 603
/// calls, 28 functions, 192 lines, 7 files, 5.5 classes, depth 8). Counted over the repository's
/// own code (the package under test, not its tests or third-party code) in the test's run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Difficulty {
    /// Calls of the repository's functions (fresh activations, generator resumptions excluded).
    pub calls: u64,
    /// Distinct functions (code objects) of the repository called.
    pub functions: u64,
    /// Source lines of those functions (from each one's first to its last line).
    pub lines: u64,
    /// Distinct source files of those functions.
    pub files: u64,
    /// Distinct classes whose methods were called.
    pub classes: u64,
    /// Deepest nesting of repository calls below the test function (1 = called by the test).
    pub depth: u64,
}

/// `[variant]`: where a perturbation variant comes from and what was changed. Informational:
/// the variant is a complete instance of its own (its test files hold the mutated inputs and
/// its `oracle.json` is harvested from them); nothing here is read when it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    /// The id of the instance it was derived from (same repository).
    pub origin: String,
    /// The seed of the mutation (the same seed and origin give the same variant).
    pub seed: u64,
    /// What proposed the mutation: `ast` (seeded syntax-tree mutator) or `llm`.
    #[serde(default = "default_proposer")]
    pub proposer: String,
    /// One line per mutation: `file:line:col function op: old -> new`.
    #[serde(default)]
    pub mutations: Vec<String>,
    /// Assertions reduced to what they compute because they compared against values of the
    /// old inputs: `file:line function`.
    #[serde(default)]
    pub relaxed_assertions: Vec<String>,
}

fn default_proposer() -> String {
    "ast".to_string()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    /// Test files, relative to the instance directory.
    #[serde(default)]
    pub files: Vec<String>,
    /// Test files that live in the image (absolute paths inside it, such as the repository's
    /// own test modules): `command` runs them where they are; they are not copied into the
    /// instance. At least one of `files` and `image_files` is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_files: Vec<String>,
    /// The command that runs the test inside the image (argv).
    pub command: Vec<String>,
    /// Whether the test is expected to pass or fail.
    pub expect: Expect,
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    /// Where another benchmark's harness lays the test out, when it is not flux's
    /// `/flux/instance` (see [`TestLayout`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<TestLayout>,
}

/// A test laid out as another benchmark's harness lays it out (SWE-Flux: their files at
/// `/testbed/<repo>_qa/<id>/files/`, run from `/testbed`, because their tests and their node
/// ids name those paths): the instance's files are also mounted (read-only) at `files_at`, and
/// the command runs from `workdir`. Containers only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestLayout {
    pub workdir: String,
    pub files_at: String,
}

fn default_timeout() -> u64 {
    300
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    Pass,
    Fail,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractorSpec {
    /// A name from `flux_extract::extractors()`.
    pub name: String,
    #[serde(default)]
    pub params: Map<String, Value>,
    /// Where the answer's parts come from: template path → path of the extractor's output
    /// (see [`template`]); template keys not listed read the extractor's field of the same name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub answer: std::collections::BTreeMap<String, String>,
}

/// A loaded, validated instance.
#[derive(Clone, Debug)]
pub struct Instance {
    /// The instance directory.
    pub dir: PathBuf,
    pub spec: InstanceSpec,
    pub template: Template,
    /// How the answer is cut from the extractor's output (checked against its shape at load).
    pub projection: Projection,
    pub params: Params,
}

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A field of an instance or oracle file is missing, unknown or wrong. `at` is
    /// `:line:column` when the position is known.
    #[error("{path}{at}: field `{field}`: {problem}")]
    Invalid {
        path: PathBuf,
        at: String,
        field: String,
        problem: String,
    },
    #[error("{id}: {source}")]
    Extract {
        id: String,
        #[source]
        source: ExtractError,
    },
    #[error("{id}: the answer does not fit the template {source}")]
    Answer {
        id: String,
        #[source]
        source: TemplateError,
    },
    #[error("{id}: screened out: {reason}")]
    Screened { id: String, reason: String },
    #[error(
        "{path}: holds a different oracle answer; not replaced (ask to replace it explicitly)\n  \
         old: {old}\n  new: {new}"
    )]
    OracleConflict {
        path: PathBuf,
        old: String,
        new: String,
    },
}

fn invalid(path: &Path, field: &str, problem: impl Into<String>) -> InstanceError {
    InstanceError::Invalid {
        path: path.to_path_buf(),
        at: String::new(),
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// Turn a TOML decoding error into one that names the file, the position, the field (with its
/// table, e.g. `test.fles`) and the problem.
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> InstanceError {
    let msg = e.message().trim().to_string();
    let (at, line_no) = match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            (format!(":{line}:{col}"), Some(line))
        }
        None => (String::new(), None),
    };
    let quoted = |prefix: &str| {
        msg.strip_prefix(prefix)
            .and_then(|r| r.split('`').next())
            .map(str::to_string)
    };
    let named = quoted("unknown field `").or_else(|| quoted("missing field `"));
    // The table the position is in: the last `[header]` at or before that line.
    let lines: Vec<&str> = text.lines().collect();
    let mut table = String::new();
    let mut key_on_line = None;
    if let Some(n) = line_no {
        for l in lines.iter().take(n) {
            let t = l.trim();
            if t.starts_with('[') && t.ends_with(']') {
                table = t.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            }
        }
        if let Some(l) = lines.get(n - 1) {
            let t = l.trim();
            if t.starts_with('[') {
                // The error is about the table itself (e.g. a missing field in it).
                key_on_line = None;
            } else if let Some((k, _)) = t.split_once('=') {
                key_on_line = Some(k.trim().trim_matches('"').to_string());
            }
        }
    }
    let leaf = named.or(key_on_line);
    let field = match (table.is_empty(), leaf) {
        (true, Some(k)) => k,
        (false, Some(k)) => format!("{table}.{k}"),
        (false, None) => table,
        (true, None) => "(document)".to_string(),
    };
    InstanceError::Invalid {
        path: path.to_path_buf(),
        at,
        field,
        problem: msg,
    }
}

/// Read and validate the instance in `dir` (see the crate docs for what is checked).
pub fn load_instance(dir: impl AsRef<Path>) -> Result<Instance, InstanceError> {
    let dir = dir.as_ref();
    let path = dir.join(INSTANCE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| InstanceError::Io {
        path: path.clone(),
        source,
    })?;
    parse_instance(dir, &text)
}

/// Parse and validate `text` as the `instance.toml` of the instance directory `dir` (what
/// [`load_instance`] does once it has read the file; the fuzz target `instance_loader` feeds
/// it arbitrary text: it must return an error, never panic).
pub fn parse_instance(dir: &Path, text: &str) -> Result<Instance, InstanceError> {
    let path = dir.join(INSTANCE_FILE);
    let spec: InstanceSpec = toml::from_str(text).map_err(|e| toml_error(&path, text, &e))?;
    validate(dir, &path, spec).map_err(|e| match e {
        InstanceError::Invalid {
            path,
            at,
            field,
            problem,
        } if at.is_empty() => InstanceError::Invalid {
            at: locate(text, &field)
                .map(|(l, c)| format!(":{l}:{c}"))
                .unwrap_or_default(),
            path,
            field,
            problem,
        },
        other => other,
    })
}

/// Line and column (from 1) where `field` (`key` or `table.key`) is set in TOML `text`.
fn locate(text: &str, field: &str) -> Option<(usize, usize)> {
    let (table, key) = field.rsplit_once('.').unwrap_or(("", field));
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with('[') {
            current = t
                .trim_end()
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string();
            continue;
        }
        let Some(rest) = t.strip_prefix(key) else {
            continue;
        };
        if current == table && rest.trim_start().starts_with('=') {
            return Some((i + 1, line.len() - t.len() + 1));
        }
    }
    None
}

/// Validate a parsed spec for the instance directory `dir` (`path` is used in errors).
/// `scope = "targets"` traces only inside activations of targeted code: the extractor must read
/// nothing else, and the function it asks about must be targeted.
fn check_targets_scope(
    path: &Path,
    ex: &flux_extract::Extractor,
    params: &Params,
    tracing: &flux_trace::TracingConfig,
) -> Result<(), InstanceError> {
    if !ex.targets_scope {
        return Err(invalid(
            path,
            "tracing.scope",
            format!(
                "extractor `{}` reads calls made anywhere, but scope \"targets\" traces only inside targeted code (use \"tests\")",
                ex.name
            ),
        ));
    }
    if tracing.functions.is_empty() {
        return Ok(()); // every function of the targeted files is a target
    }
    for key in ["function", "raised_in"] {
        let Some(f) = params.get(key).and_then(|v| v.as_str()) else {
            continue;
        };
        if !targets_function(&tracing.functions, f) {
            return Err(invalid(
                path,
                "tracing.functions",
                format!(
                    "scope \"targets\" traces only inside targeted code, and `{f}` (extractor.params.{key}) is not among {:?}",
                    tracing.functions
                ),
            ));
        }
    }
    Ok(())
}

/// Is the qualname `f` targeted by the config's `functions` (equal to one, or nested in one)?
fn targets_function(functions: &[String], f: &str) -> bool {
    functions.is_empty()
        || functions.iter().any(|t| {
            f == t
                || f.strip_prefix(t.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
}

/// Can the path filter `file` (extractor `file` parameter) name code in one of the config's
/// targeted `files`? (A config entry is a suffix of a `co_filename` or a glob; a filter matches
/// at a component boundary: they can meet when one ends with the other or the entry is a glob.)
fn targets_file(files: &[String], file: &str) -> bool {
    let f = file.trim_start_matches('/').trim_end_matches('/');
    files.is_empty()
        || files.iter().any(|t| {
            let t = t.trim_start_matches('/');
            t.contains('*') || t.ends_with(f) || f.ends_with(t) || t.starts_with(&format!("{f}/"))
        })
}

/// Predicates are evaluated only where `[tracing] predicates` says: an extractor reading
/// them needs some, and every predicate (and line) it names must be configured, or its report
/// would count nothing and say so only at harvest time.
fn check_predicates(
    path: &Path,
    ex: &flux_extract::Extractor,
    params: &Params,
    tracing: &flux_trace::TracingConfig,
) -> Result<(), InstanceError> {
    if ex.name != "predicate_report" {
        return Ok(());
    }
    if tracing.predicates.is_empty() {
        return Err(invalid(
            path,
            "tracing.predicates",
            "extractor `predicate_report` needs predicates to evaluate ([[tracing.predicates]] with `expr` and `lines`)".to_string(),
        ));
    }
    let names = |v: Option<&serde_json::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    for want in names(params.get("predicates")) {
        if !tracing.predicates.iter().any(|p| p.expr == want) {
            return Err(invalid(
                path,
                "extractor.params.predicates",
                format!("`{want}` is not among [tracing] predicates, so it is never evaluated"),
            ));
        }
    }
    if let Some(lines) = params.get("lines").and_then(|v| v.as_array()) {
        for l in lines.iter().filter_map(|l| l.as_u64()) {
            if !tracing
                .predicates
                .iter()
                .any(|p| p.lines.contains(&(l as u32)))
            {
                return Err(invalid(
                    path,
                    "extractor.params.lines",
                    format!("no [tracing] predicate is evaluated at line {l}"),
                ));
            }
        }
    }
    Ok(())
}

/// Lines, locals and exceptions are recorded only in targeted code: the functions an extractor
/// reads them from must be targeted, and a `file` filter must name a targeted file (17.11).
fn check_targeted(
    path: &Path,
    ex: &flux_extract::Extractor,
    params: &Params,
    tracing: &flux_trace::TracingConfig,
) -> Result<(), InstanceError> {
    for key in ex.targeted {
        let Some(f) = params.get(key).and_then(|v| v.as_str()) else {
            continue;
        };
        if !targets_function(&tracing.functions, f) {
            return Err(invalid(
                path,
                &format!("extractor.params.{key}"),
                format!(
                    "`{f}` is not targeted by [tracing] functions {:?}, so the trace records no \
                     lines, locals or exceptions of it",
                    tracing.functions
                ),
            ));
        }
    }
    if !ex.targeted.is_empty() {
        if let Some(file) = params.get("file").and_then(|v| v.as_str()) {
            if !targets_file(&tracing.files, file) {
                return Err(invalid(
                    path,
                    "extractor.params.file",
                    format!(
                        "`{file}` names no file targeted by [tracing] files {:?}",
                        tracing.files
                    ),
                ));
            }
        }
    }
    Ok(())
}

pub fn validate(dir: &Path, path: &Path, spec: InstanceSpec) -> Result<Instance, InstanceError> {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let dir_name = abs.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if spec.id != dir_name {
        return Err(invalid(
            path,
            "id",
            format!("`{}` must equal the directory name `{dir_name}`", spec.id),
        ));
    }
    let parent = abs
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    if spec.repository != parent {
        return Err(invalid(
            path,
            "repository",
            format!(
                "`{}` must equal the parent directory name `{parent}`",
                spec.repository
            ),
        ));
    }
    match spec.package.split_once("==") {
        Some((name, version)) if !name.trim().is_empty() && !version.trim().is_empty() => {}
        _ => {
            return Err(invalid(
                path,
                "package",
                format!("`{}` is not pinned as name==version", spec.package),
            ))
        }
    }
    for (field, value) in [
        ("image", &spec.image),
        ("interpreter", &spec.interpreter),
        ("question", &spec.question),
    ] {
        if value.trim().is_empty() {
            return Err(invalid(path, field, "must not be empty"));
        }
    }
    if let Some(id) = &spec.preamble {
        // A JVM instance (traced through a class filter) has the JVM's call preamble.
        let current = preamble::for_runtime(spec.kind, !spec.tracing.classes.is_empty());
        if *id != current.id() {
            return Err(invalid(
                path,
                "preamble",
                format!(
                    "the question was written against preamble `{id}`, and this flux's {} \
                     preamble is `{}`: re-author it (`flux gen --reauthor SET`)",
                    spec.kind,
                    current.id()
                ),
            ));
        }
    }
    let template =
        Template::parse(&spec.template).map_err(|e| invalid(path, "template", e.to_string()))?;
    for p in &spec.order_insensitive {
        match template.at(p) {
            Some(Template::List(_)) => {}
            Some(_) => {
                return Err(invalid(
                    path,
                    "order_insensitive",
                    format!("`{p}` is not a list in the template"),
                ))
            }
            None => {
                return Err(invalid(
                    path,
                    "order_insensitive",
                    format!("`{p}` is not a path of the template (use /* to step into lists)"),
                ))
            }
        }
    }
    if spec.test.files.is_empty() && spec.test.image_files.is_empty() {
        return Err(invalid(
            path,
            "test.files",
            "lists no test file (and there is no test.image_files)",
        ));
    }
    for f in &spec.test.image_files {
        let p = Path::new(f);
        let clean = p.is_absolute()
            && p.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::RootDir | std::path::Component::Normal(_)
                )
            });
        if !clean || f.ends_with('/') || f.contains("/./") {
            return Err(invalid(
                path,
                "test.image_files",
                format!(
                    "`{f}` must be an absolute path of a file in the image, without `.` or `..`"
                ),
            ));
        }
    }
    for f in &spec.test.files {
        let rel = Path::new(f);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(invalid(
                path,
                "test.files",
                format!("`{f}` must be relative to the instance directory, without `..`"),
            ));
        }
        if !dir.join(rel).is_file() {
            return Err(invalid(
                path,
                "test.files",
                format!("`{f}` does not exist in {}", dir.display()),
            ));
        }
    }
    if let Some(v) = &spec.variant {
        if v.origin.trim().is_empty() || v.origin == spec.id {
            return Err(invalid(
                path,
                "variant.origin",
                format!("`{}` must name another instance", v.origin),
            ));
        }
    }
    if spec.test.command.is_empty() {
        return Err(invalid(path, "test.command", "is empty"));
    }
    if spec.test.timeout_s == 0 {
        return Err(invalid(path, "test.timeout_s", "must be at least 1"));
    }
    if spec.test.expect == Expect::Fail && !spec.tracing.tests {
        return Err(invalid(
            path,
            "test.expect",
            "\"fail\" is told from a broken run by pytest's test records: it needs \
             `[tracing] tests = true`",
        ));
    }
    let params = Params::new(spec.extractor.params.clone());
    if spec.extractor.name == external::SWE_FLUX_PARSER {
        // Answered by SWE-Flux's parser in the container: its template is its own.
        external::validate(dir, path, &spec)?;
        return Ok(Instance {
            dir: dir.to_path_buf(),
            spec,
            template,
            projection: template::Projection::identity(),
            params,
        });
    }
    let ex = flux_extract::check_params(&spec.extractor.name, &params).map_err(|e| {
        let field = match &e {
            ExtractError::UnknownExtractor { .. } => "extractor.name",
            _ => "extractor.params",
        };
        invalid(path, field, e.to_string())
    })?;
    if !ex.kinds.contains(&spec.kind) {
        let serves: Vec<&str> = ex.kinds.iter().map(|k| k.as_str()).collect();
        return Err(invalid(
            path,
            "kind",
            format!(
                "extractor `{}` serves {}, not {}",
                ex.name,
                serves.join(", "),
                spec.kind
            ),
        ));
    }
    let shape = Template::parse((ex.shape)(&params))
        .map_err(|e| invalid(path, "extractor.name", format!("bad built-in shape: {e}")))?;
    let projection =
        Projection::compile(&template, &shape, &spec.extractor.answer).map_err(|e| {
            let field = if spec.extractor.answer.contains_key(&e.path) {
                "extractor.answer"
            } else {
                "template"
            };
            invalid(
                path,
                field,
                format!(
                    "{e} (extractor `{}` computes {shape}; map differently named template keys in \
                 [extractor.answer])",
                    ex.name
                ),
            )
        })?;
    if spec.tracing.scope == flux_trace::Scope::Targets {
        check_targets_scope(path, ex, &params, &spec.tracing)?;
    }
    check_targeted(path, ex, &params, &spec.tracing)?;
    check_predicates(path, ex, &params, &spec.tracing)?;
    // Against the target's source when the instance directory holds it (`flux harvest` looks
    // in the cache's package source too, and reports a skipped check).
    source_check::check(dir, path, &spec, &params, &[])?;
    Ok(Instance {
        dir: dir.to_path_buf(),
        spec,
        template,
        projection,
        params,
    })
}

/// Every instance directory (a directory holding `instance.toml`) at or under each of `roots`,
/// sorted and without duplicates. A root that does not exist is an error; directories that
/// cannot be read below a root are skipped. Hidden directories and `target` are not entered.
pub fn discover<P: AsRef<Path>>(roots: &[P]) -> Result<Vec<PathBuf>, InstanceError> {
    let mut out = Vec::new();
    for root in roots {
        let root = root.as_ref();
        if !root.exists() {
            return Err(InstanceError::Io {
                path: root.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
            });
        }
        walk(root, &mut out);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join(INSTANCE_FILE).is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subdirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            !n.starts_with('.') && n != "target"
        })
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    for d in subdirs {
        walk(&d, out);
    }
}

impl Instance {
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    pub fn kind(&self) -> QuestionKind {
        self.spec.kind
    }

    /// The screening minimum: the instance's own, else the kind's default.
    pub fn min_answer_size(&self) -> usize {
        self.spec
            .min_answer_size
            .unwrap_or_else(|| self.spec.kind.min_answer_size())
    }

    /// Absolute-or-relative paths of the test files.
    pub fn test_files(&self) -> Vec<PathBuf> {
        self.spec
            .test
            .files
            .iter()
            .map(|f| self.dir.join(f))
            .collect()
    }

    pub fn oracle_path(&self) -> PathBuf {
        self.dir.join(ORACLE_FILE)
    }

    /// The stored gold with the instance's current question: `instance.toml` owns the question
    /// (`flux gen --reauthor` rewrites it there and leaves `oracle.json` byte for byte as it
    /// was), `oracle.json` owns the answer, whose own `question` field only records the text it
    /// was harvested under. Whatever hands the question on (exports) reads it through this.
    pub fn read_oracle(&self) -> Result<Oracle, InstanceError> {
        let mut o = read_oracle(&self.dir)?;
        o.question = self.spec.question.clone();
        Ok(o)
    }

    /// The question with its conventions spelled out, for a format with no system prompt to
    /// carry them: the question, then its preamble's text when it was written against one (a
    /// TOML block string's closing newline is not part of the question).
    pub fn self_contained_question(&self) -> String {
        let question = self.spec.question.trim_end();
        match self.spec.preamble.as_deref().and_then(preamble::by_id) {
            Some(p) => format!("{question}\n\n{}", p.text),
            None => question.to_string(),
        }
    }

    /// The external parser that answers this instance, if it is one of SWE-Flux's
    /// ([`external::SWE_FLUX_PARSER`]; checked at load).
    pub fn external_parser(&self) -> Option<external::ExternalParser> {
        (self.spec.extractor.name == external::SWE_FLUX_PARSER)
            .then(|| external::ExternalParser::from_params(&self.spec.extractor.params).ok())
            .flatten()
    }

    /// Run the instance's extractor on `trace`, cut the answer with the template, and check it.
    /// A trace that kept only part of the run (`meta.kept`) answers only an instance that may
    /// be answered from that part ([`Instance::keep_for_answer`]) about a function among the
    /// trace's targets.
    pub fn extract(&self, trace: &flux_trace::Trace) -> Result<Value, InstanceError> {
        if let Some(kept) = &trace.meta.kept {
            self.answerable_from(kept)?;
        }
        self.extract_indexed(&flux_extract::index(trace))
    }

    /// The extractor's `function` parameter, if it has one.
    fn asked_function(&self) -> Option<&str> {
        self.spec
            .extractor
            .params
            .get("function")
            .and_then(Value::as_str)
    }

    fn answerable_from(&self, kept: &flux_trace::keep::Kept) -> Result<(), InstanceError> {
        let function = self.asked_function();
        let ok = self.keep_for_answer(flux_trace::Scope::Targets) == kept.keep
            && function.is_some_and(|f| kept.targets.iter().any(|t| t == f));
        if ok {
            return Ok(());
        }
        Err(InstanceError::Invalid {
            path: self.dir.join(INSTANCE_FILE),
            at: String::new(),
            field: "extractor".into(),
            problem: format!(
                "the trace kept only the calls of {:?} ({:?}), which cannot answer `{}` about {}: it needs the whole trace",
                kept.targets,
                kept.keep,
                self.spec.extractor.name,
                function.unwrap_or("no function")
            ),
        })
    }

    /// What a run asked only this instance's answer may keep of its trace, traced with `scope`:
    /// the targets' direct calls ([`flux_trace::Keep::TargetCalls`]) when the scope is
    /// `targets`, the extractor reads no deeper with these parameters, and the function it
    /// asks about is one `[tracing] functions` names exactly (every activation of it is then
    /// targeted); everything otherwise.
    pub fn keep_for_answer(&self, scope: flux_trace::Scope) -> flux_trace::Keep {
        let Some(ex) = flux_extract::find(&self.spec.extractor.name) else {
            return flux_trace::Keep::All;
        };
        let function = self.asked_function();
        let named = function.is_some_and(|f| self.spec.tracing.functions.iter().any(|t| t == f));
        if scope == flux_trace::Scope::Targets && named && (ex.target_calls_only)(&self.params) {
            flux_trace::Keep::TargetCalls
        } else {
            flux_trace::Keep::All
        }
    }

    /// [`Instance::extract`] over a trace indexed once for many instances.
    pub fn extract_indexed(&self, ix: &flux_trace::TraceIndex<'_>) -> Result<Value, InstanceError> {
        if self.spec.extractor.name == external::SWE_FLUX_PARSER {
            return Err(InstanceError::Invalid {
                path: self.dir.join(INSTANCE_FILE),
                at: String::new(),
                field: "extractor.name".into(),
                problem: format!(
                    "{} runs SWE-Flux's parser in the instance's container (flux harvest), not in process",
                    external::SWE_FLUX_PARSER
                ),
            });
        }
        let output = flux_extract::extract_indexed(ix, &self.spec.extractor.name, &self.params)
            .map_err(|source| InstanceError::Extract {
                id: self.spec.id.clone(),
                source,
            })?;
        let answer = self
            .projection
            .apply(&output)
            .map_err(|source| InstanceError::Answer {
                id: self.spec.id.clone(),
                source,
            })?;
        self.template
            .validate(&answer)
            .map_err(|source| InstanceError::Answer {
                id: self.spec.id.clone(),
                source,
            })?;
        Ok(answer)
    }

    /// The path scope of the repository's own code for [`Instance::call_graph`]: for JVM
    /// classes, the first class prefix as a path (`org.x.` → `org/x/`); else the first
    /// component of the first `[tracing] files` entry that starts with a plain name
    /// (`sympy/core/add.py` → `sympy/`), else the package name (`sympy==1.13.3` → `sympy/`).
    pub fn call_graph_scope(&self) -> String {
        // A JVM target's code is its classes (`org.x.`): the files a JVM trace names are
        // relative to the source root (`org/x/Foo.java`).
        if let Some(c) = self.spec.tracing.classes.first() {
            let path = c.replace('.', "/");
            return if path.ends_with('/') {
                path
            } else {
                format!("{path}/")
            };
        }
        let from_files = self.spec.tracing.files.iter().find_map(|f| {
            let first = f.trim_start_matches('/').split('/').next()?;
            let plain = !first.is_empty()
                && f.contains('/')
                && first
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.');
            plain.then(|| format!("{first}/"))
        });
        from_files.unwrap_or_else(|| {
            let name = self.spec.package.split("==").next().unwrap_or("").trim();
            format!("{name}/")
        })
    }

    /// The TraceEval-style call graph of the repository's own code in `trace`:
    /// `{caller: [callees]}` with module-qualified names (the `call_graph` extractor with
    /// `within` = [`Instance::call_graph_scope`] and `qualify = "module"`).
    pub fn call_graph(&self, trace: &flux_trace::Trace) -> Result<Value, InstanceError> {
        let mut p = Map::new();
        p.insert("within".into(), Value::String(self.call_graph_scope()));
        p.insert("qualify".into(), Value::String("module".into()));
        let answer =
            flux_extract::extract(trace, "call_graph", &Params::new(p)).map_err(|source| {
                InstanceError::Extract {
                    id: self.spec.id.clone(),
                    source,
                }
            })?;
        Ok(answer
            .get("call_graph")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new())))
    }

    /// Harvest: extract the answer from a complete trace, validate it, screen it by answer
    /// size, and build the oracle with its provenance from the trace and `facts` (what the run
    /// knows that the trace does not). The one oracle builder: `flux harvest` calls it.
    pub fn build_oracle(
        &self,
        trace: &flux_trace::Trace,
        facts: &RunFacts,
    ) -> Result<Oracle, InstanceError> {
        let answer = self.extract(trace)?;
        self.oracle_for(answer, trace, facts)
    }

    /// The oracle of `answer` computed for this instance from `trace` by something other than
    /// its extractor (an imported SWE-Flux instance: their parser on flux's log), through the
    /// same gates as [`Instance::build_oracle`]: screened by size, with its provenance.
    pub fn oracle_for(
        &self,
        answer: Value,
        trace: &flux_trace::Trace,
        facts: &RunFacts,
    ) -> Result<Oracle, InstanceError> {
        let size = flux_extract::answer_size(&answer);
        let min = self.min_answer_size();
        if size < min {
            return Err(InstanceError::Screened {
                id: self.spec.id.clone(),
                reason: format!(
                    "answer size {size} is below the minimum {min} for {}",
                    self.spec.kind
                ),
            });
        }
        let template_answer: Value = serde_json::from_str(&self.spec.template)
            .map_err(|e| invalid(&self.dir.join(INSTANCE_FILE), "template", e.to_string()))?;
        let mut labels = trace.meta.labels.clone();
        for l in &facts.labels {
            if !labels.contains(l) {
                labels.push(l.clone());
            }
        }
        Ok(Oracle {
            question_kind: self.spec.kind,
            question: self.spec.question.clone(),
            template_answer,
            oracle_answer: answer,
            provenance: Provenance {
                image: self.spec.image.clone(),
                image_id: facts.image_id.clone(),
                image_identity: facts.image_identity.clone(),
                interpreter: facts.interpreter.clone(),
                flux_version: env!("CARGO_PKG_VERSION").to_string(),
                trace_sha256: facts
                    .trace_sha256
                    .clone()
                    .unwrap_or_else(|| trace_digest(trace)),
                harvested_at: facts.harvested_at.clone(),
                complete: trace.meta.complete,
                labels,
                extractor: self.spec.extractor.name.clone(),
                params: self.spec.extractor.params.clone(),
                order_insensitive: self.spec.order_insensitive.clone(),
                witness: None,
            },
        })
    }
}

/// What a run knows about itself that its trace does not, for an oracle's provenance
/// ([`Instance::build_oracle`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFacts {
    /// RFC 3339 UTC ([`utc_timestamp`]).
    pub harvested_at: String,
    /// `sha256:…` of the image the test ran in; empty when there was none (a host run).
    pub image_id: String,
    /// The image's content identity (flux_container's identity of packages and trees); empty
    /// when there was none (a host run).
    pub image_identity: String,
    /// `X.Y.Z` of the interpreter traced (the trace's `meta.interpreter` also names its path).
    pub interpreter: String,
    /// sha256 (hex) of the trace's JSONL when the caller has it already (the harvest hashes
    /// `trace.jsonl` while writing it: a sympy trace holds millions of events); else computed
    /// ([`trace_digest`]).
    pub trace_sha256: Option<String>,
    /// Labels of the run, added to the trace's own (e.g. "not reproducible").
    pub labels: Vec<String>,
}

#[cfg(test)]
mod tests;
