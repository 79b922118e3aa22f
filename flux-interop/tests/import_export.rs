//! Import of instances in SWE-Flux's layout (fixtures written for these tests in
//! `tests/fixtures/store/`, never their files), and the round trip through SWE-Flux's layout
//! of a real starter instance: `import(export(x)) == x`.
use flux_instance::export::{export, ExportFormat};
use flux_interop::import::{
    discover, import, order_insensitive, package_from_image, ImportOptions,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store")
}

fn opts(out: &Path) -> ImportOptions {
    ImportOptions {
        repository: "sympy".into(),
        image: "flux/sympy:1.13.3-py3.11".into(),
        interpreter: "/usr/bin/python3.11".into(),
        package: None,
        out: out.to_path_buf(),
        replace: false,
        timeout_s: 600,
        image_packages: Some(vec!["pytest==9.0.2".into(), "pytest-timeout==2.4.0".into()]),
    }
}

#[test]
fn their_instances_are_found_and_the_screened_out_left_alone() {
    let found = discover(&[fixtures()]).unwrap();
    let names: Vec<String> = found
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "factor_multiplicity_m5_exceptions",
            "factor_untraced_s2_loops"
        ]
    );
    assert!(discover(&[fixtures().join("nope")])
        .unwrap_err()
        .contains("no such directory"));
}

#[test]
fn an_instance_in_their_layout_becomes_a_flux_instance_answered_by_their_parser() {
    let out = tempfile::tempdir().unwrap();
    let found = discover(&[fixtures()]).unwrap();
    let report = import(&found, &opts(out.path()));
    assert_eq!(report.imported.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors.len(), 1);
    assert!(
        report.errors[0].1.contains("TRACE_ON=1"),
        "{:?}",
        report.errors
    );
    // Their `crashing_tests`/`safe_tests`/`invocation_counts` shape has no native mapping:
    // said, and no native instance written.
    let why = report.imported[0].native.as_ref().unwrap_err();
    assert!(
        why.contains("no flux extractor is mapped for the answer shape `crashing_tests+invocation_counts+safe_tests`"),
        "{why}"
    );
    assert!(!out
        .path()
        .join("sympy/factor_multiplicity_m5_exceptions-native")
        .exists());
    let dir = out.path().join("sympy/factor_multiplicity_m5_exceptions");
    assert_eq!(report.imported[0].dir.as_ref(), Ok(&dir));
    let inst = flux_instance::load_instance(&dir).unwrap();
    let s = &inst.spec;
    assert_eq!(s.package, "sympy==1.13.3");
    assert_eq!(s.kind.as_str(), "M5_Exceptions");
    assert!(s.question.starts_with("Run the two tests"));
    let template: Value = serde_json::from_str(&s.template).unwrap();
    assert_eq!(template["crashing_tests"], json!(["str"]));
    assert_eq!(
        s.order_insensitive,
        ["/crashing_tests", "/safe_tests"],
        "their set-like keys"
    );
    assert_eq!(
        s.test.command,
        [
            "/usr/bin/python3.11",
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-o",
            "timeout=0",
            "-rA",
            "-s",
            "sympy_qa/factor_multiplicity_m5_exceptions/files/testcase.py::TestMultiplicity"
        ]
    );
    assert_eq!(s.test.files, ["testcase.py"]);
    let layout = s.test.layout.as_ref().expect("their harness's layout");
    assert_eq!(
        (layout.workdir.as_str(), layout.files_at.as_str()),
        (
            "/tmp",
            "/tmp/sympy_qa/factor_multiplicity_m5_exceptions/files"
        )
    );
    assert_eq!(s.tracing.module_functions, ["multiplicity"]);
    assert_eq!(s.tracing.files, ["*sympy/ntheory/factor_.py*"]);
    assert_eq!(s.tracing.dialect, flux_trace::Dialect::SweFlux);
    assert_eq!(s.tracing.limits.repr, 500);
    let ext = inst.external_parser().expect("answered by their parser");
    assert_eq!(ext.parser, "parser.py");
    assert_eq!(ext.root, "/tmp");
    assert_eq!(
        ext.qa_dir,
        "sympy_qa/factor_multiplicity_m5_exceptions/files"
    );
    assert!(ext
        .log
        .contains(&("TRACE_FUNC".into(), "multiplicity".into())));
    // Its eval.sh passes `--pytest-log "$PYTEST_LOG"`, the file pytest's output is teed to.
    assert_eq!(ext.pytest_output.as_deref(), Some("--pytest-log"));
    assert!(dir.join("parser.py").is_file() && dir.join("testcase.py").is_file());
    assert!(dir.join("swe-flux/eval.sh").is_file());
    let theirs = flux_instance::external::read_reference(&dir)
        .unwrap()
        .unwrap();
    assert_eq!(theirs["invocation_counts"], json!([4, 4]));
    assert!(
        !dir.join("oracle.json").exists(),
        "no gold is written by an import"
    );
    assert!(
        inst.extract(&flux_trace::Trace::default()).is_err(),
        "not an in-process extractor"
    );
    // --check against their answer, under their rules: set-like lists in any order pass, a
    // wrong count fails with its path.
    let mut fresh = theirs.clone();
    fresh["crashing_tests"] = json!(["x"]);
    let err = flux_interop::external::check_reference(&inst, &fresh).unwrap_err();
    assert!(err.to_string().contains("crashing_tests"), "{err}");
    assert!(flux_interop::external::check_reference(&inst, &theirs)
        .unwrap()
        .is_some());
    let mut two = theirs.clone();
    two["invocation_counts"] = json!([4, 5]);
    assert!(flux_interop::external::check_reference(&inst, &two).is_err());
    // An instance directory is never replaced unless asked.
    let again = import(&found[..1], &opts(out.path()));
    assert!(again.errors[0].1.contains("exists"), "{:?}", again.errors);
    let mut replace = opts(out.path());
    replace.replace = true;
    assert_eq!(import(&found[..1], &replace).imported.len(), 1);
    assert!(
        !std::fs::read_dir(out.path()).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".flux-import")),
        "no scratch left behind"
    );
}

/// Issue 25: `flux import` appended `-o timeout=0` to every command; in an image without
/// pytest-timeout whose config has `filterwarnings = error`, pytest 9 stops with an
/// INTERNALERROR (`PytestConfigWarning: Unknown config option: timeout`) before any test runs.
#[test]
fn an_image_without_pytest_timeout_gets_no_timeout_option() {
    let found = discover(&[fixtures()]).unwrap();
    let command = |packages: Option<Vec<String>>| {
        let out = tempfile::tempdir().unwrap();
        let mut o = opts(out.path());
        o.image_packages = packages;
        let r = import(&found, &o);
        let dir = r.imported[0].dir.clone().unwrap();
        flux_instance::load_instance(&dir)
            .unwrap()
            .spec
            .test
            .command
    };
    let without = command(Some(vec![
        "pytest==9.0.2".into(),
        "Pytest_Timeouts==1".into(),
    ]));
    assert!(
        !without.iter().any(|a| a.contains("timeout")),
        "{without:?}"
    );
    assert!(
        without.contains(&"no:cacheprovider".to_string()),
        "{without:?}"
    );
    let unknown = command(None);
    assert!(
        !unknown.iter().any(|a| a.contains("timeout")),
        "{unknown:?}"
    );
    let with = command(Some(vec!["PyTest_Timeout==2.4.0".into()]));
    assert!(
        with.windows(2).any(|w| w == ["-o", "timeout=0"]),
        "{with:?}"
    );
}

/// Issue 25: an instance their store keeps without `files/parser.py` was refused whole, so its
/// native twin was never checked.
#[test]
fn an_instance_without_parser_py_still_gets_its_native_twin() {
    let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-noparser");
    let out = tempfile::tempdir().unwrap();
    let found = discover(&[store]).unwrap();
    assert_eq!(found.len(), 1);
    let r = import(&found, &opts(out.path()));
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let i = &r.imported[0];
    let why = i.dir.as_ref().unwrap_err();
    assert!(why.contains("files/parser.py"), "{why}");
    assert!(!out
        .path()
        .join("sympy/factor_caught_s5_exceptions")
        .exists());
    let native = i.native.as_ref().expect("the native twin is written");
    let inst = flux_instance::load_instance(native).unwrap();
    assert_eq!(inst.spec.extractor.name, "caught_types");
    assert_eq!(inst.spec.kind.as_str(), "S5_Exceptions");
    assert!(native.join("testcase.py").is_file());
    assert!(flux_instance::external::read_reference(native)
        .unwrap()
        .is_some());
}

#[test]
fn helpers_package_pins_and_order_insensitive_paths() {
    assert_eq!(
        package_from_image("flux/flask:3.2.0.dev0-py3.11").as_deref(),
        Some("flask==3.2.0.dev0")
    );
    assert_eq!(package_from_image("nothing"), None);
    let t = json!({"covered_lines": ["int"], "calls": [{"unique_values": ["str"], "seq": ["int"]}],
                   "executed_path": [{"line": "int"}]});
    assert_eq!(
        order_insensitive(&t),
        ["/calls/*/unique_values", "/covered_lines"]
    );
}

/// Copy a directory tree (the starter instance, into a scratch instance root).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (s, d) = (e.path(), to.join(e.file_name()));
        if s.is_dir() {
            copy_dir(&s, &d);
        } else {
            std::fs::copy(&s, &d).unwrap();
        }
    }
}

fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    fn walk(root: &Path, d: &Path, v: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, v);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                v.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    walk(dir, dir, &mut v);
    v.sort();
    v
}

#[test]
fn export_to_their_layout_renames_the_test_and_import_gives_the_instance_back() {
    let starter =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../instances/sympy/sympy-multiplicity-raising");
    let work = tempfile::tempdir().unwrap();
    let x = work
        .path()
        .join("instances/sympy/sympy-multiplicity-raising");
    copy_dir(&starter, &x);
    let out = work.path().join("swe-flux");
    let r = export(ExportFormat::SweFlux, std::slice::from_ref(&x), &out);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.exported, ["sympy_qa/sympy-multiplicity-raising"]);
    let e = out.join("sympy_qa/sympy-multiplicity-raising");
    let theirs: Value =
        serde_json::from_str(&std::fs::read_to_string(e.join("oracle.json")).unwrap()).unwrap();
    let keys: Vec<&String> = theirs.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 4, "their four keys: {keys:?}");
    // The test ids follow the rename, as pytest names them when eval.sh runs the test.
    let new = "sympy_qa/sympy-multiplicity-raising/files/testcase.py";
    assert_eq!(
        theirs["oracle_answer"]["crashing_tests"],
        json!([
            format!("{new}::test_zero_argument"),
            format!("{new}::test_float_base")
        ])
    );
    let q = theirs["question"].as_str().unwrap();
    assert!(q.starts_with(&format!("Running {new} (five tests)")), "{q}");
    assert!(q.contains(&format!("`{new}::test_integers`")), "{q}");
    assert!(!q.contains(" test_multiplicity.py"), "{q}");
    let eval = std::fs::read_to_string(e.join("eval.sh")).unwrap();
    assert!(eval.contains(&format!("TEST_ID={new}\n")), "{eval}");
    assert!(
        eval.contains("export TRACE_FILE=sympy/ntheory/factor_.py\n"),
        "{eval}"
    );
    assert!(
        eval.contains(&format!("-p no:cacheprovider {new}\n")),
        "{eval}"
    );
    assert_eq!(
        std::fs::read(e.join("files/testcase.py")).unwrap(),
        std::fs::read(x.join("test_multiplicity.py")).unwrap()
    );
    // Their eval.sh reads as their skeleton does (it runs no parser: flux harvests the gold).
    let back = work.path().join("back");
    let found = discover(std::slice::from_ref(&out)).unwrap();
    assert_eq!(found, std::slice::from_ref(&e));
    let report = import(&found, &opts(&back));
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let y = back.join("sympy/sympy-multiplicity-raising");
    assert_eq!(
        files_of(&y),
        files_of(&x),
        "import(export(x)) == x, file for file"
    );
    let provenance = flux_instance::read_oracle(&y).unwrap().provenance;
    assert_eq!(provenance.extractor, "raising_tests", "provenance kept");
}

/// Issue 25: their kedro and haystack runs used Python 3.9 (their test's `__pycache__` says
/// `cpython-39`), whose tracer names frames by `co_name`; the import carries that to the log.
#[test]
fn their_interpreter_is_read_from_the_tests_pycache_tag() {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("store/factor_multiplicity_m5_exceptions");
    copy_dir(
        &fixtures().join("out/sympy/run_1/instances/factor_multiplicity_m5_exceptions"),
        &src,
    );
    let pyc = src.join("files/__pycache__");
    std::fs::create_dir_all(&pyc).unwrap();
    std::fs::write(pyc.join("testcase.cpython-39-pytest-8.3.4.pyc"), b"").unwrap();
    std::fs::write(pyc.join("parser.cpython-311.pyc"), b"").unwrap();
    assert_eq!(
        flux_interop::import::their_python(&src, "testcase.py").as_deref(),
        Some("3.9")
    );
    // A sibling instance of the same run that keeps no compiled file has that interpreter too.
    let sibling = work.path().join("store/other_s2_loops");
    std::fs::create_dir_all(sibling.join("files")).unwrap();
    std::fs::copy(src.join("eval.sh"), sibling.join("eval.sh")).unwrap();
    assert_eq!(
        flux_interop::import::their_python(&sibling, "testcase.py").as_deref(),
        Some("3.9")
    );
    let alone = tempfile::tempdir().unwrap();
    assert_eq!(
        flux_interop::import::their_python(alone.path(), "testcase.py"),
        None
    );
    let out = work.path().join("out");
    let r = import(std::slice::from_ref(&src), &opts(&out));
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let inst = flux_instance::load_instance(r.imported[0].dir.as_ref().unwrap()).unwrap();
    let ext = inst.external_parser().unwrap();
    assert!(ext
        .log
        .contains(&("SWE_FLUX_PYTHON".to_string(), "3.9".to_string())));
    assert!(inst.spec.tracing.module_functions.is_empty());
    assert!(
        !inst
            .dir
            .join("__pycache__/testcase.cpython-39-pytest-8.3.4.pyc")
            .exists(),
        "compiled files are not copied"
    );
}

/// llama_factory parser_get_dataset_list_s6_calls__r20260714 (dev): a run before 3.11 names
/// functions `module.co_name` in its questions and answers (`pkg.mod.join` for the method
/// `DatasetAttr.join`); the native twin of an extractor that names functions says so
/// (`function_names = "co_name"`), and a 3.11 run's does not.
#[test]
fn a_native_twin_of_a_run_before_3_11_names_functions_by_co_name() {
    let work = tempfile::tempdir().unwrap();
    let native_params = |python: Option<&str>, parser: Option<&str>| {
        let tag = format!("{}-{}", python.unwrap_or("none"), parser.is_some());
        let src = work
            .path()
            .join(format!("store-{tag}/factor_multiplicity_m5_exceptions"));
        copy_dir(
            &fixtures().join("out/sympy/run_1/instances/factor_multiplicity_m5_exceptions"),
            &src,
        );
        let oracle = json!({
            "question_kind": "S6_InterProceduralCFG",
            "question": "Run `sympy_qa/factor_multiplicity_m5_exceptions/files/testcase.py::TestMultiplicity`. \
                For the 1st invocation of `sympy.ntheory.factor_.multiplicity` in \
                `sympy/ntheory/factor_.py`, list its direct callees in call order, restricted to \
                callees whose qualified names are exactly one of: `sympy.ntheory.factor_.trailing`, \
                `sympy.ntheory.factor_.multiplicity`.",
            "template_answer": {"callee_sequence": ["str"]},
            "oracle_answer": {"callee_sequence": ["sympy.ntheory.factor_.trailing"]},
        });
        std::fs::write(src.join("oracle.json"), oracle.to_string()).unwrap();
        if let Some(text) = parser {
            std::fs::write(src.join("files/parser.py"), text).unwrap();
        }
        if let Some(v) = python {
            let pyc = src.join("files/__pycache__");
            std::fs::create_dir_all(&pyc).unwrap();
            let name = format!("testcase.cpython-{v}-pytest-8.3.5.pyc");
            std::fs::write(pyc.join(name), b"").unwrap();
        }
        let out = work.path().join(format!("out-{tag}"));
        let r = import(std::slice::from_ref(&src), &opts(&out));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let native = r.imported[0].native.as_ref().expect("a native twin");
        let inst = flux_instance::load_instance(native).unwrap();
        assert_eq!(inst.spec.extractor.name, "call_sequence");
        inst.spec.extractor.params
    };
    let old = native_params(Some("310"), None);
    assert_eq!(old.get("function_names"), Some(&json!("co_name")));
    assert_eq!(old.get("module_names"), Some(&json!("runtime")));
    for python in [Some("311"), None] {
        let p = native_params(python, None);
        assert_eq!(p.get("function_names"), None, "{python:?}");
    }
    // A parser that matched a method by its class in their log tells a tracer that named frames
    // by qualname, whatever the interpreter (llama_factory parser_get_dataset_list_s6_calls,
    // dev: no compiled file of its own, its run's others `cpython-310`).
    let parser = "TRACKED_FUNCS = [\"sympy.ntheory.factor_.C.trailing\", \
                  \"sympy.ntheory.factor_.multiplicity\"]\n";
    let p = native_params(Some("310"), Some(parser));
    assert_eq!(p.get("function_names"), None);
}

/// `flux gen --reauthor` rewrote each generated question in instance.toml and left oracle.json
/// (the harvested answer) byte for byte, its old long question included; the SWE-Flux export
/// read the question from oracle.json and so shipped the text the set no longer asks. It asks
/// the instance's question now, with its preamble's conventions (SWE-Flux has no system
/// prompt), and the answer stays the harvested one.
#[test]
fn swe_flux_export_of_a_reauthored_instance_asks_its_current_question() {
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets/flux-gen-v1/instances");
    let mut dirs = flux_instance::discover(&[&set]).unwrap();
    dirs.sort();
    let src = dirs
        .iter()
        .find(|d| {
            let stored = flux_instance::read_oracle(d).unwrap();
            stored.question != flux_instance::load_instance(d).unwrap().spec.question
        })
        .expect("a re-authored instance whose oracle.json keeps its old question");
    let work = tempfile::tempdir().unwrap();
    let x = work.path().join("instances").join(
        src.strip_prefix(&set).unwrap(), // <repo>/<id>
    );
    copy_dir(src, &x);
    let inst = flux_instance::load_instance(&x).unwrap();
    let stored = flux_instance::read_oracle(&x).unwrap();
    let out = work.path().join("swe-flux");
    let r = export(ExportFormat::SweFlux, std::slice::from_ref(&x), &out);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let e = out.join(&r.exported[0]);
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(e.join(f)).unwrap()).unwrap()
    };
    let preamble = flux_instance::preamble::by_id(inst.spec.preamble.as_deref().unwrap()).unwrap();
    for f in ["oracle.json", "question.json"] {
        let q = read(f)["question"].as_str().unwrap().to_string();
        assert!(q.starts_with(inst.spec.question.trim_end()), "{f}: {q}");
        assert!(q.ends_with(preamble.text), "{f}: {q}");
        assert_ne!(q, stored.question, "{f}: the stale question");
    }
    assert_eq!(read("oracle.json")["oracle_answer"], stored.oracle_answer);
    // The instance's oracle.json is not rewritten.
    assert_eq!(
        std::fs::read(x.join("oracle.json")).unwrap(),
        std::fs::read(src.join("oracle.json")).unwrap()
    );
}
