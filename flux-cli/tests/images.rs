//! `flux images` through the real binary, where it needs no Docker: which definitions it uses
//! (the nearest `images/images.toml`, else the copy compiled in — so it works outside a
//! checkout), what `list` says of images not built, and the errors of names it does not know.
use std::path::Path;
use std::process::{Command, Output};

fn flux(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(args)
        .current_dir(cwd)
        .env_remove("FLUX_CACHE")
        .env_remove("FLUX_IMAGE_NAMESPACE")
        .output()
        .expect("flux runs")
}

/// A fresh directory under cargo's temporary directory for integration tests, outside any
/// checkout (so no `images/images.toml` above it).
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("flux-images-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn list_outside_a_checkout_uses_the_builtin_definitions() {
    let t = scratch("builtin");
    let o = flux(&t, &["images", "list", "--cache", "c"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("definitions <builtin>/images/images.toml"),
        "{out}"
    );
    for image in [
        "flux/base:py3.11-bookworm",
        "flux/sympy:1.13.3-py3.11",
        "flux/flask:3.1.3-py3.11",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(image))
            .unwrap_or_else(|| panic!("{image} not listed:\n{out}"));
        assert!(line.contains("not built"), "{line}");
    }
    let flask = out.lines().find(|l| l.starts_with("flux/flask")).unwrap();
    assert!(flask.contains("on demand: swe-flux"), "{flask}");
    let _ = std::fs::remove_dir_all(&t);
}

#[test]
fn a_local_images_toml_wins_and_unknown_names_are_named() {
    let t = scratch("local");
    std::fs::create_dir_all(t.join("images")).unwrap();
    std::fs::write(
        t.join("images/images.toml"),
        r#"
[settings]
namespace = "mine"

[[base]]
name = "py3.11-bookworm"
suite = "bookworm"
python = "3.11"
interpreter = "/usr/bin/python3.11"
packages = ["python3.11"]
rootfs = "bookworm-py311"

[[repo]]
name = "toy"
version = "1.0"
base = "py3.11-bookworm"
requirements = ["toy==1.0"]
pip = "pip==25.3"
"#,
    )
    .unwrap();
    std::fs::create_dir_all(t.join("sub")).unwrap();
    // Found from a subdirectory, as a checkout's.
    let o = flux(&t.join("sub"), &["images", "list", "--cache", "c"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("mine/toy:1.0-py3.11"), "{out}");
    assert!(!out.contains("flux/sympy"), "{out}");
    // An unknown name fails before Docker is asked, naming what is known.
    let o = flux(&t, &["images", "test", "nosuch", "--cache", "c"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("no image named \"nosuch\"") && out.contains("toy"),
        "{out}"
    );
    // A broken definition names its file.
    std::fs::write(t.join("images/images.toml"), "[[repo]]\nname = \"x\"\n").unwrap();
    let o = flux(&t, &["images", "list"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("images/images.toml"), "{out}");
    let _ = std::fs::remove_dir_all(&t);
}
