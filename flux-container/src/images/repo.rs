//! A repository layer: the wheelhouse on the host, the source tree, the offline install with
//! the source adopted at `/testbed`, the identity; see [`super`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::{
    commit, hash_json, identity, lines, manifest_path, now_rfc3339, read_run_file, remove_replaced,
    repo_definition, run_build_container, run_cmd, sha256_hex, source, tools_dir, up_to_date,
    write_json, write_manifest, Action, BaseDef, BuildConfig, IdentityInputs, ImageSource,
    Interpreter, Manifest, RepoDef, Settings, TreeDigest, Wheel, MANIFEST_SCHEMA, TESTBED,
    TOOLS_IN_CONTAINER,
};
use crate::error::{build_hint, Error, Result};
use crate::runtime::{Mount, Runtime};

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
    let wheels = pip_download(
        settings,
        &b.python,
        r.requirements.iter().chain(std::iter::once(&r.pip)),
        &dir,
    )?;
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

/// `pip download` on the host of wheels only, for CPython `python` on x86-64 Linux, into
/// `dir`; returns the wheels there with their hashes, sorted by file name.
fn pip_download<'a>(
    settings: &Settings,
    python: &str,
    requirements: impl IntoIterator<Item = &'a String>,
    dir: &Path,
) -> Result<Vec<Wheel>> {
    let mut cmd = Command::new(&settings.host_python);
    cmd.args([
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--only-binary=:all:",
    ])
    .args(["--python-version", python, "--implementation", "cp"])
    .args([
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "manylinux_2_28_x86_64",
    ])
    .arg("-d")
    .arg(dir)
    .args(requirements);
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
    let mut entries: Vec<_> = std::fs::read_dir(dir)
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
    Ok(wheels)
}

/// Resolves `requirements` (any specifiers) for CPython `python` as the builder downloads
/// them, into `name==version` pins (the project names as the wheels spell them, `_` as `-`),
/// sorted by name: what `requirements` of a `[[repo]]` wants. Downloads into a temporary
/// directory under `cache_dir`, removed afterwards.
pub fn resolve_pins(
    settings: &Settings,
    cache_dir: &Path,
    python: &str,
    requirements: &[String],
) -> Result<Vec<String>> {
    let dir = cache_dir
        .join("build")
        .join(format!("resolve-{}", crate::runtime::new_run_id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let wheels = pip_download(settings, python, requirements, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let mut pins: Vec<String> = wheels?
        .iter()
        .filter_map(|w| {
            let mut parts = w.file.split('-');
            let (name, version) = (parts.next()?, parts.next()?);
            Some(format!(
                "{}=={version}",
                name.to_ascii_lowercase().replace('_', "-")
            ))
        })
        .collect();
    pins.sort();
    pins.dedup();
    Ok(pins)
}

/// PEP 503 normalization (wheel file names use `_` where requirements may use `-` or `.`).
pub(super) fn normalize_project(name: &str) -> String {
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

/// Builds (or finds up to date) the image of `r` on `b`; see the module doc of [`super`] for the
/// layout. The package's source tree is made sure of in the cache either way.
pub(super) async fn build(
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
        .ok_or_else(|| Error::ImageMissing {
            image: base_image.clone(),
            hint: build_hint(&base_image),
        })?;
    let started = Instant::now();
    let (tree, source_info) = source::ensure(
        &config.cache_dir,
        &settings.host_python,
        r.package(),
        &r.version,
        progress,
    )?;
    let definition = repo_definition(settings, r, b);
    let definition_hash = hash_json(&definition);
    if let Some(m) = up_to_date(rt, config, &image, &definition_hash, Some(&base_id)).await? {
        let same_tree = m
            .source
            .as_ref()
            .is_some_and(|s| s.info.tree_sha256 == source_info.tree_sha256);
        if same_tree {
            return Ok((Action::Skipped, m));
        }
        progress(&format!(
            "{image}: its /testbed is not the tree in {}; rebuilding",
            tree.display()
        ));
    }
    let base_manifest = Manifest::load(&manifest_path(&config.cache_dir, &base_image))?;
    if base_manifest.identity.is_empty() {
        return Err(Error::Build {
            image,
            message: format!("the manifest of {base_image} has no identity; rebuild it first"),
        });
    }
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
        Some(code) => format!("\"$PY\" -c {}\n", shell_quote(code)),
        None => String::new(),
    };
    // pip runs from its own wheel (a zip on sys.path): Debian's python3.X may have no pip.
    // The tree is copied with its times (the byte-compiled files record them), adopted (the
    // package's files leave site-packages for a .pth to /testbed[/src]), compiled, frozen.
    let script = format!(
        "set -eu\n\
         PY={py}\n\
         PIP=/wheels/{pip}/pip\n\
         TOOLS={tools}/image_tools.py\n\
         \"$PY\" \"$PIP\" install --disable-pip-version-check --no-index --find-links /wheels \
           --no-cache-dir --root-user-action=ignore --break-system-packages {reqs}\n\
         mkdir -p {testbed}\n\
         cp -a /flux/src/. {testbed}/\n\
         \"$PY\" \"$TOOLS\" adopt {package} {testbed} > /flux/run/adopt.json\n\
         \"$PY\" -m compileall -q -j 0 {testbed} > /flux/run/compileall.log 2>&1 || true\n\
         chown -R 0:0 {testbed}\n\
         chmod -R a-w {testbed}\n\
         {writable}\
         \"$PY\" \"$PIP\" freeze --all --disable-pip-version-check > /flux/run/pip-freeze\n\
         \"$PY\" -c 'import platform; print(platform.python_version())' > /flux/run/python-version\n\
         {smoke}\
         grep -q '^flux:' /etc/group || echo 'flux:x:1000:' >> /etc/group\n\
         grep -q '^flux:' /etc/passwd || echo 'flux:x:1000:1000:flux:/home/flux:/bin/sh' >> /etc/passwd\n\
         mkdir -p /home/flux /flux/run\n\
         chown 1000:1000 /home/flux\n\
         \"$PY\" -c 'import site; print(\"\\n\".join(site.getsitepackages()))' > /flux/run/site-dirs\n\
         \"$PY\" \"$TOOLS\" digest {testbed} $(cat /flux/run/site-dirs) /usr/local/bin > /flux/run/digest.json\n",
        py = b.interpreter,
        pip = pip_wheel.file,
        tools = TOOLS_IN_CONTAINER,
        testbed = TESTBED,
        package = shell_quote(r.package()),
        writable = r
            .writable
            .iter()
            .map(|d| {
                let d = shell_quote(&format!("{TESTBED}/{d}"));
                format!("mkdir -p {d} && chown -R 1000:1000 {d} && chmod -R u+w {d}\n")
            })
            .collect::<String>(),
        reqs = reqs.join(" "),
    );
    progress(&format!(
        "{image}: installing {} wheels offline in {base_image}, source at {TESTBED}",
        wheels.len()
    ));
    let run_dir = config
        .cache_dir
        .join("build")
        .join(image.replace(['/', ':'], "_"));
    let mounts = vec![
        Mount::read_only(&wheelhouse, "/wheels"),
        Mount::read_only(&tree, "/flux/src"),
        Mount::read_only(tools_dir(&config.cache_dir)?, TOOLS_IN_CONTAINER),
    ];
    let c = run_build_container(rt, &base_image, &script, &run_dir, mounts).await?;
    let fail = |message: String| Error::Build {
        image: image.clone(),
        message,
    };
    #[derive(serde::Deserialize)]
    struct Adopted {
        import_root: String,
        modules: Vec<String>,
    }
    let adopted: Adopted = serde_json::from_str(&read_run_file(&run_dir, "adopt.json")?)
        .map_err(|e| fail(format!("adopt.json: {e}")))?;
    let trees: BTreeMap<String, Option<TreeDigest>> =
        serde_json::from_str(&read_run_file(&run_dir, "digest.json")?)
            .map_err(|e| fail(format!("digest.json: {e}")))?;
    let in_image = trees.get(TESTBED).cloned().flatten();
    if in_image.as_ref().map(|d| d.sha256.as_str()) != Some(source_info.tree_sha256.as_str()) {
        let _ = c.remove().await;
        return Err(fail(format!(
            "{TESTBED} in the image ({in_image:?}) is not the tree in {} ({})",
            tree.display(),
            source_info.tree_sha256
        )));
    }
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
        identity: String::new(),
        identity_inputs: IdentityInputs { trees },
        source: Some(ImageSource {
            testbed: TESTBED.to_owned(),
            import_root: adopted.import_root,
            modules: adopted.modules,
            cache_tree: format!(
                "src/{}",
                source::tree_name(&source_info.package, &source_info.version)
            ),
            info: source_info,
        }),
        built_at: now_rfc3339(),
        build_seconds: 0.0,
    };
    manifest.identity = identity::identity(&manifest, &base_manifest.identity);
    manifest.build_seconds = started.elapsed().as_secs_f64();
    let id = commit(rt, c, &image, "flux", &manifest).await?;
    remove_replaced(rt, config, &image, &id).await;
    manifest.image_id = Some(id);
    write_manifest(config, &manifest)?;
    Ok((Action::Built, manifest))
}
