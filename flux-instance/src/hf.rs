//! A Hugging Face dataset of the harvested instances (`flux export --format hf OUT`):
//!
//! * `OUT/data/test.jsonl`: the instances, one JSON object a line;
//! * `OUT/data/variants.jsonl`: the perturbation variants (instances with a `[variant]`
//!   table), a split of their own so that originals and variants are never mixed by accident;
//! * `OUT/README.md`: the dataset card, a YAML header (`configs` naming each split's file,
//!   `dataset_info` with its features and counts) and what a user needs to know: the fields,
//!   counts per kind and repository, how gold answers were made and how to score.
//!
//! Every row has the same columns. Values whose shape differs from row to row (the template,
//! the gold answer, tracing config, extractor parameters, provenance) are JSON *text*, so that
//! the hub's Arrow schema is one schema; `json.loads` gives them back.
//!
//! JSONL only, no parquet: the `parquet` crate brings arrow's column machinery (dozens of
//! crates, minutes of build on a 2-core machine) for files of a few hundred rows, and the hub
//! converts JSONL to parquet itself.

use crate::{load_instance, read_oracle, Instance, InstanceError, Oracle, ORACLE_FILE};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What [`export`] did.
#[derive(Debug, Default)]
pub struct HfReport {
    /// `split → ids` (`repo/id`).
    pub splits: BTreeMap<String, Vec<String>>,
    /// Directories not exported and why (not harvested).
    pub skipped: Vec<crate::export::Skipped>,
    pub errors: Vec<InstanceError>,
}

/// The columns, in order, with their Arrow dtypes (for the card's `dataset_info`).
pub const FEATURES: &[(&str, &str)] = &[
    ("id", "string"),
    ("repository", "string"),
    ("package", "string"),
    ("image", "string"),
    ("interpreter", "string"),
    ("kind", "string"),
    ("question", "string"),
    ("template", "string"),
    ("gold", "string"),
    ("order_insensitive", "list<string>"),
    ("test_files", "list<{path: string, content: string}>"),
    ("test_command", "list<string>"),
    ("expect", "string"),
    ("tracing", "string"),
    ("extractor", "string"),
    ("extractor_params", "string"),
    ("variant_of", "string"),
    ("provenance", "string"),
];

fn text(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// One row.
pub fn row(inst: &Instance, oracle: &Oracle) -> Result<Value, InstanceError> {
    let s = &inst.spec;
    let mut files = Vec::new();
    for f in &s.test.files {
        let p = inst.dir.join(f);
        let content = std::fs::read_to_string(&p).map_err(|source| InstanceError::Io {
            path: p.clone(),
            source,
        })?;
        files.push(json!({"path": f, "content": content}));
    }
    Ok(json!({
        "id": s.id,
        "repository": s.repository,
        "package": s.package,
        "image": s.image,
        "interpreter": s.interpreter,
        "kind": oracle.question_kind,
        "question": s.question,
        "template": text(&oracle.template_answer),
        "gold": text(&oracle.oracle_answer),
        "order_insensitive": s.order_insensitive,
        "test_files": files,
        "test_command": s.test.command,
        "expect": s.test.expect,
        "tracing": text(&s.tracing),
        "extractor": s.extractor.name,
        "extractor_params": text(&s.extractor.params),
        "variant_of": s.variant.as_ref().map(|v| v.origin.clone()),
        "provenance": text(&oracle.provenance),
    }))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstanceError + '_ {
    move |source| InstanceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Export the instances in `dirs` to `out` (created if needed).
pub fn export(dirs: &[PathBuf], out: &Path) -> HfReport {
    let mut report = HfReport::default();
    let mut rows: BTreeMap<&'static str, Vec<(String, Value, String, String)>> = BTreeMap::new();
    for dir in dirs {
        let inst = match load_instance(dir) {
            Ok(i) => i,
            Err(e) => {
                report.errors.push(e);
                continue;
            }
        };
        if !dir.join(ORACLE_FILE).is_file() {
            report.skipped.push(crate::export::Skipped {
                dir: dir.clone(),
                reason: format!("not harvested (no {ORACLE_FILE})"),
            });
            continue;
        }
        let r = read_oracle(dir).and_then(|o| row(&inst, &o).map(|r| (r, o)));
        match r {
            Ok((r, o)) => {
                let split = if inst.spec.variant.is_some() {
                    "variants"
                } else {
                    "test"
                };
                let key = format!("{}/{}", inst.spec.repository, inst.spec.id);
                let kind = serde_json::to_value(o.question_kind)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                rows.entry(split)
                    .or_default()
                    .push((key, r, kind, inst.spec.repository.clone()));
            }
            Err(e) => report.errors.push(e),
        }
    }
    let data = out.join("data");
    if let Err(e) = std::fs::create_dir_all(&data).map_err(io(&data)) {
        report.errors.push(e);
        return report;
    }
    for (split, rs) in rows.iter_mut() {
        rs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut body = String::new();
        for (_, r, _, _) in rs.iter() {
            body.push_str(&r.to_string());
            body.push('\n');
        }
        let p = data.join(format!("{split}.jsonl"));
        if let Err(e) = std::fs::write(&p, body).map_err(io(&p)) {
            report.errors.push(e);
        }
        report
            .splits
            .insert(split.to_string(), rs.iter().map(|r| r.0.clone()).collect());
    }
    let card = card(&rows);
    let p = out.join("README.md");
    if let Err(e) = std::fs::write(&p, card).map_err(io(&p)) {
        report.errors.push(e);
    }
    report
}

fn feature_yaml(name: &str, dtype: &str) -> String {
    match dtype {
        "string" => format!("  - name: {name}\n    dtype: string\n"),
        "list<string>" => format!("  - name: {name}\n    sequence: string\n"),
        _ => format!(
            "  - name: {name}\n    list:\n    - name: path\n      dtype: string\n    - name: content\n      dtype: string\n"
        ),
    }
}

/// The dataset card: YAML header, then prose.
fn card(rows: &BTreeMap<&'static str, Vec<(String, Value, String, String)>>) -> String {
    let mut y = String::from("---\n");
    y.push_str("pretty_name: flux — execution-grounded questions about Python runtime behaviour\n");
    y.push_str("language:\n- en\n");
    y.push_str("license: other\n");
    y.push_str("task_categories:\n- question-answering\n- text-generation\n");
    y.push_str("tags:\n- code\n- python\n- program-execution\n- runtime-reasoning\n- benchmark\n");
    let n: usize = rows.values().map(Vec::len).sum();
    let size = match n {
        0..=999 => "n<1K",
        1000..=9999 => "1K<n<10K",
        _ => "10K<n<100K",
    };
    y.push_str(&format!("size_categories:\n- {size}\n"));
    y.push_str("configs:\n- config_name: default\n  data_files:\n");
    for split in rows.keys() {
        y.push_str(&format!(
            "  - split: {split}\n    path: data/{split}.jsonl\n"
        ));
    }
    y.push_str("dataset_info:\n  features:\n");
    for (name, dtype) in FEATURES {
        y.push_str(&feature_yaml(name, dtype));
    }
    y.push_str("  splits:\n");
    for (split, rs) in rows {
        y.push_str(&format!(
            "  - name: {split}\n    num_examples: {}\n",
            rs.len()
        ));
    }
    y.push_str("---\n\n");

    let mut b = String::from("# flux: questions about what Python code does when it runs\n\n");
    b.push_str(
        "Each row is a question about the runtime behaviour of a real Python package at a pinned \
         version (which lines run, how often a loop iterates, what a variable holds, which \
         exceptions are raised, what calls what), asked about one of the package's tests. The \
         gold answer was not written by anyone: flux harvested it from an instrumented run of \
         the test in a reproducible container (CPython's USDT probes traced with eBPF, merged \
         with an in-process hook); `flux harvest --check` re-harvests it from a clean container \
         and must find it unchanged.\n\n",
    );
    b.push_str("## Splits\n\n| split | rows | what |\n|---|---|---|\n");
    for (split, rs) in rows {
        let what = if *split == "variants" {
            "perturbation variants: a test's inputs mutated, the gold re-harvested (`variant_of` names the origin)"
        } else {
            "the instances"
        };
        b.push_str(&format!("| `{split}` | {} | {what} |\n", rs.len()));
    }
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_repo: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, _, kind, repo) in rows.values().flatten() {
        *by_kind.entry(kind).or_default() += 1;
        *by_repo.entry(repo).or_default() += 1;
    }
    b.push_str("\n## Rows per kind\n\n| kind | rows |\n|---|---|\n");
    for (k, n) in &by_kind {
        b.push_str(&format!("| `{k}` | {n} |\n"));
    }
    b.push_str("\n## Rows per repository\n\n| repository | rows |\n|---|---|\n");
    for (k, n) in &by_repo {
        b.push_str(&format!("| `{k}` | {n} |\n"));
    }
    b.push_str(
        "\n## Fields\n\n\
         | field | meaning |\n|---|---|\n\
         | `id`, `repository` | the instance (`repository/id` is unique) |\n\
         | `package`, `image`, `interpreter` | the code under test (`name==version`), the container image and interpreter the gold was harvested with |\n\
         | `kind` | one of 14 question kinds (`S1`–`S7` single test, `M1`–`M7` several tests) |\n\
         | `question` | the question, its conventions spelled out |\n\
         | `template` | JSON text: the answer's shape, leaves naming types (`\"int\"`, `\"str\"`) |\n\
         | `gold` | JSON text: the harvested answer |\n\
         | `order_insensitive` | JSON pointers of lists compared as multisets |\n\
         | `test_files`, `test_command`, `expect` | the test the question is about, how it is run, and whether it passes |\n\
         | `tracing`, `extractor`, `extractor_params` | JSON text: what was traced, and the named extractor that turned the trace into `gold` |\n\
         | `variant_of` | the origin's `id` for a perturbation variant, else null |\n\
         | `provenance` | JSON text: image id, trace digest, flux version, harvest time |\n",
    );
    b.push_str(&format!(
        "\n## Scoring\n\nAn answer is one JSON object of the template's shape. It passes when it \
         matches the gold as SWE-Flux scores it: every gold key present (extra keys ignored), \
         lists equal in order unless order-insensitive, numbers within 1e-6, lenient on \
         stringified scalars, `<class '…'>`, `|||` alternatives, path and dotted-name suffixes. \
         `flux score` (in the flux repository) implements it, with partial credit and 95 % \
         intervals:\n\n```sh\nflux eval --model MODEL --base-url URL   # or any tool writing <answers>/<repository>/<id>/answer.json\nflux score --answers answers/MODEL --format html --out report.html\n```\n\n\
         {n} rows in all.\n",
    ));
    y + &b
}
