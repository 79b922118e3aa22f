//! A Hugging Face dataset of the harvested instances (`flux export --format hf OUT`), self-
//! contained: each row holds what a model is asked (the system prompt, with the preamble of
//! conventions the question was written against, and the user prompt exactly as `flux eval`
//! renders them, with the test code and the repository source chosen
//! around the target, [`flux_eval::prompt::build`]) and what scores it (template, gold,
//! order-insensitive paths, the instance's `oracle.json` verbatim).
//!
//! * `OUT/data/<split>.parquet`: the rows of each split (`test`, `train` for a generated set's
//!   training repositories, `variants` for perturbation variants), the card's default config;
//! * `OUT/data/<split>.jsonl`: the same rows, one JSON object a line (what `flux score
//!   --instances` and the Inspect task of [`crate::inspect`] read);
//! * `OUT/README.md`: the dataset card ([`crate::card`]).
//!
//! Every row has the same columns ([`COLUMNS`]). Values whose shape differs from row to row
//! (template, gold, tracing config, extractor parameters, difficulty, `oracle.json`) are JSON
//! *text*, so that the Arrow schema is one schema; `json.loads` gives them back.
//!
//! The prompts need the repositories' source trees (`flux images source`): a missing one stops
//! the export naming it, as it stops `flux eval`, unless the export asks for none on purpose
//! (`--no-source`: the prompts then say that no source is given).

use crate::parquet_out::{self, Col};
use flux_eval::prompt::{self, Mode, PromptConfig};
use flux_eval::source::{self, Located, Source};
use flux_score::{Instance, Selection};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The columns, in order.
pub const COLUMNS: &[(&str, Col)] = &[
    ("instance_id", Col::Str),
    ("id", Col::Str),
    ("repository", Col::Str),
    ("package", Col::OptStr),
    ("version", Col::OptStr),
    ("image", Col::OptStr),
    ("interpreter", Col::Str),
    ("kind", Col::Str),
    ("split", Col::Str),
    ("set", Col::OptStr),
    ("question", Col::Str),
    ("preamble_id", Col::OptStr),
    ("preamble", Col::OptStr),
    ("system", Col::Str),
    ("prompt", Col::Str),
    ("test_source", Col::Str),
    ("context", Col::Str),
    ("template", Col::Str),
    ("gold", Col::Str),
    ("order_insensitive", Col::List),
    ("test_image_files", Col::List),
    ("test_command", Col::List),
    ("expect", Col::Str),
    ("tracing", Col::Str),
    ("extractor", Col::Str),
    ("extractor_params", Col::Str),
    ("difficulty", Col::OptStr),
    ("variant_of", Col::OptStr),
    ("oracle", Col::Str),
];

/// How the dataset is made.
#[derive(Debug, Clone)]
pub struct HfOptions {
    /// Where the repositories' sources are (as `flux eval --source-root`/`--cache`).
    pub source: Source,
    /// The prompt budget (`flux eval --max-context-tokens`).
    pub max_context_tokens: usize,
    /// Which instances (`--filter`, `--limit`).
    pub selection: Selection,
}

/// What [`export`] did.
#[derive(Debug, Default)]
pub struct HfReport {
    /// `split → instance ids` (`repo/id`).
    pub splits: BTreeMap<String, Vec<String>>,
    /// Instances not exported and why (not harvested).
    pub skipped: Vec<(String, String)>,
    /// Instances that could not be read (each named), the others exported.
    pub errors: Vec<String>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// Errors that stop the export.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    #[error(transparent)]
    Score(#[from] flux_score::ScoreError),
    #[error("{0}")]
    NoSource(String),
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("{0}")]
    Parquet(String),
}

/// One exported row, with what the card counts.
pub struct Row {
    pub value: Value,
    pub split: String,
    pub repository: String,
    pub kind: String,
    /// The repository's licence as its source tree declares it (`None`: not found).
    pub licence: Option<String>,
}

fn text(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// One row: the instance (`inst`, as the scorer reads it, and `spec`, its instance.toml), its
/// prompt rendered with the source `located`.
pub fn row(
    inst: &Instance,
    spec: &flux_instance::Instance,
    located: &Located,
    max_context_tokens: usize,
) -> Result<Value, String> {
    let s = &spec.spec;
    let oracle = inst
        .oracle_json
        .as_deref()
        .ok_or_else(|| format!("{}: not harvested", inst.key()))?;
    let p = prompt::build(
        inst,
        &PromptConfig {
            source: located,
            max_context_tokens,
            reasoning: false,
            mode: Mode::Context,
            system: None,
        },
    );
    let preamble = prompt::preamble(inst, &mut Vec::new());
    let difficulty = s.generated.as_ref().map(|g| {
        let mut d = serde_json::to_value(&g.difficulty).unwrap_or(Value::Null);
        if let Some(o) = d.as_object_mut() {
            o.insert("easy".into(), Value::Bool(g.easy));
        }
        text(&d)
    });
    Ok(json!({
        "instance_id": inst.key(),
        "id": inst.id,
        "repository": inst.repository,
        "package": inst.package,
        "version": inst.package_name_version().map(|(_, v)| v),
        "image": inst.image,
        "interpreter": s.interpreter,
        "kind": inst.kind,
        "split": inst.split,
        "set": inst.set,
        "question": inst.question,
        "preamble_id": preamble.map(|p| p.id()),
        "preamble": preamble.map(|p| p.text),
        "system": p.system,
        "prompt": p.user,
        "test_source": p.test_source,
        "context": p.context,
        "template": text(&inst.template),
        "gold": text(&inst.oracle),
        "order_insensitive": inst.order_insensitive,
        "test_image_files": inst.test_image_files,
        "test_command": inst.test_command,
        "expect": serde_json::to_value(s.test.expect).unwrap_or(Value::Null),
        "tracing": text(&s.tracing),
        "extractor": s.extractor.name,
        "extractor_params": text(&inst.extractor_params),
        "difficulty": difficulty,
        "variant_of": s.variant.as_ref().map(|v| v.origin.clone()),
        "oracle": oracle,
    }))
}

/// The licence a source tree declares: `License-Expression`, a one-line `License`, or the
/// `License ::` classifiers of its `PKG-INFO` (an sdist's metadata). `None` when it says none.
pub fn licence(src: &Path) -> Option<String> {
    let meta = std::fs::read_to_string(src.join("PKG-INFO")).ok()?;
    let header = meta.split("\n\n").next().unwrap_or(&meta);
    let get = |k: &str| {
        header.lines().find_map(|l| {
            l.strip_prefix(k)
                .map(str::trim)
                .filter(|v| !v.is_empty() && *v != "UNKNOWN")
                .map(String::from)
        })
    };
    if let Some(e) = get("License-Expression:") {
        return Some(e);
    }
    // A `License:` field may hold the whole licence text (continuation lines): only a name.
    if let Some(l) = get("License:").filter(|l| l.len() <= 60) {
        return Some(l);
    }
    let classes: Vec<&str> = header
        .lines()
        .filter_map(|l| l.strip_prefix("Classifier: License :: "))
        .map(|c| c.rsplit(" :: ").next().unwrap_or(c).trim())
        .collect();
    (!classes.is_empty()).then(|| classes.join(", "))
}

/// The instances to export, each with its source found (a missing one stops the export unless
/// no source is asked for).
fn collect(
    roots: &[PathBuf],
    opts: &HfOptions,
    report: &mut HfReport,
) -> Result<Vec<(Instance, Located)>, HfError> {
    let found = flux_score::discover_selected(roots, &opts.selection)?;
    for i in found.invalid {
        report.errors.push(format!("{}: {}", i.path, i.error));
    }
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for inst in found.instances {
        if inst.oracle_json.is_none() {
            report
                .skipped
                .push((inst.key(), "not harvested (no oracle.json)".into()));
            continue;
        }
        let l = source::locate(&inst, &opts.source);
        if let Located::Missing { path, hint } = &l {
            missing.push((inst.key(), path.clone(), hint.clone()));
        }
        out.push((inst, l));
    }
    if !missing.is_empty() {
        return Err(HfError::NoSource(source::missing_report(&missing).replace(
            "models would be asked about",
            "the prompts would leave out",
        )));
    }
    Ok(out)
}

/// Export the instances under `roots` (instance roots, as `flux score --instances`) to `out`
/// (created if needed).
pub fn export(roots: &[PathBuf], out: &Path, opts: &HfOptions) -> Result<HfReport, HfError> {
    let mut report = HfReport::default();
    let mut rows: Vec<Row> = Vec::new();
    let mut exported: Vec<Instance> = Vec::new();
    for (inst, located) in collect(roots, opts, &mut report)? {
        let r = flux_instance::load_instance(&inst.dir)
            .map_err(|e| e.to_string())
            .and_then(|spec| row(&inst, &spec, &located, opts.max_context_tokens));
        match r {
            Ok(value) => rows.push(Row {
                value,
                split: inst.split.clone(),
                repository: inst.repository.clone(),
                kind: inst.kind.clone(),
                licence: located.dir().and_then(licence),
            }),
            Err(e) => {
                report.errors.push(format!("{}: {e}", inst.key()));
                continue;
            }
        }
        exported.push(inst);
    }
    // The digest `flux score` records for these instances, from their directories or the rows.
    let digest = flux_score::results::digest(&exported);
    let sets = exported.iter().filter_map(|i| i.set.clone()).collect();
    rows.sort_by(|a, b| {
        (&a.split, a.value["instance_id"].as_str())
            .cmp(&(&b.split, b.value["instance_id"].as_str()))
    });
    let data = out.join("data");
    std::fs::create_dir_all(&data).map_err(|e| HfError::Io(data.clone(), e))?;
    let mut by_split: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in &rows {
        by_split.entry(&r.split).or_default().push(r);
    }
    let mut sizes = BTreeMap::new();
    for (split, rs) in &by_split {
        let mut body = String::new();
        for r in rs {
            body.push_str(&r.value.to_string());
            body.push('\n');
        }
        let p = data.join(format!("{split}.jsonl"));
        std::fs::write(&p, &body).map_err(|e| HfError::Io(p.clone(), e))?;
        let values: Vec<Value> = rs.iter().map(|r| r.value.clone()).collect();
        let pq = data.join(format!("{split}.parquet"));
        parquet_out::write(&pq, COLUMNS, &values).map_err(HfError::Parquet)?;
        let pq_bytes = std::fs::metadata(&pq).map(|m| m.len()).unwrap_or(0);
        sizes.insert(split.to_string(), (body.len() as u64, pq_bytes));
        report.files.extend([p, pq]);
        report.splits.insert(
            split.to_string(),
            rs.iter()
                .filter_map(|r| r.value["instance_id"].as_str().map(String::from))
                .collect(),
        );
    }
    let card = crate::card::card(
        &rows,
        &crate::card::CardInfo {
            sizes: &sizes,
            sets,
            digest,
        },
    );
    let p = out.join("README.md");
    std::fs::write(&p, card).map_err(|e| HfError::Io(p.clone(), e))?;
    report.files.push(p);
    Ok(report)
}
