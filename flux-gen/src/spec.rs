//! The generation spec, `sets/<name>/gen.toml`: which repositories (image, pins, where their
//! tests live), the seed, the quotas and the budgets. `flux gen` regenerates the set from it.
//!
//! Two stages as everywhere in flux: [`load`] parses and checks everything that can be checked
//! without running anything (names, pins, paths, quotas), so a bad spec fails before a
//! container starts, with the file and the field in the message.
use flux_extract::QuestionKind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file name of a set's spec.
pub const SPEC_FILE: &str = "gen.toml";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenSpec {
    /// The set's name: `sets/<name>/`, and `[generated] set` of every instance.
    pub name: String,
    /// Every seeded choice (modules, targets, parameters, which of equals is kept) derives
    /// from this and a stable key of the thing chosen, never from processing order.
    pub seed: u64,
    #[serde(default)]
    pub quotas: Quotas,
    #[serde(default)]
    pub budget: Budget,
    /// Which instances the third witness re-derives before they are kept (issue 23.1).
    #[serde(default, skip_serializing_if = "WitnessPolicy::is_off")]
    pub witness: WitnessPolicy,
    #[serde(rename = "repository")]
    pub repositories: Vec<RepoSpec>,
}

/// `[witness]`: the share of each kind's instances that the plain settrace reference
/// (`flux_harvest::witness`) re-derives from a run of its own, after the instance's own run
/// reproduced its gold; an instance it disagrees with, or cannot check, is not kept. The choice
/// is seeded by the instance's id (a function of the seed and the id, never of order).
///
/// ```toml
/// [witness]
/// sample = 0.1                                              # every kind: 10 %
/// kinds = { M5_Exceptions = 1.0, S5_Exceptions = 1.0 }      # these: all
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WitnessPolicy {
    /// Fraction (0 to 1) of every kind's instances witnessed.
    pub sample: f64,
    /// A kind's own fraction, instead of `sample`.
    pub kinds: std::collections::BTreeMap<QuestionKind, f64>,
}

impl WitnessPolicy {
    pub fn is_off(&self) -> bool {
        self.sample <= 0.0 && self.kinds.values().all(|f| *f <= 0.0)
    }

    /// The fraction of `kind` witnessed.
    pub fn fraction(&self, kind: QuestionKind) -> f64 {
        self.kinds.get(&kind).copied().unwrap_or(self.sample)
    }

    /// Is the instance `id` of `kind` witnessed (seeded)?
    pub fn chooses(&self, seed: u64, kind: QuestionKind, id: &str) -> bool {
        let f = self.fraction(kind);
        f >= 1.0
            || (f > 0.0
                && (crate::keyed::hash64(seed, &format!("witness/{id}")) as f64)
                    < f * u64::MAX as f64)
    }
}

/// How many instances of what the set keeps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Quotas {
    /// Instances kept per repository.
    pub per_repository: usize,
    /// Instances kept per test module.
    pub per_module: usize,
    /// Instances kept per source file of the targets.
    pub per_file: usize,
    /// Instances whose target is one function ("a function is the target of a few").
    pub per_function: usize,
    /// `per_file` across a repository's modules, in the set's selection (default: `per_file`).
    /// Phase 2 alone reads it, so changing it re-assembles the set from the module results
    /// without running a test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository_per_file: Option<usize>,
    /// `per_function` across a repository's modules, in the set's selection (default:
    /// `per_function`; phase 2 alone reads it). Modules that run one function in different
    /// tests each ask about it: with the module caps alone, a repository's later modules
    /// added little but questions about functions already taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository_per_function: Option<usize>,
    /// Planned questions per target function in one module (before screening).
    pub plan_per_function: usize,
    /// Target functions of one module's shared trace.
    pub targets_per_module: usize,
    /// The kinds generated (default: all 14).
    pub kinds: Vec<QuestionKind>,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            per_repository: 300,
            per_module: 40,
            per_file: 40,
            per_function: 4,
            repository_per_file: None,
            repository_per_function: None,
            plan_per_function: 8,
            targets_per_module: 24,
            kinds: QuestionKind::ALL.to_vec(),
        }
    }
}

/// Limits that keep one module's runs cheap and its answers readable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budget {
    /// Each run of a test module (scout, shared trace) must end within this.
    pub module_timeout_s: u64,
    /// Events a scout may record; a module over it is skipped (and reported).
    pub scout_events: usize,
    /// Estimated events of a module's shared trace: targets are added while under it.
    pub trace_events: usize,
    /// A function called more often than this in one module is not a target there.
    pub max_invocations: u64,
    /// Calls made under a target's frames (its subtree) in one module, at most.
    pub max_subtree_calls: u64,
    /// Largest answer kept (`flux_extract::answer_size`, scalar leaves).
    pub max_answer_size: usize,
    /// Tests named by one multi-test (M) question, at most.
    pub max_tests: usize,
    /// Call events a test may make in the scout run to be used at all (0: no limit). A test
    /// over it is left out of the module's shared trace and of every instance (`heavy-test`):
    /// under tracing each call costs a few microseconds, so one such test makes the shared
    /// trace and each own run that names it (the cross-check) cost seconds to minutes where
    /// the others cost a fraction of one.
    pub test_calls: u64,
    /// Instance runs at a time (the cross-check harvests), per module.
    pub jobs: usize,
    /// Modules in progress at a time.
    pub modules: usize,
    /// How a module's chosen instances share their own runs (see [`OwnRuns`]).
    pub own_runs: OwnRuns,
    /// How the exception kinds are drafted (see [`Exceptions`]).
    pub exceptions: Exceptions,
}

/// `[budget] exceptions`: how the exception kinds (S5, M5), the rare ones, are drafted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exceptions {
    /// Also on tests of their own where the tests chosen for all kinds miss the target's
    /// exceptions (`crate::draft::exception_tests`), and M5 also on an exception leaving the
    /// target where it raises none (`raising_tests` `escapes`).
    #[default]
    OwnAsks,
    /// Only on the tests chosen for all kinds, M5 only on the target's raises (how
    /// flux-gen-v1 was made).
    Shared,
}

/// `[budget] own_runs`: which of a module's chosen instances one own run (and one reference
/// run of the witness) checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OwnRuns {
    /// Those with the same tests: their configs are widened to the union of what they target
    /// (`crate::screen::share_own_runs`).
    #[default]
    PerTests,
    /// Those with the same tests and the same narrowed config (how flux-gen-v1 was made).
    PerConfig,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            module_timeout_s: 900,
            scout_events: 3_000_000,
            trace_events: 2_000_000,
            max_invocations: 400,
            max_subtree_calls: 20_000,
            max_answer_size: 120,
            max_tests: 4,
            test_calls: 500_000,
            jobs: 2,
            modules: 2,
            own_runs: OwnRuns::PerTests,
            exceptions: Exceptions::OwnAsks,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Test,
}

impl Split {
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "test",
        }
    }
}

/// One repository at a pinned version, in its image.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoSpec {
    /// `instances/<name>/`: the instances' `repository`. When `package`, `image`,
    /// `interpreter` or `root` is not given, it names the `[[repo]]` of `images.toml` they are
    /// inherited from ([`inherit_images`]).
    pub name: String,
    /// The package under test, `name==version`.
    #[serde(default)]
    pub package: String,
    #[serde(default)]
    pub image: String,
    /// The interpreter inside the image (by path).
    #[serde(default)]
    pub interpreter: String,
    /// The directory in the image pytest runs from as its rootdir: module paths and node ids
    /// are relative to it (`sympy/core/tests/test_arit.py::test_bug1`).
    #[serde(default)]
    pub root: String,
    /// Which of `images.toml`'s `[[repo]]`s named `name` the inherited facts come from, when
    /// it has several: its `version`, its base's Python (`"3.11"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The repository's own code, paths under `root` (`sympy/`): targets are functions there,
    /// and difficulty features count calls into it.
    pub code: Vec<String>,
    /// Globs (over paths under `root`) of files that are not targets: the tests themselves,
    /// conftest, testing helpers.
    #[serde(default = "default_not_targets")]
    pub not_targets: Vec<String>,
    /// Test modules (paths under `root`), in addition to `select`.
    #[serde(default)]
    pub modules: Vec<String>,
    /// A seeded choice of test modules from the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Select>,
    /// Which side of the train/test split its instances fall on.
    pub split: Split,
    /// Arguments given to pytest before the test paths.
    #[serde(default = "default_pytest_args")]
    pub pytest_args: Vec<String>,
    /// Tests (node ids, or node-id suffixes after `::`) never used: known to hang, to need the
    /// network, or to be too heavy to trace.
    #[serde(default)]
    pub skip_tests: Vec<String>,
    /// The runtime, as its probes describe it (default: CPython, pytest, the hook).
    #[serde(default, skip_serializing_if = "RuntimeSpec::is_python")]
    pub runtime: RuntimeSpec,
    /// When this version was released and the version before it (`flux gen --release`
    /// writes it; [`crate::release`]): stamped on every instance as `[generated.release]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<RepoRelease>,
}

/// `runtime = { probes = "hotspot", classes = [...], tests = "src/test/java/" }`: which runtime
/// runs the repository's tests, named by the provider of its probes. The runtime decides what a
/// trace can hold and so which questions can be asked ([`crate::runtime`]):
/// - `python` (default): CPython's probes and flux's hook; pytest modules; every kind.
/// - `hotspot`: HotSpot's `method__entry`/`method__return` probes, one witness, calls only;
///   JUnit test classes (modules are their `.java` files under `root`, the test sources under
///   `tests`); the call-structure kinds (S6, M6) alone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "probes", rename_all = "lowercase", deny_unknown_fields)]
pub enum RuntimeSpec {
    #[default]
    Python,
    Hotspot {
        /// Class-name prefixes the kernel keeps (`org.apache.commons.lang3.`): the project's.
        classes: Vec<String>,
        /// The test source root under `root` (`src/test/java/`): a test class's file is
        /// `<tests><package path>/<Class>.java`.
        tests: String,
    },
}

impl RuntimeSpec {
    pub fn is_python(&self) -> bool {
        matches!(self, RuntimeSpec::Python)
    }
}

/// `release = { date = "2025-08-19T19:34:51Z", source = "pypi:flask-3.1.2.tar.gz", previous =
/// "3.1.1", previous_image = "flux/flask:3.1.1-py3.11" }`: the pinned version's release date,
/// where it came from, and the release the set held before (its image: the source its targets
/// are compared with).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoRelease {
    pub date: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_image: Option<String>,
}

/// `select = { glob = "sympy/*/tests/test_*.py", count = 20 }`: `count` modules matching
/// `glob` (and none of `exclude`), chosen with the seed from the image's files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Select {
    pub glob: String,
    pub count: usize,
    #[serde(default)]
    pub exclude: Vec<String>,
}

fn default_not_targets() -> Vec<String> {
    vec![
        "*/tests/*".into(),
        "*/test_*.py".into(),
        "*/conftest.py".into(),
        "*/testing/*".into(),
    ]
}

fn default_pytest_args() -> Vec<String> {
    vec!["-q".into(), "-p".into(), "no:cacheprovider".into()]
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Parse { path: PathBuf, msg: String },
    #[error("{path}: field `{field}`: {problem}")]
    Invalid {
        path: PathBuf,
        field: String,
        problem: String,
    },
}

/// Read and check `gen.toml` (a file, or a set directory holding one).
pub fn load(path: &Path) -> Result<GenSpec, SpecError> {
    let file = if path.is_dir() {
        path.join(SPEC_FILE)
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).map_err(|source| SpecError::Io {
        path: file.clone(),
        source,
    })?;
    parse(&text, &file)
}

/// Parse and check spec text (`path` names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<GenSpec, SpecError> {
    let mut spec: GenSpec = toml::from_str(text).map_err(|e| SpecError::Parse {
        path: path.to_path_buf(),
        msg: e.to_string().trim_end().to_string(),
    })?;
    let inherits = |r: &RepoSpec| {
        [&r.package, &r.image, &r.interpreter, &r.root]
            .iter()
            .any(|f| f.is_empty())
    };
    if spec.repositories.iter().any(inherits) {
        let start = path.parent().unwrap_or(Path::new("."));
        let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
        let (defs, from) =
            flux_container::images::Definitions::find(None, &start).map_err(|e| {
                SpecError::Invalid {
                    path: path.to_path_buf(),
                    field: "repository".into(),
                    problem: format!("its images.toml does not load: {e}"),
                }
            })?;
        for r in spec.repositories.iter_mut().filter(|r| inherits(r)) {
            inherit_images(r, &defs).map_err(|problem| SpecError::Invalid {
                path: path.to_path_buf(),
                field: format!("repository `{}`", r.name),
                problem: format!("{problem} (images: {})", from.display()),
            })?;
        }
    }
    check(&spec, path)?;
    Ok(spec)
}

/// Fills what a repository entry leaves out from the `[[repo]]` of `defs` that `name` (and
/// `version`, `python` where given) names: `package` its distribution at its version, `image`
/// its image, `interpreter` its base's, `root` `/testbed` (where every repository image holds
/// its source). What the entry gives is kept.
pub fn inherit_images(
    r: &mut RepoSpec,
    defs: &flux_container::images::Definitions,
) -> Result<(), String> {
    let found: Vec<_> = defs
        .repos
        .iter()
        .filter(|d| d.name == r.name)
        .filter(|d| r.version.as_ref().is_none_or(|v| v == &d.version))
        .filter_map(|d| Some((d, defs.base(&d.base)?)))
        .filter(|(_, b)| r.python.as_ref().is_none_or(|p| p == &b.python))
        .collect();
    let (d, base) = match found.as_slice() {
        [one] => *one,
        [] => return Err("images.toml has no [[repo]] of that name (and version, python)".into()),
        more => {
            let which: Vec<String> = more.iter().map(|(d, b)| d.image(b)).collect();
            return Err(format!(
                "images.toml has {} such [[repo]]s ({}): give `version` or `python`",
                more.len(),
                which.join(", ")
            ));
        }
    };
    let fill = |f: &mut String, v: String| {
        if f.is_empty() {
            *f = v;
        }
    };
    fill(&mut r.package, format!("{}=={}", d.package(), d.version));
    fill(&mut r.image, d.image(base));
    fill(&mut r.interpreter, base.interpreter.clone());
    fill(&mut r.root, "/testbed".into());
    Ok(())
}

fn check(spec: &GenSpec, path: &Path) -> Result<(), SpecError> {
    let bad = |field: String, problem: String| SpecError::Invalid {
        path: path.to_path_buf(),
        field,
        problem,
    };
    if !plain_name(&spec.name) {
        return Err(bad(
            "name".into(),
            format!("`{}` must be a plain directory name", spec.name),
        ));
    }
    if spec.repositories.is_empty() {
        return Err(bad("repository".into(), "lists no repository".into()));
    }
    let q = &spec.quotas;
    for (field, v) in [
        ("quotas.per_repository", q.per_repository),
        ("quotas.per_module", q.per_module),
        ("quotas.per_file", q.per_file),
        ("quotas.per_function", q.per_function),
        ("quotas.plan_per_function", q.plan_per_function),
        (
            "quotas.repository_per_file",
            q.repository_per_file.unwrap_or(q.per_file),
        ),
        (
            "quotas.repository_per_function",
            q.repository_per_function.unwrap_or(q.per_function),
        ),
        ("quotas.targets_per_module", q.targets_per_module),
        ("budget.max_answer_size", spec.budget.max_answer_size),
        ("budget.jobs", spec.budget.jobs),
        ("budget.modules", spec.budget.modules),
        ("budget.scout_events", spec.budget.scout_events),
        ("budget.trace_events", spec.budget.trace_events),
    ] {
        if v == 0 {
            return Err(bad(field.into(), "must be at least 1".into()));
        }
    }
    if spec.budget.module_timeout_s == 0 {
        return Err(bad(
            "budget.module_timeout_s".into(),
            "must be at least 1 (0 ends every run at once: every module would be skipped)".into(),
        ));
    }
    if spec.budget.max_tests < 2 {
        return Err(bad(
            "budget.max_tests".into(),
            "must be at least 2 (a multi-test question names two tests or more)".into(),
        ));
    }
    if q.kinds.is_empty() {
        return Err(bad("quotas.kinds".into(), "lists no kind".into()));
    }
    let w = &spec.witness;
    for (field, f) in std::iter::once(("witness.sample".to_string(), w.sample)).chain(
        w.kinds
            .iter()
            .map(|(k, f)| (format!("witness.kinds.{}", k.as_str()), *f)),
    ) {
        if !(0.0..=1.0).contains(&f) {
            return Err(bad(field, format!("{f} is not a fraction from 0 to 1")));
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, r) in spec.repositories.iter().enumerate() {
        let f = |k: &str| format!("repository[{i}].{k}");
        if !plain_name(&r.name) {
            return Err(bad(
                f("name"),
                format!("`{}` must be a plain directory name", r.name),
            ));
        }
        if !names.insert(r.name.clone()) {
            return Err(bad(f("name"), format!("`{}` appears twice", r.name)));
        }
        match r.package.split_once("==") {
            Some((n, v)) if !n.trim().is_empty() && !v.trim().is_empty() => {}
            _ => {
                return Err(bad(
                    f("package"),
                    format!("`{}` is not pinned as name==version", r.package),
                ))
            }
        }
        for (k, v) in [("image", &r.image), ("interpreter", &r.interpreter)] {
            if v.trim().is_empty() {
                return Err(bad(f(k), "must not be empty".into()));
            }
        }
        if !r.root.starts_with('/') || r.root.contains("/..") {
            return Err(bad(
                f("root"),
                format!("`{}` must be an absolute path in the image", r.root),
            ));
        }
        if r.code.is_empty() {
            return Err(bad(
                f("code"),
                "lists no path of the repository's code".into(),
            ));
        }
        for m in r.code.iter().chain(&r.modules) {
            if m.starts_with('/') || m.split('/').any(|c| c == "..") {
                return Err(bad(
                    f("modules"),
                    format!("`{m}` must be a path under `root`, without `..`"),
                ));
            }
        }
        if let Some(rel) = &r.release {
            if flux_instance::release_day(&rel.date).is_none() {
                return Err(bad(
                    f("release.date"),
                    format!("`{}` is not a date (YYYY-MM-DD, or ISO 8601)", rel.date),
                ));
            }
        }
        if r.modules.is_empty() && r.select.is_none() {
            return Err(bad(
                f("modules"),
                "no test module: give `modules` or `select`".into(),
            ));
        }
        if let RuntimeSpec::Hotspot { classes, tests } = &r.runtime {
            if classes.is_empty() || classes.len() > 8 {
                return Err(bad(
                    f("runtime.classes"),
                    "lists 1 to 8 class prefixes (the kernel's filter)".into(),
                ));
            }
            if tests.starts_with('/') || tests.split('/').any(|c| c == "..") {
                return Err(bad(
                    f("runtime.tests"),
                    format!("`{tests}` must be a path under `root`, without `..`"),
                ));
            }
        }
        if let Some(s) = &r.select {
            if s.count == 0 || s.glob.trim().is_empty() {
                return Err(bad(
                    f("select"),
                    "needs a glob and a count of at least 1".into(),
                ));
            }
        }
    }
    Ok(())
}

fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

impl RepoSpec {
    /// `(name, version)` of the package.
    pub fn name_version(&self) -> (&str, &str) {
        let (n, v) = self.package.split_once("==").unwrap_or((&self.package, ""));
        (n.trim(), v.trim())
    }

    /// The path of `rel` (under `root`) in the image.
    pub fn in_image(&self, rel: &str) -> String {
        format!("{}/{}", self.root.trim_end_matches('/'), rel)
    }

    /// Is `rel` (a path under `root`) the repository's own code, and not a test?
    pub fn is_target_file(&self, rel: &str) -> bool {
        self.code.iter().any(|c| rel.starts_with(c.as_str()))
            && !self
                .not_targets
                .iter()
                .any(|g| glob_match(g, rel) || glob_match(g, &format!("/{rel}")))
    }

    /// `abs` (a file path as the interpreter saw it) relative to `root`, if it lies there. A
    /// JVM names a method's file relative to its source root already
    /// (`org/apache/commons/lang3/StringUtils.java`, `flux_merge::jvm`): kept as it is.
    pub fn relative<'a>(&self, abs: &'a str) -> Option<&'a str> {
        if !self.runtime.is_python() {
            return (!abs.starts_with('/')).then_some(abs);
        }
        let root = self.root.trim_end_matches('/');
        abs.strip_prefix(root)?.strip_prefix('/')
    }

    /// Should the test `nodeid` be left out?
    pub fn skips(&self, nodeid: &str) -> bool {
        self.skip_tests
            .iter()
            .any(|s| flux_trace::query::test_matches(nodeid, s))
    }
}

/// `*` matches any run of characters (`/` included), `?` one character.
pub fn glob_match(pat: &str, s: &str) -> bool {
    let (p, s) = (pat.as_bytes(), s.as_bytes());
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || (p[pi] != b'*' && p[pi] == s[si])) {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const GOOD: &str = r#"
name = "mini"
seed = 7

[quotas]
per_module = 10

[[repository]]
name = "sympy"
package = "sympy==1.13.3"
image = "flux/sympy:1.13.3-py3.11"
interpreter = "/usr/bin/python3.11"
root = "/usr/local/lib/python3.11/dist-packages"
code = ["sympy/"]
modules = ["sympy/ntheory/tests/test_factor_.py"]
split = "test"
"#;

    /// Issue 26.3: every gen entry wrote its image, package, interpreter and root a second
    /// time beside images.toml's. An entry that leaves them out inherits its `[[repo]]`'s.
    #[test]
    fn an_entry_inherits_its_image_package_interpreter_and_root_from_images_toml() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets/some-set/gen.toml");
        let entry = |extra: &str| {
            format!(
                "name = \"s\"\nseed = 1\n[[repository]]\nname = \"{extra}code = [\"src/\"]\n\
                 modules = [\"tests/test_a.py\"]\nsplit = \"test\"\n"
            )
        };
        let s = parse(&entry("flask\"\n"), &here).unwrap();
        let r = &s.repositories[0];
        assert_eq!(r.name_version(), ("flask", "3.1.3"));
        assert_eq!(r.image, "flux/flask:3.1.3-py3.11");
        assert_eq!(r.interpreter, "/usr/bin/python3.11");
        assert_eq!(r.root, "/testbed");
        // sympy has an image per Python: which one must be said.
        let e = parse(&entry("sympy\"\n"), &here).unwrap_err().to_string();
        assert!(
            e.contains("flux/sympy:1.13.3-py3.11") && e.contains("python"),
            "{e}"
        );
        let s = parse(&entry("sympy\"\npython = \"3.15\"\n"), &here).unwrap();
        let r = &s.repositories[0];
        assert_eq!(r.image, "flux/sympy:1.13.3-py3.15");
        assert_eq!(r.interpreter, "/usr/bin/python3.15");
        // What the entry gives wins; an unknown name is an error naming it.
        let s = parse(&entry("flask\"\nroot = \"/src\"\n"), &here).unwrap();
        assert_eq!(s.repositories[0].root, "/src");
        let e = parse(&entry("no-such-repo\"\n"), &here)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no-such-repo") && e.contains("no [[repo]]"),
            "{e}"
        );
    }

    /// flux-gen-v2's spec (issue 26.3): ≥ 30 repositories, split by repository, each entry's
    /// image defined in images.toml (inherited, or named and then defined there).
    #[test]
    fn flux_gen_v2_names_30_repositories_each_with_an_image_definition() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let spec = load(&root.join("sets/flux-gen-v2")).unwrap();
        assert!(spec.repositories.len() >= 30, "{}", spec.repositories.len());
        let defs =
            flux_container::images::Definitions::load(&root.join("images/images.toml")).unwrap();
        let images: std::collections::BTreeSet<String> = defs
            .repos
            .iter()
            .filter_map(|d| Some(d.image(defs.base(&d.base)?)))
            .collect();
        for r in &spec.repositories {
            assert!(images.contains(&r.image), "{}: {}", r.name, r.image);
        }
        let test = spec
            .repositories
            .iter()
            .filter(|r| r.split == Split::Test)
            .count();
        assert!(
            test >= 8 && test < spec.repositories.len() / 2,
            "{test} on the test side"
        );
    }

    #[test]
    fn a_good_spec_loads_with_defaults() {
        let s = parse(GOOD, Path::new("gen.toml")).unwrap();
        assert_eq!(s.quotas.per_module, 10);
        assert_eq!(s.quotas.per_function, Quotas::default().per_function);
        assert_eq!(s.quotas.kinds.len(), 14);
        let r = &s.repositories[0];
        assert_eq!(r.name_version(), ("sympy", "1.13.3"));
        assert_eq!(r.pytest_args, ["-q", "-p", "no:cacheprovider"]);
        assert!(r.is_target_file("sympy/ntheory/factor_.py"));
        assert!(!r.is_target_file("sympy/ntheory/tests/test_factor_.py"));
        assert!(!r.is_target_file("sympy/testing/pytest.py"));
        assert!(!r.is_target_file("mpmath/ctx_base.py"));
        assert_eq!(
            r.relative("/usr/local/lib/python3.11/dist-packages/sympy/core/add.py"),
            Some("sympy/core/add.py")
        );
        assert_eq!(r.relative("/usr/lib/python3.11/os.py"), None);
    }

    #[test]
    fn bad_specs_name_the_field() {
        let cases = [
            (
                GOOD.replace("seed = 7", "seed = 7\ncolour = 1"),
                "unknown field `colour`",
            ),
            (
                GOOD.replace("sympy==1.13.3", "sympy"),
                "field `repository[0].package`",
            ),
            (
                GOOD.replace("per_module = 10", "per_module = 0"),
                "field `quotas.per_module`",
            ),
            (
                GOOD.replace("/usr/local/lib/python3.11/dist-packages", "lib"),
                "field `repository[0].root`",
            ),
            (
                GOOD.replace("modules = [\"sympy/ntheory/tests/test_factor_.py\"]", ""),
                "no test module",
            ),
            (
                GOOD.replace("name = \"mini\"", "name = \"a/b\""),
                "field `name`",
            ),
            (
                GOOD.replace("split = \"test\"", "split = \"dev\""),
                "unknown variant `dev`",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text, Path::new("sets/x/gen.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("sets/x/gen.toml: "), "{e}");
            assert!(e.contains(want), "want {want:?} in {e}");
        }
    }

    /// `module_timeout_s = 0` was accepted: every run ended at once, every module was skipped
    /// and the set was rewritten empty (issue 26.6).
    #[test]
    fn module_timeout_zero_is_refused_before_anything_runs() {
        let text = GOOD.replace(
            "[[repository]]",
            "[budget]\nmodule_timeout_s = 0\n\n[[repository]]",
        );
        let e = parse(&text, Path::new("sets/x/gen.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `budget.module_timeout_s`"), "{e}");
    }

    /// `[witness]`: fractions per kind, seeded by id; 1.0 takes every instance, 0 none, and a
    /// fraction outside 0..1 is refused naming the field.
    #[test]
    fn the_witness_policy_samples_by_id_and_kind() {
        let text = GOOD.replace(
            "[[repository]]",
            "[witness]\nsample = 0.25\nkinds = { M5_Exceptions = 1.0, S1_IntraProceduralCFG = 0.0 }\n\n[[repository]]",
        );
        let s = parse(&text, Path::new("gen.toml")).unwrap();
        let w = &s.witness;
        let ids: Vec<String> = (0..400).map(|i| format!("x-{i}")).collect();
        let n = |k| ids.iter().filter(|id| w.chooses(s.seed, k, id)).count();
        assert_eq!(n(QuestionKind::M5), 400);
        assert_eq!(n(QuestionKind::S1), 0);
        let some = n(QuestionKind::S3);
        assert!((60..=140).contains(&some), "{some} of 400 at 0.25");
        // Seeded by the id alone: the same ids whatever the order asked in.
        let mut rev = ids.clone();
        rev.reverse();
        assert_eq!(
            rev.iter()
                .filter(|id| w.chooses(s.seed, QuestionKind::S3, id))
                .count(),
            some
        );
        assert!(parse(GOOD, Path::new("gen.toml")).unwrap().witness.is_off());
        let bad = GOOD.replace(
            "[[repository]]",
            "[witness]\nsample = 1.5\n\n[[repository]]",
        );
        let e = parse(&bad, Path::new("gen.toml")).unwrap_err().to_string();
        assert!(e.contains("field `witness.sample`"), "{e}");
    }

    #[test]
    fn globs_match_paths() {
        assert!(glob_match(
            "sympy/*/tests/test_*.py",
            "sympy/core/tests/test_arit.py"
        ));
        assert!(!glob_match("sympy/*/tests/test_*.py", "sympy/core/add.py"));
        assert!(glob_match("*/tests/*", "/sympy/core/tests/x.py"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
    }
}
