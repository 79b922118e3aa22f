//! Reproducible, locally built images: definitions as data (`images/images.toml`), built without
//! a registry.
//!
//! * A base image per interpreter: `debootstrap --variant=minbase --include=<packages>` into a
//!   cached rootfs (`/var/cache/flux/rootfs/<rootfs>`), `tar | docker import`, then one probe
//!   container (interpreter version, Debian package list) committed with the manifest label.
//! * A layer per repository: wheels resolved and downloaded on the host (`pip download`, pinned
//!   `==` requirements, sha256 recorded) into `.flux-cache/wheelhouse/<repo>-<version>-py<X.Y>/`,
//!   installed offline in a container of the base (network off, `--no-index`, pip run from its
//!   own wheel since Debian's `python3.X` may have no pip), user `flux` (uid 1000) added, then
//!   `docker commit`.
//!
//! Each image's manifest (image id, interpreter path and version, `pip freeze`, suite,
//! debootstrap date, wheel hashes, definition hash) is written to
//! `.flux-cache/images/<name>.json` and carried by the image as label `flux.manifest` (without
//! the image id, which cannot be known before the image exists). Building is incremental: an
//! image is skipped while its manifest matches its definition and its image id still exists.
//!
//! Architecture invariant: this module shells out only to `debootstrap`, `tar`, `docker import`
//! and the host's `python3 -m pip`; everything else goes through [`Runtime`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::runtime::{ContainerSpec, Mount, Runtime};

/// Label carrying the manifest JSON (without `image_id`).
pub const LABEL_MANIFEST: &str = "flux.manifest";
/// Label carrying the definition hash.
pub const LABEL_DEFINITION: &str = "flux.definition";
const MANIFEST_SCHEMA: u32 = 1;
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn default_mirror() -> String {
    "http://deb.debian.org/debian".to_owned()
}
fn default_rootfs_cache() -> PathBuf {
    PathBuf::from("/var/cache/flux/rootfs")
}
fn default_host_python() -> String {
    "python3".to_owned()
}
fn default_true() -> bool {
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
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mirror: default_mirror(),
            rootfs_cache: default_rootfs_cache(),
            host_python: default_host_python(),
        }
    }
}

/// A base image `flux/base:<name>`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BaseDef {
    /// The tag, e.g. `py3.11-bookworm`.
    pub name: String,
    pub suite: String,
    /// `X.Y`.
    pub python: String,
    pub interpreter: String,
    /// Debian packages for `debootstrap --include`.
    pub packages: Vec<String>,
    /// Directory name under `settings.rootfs_cache`.
    pub rootfs: String,
    /// Built by `cargo xtask images` without names; otherwise only when named.
    #[serde(default = "default_true")]
    pub default: bool,
}

/// A repository layer `flux/<name>:<version>-py<X.Y>`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RepoDef {
    pub name: String,
    pub version: String,
    /// Name of a `[[base]]`.
    pub base: String,
    /// Pinned requirements (`name==version` each): package, test deps, pytest.
    pub requirements: Vec<String>,
    /// The pip used to install offline (pinned), run from its wheel.
    pub pip: String,
    /// Python statements run in the image after install, e.g. `import sympy, pytest`.
    #[serde(default)]
    pub smoke: Option<String>,
}

impl BaseDef {
    pub fn image(&self) -> String {
        format!("flux/base:{}", self.name)
    }
}

impl RepoDef {
    pub fn image(&self, base: &BaseDef) -> String {
        format!("flux/{}:{}-py{}", self.name, self.version, base.python)
    }
    fn wheelhouse_name(&self, base: &BaseDef) -> String {
        format!("{}-{}-py{}", self.name, self.version, base.python)
    }
}

impl Definitions {
    pub fn load(path: &Path) -> Result<Definitions> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Definitions> {
        let bad = |message: String| Error::Definition {
            path: path.to_owned(),
            message,
        };
        let defs: Definitions = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        let mut seen = std::collections::BTreeSet::new();
        for b in &defs.bases {
            if !seen.insert(b.image()) {
                return Err(bad(format!("base {} defined twice", b.name)));
            }
            if !b.interpreter.ends_with(&format!("python{}", b.python)) {
                return Err(bad(format!(
                    "base {}: interpreter {} is not python{}",
                    b.name, b.interpreter, b.python
                )));
            }
        }
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
        }
        Ok(defs)
    }

    pub fn base(&self, name: &str) -> Option<&BaseDef> {
        self.bases.iter().find(|b| b.name == name)
    }

    /// Resolves names (`sympy`, `flux/sympy:1.13.3-py3.11`, `py3.11-bookworm`,
    /// `base:py3.11-bookworm`, `flux/base:py3.11-bookworm`) to build targets, bases first; a
    /// repo brings its base. No names: default bases and every repo.
    pub fn select(&self, names: &[String], path: &Path) -> Result<Vec<Target>> {
        let mut bases: Vec<&BaseDef> = Vec::new();
        let mut repos: Vec<&RepoDef> = Vec::new();
        fn add_base<'a>(bases: &mut Vec<&'a BaseDef>, b: &'a BaseDef) {
            if !bases.contains(&b) {
                bases.push(b)
            }
        }
        if names.is_empty() {
            for b in self.bases.iter().filter(|b| b.default) {
                add_base(&mut bases, b);
            }
            repos.extend(self.repos.iter());
        }
        for name in names {
            let n = name.strip_prefix("flux/").unwrap_or(name);
            let n = n.strip_prefix("base:").unwrap_or(n);
            if let Some(b) = self.bases.iter().find(|b| b.name == n) {
                add_base(&mut bases, b);
                continue;
            }
            let matching: Vec<&RepoDef> = self
                .repos
                .iter()
                .filter(|r| r.name == n || self.base(&r.base).is_some_and(|b| r.image(b) == *name))
                .collect();
            if matching.is_empty() {
                let known: Vec<String> = self
                    .bases
                    .iter()
                    .map(|b| b.name.clone())
                    .chain(self.repos.iter().map(|r| r.name.clone()))
                    .collect();
                return Err(Error::Definition {
                    path: path.to_owned(),
                    message: format!("no image named {name:?}; known: {}", known.join(", ")),
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
        let mut targets: Vec<Target> = bases.into_iter().cloned().map(Target::Base).collect();
        targets.extend(repos.into_iter().map(|r| {
            let base = self.base(&r.base).expect("validated in parse").clone();
            Target::Repo(r.clone(), base)
        }));
        Ok(targets)
    }
}

/// The command a user runs to build `image` (works outside the checkout, unlike `cargo xtask`).
pub fn build_command(image: &str) -> String {
    if image.starts_with("flux/") {
        format!("flux images build {image}")
    } else {
        "flux images build".to_owned()
    }
}

/// The name `cargo xtask images` accepts for a flux image reference, if it is one.
pub fn xtask_name_for(image: &str) -> Option<String> {
    let rest = image.strip_prefix("flux/")?;
    let (repo, tag) = rest.split_once(':').unwrap_or((rest, ""));
    match repo {
        "base" if !tag.is_empty() => Some(tag.to_owned()),
        "base" => None,
        _ => Some(repo.to_owned()),
    }
}

/// One image to build.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Base(BaseDef),
    Repo(RepoDef, BaseDef),
}

impl Target {
    pub fn image(&self) -> String {
        match self {
            Target::Base(b) => b.image(),
            Target::Repo(r, b) => r.image(b),
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

/// Builds the selected images in order. An image that fails is reported and its dependents
/// fail too; the others still build. `progress` receives one line per step.
pub async fn build(
    rt: &Runtime,
    config: &BuildConfig,
    names: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(String, Result<Report>)>> {
    let defs = Definitions::load(&config.definitions)?;
    let targets = defs.select(names, &config.definitions)?;
    // Build containers of builds that were killed; concurrent builds keep theirs.
    rt.remove_orphans().await?;
    let mut results: Vec<(String, Result<Report>)> = Vec::new();
    for t in &targets {
        let image = t.image();
        let started = Instant::now();
        let result = match t {
            Target::Base(b) => build_base(rt, config, &defs.settings, b, progress).await,
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
                    build_repo(rt, config, &defs.settings, r, b, progress).await
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
    serde_json::json!({
        "suite": b.suite, "python": b.python, "interpreter": b.interpreter,
        "packages": b.packages, "mirror": settings.mirror,
    })
}

fn repo_definition(settings: &Settings, r: &RepoDef, b: &BaseDef) -> serde_json::Value {
    serde_json::json!({
        "name": r.name, "version": r.version, "requirements": r.requirements, "pip": r.pip,
        "smoke": r.smoke, "base": base_definition(settings, b),
    })
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
    let fresh = m.definition_hash == definition_hash
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct RootfsStamp {
    suite: String,
    packages: Vec<String>,
    mirror: String,
    debootstrap_date: String,
}

/// Ensures the debootstrapped rootfs exists and matches the definition.
fn ensure_rootfs(
    settings: &Settings,
    b: &BaseDef,
    progress: &mut dyn FnMut(&str),
) -> Result<(PathBuf, RootfsStamp)> {
    let dir = settings.rootfs_cache.join(&b.rootfs);
    let stamp_path = settings
        .rootfs_cache
        .join(format!("{}.stamp.json", b.rootfs));
    let wanted = |date: String| RootfsStamp {
        suite: b.suite.clone(),
        packages: b.packages.clone(),
        mirror: settings.mirror.clone(),
        debootstrap_date: date,
    };
    let interp = dir.join(b.interpreter.trim_start_matches('/'));
    // debootstrap removes DIR/debootstrap when it succeeds.
    let complete = interp.exists() && !dir.join("debootstrap").exists();
    if complete {
        match std::fs::read_to_string(&stamp_path)
            .ok()
            .and_then(|t| serde_json::from_str::<RootfsStamp>(&t).ok())
        {
            Some(s) if s == wanted(s.debootstrap_date.clone()) => return Ok((dir, s)),
            Some(_) => progress(&format!(
                "rootfs {} has other packages; debootstrapping again",
                dir.display()
            )),
            None => {
                // A rootfs made by hand with the same command (no stamp): adopt it, dated by
                // its apt lists.
                let date = std::fs::metadata(dir.join("var/lib/apt/lists"))
                    .and_then(|m| m.modified())
                    .map(|t| humantime::format_rfc3339_seconds(t).to_string())
                    .unwrap_or_else(|_| now_rfc3339());
                progress(&format!(
                    "adopting existing rootfs {} (debootstrapped {date})",
                    dir.display()
                ));
                let s = wanted(date);
                write_json(&stamp_path, &s)?;
                return Ok((dir, s));
            }
        }
    }
    let tmp = settings.rootfs_cache.join(format!("{}.tmp", b.rootfs));
    for d in [&tmp, &dir] {
        if d.exists() {
            std::fs::remove_dir_all(d)
                .map_err(|e| Error::io(format!("remove {}", d.display()), e))?;
        }
    }
    std::fs::create_dir_all(&settings.rootfs_cache)
        .map_err(|e| Error::io(format!("create {}", settings.rootfs_cache.display()), e))?;
    progress(&format!(
        "debootstrap {} ({}) into {} (1-2 min)",
        b.suite,
        b.packages.join(","),
        dir.display()
    ));
    let date = now_rfc3339();
    let mut cmd = Command::new("debootstrap");
    cmd.arg("--variant=minbase")
        .arg(format!("--include={}", b.packages.join(",")))
        .arg(&b.suite)
        .arg(&tmp)
        .arg(&settings.mirror);
    run_cmd(
        &mut cmd,
        &format!("debootstrap {} {}", b.suite, tmp.display()),
    )?;
    std::fs::rename(&tmp, &dir)
        .map_err(|e| Error::io(format!("rename to {}", dir.display()), e))?;
    let s = wanted(date);
    write_json(&stamp_path, &s)?;
    Ok((dir, s))
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("serializable") + "\n";
    std::fs::write(path, text).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

fn release_date(rootfs: &Path, suite: &str) -> Option<String> {
    let lists = rootfs.join("var/lib/apt/lists");
    let entry = std::fs::read_dir(&lists).ok()?.flatten().find(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.ends_with(&format!("_dists_{suite}_Release"))
    })?;
    let text = std::fs::read_to_string(entry.path()).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Date:").map(|d| d.trim().to_owned()))
}

/// `tar -C rootfs -c . | docker import -`; returns the new (untagged) image id.
fn docker_import(rootfs: &Path) -> Result<String> {
    let mut tar = Command::new("tar")
        // The .debs debootstrap leaves in apt's cache are not part of the image.
        .args([
            "--numeric-owner",
            "--xattrs",
            "--exclude=./var/cache/apt/archives/*.deb",
            "-C",
        ])
        .arg(rootfs)
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io("run tar", e))?;
    let tar_out = tar.stdout.take().expect("piped");
    let import = Command::new("docker")
        .args(["import", "-"])
        .stdin(tar_out)
        .output()
        .map_err(|e| Error::io("run docker import", e))?;
    let tar_status = tar.wait().map_err(|e| Error::io("wait for tar", e))?;
    if !import.status.success() || !tar_status.success() {
        let mut stderr = String::from_utf8_lossy(&import.stderr).into_owned();
        if let Some(mut e) = tar.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut stderr);
        }
        return Err(Error::Command {
            command: format!("tar -C {} -c . | docker import -", rootfs.display()),
            status: format!("tar {tar_status}, docker import {}", import.status),
            stderr,
        });
    }
    Ok(String::from_utf8_lossy(&import.stdout).trim().to_owned())
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

async fn build_base(
    rt: &Runtime,
    config: &BuildConfig,
    settings: &Settings,
    b: &BaseDef,
    progress: &mut dyn FnMut(&str),
) -> Result<(Action, Manifest)> {
    let image = b.image();
    let definition = base_definition(settings, b);
    let definition_hash = hash_json(&definition);
    if let Some(m) = up_to_date(rt, config, &image, &definition_hash, None).await? {
        return Ok((Action::Skipped, m));
    }
    let started = Instant::now();
    let (rootfs, stamp) = ensure_rootfs(settings, b, progress)?;
    progress(&format!("{image}: docker import {}", rootfs.display()));
    let imported = docker_import(&rootfs)?;
    progress(&format!("{image}: probing interpreter and packages"));
    let run_dir = config
        .cache_dir
        .join("build")
        .join(image.replace(['/', ':'], "_"));
    let script = format!(
        "set -eu\n\
         {interp} -c 'import platform; print(platform.python_version())' > /flux/run/python-version\n\
         dpkg-query -W -f '${{Package}}=${{Version}}\\n' > /flux/run/dpkg\n\
         mkdir -p /flux/run\n",
        interp = b.interpreter
    );
    let c = run_build_container(rt, &imported, &script, &run_dir, Vec::new()).await?;
    let version = read_run_file(&run_dir, "python-version")?.trim().to_owned();
    let mut manifest = Manifest {
        schema: MANIFEST_SCHEMA,
        image: image.clone(),
        kind: "base".into(),
        image_id: None,
        definition_hash,
        definition,
        base_image: None,
        base_image_id: None,
        suite: b.suite.clone(),
        mirror: settings.mirror.clone(),
        debootstrap_date: stamp.debootstrap_date.clone(),
        suite_release_date: release_date(&rootfs, &b.suite),
        interpreter: Interpreter {
            path: b.interpreter.clone(),
            version,
        },
        pip_freeze: Vec::new(),
        wheels: Vec::new(),
        debian_packages: lines(&read_run_file(&run_dir, "dpkg")?),
        built_at: now_rfc3339(),
        build_seconds: 0.0,
    };
    manifest.build_seconds = started.elapsed().as_secs_f64();
    let id = commit(rt, c, &image, "root", &manifest).await?;
    // The imported image stays as the committed one's parent; drop only its dangling reference.
    remove_replaced(rt, config, &image, &id).await;
    manifest.image_id = Some(id);
    write_manifest(config, &manifest)?;
    Ok((Action::Built, manifest))
}

/// Downloads the repo's wheels on the host (unless the wheelhouse already matches) and returns
/// their hashes.
fn ensure_wheelhouse(
    config: &BuildConfig,
    settings: &Settings,
    r: &RepoDef,
    b: &BaseDef,
    progress: &mut dyn FnMut(&str),
) -> Result<(PathBuf, Vec<Wheel>)> {
    let dir = config
        .cache_dir
        .join("wheelhouse")
        .join(r.wheelhouse_name(b));
    let stamp_path = dir.join("wheelhouse.json");
    let key = serde_json::json!({"requirements": r.requirements, "pip": r.pip, "python": b.python});
    if let Ok(text) = std::fs::read_to_string(&stamp_path) {
        if let Ok(stamp) = serde_json::from_str::<serde_json::Value>(&text) {
            if stamp.get("key") == Some(&key) {
                let wheels: Vec<Wheel> =
                    serde_json::from_value(stamp["wheels"].clone()).unwrap_or_default();
                if !wheels.is_empty() && hashes_match(&dir, &wheels) {
                    return Ok((dir, wheels));
                }
            }
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| Error::io(format!("remove {}", dir.display()), e))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    progress(&format!(
        "{}: pip download {} (python {})",
        r.image(b),
        r.requirements.join(" "),
        b.python
    ));
    let mut cmd = Command::new(&settings.host_python);
    cmd.args([
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--only-binary=:all:",
    ])
    .args(["--python-version", &b.python, "--implementation", "cp"])
    .args([
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "manylinux_2_28_x86_64",
    ])
    .arg("-d")
    .arg(&dir)
    .args(&r.requirements)
    .arg(&r.pip);
    // The host reaches PyPI through a TLS chain only the system CA bundle has.
    let ca = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if std::env::var_os("PIP_CERT").is_none() && ca.exists() {
        cmd.env("PIP_CERT", ca);
    }
    run_cmd(
        &mut cmd,
        &format!(
            "{} -m pip download into {}",
            settings.host_python,
            dir.display()
        ),
    )?;
    let mut wheels = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| Error::io(format!("list {}", dir.display()), e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    entries.sort();
    for p in entries {
        let bytes = std::fs::read(&p).map_err(|e| Error::io(format!("read {}", p.display()), e))?;
        let file = p.file_name().expect("file").to_string_lossy().into_owned();
        wheels.push(Wheel {
            file,
            sha256: sha256_hex(&bytes),
        });
    }
    let pinned: Vec<String> = r
        .requirements
        .iter()
        .chain(std::iter::once(&r.pip))
        .filter_map(|q| q.split_once("==").map(|(n, _)| normalize_project(n)))
        .collect();
    for w in &wheels {
        let project = normalize_project(w.file.split('-').next().unwrap_or(""));
        if !pinned.contains(&project) {
            progress(&format!(
                "{}: warning: {} came in as an unpinned dependency; pin it in images.toml",
                r.image(b),
                w.file
            ));
        }
    }
    write_json(
        &stamp_path,
        &serde_json::json!({"key": key, "wheels": wheels}),
    )?;
    Ok((dir, wheels))
}

/// PEP 503 normalization (wheel file names use `_` where requirements may use `-` or `.`).
fn normalize_project(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace(['-', '.'], "_")
}

fn hashes_match(dir: &Path, wheels: &[Wheel]) -> bool {
    wheels
        .iter()
        .all(|w| std::fs::read(dir.join(&w.file)).is_ok_and(|bytes| sha256_hex(&bytes) == w.sha256))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

async fn build_repo(
    rt: &Runtime,
    config: &BuildConfig,
    settings: &Settings,
    r: &RepoDef,
    b: &BaseDef,
    progress: &mut dyn FnMut(&str),
) -> Result<(Action, Manifest)> {
    let image = r.image(b);
    let base_image = b.image();
    let base_id = rt
        .image_id(&base_image)
        .await?
        .ok_or_else(|| crate::runtime::missing_image(&base_image))?;
    let definition = repo_definition(settings, r, b);
    let definition_hash = hash_json(&definition);
    if let Some(m) = up_to_date(rt, config, &image, &definition_hash, Some(&base_id)).await? {
        return Ok((Action::Skipped, m));
    }
    let base_manifest = Manifest::load(&manifest_path(&config.cache_dir, &base_image))?;
    let started = Instant::now();
    let (wheelhouse, wheels) = ensure_wheelhouse(config, settings, r, b, progress)?;
    let pip_name = r
        .pip
        .split_once("==")
        .map(|(n, _)| n.trim())
        .unwrap_or("pip");
    let pip_wheel = wheels
        .iter()
        .find(|w| w.file.starts_with(&format!("{pip_name}-")))
        .ok_or_else(|| Error::Build {
            image: image.clone(),
            message: "no pip wheel in the wheelhouse".into(),
        })?;
    let reqs: Vec<String> = r.requirements.iter().map(|s| shell_quote(s)).collect();
    let smoke = match &r.smoke {
        Some(code) => format!("{} -c {}\n", b.interpreter, shell_quote(code)),
        None => String::new(),
    };
    // pip runs from its own wheel (a zip on sys.path): Debian's python3.X may have no pip.
    let script = format!(
        "set -eu\n\
         PY={py}\n\
         PIP=/wheels/{pip}/pip\n\
         \"$PY\" \"$PIP\" install --disable-pip-version-check --no-index --find-links /wheels \
           --no-cache-dir --root-user-action=ignore --break-system-packages {reqs}\n\
         \"$PY\" \"$PIP\" freeze --all --disable-pip-version-check > /flux/run/pip-freeze\n\
         \"$PY\" -c 'import platform; print(platform.python_version())' > /flux/run/python-version\n\
         {smoke}\
         grep -q '^flux:' /etc/group || echo 'flux:x:1000:' >> /etc/group\n\
         grep -q '^flux:' /etc/passwd || echo 'flux:x:1000:1000:flux:/home/flux:/bin/sh' >> /etc/passwd\n\
         mkdir -p /home/flux /flux/run\n\
         chown 1000:1000 /home/flux\n",
        py = b.interpreter,
        pip = pip_wheel.file,
        reqs = reqs.join(" "),
    );
    progress(&format!(
        "{image}: installing {} wheels offline in {base_image}",
        wheels.len()
    ));
    let run_dir = config
        .cache_dir
        .join("build")
        .join(image.replace(['/', ':'], "_"));
    let mounts = vec![Mount::read_only(&wheelhouse, "/wheels")];
    let c = run_build_container(rt, &base_image, &script, &run_dir, mounts).await?;
    let mut manifest = Manifest {
        schema: MANIFEST_SCHEMA,
        image: image.clone(),
        kind: "repo".into(),
        image_id: None,
        definition_hash,
        definition,
        base_image: Some(base_image),
        base_image_id: Some(base_id),
        suite: b.suite.clone(),
        mirror: settings.mirror.clone(),
        debootstrap_date: base_manifest.debootstrap_date.clone(),
        suite_release_date: base_manifest.suite_release_date.clone(),
        interpreter: Interpreter {
            path: b.interpreter.clone(),
            version: read_run_file(&run_dir, "python-version")?.trim().to_owned(),
        },
        pip_freeze: lines(&read_run_file(&run_dir, "pip-freeze")?),
        wheels,
        debian_packages: Vec::new(),
        built_at: now_rfc3339(),
        build_seconds: 0.0,
    };
    manifest.build_seconds = started.elapsed().as_secs_f64();
    let id = commit(rt, c, &image, "flux", &manifest).await?;
    remove_replaced(rt, config, &image, &id).await;
    manifest.image_id = Some(id);
    write_manifest(config, &manifest)?;
    Ok((Action::Built, manifest))
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
    fn image_names_and_xtask_names() {
        let d = defs();
        assert_eq!(d.repos[0].image(&d.bases[0]), "flux/sympy:1.13.3-py3.11");
        assert_eq!(
            xtask_name_for("flux/sympy:1.13.3-py3.11").as_deref(),
            Some("sympy")
        );
        assert_eq!(
            xtask_name_for("flux/base:py3.15-sid").as_deref(),
            Some("py3.15-sid")
        );
        assert_eq!(xtask_name_for("debian:bookworm"), None);
        assert_eq!(
            manifest_path(Path::new("/c"), "flux/sympy:1.13.3-py3.11"),
            Path::new("/c/images/flux_sympy_1.13.3-py3.11.json")
        );
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
