//! Records the git commit flux is built from as `FLUX_GIT_COMMIT` (for `flux score`'s results
//! file); outside a git checkout, or without git, it records nothing.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let Some(commit) = git(&["rev-parse", "HEAD"]) else {
        return;
    };
    println!("cargo:rustc-env=FLUX_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself (a branch switch) and the branch's ref (a commit).
    if let Some(head) = git(&["rev-parse", "--path-format=absolute", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(r) = git(&["rev-parse", "--path-format=absolute", "--git-path", &branch]) {
            // A packed ref has no file of its own: watching a missing file would rebuild always.
            if std::path::Path::new(&r).is_file() {
                println!("cargo:rerun-if-changed={r}");
            }
        }
    }
}
