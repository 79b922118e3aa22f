//! Runs the hook's own Python test suite (`flux-hook/tests`, stdlib unittest with a real socket
//! agent and real interpreters) under `cargo test`, on every interpreter flux supports that is
//! present: Debian bookworm's 3.11 on the host, and 3.13, 3.14 and 3.15 from the Debian root
//! filesystems `cargo xtask images` makes (run there with chroot, which needs root), on the
//! hook as the agent ships it (its C part for sys.monitoring included).
//!
//! Every skip of the Python suite is reported through flux-skip: one for lack of something on
//! the machine (its reason starts with `missing: `, `harness.MISSING`) is a failure under
//! `FLUX_REQUIRE_ALL=1`, any other says why the test does not apply. The root filesystems have
//! no pytest of their own: theirs is unpacked from the images' wheelhouse.
use std::path::{Path, PathBuf};
use std::process::Command;

fn hook_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("flux-hook")
}

fn report(what: &str, out: std::process::Output) {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "hook suite failed on {what}:\n{text}");
    // unittest's summary ("Ran N tests ... OK") must show tests actually ran.
    let ran = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")
                .and_then(|r| r.split_whitespace().next())
        })
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    assert!(ran > 10, "hook suite on {what} ran {ran} tests:\n{text}");
    eprintln!("hook suite on {what}: {ran} tests OK");
    let skips = skipped(&text);
    // unittest's last line: `OK (skipped=1, expected failures=2)`.
    let counted = text
        .lines()
        .find_map(|l| {
            let n = l.split_once("skipped=")?.1;
            n[..n.find(|c: char| !c.is_ascii_digit()).unwrap_or(n.len())]
                .parse::<usize>()
                .ok()
        })
        .unwrap_or(0);
    assert_eq!(
        skips.len(),
        counted,
        "hook suite on {what}: unittest counts {counted} skips, the verbose lines show {}:\n{text}",
        skips.len()
    );
    for (test, reason) in skips {
        let name = format!("hook suite on {what}: {test}");
        match reason.strip_prefix("missing: ") {
            Some(why) => flux_skip::skip(&name, why),
            None => flux_skip::not_applicable(&name, reason),
        };
    }
}

/// `(test, reason)` of each test unittest's verbose output (`-v`) says it skipped.
fn skipped(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|l| {
            let (test, reason) = l.split_once(" ... skipped ")?;
            let reason = reason.trim();
            let unquoted = reason
                .strip_prefix(['\'', '"'])
                .and_then(|r| r.strip_suffix(['\'', '"']))
                .unwrap_or(reason);
            Some((test.trim(), unquoted))
        })
        .collect()
}

/// pytest and its dependencies, pure-Python wheels from the images' wheelhouse (the first
/// directory of `.flux-cache/wheelhouse` that has them all). `None`: no wheelhouse yet.
fn pytest_wheels() -> Option<Vec<PathBuf>> {
    let house = hook_dir().parent()?.join(".flux-cache/wheelhouse");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(house)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter().find_map(|d| {
        let files: Vec<PathBuf> = std::fs::read_dir(d)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .collect();
        let find = |w: &str| {
            files
                .iter()
                .find(|p| {
                    let n = p.file_name().unwrap_or_default().to_string_lossy();
                    n.starts_with(w) && n.ends_with("-none-any.whl")
                })
                .cloned()
        };
        // pytest's dependencies (pygments since pytest 9).
        let mut wheels = ["pytest-", "pluggy-", "iniconfig-", "packaging-"]
            .iter()
            .map(|w| find(w))
            .collect::<Option<Vec<_>>>()?;
        wheels.extend(find("pygments-"));
        Some(wheels)
    })
}

#[test]
fn hook_suite_on_bookworm_python311() {
    let py = "/usr/bin/python3.11";
    if !Path::new(py).exists() {
        flux_skip::skip("hook_suite_on_bookworm_python311", &format!("{py} missing"));
        return;
    }
    let out = Command::new(py)
        .args(["-m", "unittest", "discover", "-v", "-s"])
        .arg(hook_dir().join("tests"))
        .env("FLUX_TEST_PYTHON", py)
        .output()
        .unwrap();
    report("python3.11", out);
}

/// The suite on the hook as the agent ships it (`flux_agent::hook::install`): on 3.11 with its
/// C part (`c-fast-path`), which the suite's own tree does not hold, so every test of scope
/// `targets` runs through it here, and `test_shipped_fast_path_is_in_use` checks it does.
#[test]
fn hook_suite_on_bookworm_python311_shipped() {
    let py = "/usr/bin/python3.11";
    if !Path::new(py).exists() {
        flux_skip::skip(
            "hook_suite_on_bookworm_python311_shipped",
            &format!("{py} missing"),
        );
        return;
    }
    if !flux_agent::hook::ships_fast311() {
        flux_skip::skip(
            "hook_suite_on_bookworm_python311_shipped",
            "this build has no C fast path for 3.11 (build.rs warned why: python3.11-dev, cc)",
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("flux-hook-shipped-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    flux_agent::hook::install(&dir).unwrap();
    let st = Command::new("cp")
        .arg("-r")
        .arg(hook_dir().join("tests"))
        .arg(dir.join("tests"))
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new(py)
        .args(["-m", "unittest", "discover", "-v", "-s"])
        .arg(dir.join("tests"))
        .env("FLUX_TEST_PYTHON", py)
        .env("FLUX_TEST_EXPECT_FAST311", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    report("python3.11 (the shipped hook, C fast path)", out);
}

fn in_rootfs(rootfs: &str, py: &str) {
    let root = Path::new("/var/cache/flux/rootfs").join(rootfs);
    // SAFETY: trivial syscall.
    if unsafe { libc::geteuid() } != 0 {
        flux_skip::skip(&format!("hook suite on {py}"), "chroot needs root");
        return;
    }
    if !root.join("usr/bin").join(py).exists() {
        flux_skip::skip(
            &format!("hook suite on {py}"),
            &format!("no rootfs at {} (run `cargo xtask images`)", root.display()),
        );
        return;
    }
    let inside = format!("/tmp/flux-hook-suite-{}", std::process::id());
    let dest = root.join(inside.trim_start_matches('/'));
    // The hook as the agent ships it (with its C part for sys.monitoring, `c-monitoring`,
    // which the source tree does not hold), and the suite beside it.
    let _ = std::fs::remove_dir_all(&dest);
    flux_agent::hook::install(&dest).unwrap();
    let st = Command::new("cp")
        .arg("-r")
        .arg(hook_dir().join("tests"))
        .arg(dest.join("tests"))
        .status()
        .unwrap();
    assert!(st.success());
    // pytest for the suite's pytest tests, unpacked inside by the interpreter itself (without
    // it they skip as `missing: `, a failure under FLUX_REQUIRE_ALL=1).
    let mut env = vec![format!("FLUX_TEST_PYTHON=/usr/bin/{py}")];
    if flux_agent::hook::ships_fastmon() {
        env.push("FLUX_TEST_EXPECT_FASTMON=1".into());
    } else {
        flux_skip::skip(
            &format!("hook suite on {py}: its C callbacks"),
            "this build has no C part for sys.monitoring (build.rs warned why: python3.11-dev, cc)",
        );
    }
    if let Some(wheels) = pytest_wheels() {
        std::fs::create_dir_all(dest.join("wheels")).unwrap();
        let mut inside_wheels = Vec::new();
        for w in &wheels {
            let name = w.file_name().unwrap().to_string_lossy();
            std::fs::copy(w, dest.join("wheels").join(name.as_ref())).unwrap();
            inside_wheels.push(format!("{inside}/wheels/{name}"));
        }
        let st = Command::new("chroot")
            .arg(&root)
            .arg(format!("/usr/bin/{py}"))
            .args([
                "-c",
                "import sys, zipfile\nfor w in sys.argv[2:]: zipfile.ZipFile(w).extractall(sys.argv[1])",
                &format!("{inside}/site"),
            ])
            .args(&inside_wheels)
            .status()
            .unwrap();
        assert!(
            st.success(),
            "unpacking pytest's wheels in {}",
            root.display()
        );
        env.push(format!("FLUX_TEST_PYTHONPATH={inside}/site"));
    }
    let out = Command::new("chroot")
        .arg(&root)
        .arg("/usr/bin/env")
        .args(&env)
        .arg(format!("/usr/bin/{py}"))
        .args([
            "-m",
            "unittest",
            "discover",
            "-v",
            "-s",
            &format!("{inside}/tests"),
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dest);
    report(py, out);
}

#[test]
fn hook_suite_on_sid_python315() {
    in_rootfs("sid-py315", "python3.15");
}

#[test]
fn hook_suite_on_sid_python314() {
    in_rootfs("sid-py314", "python3.14");
}

#[test]
fn hook_suite_on_trixie_python313() {
    in_rootfs("trixie-py313", "python3.13");
}
