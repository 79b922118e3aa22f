//! Runs the hook's own Python test suite (`flux-hook/tests`, stdlib unittest with a real socket
//! agent and real interpreters) under `cargo test`, on every interpreter flux supports that is
//! present: Debian bookworm's 3.11 on the host, and 3.13, 3.14 and 3.15 from the Debian root
//! filesystems `cargo xtask images` makes (run there with chroot, which needs root).
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
}

#[test]
fn hook_suite_on_bookworm_python311() {
    let py = "/usr/bin/python3.11";
    if !Path::new(py).exists() {
        flux_skip::skip("hook_suite_on_bookworm_python311", &format!("{py} missing"));
        return;
    }
    let out = Command::new(py)
        .args(["-m", "unittest", "discover", "-s"])
        .arg(hook_dir().join("tests"))
        .env("FLUX_TEST_PYTHON", py)
        .output()
        .unwrap();
    report("python3.11", out);
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
    let st = Command::new("cp")
        .arg("-r")
        .arg(hook_dir())
        .arg(&dest)
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new("chroot")
        .arg(&root)
        .arg("/usr/bin/env")
        .arg(format!("FLUX_TEST_PYTHON=/usr/bin/{py}"))
        .arg(format!("/usr/bin/{py}"))
        .args([
            "-m",
            "unittest",
            "discover",
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
