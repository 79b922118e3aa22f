//! `flux gen` end to end on a small sample (two modules of SymPy's own test suite in the
//! `flux/sympy:1.13.3-py3.11` image): the real binary, Docker, the kernel.
//!
//! What it proves: generation in two shards and a merge writes a set of screened instances
//! that load, cover several kinds and carry difficulty features; an unsharded regeneration
//! (`--check`, a fresh output directory: every run made again) finds the very same set, so
//! shards merge into exactly what one run makes and the spec regenerates the set byte for byte
//! (save the two provenance fields that name the run); `flux stats --json` describes it; and
//! `flux harvest --check` reproduces a sample from clean containers.
//!
//! Needs root (eBPF), a uprobe-capable kernel, a Docker daemon and the image; otherwise it
//! says `skipping: …`.
use crate::common;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const IMAGE: &str = "flux/sympy:1.13.3-py3.11";

/// Two SymPy modules on 3.11 (also the k8s Job simulation's set).
pub(crate) const SPEC: &str = r#"
name = "ci-sample"
seed = 3

[quotas]
per_module = 10
targets_per_module = 8
per_function = 3

[budget]
jobs = 2
modules = 2

# The third witness on a seeded sample (issue 23.1): every exceptions question, a third of the
# others.
[witness]
sample = 0.3
kinds = { M5_Exceptions = 1.0, S5_Exceptions = 1.0 }

[[repository]]
name = "sympy"
package = "sympy==1.13.3"
image = "flux/sympy:1.13.3-py3.11"
interpreter = "/usr/bin/python3.11"
root = "/testbed"
code = ["sympy/"]
modules = ["sympy/ntheory/tests/test_modular.py", "sympy/core/tests/test_facts.py"]
split = "test"
"#;

pub(crate) fn image_missing() -> Option<String> {
    common::image_missing(IMAGE, "cargo xtask setup builds it")
}

fn flux(args: &[&str], cache: &Path) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(args)
        .env("FLUX_CACHE", cache)
        .output()
        .expect("run flux");
    eprintln!(
        "flux {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn gen_in_shards_merges_into_the_set_one_run_regenerates() {
    if common::skip("flux gen end to end") {
        return;
    }
    if let Some(why) = image_missing() {
        flux_skip::skip("flux gen end to end", &why);
        return;
    }
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.flux-cache");
    let tmp = common::tempdir();
    let set = tmp.join("sets/ci-sample");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::write(set.join("gen.toml"), SPEC).unwrap();
    let (s, w1, w2) = (set.to_str().unwrap(), tmp.join("work1"), tmp.join("work2"));
    for shard in ["1/2", "2/2"] {
        let o = flux(
            &["gen", s, "--shard", shard, "--out", w1.to_str().unwrap()],
            &cache,
        );
        assert!(o.status.success(), "shard {shard}");
    }
    assert!(
        !set.join("instances").exists(),
        "a shard does not write the set"
    );
    let o = flux(
        &["gen", s, "--merge", "--out", w1.to_str().unwrap()],
        &cache,
    );
    assert!(o.status.success());
    let index: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(set.join("index.json")).unwrap()).unwrap();
    assert!(index.len() >= 8, "only {} instances", index.len());
    let kinds: std::collections::BTreeSet<&str> =
        index.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert!(kinds.len() >= 5, "kinds: {kinds:?}");
    for r in &index {
        assert!(r["difficulty"]["calls"].as_u64().unwrap() > 0, "{r}");
    }
    // Every instance loads as flux harvest loads it; its test is in the image, not copied.
    for r in &index {
        let d = set.join("instances/sympy").join(r["id"].as_str().unwrap());
        let inst = flux_instance::load_instance(&d).unwrap();
        assert!(inst.spec.test.files.is_empty());
        assert!(inst.spec.test.image_files[0].starts_with("/testbed/"));
        assert_eq!(inst.spec.tracing.scope, flux_trace::Scope::Targets);
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // Its gold names the image's content identity, as a hand-written harvest's does
        // (generated gold carried an empty one).
        let oracle = flux_instance::read_oracle(&d).unwrap();
        assert!(
            oracle.provenance.image_identity.starts_with("flux-id:"),
            "{}: image_identity {:?}",
            d.display(),
            oracle.provenance.image_identity
        );
    }
    // One unsharded run, from scratch, regenerates the same set.
    let o = flux(
        &["gen", s, "--check", "--out", w2.to_str().unwrap()],
        &cache,
    );
    assert!(
        o.status.success(),
        "the regeneration differs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // flux stats describes it.
    let o = flux(
        &["stats", "--json", set.join("instances").to_str().unwrap()],
        &cache,
    );
    assert!(o.status.success());
    let st: Value = serde_json::from_slice(&o.stdout).unwrap();
    // The witness's seeded sample: what it agreed with says so in the index, the oracle and the
    // stats; every exceptions question was asked (an M5/S5 kept unwitnessed would be a bug).
    let witnessed: Vec<&Value> = index
        .iter()
        .filter(|r| r["witness"] == "reference")
        .collect();
    assert!(!witnessed.is_empty(), "no instance witnessed");
    for r in &index {
        let d = set.join("instances/sympy").join(r["id"].as_str().unwrap());
        let w = flux_instance::read_oracle(&d).unwrap().provenance.witness;
        assert_eq!(w.is_some(), r["witness"] == "reference", "{r}");
        if r["kind"] == "M5_Exceptions" || r["kind"] == "S5_Exceptions" {
            assert!(w.is_some(), "{r}: an exceptions question not witnessed");
        }
    }
    let counted: u64 = st["witnessed"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(counted as usize, witnessed.len());
    assert_eq!(st["instances"].as_u64().unwrap() as usize, index.len());
    assert_eq!(
        st["repositories"]["sympy"].as_u64().unwrap() as usize,
        index.len()
    );
    assert!(st["median"]["calls"].as_f64().unwrap() > 0.0);
    assert!(st["by_kind"].as_object().unwrap().len() >= 5);
    // A sample re-harvested from clean containers gives the stored gold.
    let sample: Vec<String> = index
        .iter()
        .step_by((index.len() / 3).max(1))
        .take(3)
        .map(|r| {
            set.join("instances/sympy")
                .join(r["id"].as_str().unwrap())
                .display()
                .to_string()
        })
        .collect();
    let mut args = vec!["harvest", "--check"];
    args.extend(sample.iter().map(String::as_str));
    let o = flux(&args, &cache);
    assert!(o.status.success(), "flux harvest --check of a sample");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The committed set (no Docker needed): its spec loads, every instance in `index.json` is in
/// `instances/` and loads as `flux harvest` loads it, refers to its test in the image (nothing
/// copied), carries a gold answer; `flux stats --json` counts the same instances and every
/// repository of the spec.
#[test]
fn the_committed_set_loads_and_flux_stats_describes_it() {
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets/flux-gen-v1");
    let spec = flux_gen::spec::load(&set).expect("sets/flux-gen-v1/gen.toml loads");
    let index: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(set.join("index.json")).unwrap()).unwrap();
    assert!(!index.is_empty());
    let dirs = flux_instance::discover(&[set.join("instances")]).unwrap();
    assert_eq!(
        dirs.len(),
        index.len(),
        "index.json and instances/ disagree"
    );
    for r in &index {
        let d = set
            .join("instances")
            .join(r["repository"].as_str().unwrap())
            .join(r["id"].as_str().unwrap());
        let inst =
            flux_instance::load_instance(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        assert!(inst.spec.test.files.is_empty(), "{}", d.display());
        assert!(!inst.spec.test.image_files.is_empty(), "{}", d.display());
        let oracle = flux_instance::read_oracle(&d).unwrap();
        assert!(oracle.provenance.complete, "{}", d.display());
        // The gold is what a harvest of the instance writes: the extractor's output cut to the
        // template (generated gold carried fields no template asks for, so an answer in the
        // template's shape could never match), and the image's content identity.
        let cut = inst.projection.apply(&oracle.oracle_answer).unwrap();
        assert_eq!(
            cut,
            oracle.oracle_answer,
            "{}: gold beyond its template",
            d.display()
        );
        inst.template.validate(&oracle.oracle_answer).unwrap();
        assert!(
            oracle.provenance.image_identity.starts_with("flux-id:"),
            "{}: no image identity",
            d.display()
        );
        assert_eq!(inst.spec.generated.as_ref().unwrap().set, spec.name);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(["stats", "--json"])
        .arg(set.join("instances"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let st: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(st["instances"].as_u64().unwrap() as usize, index.len());
    let repos = st["repositories"].as_object().unwrap();
    for r in &spec.repositories {
        assert!(repos.contains_key(&r.name), "no instance of {}", r.name);
    }
    // Short questions (issue 24.2) and the screens' drops (issue 24.3), none of them still in
    // the set.
    assert!(
        st["question_chars_median"].as_f64().unwrap() <= 450.0,
        "{st}"
    );
    assert_eq!(st["questions_over_max"], 0, "{st}");
    let screened: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(set.join("screened.json")).unwrap()).unwrap();
    let counted: u64 = st["screened"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(counted as usize, screened.len());
    for d in &screened {
        assert!(
            !index.iter().any(|r| r["id"] == d["id"]),
            "{} was screened out and is in the set",
            d["id"]
        );
    }
    assert!(st["degenerate_percent"].as_f64().unwrap() <= 5.0, "{st}");
}

/// The committed set is what `flux gen --reauthor` writes: re-authoring it again (no source in
/// the cache: the static baseline's verdicts are kept and `echoed-literal` is not asked)
/// changes no byte of any instance, index or record.
#[test]
fn reauthoring_the_committed_set_changes_nothing() {
    reauthoring_changes_nothing("flux-gen-v1");
}

/// The Java set too: its questions are the JVM's (`jvm-calls` preamble, JUnit test ids), read
/// back from the instance alone.
#[test]
fn reauthoring_the_committed_java_set_changes_nothing() {
    reauthoring_changes_nothing("flux-java-v1");
}

/// `sets/<name>` copied and re-authored: no byte of it changes.
fn reauthoring_changes_nothing(name: &str) {
    let set = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sets")
        .join(name);
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join(name);
    let files = |root: &Path| -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if !p.to_string_lossy().ends_with(".lock") {
                    // (A gen's lock file, `.gen.lock`, holds no part of the set.)
                    let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    };
    let before = files(&set);
    for (rel, bytes) in &before {
        let p = copy.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    let out = flux(
        &["gen", copy.to_str().unwrap(), "--reauthor"],
        &tmp.path().join("cache"),
    );
    assert!(out.status.success());
    let after = files(&copy);
    let changed: Vec<&String> = before
        .iter()
        .zip(&after)
        .filter(|(a, b)| a != b)
        .map(|(a, _)| &a.0)
        .collect();
    assert_eq!(before.len(), after.len());
    assert!(changed.is_empty(), "changed: {changed:?}");
}

/// The static baseline marked nothing easy in the whole set: it had no source to read. Its
/// root was looked up as the code's *directory* in the image's layers, which resolve regular
/// files only, so there was none. The root is now the layer of the code's `__init__.py`, and
/// holds the package's modules.
#[test]
fn the_static_baseline_reads_the_source_tree_of_the_image() {
    if let Some(why) = image_missing() {
        flux_skip::skip("the static baseline's source", &why);
        return;
    }
    let tmp = common::tempdir();
    let spec = flux_gen::spec::parse(SPEC, Path::new("gen.toml")).unwrap();
    let repo = &spec.repositories[0];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let root = rt.block_on(async {
        let runner =
            flux_gen::runner::Runner::connect(flux_harvest::HarvestOptions::new(tmp.clone()))
                .await
                .unwrap();
        flux_gen::screen::source_root(&runner, repo).await
    });
    let root = root.expect("a source root in the image");
    for f in ["sympy/core/add.py", "sympy/ntheory/modular.py"] {
        assert!(root.join(f).is_file(), "{} lacks {f}", root.display());
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Copy the committed set's flask instances `range` (in id order) under `root/flask/`.
fn flask_instances(root: &Path, range: std::ops::Range<usize>) -> Vec<std::path::PathBuf> {
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets/flux-gen-v1/instances/flask");
    let src = flux_instance::discover(&[set]).unwrap();
    src[range]
        .iter()
        .map(|d| {
            let to = root.join("flask").join(d.file_name().unwrap());
            std::fs::create_dir_all(&to).unwrap();
            for f in [flux_instance::INSTANCE_FILE, flux_instance::ORACLE_FILE] {
                std::fs::copy(d.join(f), to.join(f)).unwrap();
            }
            to
        })
        .collect()
}

/// A tiny set of two releases of flask (3.1.2 archived as `<id>@3.1.2`, 3.1.3 current):
/// `flux eval` and `flux score --released-after` ask and score only the newer release's
/// instances, and the results file records the filter; a malformed day is an error.
#[test]
fn released_after_keeps_only_the_newer_release() {
    let t = tempfile::tempdir().unwrap();
    let set = t.path().join("set");
    let root = set.join("instances");
    // The older release: two instances, archived and dated as `flux gen --release` leaves them.
    flask_instances(&root, 0..2);
    let a = flux_gen::release::archive(&set, &t.path().join("out"), "flask", "3.1.2").unwrap();
    assert_eq!(a.moved.len(), 2);
    flux_gen::release::date_archived(&a, "3.1.2", "2025-05-13T16:32:18Z", "given").unwrap();
    // The newer release: dated after the cutoff.
    let new = flask_instances(&root, 2..3).remove(0);
    let toml = new.join(flux_instance::INSTANCE_FILE);
    let text = std::fs::read_to_string(&toml).unwrap()
        + "\n[generated.release]\nversion = \"3.1.3\"\ndate = \"2025-08-19T19:34:51Z\"\nsource = \
           \"given\"\nprevious = \"3.1.2\"\ntarget = \"unchanged\"\n";
    std::fs::write(&toml, text).unwrap();
    flux_instance::load_instance(&new).unwrap();
    let (r, ans) = (root.to_str().unwrap(), t.path().join("answers"));
    let cache = t.path().join("cache");
    let out = flux(
        &[
            "eval",
            "--model",
            "oracle",
            "--quiet",
            "--no-source",
            "--instances",
            r,
            "--released-after",
            "2025-06-30",
            "--out",
            ans.to_str().unwrap(),
        ],
        &cache,
    );
    assert!(out.status.success());
    let answered: Vec<String> = std::fs::read_dir(ans.join("flask"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(answered, [new.file_name().unwrap().to_string_lossy()]);
    let score = |after: &str| {
        flux(
            &[
                "score",
                "--answers",
                ans.to_str().unwrap(),
                "--instances",
                r,
                "--released-after",
                after,
                "--format",
                "json",
                "--allow-unmatched",
            ],
            &cache,
        )
    };
    let out = score("2025-06-30");
    assert!(out.status.success());
    let res: Value =
        serde_json::from_str(&std::fs::read_to_string(ans.join("results.json")).unwrap()).unwrap();
    assert_eq!(res["selection"]["released_after"], "2025-06-30", "{res}");
    assert_eq!(res["set"]["instances"], 1, "{res}");
    assert_eq!(
        (&res["runs"][0]["total"], &res["runs"][0]["passed"]),
        (&Value::from(1), &Value::from(1)),
        "{res}"
    );
    // A cutoff before both releases selects all three (two of them unanswered).
    let out = score("2025-01-01");
    assert!(out.status.success());
    let res: Value =
        serde_json::from_str(&std::fs::read_to_string(ans.join("results.json")).unwrap()).unwrap();
    assert_eq!(res["set"]["instances"], 3, "{res}");
    assert_eq!(res["runs"][0]["passed"], 1, "{res}");
    // After both: nothing to score, an error naming the selection; a malformed day likewise.
    let out = score("2025-09-01");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("released after 2025-09-01"));
    let out = score("2025-9-1");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--released-after \"2025-9-1\""));
}

/// `flux gen --release` checks before it changes anything, and a generation that fails (here:
/// no image of the new release, or no Docker) puts gen.toml and the old release's instances
/// back byte for byte.
#[test]
fn a_failed_release_leaves_the_set_as_it_was() {
    let t = tempfile::tempdir().unwrap();
    let set = t.path().join("set");
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets/flux-gen-v1");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::copy(committed.join("gen.toml"), set.join("gen.toml")).unwrap();
    flask_instances(&set.join("instances"), 0..2);
    let snapshot = |root: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = flux_instance::discover(&[root.join("instances")])
            .unwrap()
            .iter()
            .flat_map(|d| {
                [flux_instance::INSTANCE_FILE, flux_instance::ORACLE_FILE].map(|f| {
                    (
                        d.join(f).display().to_string(),
                        std::fs::read(d.join(f)).unwrap(),
                    )
                })
            })
            .collect();
        v.push((
            "gen.toml".into(),
            std::fs::read(root.join("gen.toml")).unwrap(),
        ));
        v
    };
    let before = snapshot(&set);
    let s = set.to_str().unwrap();
    let cache = t.path().join("cache");
    for (args, says) in [
        (vec!["--release", "flask=3.1.3"], "at 3.1.3 already"),
        (vec!["--release", "nope=1.0"], "has no repository `nope`"),
        (vec!["--release", "flask"], "expected NAME=VERSION"),
        (
            vec!["--release", "flask=99.0.0", "--released", "yesterday"],
            "--released \"yesterday\"",
        ),
        // Checked, archived, gen.toml written; the generation cannot run (no such image).
        (
            vec!["--release", "flask=99.0.0", "--released", "2030-01-01"],
            "put back",
        ),
    ] {
        let out = flux(&[&["gen", s][..], &args[..]].concat(), &cache);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(snapshot(&set) == before, "{args:?} changed the set");
    }
}
