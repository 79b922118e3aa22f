//! README sections 4–7 (evaluate, score, datasets, generate) against the binary: every flag they
//! name is one of flux's (`flux CMD --help`), and every flag of the commands they document is
//! named there (issue 24: "README sections 4–7 show the new flags").

use crate::common::run_flux;
use std::collections::BTreeSet;
use std::path::Path;

/// The `--flags` a text names.
fn flags(text: &str, help_lines_only: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let t = line.trim_start();
        if help_lines_only && !t.starts_with('-') {
            continue;
        }
        let b = t.as_bytes();
        let mut i = 0;
        while let Some(off) = t[i..].find("--") {
            let s = i + off;
            let before_ok = s == 0 || !(b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'-');
            let e = s
                + 2
                + t[s + 2..]
                    .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
                    .unwrap_or(t.len() - s - 2);
            if before_ok && t[s + 2..].starts_with(|c: char| c.is_ascii_lowercase()) {
                out.insert(t[s..e].to_string());
            }
            i = e.max(s + 2);
            if help_lines_only {
                break; // a help line names its own flag first
            }
        }
    }
    out
}

fn help(cmd: &[&str]) -> BTreeSet<String> {
    let args: Vec<&str> = cmd.iter().copied().chain(["--help"]).collect();
    let out = run_flux(&args);
    assert!(out.status.success(), "flux {} --help", cmd.join(" "));
    let text = String::from_utf8_lossy(&out.stdout);
    // `-q, --quiet`: the long name.
    let text = text.replace("-q, --", "--").replace("-h, --", "--");
    flags(&text, true)
}

/// Flags of other tools the sections name, each with its tool: the README names the tool on
/// the same line (`flux-junit` runs a JUnit class; the k8s test runs `kubernetes-validate`;
/// `cargo xtask bench gen` is the maintainers' bench).
const FOREIGN: &[(&str, &str)] = &[
    ("--select-class", "flux-junit"),
    ("--select-method", "flux-junit"),
    ("--strict", "kubernetes-validate"),
    ("--own-runs", "cargo xtask bench gen"),
    ("--witness-sample", "cargo xtask bench gen"),
];

#[test]
fn readme_sections_4_to_7_name_real_flags_and_every_flag_of_their_commands() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let start = readme.find("\n### 4. ").expect("section 4");
    let end = readme.find("\n### 8. ").expect("section 8");
    let named = flags(&readme[start..end], false);
    let documented = ["eval", "score", "export", "gen", "stats", "perturb"];
    let mut all = BTreeSet::new();
    let mut missing = Vec::new();
    for cmd in documented.iter().chain(&["harvest", "images"]) {
        let h = help(&[cmd]);
        if documented.contains(cmd) {
            for f in h.iter().filter(|f| *f != "--help" && !named.contains(*f)) {
                missing.push(format!("flux {cmd} {f}"));
            }
        }
        all.extend(h);
    }
    for sub in ["save", "load", "build"] {
        all.extend(help(&["images", sub]));
    }
    for (flag, tool) in FOREIGN {
        let section = &readme[start..end];
        let with_tool = section
            .lines()
            .any(|l| l.contains(flag) && l.contains(tool));
        assert!(
            !section.contains(flag) || with_tool,
            "README 4–7 names {flag} away from {tool}, whose flag it is"
        );
        if with_tool {
            all.insert(flag.to_string());
        }
    }
    let unknown: Vec<&String> = named.difference(&all).collect();
    assert!(
        unknown.is_empty(),
        "README 4–7 names flags flux does not have: {unknown:?}"
    );
    assert!(
        missing.is_empty(),
        "flags README 4–7 does not show: {missing:?}"
    );
    // The check sees flags at all (a parser that finds none would pass the two above).
    assert!(named.len() > 40 && named.contains("--predictions") && named.contains("--reauthor"));
}
