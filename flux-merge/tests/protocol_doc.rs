//! The hook's wire protocol is written down three times: the README's protocol section, the
//! Rust decoder's table (`flux_merge::protocol::RECORDS`) and the Python hook's record builders
//! (`'["tag",%d,...]'` format strings). They must agree on every record's tag and arity, and the
//! README and the decoder on every field's name. The protocol's constants are written twice, in
//! the hook's Python (`flux_hook/_core.py`: `CODE_*`, `CALLS`, `LEAVE`, `EXIT_CODE`, the hello)
//! and in Rust (`flux_merge::protocol`, `flux_merge::plan`): they must be equal.
use flux_merge::plan::{HookCalls, Leave};
use flux_merge::protocol::{
    ExcKind, Stream, CODE_GEN, CODE_NO_FIRST_LINE, CODE_TARGET, HOOK_EXIT, HOW, RECORDS, STARTED,
};
use std::collections::BTreeMap;
use std::path::Path;

fn hook_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../flux-hook"))
}

/// Every `["tag", field, ...]` written in `text`: tag → field lists.
fn records_in(text: &str, open: &str, close: char) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut out: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let mut rest = text;
    while let Some(i) = rest.find(open) {
        rest = &rest[i + open.len()..];
        let Some(q) = rest.find('"') else { break };
        let tag = &rest[..q];
        if tag.is_empty() || !tag.chars().all(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        let Some(end) = rest.find(close) else { break };
        let body = &rest[q + 1..end];
        let fields: Vec<String> = body
            .split(',')
            .map(|f| f.trim().to_string())
            .filter(|f| !f.is_empty())
            .collect();
        out.entry(tag.to_string()).or_default().push(fields);
        rest = &rest[end..];
    }
    out
}

#[test]
fn the_readme_protocol_section_matches_the_decoder() {
    let readme = std::fs::read_to_string(hook_dir().join("README.md")).unwrap();
    let start = readme.find("## Wire protocol").expect("a protocol section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    // The records are the section's indented (code block) lines.
    let block: String = section
        .lines()
        .filter(|l| l.starts_with("    ") && l.trim_start().starts_with("[\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let doc = records_in(&block, "[\"", ']');
    for spec in RECORDS {
        let Some(forms) = doc.get(spec.tag) else {
            panic!(
                "README's protocol section does not show the `{}` record",
                spec.tag
            );
        };
        let want: Vec<String> = spec
            .fields
            .iter()
            .map(|s| s.to_string())
            .chain(spec.optional.iter().map(|s| format!("{s}?")))
            .collect();
        for f in forms {
            assert_eq!(
                f, &want,
                "README's `{}` record (optional fields end in `?`)",
                spec.tag
            );
        }
    }
    for tag in doc.keys() {
        assert!(
            RECORDS.iter().any(|s| s.tag == tag),
            "README shows a record `{tag}` the decoder does not know"
        );
    }
}

#[test]
fn the_python_hook_builds_every_record_with_the_decoders_arity() {
    let mut built: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let dir = hook_dir().join("flux_hook");
    for f in std::fs::read_dir(&dir).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "py") {
            let text = std::fs::read_to_string(&f).unwrap();
            for (tag, forms) in records_in(&text, "'[\"", ']') {
                built.entry(tag).or_default().extend(forms);
            }
        }
    }
    for spec in RECORDS {
        let Some(forms) = built.get(spec.tag) else {
            panic!("the Python hook never builds a `{}` record", spec.tag);
        };
        for f in forms {
            // (Optional fields are appended by a trailing `%s`, which this count does not see.)
            assert_eq!(
                f.len(),
                spec.fields.len(),
                "a Python builder of `{}`: {f:?} vs {:?}",
                spec.tag,
                spec.fields
            );
        }
    }
    for tag in built.keys() {
        assert!(
            RECORDS.iter().any(|s| s.tag == tag),
            "the Python hook builds a record `{tag}` the decoder does not know"
        );
    }
}

/// The hook's `_core.py`.
fn core_py() -> String {
    std::fs::read_to_string(hook_dir().join("flux_hook/_core.py")).unwrap()
}

/// The top-level `NAME = value` assignments of Python `text` whose name starts with `prefix`
/// (the value without its comment).
fn python_constants(text: &str, prefix: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| {
            let (name, value) = l.split_once(" = ")?;
            let value = value.split("  #").next()?.trim();
            Some((name.trim().to_string(), value.to_string()))
        })
        .collect()
}

/// The strings of a Python tuple literal `("a", "b")`.
fn python_tuple(value: &str) -> Vec<String> {
    value
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(|w| w.trim().trim_matches('"').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

#[test]
fn the_hooks_code_traits_are_the_decoders() {
    let py = python_constants(&core_py(), "CODE_");
    let rust_text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protocol.rs"))
            .unwrap();
    let rust: BTreeMap<String, String> = rust_text
        .lines()
        .filter_map(|l| l.strip_prefix("pub const CODE_"))
        .filter_map(|l| {
            let (name, value) = l.split_once(": u32 = ")?;
            Some((
                format!("CODE_{name}"),
                value.trim_end_matches(';').to_string(),
            ))
        })
        .collect();
    assert_eq!(py, rust, "the CODE_* traits of _core.py and protocol.rs");
    // What the text says is what is compiled.
    assert_eq!(
        [CODE_GEN, CODE_NO_FIRST_LINE, CODE_TARGET].map(|c| c.to_string()),
        ["CODE_GEN", "CODE_NO_FIRST_LINE", "CODE_TARGET"].map(|n| rust[n].clone())
    );
}

#[test]
fn the_hooks_settings_and_exit_code_are_the_plans() {
    let consts = python_constants(&core_py(), "");
    let calls = python_tuple(&consts["CALLS"]);
    let plan: Vec<&str> = [
        HookCalls::All,
        HookCalls::Entries,
        HookCalls::Generators,
        HookCalls::None,
    ]
    .map(HookCalls::as_str)
    .to_vec();
    for w in &calls {
        let h: HookCalls = serde_json::from_value(serde_json::json!(w))
            .unwrap_or_else(|e| panic!("the hook's FLUX_HOOK_CALLS {w:?} is no HookCalls: {e}"));
        assert_eq!(h.as_str(), w);
    }
    for w in &plan {
        assert!(
            calls.iter().any(|c| c == w),
            "the hook does not take FLUX_HOOK_CALLS={w}"
        );
    }
    let all = Leave { lineless: true };
    assert_eq!(
        python_tuple(&consts["LEAVE"]),
        all.as_list(),
        "FLUX_HOOK_LEAVE's names, in the order the hello echoes them"
    );
    assert_eq!(consts["EXIT_CODE"], HOOK_EXIT.to_string());
}

/// The hook's hello, formatted by hand in `_core.py`, decodes with every field the merge
/// reads, and the words the decoder takes in records are words the hook writes.
#[test]
fn the_hooks_hello_and_words_are_the_decoders() {
    let core = core_py();
    let start = core
        .find(r#"'{"hello":"#)
        .expect("the hello's format in _core.py");
    let end = start + core[start..].find(r#"\n'"#).expect("its end");
    let mut hello = core[start + 1..end].to_string();
    for v in ["7", "3", "15", "2"] {
        hello = hello.replacen("%d", v, 1);
    }
    for v in [
        "monitoring",
        "generators",
        "targets",
        r#""lineless","genexpr""#,
    ] {
        hello = hello.replacen("%s", v, 1);
    }
    let mut st = Stream::default();
    st.feed(&hello);
    assert!(st.bad.is_empty(), "{hello}: {:?}", st.bad);
    let h = st.hello.expect("a hello");
    assert_eq!(
        (
            h.pid,
            h.python.as_str(),
            h.mode.as_str(),
            h.calls.as_str(),
            h.scope.as_str()
        ),
        (7, "3.15.2", "monitoring", "generators", "targets")
    );
    assert_eq!(h.leave, ["lineless", "genexpr"]);
    assert!(h.gen_starts_marked, "the hook marks fresh generator starts");
    let mut sources = String::new();
    for f in std::fs::read_dir(hook_dir().join("flux_hook")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "py") {
            sources.push_str(&std::fs::read_to_string(&f).unwrap());
        }
    }
    let words = HOW
        .iter()
        .chain(&STARTED)
        .copied()
        .chain(ExcKind::ALL.map(ExcKind::as_str));
    for w in words {
        assert!(
            sources.contains(&format!("\"{w}\"")),
            "the decoder takes the word {w:?}, which the hook never writes"
        );
    }
}
