//! `flux gen` on Java (issue 27): JUnit test classes traced by HotSpot's method probes.
//!
//! - The committed set `sets/flux-java-v1` (no Docker): it loads, asks the call-structure kinds
//!   alone, runs its tests through the image's JUnit launcher with the JVM's tracing config, and
//!   `flux export --format traceeval` puts its call graphs under `"java"`, package-qualified,
//!   equal to the gold.
//! - End to end on a small fixture (one test class of commons-codec in its image; the real
//!   binary, Docker, the kernel): the generated instances load, and a re-harvest of one from a
//!   clean container gives its gold. Needs root, eBPF, Docker and the image
//!   (`flux images build commons-codec`); otherwise it says `skipping: …`.
use crate::common;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const IMAGE: &str = "flux/commons-codec:1.15-jdk17";

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

fn index_of(set: &Path) -> Vec<Value> {
    serde_json::from_str(&std::fs::read_to_string(set.join("index.json")).unwrap()).unwrap()
}

/// Every instance of a Java set: loads, S6 or M6, the JVM's config, the JUnit launcher, gold
/// complete and within its template.
fn check_java_instances(set: &Path, index: &[Value]) {
    for r in index {
        let d = set
            .join("instances")
            .join(r["repository"].as_str().unwrap())
            .join(r["id"].as_str().unwrap());
        let inst =
            flux_instance::load_instance(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        let kind = inst.spec.kind.as_str();
        assert!(
            kind == "S6_InterProceduralCFG" || kind == "M6_InterProceduralCFG",
            "{}: {kind}",
            d.display()
        );
        assert!(!inst.spec.tracing.classes.is_empty(), "{}", d.display());
        // A short question against the JVM's preamble, naming its tests by their ids.
        assert_eq!(
            inst.spec.preamble.as_deref(),
            Some("jvm-calls@1"),
            "{}",
            d.display()
        );
        let flat = inst
            .spec
            .question
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(flat.len() <= 1000, "{}: {flat}", d.display());
        assert!(flat.contains("(Java 17)"), "{}: {flat}", d.display());
        for t in flux_gen::discriminate::command_tests(&inst.spec.test.command) {
            assert!(
                flat.contains(&format!("`{t}`")),
                "{}: {t} not in {flat}",
                d.display()
            );
        }
        assert!(
            !inst.spec.tracing.test_methods.is_empty(),
            "{}",
            d.display()
        );
        assert_eq!(
            inst.spec.test.command[0],
            "/usr/local/bin/flux-junit",
            "{}",
            d.display()
        );
        assert!(inst.spec.test.command[1..]
            .iter()
            .all(|a| a.starts_with("--select-method=")));
        let oracle = flux_instance::read_oracle(&d).unwrap();
        assert!(oracle.provenance.complete, "{}", d.display());
        assert_eq!(
            inst.projection.apply(&oracle.oracle_answer).unwrap(),
            oracle.oracle_answer,
            "{}: gold beyond its template",
            d.display()
        );
        inst.template.validate(&oracle.oracle_answer).unwrap();
    }
}

/// The committed Java set loads, and its call graphs export to TraceEval's layout as Java.
#[test]
fn the_committed_java_set_loads_and_exports_its_call_graphs_as_java() {
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets/flux-java-v1");
    let spec = flux_gen::spec::load(&set).expect("sets/flux-java-v1/gen.toml loads");
    assert!(spec.repositories.iter().all(|r| !r.runtime.is_python()));
    let index = index_of(&set);
    assert!(!index.is_empty());
    let dirs = flux_instance::discover(&[set.join("instances")]).unwrap();
    assert_eq!(
        dirs.len(),
        index.len(),
        "index.json and instances/ disagree"
    );
    check_java_instances(&set, &index);
    let out = common::tempdir();
    let o = Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(["export", "--format", "traceeval", "--instances"])
        .arg(set.join("instances"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let splits: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("splits.json")).unwrap()).unwrap();
    assert_eq!(splits["python"], serde_json::json!([]));
    let java: BTreeSet<String> = splits["java"]
        .as_array()
        .expect("a java split")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let graphs: BTreeSet<String> = index
        .iter()
        .filter(|r| {
            let d = set
                .join("instances")
                .join(r["repository"].as_str().unwrap())
                .join(r["id"].as_str().unwrap());
            flux_instance::load_instance(&d)
                .unwrap()
                .spec
                .extractor
                .name
                == "call_graph"
        })
        .map(|r| {
            format!(
                "{}/{}",
                r["repository"].as_str().unwrap(),
                r["id"].as_str().unwrap()
            )
        })
        .collect();
    assert!(!graphs.is_empty(), "no call graph in the set");
    assert_eq!(java, graphs, "the java split is the set's call graphs");
    for rel in &java {
        let exported: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(rel).join("callgraph.json")).unwrap(),
        )
        .unwrap();
        let gold = flux_instance::read_oracle(set.join("instances").join(rel))
            .unwrap()
            .oracle_answer["call_graph"]
            .clone();
        assert_eq!(exported, gold, "{rel}");
        for (caller, callees) in exported.as_object().unwrap() {
            assert!(caller.starts_with("org.apache.commons."), "{rel}: {caller}");
            for c in callees.as_array().unwrap() {
                assert!(
                    c.as_str().unwrap().starts_with("org.apache.commons."),
                    "{rel}: {c}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

const SPEC: &str = r#"
name = "ci-java"
seed = 11

[quotas]
per_module = 8
per_function = 2
targets_per_module = 4
kinds = ["S6_InterProceduralCFG", "M6_InterProceduralCFG"]

[budget]
jobs = 2
modules = 1

[[repository]]
name = "commons-codec"
package = "commons-codec==1.15"
image = "flux/commons-codec:1.15-jdk17"
interpreter = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
root = "/testbed"
code = ["org/apache/commons/codec/"]
not_targets = ["*Test.java", "*TestData.java"]
modules = ["MODULE"]
runtime = { probes = "hotspot", classes = ["org.apache.commons.codec."], tests = "src/test/java/" }
split = "test"
"#;

/// The small fixture: one test class of commons-codec.
const MODULE: &str = "src/test/java/org/apache/commons/codec/language/SoundexTest.java";

fn image_missing() -> Option<String> {
    common::image_missing(IMAGE, "flux images build commons-codec")
}

/// One JUnit test class mined end to end: S6/M6 instances that load, and one re-harvested from
/// a clean container gives its gold.
#[test]
fn gen_mines_a_junit_test_class_and_a_reharvest_reproduces_it() {
    if common::skip("flux gen on a JUnit test class") {
        return;
    }
    if let Some(why) = image_missing() {
        flux_skip::skip("flux gen on a JUnit test class", &why);
        return;
    }
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.flux-cache");
    let tmp = common::tempdir();
    let set = tmp.join("sets/ci-java");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::write(set.join("gen.toml"), SPEC.replace("MODULE", MODULE)).unwrap();
    let s = set.to_str().unwrap();
    let work = tmp.join("work");
    let o = flux(&["gen", s, "--out", work.to_str().unwrap()], &cache);
    assert!(o.status.success());
    let index = index_of(&set);
    assert!(index.len() >= 3, "only {} instances", index.len());
    check_java_instances(&set, &index);
    let first = set
        .join("instances/commons-codec")
        .join(index[0]["id"].as_str().unwrap());
    let o = flux(&["harvest", "--check", first.to_str().unwrap()], &cache);
    assert!(
        o.status.success(),
        "flux harvest --check of {}",
        first.display()
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
