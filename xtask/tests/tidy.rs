//! Tidy: the rules of the codebase that a reader should not have to police (issue 15.5).
//!
//! - rustfmt: `cargo fmt --all --check` over the workspace, and over `fuzz/` (its own
//!   workspace) — skipped loudly where rustfmt is not installed;
//! - every `unsafe` block or impl has a `// SAFETY:` comment right above it or on its line (the
//!   rule of clippy's `undocumented_unsafe_blocks`, checked on the text so that the eBPF crate,
//!   which clippy cannot build on stable, is held to it too);
//! - every module (`*/src/**.rs`) opens with a `//!` header saying what it is for;
//! - every dependency of a workspace member comes from `[workspace.dependencies]` (or is a
//!   path), so one version of each crate is compiled.
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

/// The tracked Rust files (git's list, so build outputs and scratch files do not count).
fn rust_files() -> Vec<PathBuf> {
    let out = Command::new("git")
        .current_dir(root())
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "*.rs",
        ])
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files failed");
    out.stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| root().join(String::from_utf8_lossy(p).as_ref()))
        .filter(|p| p.exists())
        .collect()
}

#[test]
fn rustfmt_leaves_every_file_as_it_is() {
    let have = Command::new("cargo")
        .args(["fmt", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!(
            "skipping: rustfmt check: `cargo fmt` is not installed (rustup component add rustfmt)"
        );
        return;
    }
    let out = Command::new("cargo")
        .current_dir(root())
        .args(["fmt", "--all", "--check"])
        .output()
        .expect("cargo fmt runs");
    let diff = String::from_utf8_lossy(&out.stdout);
    let files: Vec<&str> = diff
        .lines()
        .filter_map(|l| l.strip_prefix("Diff in "))
        .collect();
    assert!(
        out.status.success(),
        "rustfmt would change {} place(s) (run `cargo fmt --all`):\n{}",
        files.len(),
        files.join("\n")
    );
    // fuzz/ is a workspace of its own (nightly): its files directly, without resolving it.
    let fuzz: Vec<PathBuf> = rust_files()
        .into_iter()
        .filter(|f| f.starts_with(root().join("fuzz")))
        .collect();
    let st = Command::new("rustfmt")
        .args(["--check", "--edition", "2021"])
        .args(&fuzz)
        .status()
        .expect("rustfmt runs");
    assert!(
        st.success(),
        "rustfmt would change files of fuzz/ (see above)"
    );
}

/// Lines of `text` (1-based) opening an `unsafe` block or impl without a `// SAFETY:` comment on
/// the same line or in the comment lines right above the statement.
fn undocumented_unsafe(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut bad = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = without_strings(line.split("//").next().unwrap_or(""));
        let opens = code.contains("unsafe {") || code.contains("unsafe impl");
        if !opens || line.contains("SAFETY:") {
            continue;
        }
        // Walk up over the comment lines and attributes just above (and the lines of the
        // statement this block continues, up to the line that starts it).
        let mut documented = false;
        let mut j = i;
        while j > 0 {
            j -= 1;
            let t = lines[j].trim_start();
            if t.starts_with("//") {
                if t.contains("SAFETY:") {
                    documented = true;
                    break;
                }
                continue;
            }
            // Attributes, and a run of `unsafe impl`s under one comment (marker traits).
            if t.starts_with("#[") || (t.starts_with("unsafe impl") && code.contains("unsafe impl"))
            {
                continue;
            }
            break;
        }
        if !documented {
            bad.push(i + 1);
        }
    }
    bad
}

/// `line` with the contents of its string literals blanked (`"…"`), so that text about `unsafe`
/// in a string is not taken for code. Escaped quotes are honoured; raw strings are not special.
fn without_strings(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let (mut inside, mut escaped) = (false, false);
    for c in line.chars() {
        if inside {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                inside = false;
                out.push(c);
            }
            continue;
        }
        if c == '"' {
            inside = true;
        }
        out.push(c);
    }
    out
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let mut bad = Vec::new();
    for f in rust_files() {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for l in undocumented_unsafe(&text) {
            bad.push(format!(
                "{}:{l}",
                f.strip_prefix(root()).unwrap_or(&f).display()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "unsafe without a `// SAFETY:` comment above it:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_unsafe_check_sees_what_it_should() {
    assert_eq!(undocumented_unsafe("let x = unsafe { f() };\n"), [1]);
    assert!(
        undocumented_unsafe("// SAFETY: f has no preconditions.\nlet x = unsafe { f() };\n")
            .is_empty()
    );
    assert!(
        undocumented_unsafe("// SAFETY: why,\n// over two lines.\n#[allow(x)]\nunsafe {\n")
            .is_empty()
    );
    assert_eq!(
        undocumented_unsafe("// a comment\nfoo();\nunsafe impl Send for X {}\n"),
        [3]
    );
    assert!(undocumented_unsafe("// no unsafe { here } in a comment\n").is_empty());
    assert!(undocumented_unsafe("let s = \"unsafe { in a string }\";\n").is_empty());
    assert!(undocumented_unsafe(
        "// SAFETY: Pod.\nunsafe impl A for X {}\nunsafe impl A for Y {}\n"
    )
    .is_empty());
}

#[test]
fn every_module_opens_with_a_header() {
    let mut bad = Vec::new();
    for f in rust_files() {
        let rel = f.strip_prefix(root()).unwrap_or(&f).to_path_buf();
        if !rel.components().any(|c| c.as_os_str() == "src") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("#!["));
        if !first.is_some_and(|l| l.starts_with("//!")) {
            bad.push(rel.display().to_string());
        }
    }
    assert!(
        bad.is_empty(),
        "modules without a `//!` header:\n{}",
        bad.join("\n")
    );
}

#[test]
fn dependencies_come_from_the_workspace() {
    let members = ["Cargo.toml"];
    let ws: toml::Table = std::fs::read_to_string(root().join(members[0]))
        .unwrap()
        .parse()
        .unwrap();
    let list = ws["workspace"]["members"]
        .as_array()
        .expect("members")
        .clone();
    let mut bad = Vec::new();
    for m in list {
        let m = m.as_str().unwrap();
        let path = root().join(m).join("Cargo.toml");
        let t: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        let mut tables = vec![t.clone()];
        // `[target.'cfg(..)'.dependencies]` too.
        if let Some(targets) = t.get("target").and_then(|x| x.as_table()) {
            tables.extend(targets.values().filter_map(|v| v.as_table().cloned()));
        }
        for tab in &tables {
            for sec in ["dependencies", "dev-dependencies", "build-dependencies"] {
                let Some(deps) = tab.get(sec).and_then(|d| d.as_table()) else {
                    continue;
                };
                for (name, spec) in deps {
                    let ok = spec.as_table().is_some_and(|s| {
                        s.get("workspace").and_then(|w| w.as_bool()) == Some(true)
                            || s.contains_key("path")
                    });
                    if !ok {
                        bad.push(format!("{m}: [{sec}] {name} = {spec}"));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "dependencies not taken from [workspace.dependencies] (`name.workspace = true`):\n{}",
        bad.join("\n")
    );
}
