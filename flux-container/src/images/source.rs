//! The package source of a repository image: its sdist at the pinned version (else the files of
//! a pure-Python wheel of it), fetched on the host and unpacked once into the cache, then copied
//! read-only into the image at [`TESTBED`].
//!
//! * `<cache>/sources/<file>`: the archive as the index served it (sha256 checked against the
//!   index's), kept so that a rebuild needs no network.
//! * `<cache>/src/<package>-<version>/`: the unpacked tree (the sdist's top directory, minus
//!   top-level `*.egg-info` build metadata) — what `flux eval` shows models, byte for byte the
//!   `.py` files the image imports and the trace names.
//! * `<cache>/src/<package>-<version>.json`: a stamp ([`SourceInfo`]) with the archive's hash and
//!   the tree's digest ([`tree_digest`]); a tree whose digest no longer matches is unpacked again.
//!
//! The fetch and the unpacking run in the host's Python (`py/fetch_source.py`, stdlib only:
//! the index's JSON API, tarfile's "data" filter against members that escape the tree); the
//! package's own build code never runs on the host.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Where an image holds its package's source tree (read-only, owned by root): the layout of
/// SWE-bench-style images, which SWE-Flux's `eval.sh` files assume (`cd /testbed`,
/// `src/flask/…`).
pub const TESTBED: &str = "/testbed";

pub(crate) const FETCH_SCRIPT: &str = include_str!("py/fetch_source.py");

/// What was unpacked, and from where.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceInfo {
    /// The distribution, as spelled in the image definition (`cfn-lint`).
    pub package: String,
    pub version: String,
    /// `sdist`, or `wheel` when the index has no sdist of the version (then no tests).
    pub kind: String,
    /// The archive's file name and URL on the index.
    pub file: String,
    pub url: String,
    pub sha256: String,
    pub size: u64,
    /// [`tree_digest`] of the unpacked tree.
    pub tree_sha256: String,
    pub entries: u64,
}

/// `<package>-<version>`: the name of the tree under `<cache>/src/`.
pub fn tree_name(package: &str, version: &str) -> String {
    format!("{package}-{version}")
}

/// `<cache>/src/<package>-<version>`.
pub fn tree_dir(cache_dir: &Path, package: &str, version: &str) -> PathBuf {
    cache_dir.join("src").join(tree_name(package, version))
}

fn stamp_path(cache_dir: &Path, package: &str, version: &str) -> PathBuf {
    cache_dir
        .join("src")
        .join(format!("{}.json", tree_name(package, version)))
}

/// The unpacked tree of `package==version` under `cache_dir`, fetched and unpacked unless the
/// stamp says it is there already and the tree still has the stamp's digest.
pub(crate) fn ensure(
    cache_dir: &Path,
    host_python: &str,
    package: &str,
    version: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<(PathBuf, SourceInfo)> {
    let dir = tree_dir(cache_dir, package, version);
    let stamp = stamp_path(cache_dir, package, version);
    if let Ok(text) = std::fs::read_to_string(&stamp) {
        if let Ok(info) = serde_json::from_str::<SourceInfo>(&text) {
            if dir.is_dir() && tree_digest(&dir).is_ok_and(|(d, _)| d == info.tree_sha256) {
                return Ok((dir, info));
            }
            progress(&format!(
                "{} changed since it was unpacked; unpacking {} again",
                dir.display(),
                info.file
            ));
        }
    }
    for p in [&dir, &dir.with_extension("unpack")] {
        if p.exists() {
            make_writable(p);
            std::fs::remove_dir_all(p)
                .map_err(|e| Error::io(format!("remove {}", p.display()), e))?;
        }
    }
    let src = cache_dir.join("src");
    std::fs::create_dir_all(&src).map_err(|e| Error::io(format!("create {}", src.display()), e))?;
    progress(&format!(
        "{package}=={version}: fetching its source from the package index into {}",
        dir.display()
    ));
    let mut cmd = Command::new(host_python);
    cmd.arg("-c")
        .arg(FETCH_SCRIPT)
        .arg(package)
        .arg(version)
        .arg(cache_dir.join("sources"))
        .arg(&dir);
    // The host reaches PyPI through a TLS chain only the system CA bundle has.
    let ca = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if std::env::var_os("PIP_CERT").is_none() && ca.exists() {
        cmd.env("PIP_CERT", ca);
    }
    let out = super::run_cmd(
        &mut cmd,
        &format!("{host_python} fetch_source.py {package} {version}"),
    )?;
    #[derive(Deserialize)]
    struct Fetched {
        kind: String,
        file: String,
        url: String,
        sha256: String,
        size: u64,
    }
    let f: Fetched = serde_json::from_str(out.trim()).map_err(|e| Error::Build {
        image: format!("{package}=={version}"),
        message: format!("fetch_source.py printed {out:?}: {e}"),
    })?;
    let (tree_sha256, entries) = tree_digest(&dir)?;
    let info = SourceInfo {
        package: package.to_owned(),
        version: version.to_owned(),
        kind: f.kind,
        file: f.file,
        url: f.url,
        sha256: f.sha256,
        size: f.size,
        tree_sha256,
        entries,
    };
    super::write_json(&stamp, &info)?;
    Ok((dir, info))
}

/// Makes `package`, installed in the environment of `python` (a venv on the host, say),
/// import from the unpacked `tree` as it does in an image (`image_tools.py adopt`: its files
/// leave site-packages once checked byte-identical to the tree's; a `.pth` names the tree).
/// Returns the import root.
pub fn adopt(python: &Path, package: &str, tree: &Path) -> Result<String> {
    let script = tempfile_path("image_tools.py")?;
    std::fs::write(&script, super::IMAGE_TOOLS)
        .map_err(|e| Error::io(format!("write {}", script.display()), e))?;
    let mut cmd = Command::new(python);
    cmd.arg(&script).arg("adopt").arg(package).arg(tree);
    let out = super::run_cmd(
        &mut cmd,
        &format!(
            "{} image_tools.py adopt {package} {}",
            python.display(),
            tree.display()
        ),
    );
    if let Some(dir) = script.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
    let out = out?;
    let v: serde_json::Value = serde_json::from_str(out.trim()).map_err(|e| Error::Build {
        image: package.to_owned(),
        message: format!("image_tools.py adopt printed {out:?}: {e}"),
    })?;
    Ok(v["import_root"].as_str().unwrap_or_default().to_owned())
}

fn tempfile_path(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "flux-{}-{}",
        std::process::id(),
        crate::runtime::new_run_id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    Ok(dir.join(name))
}

/// Best effort: give the owner write permission on every directory under `p`, so that a tree
/// copied out of an image (read-only) can be removed.
fn make_writable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return;
    };
    if meta.is_dir() {
        let mut perm = meta.permissions();
        perm.set_mode(perm.mode() | 0o700);
        let _ = std::fs::set_permissions(p, perm);
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                make_writable(&e.path());
            }
        }
    }
}

/// The "flux-tree-v1" digest of the tree at `root` (file, directory or link) and its number of
/// entries: the algorithm `py/image_tools.py digest` implements in the image, documented there.
/// Content, names, link targets and the executable bit count; times, owners and other
/// permission bits do not; `__pycache__` directories and `*.pyc` files are left out.
pub fn tree_digest(root: &Path) -> Result<(String, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let io = |p: &Path, e| Error::io(format!("digest {}", p.display()), e);
    let mut lines: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut stack: Vec<(Vec<u8>, PathBuf)> = Vec::new();
    let top = std::fs::symlink_metadata(root).map_err(|e| io(root, e))?;
    lines.push(entry_line(root, b".".to_vec(), &top)?);
    if top.is_dir() {
        stack.push((Vec::new(), root.to_path_buf()));
    }
    while let Some((rel_dir, dir)) = stack.pop() {
        for e in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let e = e.map_err(|e| io(&dir, e))?;
            let name = e.file_name();
            let meta = std::fs::symlink_metadata(e.path()).map_err(|err| io(&e.path(), err))?;
            let name = name.as_bytes();
            if meta.is_dir() && name == b"__pycache__" {
                continue;
            }
            if !meta.is_dir() && name.ends_with(b".pyc") {
                continue;
            }
            let mut rel = rel_dir.clone();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(name);
            lines.push(entry_line(&e.path(), rel.clone(), &meta)?);
            if meta.is_dir() {
                stack.push((rel, e.path()));
            }
        }
    }
    lines.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = Sha256::new();
    h.update(b"flux-tree-v1\n");
    for (_, line) in &lines {
        h.update(line);
        h.update(b"\n");
    }
    Ok((hex(&h.finalize()), lines.len() as u64))
}

fn entry_line(path: &Path, rel: Vec<u8>, meta: &std::fs::Metadata) -> Result<(Vec<u8>, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let mut line = Vec::new();
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = std::fs::read_link(path)
            .map_err(|e| Error::io(format!("read link {}", path.display()), e))?;
        line.extend_from_slice(b"L\t");
        line.extend_from_slice(&rel);
        line.push(b'\t');
        line.extend_from_slice(target.as_os_str().as_bytes());
    } else if ft.is_dir() {
        line.extend_from_slice(b"D\t");
        line.extend_from_slice(&rel);
    } else if ft.is_file() {
        let x = if meta.permissions().mode() & 0o111 != 0 {
            b"x"
        } else {
            b"-"
        };
        line.extend_from_slice(b"F\t");
        line.extend_from_slice(&rel);
        line.push(b'\t');
        line.extend_from_slice(x);
        line.push(b'\t');
        line.extend_from_slice(file_sha256(path)?.as_bytes());
    } else {
        line.extend_from_slice(b"O\t");
        line.extend_from_slice(&rel);
    }
    Ok((rel, line))
}

fn file_sha256(path: &Path) -> Result<String> {
    let mut f =
        std::fs::File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Debian's interpreter, as in images (not a pyenv one), or `None` after saying so.
    fn host_python() -> Option<&'static str> {
        let py = ["/usr/bin/python3.11", "/usr/bin/python3"]
            .into_iter()
            .find(|p| Path::new(p).exists());
        if py.is_none() {
            flux_skip::skip(
                "image_tools.py against the Rust digest",
                "no /usr/bin/python3 to run image_tools.py with",
            );
        }
        py
    }

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("pkg/__pycache__")).unwrap();
        std::fs::create_dir_all(r.join("tests")).unwrap();
        std::fs::write(r.join("pkg/__init__.py"), "x = 1\n").unwrap();
        std::fs::write(r.join("pkg/__pycache__/__init__.cpython-311.pyc"), "junk").unwrap();
        std::fs::write(r.join("pkg/stray.pyc"), "junk").unwrap();
        std::fs::write(r.join("tests/test_a.py"), "def test(): pass\n").unwrap();
        std::fs::write(r.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(r.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("pkg/__init__.py", r.join("link")).unwrap();
        t
    }

    #[test]
    fn tree_digest_ignores_bytecode_times_and_write_bits_but_not_content() {
        let t = tree();
        let r = t.path();
        let (d, n) = tree_digest(r).unwrap();
        // ".", pkg, pkg/__init__.py, tests, tests/test_a.py, run.sh, link
        assert_eq!(n, 7);
        std::fs::write(r.join("pkg/__pycache__/x.pyc"), "more junk").unwrap();
        std::fs::set_permissions(
            r.join("tests/test_a.py"),
            std::fs::Permissions::from_mode(0o444),
        )
        .unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(r.join("run.sh"))
            .unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(tree_digest(r).unwrap().0, d, "bytecode, mtime, write bits");
        std::fs::set_permissions(r.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let d2 = tree_digest(r).unwrap().0;
        assert_ne!(d2, d, "the executable bit counts");
        std::fs::write(r.join("pkg/__init__.py"), "x = 2\n").unwrap();
        assert_ne!(tree_digest(r).unwrap().0, d2, "content counts");
    }

    /// The Rust digest and the one `image_tools.py digest` computes in images agree (the check
    /// that an image's /testbed is the cache's tree depends on it).
    #[test]
    fn tree_digest_agrees_with_the_image_tools_script() {
        let Some(py) = host_python() else { return };
        let t = tree();
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), super::super::IMAGE_TOOLS).unwrap();
        let out = Command::new(py)
            .arg(script.path())
            .arg("digest")
            .arg(t.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let key = t.path().to_string_lossy().into_owned();
        let (d, n) = tree_digest(t.path()).unwrap();
        assert_eq!(v[&key]["sha256"], d, "{v}");
        assert_eq!(v[&key]["entries"], n, "{v}");
    }

    /// A venv with a fake installed distribution `toy` (module `toy`, two files) and a source
    /// tree holding the same files under `src/`.
    fn toy_venv(py: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let venv = t.path().join("venv");
        let ok = Command::new(py)
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let site = std::fs::read_dir(venv.join("lib"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("site-packages");
        let files = [
            ("toy/__init__.py", "from .core import f\n"),
            ("toy/core.py", "def f():\n    return 1\n"),
        ];
        let tree = t.path().join("toy-1.0");
        for (f, text) in files {
            for root in [site.clone(), tree.join("src")] {
                std::fs::create_dir_all(root.join(f).parent().unwrap()).unwrap();
                std::fs::write(root.join(f), text).unwrap();
            }
        }
        std::fs::write(tree.join("setup.py"), "").unwrap();
        let info = site.join("toy-1.0.dist-info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(
            info.join("METADATA"),
            "Metadata-Version: 2.1\nName: toy\nVersion: 1.0\n",
        )
        .unwrap();
        std::fs::write(
            info.join("RECORD"),
            "toy/__init__.py,,\ntoy/core.py,,\ntoy/__pycache__/core.cpython-311.pyc,,\ntoy-1.0.dist-info/METADATA,,\ntoy-1.0.dist-info/RECORD,,\n",
        )
        .unwrap();
        (t, venv.join("bin/python"), tree)
    }

    #[test]
    fn adopt_moves_the_import_to_the_tree_and_refuses_a_tree_that_differs() {
        let Some(py) = host_python() else { return };
        let (_t, python, tree) = toy_venv(py);
        let root = adopt(&python, "toy", &tree).unwrap();
        assert_eq!(Path::new(&root), tree.join("src"), "src layout found");
        let out = Command::new(&python)
            .args([
                "-c",
                "import toy, importlib.metadata as m; print(toy.core.__file__, m.version('toy'))",
            ])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{} 1.0", tree.join("src/toy/core.py").display()),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        let (_t, python, tree) = toy_venv(py);
        std::fs::write(tree.join("src/toy/core.py"), "def f():\n    return 2\n").unwrap();
        let e = adopt(&python, "toy", &tree).unwrap_err().to_string();
        assert!(
            e.contains("differ from the wheel") && e.contains("toy/core.py"),
            "{e}"
        );
    }
}
