//! A base image: a debootstrapped rootfs (cached under `settings.rootfs_cache`), `docker
//! import`ed, probed (interpreter version, Debian packages, digests of the stdlib and the
//! interpreter) and committed with its manifest; see [`super`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{
    base_definition, commit, hash_json, identity, lines, now_rfc3339, read_run_file,
    remove_replaced, run_build_container, run_cmd, tools_dir, up_to_date, write_json,
    write_manifest, Action, BaseDef, BuildConfig, IdentityInputs, Interpreter, Manifest, Settings,
    TreeDigest, MANIFEST_SCHEMA, TOOLS_IN_CONTAINER,
};
use crate::error::{Error, Result};
use crate::runtime::{Mount, Runtime};

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
        // The .debs debootstrap leaves in apt's cache are not part of the image, nor what is in
        // its temporary directories (tests chroot into these rootfs and write there meanwhile).
        .args([
            "--numeric-owner",
            "--xattrs",
            "--exclude=./var/cache/apt/archives/*.deb",
            "--exclude=./tmp/*",
            "--exclude=./var/tmp/*",
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

/// What a probe container finds in a base image.
struct Probe {
    container: crate::runtime::Container,
    version: String,
    debian_packages: Vec<String>,
    trees: BTreeMap<String, Option<TreeDigest>>,
}

/// Runs the probe (interpreter version, Debian packages, digests of the interpreter and the
/// stdlib) in a container of `image_ref`; returns it stopped, for commit or removal.
async fn probe(
    rt: &Runtime,
    config: &BuildConfig,
    image: &str,
    image_ref: &str,
    b: &BaseDef,
) -> Result<Probe> {
    let run_dir = config
        .cache_dir
        .join("build")
        .join(image.replace(['/', ':'], "_"));
    let stdlib = format!("/usr/lib/python{}", b.python);
    let script = match b.java.as_deref().and(b.interpreter.strip_suffix("/bin/java")) {
        // A JDK base: the JDK's version from its `release` file, its home and Debian's jars
        // digested by the base's Python (one of its packages, for flux's image tools).
        Some(home) => format!(
            "set -eu\n\
             sed -n 's/^JAVA_VERSION=\"\\(.*\\)\"/\\1/p' {home}/release > /flux/run/python-version\n\
             dpkg-query -W -f '${{Package}}=${{Version}}\\n' > /flux/run/dpkg\n\
             python3 {tools}/image_tools.py digest {home} /usr/share/java > /flux/run/digest.json\n",
            tools = TOOLS_IN_CONTAINER,
        ),
        None => format!(
            "set -eu\n\
             {interp} -c 'import platform; print(platform.python_version())' > /flux/run/python-version\n\
             dpkg-query -W -f '${{Package}}=${{Version}}\\n' > /flux/run/dpkg\n\
             {interp} {tools}/image_tools.py digest {interp} {stdlib} > /flux/run/digest.json\n",
            interp = b.interpreter,
            tools = TOOLS_IN_CONTAINER,
        ),
    };
    let mounts = vec![Mount::read_only(
        tools_dir(&config.cache_dir)?,
        TOOLS_IN_CONTAINER,
    )];
    let container = run_build_container(rt, image_ref, &script, &run_dir, mounts).await?;
    let trees = serde_json::from_str(&read_run_file(&run_dir, "digest.json")?).map_err(|e| {
        Error::Build {
            image: image.to_owned(),
            message: format!("digest.json: {e}"),
        }
    })?;
    Ok(Probe {
        container,
        version: read_run_file(&run_dir, "python-version")?.trim().to_owned(),
        debian_packages: lines(&read_run_file(&run_dir, "dpkg")?),
        trees,
    })
}

/// A manifest of an older schema that still describes the image (same definition, same image
/// id): the image need not be rebuilt, only probed for what the newer schema records (the
/// content identity). The image's label keeps the old manifest; the file gets the new one.
async fn upgrade(
    rt: &Runtime,
    config: &BuildConfig,
    b: &BaseDef,
    definition_hash: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<Option<Manifest>> {
    let image = b.image();
    if config.rebuild {
        return Ok(None);
    }
    let Ok(old) = Manifest::load(&super::manifest_path(&config.cache_dir, &image)) else {
        return Ok(None);
    };
    let current = rt.image_id(&image).await?;
    if old.schema >= MANIFEST_SCHEMA
        || old.definition_hash != definition_hash
        || current.is_none()
        || current != old.image_id
    {
        return Ok(None);
    }
    progress(&format!(
        "{image}: manifest of schema {} still matches the image; probing it for its identity",
        old.schema
    ));
    let p = probe(rt, config, &image, &image, b).await?;
    p.container.remove().await?;
    let mut m = Manifest {
        schema: MANIFEST_SCHEMA,
        interpreter: Interpreter {
            path: b.interpreter.clone(),
            version: p.version,
        },
        debian_packages: p.debian_packages,
        identity_inputs: IdentityInputs { trees: p.trees },
        ..old
    };
    m.identity = identity::identity(&m, "");
    write_manifest(config, &m)?;
    Ok(Some(m))
}

pub(super) async fn build(
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
    if let Some(m) = upgrade(rt, config, b, &definition_hash, progress).await? {
        return Ok((Action::Skipped, m));
    }
    let started = Instant::now();
    let (rootfs, stamp) = ensure_rootfs(settings, b, progress)?;
    progress(&format!("{image}: docker import {}", rootfs.display()));
    let imported = docker_import(&rootfs)?;
    progress(&format!("{image}: probing interpreter and packages"));
    let p = probe(rt, config, &image, &imported, b).await?;
    let jdk_pin: Vec<String> = b
        .java
        .as_ref()
        .map(|_| vec![format!("openjdk=={}", p.version)])
        .unwrap_or_default();
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
            version: p.version,
        },
        // A JDK base names its JDK the way an instance's `package` pins what it runs on
        // (`openjdk==17.0.19`): a program compiled and run in the base itself (the JVM witness)
        // is pinned to it. Python bases have no packages of their own.
        pip_freeze: jdk_pin,
        wheels: Vec::new(),
        debian_packages: p.debian_packages,
        identity: String::new(),
        identity_inputs: IdentityInputs { trees: p.trees },
        source: None,
        built_at: now_rfc3339(),
        build_seconds: 0.0,
    };
    manifest.identity = identity::identity(&manifest, "");
    manifest.build_seconds = started.elapsed().as_secs_f64();
    let id = commit(rt, p.container, &image, "root", &manifest).await?;
    // The imported image stays as the committed one's parent; drop only its dangling reference.
    remove_replaced(rt, config, &image, &id).await;
    manifest.image_id = Some(id);
    write_manifest(config, &manifest)?;
    Ok((Action::Built, manifest))
}
