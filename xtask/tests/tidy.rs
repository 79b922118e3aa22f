//! Tidy: the rules of the codebase that a reader should not have to police (issue 15.5).
//!
//! - rustfmt: `cargo fmt --all --check` over the workspace, and over `fuzz/` (its own
//!   workspace) — skipped loudly where rustfmt is not installed;
//! - every `unsafe` block or impl has a `// SAFETY:` comment right above it or on its line (the
//!   rule of clippy's `undocumented_unsafe_blocks`, checked on the text so that the eBPF crate,
//!   which clippy cannot build on stable, is held to it too);
//! - every module (`*/src/**.rs`) opens with a `//!` header saying what it is for;
//! - every dependency of a workspace member comes from `[workspace.dependencies]` (or is a
//!   path), so one version of each crate is compiled;
//! - clippy: `cargo clippy --all-targets -- -D warnings` over the default members finds nothing,
//!   with the workspace's lints (`[workspace.lints]`, which every default member takes): a lint
//!   silenced at one place says why there (`#[expect(lint, reason = "…")]`);
//! - every test skip goes through flux-skip (`flux_skip::skip`, a failure under
//!   `FLUX_REQUIRE_ALL=1`, or `flux_skip::not_applicable`): no `print!`/`eprintln!`/`writeln!`…
//!   saying `skipping` anywhere else, nor a Python test printing it;
//! - one integration-test binary per crate (`autotests = false` and one `[[test]]`, its
//!   modules under `tests/`, as ripgrep has it), and every `.rs` file under `tests/` is one of
//!   its modules (with `autotests = false` a file nothing declares would never run).
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
    if !have
        && flux_skip::skip(
            "rustfmt check",
            "`cargo fmt` is not installed (rustup component add rustfmt)",
        )
    {
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

/// The default members (`[workspace] default-members`): the crates `cargo test` builds.
fn default_members() -> Vec<String> {
    let ws: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    ws["workspace"]["default-members"]
        .as_array()
        .expect("default-members")
        .iter()
        .map(|m| m.as_str().expect("a path").to_string())
        .collect()
}

#[test]
fn every_default_member_takes_the_workspace_lints() {
    let mut bad = Vec::new();
    for m in default_members() {
        let t: toml::Table = std::fs::read_to_string(root().join(&m).join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let takes = t
            .get("lints")
            .and_then(|l| l.get("workspace"))
            .and_then(|w| w.as_bool())
            == Some(true);
        if !takes {
            bad.push(m);
        }
    }
    assert!(
        bad.is_empty(),
        "default members without `[lints] workspace = true` (clippy would not hold them to the \
         workspace's lints):\n{}",
        bad.join("\n")
    );
}

/// Clippy over the default members, every warning an error. Its build is cargo's check build
/// of the workspace in `target/` (kept between runs: only what changed is checked again).
#[test]
fn clippy_finds_nothing() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let have = Command::new(&cargo)
        .args(["clippy", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have
        && flux_skip::skip(
            "clippy",
            "`cargo clippy` is not installed (rustup component add clippy)",
        )
    {
        return;
    }
    let out = Command::new(&cargo)
        .current_dir(root())
        .args([
            "clippy",
            "--all-targets",
            "--message-format=short",
            "--",
            "-D",
            "warnings",
        ])
        .output()
        .expect("cargo clippy runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // `path:line:col: error: message` (short format); a build script's own output is not ours.
    let found: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(".rs:") && (l.contains(": error") || l.contains(": warning")))
        .collect();
    assert!(
        out.status.success() && found.is_empty(),
        "clippy (`cargo clippy --all-targets -- -D warnings`) found {} problem(s); fix them, or \
         silence one where the lint is wrong with `#[expect(lint, reason = \"…\")]`:\n{}",
        found.len(),
        if found.is_empty() {
            stderr.to_string()
        } else {
            found.join("\n")
        }
    );
}

/// A Rust token, as far as [`ad_hoc_skips`] needs: comments are dropped, string and char
/// literals are one token each (raw strings too), so text in a string is never taken for code.
#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
    Str(String),
}

/// The tokens of Rust source `src` with their 1-based lines.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let cs: Vec<char> = src.chars().collect();
    let (mut i, mut line) = (0, 1);
    let mut out = Vec::new();
    // `cs[from..]` up to and including the `"` that closes a string, honouring escapes (raw:
    // none, and the closing quote is followed by `hashes` `#`s).
    let close = |from: usize, raw: Option<usize>| -> usize {
        let mut j = from;
        while j < cs.len() {
            match (cs[j], raw) {
                ('\\', None) => j += 2,
                ('"', None) => return j + 1,
                ('"', Some(n)) if (1..=n).all(|k| cs.get(j + k) == Some(&'#')) => return j + 1 + n,
                _ => j += 1,
            }
        }
        cs.len()
    };
    while i < cs.len() {
        let c = cs[i];
        if c == '/' && cs.get(i + 1) == Some(&'/') {
            while i < cs.len() && cs[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && cs.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < cs.len() {
                if cs[i] == '/' && cs.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if cs[i] == '*' && cs.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(cs[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' {
            let end = close(i + 1, None);
            out.push((
                Tok::Str(cs[i + 1..end.saturating_sub(1)].iter().collect()),
                line,
            ));
            line += cs[i..end].iter().filter(|c| **c == '\n').count();
            i = end;
        } else if c == '\'' {
            // A char literal (`'x'`, `'\n'`, `'"'`), else a lifetime or label.
            i += if cs.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < cs.len() && cs[j] != '\'' {
                    j += 1;
                }
                j + 1 - i
            } else if cs.get(i + 2) == Some(&'\'') {
                3
            } else {
                1
            };
        } else if c.is_alphabetic() || c == '_' {
            let s = i;
            while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            let word: String = cs[s..i].iter().collect();
            let hashes = cs[i..].iter().take_while(|c| **c == '#').count();
            if matches!(word.as_str(), "r" | "br") && cs.get(i + hashes) == Some(&'"') {
                let end = close(i + hashes + 1, Some(hashes));
                let body_end = end.saturating_sub(1 + hashes).max(i + hashes + 1);
                out.push((
                    Tok::Str(cs[i + hashes + 1..body_end].iter().collect()),
                    line,
                ));
                line += cs[i..end].iter().filter(|c| **c == '\n').count();
                i = end;
            } else if word == "b" && cs.get(i) == Some(&'"') {
                continue; // the string itself is the next token
            } else {
                out.push((Tok::Ident(word), line));
            }
        } else {
            line += usize::from(c == '\n');
            if !c.is_whitespace() {
                out.push((Tok::Punct(c), line));
            }
            i += 1;
        }
    }
    out
}

/// Lines (1-based) of the print-family macro calls in Rust source `src` whose strings say
/// `skipping` (in any case): a test skip said by hand instead of through flux-skip.
fn ad_hoc_skips(src: &str) -> Vec<usize> {
    const PRINTS: [&str; 6] = ["print", "println", "eprint", "eprintln", "write", "writeln"];
    let toks = tokens(src);
    let mut bad = Vec::new();
    for (k, (t, line)) in toks.iter().enumerate() {
        let Tok::Ident(name) = t else { continue };
        let call = PRINTS.contains(&name.as_str())
            && toks.get(k + 1).is_some_and(|t| t.0 == Tok::Punct('!'))
            && toks
                .get(k + 2)
                .is_some_and(|t| matches!(t.0, Tok::Punct('(' | '[' | '{')));
        if !call {
            continue;
        }
        let mut depth = 0;
        for (t, _) in &toks[k + 2..] {
            match t {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::Str(s) if s.to_lowercase().contains("skipping") => {
                    bad.push(*line);
                    break;
                }
                _ => {}
            }
        }
    }
    bad
}

#[test]
fn the_skip_check_sees_what_it_should() {
    assert_eq!(ad_hoc_skips("eprintln!(\"skipping: no Docker\");\n"), [1]);
    assert_eq!(
        ad_hoc_skips("let a = 1;\neprintln!(\n    \"SKIPPING {what}: {why}\",\n);\n"),
        [2]
    );
    assert_eq!(ad_hoc_skips("writeln!(w, \"skipping {x}\")?;\n"), [1]);
    assert_eq!(ad_hoc_skips("println!(r#\"Skipping \"x\"\"#);\n"), [1]);
    assert!(ad_hoc_skips("flux_skip::skip(\"x\", \"no Docker\");\n").is_empty());
    assert!(
        ad_hoc_skips("// eprintln!(\"skipping\");\n/* eprintln!(\"skipping\") */\n").is_empty()
    );
    assert!(ad_hoc_skips("let s = \"eprintln!(\\\"skipping\\\")\";\n").is_empty());
    assert!(ad_hoc_skips("let s = r#\"eprintln!(\"skipping\")\"#;\n").is_empty());
    assert!(ad_hoc_skips("eprintln!(\"flux gen: skipped {m}\");\nlet c = '\"';\n").is_empty());
    // Lines are counted through strings, comments and char literals that span or hold them.
    assert_eq!(
        ad_hoc_skips("let s = \"a\nb\";\n/* c\nd */\nlet q = '\\n';\neprintln!(\"skipping\");\n"),
        [6]
    );
}

/// Python test files (under a `tests/` directory) printing `skipping`: a skip the hook suite's
/// wrapper would not see (unittest's own skips it reports through flux-skip).
fn python_skip_prints(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.to_lowercase();
            (l.contains("print(") || l.contains(".write(")) && l.contains("skipping")
        })
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn every_skip_goes_through_flux_skip() {
    let skip_crate = root().join("flux-skip/src");
    let mut bad = Vec::new();
    for f in rust_files() {
        if f.starts_with(&skip_crate) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for l in ad_hoc_skips(&text) {
            bad.push(format!(
                "{}:{l}",
                f.strip_prefix(root()).unwrap_or(&f).display()
            ));
        }
    }
    let out = Command::new("git")
        .current_dir(root())
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "*.py",
        ])
        .output()
        .expect("git runs");
    for rel in out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let rel = String::from_utf8_lossy(rel);
        if !rel.split('/').any(|c| c == "tests") {
            continue;
        }
        let text = std::fs::read_to_string(root().join(rel.as_ref())).unwrap_or_default();
        for l in python_skip_prints(&text) {
            bad.push(format!("{rel}:{l}"));
        }
    }
    assert!(
        bad.is_empty(),
        "a skip said by hand (it passes silently under FLUX_REQUIRE_ALL=1): call \
         flux_skip::skip(what, why) (or flux_skip::not_applicable for a reason that is no lack \
         of the machine) instead:\n{}",
        bad.join("\n")
    );
}

/// The workspace's members (`[workspace] members`).
fn members() -> Vec<String> {
    let ws: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    ws["workspace"]["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| m.as_str().expect("a path").to_string())
        .collect()
}

/// Every `.rs` file under `dir`, recursively.
fn rs_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rs_files_under(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// The files of the module tree rooted at `root_file` (its `mod name;` declarations, followed
/// as rustc does: `name.rs` or `name/mod.rs` beside a root or `mod.rs`, under `<stem>/` for
/// another file).
fn module_tree(root_file: &Path) -> Vec<PathBuf> {
    let mut out = vec![root_file.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let f = out[i].clone();
        i += 1;
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let is_root = f == root_file || f.file_name().is_some_and(|n| n == "mod.rs");
        let dir = if is_root {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for line in text.lines() {
            let l = line.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let Some(name) = l.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) else {
                continue;
            };
            for cand in [
                dir.join(format!("{name}.rs")),
                dir.join(name).join("mod.rs"),
            ] {
                if cand.exists() && !out.contains(&cand) {
                    out.push(cand);
                }
            }
        }
    }
    out
}

/// What is wrong with the integration tests of the crate at `dir` (its manifest `manifest`):
/// more than one test binary, or a file under `tests/` that no binary compiles.
fn test_layout_problems(dir: &Path, manifest: &toml::Table) -> Vec<String> {
    let files = rs_files_under(&dir.join("tests"));
    if files.is_empty() {
        return Vec::new();
    }
    let mut bad = Vec::new();
    let auto = manifest
        .get("package")
        .and_then(|p| p.get("autotests"))
        .and_then(|a| a.as_bool());
    if auto != Some(false) {
        bad.push("`autotests = false` missing from [package]".to_string());
    }
    let tests = manifest
        .get("test")
        .and_then(|t| t.as_array())
        .cloned()
        .unwrap_or_default();
    if tests.len() != 1 {
        bad.push(format!(
            "{} [[test]] targets, one wanted (a module of it per concern)",
            tests.len()
        ));
    }
    let mut compiled = Vec::new();
    for t in &tests {
        if let Some(path) = t.get("path").and_then(|p| p.as_str()) {
            compiled.extend(module_tree(&dir.join(path)));
        }
    }
    for f in files {
        if !compiled.contains(&f) {
            bad.push(format!(
                "{} is no module of the test binary (declare it with `mod …;` in its root)",
                f.strip_prefix(dir).unwrap_or(&f).display()
            ));
        }
    }
    bad
}

#[test]
fn one_integration_test_binary_per_crate_and_every_test_file_in_it() {
    let mut bad = Vec::new();
    for m in members() {
        let dir = root().join(&m);
        let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        for p in test_layout_problems(&dir, &manifest) {
            bad.push(format!("{m}: {p}"));
        }
    }
    assert!(bad.is_empty(), "integration tests:\n{}", bad.join("\n"));
}

#[test]
fn the_test_layout_check_sees_what_it_should() {
    let tmp = std::env::temp_dir().join(format!("flux-tidy-layout-{}", std::process::id()));
    let t = tmp.join("tests");
    std::fs::create_dir_all(t.join("common")).unwrap();
    let w = |f: &str, s: &str| std::fs::write(t.join(f), s).unwrap();
    w("tests.rs", "//! root\nmod common;\nmod a;\n");
    w("common/mod.rs", "//! shared\n");
    w("a.rs", "//! a\nuse crate::common;\n");
    let good: toml::Table = "[package]\nname = \"x\"\nautotests = false\n\n[[test]]\nname = \"integration\"\npath = \"tests/tests.rs\"\n"
        .parse()
        .unwrap();
    assert!(test_layout_problems(&tmp, &good).is_empty());
    w("b.rs", "//! forgotten\n");
    let bad = test_layout_problems(&tmp, &good);
    assert!(bad.len() == 1 && bad[0].contains("tests/b.rs"), "{bad:?}");
    std::fs::remove_file(t.join("b.rs")).unwrap();
    let two: toml::Table = "[package]\nname = \"x\"\n".parse().unwrap();
    let bad = test_layout_problems(&tmp, &two);
    assert!(bad.iter().any(|p| p.contains("autotests")), "{bad:?}");
    assert!(bad.iter().any(|p| p.contains("0 [[test]]")), "{bad:?}");
    std::fs::remove_dir_all(&tmp).unwrap();
}
