//! Builds `flux-ebpf` for the BPF target with the nightly toolchain (aya-build) and leaves the
//! object in OUT_DIR for `include_bytes_aligned!`. With `AYA_BUILD_SKIP=1` an empty object is
//! written instead, and loading fails at run time with a message saying so.
//!
//! Also builds the hook's C parts against Debian's python3.11 headers: for CPython 3.11
//! (`flux-hook/flux_hook/_fast311.c`, the settrace back-end's `c-fast-path`) into
//! `OUT_DIR/_fast311.so` (its import suffix in `_fast311.suffix`), and for 3.12+
//! (`_fastmon.c`, the sys.monitoring back-end's `c-monitoring`, stable ABI) into
//! `OUT_DIR/_fastmon.so`. Where those headers or a C compiler are missing, the files are empty,
//! a warning says so, and the shipped hook takes the pure Python path (same records, slower).
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compile `flux_hook/<name>.c` into `out/<name>.so`; its import suffix for the headers'
/// interpreter, or the reason it could not be built.
fn build_c_part(hook: &Path, out: &Path, name: &str) -> Result<String, String> {
    let config = std::env::var("FLUX_PYTHON311_CONFIG")
        .unwrap_or_else(|_| "/usr/bin/python3.11-config".into());
    let ask = |arg: &str| -> Result<String, String> {
        let o = Command::new(&config)
            .arg(arg)
            .output()
            .map_err(|e| format!("{config}: {e} (Debian's python3.11-dev)"))?;
        if !o.status.success() {
            return Err(format!("{config} {arg} failed"));
        }
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let includes = ask("--includes")?;
    let suffix = ask("--extension-suffix")?;
    let src = hook.join(format!("flux_hook/{name}.c"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let o = Command::new(&cc)
        .args([
            "-O2",
            "-shared",
            "-fPIC",
            "-Wall",
            "-Werror",
            "-Wno-unused-parameter",
        ])
        .args(includes.split_whitespace())
        .arg(&src)
        .arg("-o")
        .arg(out.join(format!("{name}.so")))
        .output()
        .map_err(|e| format!("{cc}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{cc} {}: {}",
            src.display(),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(suffix)
}

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let hook = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?)
        .parent()
        .expect("workspace root")
        .join("flux-hook");
    println!("cargo:rerun-if-env-changed=FLUX_PYTHON311_CONFIG");
    for (name, what) in [("_fast311", "3.11"), ("_fastmon", "3.12+")] {
        println!(
            "cargo:rerun-if-changed={}",
            hook.join(format!("flux_hook/{name}.c")).display()
        );
        match build_c_part(&hook, &out, name) {
            Ok(suffix) => std::fs::write(out.join(format!("{name}.suffix")), suffix)?,
            Err(why) => {
                println!("cargo:warning=the hook's C part for {what} is not built: {why}");
                std::fs::write(out.join(format!("{name}.so")), [])?;
                std::fs::write(out.join(format!("{name}.suffix")), "")?;
            }
        }
    }
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?)
        .parent()
        .expect("workspace root")
        .join("flux-ebpf");
    println!("cargo:rerun-if-changed={}", root.display());
    println!("cargo:rerun-if-changed=../flux-common/src");
    let skip = std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v == "true");
    if skip {
        std::fs::write(out.join("flux-ebpf"), [])?;
        return Ok(());
    }
    let root = root.to_str().expect("utf-8 path");
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "flux-ebpf",
            root_dir: root,
            no_default_features: false,
            features: &[],
        }],
        aya_build::Toolchain::default(),
    )
}
