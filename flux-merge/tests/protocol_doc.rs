//! The hook's wire protocol is written down three times: the README's protocol section, the
//! Rust decoder's table (`flux_merge::protocol::RECORDS`) and the Python hook's record builders
//! (`'["tag",%d,...]'` format strings). They must agree on every record's tag and arity, and the
//! README and the decoder on every field's name.
use flux_merge::protocol::RECORDS;
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
