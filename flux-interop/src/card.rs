//! The dataset card of an exported dataset ([`crate::hf`]): a YAML header the Hub and
//! `datasets` read (`configs` naming each split's Parquet file; `dataset_info` with the
//! features and, per split, `name`, `num_bytes` and `num_examples`, all three of which
//! `datasets` requires), then what a user needs: splits, counts per kind, repositories with
//! their versions and licences (as their source trees declare them, "unknown" where they
//! declare none or were not read), the fields, how the gold was made, how to score, citation.

use crate::hf::{Row, COLUMNS};
use std::collections::{BTreeMap, BTreeSet};

/// What the card says about the set as a whole.
pub struct CardInfo<'a> {
    /// `split → (JSONL bytes, Parquet bytes)`.
    pub sizes: &'a BTreeMap<String, (u64, u64)>,
    /// The sets the rows were generated for (`[generated] set`), if any.
    pub sets: BTreeSet<String>,
    /// `flux score`'s content digest of the exported instances.
    pub digest: String,
}

fn yaml_header(rows: &[Row], info: &CardInfo) -> String {
    let mut y = String::from("---\n");
    y.push_str("pretty_name: flux — execution-grounded questions about Python runtime behaviour\n");
    y.push_str("language:\n- en\n");
    // Each repository keeps its own licence (the table in the card); the rows quote its code.
    y.push_str("license: other\nlicense_name: per-repository\n");
    y.push_str("task_categories:\n- question-answering\n- text-generation\n");
    y.push_str("tags:\n- code\n- python\n- program-execution\n- runtime-reasoning\n- benchmark\n");
    let size = match rows.len() {
        0..=999 => "n<1K",
        1000..=9999 => "1K<n<10K",
        _ => "10K<n<100K",
    };
    y.push_str(&format!("size_categories:\n- {size}\n"));
    y.push_str("configs:\n- config_name: default\n  data_files:\n");
    for split in info.sizes.keys() {
        y.push_str(&format!(
            "  - split: {split}\n    path: data/{split}.parquet\n"
        ));
    }
    y.push_str("dataset_info:\n  features:\n");
    for (name, col) in COLUMNS {
        y.push_str(&col.hf_yaml(name));
    }
    y.push_str("  splits:\n");
    let (mut bytes, mut download) = (0, 0);
    for (split, (jsonl, parquet)) in info.sizes {
        let n = rows.iter().filter(|r| &r.split == split).count();
        y.push_str(&format!(
            "  - name: {split}\n    num_bytes: {jsonl}\n    num_examples: {n}\n"
        ));
        bytes += jsonl;
        download += parquet;
    }
    y.push_str(&format!(
        "  download_size: {download}\n  dataset_size: {bytes}\n---\n\n"
    ));
    y
}

const FIELDS: &str = "\n## Fields\n\n\
| field | meaning |\n|---|---|\n\
| `instance_id` | `repository/id`: the key answers and predictions use |\n\
| `id`, `repository` | the instance |\n\
| `package`, `version`, `image`, `interpreter` | the code under test (`name==version`), the container image and interpreter the gold was harvested with |\n\
| `kind` | one of 14 question kinds (`S1`–`S7` about one test, `M1`–`M7` about several) |\n\
| `split`, `set` | the split; the generated set the instance belongs to (null for hand-written ones) |\n\
| `question` | the question |\n\
| `preamble_id`, `preamble` | the conventions the question was written against (`family@version`, and its text: what a line, an iteration, a call, a raise are, how values are rendered), sent once in the system prompt; null for questions that spell them out |\n\
| `system`, `prompt` | the system (with the preamble) and user messages exactly as `flux eval` sends them (default context mode): the question, the answer format, the test code and the repository source it needs, with the files' own line numbers |\n\
| `test_source` | the test code of the prompt: the tests the question names, with their class, fixtures and helpers |\n\
| `context` | the repository source of the prompt: the target function and what it calls |\n\
| `template` | JSON text: the answer's shape, leaves naming types (`\"int\"`, `\"str\"`) |\n\
| `gold` | JSON text: the harvested answer |\n\
| `order_insensitive` | JSON pointers of lists compared as multisets |\n\
| `test_image_files`, `test_command`, `expect` | where the tests are in the image, how they are run, whether they pass |\n\
| `tracing`, `extractor`, `extractor_params` | JSON text: what was traced, and the extractor that turned the trace into `gold` |\n\
| `difficulty` | JSON text: how much the test runs (calls, functions, lines, files, classes, depth of the repository's code; `easy`: the static baseline answers it); null for hand-written instances |\n\
| `variant_of` | the origin's `id` for a perturbation variant, else null |\n\
| `oracle` | the instance's `oracle.json` verbatim (gold, template, provenance: image id, trace digest, flux version) |\n";

fn counts(b: &mut String, rows: &[Row]) {
    b.push_str("## Splits\n\n| split | rows | what |\n|---|---|---|\n");
    let mut by_split: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *by_split.entry(&r.split).or_default() += 1;
    }
    for (split, n) in &by_split {
        let what = match *split {
            "variants" => "perturbation variants: a test's inputs mutated, the gold re-harvested (`variant_of` names the origin)",
            "train" => "instances of the training repositories (no repository is in two splits)",
            _ => "the instances",
        };
        b.push_str(&format!("| `{split}` | {n} | {what} |\n"));
    }
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *by_kind.entry(&r.kind).or_default() += 1;
    }
    b.push_str("\n## Rows per kind\n\n| kind | rows |\n|---|---|\n");
    for (k, n) in &by_kind {
        b.push_str(&format!("| `{k}` | {n} |\n"));
    }
    // Repository → (rows, versions, licences).
    let mut repos: BTreeMap<&str, (usize, BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for r in rows {
        let e = repos.entry(&r.repository).or_default();
        e.0 += 1;
        if let Some(v) = r.value["version"].as_str() {
            e.1.insert(v.to_string());
        }
        e.2.insert(r.licence.clone().unwrap_or_else(|| "unknown".into()));
    }
    b.push_str(
        "\n## Repositories\n\nThe licence is what the repository's source distribution declares \
         (`PKG-INFO`); \"unknown\" where it declares none or its source was not read. Prompts \
         quote the repositories' code under their licences.\n\n\
         | repository | rows | versions | licence |\n|---|---|---|---|\n",
    );
    for (k, (n, vs, ls)) in &repos {
        let vs: Vec<&str> = vs.iter().map(String::as_str).collect();
        let ls: Vec<&str> = ls.iter().map(String::as_str).collect();
        b.push_str(&format!(
            "| `{k}` | {n} | {} | {} |\n",
            vs.join(", "),
            ls.join("; ")
        ));
    }
}

/// The dataset card: YAML header, then prose.
pub fn card(rows: &[Row], info: &CardInfo) -> String {
    let mut b = String::from("# flux: questions about what Python code does when it runs\n\n");
    b.push_str(
        "Each row is a question about the runtime behaviour of a real Python package at a pinned \
         version (which lines run, how often a loop iterates, what a variable holds, which \
         exceptions are raised, what calls what), asked about some of the package's tests. The \
         gold answer was not written by anyone: flux harvested it from an instrumented run of \
         the tests in a reproducible container (CPython's USDT probes traced with eBPF, merged \
         with an in-process hook); `flux harvest --check` re-harvests it from a clean container \
         and must find it unchanged. Each row is self-contained: `prompt` holds the code the \
         question needs.\n\n",
    );
    b.push_str(&format!(
        "Files: `data/<split>.parquet` (the default config) and the same rows as \
         `data/<split>.jsonl`. {} rows; set {}; content digest `{}` (what `flux score` records \
         for these instances).\n\n",
        rows.len(),
        if info.sets.is_empty() {
            "hand-written instances".to_string()
        } else {
            info.sets.iter().cloned().collect::<Vec<_>>().join(", ")
        },
        info.digest
    ));
    counts(&mut b, rows);
    b.push_str(FIELDS);
    b.push_str(
        "\n## Scoring\n\nAn answer is one JSON object of the template's shape. It passes when it \
         matches the gold as SWE-Flux scores it: every gold key present (extra keys ignored), \
         lists equal in order unless order-insensitive, numbers within 1e-6, lenient on \
         stringified scalars, `<class '…'>`, `|||` alternatives, path and dotted-name suffixes; \
         call graphs by edge F1. `flux score` implements it and reads this dataset directly \
         (predictions JSONL: `{\"instance_id\": …, \"answer\": {…}}` a line):\n\n```sh\n\
         flux score --instances data/test.jsonl --predictions preds.jsonl\n```\n\n\
         An Inspect task that asks these prompts and scores them by the same rules (ported \
         to pure Python, no flux binary needed) is written by `flux export --format inspect`.\n",
    );
    b.push_str(&format!(
        "\n## Citation\n\n```bibtex\n@software{{flux,\n  title = {{flux: execution-grounded \
         questions about the runtime behaviour of real Python repositories}},\n  author = \
         {{{{The flux authors}}}},\n  version = {{{}}},\n  year = {{2026}},\n  note = {{Dataset \
         exported by flux export --format hf, content digest {}}}\n}}\n```\n",
        env!("CARGO_PKG_VERSION"),
        info.digest
    ));
    yaml_header(rows, info) + &b
}
