//! Reproducible, locally built images: definitions as data (`images/images.toml`), built without
//! a registry.
//!
//! * A base image per interpreter: `debootstrap --variant=minbase --include=<packages>` into a
//!   cached rootfs (`/var/cache/flux/rootfs/<rootfs>`), `tar | docker import`, then one probe
//!   container (interpreter version, Debian package list, stdlib digest) committed with the
//!   manifest label ([`base`]).
//! * A layer per repository ([`repo`]): wheels resolved and downloaded on the host (`pip
//!   download`, pinned `==` requirements, sha256 recorded) into
//!   `.flux-cache/wheelhouse/<repo>-<version>-py<X.Y>/`; the package's source (its sdist, else
//!   a pure-Python wheel's files) fetched and unpacked on the host into
//!   `.flux-cache/src/<package>-<version>/` ([`source`]); in a container of the base (network
//!   off) the wheels installed offline (pip run from its own wheel, since Debian's `python3.X`
//!   may have no pip), the source tree copied to `/testbed` ([`source::TESTBED`]), the
//!   package's importable files removed from site-packages once checked byte-identical to the
//!   tree's and a `.pth` put in their place, so that the package imports from `/testbed` (or
//!   `/testbed/src`) — the files a trace names are the files a model is shown — the tree
//!   byte-compiled and made read-only, user `flux` (uid 1000) added, then `docker commit`.
//! * A repository's own test suite runs in its image offline ([`suite`], `flux images test`).
//!
//! Each image's manifest (image id, content identity, interpreter path and version, `pip
//! freeze`, suite, debootstrap date, wheel and source hashes, definition hash) is written to
//! `.flux-cache/images/<name>.json` and carried by the image as label `flux.manifest` (without
//! the image id, which cannot be known before the image exists). The identity ([`identity`]) is
//! a digest of the image's content that two builds of one definition share, unlike Docker's id.
//! Building is incremental: an image is skipped while its manifest matches its definition and
//! this builder's schema, and its image id still exists.
//!
//! Architecture invariant: this module shells out only to `debootstrap`, `tar`, `docker import`
//! and the host's Python (`-m pip download`, and `py/fetch_source.py`); everything else goes
//! through [`Runtime`]. The Python helpers are compiled into the binary, so `flux images build`
//! works outside a checkout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::runtime::{ContainerSpec, Mount, Runtime};

pub mod archive;
mod base;
pub mod identity;
pub mod java;
mod repo;
pub mod source;
pub mod suite;

// The one "how to build this image" text lives beside the error that carries it, so the runtime
// names a missing image without depending on the images.
pub use crate::error::build_hint;
pub use identity::{check_pins, IdentityInputs, PinMismatch, TreeDigest};
pub use java::JavaDef;
pub use repo::resolve_pins;
pub use source::{SourceInfo, TESTBED};

/// Label carrying the manifest JSON (without `image_id`).
pub const LABEL_MANIFEST: &str = "flux.manifest";
/// Label carrying the definition hash.
pub const LABEL_DEFINITION: &str = "flux.definition";
/// Label carrying the content identity (`flux-id:…`).
pub const LABEL_IDENTITY: &str = "flux.identity";
/// 2: content identity, source tree at /testbed, test suites.
const MANIFEST_SCHEMA: u32 = 2;
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The project's image definitions, compiled in: what `flux images build` uses when no
/// `images/images.toml` is at hand (outside a checkout).
pub const BUILTIN_DEFINITIONS: &str = include_str!("../../../images/images.toml");
/// Helpers run in images (`digest`, `adopt`), mounted at [`TOOLS_IN_CONTAINER`].
pub(crate) const IMAGE_TOOLS: &str = include_str!("py/image_tools.py");
/// The pytest plugin of [`suite`].
pub(crate) const TESTREPORT_PLUGIN: &str = include_str!("py/flux_testreport.py");
/// JUnit's XML reports as the plugin's lines, for a Java project's suite ([`java`]).
pub(crate) const JUNIT_REPORT: &str = include_str!("py/junit_report.py");
pub(crate) const TOOLS_IN_CONTAINER: &str = "/flux/tools";

fn default_mirror() -> String {
    "http://deb.debian.org/debian".to_owned()
}
fn default_rootfs_cache() -> PathBuf {
    PathBuf::from("/var/cache/flux/rootfs")
}
fn default_host_python() -> String {
    "python3".to_owned()
}
fn default_namespace() -> String {
    "flux".to_owned()
}
pub(crate) fn default_true() -> bool {
    true
}

/// The whole `images.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Definitions {
    #[serde(default)]
    pub settings: Settings,
    #[serde(rename = "base", default)]
    pub bases: Vec<BaseDef>,
    #[serde(rename = "repo", default)]
    pub repos: Vec<RepoDef>,
    /// Java projects (`[[java]]`, see [`java`]).
    #[serde(rename = "java", default, skip_serializing_if = "Vec::is_empty")]
    pub javas: Vec<JavaDef>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default = "default_mirror")]
    pub mirror: String,
    #[serde(default = "default_rootfs_cache")]
    pub rootfs_cache: PathBuf,
    /// Host interpreter whose pip resolves and downloads wheels.
    #[serde(default = "default_host_python")]
    pub host_python: String,
    /// Docker repository namespace of every image (`flux/base:…`, `flux/<repo>:…`). Another
    /// namespace builds the same definitions side by side without touching `flux/` images.
    #[serde(default = "default_namespace")]
    pub namespace: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mirror: default_mirror(),
            rootfs_cache: default_rootfs_cache(),
            host_python: default_host_python(),
            namespace: default_namespace(),
        }
    }
}

/// A base image `<namespace>/base:<name>`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BaseDef {
    /// The tag, e.g. `py3.11-bookworm`.
    pub name: String,
    pub suite: String,
    /// `X.Y` (empty for a JDK base).
    #[serde(default)]
    pub python: String,
    /// A JDK base: the feature release (`17`); `interpreter` is then its `bin/java`, and
    /// Python (for flux's image tools) is one of its packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub java: Option<String>,
    pub interpreter: String,
    /// Debian packages for `debootstrap --include`.
    pub packages: Vec<String>,
    /// Directory name under `settings.rootfs_cache`.
    pub rootfs: String,
    /// Built by `flux images build` without names; otherwise only when named.
    #[serde(default = "default_true")]
    pub default: bool,
    /// `settings.namespace`, filled in by [`Definitions::parse`].
    #[serde(skip)]
    pub namespace: String,
}

/// A repository layer `<namespace>/<name>:<version>-py<X.Y>`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RepoDef {
    pub name: String,
    pub version: String,
    /// The distribution under test, one of `requirements` pinned at `version` (default:
    /// `name`). Its source is unpacked at `/testbed` and imported from there; an instance's
    /// `package` names it.
    #[serde(default)]
    pub package: Option<String>,
    /// Name of a `[[base]]`.
    pub base: String,
    /// Pinned requirements (`name==version` each): package, test deps, pytest.
    pub requirements: Vec<String>,
    /// The pip used to install offline (pinned), run from its wheel.
    pub pip: String,
    /// Python statements run in the image after install, e.g. `import sympy, pytest`.
    #[serde(default)]
    pub smoke: Option<String>,
    /// Built by `flux images build` without names (and by CI); otherwise only when named,
    /// alone or through one of its `groups`.
    #[serde(default = "default_true")]
    pub default: bool,
    /// Names that select several repositories at once (`flux images build swe-flux`).
    #[serde(default)]
    pub groups: Vec<String>,
    /// How to run the repository's own test suite in the image (`flux images test`).
    #[serde(default)]
    pub tests: Option<TestsDef>,
    /// Directories of `/testbed` that the test suite writes into (scrapy's conftest generates
    /// TLS keys in `tests/keys`): owned by uid 1000 and writable, the rest stays read-only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// `settings.namespace`, filled in by [`Definitions::parse`].
    #[serde(skip)]
    pub namespace: String,
}

/// A repository's own test suite: `python -m pytest -p no:cacheprovider <args> <paths>` in
/// `/testbed`, as uid 1000, network off.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TestsDef {
    /// Test files or directories, relative to `/testbed`.
    pub paths: Vec<String>,
    /// Extra pytest arguments (`--ignore=…`, `-o addopts=`, `-m "not slow"`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Deadline of the whole run (default 3600 s); tests not reached are reported as such.
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

impl BaseDef {
    pub fn image(&self) -> String {
        let ns = if self.namespace.is_empty() {
            "flux"
        } else {
            &self.namespace
        };
        format!("{ns}/base:{}", self.name)
    }
}

impl RepoDef {
    pub fn image(&self, base: &BaseDef) -> String {
        let ns = if self.namespace.is_empty() {
            "flux"
        } else {
            &self.namespace
        };
        format!("{ns}/{}:{}-py{}", self.name, self.version, base.python)
    }
    fn wheelhouse_name(&self, base: &BaseDef) -> String {
        format!("{}-{}-py{}", self.name, self.version, base.python)
    }
    /// The distribution under test.
    pub fn package(&self) -> &str {
        self.package.as_deref().unwrap_or(&self.name)
    }
}

impl Definitions {
    /// Reads and [`parse`](Self::parse)s `path`. `$FLUX_IMAGE_NAMESPACE`, when set, replaces
    /// `settings.namespace` (build the same definitions beside the `flux/` images, e.g. to try
    /// a builder change on a machine others use).
    pub fn load(path: &Path) -> Result<Definitions> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        Self::parse_with_env(&text, path)
    }

    fn parse_with_env(text: &str, path: &Path) -> Result<Definitions> {
        let mut defs = Self::parse(text, path)?;
        if let Some(ns) = std::env::var_os("FLUX_IMAGE_NAMESPACE") {
            let ns = ns.to_string_lossy().into_owned();
            defs.settings.namespace = ns.clone();
            let text = toml::to_string(&defs).map_err(|e| Error::Definition {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
            defs = Self::parse(&text, path)?;
        }
        Ok(defs)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Definitions> {
        let bad = |message: String| Error::Definition {
            path: path.to_owned(),
            message,
        };
        let mut defs: Definitions = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        let ns = defs.settings.namespace.clone();
        let ns_ok = !ns.is_empty()
            && ns
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
        if !ns_ok {
            return Err(bad(format!(
                "settings.namespace {ns:?} is not a Docker repository name (a-z, 0-9, . _ -)"
            )));
        }
        for b in &mut defs.bases {
            b.namespace = ns.clone();
        }
        for r in &mut defs.repos {
            r.namespace = ns.clone();
        }
        for j in &mut defs.javas {
            j.namespace = ns.clone();
        }
        let mut seen = std::collections::BTreeSet::new();
        for b in &defs.bases {
            if !seen.insert(b.image()) {
                return Err(bad(format!("base {} defined twice", b.name)));
            }
            if let Some(v) = &b.java {
                if !b.python.is_empty() || !b.interpreter.ends_with("/bin/java") {
                    return Err(bad(format!(
                        "base {}: a JDK base (java {v}) has no `python` and a .../bin/java \
                         interpreter, not {}",
                        b.name, b.interpreter
                    )));
                }
            } else if !b.interpreter.ends_with(&format!("python{}", b.python)) {
                return Err(bad(format!(
                    "base {}: interpreter {} is not python{}",
                    b.name, b.interpreter, b.python
                )));
            }
        }
        for j in &defs.javas {
            let base = defs
                .base(&j.base)
                .ok_or_else(|| bad(format!("java {}: unknown base {}", j.name, j.base)))?;
            j.check(base).map_err(bad)?;
            if !seen.insert(j.image(base)) {
                return Err(bad(format!("java {} {} defined twice", j.name, j.version)));
            }
        }
        let names: std::collections::BTreeSet<&str> = defs
            .bases
            .iter()
            .map(|b| b.name.as_str())
            .chain(defs.repos.iter().map(|r| r.name.as_str()))
            .chain(defs.javas.iter().map(|j| j.name.as_str()))
            .collect();
        for r in &defs.repos {
            let base = defs
                .base(&r.base)
                .ok_or_else(|| bad(format!("repo {}: unknown base {}", r.name, r.base)))?;
            if !seen.insert(r.image(base)) {
                return Err(bad(format!("repo {} {} defined twice", r.name, r.version)));
            }
            for req in r.requirements.iter().chain(std::iter::once(&r.pip)) {
                let pinned = req.split_once("==").is_some_and(|(n, v)| {
                    !n.trim().is_empty() && !v.trim().is_empty() && !v.contains('*')
                });
                if !pinned {
                    return Err(bad(format!(
                        "repo {}: requirement {req:?} is not pinned with ==",
                        r.name
                    )));
                }
            }
            let package = r.package();
            let pin = r.requirements.iter().find_map(|q| {
                let (n, v) = q.split_once("==")?;
                (repo::normalize_project(n) == repo::normalize_project(package)).then(|| v.trim())
            });
            match pin {
                Some(v) if v == r.version => {}
                Some(v) => {
                    return Err(bad(format!(
                        "repo {}: version {} but its package {package} is pinned =={v}",
                        r.name, r.version
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "repo {}: its package {package} is not among its requirements \
                         (set `package` to the distribution under test)",
                        r.name
                    )))
                }
            }
            if let Some(g) = r.groups.iter().find(|g| names.contains(g.as_str())) {
                return Err(bad(format!(
                    "repo {}: group {g:?} is also the name of an image",
                    r.name
                )));
            }
            if r.writable
                .iter()
                .any(|p| p.is_empty() || p.starts_with('/') || p.contains(".."))
            {
                return Err(bad(format!(
                    "repo {}: writable must be relative paths inside /testbed",
                    r.name
                )));
            }
            if let Some(t) = &r.tests {
                if t.paths.is_empty()
                    || t.paths
                        .iter()
                        .any(|p| p.starts_with('/') || p.contains(".."))
                {
                    return Err(bad(format!(
                        "repo {}: tests.paths must be relative paths inside /testbed",
                        r.name
                    )));
                }
            }
        }
        Ok(defs)
    }

    pub fn base(&self, name: &str) -> Option<&BaseDef> {
        self.bases.iter().find(|b| b.name == name)
    }

    /// What to say about a name no definition builds: no stanza defines it (add one), the
    /// nearest defined names, then every name once.
    fn no_such_image(&self, name: &str) -> String {
        let mut known: Vec<String> = Vec::new();
        let names = self
            .bases
            .iter()
            .map(|b| b.name.clone())
            .chain(self.repos.iter().map(|r| r.name.clone()))
            .chain(self.repos.iter().flat_map(|r| r.groups.iter().cloned()))
            .chain(self.javas.iter().map(|j| j.name.clone()))
            .chain(self.javas.iter().flat_map(|j| j.groups.iter().cloned()));
        for n in names {
            if !known.contains(&n) {
                known.push(n);
            }
        }
        // Nearest by edit distance, over names and the full image names they build.
        let images = self
            .bases
            .iter()
            .map(BaseDef::image)
            .chain(
                self.repos
                    .iter()
                    .filter_map(|r| Some(r.image(self.base(&r.base)?))),
            )
            .chain(
                self.javas
                    .iter()
                    .filter_map(|j| Some(j.image(self.base(&j.base)?))),
            );
        let mut near: Vec<(usize, String)> = known
            .iter()
            .cloned()
            .chain(images)
            .map(|c| (edit_distance(name, &c), c))
            .filter(|(d, _)| *d <= name.chars().count() / 2 + 2)
            .collect();
        near.sort();
        near.dedup_by(|a, b| a.1 == b.1);
        let mean: Vec<String> = near
            .into_iter()
            .take(3)
            .map(|(_, c)| format!("`{c}`"))
            .collect();
        let mean = if mean.is_empty() {
            String::new()
        } else {
            format!(" (did you mean {}?)", mean.join(", "))
        };
        format!(
            "no image named {name:?}: no definition builds it{mean}; to build another version or \
             repository, add a `[[repo]]` stanza to images/images.toml. Defined: {}",
            known.join(", ")
        )
    }

    /// Resolves names to build targets, bases first; a repo brings its base. A name is a repo
    /// (`sympy`: every image of it), an image (`flux/sympy:1.13.3-py3.11`), a base
    /// (`py3.11-bookworm`, `base:py3.11-bookworm`, `flux/base:py3.11-bookworm`) or a group of
    /// repos (`swe-flux`). No names: the default bases and the default repos.
    pub fn select(&self, names: &[String], path: &Path) -> Result<Vec<Target>> {
        let mut bases: Vec<&BaseDef> = Vec::new();
        let mut repos: Vec<&RepoDef> = Vec::new();
        let mut javas: Vec<&JavaDef> = Vec::new();
        fn add_base<'a>(bases: &mut Vec<&'a BaseDef>, b: &'a BaseDef) {
            if !bases.contains(&b) {
                bases.push(b)
            }
        }
        if names.is_empty() {
            for b in self.bases.iter().filter(|b| b.default) {
                add_base(&mut bases, b);
            }
            repos.extend(self.repos.iter().filter(|r| r.default));
            javas.extend(self.javas.iter().filter(|j| j.default));
        }
        let ns_prefix = format!("{}/", self.settings.namespace);
        for name in names {
            let n = name.strip_prefix(&ns_prefix).unwrap_or(name);
            let n = n.strip_prefix("base:").unwrap_or(n);
            if let Some(b) = self
                .bases
                .iter()
                .find(|b| b.name == n || b.image() == *name)
            {
                add_base(&mut bases, b);
                continue;
            }
            let matching: Vec<&RepoDef> = self
                .repos
                .iter()
                .filter(|r| {
                    r.name == n
                        || r.groups.iter().any(|g| g == n)
                        || self.base(&r.base).is_some_and(|b| r.image(b) == *name)
                })
                .collect();
            let java_matching: Vec<&JavaDef> = self
                .javas
                .iter()
                .filter(|j| {
                    j.name == n
                        || j.groups.iter().any(|g| g == n)
                        || self.base(&j.base).is_some_and(|b| j.image(b) == *name)
                })
                .collect();
            for j in &java_matching {
                if !javas.contains(j) {
                    javas.push(j);
                }
            }
            if matching.is_empty() && !java_matching.is_empty() {
                continue;
            }
            if matching.is_empty() {
                return Err(Error::Definition {
                    path: path.to_owned(),
                    message: self.no_such_image(name),
                });
            }
            for r in matching {
                if !repos.contains(&r) {
                    repos.push(r);
                }
            }
        }
        for r in &repos {
            let b = self.base(&r.base).expect("validated in parse");
            add_base(&mut bases, b);
        }
        for j in &javas {
            let b = self.base(&j.base).expect("validated in parse");
            add_base(&mut bases, b);
        }
        let mut targets: Vec<Target> = bases.into_iter().cloned().map(Target::Base).collect();
        targets.extend(repos.into_iter().map(|r| {
            let base = self.base(&r.base).expect("validated in parse").clone();
            Target::Repo(Box::new(r.clone()), base)
        }));
        targets.extend(javas.into_iter().map(|j| {
            let base = self.base(&j.base).expect("validated in parse").clone();
            Target::Java(Box::new(j.clone()), base)
        }));
        Ok(targets)
    }

    /// Every image the definitions describe, bases first.
    pub fn all(&self) -> Vec<Target> {
        let mut targets: Vec<Target> = self.bases.iter().cloned().map(Target::Base).collect();
        for r in &self.repos {
            let base = self.base(&r.base).expect("validated in parse").clone();
            targets.push(Target::Repo(Box::new(r.clone()), base));
        }
        for j in &self.javas {
            let base = self.base(&j.base).expect("validated in parse").clone();
            targets.push(Target::Java(Box::new(j.clone()), base));
        }
        targets
    }
}

/// One image to build.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Base(BaseDef),
    Repo(Box<RepoDef>, BaseDef),
    Java(Box<JavaDef>, BaseDef),
}

impl Target {
    pub fn image(&self) -> String {
        match self {
            Target::Base(b) => b.image(),
            Target::Repo(r, b) => r.image(b),
            Target::Java(j, b) => j.image(b),
        }
    }
}

/// Where things go, and whether to force.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    /// `images/images.toml`.
    pub definitions: PathBuf,
    /// The workspace's `.flux-cache`.
    pub cache_dir: PathBuf,
    /// Rebuild images even if their manifest matches (the debootstrap rootfs cache is reused).
    pub rebuild: bool,
}

impl Definitions {
    /// The definitions a user command uses: `explicit` if given; else the nearest
    /// `images/images.toml` in `start` or above it (a checkout); else the copy compiled into
    /// the binary ([`BUILTIN_DEFINITIONS`]). Returns them with the path they came from (for a
    /// compiled-in copy, `<builtin>/images/images.toml`, which is never read).
    pub fn find(explicit: Option<&Path>, start: &Path) -> Result<(Definitions, PathBuf)> {
        if let Some(p) = explicit {
            return Ok((Definitions::load(p)?, p.to_owned()));
        }
        if let Some(p) = start
            .ancestors()
            .map(|d| d.join("images/images.toml"))
            .find(|p| p.is_file())
        {
            return Ok((Definitions::load(&p)?, p));
        }
        let p = PathBuf::from("<builtin>/images/images.toml");
        Ok((Definitions::parse_with_env(BUILTIN_DEFINITIONS, &p)?, p))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Interpreter {
    pub path: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Wheel {
    pub file: String,
    pub sha256: String,
}

/// What is known about a built image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema: u32,
    pub image: String,
    /// `base` or `repo`.
    pub kind: String,
    /// Absent from the in-image label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    pub definition_hash: String,
    pub definition: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image_id: Option<String>,
    pub suite: String,
    pub mirror: String,
    /// When the rootfs was debootstrapped (RFC 3339, UTC).
    pub debootstrap_date: String,
    /// `Date:` of the suite's Release file used by debootstrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_release_date: Option<String>,
    pub interpreter: Interpreter,
    /// `pip freeze --all` in the image (empty for bases: they have no pip packages).
    pub pip_freeze: Vec<String>,
    pub wheels: Vec<Wheel>,
    /// `package=version` of every Debian package (bases only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub debian_packages: Vec<String>,
    /// The content identity (`flux-id:…`, see [`identity`]); empty in manifests of schema 1.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub identity: String,
    /// The tree digests the identity is computed from.
    #[serde(default)]
    pub identity_inputs: IdentityInputs,
    /// The package source at `/testbed` (repos).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ImageSource>,
    pub built_at: String,
    pub build_seconds: f64,
}

impl Manifest {
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        serde_json::from_str(&text).map_err(|e| Error::Definition {
            path: path.to_owned(),
            message: format!("bad manifest: {e}"),
        })
    }
}

/// Where an image holds its package's source, and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ImageSource {
    /// [`TESTBED`].
    pub testbed: String,
    /// The directory the package imports from (`/testbed`, or `/testbed/src` for a src layout).
    pub import_root: String,
    /// Its top-level modules.
    pub modules: Vec<String>,
    /// The same tree on the host, relative to the cache directory (`src/<package>-<version>`).
    pub cache_tree: String,
    #[serde(flatten)]
    pub info: SourceInfo,
}

/// Whether an image was built or found up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Built,
    Skipped,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub image: String,
    pub action: Action,
    pub manifest_path: PathBuf,
    pub manifest: Manifest,
    pub seconds: f64,
}

/// Path of the manifest file of `image` under `cache_dir`.
pub fn manifest_path(cache_dir: &Path, image: &str) -> PathBuf {
    cache_dir
        .join("images")
        .join(format!("{}.json", image.replace(['/', ':'], "_")))
}

/// Fetches and unpacks the package source of each selected repository image into
/// `<cache>/src/<package>-<version>/` (what `flux eval` shows models), without building any
/// image: no container runtime, only the host's Python and the package index. Bases and JVM
/// images have no such tree and are passed over. Returns `(image, tree)` per repository.
pub fn fetch_sources(
    config: &BuildConfig,
    defs: &Definitions,
    names: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for t in defs.select(names, &config.definitions)? {
        if let Target::Repo(r, b) = &t {
            let (tree, _) = source::ensure(
                &config.cache_dir,
                &defs.settings.host_python,
                r.package(),
                &r.version,
                progress,
            )?;
            out.push((r.image(b), tree));
        }
    }
    Ok(out)
}

/// Builds the selected images of `config.definitions` in order (see [`build_with`]).
pub async fn build(
    rt: &Runtime,
    config: &BuildConfig,
    names: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(String, Result<Report>)>> {
    let defs = Definitions::load(&config.definitions)?;
    build_with(rt, config, &defs, names, progress).await
}

/// Builds the selected images of `defs` in order. An image that fails is reported and its
/// dependents fail too; the others still build. `progress` receives one line per step.
pub async fn build_with(
    rt: &Runtime,
    config: &BuildConfig,
    defs: &Definitions,
    names: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(String, Result<Report>)>> {
    let targets = defs.select(names, &config.definitions)?;
    // Bind mounts need absolute host paths.
    let config = &BuildConfig {
        cache_dir: std::path::absolute(&config.cache_dir)
            .map_err(|e| Error::io(format!("resolve {}", config.cache_dir.display()), e))?,
        ..config.clone()
    };
    // Build containers of builds that were killed; concurrent builds keep theirs.
    rt.remove_orphans().await?;
    let mut results: Vec<(String, Result<Report>)> = Vec::new();
    for t in &targets {
        let image = t.image();
        let started = Instant::now();
        let result = match t {
            Target::Base(b) => base::build(rt, config, &defs.settings, b, progress).await,
            Target::Repo(r, b) => {
                let failed_base = results
                    .iter()
                    .any(|(i, res)| *i == b.image() && res.is_err());
                if failed_base {
                    Err(Error::Build {
                        image: image.clone(),
                        message: format!("base {} failed", b.image()),
                    })
                } else {
                    repo::build(rt, config, &defs.settings, r, b, progress).await
                }
            }
            Target::Java(j, b) => {
                let failed_base = results
                    .iter()
                    .any(|(i, res)| *i == b.image() && res.is_err());
                if failed_base {
                    Err(Error::Build {
                        image: image.clone(),
                        message: format!("base {} failed", b.image()),
                    })
                } else {
                    java::build(rt, config, &defs.settings, j, b, progress).await
                }
            }
        };
        let result = result
            .map_err(|e| disk_full(e, &image))
            .map(|(action, manifest)| Report {
                image: image.clone(),
                action,
                manifest_path: manifest_path(&config.cache_dir, &image),
                manifest,
                seconds: started.elapsed().as_secs_f64(),
            });
        results.push((image, result));
    }
    Ok(results)
}

fn disk_full(e: Error, image: &str) -> Error {
    if e.is_disk_full() && !matches!(e, Error::DiskFull { .. }) {
        Error::DiskFull {
            what: image.to_owned(),
            detail: e.to_string(),
        }
    } else {
        e
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn base_definition(settings: &Settings, b: &BaseDef) -> serde_json::Value {
    let mut d = serde_json::json!({
        "suite": b.suite, "python": b.python, "interpreter": b.interpreter,
        "packages": b.packages, "mirror": settings.mirror,
    });
    // Only JDK bases name it: the Python bases' definitions (and hashes) stay as they were.
    if let Some(v) = &b.java {
        d["java"] = serde_json::json!(v);
    }
    d
}

/// What a repo image is built from. `layout` names the builder's way of laying the image out
/// (source at /testbed, imported from there); changing it rebuilds every repo image.
fn repo_definition(settings: &Settings, r: &RepoDef, b: &BaseDef) -> serde_json::Value {
    let mut d = serde_json::json!({
        "name": r.name, "version": r.version, "package": r.package(),
        "requirements": r.requirements, "pip": r.pip, "smoke": r.smoke,
        "layout": "testbed-v1", "base": base_definition(settings, b),
    });
    if !r.writable.is_empty() {
        d["writable"] = serde_json::json!(r.writable);
    }
    d
}

fn hash_json(v: &serde_json::Value) -> String {
    sha256_hex(v.to_string().as_bytes())
}

/// The manifest on disk if it still describes the image: same definition, image id present
/// and tagged, and (repos) built on the current base image.
async fn up_to_date(
    rt: &Runtime,
    config: &BuildConfig,
    image: &str,
    definition_hash: &str,
    base_image_id: Option<&str>,
) -> Result<Option<Manifest>> {
    if config.rebuild {
        return Ok(None);
    }
    let Ok(m) = Manifest::load(&manifest_path(&config.cache_dir, image)) else {
        return Ok(None);
    };
    let current = rt.image_id(image).await?;
    let fresh = m.schema == MANIFEST_SCHEMA
        && m.definition_hash == definition_hash
        && current.is_some()
        && current == m.image_id
        && (base_image_id.is_none() || m.base_image_id.as_deref() == base_image_id);
    Ok(fresh.then_some(m))
}

/// After a rebuild: removes the image the old manifest named, if nothing uses it any more
/// (no force, so an image with children or containers stays; its untagged parents go with it).
async fn remove_replaced(rt: &Runtime, config: &BuildConfig, image: &str, new_id: &str) {
    use bollard::query_parameters::RemoveImageOptionsBuilder;
    let Ok(old) = Manifest::load(&manifest_path(&config.cache_dir, image)) else {
        return;
    };
    let Some(old_id) = old.image_id.filter(|id| id != new_id) else {
        return;
    };
    let options = RemoveImageOptionsBuilder::default().build();
    let _ = rt.docker().remove_image(&old_id, Some(options), None).await;
}

fn write_manifest(config: &BuildConfig, m: &Manifest) -> Result<PathBuf> {
    let path = manifest_path(&config.cache_dir, &m.image);
    let dir = path.parent().expect("has parent");
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let text = serde_json::to_string_pretty(m).expect("serializable") + "\n";
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, &path)
        .map_err(|e| Error::io(format!("rename to {}", path.display()), e))?;
    Ok(path)
}

/// Runs a command, capturing stderr (and stdout if `capture`); a non-zero exit is an error.
fn run_cmd(cmd: &mut Command, what: &str) -> Result<String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| {
        let hint = match (e.kind(), program.as_str()) {
            (std::io::ErrorKind::NotFound, "debootstrap") => " (apt-get install debootstrap)",
            (std::io::ErrorKind::NotFound, _) => " (not installed?)",
            _ => "",
        };
        Error::io(format!("run {what}{hint}"), e)
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(Error::Command {
            command: what.to_owned(),
            status: out.status.to_string(),
            stderr: tail.join("\n"),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("serializable") + "\n";
    std::fs::write(path, text).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// Runs `script` with `sh -c` as root in a container of `image` (network off), with the given
/// mounts and a run dir for outputs; returns the container, stopped, for commit.
async fn run_build_container(
    rt: &Runtime,
    image: &str,
    script: &str,
    run_dir: &Path,
    mounts: Vec<Mount>,
) -> Result<crate::runtime::Container> {
    if run_dir.exists() {
        std::fs::remove_dir_all(run_dir)
            .map_err(|e| Error::io(format!("remove {}", run_dir.display()), e))?;
    }
    let mut spec = ContainerSpec::new(
        image,
        vec!["/bin/sh".into(), "-c".into(), script.into()],
        run_dir,
    );
    spec.user = "0:0".into();
    spec.writes = crate::runtime::Writes::Everything;
    spec.run_id = format!("build-{}", crate::runtime::new_run_id());
    spec.mounts = mounts;
    spec.env
        .insert("PATH".into(), PATH_ENV.trim_start_matches("PATH=").into());
    spec.env.insert("LANG".into(), "C.UTF-8".into());
    spec.limits.memory_bytes = Some(8 << 30);
    let timeout = std::time::Duration::from_secs(20 * 60);
    let mut c = rt.create(spec).await?;
    c.start().await?;
    c.release().await?;
    let outcome = c.wait(timeout).await?.check(timeout)?;
    if outcome.exit_code != 0 {
        let mut out = outcome.stdout_lossy();
        out.push_str(&outcome.stderr_lossy());
        let tail: Vec<&str> = out.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        c.remove().await?;
        return Err(Error::Build {
            image: image.to_owned(),
            message: format!(
                "build step exited {}:\n{}",
                outcome.exit_code,
                tail.join("\n")
            ),
        });
    }
    Ok(c)
}

/// Commits a stopped build container as `image` with the manifest label and a clean config
/// (no entrypoint, the interpreter as command). The container is removed afterwards.
async fn commit(
    rt: &Runtime,
    c: crate::runtime::Container,
    image: &str,
    user: &str,
    manifest: &Manifest,
) -> Result<String> {
    use bollard::models::ContainerConfig;
    use bollard::query_parameters::CommitContainerOptionsBuilder;
    let (repo, tag) = image.rsplit_once(':').expect("flux image names have a tag");
    let mut labels = std::collections::HashMap::new();
    labels.insert(
        LABEL_MANIFEST.to_owned(),
        serde_json::to_string(manifest).expect("json"),
    );
    labels.insert(
        LABEL_DEFINITION.to_owned(),
        manifest.definition_hash.clone(),
    );
    labels.insert(LABEL_IDENTITY.to_owned(), manifest.identity.clone());
    // Docker merges the container's labels into the image; blank the run labels so that
    // containers of this image are not taken for flux runs.
    labels.insert(crate::runtime::LABEL_RUN.to_owned(), String::new());
    labels.insert(crate::runtime::LABEL_MANAGED.to_owned(), String::new());
    labels.insert(crate::runtime::LABEL_PID.to_owned(), String::new());
    let config = ContainerConfig {
        user: Some(user.to_owned()),
        env: Some(vec![PATH_ENV.to_owned(), "LANG=C.UTF-8".to_owned()]),
        // An empty (not absent) Entrypoint drops the build container's gate wrapper; an absent
        // one would be inherited from the container.
        entrypoint: Some(Vec::new()),
        cmd: Some(vec![manifest.interpreter.path.clone()]),
        working_dir: Some("/".to_owned()),
        labels: Some(labels),
        ..Default::default()
    };
    let options = CommitContainerOptionsBuilder::default()
        .container(c.id())
        .repo(repo)
        .tag(tag)
        .comment(&format!("flux image {image}"))
        .build();
    let committed = rt.docker().commit_container(options, config).await;
    let removed = c.remove().await;
    let id = committed
        .map_err(|e| Error::docker(format!("commit {image}"), e))?
        .id;
    removed?;
    Ok(id)
}

/// `<cache>/build/tools-<digest>/`: the helpers run in build containers ([`IMAGE_TOOLS`],
/// [`TESTREPORT_PLUGIN`]), written once per content (atomically, so concurrent builds agree).
fn tools_dir(cache_dir: &Path) -> Result<PathBuf> {
    let files = [
        ("image_tools.py", IMAGE_TOOLS),
        ("flux_testreport.py", TESTREPORT_PLUGIN),
        ("junit_report.py", JUNIT_REPORT),
    ];
    let mut h = Sha256::new();
    for (name, text) in files {
        h.update(name.as_bytes());
        h.update(text.as_bytes());
    }
    let digest = source::hex(&h.finalize());
    let dir = cache_dir
        .join("build")
        .join(format!("tools-{}", &digest[..16]));
    if dir.is_dir() {
        return Ok(dir);
    }
    let tmp = cache_dir.join("build").join(format!(
        "tools-{}.{}.tmp",
        &digest[..16],
        std::process::id()
    ));
    let io = |p: &Path, e| Error::io(format!("write {}", p.display()), e);
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    for (name, text) in files {
        std::fs::write(tmp.join(name), text).map_err(|e| io(&tmp.join(name), e))?;
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another build got there first with the same content.
        Err(_) if dir.is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => Err(io(&dir, e)),
    }
}

fn read_run_file(run_dir: &Path, name: &str) -> Result<String> {
    let p = run_dir.join(name);
    std::fs::read_to_string(&p).map_err(|e| Error::io(format!("read {}", p.display()), e))
}

fn lines(s: &str) -> Vec<String> {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Reads the manifest label of a local image (no `image_id` in it).
pub async fn image_manifest(rt: &Runtime, image: &str) -> Result<Option<Manifest>> {
    let inspect = match rt.docker().inspect_image(image).await {
        Ok(i) => i,
        Err(e) if crate::error::is_not_found(&e) => return Ok(None),
        Err(e) => return Err(Error::docker(format!("inspect image {image}"), e)),
    };
    let labels: BTreeMap<String, String> = inspect
        .config
        .and_then(|c| c.labels)
        .map(|l| l.into_iter().collect())
        .unwrap_or_default();
    Ok(labels
        .get(LABEL_MANIFEST)
        .and_then(|s| serde_json::from_str(s).ok()))
}

/// Levenshtein distance between `a` and `b` (in characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = r#"
[[base]]
name = "py3.11-bookworm"
suite = "bookworm"
python = "3.11"
interpreter = "/usr/bin/python3.11"
packages = ["python3.11"]
rootfs = "bookworm-py311"

[[base]]
name = "py3.13-trixie"
suite = "trixie"
python = "3.13"
interpreter = "/usr/bin/python3.13"
packages = ["python3.13"]
rootfs = "trixie-py313"
default = false

[[repo]]
name = "sympy"
version = "1.13.3"
base = "py3.11-bookworm"
requirements = ["sympy==1.13.3", "pytest==8.3.5"]
pip = "pip==25.3"

[[repo]]
name = "attrs"
version = "25.1.0"
base = "py3.13-trixie"
requirements = ["attrs==25.1.0"]
pip = "pip==25.3"
"#;

    fn defs() -> Definitions {
        Definitions::parse(TOML, Path::new("images.toml")).unwrap()
    }

    fn names(targets: &[Target]) -> Vec<String> {
        targets.iter().map(Target::image).collect()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_project_definitions_parse() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/images.toml");
        let d = Definitions::load(&path).unwrap();
        let all = names(&d.select(&[], &path).unwrap());
        assert!(
            all.contains(&"flux/base:py3.11-bookworm".to_owned()),
            "{all:?}"
        );
        assert!(
            all.contains(&"flux/sympy:1.13.3-py3.11".to_owned()),
            "{all:?}"
        );
        assert!(
            !all.contains(&"flux/base:py3.13-trixie".to_owned()),
            "hook-only base built by default"
        );
    }

    #[test]
    fn no_names_selects_default_bases_and_all_repos_with_their_bases() {
        let d = defs();
        let t = d.select(&[], Path::new("x")).unwrap();
        assert_eq!(
            names(&t),
            [
                "flux/base:py3.11-bookworm",
                "flux/base:py3.13-trixie",
                "flux/sympy:1.13.3-py3.11",
                "flux/attrs:25.1.0-py3.13"
            ]
        );
    }

    #[test]
    fn names_select_bases_and_repos_in_any_spelling() {
        let d = defs();
        let p = Path::new("x");
        for (given, want) in [
            (
                vec!["sympy"],
                vec!["flux/base:py3.11-bookworm", "flux/sympy:1.13.3-py3.11"],
            ),
            (
                vec!["flux/sympy:1.13.3-py3.11"],
                vec!["flux/base:py3.11-bookworm", "flux/sympy:1.13.3-py3.11"],
            ),
            (vec!["py3.13-trixie"], vec!["flux/base:py3.13-trixie"]),
            (vec!["base:py3.13-trixie"], vec!["flux/base:py3.13-trixie"]),
            (
                vec!["flux/base:py3.11-bookworm"],
                vec!["flux/base:py3.11-bookworm"],
            ),
        ] {
            assert_eq!(
                names(&d.select(&strings(&given), p).unwrap()),
                want,
                "{given:?}"
            );
        }
        let err = d.select(&strings(&["numpy"]), p).unwrap_err().to_string();
        assert!(
            err.contains("no image named \"numpy\"") && err.contains("sympy"),
            "{err}"
        );
        assert!(
            err.contains("add a `[[repo]]` stanza to images/images.toml"),
            "{err}"
        );
        // A version no stanza builds: the nearest defined image.
        let err = d
            .select(&strings(&["flux/sympy:1.12-py3.11"]), p)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("did you mean `flux/sympy:1.13.3-py3.11`"),
            "{err}"
        );
        // Each name once, however many repositories share a group.
        let grouped = TOML.replace(
            "pip = \"pip==25.3\"\n",
            "pip = \"pip==25.3\"\ngroups = [\"starter\", \"small\"]\n",
        );
        let d = Definitions::parse(&grouped, Path::new("images.toml")).unwrap();
        let err = d.select(&strings(&["numpy"]), p).unwrap_err().to_string();
        assert!(err.contains("starter"), "{err}");
        let defined = err.split("Defined: ").nth(1).unwrap_or("");
        let mut seen = std::collections::BTreeSet::new();
        for n in defined.split(", ") {
            assert!(seen.insert(n), "{n} twice in {err}");
        }
    }

    #[test]
    fn unpinned_requirements_are_rejected() {
        let text = TOML.replace("\"pytest==8.3.5\"", "\"pytest>=8\"");
        let err = Definitions::parse(&text, Path::new("images.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("images.toml") && err.contains("pytest>=8") && err.contains("=="),
            "{err}"
        );
    }

    #[test]
    fn unknown_base_and_wrong_interpreter_are_rejected() {
        let text = TOML.replace("base = \"py3.13-trixie\"", "base = \"py3.99\"");
        let err = Definitions::parse(&text, Path::new("i.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown base py3.99"), "{err}");
        let text = TOML.replace("/usr/bin/python3.13", "/usr/bin/python3.12");
        let err = Definitions::parse(&text, Path::new("i.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not python3.13"), "{err}");
    }

    #[test]
    fn image_names_and_the_one_build_hint() {
        let d = defs();
        assert_eq!(d.repos[0].image(&d.bases[0]), "flux/sympy:1.13.3-py3.11");
        assert_eq!(
            build_hint("flux/sympy:1.13.3-py3.11"),
            "build it with `flux images build flux/sympy:1.13.3-py3.11`"
        );
        assert_eq!(
            build_hint("flux/base:py3.15-sid"),
            "build it with `flux images build flux/base:py3.15-sid`"
        );
        let other = build_hint("debian:bookworm");
        assert!(
            other.contains("flux builds only") && !other.contains("flux images build"),
            "{other}"
        );
        // Every hint names a spelling `select` accepts.
        let p = Path::new("x");
        for image in ["flux/sympy:1.13.3-py3.11", "flux/base:py3.13-trixie"] {
            let picked = names(&d.select(&strings(&[image]), p).unwrap());
            assert_eq!(picked.last().map(String::as_str), Some(image));
        }
        assert_eq!(
            manifest_path(Path::new("/c"), "flux/sympy:1.13.3-py3.11"),
            Path::new("/c/images/flux_sympy_1.13.3-py3.11.json")
        );
    }

    #[test]
    fn namespace_groups_defaults_and_package_pins() {
        let text = format!(
            "[settings]\nnamespace = \"fluxtest\"\n{}\n{}",
            TOML,
            r#"
[[repo]]
name = "haystack"
package = "haystack-ai"
version = "2.18.0"
base = "py3.11-bookworm"
requirements = ["haystack-ai==2.18.0"]
pip = "pip==25.3"
default = false
groups = ["swe-flux"]
"#
        );
        let d = Definitions::parse(&text, Path::new("i.toml")).unwrap();
        let p = Path::new("i.toml");
        let all = names(&d.select(&[], p).unwrap());
        assert!(all.iter().all(|i| i.starts_with("fluxtest/")), "{all:?}");
        assert!(
            !all.iter().any(|i| i.contains("haystack")),
            "not a default: {all:?}"
        );
        assert_eq!(
            names(&d.select(&strings(&["swe-flux"]), p).unwrap()),
            [
                "fluxtest/base:py3.11-bookworm",
                "fluxtest/haystack:2.18.0-py3.11"
            ]
        );
        assert_eq!(d.repos[2].package(), "haystack-ai");
        let wrong = text.replace("version = \"2.18.0\"", "version = \"2.17.0\"");
        let e = Definitions::parse(&wrong, p).unwrap_err().to_string();
        assert!(e.contains("pinned ==2.18.0"), "{e}");
        let missing = text.replace("package = \"haystack-ai\"\n", "");
        let e = Definitions::parse(&missing, p).unwrap_err().to_string();
        assert!(e.contains("not among its requirements"), "{e}");
        let bad_ns = text.replace("fluxtest", "Flux Test");
        let e = Definitions::parse(&bad_ns, p).unwrap_err().to_string();
        assert!(e.contains("namespace"), "{e}");
    }

    #[test]
    fn the_builtin_definitions_are_the_project_file() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/images.toml");
        assert_eq!(std::fs::read_to_string(path).unwrap(), BUILTIN_DEFINITIONS);
        // Outside a checkout, `find` falls back to them.
        let t = tempfile::tempdir().unwrap();
        let (d, from) = Definitions::find(None, t.path()).unwrap();
        assert_eq!(from, Path::new("<builtin>/images/images.toml"));
        assert!(d.repos.iter().any(|r| r.name == "sympy"));
    }

    #[test]
    fn definition_hash_changes_with_requirements_and_base() {
        let d = defs();
        let s = &d.settings;
        let (r, b) = (&d.repos[0], &d.bases[0]);
        let h = hash_json(&repo_definition(s, r, b));
        assert_eq!(h, hash_json(&repo_definition(s, r, b)));
        let mut r2 = r.clone();
        r2.requirements[1] = "pytest==8.3.4".into();
        assert_ne!(h, hash_json(&repo_definition(s, &r2, b)));
        let mut b2 = b.clone();
        b2.packages.push("gdb".into());
        assert_ne!(h, hash_json(&repo_definition(s, r, &b2)));
    }

    #[test]
    fn disk_full_is_recognized() {
        let io = Error::io("write", std::io::Error::from_raw_os_error(libc::ENOSPC));
        let e = disk_full(io, "flux/sympy:1.13.3-py3.11");
        assert!(matches!(e, Error::DiskFull { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("disk full while building flux/sympy:1.13.3-py3.11"),
            "{e}"
        );
        let cmd = Error::Command {
            command: "docker import".into(),
            status: "exit status: 1".into(),
            stderr: "write /var/lib/docker/tmp/x: no space left on device".into(),
        };
        assert!(matches!(disk_full(cmd, "i"), Error::DiskFull { .. }));
        let other = Error::Spec("x".into());
        assert!(matches!(disk_full(other, "i"), Error::Spec(_)));
    }
}
