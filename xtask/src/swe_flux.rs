//! `cargo xtask swe-flux-validate DIR`: flux against SWE-Flux's own instances.
//!
//! DIR holds copies of instances of SWE-Flux's public store (read with the search tools; they
//! are third-party files and never enter this repository) and a `repos.toml` saying how to
//! make each repository's image:
//!
//! ```toml
//! [jinja]
//! mirror = "/work/.mirror/pallets+jinja/repo"   # a git directory with their commit
//! commit = "5ef7011"                            # the commit their image's /testbed holds
//! requirements = ["MarkupSafe", "pytest", "flit_core"]  # wheels from PyPI (runtime, tests, build backend)
//! prepare = []   # shell commands run in /testbed as the image's last step (optional)
//! env = {}       # environment of the image (optional): haystack's telemetry off, say
//! version = "0.18.2"  # the version of a project that takes it from git (optional)
//! sdists = ["rouge-score==0.1.2"]  # releases PyPI has only as an sdist, built into wheels (optional)
//! ```
//!
//! `env` is set before the install step (a build backend reads it there). A `git archive` tree
//! has no `.git`, so a project whose build takes its version from git (setuptools-scm,
//! hatch-vcs, pdm's scm source) needs `version`: the build is given it
//! (`SETUPTOOLS_SCM_PRETEND_VERSION`, `PDM_BUILD_SCM_VERSION`), and without it the image is
//! refused before anything is built, naming the stanza.
//!
//! `sdists` are built without running their code on the host (`swe_flux_sdist`): each sdist is
//! fetched by the address PyPI's JSON API gives and checked against its sha256 there, its build
//! backends (its `[build-system] requires`, else setuptools and wheel) downloaded as wheels, and
//! the wheel built by pip in a throwaway container of the base image with no network. The built
//! wheels are offered to the requirements' `pip download` (`--find-links`): one is installed
//! when a requirement needs it (lm-eval's rouge-score), or when `requirements` names it.
//!
//! `prepare` is for what their image did by being writable: flux's test containers see the
//! root filesystem read-only with a tmpfs `/tmp`, so a repository whose conftest writes into
//! its tree (scrapy's `generate_keys()` writes `tests/keys/localhost.*` at every start) gets
//! those paths linked into `/tmp`.
//!
//! and `DIR/<repository>/<instance id>/` in their layout (`eval.sh`, `files/`, `oracle.json`).
//!
//! For each repository: its image `flux/swe-flux-<repository>:<commit>-py3.11` is built when
//! missing (the source at their commit in `/testbed`, installed editable so that code runs from
//! `/testbed`, as in theirs, and writable by the test's user as theirs is by root, for pytest's
//! cache; the requirements' wheels installed offline; on flux's Debian bookworm python3.11
//! base). Then every instance is imported (`flux import swe-flux`) into a scratch instance root
//! and checked (`flux harvest --check`: the test traced by flux, their parser on flux's log in
//! the container, the answer against their stored one under their scoring rules), and so is its
//! native twin (`<id>-native`, answered by flux's own extractor, `flux_interop::native`) when
//! the import wrote one. The report says per instance, for both: equal, or why not (`unmapped`
//! with the mapping's reason); and the figures (overall, per repository, per kind). The images
//! instances name carry a flux manifest of their own (`…-manifest-py3.11`). `--json FILE`
//! keeps the report.
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[derive(clap::Args)]
pub struct Args {
    /// The directory of SWE-Flux instances and its repos.toml.
    dir: PathBuf,
    /// Only these repositories (comma-separated).
    #[arg(long)]
    repos: Option<String>,
    /// Only instances whose id contains one of these (comma-separated).
    #[arg(long)]
    only: Option<String>,
    /// Where scratch instances, runs and image build contexts go.
    #[arg(long, default_value = "/tmp/flux-swe-flux-validate")]
    work: PathBuf,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Rebuild the images even if they exist.
    #[arg(long)]
    rebuild: bool,
    /// The flux binary to use (default: build the release one).
    #[arg(long)]
    flux: Option<PathBuf>,
    /// Check only the native instances (not those their parser answers).
    #[arg(long)]
    native_only: bool,
}

#[derive(Clone, Debug)]
struct Repo {
    name: String,
    mirror: PathBuf,
    commit: String,
    requirements: Vec<String>,
    /// Shell commands run in /testbed at the end of the image's build.
    prepare: Vec<String>,
    /// Environment variables of the image (`ENV`), sorted by name.
    env: Vec<(String, String)>,
    /// The version of a project whose build takes it from git.
    version: Option<String>,
    /// `name==version` of releases PyPI has only as an sdist, built into wheels.
    sdists: Vec<String>,
}

fn read_repos(dir: &Path) -> Result<Vec<Repo>> {
    let path = dir.join("repos.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_repos(&text, &path)
}

/// The stanzas of a `repos.toml` (`path` names it in errors). A stanza's `sdists` are checked
/// to be `name==version` pins here, before anything is built.
fn parse_repos(text: &str, path: &Path) -> Result<Vec<Repo>> {
    let v: toml::Table = toml::from_str(text).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for (name, t) in v {
        let s = |k: &str| -> Result<String> {
            t.get(k)
                .and_then(|x| x.as_str())
                .map(str::to_string)
                .with_context(|| format!("{}: [{name}] needs `{k}`", path.display()))
        };
        let list = |k: &str| -> Vec<String> {
            t.get(k)
                .and_then(|x| x.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let sdists = list("sdists");
        if t.get("sdists")
            .is_some_and(|x| x.as_array().is_none_or(|a| a.len() != sdists.len()))
        {
            bail!(
                "{}: [{name}] sdists is not a list of strings",
                path.display()
            );
        }
        for p in &sdists {
            crate::swe_flux_sdist::parse_pin(p)
                .with_context(|| format!("{}: [{name}] sdists", path.display()))?;
        }
        out.push(Repo {
            sdists,
            mirror: PathBuf::from(s("mirror")?),
            commit: s("commit")?,
            requirements: list("requirements"),
            prepare: list("prepare"),
            env: t
                .get("env")
                .and_then(|x| x.as_table())
                .map(|e| {
                    e.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
            version: t
                .get("version")
                .and_then(|x| x.as_str())
                .map(str::to_string),
            name,
        });
    }
    Ok(out)
}

/// Whether a source tree's build takes its version from git (setuptools-scm, hatch-vcs, pdm's
/// `source = "scm"`): what it says in `pyproject.toml`, `setup.cfg` or `setup.py`.
fn version_from_git(testbed: &Path) -> Option<&'static str> {
    let text: String = ["pyproject.toml", "setup.cfg", "setup.py"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(testbed.join(f)).ok())
        .collect::<Vec<_>>()
        .join("\n")
        .to_ascii_lowercase();
    [
        ("setuptools_scm", "setuptools-scm"),
        ("setuptools-scm", "setuptools-scm"),
        ("hatch-vcs", "hatch-vcs"),
        ("[tool.hatch.version]\nsource = \"vcs\"", "hatch-vcs"),
        ("source = \"scm\"", "pdm's scm version"),
        ("use_scm_version", "setuptools-scm"),
    ]
    .iter()
    .find(|(needle, _)| text.contains(needle))
    .map(|(_, what)| *what)
}

/// The Dockerfile of a repository's image: the base, the wheels and the source, the stanza's
/// `env` (and `version`, for a build that takes it from git) set *before* the install step,
/// the requirements then the source installed offline (editable), `prepare` last.
fn dockerfile(r: &Repo, base: &str, pipwhl: &str) -> String {
    let reqs: Vec<String> = std::iter::once("pytest".to_string())
        .chain(r.requirements.iter().cloned())
        .map(|q| format!("'{}'", q.replace('\'', "")))
        .collect();
    let pip_in = format!("/usr/bin/python3.11 /tmp/wheels/{pipwhl}/pip");
    let mut env: Vec<(String, String)> = r.env.clone();
    if let Some(v) = &r.version {
        for k in ["SETUPTOOLS_SCM_PRETEND_VERSION", "PDM_BUILD_SCM_VERSION"] {
            if !env.iter().any(|(n, _)| n == k) {
                env.push((k.to_string(), v.clone()));
            }
        }
    }
    format!(
        "FROM {base}\n\
         COPY wheels /tmp/wheels\n\
         COPY testbed /testbed\n\
         {env}\
         RUN {pip_in} install --quiet --no-index --find-links /tmp/wheels --break-system-packages --root-user-action=ignore {reqs} \\\n \
         && {pip_in} install --quiet --no-index --find-links /tmp/wheels --no-deps --no-build-isolation --break-system-packages --root-user-action=ignore -e /testbed \\\n \
         && rm -rf /tmp/wheels && chmod -R a+rX /testbed && chown -R 1000:1000 /testbed\n\
         {prepare}\
         LABEL flux.swe-flux.commit=\"{commit}\"\n",
        reqs = reqs.join(" "),
        prepare = r
            .prepare
            .iter()
            .map(|c| format!("RUN cd /testbed && {c}\n"))
            .collect::<String>(),
        env = env
            .iter()
            .map(|(k, v)| format!("ENV {k}={}\n", serde_json::Value::from(v.as_str())))
            .collect::<String>(),
        commit = r.commit,
    )
}

fn image_of(r: &Repo) -> String {
    format!(
        "flux/swe-flux-{}:{}-py3.11",
        r.name.replace('_', "-"),
        r.commit
    )
}

/// The image instances name: [`image_of`] with a flux manifest of its own (the base's label
/// says `kind = "base"` and an empty `pip freeze`, so `flux harvest` could not check an
/// instance's `package` against it).
fn manifest_image_of(r: &Repo) -> String {
    format!(
        "flux/swe-flux-{}:{}-manifest-py3.11",
        r.name.replace('_', "-"),
        r.commit
    )
}

/// Lists the distributions installed in the image as `name==version`, and the one installed
/// from /testbed (editable) as `TESTBED name==version`.
const FREEZE: &str = r#"import importlib.metadata as m, json
for d in sorted(m.distributions(), key=lambda d: d.metadata["Name"].lower()):
    line = "%s==%s" % (d.metadata["Name"], d.version)
    print(line)
    try:
        u = json.loads(d.read_text("direct_url.json") or "{}").get("url", "")
    except Exception:
        u = ""
    if u.rstrip("/") == "file:///testbed":
        print("TESTBED " + line)
"#;

/// The manifest-labelled image of a repository and its package pin (`name==version` of the
/// distribution installed from /testbed).
fn labelled_image(r: &Repo, work: &Path, rebuild: bool) -> Result<(String, String)> {
    let plain = build_image(r, work, rebuild)?;
    let out = Command::new("docker")
        .args([
            "run",
            "--rm",
            "--network",
            "none",
            &plain,
            "/usr/bin/python3.11",
            "-c",
            FREEZE,
        ])
        .output()
        .context("docker run (pip freeze)")?;
    if !out.status.success() {
        bail!(
            "listing the packages of {plain}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let freeze: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("TESTBED "))
        .map(str::to_string)
        .collect();
    let package = text
        .lines()
        .find_map(|l| l.strip_prefix("TESTBED "))
        .with_context(|| format!("{plain}: no distribution is installed from /testbed"))?
        .to_string();
    let image = manifest_image_of(r);
    if image_exists(&image) && !rebuild {
        return Ok((image, package));
    }
    let label = Command::new("docker")
        .args([
            "image",
            "inspect",
            &plain,
            "--format",
            "{{ index .Config.Labels \"flux.manifest\" }}",
        ])
        .output()
        .context("docker image inspect")?;
    let mut m: serde_json::Value = serde_json::from_slice(&label.stdout)
        .with_context(|| format!("{plain}: its flux.manifest label is not JSON"))?;
    m["image"] = image.clone().into();
    m["kind"] = "repo".into();
    m["base_image"] = "flux/base:py3.11-bookworm".into();
    m["pip_freeze"] = serde_json::json!(freeze);
    m["definition"] = serde_json::json!({
        "swe_flux": {"repository": r.name, "commit": r.commit, "requirements": r.requirements,
            "prepare": r.prepare, "env": r.env, "version": r.version, "sdists": r.sdists}
    });
    let ctx = work.join("images").join(format!("{}-manifest", r.name));
    std::fs::create_dir_all(&ctx)?;
    std::fs::write(ctx.join("Dockerfile"), format!("FROM {plain}\n"))?;
    build_tagged(
        &image,
        Command::new("docker")
            .args([
                "build",
                "--quiet",
                "--network",
                "none",
                "-t",
                &image,
                "--label",
            ])
            .arg(format!("flux.manifest={}", serde_json::to_string(&m)?))
            .arg(&ctx),
        "docker build (manifest label)",
    )?;
    let _ = std::fs::remove_dir_all(&ctx);
    Ok((image, package))
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let st = cmd.status().with_context(|| format!("running {what}"))?;
    if !st.success() {
        bail!("{what} failed ({st})");
    }
    Ok(())
}

/// The ID of the image `image` names, if it exists.
fn image_id(image: &str) -> Option<String> {
    let out = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .output()
        .ok()?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !id.is_empty()).then_some(id)
}

/// Runs `build`, which tags `image`, then removes the image the tag named before when it moved,
/// unless something still uses that one (no force: a container or another tag keeps it). A
/// `--rebuild` of a repository needing torch otherwise left ~10 GB untagged each time.
fn build_tagged(image: &str, build: &mut Command, what: &str) -> Result<()> {
    let before = image_id(image);
    run(build, what)?;
    let Some(old) = before.filter(|old| image_id(image).as_ref() != Some(old)) else {
        return Ok(());
    };
    let out = Command::new("docker").args(["rmi", &old]).output();
    match out {
        Ok(o) if o.status.success() => {
            eprintln!("xtask: removed {old}, which {image} named before")
        }
        Ok(o) => eprintln!(
            "xtask: kept {old}, which {image} named before: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("xtask: kept {old}, which {image} named before: docker rmi: {e}"),
    }
    Ok(())
}

fn image_exists(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", image])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The paths of `commit`'s tree whose blobs the mirror does not hold (its snapshot drops large
/// files), which `git archive` would fail on.
fn missing_blobs(mirror: &Path, commit: &str) -> Result<Vec<String>> {
    let tree = Command::new("git")
        .arg("--git-dir")
        .arg(mirror)
        .args(["ls-tree", "-r", "-z", commit])
        .output()
        .context("git ls-tree")?;
    if !tree.status.success() {
        bail!(
            "git ls-tree {commit} of {}: {}",
            mirror.display(),
            String::from_utf8_lossy(&tree.stderr)
        );
    }
    let text = String::from_utf8_lossy(&tree.stdout).into_owned();
    // "<mode> blob <object>\t<path>" entries; submodules ("commit") have no blob to read.
    let blobs: Vec<(&str, &str)> = text
        .split('\0')
        .filter_map(|e| {
            let (meta, path) = e.split_once('\t')?;
            let mut m = meta.split(' ');
            (m.nth(1)? == "blob").then_some(())?;
            Some((m.next()?, path))
        })
        .collect();
    let mut check = Command::new("git")
        .arg("--git-dir")
        .arg(mirror)
        .args(["cat-file", "--batch-check=%(objectname)"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("git cat-file")?;
    let mut input = String::new();
    for (o, _) in &blobs {
        input.push_str(o);
        input.push('\n');
    }
    let mut stdin = check.stdin.take().expect("piped");
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(input.as_bytes())
    });
    let out = check.wait_with_output()?;
    writer.join().expect("writer thread")?;
    // One answer line per object in order: its name, or "<name> missing".
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .zip(&blobs)
        .filter(|(l, _)| l.ends_with(" missing"))
        .map(|(_, (_, p))| p.to_string())
        .collect())
}

/// The pip the images install with (and build sdists with), run from its wheel.
const PIP: &str = "pip==25.3";

/// The image of a repository: their commit's source at /testbed, installed editable.
fn build_image(r: &Repo, work: &Path, rebuild: bool) -> Result<String> {
    let image = image_of(r);
    if image_exists(&image) && !rebuild {
        return Ok(image);
    }
    const BASE: &str = "flux/base:py3.11-bookworm";
    if !image_exists(BASE) {
        bail!("the base image {BASE} is missing (cargo xtask images)");
    }
    let ctx = work.join("images").join(&r.name);
    let _ = std::fs::remove_dir_all(&ctx);
    let testbed = ctx.join("testbed");
    let wheels = ctx.join("wheels");
    std::fs::create_dir_all(&testbed)?;
    std::fs::create_dir_all(&wheels)?;
    eprintln!(
        "xtask: {}: source at {} from {}",
        r.name,
        r.commit,
        r.mirror.display()
    );
    let missing = missing_blobs(&r.mirror, &r.commit)?;
    if !missing.is_empty() {
        eprintln!(
            "xtask: {}: {} file(s) the mirror lacks (snapshots keep no file of 4 MiB or more) \
             are left out: {}",
            r.name,
            missing.len(),
            missing.join(", ")
        );
    }
    let archive = Command::new("git")
        .arg("--git-dir")
        .arg(&r.mirror)
        .args(["archive", "--format=tar", &r.commit, "--", "."])
        .args(missing.iter().map(|m| format!(":(exclude,literal){m}")))
        .output()
        .context("git archive")?;
    if !archive.status.success() {
        bail!(
            "git archive {} of {}: {}",
            r.commit,
            r.mirror.display(),
            String::from_utf8_lossy(&archive.stderr)
        );
    }
    let mut tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&testbed)
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    {
        use std::io::Write;
        tar.stdin
            .take()
            .expect("piped")
            .write_all(&archive.stdout)?;
    }
    if !tar.wait()?.success() {
        bail!("unpacking the source of {}", r.name);
    }
    if let (None, Some(what)) = (&r.version, version_from_git(&testbed)) {
        bail!(
            "[{}] takes its version from git ({what}), and a `git archive` tree has no .git: give \
             `version = \"...\"` in its repos.toml stanza (the release its commit belongs to)",
            r.name
        );
    }
    // Outside the build context: docker build need not be sent the sdists.
    let built_dir = work.join("images").join(format!("{}-sdists", r.name));
    let built = if r.sdists.is_empty() {
        None
    } else {
        Some(crate::swe_flux_sdist::build_wheels(
            &r.name, &r.sdists, BASE, PIP, &built_dir,
        )?)
    };
    eprintln!("xtask: {}: wheels ({})", r.name, r.requirements.join(" "));
    let mut pip =
        Command::new(std::env::var("FLUX_HOST_PYTHON").unwrap_or_else(|_| "python3".into()));
    pip.args([
        "-m",
        "pip",
        "download",
        "--quiet",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--dest",
    ])
    .arg(&wheels);
    if let Some(b) = &built {
        pip.arg("--find-links").arg(b);
    }
    pip.args([PIP, "pytest"]).args(&r.requirements);
    run(&mut pip, "pip download")?;
    let _ = std::fs::remove_dir_all(&built_dir);
    let pipwhl = std::fs::read_dir(&wheels)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("pip-") && n.ends_with(".whl"))
        .context("no pip wheel was downloaded")?;
    let docker = dockerfile(r, BASE, &pipwhl);
    std::fs::write(ctx.join("Dockerfile"), docker)?;
    eprintln!("xtask: {}: docker build -t {image}", r.name);
    build_tagged(
        &image,
        Command::new("docker")
            .args(["build", "--quiet", "--network", "none", "-t", &image])
            .arg(&ctx),
        "docker build",
    )?;
    let _ = std::fs::remove_dir_all(&ctx);
    Ok(image)
}

#[derive(Clone, Debug, serde::Serialize)]
struct Row {
    repository: String,
    instance: String,
    kind: String,
    /// `equal`, `differs`, `error`, `no-parser` (their store keeps no `files/parser.py`).
    import: String,
    /// Why, when not equal.
    why: String,
    /// The native instance (their question asked of a flux extractor): `equal`, `differs`,
    /// `error`, `unmapped`.
    native: String,
    /// Why, when not equal.
    native_why: String,
}

fn kind_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("oracle.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["question_kind"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// An import refused because the instance has neither their parser nor a native rule
/// (`flux: error: DIR: files/parser.py (…) is missing (native: WHY)`): the parser's reason and
/// the mapping's, so the report counts it as `no-parser` / `unmapped`, not as an import error.
fn without_parser_or_mapping(stderr: &str) -> Option<(String, String)> {
    let line = stderr
        .lines()
        .find(|l| l.contains(" is missing (native: "))?;
    let (head, native) = line.split_once(" (native: ")?;
    let parser = head.rsplit_once(": ").map_or(head, |(_, p)| p);
    Some((parser.to_string(), native.trim_end_matches(')').to_string()))
}

/// The first useful line of a failure's message.
fn reason(stderr: &str) -> (String, String) {
    let text = stderr.trim();
    let verdict = if text.contains("not SWE-Flux's stored answer") {
        "differs"
    } else {
        "error"
    };
    let why: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("flux: 1 instance"))
        .take(6)
        .collect();
    (verdict.into(), why.join(" / ").chars().take(600).collect())
}

pub fn run_validate(a: Args) -> Result<ExitCode> {
    let repos = read_repos(&a.dir)?;
    let wanted: Option<Vec<String>> = a
        .repos
        .as_ref()
        .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    let flux = match &a.flux {
        Some(f) => f.clone(),
        None => crate::build_flux_release()?,
    };
    std::fs::create_dir_all(&a.work)?;
    let mut rows = Vec::new();
    for r in repos
        .iter()
        .filter(|r| wanted.as_ref().is_none_or(|w| w.contains(&r.name)))
    {
        let src = a.dir.join(&r.name);
        let mut ids: Vec<PathBuf> = std::fs::read_dir(&src)
            .with_context(|| format!("{}", src.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("eval.sh").is_file())
            .filter(|p| {
                a.only.as_ref().is_none_or(|o| {
                    let id = p.file_name().unwrap().to_string_lossy().into_owned();
                    o.split(',').any(|x| id.contains(x.trim()))
                })
            })
            .collect();
        ids.sort();
        if ids.is_empty() {
            continue;
        }
        let (image, package) = match labelled_image(r, &a.work, a.rebuild) {
            Ok(i) => i,
            Err(e) => {
                for d in &ids {
                    rows.push(Row {
                        repository: r.name.clone(),
                        instance: d.file_name().unwrap().to_string_lossy().into(),
                        kind: kind_of(d),
                        import: "error".into(),
                        why: format!("image: {e:#}"),
                        native: "error".into(),
                        native_why: "image".into(),
                    });
                }
                continue;
            }
        };
        let out = a.work.join("instances");
        for d in &ids {
            let id = d.file_name().unwrap().to_string_lossy().into_owned();
            let kind = kind_of(d);
            let imported = Command::new(&flux)
                .args(["import", "swe-flux"])
                .arg(d)
                .args([
                    "--repository",
                    &r.name,
                    "--image",
                    &image,
                    "--package",
                    &package,
                    "--replace",
                    "--out",
                ])
                .arg(&out)
                .output()?;
            let check = |id: &str| -> Result<(String, String)> {
                let checked = Command::new(&flux)
                    .args(["harvest", "--check", "--cache"])
                    .arg(a.work.join("cache"))
                    .arg(out.join(&r.name).join(id))
                    .output()?;
                Ok(if checked.status.success() {
                    ("equal".to_string(), String::new())
                } else {
                    reason(&String::from_utf8_lossy(&checked.stderr))
                })
            };
            let stdout = String::from_utf8_lossy(&imported.stdout).into_owned();
            let ((import, why), (native, native_why)) = if !imported.status.success() {
                let stderr = String::from_utf8_lossy(&imported.stderr);
                match without_parser_or_mapping(&stderr) {
                    // Nothing to import: no parser stored, and the question has no native rule.
                    Some((p, n)) => (("no-parser".to_string(), p), ("unmapped".to_string(), n)),
                    None => {
                        let e = format!("import: {}", stderr.trim());
                        (("error".to_string(), e.clone()), ("error".to_string(), e))
                    }
                }
            } else {
                let no_parser = stdout
                    .lines()
                    .find_map(|l| l.split_once(" without their parser: ").map(|(_, w)| w));
                let parser = match no_parser {
                    // Their store keeps it without `files/parser.py`: only the native twin.
                    Some(why) => ("no-parser".to_string(), why.to_string()),
                    None if a.native_only => ("skipped".to_string(), String::new()),
                    None => check(&id)?,
                };
                let native = match stdout
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("no native instance: "))
                {
                    Some(why) => ("unmapped".to_string(), why.to_string()),
                    None => check(&format!("{id}-native"))?,
                };
                (parser, native)
            };
            eprintln!(
                "xtask: {}/{id} ({kind}): import {import} {why}; native {native} {native_why}",
                r.name
            );
            rows.push(Row {
                repository: r.name.clone(),
                instance: id,
                kind,
                import,
                why,
                native,
                native_why,
            });
        }
    }
    print_report(&rows);
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&rows)? + "\n")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(rows: &[Row]) {
    println!("| repository | instance | kind | import | native | why not |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        let mut why = Vec::new();
        if !r.why.is_empty() {
            why.push(format!("import: {}", r.why));
        }
        if !r.native_why.is_empty() {
            why.push(format!("native: {}", r.native_why));
        }
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.repository,
            r.instance,
            r.kind,
            r.import,
            r.native,
            why.join("; ").replace('|', "\\|")
        );
    }
    let pct = |n: usize, d: usize| {
        if d == 0 {
            0.0
        } else {
            100.0 * n as f64 / d as f64
        }
    };
    let mut by: BTreeMap<(String, String), (usize, usize, usize, usize)> = BTreeMap::new();
    for r in rows {
        for key in [
            ("all".to_string(), String::new()),
            ("repository".into(), r.repository.clone()),
            ("kind".into(), r.kind.clone()),
        ] {
            let e = by.entry(key).or_default();
            e.0 += usize::from(r.import == "equal");
            e.1 += usize::from(r.native == "equal");
            e.2 += 1;
            e.3 += usize::from(r.import != "no-parser");
        }
    }
    println!();
    // Import is measured over the instances that have their parser; native over all.
    for ((what, name), (imp, nat, n, with_parser)) in &by {
        println!(
            "{what} {name}: import equal {imp}/{with_parser} ({:.1} %), native equal {nat}/{n} ({:.1} %)",
            pct(*imp, *with_parser),
            pct(*nat, *n)
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_rebuilt_image_does_not_leave_the_one_it_replaced() {
        let docker = std::process::Command::new("docker").arg("info").output();
        if !docker.is_ok_and(|o| o.status.success()) {
            flux_skip::skip(
                "a_rebuilt_image_does_not_leave_the_one_it_replaced",
                "no Docker daemon answers",
            );
            return;
        }
        let image = "flux/xtask-rebuild-test:latest";
        let ctx = tempfile::tempdir().unwrap();
        let build = |label: &str| {
            std::fs::write(
                ctx.path().join("Dockerfile"),
                format!("FROM scratch\nLABEL flux.test={label}\n"),
            )
            .unwrap();
            super::build_tagged(
                image,
                std::process::Command::new("docker")
                    .args(["build", "--quiet", "-t", image])
                    .arg(ctx.path()),
                "docker build",
            )
            .unwrap();
            super::image_id(image).unwrap()
        };
        let first = build("first");
        let second = build("second");
        assert_ne!(first, second);
        assert!(
            !super::image_exists(&first),
            "the replaced image {first} is still there"
        );
        let _ = std::process::Command::new("docker")
            .args(["rmi", image])
            .output();
    }

    use super::*;

    fn repo(env: &[(&str, &str)], version: Option<&str>) -> Repo {
        Repo {
            name: "instruct_lab".into(),
            mirror: PathBuf::from("/nowhere"),
            commit: "abc1234".into(),
            requirements: vec!["setuptools-scm>=8".into()],
            prepare: vec!["true".into()],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            version: version.map(str::to_string),
            sdists: Vec::new(),
        }
    }

    #[test]
    fn a_stanza_may_name_sdists_as_exact_pins() {
        let path = Path::new("repos.toml");
        let stanza = "[instruct_lab]\nmirror = \"/m\"\ncommit = \"5130cd2f\"\n";
        let repos = parse_repos(
            &format!("{stanza}sdists = [\"rouge-score==0.1.2\", \"word2number==1.1\"]\n"),
            path,
        )
        .unwrap();
        assert_eq!(repos[0].sdists, ["rouge-score==0.1.2", "word2number==1.1"]);
        assert!(parse_repos(stanza, path).unwrap()[0].sdists.is_empty());
        for bad in [
            "sdists = [\"rouge-score>=0.1\"]",
            "sdists = [1]",
            "sdists = \"x==1\"",
        ] {
            let e = parse_repos(&format!("{stanza}{bad}\n"), path).unwrap_err();
            let e = format!("{e:#}");
            assert!(e.contains("[instruct_lab] sdists"), "{bad}: {e}");
        }
    }

    /// Issue 25: `swe-flux-validate` could not build a setuptools-scm project from a `git
    /// archive` tree: no version (no `.git`), and the stanza's `env` came after the install step.
    #[test]
    fn a_setuptools_scm_project_gets_its_version_and_env_before_the_install() {
        let d = dockerfile(
            &repo(&[("TELEMETRY", "off")], Some("0.18.2")),
            "flux/base:py3.11-bookworm",
            "pip-25.3-py3-none-any.whl",
        );
        let at = |needle: &str| {
            d.find(needle)
                .unwrap_or_else(|| panic!("{needle:?} not in:\n{d}"))
        };
        let install = at("RUN /usr/bin/python3.11");
        assert!(at("ENV TELEMETRY=\"off\"\n") < install, "{d}");
        assert!(
            at("ENV SETUPTOOLS_SCM_PRETEND_VERSION=\"0.18.2\"\n") < install,
            "{d}"
        );
        assert!(
            at("ENV PDM_BUILD_SCM_VERSION=\"0.18.2\"\n") < install,
            "{d}"
        );
        assert!(at("RUN cd /testbed && true") > install, "prepare last");
        // The stanza's own setting wins.
        let own = dockerfile(
            &repo(&[("SETUPTOOLS_SCM_PRETEND_VERSION", "1.0")], Some("2.0")),
            "b",
            "p.whl",
        );
        assert_eq!(own.matches("SETUPTOOLS_SCM_PRETEND_VERSION").count(), 1);
        assert!(!dockerfile(&repo(&[], None), "b", "p.whl").contains("PRETEND"));
    }

    /// Issue 25 (test-part run, 2026-12-02): an instance stored without `files/parser.py` whose
    /// question has no native rule made `flux import` refuse it, and the report counted that
    /// refusal as an import *error* for both twins instead of `no-parser` / `unmapped`.
    #[test]
    fn an_instance_without_parser_or_native_rule_is_reported_as_such_not_as_an_import_error() {
        let stderr =
            "flux: note: no cache found\nflux: error: /s/flask/x_m5: files/parser.py (the parser \
                      eval.sh runs) is missing (native: no flux extractor is mapped for the answer \
                      shape `exception_types`)\n";
        let (parser, native) = without_parser_or_mapping(stderr).expect("recognised");
        assert_eq!(
            parser,
            "files/parser.py (the parser eval.sh runs) is missing"
        );
        assert_eq!(
            native,
            "no flux extractor is mapped for the answer shape `exception_types`"
        );
        assert!(without_parser_or_mapping("flux: error: the image is missing\n").is_none());
    }

    #[test]
    fn a_build_that_takes_its_version_from_git_is_recognised() {
        let t = std::env::temp_dir().join(format!("flux-xtask-scm-{}", std::process::id()));
        std::fs::create_dir_all(&t).unwrap();
        let write = |text: &str| std::fs::write(t.join("pyproject.toml"), text).unwrap();
        write("[build-system]\nrequires = [\"setuptools>=64\", \"setuptools_scm>=8\"]\n");
        assert_eq!(version_from_git(&t), Some("setuptools-scm"));
        write("[build-system]\nrequires = [\"hatchling\", \"hatch-vcs\"]\n");
        assert_eq!(version_from_git(&t), Some("hatch-vcs"));
        write("[tool.pdm.version]\nsource = \"scm\"\n");
        assert_eq!(version_from_git(&t), Some("pdm's scm version"));
        write("[project]\nversion = \"1.0\"\n[build-system]\nrequires = [\"hatchling\"]\n");
        assert_eq!(version_from_git(&t), None);
        std::fs::remove_dir_all(&t).unwrap();
    }
}
