//! Self-contained prompts (issue 24.1): the default prompt of an instance defines the tests its
//! question names and the function it asks about, read from the repository's source tree with
//! their real line numbers — not a whole test file, and not only the files of the instance
//! directory (generated instances keep their tests in the image).
//!
//! Over the committed sets (`instances/`, `sets/flux-gen-v1/instances/`,
//! `sets/flux-java-v1/instances/`: Java declarations for its tests and targets) the check runs on a
//! seeded sample of [`SAMPLE`] instances per set; `FLUX_PROMPT_CHECK=all` checks every one and
//! prints the figure. The trees come from the cache (`$FLUX_CACHE`, else the checkout's
//! `.flux-cache`); a repository whose tree is absent is skipped loudly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flux_eval::{prompt, source, Located};
use flux_score::Instance;

/// Instances checked per set unless `FLUX_PROMPT_CHECK=all` (`FLUX_PROMPT_DUMP=<repo>/<id>,…`
/// prints those instances' prompts when they are checked).
const SAMPLE: usize = 40;
const SEED: u64 = 20_261_201;

fn cfg(source: &Located) -> prompt::PromptConfig<'_> {
    prompt::PromptConfig {
        source,
        max_context_tokens: 100_000,
        reasoning: false,
        mode: prompt::Mode::Context,
        system: None,
    }
}

/// The test functions a question names: each backquoted `file.py::[Class::]name[params]` (ids
/// may wrap lines inside their parameters, never before them), and bare backquoted `test_…`
/// names (the starters name a test of their own file so).
pub fn named_test_functions(question: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, span) in question.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let head = span.split('[').next().unwrap_or(span).trim();
        let name = if head.contains(".py::") || head.contains(".java::") {
            head.rsplit("::").next().unwrap_or(head)
        } else if head.starts_with("test_") && head.chars().all(|c| c.is_alphanumeric() || c == '_')
        {
            head
        } else {
            continue;
        };
        if !name.is_empty() && !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// The functions the question asks about: `[extractor] params.function` and `[tracing]
/// functions`, each by its last name (`Class.method` → `method`).
pub fn target_functions(inst: &Instance) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in inst
        .extractor_function
        .iter()
        .chain(inst.tracing_functions.iter())
    {
        let last = f
            .rsplit(':')
            .next()
            .unwrap_or(f)
            .trim_end_matches("()")
            .rsplit('.')
            .next()
            .unwrap_or(f)
            .to_string();
        // A lambda's frame (`<lambda>`) has no `def` to show.
        if !last.is_empty() && !last.starts_with('<') && !out.contains(&last) {
            out.push(last);
        }
    }
    out
}

/// The code of a numbered source line (`  12  def f(x):` → `def f(x):`), `None` for other lines.
fn numbered_code(line: &str) -> Option<&str> {
    let t = line.trim_start();
    t.find(|c: char| !c.is_ascii_digit())
        .filter(|&i| i > 0)
        .map(|i| t[i..].trim_start())
}

/// Does the prompt show a numbered source line `def name(` (or `async def name(`)?
pub fn defines(prompt: &str, name: &str) -> bool {
    let def = format!("def {name}(");
    prompt.lines().filter_map(numbered_code).any(|code| {
        code.starts_with(&def)
            || code
                .strip_prefix("async ")
                .is_some_and(|c| c.starts_with(&def))
    })
}

/// Does the prompt show a numbered Java declaration of `name` (`public int name(…`, a
/// constructor `Name(…`): `name(` after a space or at the line's start, no `=` or `.` before
/// it, and the line is no statement (does not end with `;`)?
pub fn defines_java(prompt: &str, name: &str) -> bool {
    let call = format!("{name}(");
    prompt.lines().filter_map(numbered_code).any(|code| {
        let code = code.trim_end();
        code.match_indices(&call).any(|(at, _)| {
            let before = &code[..at];
            (before.is_empty() || before.ends_with(' '))
                && !before.contains(['=', '.', '('])
                && !before.trim_start().starts_with("return")
                && !code.ends_with(';')
        })
    })
}

/// Is the instance one of a JVM repository (Java tests and targets)?
fn is_java(inst: &Instance) -> bool {
    !is_python(inst)
}

/// What an instance's default prompt lacks: the names it should define and does not.
pub fn missing_definitions(inst: &Instance, user: &str) -> Vec<String> {
    named_test_functions(&inst.question)
        .into_iter()
        .map(|t| format!("test {t}"))
        .chain(
            target_functions(inst)
                .into_iter()
                .map(|f| format!("target {f}")),
        )
        .filter(|what| {
            let name = what.rsplit(' ').next().unwrap_or(what);
            if is_java(inst) {
                !defines_java(user, name)
            } else {
                !defines(user, name)
            }
        })
        .collect()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is in the workspace")
        .to_path_buf()
}

fn cache() -> PathBuf {
    std::env::var_os("FLUX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(".flux-cache"))
}

fn fnv(seed: u64, s: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A Python instance (else a JVM repository's: Java tests and targets). The JVM starter
/// (`instances/`, its test its own file shown whole, its target the JDK's) is not checked:
/// only instances whose tests are a repository's (`[test] image_files`).
fn is_python(inst: &Instance) -> bool {
    !inst.test_files.iter().any(|f| f.ends_with(".java"))
        && !inst.image.as_deref().is_some_and(|i| i.contains("jdk"))
}

#[derive(Default)]
struct Tally {
    checked: usize,
    passed: usize,
    failures: Vec<String>,
    /// Prompts whose notes say a named test's code is not (all) shown.
    test_notes: Vec<String>,
    /// Characters of test code shown, over all prompts.
    test_chars: usize,
    absent: BTreeMap<String, PathBuf>,
}

fn check_set(set: &Path, all: bool, tally: &mut Tally) {
    let mut insts: Vec<Instance> = flux_score::instance::discover(&[set.to_path_buf()])
        .unwrap_or_else(|e| panic!("{}: {e}", set.display()))
        .into_iter()
        .filter(|i| is_python(i) || i.test_image_files.iter().any(|f| f.ends_with(".java")))
        .collect();
    insts.sort_by_key(|i| (fnv(SEED, &i.key()), i.key()));
    if !all {
        insts.truncate(SAMPLE);
    }
    let src = source::Source::Cache(cache());
    for inst in insts {
        let located = source::locate(&inst, &src);
        if let Located::Missing { path, .. } = &located {
            tally
                .absent
                .entry(inst.repository.clone())
                .or_insert_with(|| path.clone());
            continue;
        }
        let p = prompt::build(&inst, &cfg(&located));
        if std::env::var("FLUX_PROMPT_DUMP").is_ok_and(|k| k.split(',').any(|k| k == inst.key())) {
            eprintln!("{}", p.user);
        }
        tally.checked += 1;
        if let Some(n) = p.notes.iter().find(|n| n.contains("test")) {
            tally.test_notes.push(format!("{}: {n}", inst.key()));
        }
        tally.test_chars += p.user.split("\n## Test code").nth(1).map_or(0, |t| {
            t.split("\n## Repository source").next().unwrap_or(t).len()
        });
        let missing = missing_definitions(&inst, &p.user);
        if missing.is_empty() {
            tally.passed += 1;
        } else {
            tally
                .failures
                .push(format!("{}: lacks {}", inst.key(), missing.join(", ")));
        }
    }
}

/// Generated questions name tests kept in the image, and the default prompt showed only the
/// instance directory's files: 13 of 2,013 prompts defined the tests their question named.
#[test]
fn every_committed_prompt_defines_its_tests_and_target() {
    let all = std::env::var("FLUX_PROMPT_CHECK").is_ok_and(|v| v == "all");
    let root = workspace();
    let mut tally = Tally::default();
    for set in [
        "instances",
        "sets/flux-gen-v1/instances",
        "sets/flux-java-v1/instances",
    ] {
        let (checked, passed) = (tally.checked, tally.passed);
        check_set(&root.join(set), all, &mut tally);
        eprintln!(
            "{set}: {} of {} prompts define their tests and target",
            tally.passed - passed,
            tally.checked - checked
        );
    }
    for (repo, path) in &tally.absent {
        flux_skip::skip(
            &format!("every_committed_prompt_defines_its_tests_and_target ({repo})"),
            &format!(
                "its source tree {} is not in the cache (`flux images source {repo}` unpacks it)",
                path.display()
            ),
        );
    }
    eprintln!(
        "prompts checked: {} ({}), defining their tests and target: {}",
        tally.checked,
        if all {
            "every instance"
        } else {
            "seeded sample"
        },
        tally.passed
    );
    eprintln!(
        "test code shown: {} characters on average; {} prompt(s) with a note on test code{}",
        tally.test_chars / tally.checked.max(1),
        tally.test_notes.len(),
        tally
            .test_notes
            .iter()
            .take(10)
            .map(|n| format!("\n  {n}"))
            .collect::<String>()
    );
    assert!(
        tally.failures.is_empty(),
        "{} of {} prompts lack a definition:\n{}",
        tally.failures.len(),
        tally.checked,
        tally
            .failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_checker_reads_test_names_and_definitions() {
    let q = "run `tests/a.py::TestC::test_y[1-\n2]` and `t.py::test_z`, and in `test_w` \
             only; `test x` and `foo.py` are no tests";
    assert_eq!(named_test_functions(q), ["test_y", "test_z", "test_w"]);
    assert!(defines("   12  def test_y(self):\n", "test_y"));
    assert!(defines("    3      async def test_z(x):\n", "test_z"));
    assert!(
        !defines("def test_y(self):\n", "test_y"),
        "not a source line"
    );
    assert!(!defines("   12  # def test_y(\n", "test_y"));
    assert!(defines_java(
        "  140      public void testBar() throws Exception {\n",
        "testBar"
    ));
    assert!(defines_java("   30      Foo(int n) {\n", "Foo"));
    assert!(!defines_java("   41          int x = bar(1);\n", "bar"));
    assert!(!defines_java("   41          Foo.bar(1);\n", "bar"));
    assert!(
        !defines_java("   41          bar(1);\n", "bar"),
        "a call statement"
    );
    let q = "Run `org/x/FooTest.java::FooTest::testBar` of x";
    assert_eq!(named_test_functions(q), ["testBar"]);
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("a relative path has a parent")).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A repository tree as an sdist unpacks it: a package, its tests (a class whose test comes
/// from a base, a parametrized test taking fixtures from its file and two conftests) and an
/// unrelated test the prompt must leave out.
fn fixture_tree(root: &Path) {
    write(
        root,
        "pkg/mod.py",
        "def helper(x):\n    return x + 1\n\n\ndef target(x):\n    return helper(x) * 2\n",
    );
    write(
        root,
        "conftest.py",
        "import pytest\n\n\n@pytest.fixture\ndef base():\n    return 40\n",
    );
    write(
        root,
        "tests/conftest.py",
        "import pytest\n\n\n@pytest.fixture\ndef number(base):\n    return base + 1\n\n\n\
         @pytest.fixture(autouse=True)\ndef always():\n    yield\n",
    );
    write(
        root,
        "tests/base.py",
        "class Checks:\n    def test_inherited(self):\n        assert self.value == 3\n",
    );
    write(
        root,
        "tests/test_mod.py",
        "import pytest\n\nfrom pkg.mod import target\n\nfrom .base import Checks\n\n\
         CASES = [1, 2]\n\n\ndef check(v):\n    return target(v)\n\n\n\
         def test_unrelated():\n    assert UNRELATED_MARK\n\n\n\
         @pytest.mark.parametrize(\"v\", CASES)\ndef test_param(v, number):\n    assert check(v) < number\n\n\n\
         class TestC(Checks):\n    value = 3\n\n    def setup_method(self):\n        self.n = 1\n\n\
         \x20   def test_own(self):\n        assert target(self.n) == 4\n",
    );
}

fn fixture_instance(root: &Path) -> Instance {
    let dir = root.join("instances/fx/fx-1");
    write(
        &dir,
        "instance.toml",
        "id = \"fx-1\"\nrepository = \"fx\"\nkind = \"S1_IntraProceduralCFG\"\npackage = \"fx==1.0\"\n\
         question = \"\"\"Run `tests/test_mod.py::test_param[1]` and\n`tests/test_mod.py::TestC::test_own`: \
         which lines of `target` (pkg/mod.py) run?\"\"\"\ntemplate = '{\"lines\": [\"int\"]}'\n\
         [test]\nfiles = []\nimage_files = [\"/testbed/tests/test_mod.py\"]\n\
         command = [\"python\", \"-m\", \"pytest\", \"/testbed/tests/test_mod.py::TestC::test_inherited\"]\n\
         [tracing]\nfiles = [\"pkg/mod.py\"]\nfunctions = [\"target\"]\n",
    );
    flux_score::instance::load(&dir).unwrap()
}

/// Generated instances name tests that live in the image, and the prompt showed only the
/// instance directory (empty): the model was asked about tests it could not read.
#[test]
fn the_prompt_defines_the_test_the_question_names() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("src/fx-1.0");
    fixture_tree(&tree);
    let inst = fixture_instance(tmp.path());
    let located = Located::Dir(tree.clone());
    let p = prompt::build(&inst, &cfg(&located));
    let u = &p.user;
    // The named tests (the command's too, found in the base class), by their real lines.
    assert!(missing_definitions(&inst, u).is_empty(), "{u}");
    assert!(u.contains("   19  def test_param(v, number):"), "{u}");
    assert!(
        u.contains("   18  @pytest.mark.parametrize(\"v\", CASES)"),
        "{u}"
    );
    assert!(u.contains("    2      def test_inherited(self):"), "{u}");
    // The class header and its setup, the fixtures (two conftests, one fixture taking another,
    // the autouse one), the helper it calls, the table its decorator reads, the imports.
    for line in [
        "   23  class TestC(Checks):",
        "   26      def setup_method(self):",
        "    5  def number(base):",
        "    5  def base():",
        "   10  def always():",
        "   10  def check(v):",
        "    7  CASES = [1, 2]",
        "    3  from pkg.mod import target",
    ] {
        assert!(u.contains(line), "{line:?} missing:\n{u}");
    }
    // Never the whole file: the test nobody named is not there.
    assert!(!u.contains("UNRELATED_MARK"), "{u}");
    // The target and what it calls, from the package.
    assert!(u.contains("    5  def target(x):") && u.contains("    1  def helper(x):"));
    assert!(p.files.iter().any(|f| f.starts_with("tests/test_mod.py:")));

    // No tree: the prompt names the tests it cannot show.
    let missing = Located::Missing {
        path: tmp.path().join("nowhere"),
        hint: String::new(),
    };
    let p = prompt::build(&inst, &cfg(&missing));
    let note = p
        .notes
        .iter()
        .find(|n| n.contains("is not shown"))
        .unwrap_or_else(|| panic!("{:?}", p.notes));
    for id in [
        "tests/test_mod.py::test_param[1]",
        "tests/test_mod.py::TestC::test_own",
        "/testbed/tests/test_mod.py::TestC::test_inherited",
    ] {
        assert!(note.contains(id), "{note}");
    }
    assert!(note.contains("nowhere"), "{note}");
}

/// An imported instance kept its 925-line test file in the instance directory and the
/// call-graph prompt showed all of it: the tests its question names are what it needs.
#[test]
fn a_long_instance_test_file_shows_the_named_tests_not_the_whole_file() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("src/fx-1.0");
    write(&tree, "pkg/mod.py", "def target(x):\n    return x\n");
    let dir = tmp.path().join("instances/fx/fx-2");
    let mut t = String::from("from pkg.mod import target\n\n\ndef make():\n    return 1\n\n");
    for i in 0..300 {
        t.push_str(&format!("\ndef test_filler_{i}():\n    assert FILLER\n"));
    }
    t.push_str("\n\ndef test_named():\n    assert target(make()) == 1\n");
    write(&dir, "tests/test_long.py", &t);
    write(
        &dir,
        "instance.toml",
        "id = \"fx-2\"\nrepository = \"fx\"\nkind = \"S6_InterProceduralCFG\"\npackage = \"fx==1.0\"\n\
         question = \"Run `tests/test_long.py::test_named`: what does `target` call?\"\n\
         template = '{\"call_graph\": {}}'\n\
         [test]\nfiles = [\"tests/test_long.py\"]\n\
         command = [\"python\", \"-m\", \"pytest\", \"tests/test_long.py::test_named\"]\n\
         [tracing]\nfiles = [\"pkg/mod.py\"]\nfunctions = [\"target\"]\n",
    );
    let inst = flux_score::instance::load(&dir).unwrap();
    let p = prompt::build(&inst, &cfg(&Located::Dir(tree)));
    let u = &p.user;
    assert!(missing_definitions(&inst, u).is_empty(), "{u}");
    assert!(u.contains("  909  def test_named():"), "{u}");
    assert!(u.contains("    4  def make():"), "its helper:\n{u}");
    assert!(
        !u.contains("FILLER"),
        "the other 300 tests are left out:\n{u}"
    );
    assert!(u.contains("Of tests/test_long.py (910 lines)"), "{u}");
    // The library source is there too.
    assert!(u.contains("    1  def target(x):"), "{u}");
}

/// Generated questions repeated the same conventions in every prompt (issue 24.2): they are
/// the instance's preamble now, sent once in the system prompt, and the question only says
/// what to compute.
#[test]
fn the_preamble_an_instance_names_is_the_system_prompts() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("src/fx-1.0");
    fixture_tree(&tree);
    let inst = fixture_instance(tmp.path());
    let located = Located::Dir(tree);
    let plain = prompt::build(&inst, &cfg(&located));
    assert_eq!(plain.system, prompt::SYSTEM, "no preamble named, none sent");
    let mut with = inst.clone();
    with.kind = "S2_Loops".into();
    with.preamble = Some("loops@1".into());
    let p = prompt::build(&with, &cfg(&located));
    assert!(p.system.starts_with(prompt::SYSTEM), "{}", p.system);
    assert!(
        p.system
            .contains("An iteration is one evaluation of the loop header"),
        "{}",
        p.system
    );
    assert!(
        !p.user.contains("An iteration is one evaluation"),
        "sent once"
    );
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    // A preamble this flux does not have: the kind's current one, and a note saying so.
    with.preamble = Some("loops@0".into());
    let p = prompt::build(&with, &cfg(&located));
    assert!(p.system.contains("An iteration is one evaluation"));
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("loops@0") && n.contains("loops@1")),
        "{:?}",
        p.notes
    );
}
