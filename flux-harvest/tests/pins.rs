//! Checked, not trusted (17.9): an instance's `package` and `interpreter` are checked against
//! the image's manifest before anything runs. `sympy==1.12` and `numpy==1.13.3` were once
//! harvested from the sympy 1.13.3 image; now each is refused, naming both sides, and nothing
//! is written into the instance.
//!
//! Needs a Docker daemon and the image `flux/sympy:1.13.3-py3.11` (no root, no eBPF: the check
//! comes before the tracer); otherwise it skips through flux-skip.
use flux_harvest::{harvest_blocking, HarvestOptions, Runtime, Status};
use std::path::{Path, PathBuf};

const IMAGE: &str = "flux/sympy:1.13.3-py3.11";

fn have_image() -> bool {
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", IMAGE])
        .output();
    match out {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            !flux_skip::skip(
                "pins checked against the image",
                &format!(
                    "image {IMAGE} is not available ({}); build it with `flux images build {IMAGE}`",
                    err.trim()
                ),
            )
        }
        Err(e) => !flux_skip::skip(
            "pins checked against the image",
            &format!("docker CLI not runnable: {e}"),
        ),
    }
}

fn make(root: &Path, id: &str, package: &str, interpreter: &str) -> PathBuf {
    let dir = root.join("sympy").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("test_ibin.py"),
        "from sympy.utilities.iterables import ibin\n\n\ndef test_ibin():\n    assert ibin(2, 4) == [0, 0, 1, 0]\n",
    )
    .unwrap();
    let toml = format!(
        r#"id = "{id}"
repository = "sympy"
package = "{package}"
image = "{IMAGE}"
interpreter = "{interpreter}"
kind = "S1_IntraProceduralCFG"
question = "Which lines of `ibin` run?"
template = '{{"executed_path": [{{"line": "int"}}]}}'

[test]
files = ["test_ibin.py"]
command = ["python3.11", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_ibin.py"]
expect = "pass"

[tracing]
files = ["sympy/utilities/iterables.py"]
functions = ["ibin"]

[extractor]
name = "executed_path"
params = {{ function = "ibin", invocation = 1 }}
"#
    );
    std::fs::write(dir.join("instance.toml"), toml).unwrap();
    dir
}

#[test]
fn instances_whose_pins_do_not_describe_the_image_are_refused_before_running() {
    if !have_image() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "old-sympy",
            "sympy==1.12",
            "/usr/bin/python3.11",
            vec!["sympy==1.12", "sympy==1.13.3", IMAGE],
        ),
        (
            "numpy",
            "numpy==1.13.3",
            "/usr/bin/python3.11",
            vec!["numpy==1.13.3", "no numpy", IMAGE],
        ),
        (
            "wrong-python",
            "sympy==1.13.3",
            "/usr/bin/python3.12",
            vec!["/usr/bin/python3.12", "/usr/bin/python3.11 (Python 3.11"],
        ),
    ];
    let dirs: Vec<PathBuf> = cases
        .iter()
        .map(|(id, p, i, _)| make(tmp.path(), id, p, i))
        .collect();
    let mut o = HarvestOptions::new(tmp.path().join("cache"));
    o.runtime = Runtime::Docker;
    let report = harvest_blocking(&dirs, &o, &mut |_| {}).expect("harvest runs");
    for ((id, _, _, wanted), dir) in cases.iter().zip(&dirs) {
        let r = report
            .instances
            .iter()
            .find(|r| r.name.ends_with(id))
            .unwrap_or_else(|| panic!("no report for {id}"));
        assert_eq!(r.status, Status::Failed, "{id}");
        let err = r.error.as_deref().unwrap_or("");
        assert!(err.contains("does not describe image"), "{id}: {err}");
        for w in wanted {
            assert!(err.contains(w), "{id}: {err:?} does not name {w:?}");
        }
        assert!(
            r.run_dir.is_none(),
            "{id}: a run was prepared before the check"
        );
        assert!(!dir.join("oracle.json").exists(), "{id}");
    }
}
