//! The seam between `flux gen` and the runtime that runs a repository's tests, described by its
//! probes ([`RuntimeSpec`]): how a test module is named and run, what its trace can hold, how a
//! test is selected, how a question says where it runs. The rest of the generator asks here
//! instead of testing for a language.
//!
//! - CPython (`python`): pytest modules (`pkg/tests/test_x.py`, node ids `…::test_a`), the
//!   hook and the USDT probes: lines, values, exceptions, calls; every kind.
//! - HotSpot (`hotspot`): JUnit test classes (`src/test/java/org/x/FooTest.java`) run by the
//!   image's JUnit console launcher (`flux-junit`), traced by the JVM's method probes alone:
//!   calls and returns of the project's classes (the kernel's class filter), nothing else, so
//!   the call-structure kinds (S6, M6) only. A test is a test method, its id
//!   `org/x/FooTest.java::FooTest::testBar` as `flux_merge::jvm` names its window.
use crate::spec::{RepoSpec, RuntimeSpec};
use flux_trace::{config::HookEvent, Scope, TracingConfig};

/// The JUnit launcher of a Java image (`flux_container::images::java::LAUNCHER`).
pub const JUNIT_LAUNCHER: &str = "/usr/local/bin/flux-junit";

/// The Python a Java image carries for flux's image tools (listing files, reading sources).
const IMAGE_PYTHON: &str = "/usr/bin/python3";

/// Does the runtime's trace hold calls only (no lines, values or exceptions)?
pub fn calls_only(repo: &RepoSpec) -> bool {
    !repo.runtime.is_python()
}

/// The extension of a test module's (and a target's) source files.
pub fn source_ext(repo: &RepoSpec) -> &'static str {
    match repo.runtime {
        RuntimeSpec::Python => ".py",
        RuntimeSpec::Hotspot { .. } => ".java",
    }
}

/// The Python that runs flux's scripts in the image (listing files, static facts).
pub fn tools_python(repo: &RepoSpec) -> &str {
    match repo.runtime {
        RuntimeSpec::Python => &repo.interpreter,
        RuntimeSpec::Hotspot { .. } => IMAGE_PYTHON,
    }
}

/// "Python 3.11" / "Java 17": the runtime a question names.
pub fn runtime_name(repo: &RepoSpec) -> String {
    match repo.runtime {
        RuntimeSpec::Python => format!(
            "Python {}",
            crate::author::python_version(&repo.interpreter)
        ),
        RuntimeSpec::Hotspot { .. } => {
            let (_, v) = repo.image.rsplit_once("-jdk").unwrap_or(("", "17"));
            format!("Java {v}")
        }
    }
}

/// The binary class name of a test module (`src/test/java/org/x/FooTest.java` →
/// `org.x.FooTest`), for a HotSpot repository; None for another runtime or another path.
pub fn test_class(repo: &RepoSpec, module: &str) -> Option<String> {
    let RuntimeSpec::Hotspot { tests, .. } = &repo.runtime else {
        return None;
    };
    let rel = module
        .strip_prefix(tests.trim_end_matches('/'))?
        .trim_start_matches('/');
    Some(rel.strip_suffix(".java")?.replace('/', "."))
}

/// A JVM test id (`org/x/FooTest.java::FooTest::Inner::testBar`) as JUnit's method selector
/// (`org.x.FooTest$Inner#testBar`); None when it is not one.
pub fn method_selector(id: &str) -> Option<String> {
    let mut parts = id.split("::");
    let file = parts.next()?;
    let rest: Vec<&str> = parts.collect();
    let (method, classes) = rest.split_last()?;
    let (_, outer) = classes.split_first()?;
    let pkg_class = file.strip_suffix(".java")?.replace('/', ".");
    let mut class = pkg_class;
    for inner in outer {
        class.push('$');
        class.push_str(inner);
    }
    Some(format!("{class}#{method}"))
}

/// The test id of a JUnit method selector (`org.x.FooTest$Inner#testBar` →
/// `org/x/FooTest.java::FooTest::Inner::testBar`), the inverse of [`method_selector`]; None
/// when it is not one.
pub fn selector_test_id(selector: &str) -> Option<String> {
    let (class, method) = selector.split_once('#')?;
    let mut nested = class.split('$');
    let outer = nested.next().filter(|c| !c.is_empty())?;
    let simple = outer.rsplit('.').next()?;
    let mut id = format!("{}.java::{simple}", outer.replace('.', "/"));
    for inner in nested {
        id.push_str("::");
        id.push_str(inner);
    }
    (!method.is_empty()).then(|| format!("{id}::{method}"))
}

/// The preamble a question of `kind` on this runtime is written against
/// (`flux_instance::preamble`: the JVM's call-structure questions have their own).
pub fn preamble(
    repo: &RepoSpec,
    kind: flux_extract::QuestionKind,
) -> &'static flux_instance::preamble::Preamble {
    flux_instance::preamble::for_runtime(kind, calls_only(repo))
}

/// The test command for `paths`: modules (files under `root`) or test ids.
pub fn test_command(repo: &RepoSpec, paths: &[String]) -> Vec<String> {
    match repo.runtime {
        RuntimeSpec::Python => crate::runner::pytest_command(repo, paths),
        RuntimeSpec::Hotspot { .. } => {
            let mut cmd = vec![JUNIT_LAUNCHER.to_string()];
            for p in paths {
                if let Some(class) = test_class(repo, p) {
                    cmd.push(format!("--select-class={class}"));
                } else if let Some(m) = method_selector(p) {
                    cmd.push(format!("--select-method={m}"));
                }
            }
            cmd
        }
    }
}

/// The file in the image a test (a module path or a test id) lives in.
pub fn image_file(repo: &RepoSpec, test: &str) -> String {
    let file = test.split("::").next().unwrap_or(test);
    match &repo.runtime {
        RuntimeSpec::Hotspot { tests, .. } if test.contains("::") => {
            repo.in_image(&format!("{}/{file}", tests.trim_end_matches('/')))
        }
        _ => repo.in_image(file),
    }
}

/// The config of a calls-only trace: the runtime's class filter and the test methods whose
/// activations are the tests' windows (`<binary class>.<method>`).
pub fn calls_config(repo: &RepoSpec, test_methods: &[String]) -> TracingConfig {
    let classes = match &repo.runtime {
        RuntimeSpec::Hotspot { classes, .. } => classes.clone(),
        RuntimeSpec::Python => Vec::new(),
    };
    let mut test_methods = test_methods.to_vec();
    test_methods.sort();
    test_methods.dedup();
    TracingConfig {
        files: Vec::new(),
        functions: Vec::new(),
        events: vec![HookEvent::Call, HookEvent::Return],
        scope: Scope::Tests,
        classes,
        test_methods,
        ..TracingConfig::default()
    }
}

/// The test method (`org.x.FooTest.testBar`, as [`calls_config`] takes it) of a JVM test id.
pub fn test_method(id: &str) -> Option<String> {
    method_selector(id).map(|s| s.replacen('#', ".", 1))
}

/// The answer template of `extractor` on this runtime: a calls-only trace has no lines, so a
/// call's line (always 0 there) is not asked.
pub fn template(repo: &RepoSpec, extractor: &str, default: &str) -> String {
    if calls_only(repo) && extractor == "call_sequence" {
        r#"{"call_sequence": [{"function": "str"}]}"#.to_string()
    } else {
        default.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java() -> RepoSpec {
        let text = crate::spec::tests::GOOD.replace(
            "split = \"test\"",
            "split = \"test\"\nruntime = { probes = \"hotspot\", classes = [\"org.x.\"], tests = \"src/test/java/\" }",
        );
        crate::spec::parse(&text, std::path::Path::new("gen.toml"))
            .unwrap()
            .repositories
            .remove(0)
    }

    /// A test class runs by class, a test id by method (nested classes with `$`), through the
    /// image's launcher; a test's file is found under the test sources.
    #[test]
    fn junit_commands_select_classes_and_methods() {
        let mut r = java();
        r.root = "/testbed".into();
        assert_eq!(
            test_command(&r, &["src/test/java/org/x/FooTest.java".into()]),
            [JUNIT_LAUNCHER, "--select-class=org.x.FooTest"]
        );
        assert_eq!(
            test_command(
                &r,
                &[
                    "org/x/FooTest.java::FooTest::testA".into(),
                    "org/x/FooTest.java::FooTest::Inner::testB".into()
                ]
            ),
            [
                JUNIT_LAUNCHER,
                "--select-method=org.x.FooTest#testA",
                "--select-method=org.x.FooTest$Inner#testB"
            ]
        );
        assert_eq!(
            test_method("org/x/FooTest.java::FooTest::testA").as_deref(),
            Some("org.x.FooTest.testA")
        );
        assert_eq!(
            image_file(&r, "org/x/FooTest.java::FooTest::testA"),
            "/testbed/src/test/java/org/x/FooTest.java"
        );
        assert_eq!(
            image_file(&r, "src/test/java/org/x/FooTest.java"),
            "/testbed/src/test/java/org/x/FooTest.java"
        );
        assert_eq!(method_selector("m.py::test_a"), None);
        for id in [
            "org/x/FooTest.java::FooTest::testA",
            "org/x/FooTest.java::FooTest::Inner::testB",
        ] {
            let sel = method_selector(id).unwrap();
            assert_eq!(selector_test_id(&sel).as_deref(), Some(id), "{sel}");
        }
        assert_eq!(selector_test_id("org.x.FooTest"), None);
        assert_eq!(
            preamble(&r, flux_extract::QuestionKind::M6).id(),
            "jvm-calls@1"
        );
        assert!(calls_only(&r));
        assert_eq!(
            r.relative("org/x/Foo.java"),
            Some("org/x/Foo.java"),
            "a JVM file is relative to its source root already"
        );
        let c = calls_config(&r, &["org.x.FooTest.b".into(), "org.x.FooTest.a".into()]);
        assert_eq!(c.classes, ["org.x."]);
        assert_eq!(c.test_methods, ["org.x.FooTest.a", "org.x.FooTest.b"]);
    }

    #[test]
    fn python_is_unchanged() {
        let spec =
            crate::spec::parse(crate::spec::tests::GOOD, std::path::Path::new("gen.toml")).unwrap();
        let r = &spec.repositories[0];
        assert!(!calls_only(r));
        assert_eq!(test_command(r, &["a.py".into()])[1..3], ["-m", "pytest"]);
        assert_eq!(source_ext(r), ".py");
    }
}
