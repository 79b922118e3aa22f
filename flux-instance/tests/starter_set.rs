//! The starter set under `instances/`: every instance directory loads and validates, every
//! question kind has at least two instances from at least two repositories, and enough of them
//! run on python3.15 that both tracing paths feed gold answers.
use flux_extract::QuestionKind;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn instances_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("instances")
}

#[test]
fn every_instance_loads_and_each_kind_has_two() {
    let root = instances_root();
    let dirs = flux_instance::discover(&[&root]).expect("discover instances");
    let mut errors = Vec::new();
    let mut per_kind: BTreeMap<QuestionKind, Vec<String>> = BTreeMap::new();
    let mut kind_repos: BTreeMap<QuestionKind, BTreeSet<String>> = BTreeMap::new();
    let mut py315 = 0;
    let mut per_repo: BTreeMap<String, usize> = BTreeMap::new();
    for dir in &dirs {
        match flux_instance::load_instance(dir) {
            Ok(inst) => {
                per_kind
                    .entry(inst.kind())
                    .or_default()
                    .push(inst.id().to_string());
                *per_repo.entry(inst.spec.repository.clone()).or_default() += 1;
                kind_repos
                    .entry(inst.kind())
                    .or_default()
                    .insert(inst.spec.repository.clone());
                if inst.spec.interpreter.ends_with("python3.15") {
                    py315 += 1;
                }
                // A JVM instance targets classes (`[tracing] classes`), a Python one files.
                assert!(
                    !inst.spec.tracing.files.is_empty() || !inst.spec.tracing.classes.is_empty(),
                    "{}: [tracing] files (or classes) must target the code under test",
                    inst.id()
                );
                for f in inst.test_files() {
                    assert!(
                        f.is_file(),
                        "{}: missing test file {}",
                        inst.id(),
                        f.display()
                    );
                }
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert!(
        errors.is_empty(),
        "instances that do not load:\n{}",
        errors.join("\n")
    );
    assert!(
        dirs.len() >= 30,
        "expected at least 30 instances, found {}",
        dirs.len()
    );
    for k in QuestionKind::ALL {
        let n = per_kind.get(&k).map_or(0, Vec::len);
        assert!(
            n >= 2,
            "kind {k} has {n} instance(s), expected at least 2: {per_kind:?}"
        );
        let repos = kind_repos.get(&k).map_or(0, BTreeSet::len);
        assert!(
            repos >= 2,
            "kind {k} is covered by {repos} repository(ies), expected 2: {kind_repos:?}"
        );
    }
    assert!(
        py315 >= 6,
        "expected at least 6 instances on python3.15, found {py315}"
    );
    assert!(
        per_repo.len() >= 3,
        "expected at least 3 repositories: {per_repo:?}"
    );
}

/// Every starter instance carries a harvested gold answer that belongs to it: from a complete
/// trace in its image (not a host run labelled "not reproducible"), answering its current
/// question, template and extractor, in the template's shape, with its call graph.
#[test]
fn every_instance_has_a_reproducible_gold_answer_of_its_own() {
    let root = instances_root();
    let dirs = flux_instance::discover(&[&root]).expect("discover instances");
    let mut problems = Vec::new();
    for dir in &dirs {
        let inst = flux_instance::load_instance(dir).expect("loads (checked above)");
        let id = inst.id().to_string();
        let o = match flux_instance::read_oracle(dir) {
            Ok(o) => o,
            Err(e) => {
                problems.push(format!("{id}: {e}"));
                continue;
            }
        };
        let p = &o.provenance;
        let mut bad = |what: String| problems.push(format!("{id}: {what}"));
        if o.question_kind != inst.kind() {
            bad(format!(
                "kind {} in oracle.json, {} in instance.toml",
                o.question_kind,
                inst.kind()
            ));
        }
        if o.question != inst.spec.question {
            bad("the question changed since the harvest (harvest again with --replace)".into());
        }
        if p.extractor != inst.spec.extractor.name || p.params != inst.spec.extractor.params {
            bad("the extractor or its parameters changed since the harvest".into());
        }
        if let Err(e) = inst.template.validate(&o.oracle_answer) {
            bad(format!("the gold answer does not fit the template: {e}"));
        }
        if !p.complete || !p.labels.is_empty() {
            bad(format!(
                "not from a complete, reproducible trace: labels {:?}",
                p.labels
            ));
        }
        if p.image != inst.spec.image || !p.image_id.starts_with("sha256:") {
            bad(format!(
                "image {} ({}), expected {}",
                p.image, p.image_id, inst.spec.image
            ));
        }
        if p.trace_sha256.len() != 64 {
            bad("no trace digest".into());
        }
        if let Err(e) = flux_instance::read_call_graph(dir) {
            bad(format!("call graph: {e}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
