//! Wheels built from sdists for `swe-flux-validate`'s images (a stanza's `sdists`), without
//! running any of the distribution's code on the host: its build code is untrusted.
//!
//! For each `name==version`: the sdist's address and sha256 come from PyPI's JSON API (the
//! release's document, or the project's `releases` where that is not served), the file is
//! fetched and its digest checked; its build backends (its `pyproject.toml`'s `[build-system]
//! requires`, read from the archive without unpacking it, else setuptools and wheel) are
//! downloaded as wheels; the wheel is built by pip in a throwaway container of the base image
//! with no network, the sdist mounted read-only. The caller offers the built wheels to its
//! `pip download` (`--find-links`), so the requirements' resolution can use them. `pip
//! download` of the sdist itself is avoided on purpose: it runs `setup.py` for the metadata.
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A stanza's `sdists` entry: one release, pinned exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    pub name: String,
    pub version: String,
}

/// `name==version`, nothing else (no extras, no ranges: the file is chosen, not resolved).
pub fn parse_pin(s: &str) -> Result<Pin> {
    let (name, version) = s
        .split_once("==")
        .map(|(n, v)| (n.trim(), v.trim()))
        .with_context(|| format!("`{s}` is not `name==version`"))?;
    let ok = |t: &str, extra: &str| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(c))
    };
    if !ok(name, "") || !ok(version, "+!") {
        bail!("`{s}` is not `name==version` (a distribution's name and one exact version)");
    }
    Ok(Pin {
        name: name.to_string(),
        version: version.to_string(),
    })
}

/// The sdist of a release as PyPI lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sdist {
    pub filename: String,
    pub url: String,
    pub sha256: String,
}

/// The sdist of `version` in a PyPI JSON document: a release's (`/pypi/<name>/<version>/json`,
/// its `urls`) or a project's (`/pypi/<name>/json`, its `releases[version]`). Its file name is
/// checked to be a plain name of an archive this module can read, its address https.
pub fn sdist_in(json: &str, version: &str) -> Result<Sdist> {
    let v: serde_json::Value = serde_json::from_str(json).context("PyPI's answer is not JSON")?;
    let files = match v["releases"].as_object() {
        Some(releases) => releases
            .get(version)
            .and_then(|f| f.as_array())
            .with_context(|| format!("PyPI lists no release {version}"))?,
        None if v["info"]["version"].as_str() == Some(version) => v["urls"]
            .as_array()
            .context("PyPI's release document has no `urls`")?,
        None => bail!("PyPI's document is not of release {version}"),
    };
    let f = files
        .iter()
        .find(|f| f["packagetype"] == "sdist")
        .with_context(|| format!("PyPI has no sdist of release {version} (wheels only?)"))?;
    let field = |k: &str| -> Result<String> {
        f[k].as_str()
            .map(str::to_string)
            .with_context(|| format!("PyPI's sdist entry has no `{k}`"))
    };
    let filename = field("filename")?;
    let url = field("url")?;
    let sha256 = f["digests"]["sha256"]
        .as_str()
        .filter(|d| d.len() == 64 && d.chars().all(|c| c.is_ascii_hexdigit()))
        .context("PyPI's sdist entry has no sha256 digest")?
        .to_ascii_lowercase();
    if filename.contains('/') || filename.starts_with('.') || archive_kind(&filename).is_none() {
        bail!("PyPI's sdist file name `{filename}` is not a .tar.gz, .tar.bz2 or .zip archive");
    }
    if !url.starts_with("https://") {
        bail!("PyPI's sdist address `{url}` is not https");
    }
    Ok(Sdist {
        filename,
        url,
        sha256,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Archive {
    Tar,
    Zip,
}

fn archive_kind(filename: &str) -> Option<Archive> {
    if [".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"]
        .iter()
        .any(|e| filename.ends_with(e))
    {
        Some(Archive::Tar)
    } else if filename.ends_with(".zip") {
        Some(Archive::Zip)
    } else {
        None
    }
}

/// What building needs, from a `pyproject.toml`'s text: its `[build-system] requires`, or
/// setuptools and wheel (pip's fallback for a project that declares none).
pub fn build_requires(pyproject: Option<&str>) -> Result<Vec<String>> {
    let fallback = || vec!["setuptools".to_string(), "wheel".to_string()];
    let Some(text) = pyproject else {
        return Ok(fallback());
    };
    let t: toml::Table = toml::from_str(text).context("its pyproject.toml is not TOML")?;
    let Some(requires) = t.get("build-system").and_then(|b| b.get("requires")) else {
        return Ok(fallback());
    };
    requires
        .as_array()
        .context("its pyproject.toml's [build-system] requires is not a list")?
        .iter()
        .map(|r| {
            r.as_str()
                .map(str::to_string)
                .context("its pyproject.toml's [build-system] requires holds a non-string")
        })
        .collect()
}

/// The archive's top-level `pyproject.toml` (`<dir>/pyproject.toml`), read without unpacking
/// anything onto the disk.
fn pyproject_of(file: &Path) -> Result<Option<String>> {
    let kind = archive_kind(&file.to_string_lossy()).context("not an archive")?;
    let list = match kind {
        Archive::Tar => Command::new("tar").arg("-tf").arg(file).output(),
        Archive::Zip => Command::new("unzip").arg("-Z1").arg(file).output(),
    }
    .context("listing the sdist")?;
    if !list.status.success() {
        bail!(
            "listing the sdist: {}",
            String::from_utf8_lossy(&list.stderr).trim()
        );
    }
    let names = String::from_utf8_lossy(&list.stdout).into_owned();
    let Some(member) = names.lines().find(|m| {
        let m = m.strip_prefix("./").unwrap_or(m);
        m.strip_suffix("/pyproject.toml")
            .is_some_and(|dir| !dir.is_empty() && !dir.contains('/'))
    }) else {
        return Ok(None);
    };
    let out = match kind {
        // `--` and no wildcards: the member name is taken literally.
        Archive::Tar => Command::new("tar")
            .arg("-xOf")
            .arg(file)
            .arg("--no-wildcards")
            .arg("--")
            .arg(member)
            .output(),
        Archive::Zip => Command::new("unzip")
            .arg("-p")
            .arg(file)
            .arg(member)
            .output(),
    }
    .context("reading the sdist's pyproject.toml")?;
    if !out.status.success() {
        bail!(
            "reading {member}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// Fetches `url` into `to`: `Ok(false)` when the server says 404.
fn fetch(url: &str, to: &Path) -> Result<bool> {
    let out = Command::new("curl")
        .args([
            "--silent",
            "--show-error",
            "--location",
            "--proto",
            "=https",
        ])
        .args(["--write-out", "%{http_code}", "--output"])
        .arg(to)
        .arg(url)
        .output()
        .context("running curl")?;
    let code = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match (out.status.success(), code.as_str()) {
        (true, "200") => Ok(true),
        (true, "404") => Ok(false),
        _ => bail!(
            "fetching {url}: HTTP {code} {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

/// The sdist of a pin as PyPI lists it: the release's document, or (where that is not served)
/// the project's.
fn lookup(pin: &Pin, scratch: &Path) -> Result<Sdist> {
    let doc = scratch.join(format!("{}.json", pin.name));
    let release = format!("https://pypi.org/pypi/{}/{}/json", pin.name, pin.version);
    if !fetch(&release, &doc)? {
        let project = format!("https://pypi.org/pypi/{}/json", pin.name);
        if !fetch(&project, &doc)? {
            bail!("PyPI has no project {}", pin.name);
        }
    }
    let text = std::fs::read_to_string(&doc)?;
    let _ = std::fs::remove_file(&doc);
    sdist_in(&text, &pin.version)
}

fn sha256_of(p: &Path) -> Result<String> {
    use sha2::Digest;
    let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    Ok(format!("{:x}", sha2::Sha256::digest(bytes)))
}

/// Fetches the sdist into `dir` and checks its digest against PyPI's.
fn download(s: &Sdist, dir: &Path) -> Result<PathBuf> {
    let file = dir.join(&s.filename);
    if !fetch(&s.url, &file)? {
        bail!("{} answers 404", s.url);
    }
    check_digest(&file, &s.sha256)?;
    Ok(file)
}

/// The file's sha256 is `want` (lowercase hex), or the file is removed and that is an error.
fn check_digest(file: &Path, want: &str) -> Result<()> {
    let got = sha256_of(file)?;
    if got != want {
        let _ = std::fs::remove_file(file);
        bail!(
            "{}: digest mismatch: sha256 {got}, PyPI lists {want} (the file is not kept)",
            file.file_name().unwrap_or_default().to_string_lossy()
        );
    }
    Ok(())
}

/// Downloads wheels (`pip download --only-binary=:all:`, nothing built) into `dest`.
fn download_wheels(dest: &Path, what: &[String]) -> Result<()> {
    let out = Command::new(std::env::var("FLUX_HOST_PYTHON").unwrap_or_else(|_| "python3".into()))
        .args(["-m", "pip", "download", "--quiet", "--only-binary=:all:"])
        .args(["--python-version", "3.11", "--dest"])
        .arg(dest)
        .args(what)
        .output()
        .context("running pip download")?;
    if !out.status.success() {
        bail!(
            "pip download {}: {}",
            what.join(" "),
            tail(&String::from_utf8_lossy(&out.stderr), 8)
        );
    }
    Ok(())
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

/// Builds the wheel of `sdist` (in `src`) into `out` in a container of `base` with no network,
/// from the backends' wheels in `backends` (with the pip wheel `pipwhl` among them).
fn build_in_container(
    base: &str,
    src: &Path,
    backends: &Path,
    out: &Path,
    pipwhl: &str,
    sdist: &str,
) -> Result<()> {
    let mount = |host: &Path, at: &str, ro: bool| -> Result<String> {
        let host = std::fs::canonicalize(host)?;
        Ok(format!(
            "type=bind,source={},target={at}{}",
            host.display(),
            if ro { ",readonly" } else { "" }
        ))
    };
    let run = Command::new("docker")
        .args(["run", "--rm", "--network", "none", "--mount"])
        .arg(mount(src, "/s", true)?)
        .arg("--mount")
        .arg(mount(backends, "/b", true)?)
        .arg("--mount")
        .arg(mount(out, "/w", false)?)
        .arg(base)
        .arg("/usr/bin/python3.11")
        .arg(format!("/b/{pipwhl}/pip"))
        .args([
            "wheel",
            "--no-cache-dir",
            "--no-index",
            "--find-links",
            "/b",
        ])
        .args(["--no-deps", "--wheel-dir", "/w"])
        .arg(format!("/s/{sdist}"))
        .output()
        .context("running docker run (pip wheel)")?;
    if !run.status.success() {
        let mut text = String::from_utf8_lossy(&run.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&run.stderr));
        bail!("the build failed ({}): {}", run.status, tail(&text, 15));
    }
    Ok(())
}

/// Builds the wheel of one pinned sdist into `dirs.out`.
fn build_one(pin: &Pin, base: &str, pip: &str, dirs: &Dirs) -> Result<()> {
    let sdist = lookup(pin, &dirs.src)?;
    let file = download(&sdist, &dirs.src)?;
    let requires = build_requires(pyproject_of(&file)?.as_deref())?;
    let mut what = vec![pip.to_string()];
    what.extend(requires);
    download_wheels(&dirs.backends, &what)?;
    let pipwhl = std::fs::read_dir(&dirs.backends)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("pip-") && n.ends_with(".whl"))
        .context("no pip wheel was downloaded")?;
    // Each build writes into a directory of its own: the build's code is untrusted, and what it
    // leaves there other than its own wheel never reaches the resolver.
    let scratch = dirs.out.with_extension(format!("build-{}", pin.name));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    build_in_container(
        base,
        &dirs.src,
        &dirs.backends,
        &scratch,
        &pipwhl,
        &sdist.filename,
    )?;
    let taken = take_wheel(&scratch, pin, &dirs.out);
    let _ = std::fs::remove_dir_all(&scratch);
    taken.map(|_| ())
}

/// Moves the one wheel of `pin` the build wrote into `scratch` to `out`: a regular file named
/// `<name>-<version>-….whl` (the name normalised as wheel files spell it). Anything else the
/// build wrote (another distribution's wheel, which the resolver would prefer to PyPI's, a
/// link to a host file) is refused, naming it.
fn take_wheel(scratch: &Path, pin: &Pin, out: &Path) -> Result<PathBuf> {
    let prefix = format!(
        "{}-{}-",
        wheel_name(&pin.name),
        pin.version.to_ascii_lowercase()
    );
    let mut found = None;
    for e in std::fs::read_dir(scratch)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let regular = std::fs::symlink_metadata(e.path())?.file_type().is_file();
        let ours = name.to_ascii_lowercase().starts_with(&prefix) && name.ends_with(".whl");
        if !(regular && ours) || found.is_some() {
            bail!(
                "the build wrote {name}, which is not the one wheel of {}=={} (refused)",
                pin.name,
                pin.version
            );
        }
        found = Some(name);
    }
    let name = found.context("the build wrote no wheel")?;
    let to = out.join(&name);
    std::fs::rename(scratch.join(&name), &to)?;
    Ok(to)
}

/// A distribution's name as wheel files spell it: lower case, runs of `-`, `_`, `.` as `_`.
fn wheel_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('_') {
                out.push('_');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

struct Dirs {
    /// The sdists (mounted read-only at /s).
    src: PathBuf,
    /// The build backends' wheels and pip's (read-only at /b).
    backends: PathBuf,
    /// The built wheels (/w).
    out: PathBuf,
}

/// Builds the wheels of a stanza's `sdists` under `work` (emptied first) in containers of
/// `base`, running pip from the wheel of `pip` (a `pip==…` pin); returns the directory of the
/// built wheels. Errors name the stanza and the distribution.
pub fn build_wheels(
    stanza: &str,
    sdists: &[String],
    base: &str,
    pip: &str,
    work: &Path,
) -> Result<PathBuf> {
    let _ = std::fs::remove_dir_all(work);
    let dirs = Dirs {
        src: work.join("sdists"),
        backends: work.join("backends"),
        out: work.join("wheels"),
    };
    for d in [&dirs.src, &dirs.backends, &dirs.out] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    for s in sdists {
        let pin = parse_pin(s).with_context(|| format!("[{stanza}] sdists"))?;
        eprintln!("xtask: {stanza}: building the wheel of the sdist {s} (no network)");
        build_one(&pin, base, pip, &dirs).with_context(|| format!("[{stanza}] sdists: {s}"))?;
    }
    Ok(dirs.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build's code is untrusted: a wheel of another distribution it leaves beside its own
    /// (which `--find-links` would offer the resolver before PyPI's) or a link to a host file
    /// was taken with the wheels; only the pinned distribution's one wheel is.
    #[test]
    fn only_the_pinned_wheel_a_build_writes_is_taken() {
        let pin = parse_pin("rouge-score==0.1.2").unwrap();
        let work = tempfile::tempdir().unwrap();
        let (scratch, out) = (work.path().join("b"), work.path().join("w"));
        let fresh = || {
            let _ = std::fs::remove_dir_all(&scratch);
            std::fs::create_dir_all(&scratch).unwrap();
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(scratch.join("rouge_score-0.1.2-py3-none-any.whl"), b"w").unwrap();
        };
        fresh();
        let got = take_wheel(&scratch, &pin, &out).unwrap();
        assert_eq!(got, out.join("rouge_score-0.1.2-py3-none-any.whl"));
        assert!(got.is_file());
        std::fs::remove_dir_all(&scratch).unwrap();
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::write(scratch.join("numpy-9.9.9-py3-none-any.whl"), b"x").unwrap();
        let err = take_wheel(&scratch, &pin, &out).unwrap_err().to_string();
        assert!(
            err.contains("numpy-9.9.9"),
            "another distribution's wheel alone: {err}"
        );
        fresh();
        std::fs::write(scratch.join("numpy-9.9.9-py3-none-any.whl"), b"x").unwrap();
        let err = take_wheel(&scratch, &pin, &out).unwrap_err().to_string();
        assert!(err.contains("numpy-9.9.9"), "{err}");
        fresh();
        std::os::unix::fs::symlink("/etc/shadow", scratch.join("rouge_score-0.1.2-x.whl")).unwrap();
        assert!(take_wheel(&scratch, &pin, &out).is_err());
        std::fs::remove_dir_all(&scratch).unwrap();
        std::fs::create_dir_all(&scratch).unwrap();
        assert!(take_wheel(&scratch, &pin, &out)
            .unwrap_err()
            .to_string()
            .contains("no wheel"));
        assert_eq!(wheel_name("Foo.Bar--baz"), "foo_bar_baz");
    }

    #[test]
    fn a_pin_is_one_exact_release() {
        assert_eq!(
            parse_pin(" rouge-score == 0.1.2 ").unwrap(),
            Pin {
                name: "rouge-score".into(),
                version: "0.1.2".into()
            }
        );
        assert_eq!(parse_pin("word2number==1.1").unwrap().version, "1.1");
        for bad in [
            "rouge-score",
            "rouge-score>=0.1",
            "rouge-score[x]==0.1.2",
            "==0.1.2",
            "rouge-score==",
            "../x==1",
            "x==1; python_version<'3'",
        ] {
            assert!(parse_pin(bad).is_err(), "{bad} accepted");
        }
    }

    const SHA: &str = "c7d4da2683e68c9abf0135ef915d63a46643666f848e558a1b9f7ead17ff0f04";

    fn file(kind: &str, name: &str, sha: &str) -> serde_json::Value {
        serde_json::json!({
            "packagetype": kind, "filename": name,
            "url": format!("https://files.pythonhosted.org/packages/e2/c5/{name}"),
            "digests": {"md5": "4eec4a1febf34b4a293c78cda762489b", "sha256": sha},
        })
    }

    #[test]
    fn the_sdist_is_chosen_from_a_release_document_or_a_project_document() {
        let whl = file("bdist_wheel", "x-0.1.2-py3-none-any.whl", SHA);
        let sd = file("sdist", "rouge_score-0.1.2.tar.gz", &SHA.to_uppercase());
        let release = serde_json::json!({"info": {"version": "0.1.2"}, "urls": [whl, sd]});
        let want = Sdist {
            filename: "rouge_score-0.1.2.tar.gz".into(),
            url: "https://files.pythonhosted.org/packages/e2/c5/rouge_score-0.1.2.tar.gz".into(),
            sha256: SHA.into(),
        };
        assert_eq!(sdist_in(&release.to_string(), "0.1.2").unwrap(), want);
        assert!(sdist_in(&release.to_string(), "0.1.1").is_err());
        let project = serde_json::json!({
            "info": {"version": "0.1.3"},
            "urls": [],
            "releases": {"0.1.2": [sd], "0.0.4": [whl]},
        });
        assert_eq!(sdist_in(&project.to_string(), "0.1.2").unwrap(), want);
        let err = |v: &str| format!("{:#}", sdist_in(&project.to_string(), v).unwrap_err());
        assert!(err("0.0.4").contains("no sdist"), "{}", err("0.0.4"));
        assert!(err("9").contains("no release 9"), "{}", err("9"));
    }

    #[test]
    fn an_sdist_entry_without_a_digest_a_plain_name_or_https_is_refused() {
        let doc = |f: serde_json::Value| {
            serde_json::json!({"info": {"version": "1"}, "urls": [f]}).to_string()
        };
        let mut f = file("sdist", "x-1.tar.gz", "abc");
        assert!(sdist_in(&doc(f.clone()), "1").is_err(), "short digest");
        f["digests"]["sha256"] = SHA.into();
        assert!(sdist_in(&doc(f.clone()), "1").is_ok());
        let mut g = f.clone();
        g["filename"] = "../x-1.tar.gz".into();
        assert!(sdist_in(&doc(g), "1").is_err(), "path in the name");
        let mut g = f.clone();
        g["filename"] = "x-1.exe".into();
        assert!(sdist_in(&doc(g), "1").is_err(), "not an archive");
        let mut g = f.clone();
        g["url"] = "http://example.org/x-1.tar.gz".into();
        assert!(sdist_in(&doc(g), "1").is_err(), "not https");
        let mut g = f;
        g["filename"] = "word2number-1.1.zip".into();
        assert!(sdist_in(&doc(g), "1").is_ok(), "a zip sdist");
    }

    #[test]
    fn build_requires_come_from_the_pyproject_else_setuptools_and_wheel() {
        let default = vec!["setuptools".to_string(), "wheel".to_string()];
        assert_eq!(build_requires(None).unwrap(), default);
        assert_eq!(
            build_requires(Some("[project]\nname = \"x\"\n")).unwrap(),
            default
        );
        assert_eq!(
            build_requires(Some(
                "[build-system]\nrequires = [\"setuptools>=61\", \"setuptools_scm\"]\n\
                 build-backend = \"setuptools.build_meta\"\n"
            ))
            .unwrap(),
            vec!["setuptools>=61", "setuptools_scm"]
        );
        assert_eq!(
            build_requires(Some("[build-system]\nrequires = []\n")).unwrap(),
            Vec::<String>::new()
        );
        assert!(build_requires(Some("[build-system]\nrequires = [1]\n")).is_err());
        assert!(build_requires(Some("[build-system\n")).is_err());
    }

    #[test]
    fn a_file_whose_digest_is_not_pypis_is_refused_and_removed() {
        let t = std::env::temp_dir().join(format!("flux-xtask-digest-{}", std::process::id()));
        std::fs::create_dir_all(&t).unwrap();
        let f = t.join("x-1.tar.gz");
        std::fs::write(&f, "abc").unwrap();
        // sha256("abc")
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        check_digest(&f, abc).unwrap();
        let e = format!("{:#}", check_digest(&f, SHA).unwrap_err());
        assert!(e.contains("digest mismatch") && e.contains(abc), "{e}");
        assert!(!f.exists(), "a file that failed its check is removed");
        std::fs::remove_dir_all(&t).unwrap();
    }

    /// The pyproject is read from the archive as listed, the top-level one only.
    #[test]
    fn the_top_level_pyproject_is_read_from_a_tar_sdist() {
        let t = std::env::temp_dir().join(format!("flux-xtask-sdist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        std::fs::create_dir_all(t.join("x-1/sub")).unwrap();
        std::fs::write(t.join("x-1/sub/pyproject.toml"), "nested").unwrap();
        std::fs::write(t.join("x-1/setup.py"), "").unwrap();
        let tar = |name: &str| {
            let ok = Command::new("tar")
                .arg("-czf")
                .arg(t.join(name))
                .arg("-C")
                .arg(&t)
                .arg("x-1")
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "tar");
            t.join(name)
        };
        assert_eq!(pyproject_of(&tar("a.tar.gz")).unwrap(), None);
        std::fs::write(t.join("x-1/pyproject.toml"), "[build-system]\n").unwrap();
        assert_eq!(
            pyproject_of(&tar("b.tar.gz")).unwrap().as_deref(),
            Some("[build-system]\n")
        );
        std::fs::remove_dir_all(&t).unwrap();
    }
}
