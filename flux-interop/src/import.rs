//! `flux import swe-flux`: SWE-Flux instance directories → flux instances.
//!
//! Their layout (one directory per instance): `eval.sh`, `files/testcase.py`, `files/parser.py`
//! (and any other file under `files/`), `oracle.json` (`question_kind`, `question`,
//! `template_answer`, `oracle_answer`). Each becomes `<out>/<repository>/<id>/`:
//!
//! - `instance.toml`: their kind, question and template (lists their scorer compares as sets
//!   become `order_insensitive`); the test: `pytest <their arguments>` from their root
//!   (`/testbed`), with the instance's files laid out where their harness puts them
//!   (`<root>/<repo>_qa/<id>/files/`, see `flux_instance::external`); the tracing config that
//!   records what their log needs (`crate::sweflux_log::LogConfig::tracing_config` of
//!   the variables `eval.sh` exports); the extractor `swe-flux-parser` with those variables,
//!   the parser and the layout as parameters;
//! - the files of `files/` (the test, the parser);
//! - `swe-flux/eval.sh` and `swe-flux/oracle.json`, unchanged: their stored answer, which
//!   `flux harvest --check` compares fresh answers with (under their scoring rules).
//!
//! No gold answer is written: `flux harvest` makes it by running the test traced by flux and
//! their parser on flux's log, inside the container.
//!
//! A directory that `flux export --format swe-flux` wrote (it holds `flux/instance.toml`) is
//! given back as the instance it was exported from: its `instance.toml`, its test files under
//! their names, its harvested `oracle.json` (provenance kept) and `callgraph.json`
//! (`import(export(x)) == x`; only `--repository` may move it).
//!
//! An instance that cannot be read is reported with its directory and the reason; the others
//! are still imported. An existing output directory is never replaced unless asked.
use crate::evalsh;
use crate::sweflux_log::LogConfig;
use flux_instance::external::{ExternalParser, REFERENCE_DIR, SWE_FLUX_PARSER};
use flux_instance::{ExtractorSpec, InstanceSpec, TestSpec, INSTANCE_FILE, ORACLE_FILE};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Keys whose lists SWE-Flux's scorer compares as multisets (their `evaluate_qa_answers.py`,
/// `ORDER_INSENSITIVE_LIST_KEYS`): the instance's `order_insensitive` says the same.
pub const ORDER_INSENSITIVE_KEYS: &[&str] = &[
    "observed_def_use_pairs",
    "covered_def_use_pairs",
    "covered_du_pairs",
    "uncovered_du_pairs_list",
    "covered_lines",
    "covered_functions",
    "union_lines_sorted",
    "intersection_lines_sorted",
    "lines_covered_by_only_one_test",
    "exception_types",
    "unique_values",
    "subtype_value_set",
    "guess_value_set",
    "safe_tests",
    "crashing_tests",
];

#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// The flux repository name (the output's parent directory).
    pub repository: String,
    /// The image the test runs in (a SWE-Flux-layout image: the source at the root).
    pub image: String,
    /// The interpreter in the image.
    pub interpreter: String,
    /// `name==version` of the package under test; default from the image tag
    /// (`flux/flask:3.2.0.dev0-py3.11` → `flask==3.2.0.dev0`).
    pub package: Option<String>,
    /// The instance root: instances go to `<out>/<repository>/<id>/`.
    pub out: PathBuf,
    /// Replace existing instance directories.
    pub replace: bool,
    pub timeout_s: u64,
    /// What the image has installed (`name==version`, its manifest's `pip freeze`), which
    /// decides the pytest options the command may pass ([`pytest_options`]); `None` when its
    /// manifest could not be read (then no plugin's option is passed).
    pub image_packages: Option<Vec<String>>,
}

/// One imported instance.
#[derive(Clone, Debug)]
pub struct Imported {
    pub source: PathBuf,
    /// The instance their parser answers, or why none was written (their store keeps some
    /// instances without `files/parser.py`: the native twin is still written and checked).
    pub dir: Result<PathBuf, String>,
    pub kind: String,
    /// The native instance written beside it (`<id>-native`, answered by a flux extractor),
    /// or why their question has none (see [`crate::native`]).
    pub native: Result<PathBuf, String>,
}

/// The id of the native instance of SWE-Flux's instance `id`.
pub fn native_id(id: &str) -> String {
    format!("{id}{NATIVE_SUFFIX}")
}

/// What a native instance's id ends with.
pub const NATIVE_SUFFIX: &str = "-native";

/// What [`import`] did.
#[derive(Debug, Default)]
pub struct ImportReport {
    pub imported: Vec<Imported>,
    /// (source directory, why it was not imported).
    pub errors: Vec<(PathBuf, String)>,
}

/// Every SWE-Flux instance directory (holding `eval.sh` and `files/`) at or under `roots`,
/// sorted. `excluded_instances/` directories (screened out by them) are not entered.
pub fn discover(roots: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        if d.join("eval.sh").is_file() && d.join("files").is_dir() {
            out.push(d.to_path_buf());
            return;
        }
        let Ok(rd) = std::fs::read_dir(d) else { return };
        let mut subs: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                !n.starts_with('.') && n != "excluded_instances" && n != "shared"
            })
            .map(|e| e.path())
            .collect();
        subs.sort();
        for s in subs {
            walk(&s, out);
        }
    }
    let mut out = Vec::new();
    for r in roots {
        if !r.is_dir() {
            return Err(format!("{}: no such directory", r.display()));
        }
        walk(r, &mut out);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The package pin an image tag implies: `flux/<name>:<version>-py<X.Y>` → `name==version`.
pub fn package_from_image(image: &str) -> Option<String> {
    let (repo, tag) = image.rsplit_once(':')?;
    let name = repo.rsplit('/').next()?;
    let version = tag.rsplit_once("-py").map_or(tag, |(v, _)| v);
    (!name.is_empty() && !version.is_empty()).then(|| format!("{name}=={version}"))
}

/// JSON pointers of the template's lists stored under one of [`ORDER_INSENSITIVE_KEYS`].
pub fn order_insensitive(template: &Value) -> Vec<String> {
    fn walk(v: &Value, at: &str, key: Option<&str>, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let esc = k.replace('~', "~0").replace('/', "~1");
                    walk(x, &format!("{at}/{esc}"), Some(k), out);
                }
            }
            Value::Array(a) => {
                if key.is_some_and(|k| ORDER_INSENSITIVE_KEYS.contains(&k)) {
                    out.push(at.to_string());
                }
                if let Some(item) = a.first() {
                    walk(item, &format!("{at}/*"), None, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(template, "", None, &mut out);
    out
}

/// Whether `freeze` (`name==version` lines) has the distribution `name` (names compared as
/// pip normalises them: case, `-`, `_` and `.` alike).
pub fn has_distribution(freeze: &[String], name: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    let want = norm(name);
    freeze.iter().any(|l| {
        let n = l
            .split(['=', ' ', '@', '<', '>', '~', '!'])
            .next()
            .unwrap_or("");
        norm(n.trim()) == want
    })
}

/// The options an imported pytest command adds to theirs, only ever what the image provides
/// (`image_packages`, its manifest's `pip freeze`):
/// - `-p no:cacheprovider` (pytest's own plugin): their root is read-only in flux's
///   containers, and the cache would write `<root>/.pytest_cache` and warn, an error under
///   `filterwarnings = error`;
/// - `-o timeout=0` only when the image has pytest-timeout: a repository's limit (fastapi's
///   20 s, calibrated untraced) is off, the traced run being bounded by the instance's own
///   deadline. Without the plugin pytest 9 warns `Unknown config option: timeout`, and under
///   `filterwarnings = error` that warning is an INTERNALERROR before any test runs.
pub fn pytest_options(image_packages: Option<&[String]>) -> Vec<String> {
    let mut out = vec!["-p".to_string(), "no:cacheprovider".to_string()];
    if image_packages.is_some_and(|f| has_distribution(f, "pytest-timeout")) {
        out.extend(["-o".to_string(), "timeout=0".to_string()]);
    }
    out
}

/// The interpreter their run used (`3.9`), from the tag of their test's compiled file in
/// `files/__pycache__/` (`testcase.cpython-39-pytest-8.3.4.pyc`); when the instance keeps none,
/// from its sibling instances (one run, one interpreter: kedro node_from_dict_m3_state, dev,
/// keeps no compiled file while the run's others are cpython-39); `None` when none has one.
pub fn their_python(src: &Path, test_file: &str) -> Option<String> {
    own_python(src, test_file).or_else(|| {
        let mut siblings: Vec<PathBuf> = std::fs::read_dir(src.parent()?)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p != src && p.join("eval.sh").is_file())
            .collect();
        siblings.sort();
        siblings.iter().find_map(|p| own_python(p, test_file))
    })
}

/// Whether their parser names a method with its class (`pkg.mod.C.join`): it matched such
/// names in their log, so their tracer named frames by qualname, whatever the interpreter its
/// siblings' compiled files tell (llama_factory parser_get_dataset_list_s6_calls, dev: no
/// compiled file of its own, its run's others `cpython-310`, its parser's tracked functions
/// `llamafactory.data.parser.DatasetAttr.join`). A component after the first that starts with
/// a capital letter is read as a class.
fn names_a_method(parser: Option<&str>) -> bool {
    crate::evidence::Evidence::new(parser)
        .target_names()
        .iter()
        .any(|n| {
            let parts: Vec<&str> = n.split('.').collect();
            parts.len() >= 3
                && parts[1..parts.len() - 1]
                    .iter()
                    .any(|c| c.starts_with(|ch: char| ch.is_ascii_uppercase()))
        })
}

/// Whether their run's interpreter ([`their_python`]) predates 3.11, whose tracer names frames
/// `module.co_name`.
fn co_names(src: &Path, test_file: &str) -> bool {
    their_python(src, test_file).is_some_and(|v| {
        LogConfig::from_pairs(&[(crate::sweflux_log::THEIR_PYTHON.to_string(), v)]).co_names
    })
}

fn own_python(src: &Path, test_file: &str) -> Option<String> {
    let stem = test_file.strip_suffix(".py").unwrap_or(test_file);
    let rd = std::fs::read_dir(src.join("files").join("__pycache__")).ok()?;
    let mut names: Vec<String> = rd
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{stem}.cpython-")))
        .collect();
    names.sort();
    let tag = names.first()?.split(".cpython-").nth(1)?;
    let digits: String = tag.chars().take_while(char::is_ascii_digit).collect();
    let (major, minor) = digits.split_at(1.min(digits.len()));
    (!minor.is_empty()).then(|| format!("{major}.{minor}"))
}

/// Import each of `sources` (instance directories in their layout).
pub fn import(sources: &[PathBuf], opts: &ImportOptions) -> ImportReport {
    let mut report = ImportReport::default();
    for src in sources {
        match import_one(src, opts) {
            Ok(i) => report.imported.push(i),
            Err(e) => report.errors.push((src.clone(), e)),
        }
    }
    report
}

fn read(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// The flux instance of one SWE-Flux instance directory (not written).
pub fn instance_spec(src: &Path, opts: &ImportOptions) -> Result<InstanceSpec, String> {
    spec_of(src, opts, true)
}

/// [`instance_spec`]; without `require_parser`, one whose `files/parser.py` is missing too (the
/// basis of its native twin).
fn spec_of(src: &Path, opts: &ImportOptions, require_parser: bool) -> Result<InstanceSpec, String> {
    let id = src
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: not a directory name", src.display()))?
        .to_string();
    let eval = evalsh::parse(&read(&src.join("eval.sh"))?)?;
    let oracle: Value = serde_json::from_str(&read(&src.join(ORACLE_FILE))?)
        .map_err(|e| format!("{}: {e}", src.join(ORACLE_FILE).display()))?;
    let field = |k: &str| {
        oracle
            .get(k)
            .ok_or_else(|| format!("{}: no `{k}`", src.join(ORACLE_FILE).display()))
    };
    let kind = serde_json::from_value(field("question_kind")?.clone())
        .map_err(|e| format!("question_kind: {e}"))?;
    let question = field("question")?
        .as_str()
        .ok_or("question is not a string")?
        .to_string();
    let template = field("template_answer")?.clone();
    field("oracle_answer")?;
    let qa_dir = eval.qa_dir().to_string();
    if qa_dir.is_empty() {
        return Err(format!("TEST_ID {} names no directory", eval.test_id));
    }
    let test_file = eval.test_file().to_string();
    if !src.join("files").join(&test_file).is_file() {
        return Err(format!(
            "files/{test_file} (the file TEST_ID names) is missing"
        ));
    }
    let parser_rel = eval
        .parser
        .strip_prefix(&format!("{qa_dir}/"))
        .ok_or_else(|| format!("the parser {} is not in {qa_dir}/", eval.parser))?
        .to_string();
    if require_parser && !src.join("files").join(&parser_rel).is_file() {
        return Err(format!(
            "files/{parser_rel} (the parser eval.sh runs) is missing"
        ));
    }
    let mut vars = eval.trace_vars();
    if let Some(v) = their_python(src, &test_file) {
        // Their tracer's frame names depend on it (`co_name` before 3.11).
        vars.push((crate::sweflux_log::THEIR_PYTHON.to_string(), v));
    }
    let log = LogConfig::from_pairs(&vars);
    if !log.on {
        return Err("eval.sh does not export TRACE_ON=1: their tracer would record nothing".into());
    }
    let package = match &opts.package {
        Some(p) => p.clone(),
        None => package_from_image(&opts.image).ok_or_else(|| {
            format!(
                "cannot tell the package from image {} (give --package)",
                opts.image
            )
        })?,
    };
    let mut command = vec![opts.interpreter.clone(), "-m".into(), "pytest".into()];
    command.extend(pytest_options(opts.image_packages.as_deref()));
    command.extend(eval.pytest_addopts());
    command.extend(eval.pytest_args.iter().cloned());
    // What else their parser reads (kedro's `--pytest-log`); the import twin is refused, naming
    // the option, when flux could not give it; the native twin does not run their parser.
    let inputs = match eval.parser_inputs() {
        Ok(i) => i,
        Err(e) if require_parser => return Err(e),
        Err(_) => Default::default(),
    };
    let ext = ExternalParser {
        parser: parser_rel,
        root: eval.root.clone(),
        qa_dir,
        log: vars,
        pytest_output: inputs.pytest_output,
        origin: src.display().to_string(),
    };
    Ok(InstanceSpec {
        id,
        repository: opts.repository.clone(),
        package,
        image: opts.image.clone(),
        interpreter: opts.interpreter.clone(),
        kind,
        question,
        preamble: None,
        template: serde_json::to_string(&template).map_err(|e| e.to_string())?,
        order_insensitive: order_insensitive(&template),
        // Their screening kept it; flux's defaults are not theirs.
        min_answer_size: Some(1),
        test: TestSpec {
            files: vec![test_file],
            image_files: Vec::new(),
            command,
            expect: flux_instance::Expect::Pass,
            timeout_s: opts.timeout_s,
            layout: Some(flux_instance::TestLayout {
                workdir: eval.root.clone(),
                files_at: format!("{}/{}", eval.root, eval.qa_dir()),
            }),
        },
        tracing: log.tracing_config(),
        extractor: ExtractorSpec {
            name: SWE_FLUX_PARSER.into(),
            params: ext.to_params(),
            answer: Default::default(),
        },
        variant: None,
        generated: None,
    })
}

/// The native instance of one SWE-Flux instance directory (not written): `spec` (its
/// external-parser instance) asked of the flux extractor that expresses their question, or why
/// none does.
pub fn native_spec(src: &Path, spec: &InstanceSpec) -> Result<InstanceSpec, String> {
    let eval = evalsh::parse(&read(&src.join("eval.sh"))?)?;
    let template: Value = serde_json::from_str(&spec.template).map_err(|e| e.to_string())?;
    // Their parser (when their store keeps it) is read, never run, for what it fixes.
    let parser: Option<String> = eval
        .parser
        .strip_prefix(&format!("{}/", eval.qa_dir()))
        .and_then(|rel| std::fs::read_to_string(src.join("files").join(rel)).ok());
    let question = crate::native::Question {
        eval: &eval,
        text: &spec.question,
        template: &template,
        parser: parser.as_deref(),
    };
    let mut extractor = crate::native::native_extractor(&question)?;
    if extractor.params.contains_key("module_names")
        && co_names(src, eval.test_file())
        && !names_a_method(parser.as_deref())
    {
        // Their tracer named frames `module.co_name` (no `co_qualname` before 3.11), and so do
        // the function identities of their questions and answers.
        extractor
            .params
            .insert("function_names".into(), Value::from("co_name"));
    }
    let mut native = spec.clone();
    native.id = native_id(&spec.id);
    // Extractors read the static facts (statements, loops, definitions).
    native.tracing.facts = true;
    // An extractor that reads calls made outside targeted code needs them traced.
    if flux_extract::find(&extractor.name).is_some_and(|x| !x.targets_scope) {
        native.tracing.scope = flux_trace::Scope::Tests;
    }
    if extractor.name == "predicate_report" {
        // The hook evaluates their candidates on the live locals where they are observed.
        native.tracing.predicates = crate::native::predicates(&question)?;
    }
    native.extractor = extractor;
    Ok(native)
}

fn import_one(src: &Path, opts: &ImportOptions) -> Result<Imported, String> {
    let exported = src
        .join(flux_instance::export::FLUX_DIR)
        .join(INSTANCE_FILE)
        .is_file();
    let parser = import_dir(src, opts, None);
    if exported {
        let (dir, kind) = parser?;
        return Ok(Imported {
            source: src.to_path_buf(),
            dir: Ok(dir),
            kind,
            native: Err("not mapped (an instance flux exported)".into()),
        });
    }
    // The native twin needs everything but their parser.
    let native = spec_of(src, opts, false).and_then(|spec| {
        let n = native_spec(src, &spec)?;
        import_dir(src, opts, Some(n))
    });
    let kind = match (&parser, &native) {
        (Ok((_, k)), _) | (_, Ok((_, k))) => k.clone(),
        (Err(p), Err(n)) if p == n => return Err(p.clone()),
        (Err(p), Err(n)) => return Err(format!("{p} (native: {n})")),
    };
    Ok(Imported {
        source: src.to_path_buf(),
        dir: parser.map(|(d, _)| d),
        kind,
        native: native.map(|(d, _)| d),
    })
}

/// Write one instance of `src` (its external-parser instance, or `native`) into place: its
/// directory and kind.
fn import_dir(
    src: &Path,
    opts: &ImportOptions,
    native: Option<InstanceSpec>,
) -> Result<(PathBuf, String), String> {
    let flux_dir = src.join(flux_instance::export::FLUX_DIR);
    let exported = native.is_none() && flux_dir.join(INSTANCE_FILE).is_file();
    let spec = if let Some(n) = native {
        n
    } else if exported {
        let path = flux_dir.join(INSTANCE_FILE);
        let mut spec: InstanceSpec =
            toml::from_str(&read(&path)?).map_err(|e| format!("{}: {e}", path.display()))?;
        spec.repository = opts.repository.clone();
        spec
    } else {
        instance_spec(src, opts)?
    };
    let dir = opts.out.join(&spec.repository).join(&spec.id);
    if dir.exists() && !opts.replace {
        return Err(format!(
            "{} exists (use --replace to replace it)",
            dir.display()
        ));
    }
    // Written beside (`<out>/.flux-import-<pid>/<repository>/<id>`, a valid instance path),
    // checked, then moved into place: a failure leaves no half instance.
    let parent = dir.parent().expect("has a parent");
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let scratch = opts
        .out
        .join(format!(".flux-import-{}", std::process::id()));
    let tmp = scratch.join(&spec.repository).join(&spec.id);
    let _ = std::fs::remove_dir_all(&tmp);
    let written = if exported {
        restore_instance(src, &spec, &tmp)
    } else {
        write_instance(src, &spec, &tmp)
    };
    let result = written.and_then(|_| {
        flux_instance::validate(&tmp, &tmp.join(INSTANCE_FILE), spec.clone())
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&scratch);
        return Err(e);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let moved = std::fs::rename(&tmp, &dir).map_err(|e| format!("{}: {e}", dir.display()));
    let _ = std::fs::remove_dir_all(&scratch);
    moved?;
    flux_instance::load_instance(&dir).map_err(|e| e.to_string())?;
    Ok((dir, spec.kind.as_str().to_string()))
}

/// An instance `flux export` wrote, back as it was (see the module doc).
fn restore_instance(src: &Path, spec: &InstanceSpec, dir: &Path) -> Result<(), String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let cp = |from: &Path, to: &Path| -> Result<(), String> {
        if let Some(p) = to.parent() {
            std::fs::create_dir_all(p).map_err(|e| io(p, e))?;
        }
        std::fs::copy(from, to).map(|_| ()).map_err(|e| io(from, e))
    };
    let flux = src.join(flux_instance::export::FLUX_DIR);
    let files = src.join("files");
    for (i, f) in spec.test.files.iter().enumerate() {
        let from = if i == 0 {
            files.join(flux_instance::export::SWE_FLUX_TESTCASE)
        } else {
            files.join(f)
        };
        cp(&from, &dir.join(f))?;
    }
    if spec.extractor.name == SWE_FLUX_PARSER {
        let ext = ExternalParser::from_params(&spec.extractor.params)?;
        cp(&files.join(&ext.parser), &dir.join(&ext.parser))?;
        for f in ["eval.sh", ORACLE_FILE] {
            let from = flux.join(REFERENCE_DIR).join(f);
            if from.is_file() {
                cp(&from, &dir.join(REFERENCE_DIR).join(f))?;
            }
        }
    }
    for f in [ORACLE_FILE, flux_instance::CALL_GRAPH_FILE] {
        if flux.join(f).is_file() {
            cp(&flux.join(f), &dir.join(f))?;
        }
    }
    let original = read(&flux.join(INSTANCE_FILE))?;
    let unchanged: InstanceSpec = toml::from_str(&original).map_err(|e| e.to_string())?;
    let text = if unchanged.repository == spec.repository {
        original
    } else {
        toml::to_string(spec).map_err(|e| format!("instance.toml: {e}"))?
    };
    std::fs::write(dir.join(INSTANCE_FILE), text).map_err(|e| io(dir, e))
}

fn write_instance(src: &Path, spec: &InstanceSpec, dir: &Path) -> Result<(), String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    std::fs::create_dir_all(dir.join(REFERENCE_DIR)).map_err(|e| io(dir, e))?;
    copy_tree(&src.join("files"), dir)?;
    for f in ["eval.sh", ORACLE_FILE] {
        std::fs::copy(src.join(f), dir.join(REFERENCE_DIR).join(f))
            .map_err(|e| io(&src.join(f), e))?;
    }
    let text = toml::to_string(spec).map_err(|e| format!("instance.toml: {e}"))?;
    let head = if spec.extractor.name == SWE_FLUX_PARSER {
        format!(
            "# Imported from SWE-Flux's instance {} by `flux import swe-flux`.\n\
             # Gold: `flux harvest` runs the test traced by flux and their parser ({}) on flux's\n\
             # swe-flux-log, in the container; swe-flux/oracle.json is their stored answer.\n",
            src.display(),
            spec.extractor
                .params
                .get("parser")
                .and_then(|p| p.as_str())
                .unwrap_or("parser.py")
        )
    } else {
        format!(
            "# Imported from SWE-Flux's instance {} by `flux import swe-flux`: their question\n\
             # asked of flux's extractor `{}` (mapped from their answer shape, eval.sh and the\n\
             # question; flux_interop::native). swe-flux/oracle.json is their stored answer.\n",
            src.display(),
            spec.extractor.name
        )
    };
    std::fs::write(dir.join(INSTANCE_FILE), head + &text).map_err(|e| io(dir, e))
}

/// Copy `from`'s files (recursively, without `__pycache__`) into `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let rd = std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?;
    for e in rd {
        let e = e.map_err(|e| format!("{}: {e}", from.display()))?;
        let n = e.file_name();
        if n == "__pycache__" || n.to_string_lossy().ends_with(".pyc") {
            continue;
        }
        let (s, d) = (e.path(), to.join(&n));
        if s.is_dir() {
            std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
            copy_tree(&s, &d)?;
        } else {
            std::fs::copy(&s, &d).map_err(|e| format!("{}: {e}", s.display()))?;
        }
    }
    Ok(())
}
