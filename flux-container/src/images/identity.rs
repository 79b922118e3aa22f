//! An image's identity from its content, and instance pins checked against it.
//!
//! Docker's image id changes on every build (layer tars carry times), so it cannot say whether
//! a gold answer's image still exists. The identity is a digest of what decides how a test
//! runs: the interpreter (path and version), the Debian packages (bases), `pip freeze` (repos),
//! the base's identity, and "flux-tree-v1" digests ([`super::source::tree_digest`]) of the file
//! trees that matter — the stdlib and the interpreter binary (bases), the source tree at
//! `/testbed`, the site directories and `/usr/local/bin` (repos). Two builds of the same
//! definition from the same Debian snapshot and wheels have the same identity; any changed
//! file, package or pin changes it. It is written `flux-id:<sha256 hex>`.
//!
//! [`check_pins`] is what a harvest runs before it trusts an image: the instance's `package`
//! must be in the image's `pip freeze` at that version and its `interpreter` must be the
//! image's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Interpreter, Manifest};

/// The digest of one tree, as `image_tools.py digest` reports it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TreeDigest {
    pub sha256: String,
    pub entries: u64,
}

/// What the identity is computed from (kept in the manifest so that a difference can be told).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct IdentityInputs {
    /// Path in the image → digest; `None` for paths that do not exist in it.
    pub trees: BTreeMap<String, Option<TreeDigest>>,
}

/// The fields hashed, in a fixed order (a struct, not a map, so that serde_json's map order
/// settings cannot change it).
#[derive(Serialize)]
struct Hashed<'a> {
    scheme: &'static str,
    kind: &'a str,
    base_identity: &'a str,
    interpreter: &'a Interpreter,
    debian_packages: Vec<&'a str>,
    pip_freeze: Vec<&'a str>,
    trees: &'a BTreeMap<String, Option<TreeDigest>>,
}

/// `flux-id:<hex>` of a manifest's content fields (`identity_inputs`, interpreter, packages,
/// pip freeze, the base's identity). Build times, Docker ids, dates and the definition are not
/// part of it.
pub fn identity(m: &Manifest, base_identity: &str) -> String {
    let mut debian: Vec<&str> = m.debian_packages.iter().map(String::as_str).collect();
    debian.sort_unstable();
    let mut freeze: Vec<&str> = m.pip_freeze.iter().map(String::as_str).collect();
    freeze.sort_unstable();
    let h = Hashed {
        scheme: "flux-image-identity-v1",
        kind: &m.kind,
        base_identity,
        interpreter: &m.interpreter,
        debian_packages: debian,
        pip_freeze: freeze,
        trees: &m.identity_inputs.trees,
    };
    let text = serde_json::to_string(&h).expect("serializable");
    format!(
        "flux-id:{}",
        super::source::hex(&Sha256::digest(text.as_bytes()))
    )
}

/// PEP 503 name normalisation.
fn canon(name: &str) -> String {
    let mut out = String::new();
    let mut sep = false;
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Why an instance's pins do not describe an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinMismatch(pub Vec<String>);

impl std::fmt::Display for PinMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

/// Checks an instance's `package` (`name==version`) and `interpreter` (a path) against the
/// image's manifest: the package must be in its `pip freeze` at exactly that version, the
/// interpreter must be the one the image was built for. Each problem names both sides.
pub fn check_pins(m: &Manifest, package: &str, interpreter: &str) -> Result<(), PinMismatch> {
    let mut problems = Vec::new();
    match package.split_once("==") {
        None => problems.push(format!(
            "instance package {package:?} is not pinned as name==version"
        )),
        Some((name, version)) => {
            let (name, version) = (name.trim(), version.trim());
            let installed = m.pip_freeze.iter().find_map(|line| {
                let (n, v) = line.split_once("==")?;
                (canon(n) == canon(name)).then(|| v.trim().to_owned())
            });
            match installed {
                Some(v) if v == version => {}
                Some(v) => problems.push(format!(
                    "instance package {name}=={version}, but image {} has {name}=={v} (its pip freeze)",
                    m.image
                )),
                None => problems.push(format!(
                    "instance package {name}=={version} is not installed in image {} (its pip freeze has no {name}{})",
                    m.image,
                    if m.pip_freeze.is_empty() { "; it is a base image" } else { "" }
                )),
            }
        }
    }
    if interpreter != m.interpreter.path {
        problems.push(format!(
            "instance interpreter {interpreter}, but image {} is built for {} (Python {})",
            m.image, m.interpreter.path, m.interpreter.version
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(PinMismatch(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn manifest(kind: &str) -> Manifest {
        Manifest {
            schema: super::super::MANIFEST_SCHEMA,
            image: "flux/sympy:1.13.3-py3.11".into(),
            kind: kind.into(),
            image_id: Some("sha256:aaa".into()),
            identity: String::new(),
            identity_inputs: IdentityInputs {
                trees: BTreeMap::from([(
                    "/testbed".to_owned(),
                    Some(TreeDigest {
                        sha256: "00".into(),
                        entries: 3,
                    }),
                )]),
            },
            definition_hash: "d".into(),
            definition: serde_json::json!({}),
            base_image: None,
            base_image_id: None,
            suite: "bookworm".into(),
            mirror: "m".into(),
            debootstrap_date: "2026-01-01T00:00:00Z".into(),
            suite_release_date: None,
            interpreter: Interpreter {
                path: "/usr/bin/python3.11".into(),
                version: "3.11.2".into(),
            },
            pip_freeze: vec![
                "mpmath==1.3.0".into(),
                "sympy==1.13.3".into(),
                "python-dateutil==2.9.0.post0".into(),
            ],
            wheels: Vec::new(),
            debian_packages: vec!["libc6=2.36".into(), "python3.11=3.11.2-6".into()],
            source: None,
            built_at: "2026-01-01T00:00:00Z".into(),
            build_seconds: 1.0,
        }
    }

    #[test]
    fn identity_is_content_only() {
        let a = manifest("repo");
        let id = identity(&a, "flux-id:base");
        assert!(id.starts_with("flux-id:") && id.len() == 8 + 64, "{id}");
        // Docker id, times, dates, definition and order of lists do not count.
        let mut b = a.clone();
        b.image_id = Some("sha256:bbb".into());
        b.built_at = "2027-01-01T00:00:00Z".into();
        b.build_seconds = 99.0;
        b.debootstrap_date = "x".into();
        b.definition = serde_json::json!({"other": 1});
        b.pip_freeze.reverse();
        b.debian_packages.reverse();
        assert_eq!(identity(&b, "flux-id:base"), id);
        // Content does.
        let mut c = a.clone();
        c.pip_freeze[1] = "sympy==1.13.2".into();
        assert_ne!(identity(&c, "flux-id:base"), id);
        let mut c = a.clone();
        c.identity_inputs.trees.insert("/testbed".into(), None);
        assert_ne!(identity(&c, "flux-id:base"), id);
        let mut c = a.clone();
        c.interpreter.version = "3.11.3".into();
        assert_ne!(identity(&c, "flux-id:base"), id);
        assert_ne!(identity(&a, "flux-id:other-base"), id);
    }

    /// 17.9: sympy==1.12 and numpy==1.13.3 were harvested from the sympy 1.13.3 image.
    #[test]
    fn package_and_interpreter_mismatches_are_refused_naming_both() {
        let m = manifest("repo");
        assert_eq!(
            check_pins(&m, "sympy==1.13.3", "/usr/bin/python3.11"),
            Ok(())
        );
        assert_eq!(
            check_pins(&m, "SymPy==1.13.3", "/usr/bin/python3.11"),
            Ok(())
        );
        assert_eq!(
            check_pins(&m, "python_dateutil==2.9.0.post0", "/usr/bin/python3.11"),
            Ok(())
        );
        let e = check_pins(&m, "sympy==1.12", "/usr/bin/python3.11")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sympy==1.12") && e.contains("sympy==1.13.3") && e.contains(&m.image),
            "{e}"
        );
        let e = check_pins(&m, "numpy==1.13.3", "/usr/bin/python3.11")
            .unwrap_err()
            .to_string();
        assert!(e.contains("numpy==1.13.3") && e.contains("no numpy"), "{e}");
        let e = check_pins(&m, "sympy==1.13.3", "/usr/bin/python3.12")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/usr/bin/python3.12") && e.contains("/usr/bin/python3.11 (Python 3.11.2)"),
            "{e}"
        );
        let both = check_pins(&m, "sympy==1.12", "/usr/bin/python3.15").unwrap_err();
        assert_eq!(both.0.len(), 2, "{both}");
        let base = manifest("base");
        let base = Manifest {
            pip_freeze: Vec::new(),
            ..base
        };
        let e = check_pins(&base, "sympy==1.13.3", "/usr/bin/python3.11")
            .unwrap_err()
            .to_string();
        assert!(e.contains("base image"), "{e}");
    }
}
