//! Hand-written extractor parameters checked against the target's source at load (issue 24.6):
//! a loop `header` that is no loop line, a `body_end` past the function, a line outside it, a
//! variable it never names, a function not defined are refused before anything runs, naming the
//! instance file, the parameter and the line; without the source on the host the check is
//! skipped with its reason. And every starter agrees with its package source where the cache
//! holds it.
use flux_instance::{check_source, load_instance, SourceCheck};
use std::path::{Path, PathBuf};

/// The target: a loop at line 3 (body 4-6) of `count`, whose last line is 7.
const TARGET: &str = "\
def count(xs, limit):
    total = 0
    for x in xs:
        if x > limit:
            break
        total += x
    return total


def other():
    while True:
        return 1
";

/// An instance `loop-q` of repository `demo` asking about the loop of `count` with `params`
/// (TOML inline table body); `with_source` puts the target beside it.
fn instance(root: &Path, extractor: &str, params: &str, with_source: bool) -> PathBuf {
    let dir = root.join("demo").join("loop-q");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("test_count.py"), "def test_count(): pass\n").unwrap();
    if with_source {
        std::fs::create_dir_all(dir.join("demo")).unwrap();
        std::fs::write(dir.join("demo/counting.py"), TARGET).unwrap();
    }
    let (kind, template) = match extractor {
        "loop_iterations" => ("S2_Loops", r#"{"loop_iteration_count": "int"}"#),
        _ => (
            "S3_ProgramState",
            r#"{"observed_state": [{"variable": "str", "value": "str"}]}"#,
        ),
    };
    let toml = format!(
        r#"id = "loop-q"
repository = "demo"
package = "demo==1.0"
image = "flux/demo:1.0-py3.11"
interpreter = "/usr/bin/python3.11"
kind = "{kind}"
question = "How many?"
template = '{template}'

[test]
files = ["test_count.py"]
command = ["python3.11", "-m", "pytest", "test_count.py"]
expect = "pass"

[tracing]
files = ["demo/counting.py"]

[extractor]
name = "{extractor}"
params = {{ {params} }}
"#
    );
    std::fs::write(dir.join("instance.toml"), toml).unwrap();
    dir
}

fn refused(extractor: &str, params: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = instance(tmp.path(), extractor, params, true);
    match load_instance(&dir) {
        Ok(_) => panic!("{params}: loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_loop_header_that_is_no_loop_line_is_refused_at_load() {
    let e = refused(
        "loop_iterations",
        r#"function = "count", header = 2, body_end = 6"#,
    );
    assert!(e.contains("loop-q/instance.toml:"), "{e}");
    assert!(e.contains("extractor.params.header"), "{e}");
    assert!(e.contains("line 2 (`total = 0`)"), "{e}");
    assert!(e.contains("its loops start at lines 3"), "{e}");
    // The loop of another function is no loop of this one.
    let e = refused(
        "loop_iterations",
        r#"function = "count", header = 11, body_end = 12"#,
    );
    assert!(e.contains("extractor.params.header"), "{e}");
}

#[test]
fn a_body_end_past_the_function_is_refused_at_load() {
    let e = refused(
        "loop_iterations",
        r#"function = "count", header = 3, body_end = 11"#,
    );
    assert!(e.contains("extractor.params.body_end"), "{e}");
    assert!(
        e.contains("line 11 (`while True:`) is not inside `count`"),
        "{e}"
    );
    assert!(e.contains("lines 1-7"), "{e}");
    let e = refused(
        "loop_iterations",
        r#"function = "count", header = 3, body_end = 3"#,
    );
    assert!(
        e.contains("extractor.params.body_end") && e.contains("not after the loop's header"),
        "{e}"
    );
}

#[test]
fn a_variable_the_function_never_names_or_a_function_not_defined_is_refused_at_load() {
    let e = refused(
        "state_at",
        r#"function = "count", line = 6, variables = ["total", "totl"]"#,
    );
    assert!(e.contains("extractor.params.variables"), "{e}");
    assert!(e.contains("`totl` occurs nowhere in `count`"), "{e}");
    let e = refused("loop_iterations", r#"function = "counts", header = 3"#);
    assert!(e.contains("extractor.params.function"), "{e}");
    assert!(e.contains("no function `counts`"), "{e}");
}

#[test]
fn parameters_that_agree_with_the_source_load_and_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    for (ex, params) in [
        (
            "loop_iterations",
            r#"function = "count", header = 3, body_end = 6"#,
        ),
        (
            "state_at",
            r#"function = "count", line = 6, variables = ["limit", "x"]"#,
        ),
    ] {
        let dir = instance(tmp.path(), ex, params, true);
        let inst = load_instance(&dir).unwrap_or_else(|e| panic!("{params}: {e}"));
        assert!(
            matches!(check_source(&inst, &[]), Ok(SourceCheck::Checked { .. })),
            "{params}"
        );
    }
}

#[test]
fn without_the_source_on_the_host_the_check_is_skipped_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = instance(
        tmp.path(),
        "loop_iterations",
        r#"function = "count", header = 2"#,
        false,
    );
    let inst = load_instance(&dir).expect("no source: nothing to refuse");
    match check_source(&inst, &[tmp.path().join("nowhere")]) {
        Ok(SourceCheck::Skipped { reason }) => {
            assert!(reason.contains("demo/counting.py") && reason.contains("not on the host"));
            assert!(reason.contains("nowhere"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Found under a source root (a `src/` layout): checked, and refused.
    let root = tmp.path().join("pkg");
    std::fs::create_dir_all(root.join("src/demo")).unwrap();
    std::fs::write(root.join("src/demo/counting.py"), TARGET).unwrap();
    let e = check_source(&inst, &[root]).unwrap_err().to_string();
    assert!(
        e.contains("instance.toml:") && e.contains("extractor.params.header"),
        "{e}"
    );
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Every committed starter (`instances/`) and every instance of the committed set
/// (`sets/flux-gen-v1/instances`) loads and agrees with its package's source where the cache
/// (`$FLUX_CACHE`, else the workspace's `.flux-cache`) holds it.
#[test]
fn committed_instances_agree_with_their_source() {
    let ws = workspace();
    let cache = std::env::var_os("FLUX_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.join(".flux-cache"));
    let mut errors = Vec::new();
    let mut checked_all = 0;
    for root in ["instances", "sets/flux-gen-v1/instances"] {
        let (mut checked, mut skipped, mut nothing) = (0, 0, 0);
        let mut no_source = std::collections::BTreeSet::new();
        let dirs = flux_instance::discover(&[ws.join(root)]).expect("discover");
        for dir in dirs {
            let inst = match load_instance(&dir) {
                Ok(i) => i,
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            };
            let src = inst
                .spec
                .package
                .split_once("==")
                .map(|(n, v)| cache.join("src").join(format!("{n}-{v}")));
            match check_source(&inst, &src.into_iter().collect::<Vec<_>>()) {
                Ok(SourceCheck::Checked { .. }) => checked += 1,
                Ok(SourceCheck::Nothing) => nothing += 1,
                Ok(SourceCheck::Skipped { .. }) => {
                    skipped += 1;
                    no_source.insert(inst.spec.package.clone());
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        eprintln!(
            "{root}: {checked} checked against their source, {nothing} with nothing to check, \
             {skipped} skipped (no source for {no_source:?})"
        );
        checked_all += checked;
    }
    assert!(errors.is_empty(), "refused:\n{}", errors.join("\n"));
    if checked_all == 0 {
        flux_skip::skip(
            "committed instances against their source",
            &format!(
                "no package source under {}/src (`flux images build` unpacks it)",
                cache.display()
            ),
        );
    }
}
