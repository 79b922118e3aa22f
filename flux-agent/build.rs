//! Builds `flux-ebpf` for the BPF target with the nightly toolchain (aya-build) and leaves the
//! object in OUT_DIR for `include_bytes_aligned!`. With `AYA_BUILD_SKIP=1` an empty object is
//! written instead, and loading fails at run time with a message saying so.
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
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
