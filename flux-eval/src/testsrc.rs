//! The code of the tests a question names, read from the repository's source tree.
//!
//! Generated instances name the repository's own tests by pytest id
//! (`tests/test_x.py::TestC::test_y[1-2]`, in the question and in `[test] command`) and keep
//! the test files in the image (`[test] image_files`, under `/testbed`), not in the instance
//! directory; the image's tree is the cache's unpacked sdist, so the same files are on the host
//! ([`crate::source`]). A test id maps onto that tree by its file (relative to the tree's top,
//! or an image path whose ending is a file of the tree) and its `::` path, parameters dropped
//! (`test_y[1-2]` runs `test_y`).
//!
//! Shown, with the files' own line numbers and in this order while the budget lasts: each
//! named test function (with its decorators; found in a base class when the test class
//! inherits it), the header of its class and the class's `setUp`/`setup_method`-style hooks,
//! the pytest fixtures it takes (its parameters and `usefixtures`, found in its class, its file
//! or a `conftest.py` from its directory up, and the fixtures those take, three deep), the
//! file's and conftests' `autouse` fixtures, the helpers it calls that live on the test side
//! (its file, a conftest, a file under a `test`/`tests`/`testing` directory), the module-level
//! names it and its decorators read (parametrize tables) and its file's imports. Never a whole
//! file; nothing dropped silently: what is not found or does not fit is said in the notes.

use std::path::Path;

use crate::context::{render, Chosen, Item, Src};
use crate::prompt::resolve;
use crate::pysrc::Def;
use flux_score::Instance;

/// A test a question names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestId {
    /// The id as written, parameters included (`tests/a.py::C::t[1]`).
    pub id: String,
    /// Its file as written: relative to the tree's top, or a path inside the image.
    pub file: String,
    /// Classes then the function (`["C", "t"]`), parameters dropped.
    pub path: Vec<String>,
}

impl TestId {
    fn parse(s: &str) -> Option<TestId> {
        let id = s.split_whitespace().collect::<Vec<_>>().join(" ");
        let (file, rest) = id.split_once("::")?;
        if !file.ends_with(".py") || file.contains(' ') {
            return None;
        }
        let head = rest.split('[').next().unwrap_or(rest);
        let path: Vec<String> = head.split("::").map(|p| p.trim().to_string()).collect();
        let ident = |p: &String| {
            !p.is_empty()
                && p.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !p.starts_with(|c: char| c.is_ascii_digit())
        };
        if !path.iter().all(ident) {
            return None;
        }
        Some(TestId {
            file: file.to_string(),
            path,
            id,
        })
    }

    fn qualname(&self) -> String {
        self.path.join(".")
    }

    /// The same test as `other` (one id from the question, one from the command).
    fn same(&self, other: &TestId) -> bool {
        let ends = |a: &str, b: &str| a == b || a.ends_with(&format!("/{b}"));
        self.path == other.path && (ends(&self.file, &other.file) || ends(&other.file, &self.file))
    }
}

/// The tests the instance names in the repository's tree: the question's backquoted pytest ids,
/// then the ids of its `[test] command`, each once. Ids of a file in the instance directory are
/// left out ([`own_tests`] has them: the prompt shows that file).
pub fn named_tests(inst: &Instance) -> Vec<TestId> {
    all_named(inst)
        .into_iter()
        .filter(|t| own_file(inst, t).is_none())
        .collect()
}

/// The instance directory's test file a test id points into, if any.
fn own_file<'a>(inst: &'a Instance, t: &TestId) -> Option<&'a String> {
    inst.test_files
        .iter()
        .find(|f| **f == t.file || t.file.ends_with(&format!("/{f}")))
}

/// The named tests that live in `file`, one of the instance directory's own test files.
pub fn own_tests(inst: &Instance, file: &str) -> Vec<TestId> {
    all_named(inst)
        .into_iter()
        .filter(|t| own_file(inst, t).is_some_and(|f| f == file))
        .collect()
}

fn all_named(inst: &Instance) -> Vec<TestId> {
    let from_question = inst
        .question
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s);
    let from_command = inst.test_command.iter().map(String::as_str);
    let mut out: Vec<TestId> = Vec::new();
    for t in from_question.chain(from_command).filter_map(TestId::parse) {
        if !out.iter().any(|o| o.same(&t)) {
            out.push(t);
        }
    }
    out
}

/// What stays out of the prompt when there is no tree to read the tests from.
pub fn unshown_note(tests: &[TestId], why: &str) -> Option<String> {
    if tests.is_empty() {
        return None;
    }
    let ids: Vec<String> = tests.iter().map(|t| format!("`{}`", t.id)).collect();
    Some(format!(
        "the code of the test(s) {} is not shown: {why}",
        ids.join(", ")
    ))
}

/// Pieces of the test side, by priority.
#[derive(Default)]
struct Parts {
    tests: Vec<Item>,
    classes: Vec<Item>,
    fixtures: Vec<Item>,
    helpers: Vec<Item>,
    near: Vec<Item>,
    /// `(file, def line)` of everything chosen, so that nothing is chosen twice.
    seen: Vec<(String, usize)>,
}

#[derive(Clone, Copy)]
enum Kind {
    Test,
    Class,
    Fixture,
    Helper,
}

impl Parts {
    fn add(&mut self, kind: Kind, file: &str, d: &Def, label: String) {
        if self.seen.iter().any(|(f, l)| f == file && *l == d.def_line) {
            return;
        }
        self.seen.push((file.to_string(), d.def_line));
        let list = match kind {
            Kind::Test => &mut self.tests,
            Kind::Class => &mut self.classes,
            Kind::Fixture => &mut self.fixtures,
            Kind::Helper => &mut self.helpers,
        };
        list.push(Item {
            file: file.to_string(),
            start: d.start,
            end: d.end,
            label,
        });
    }
}

/// Is `file` on the test side of the tree (where a test's helpers live)?
fn test_side(file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    name == "conftest.py"
        || name.starts_with("test_")
        || name.ends_with("_test.py")
        || file
            .split('/')
            .rev()
            .skip(1)
            .any(|d| matches!(d, "test" | "tests" | "testing"))
}

/// `conftest.py` files that apply to `file`: from its directory up to the tree's top, nearest
/// first.
fn conftests(file: &str, files: &[String]) -> Vec<String> {
    let mut dir = file.rsplit_once('/').map(|(d, _)| d.to_string());
    let mut out = Vec::new();
    loop {
        let c = match &dir {
            Some(d) => format!("{d}/conftest.py"),
            None => "conftest.py".to_string(),
        };
        if files.contains(&c) {
            out.push(c);
        }
        match dir {
            Some(d) => dir = d.rsplit_once('/').map(|(p, _)| p.to_string()),
            None => break,
        }
    }
    out
}

/// The raw text of a definition's decorators.
fn decorators(src: &mut Src, file: &str, d: &Def) -> String {
    src.module(file)
        .map(|(_, lines)| {
            lines
                .get(d.start.saturating_sub(1)..d.def_line.saturating_sub(1))
                .unwrap_or_default()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Names in `@pytest.mark.usefixtures("a", "b")` decorators.
fn usefixtures(decos: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in decos.split("usefixtures(").skip(1) {
        let args = part.split(')').next().unwrap_or("");
        for a in args.split(',') {
            let n = a.trim().trim_matches(|c| c == '"' || c == '\'');
            if !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_') {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// The fixture `name` as a test in `class` of `file` sees it: a fixture method of its class,
/// one of its file, else of the nearest conftest.
fn find_fixture(
    src: &mut Src,
    file: &str,
    class: Option<&str>,
    name: &str,
) -> Option<(String, Def)> {
    let mut places: Vec<(String, String)> = Vec::new();
    if let Some(c) = class {
        places.push((file.to_string(), format!("{c}.{name}")));
    }
    places.push((file.to_string(), name.to_string()));
    for c in conftests(file, &src.files) {
        places.push((c, name.to_string()));
    }
    for (f, q) in places {
        let found = src.defs(&f, &q).into_iter().find(|d| d.qualname == q);
        if let Some(d) = found {
            if decorators(src, &f, &d).contains("fixture") {
                return Some((f, d));
            }
        }
    }
    None
}

/// The `autouse` fixtures of `file` and its conftests.
fn autouse(src: &mut Src, file: &str) -> Vec<(String, Def)> {
    let mut out = Vec::new();
    let mut places = vec![file.to_string()];
    places.extend(conftests(file, &src.files));
    for f in places {
        let defs: Vec<Def> = src
            .module(&f)
            .map(|(m, _)| m.defs.iter().filter(|d| !d.is_class).cloned().collect())
            .unwrap_or_default();
        for d in defs {
            let decos = decorators(src, &f, &d);
            if decos.contains("fixture") && decos.replace(' ', "").contains("autouse=True") {
                out.push((f.clone(), d));
            }
        }
    }
    out
}

/// The fixtures a function takes (its parameters and `usefixtures`), and theirs, three deep.
fn add_fixtures(src: &mut Src, parts: &mut Parts, file: &str, class: Option<&str>, d: &Def) {
    let mut queue: Vec<(String, usize)> = Vec::new();
    let params = src
        .module(file)
        .map(|(m, _)| m.params(d))
        .unwrap_or_default();
    queue.extend(params.into_iter().map(|p| (p, 0)));
    let decos = decorators(src, file, d);
    queue.extend(usefixtures(&decos).into_iter().map(|p| (p, 0)));
    let mut asked: Vec<String> = Vec::new();
    while let Some((name, depth)) = queue.pop() {
        if matches!(name.as_str(), "self" | "cls" | "request") || asked.contains(&name) {
            continue;
        }
        asked.push(name.clone());
        let Some((f, fd)) = find_fixture(src, file, class, &name) else {
            continue;
        };
        parts.add(Kind::Fixture, &f, &fd, format!("fixture `{name}`"));
        add_helpers(src, parts, &f, &fd);
        if depth < 3 {
            let more = src
                .module(&f)
                .map(|(m, _)| m.params(&fd))
                .unwrap_or_default();
            queue.extend(more.into_iter().map(|p| (p, depth + 1)));
        }
    }
}

/// What `d` calls that lives on the test side.
fn add_helpers(src: &mut Src, parts: &mut Parts, file: &str, d: &Def) {
    let calls = src
        .module(file)
        .map(|(m, _)| m.calls_in(d))
        .unwrap_or_default();
    for call in calls {
        if let Some((f, h)) = src.resolve(file, d, &call, 0) {
            if test_side(&f) {
                let label = format!("`{}` (called by `{}`)", h.qualname, d.qualname);
                parts.add(Kind::Helper, &f, &h, label);
            }
        }
    }
}

/// The class header of a test method (up to its first member) and its setup hooks.
fn add_class(src: &mut Src, parts: &mut Parts, file: &str, class: &str) {
    let Some(c) = src
        .defs(file, class)
        .into_iter()
        .find(|c| c.is_class && c.qualname == class)
    else {
        return;
    };
    let header = Def {
        end: crate::pysrc::class_header_end(src.module(file).map(|(m, _)| m), &c),
        ..c.clone()
    };
    parts.add(Kind::Class, file, &header, format!("class `{class}`"));
    for hook in [
        "setUpClass",
        "setup_class",
        "setUp",
        "setup_method",
        "asyncSetUp",
    ] {
        if let Some((f, h)) = src.method(file, class, hook, 0) {
            parts.add(Kind::Class, &f, &h, format!("`{}`", h.qualname));
        }
    }
}

/// The import block of a test file (when it is one block).
fn add_imports(src: &mut Src, parts: &mut Parts, file: &str) {
    let Some((m, _)) = src.module(file) else {
        return;
    };
    if let (Some(a), Some(b)) = (
        m.imports.iter().map(|i| i.line).min(),
        m.imports.iter().map(|i| i.line).max(),
    ) {
        let b = m.logical_end(b);
        if b - a < 60 {
            parts.near.push(Item {
                file: file.to_string(),
                start: a,
                end: b,
                label: "imports".to_string(),
            });
        }
    }
}

/// How many module-level pieces of one test file [`add_module_names`] adds at most.
const MAX_MODULE_PIECES: usize = 60;

/// The module-level code of `file` that what is chosen there reads, followed through: the
/// names it reads that the module assigns (`client = TestClient(app)`, parametrize tables) or
/// defines (`class Item`, a helper passed rather than called), what those read in turn, and the
/// definitions registered on an assigned name by a decorator (`@app.get(...)` routes): the
/// test's app, which it reaches through a client rather than a call.
fn add_module_names(src: &mut Src, parts: &mut Parts, file: &str) {
    let Some(m) = src.module(file).map(|(m, _)| m.clone()) else {
        return;
    };
    let lines: Vec<String> = src.module(file).map(|(_, l)| l.clone()).unwrap_or_default();
    let span = |a: usize, b: usize| Def {
        qualname: String::new(),
        is_class: false,
        start: a,
        def_line: a,
        end: b,
        bases: Vec::new(),
    };
    let mut queue: Vec<Def> = parts
        .tests
        .iter()
        .chain(&parts.classes)
        .chain(&parts.fixtures)
        .chain(&parts.helpers)
        .filter(|i| i.file == file)
        .map(|i| span(i.start, i.end))
        .collect();
    let top: Vec<Def> = m
        .defs
        .iter()
        .filter(|d| !d.qualname.contains('.') && !d.qualname.to_lowercase().starts_with("test"))
        .cloned()
        .collect();
    let mut done: Vec<String> = Vec::new();
    let mut pieces = 0;
    while let Some(d) = queue.pop() {
        for n in m.names_in(&d) {
            if pieces >= MAX_MODULE_PIECES || done.contains(&n) {
                continue;
            }
            done.push(n.clone());
            if let Some(&(a, b)) = m.assigns.get(&n) {
                if b - a >= 60 {
                    continue;
                }
                pieces += 1;
                parts.near.push(Item {
                    file: file.to_string(),
                    start: a,
                    end: b,
                    label: format!("`{n}`"),
                });
                queue.push(span(a, b));
                // Definitions registered on it (`@app.get(...)`, `@n.command()`).
                for t in &top {
                    let decos = lines
                        .get(t.start.saturating_sub(1)..t.def_line.saturating_sub(1))
                        .unwrap_or_default()
                        .join("\n");
                    if decos.contains(&format!("@{n}.")) || decos.contains(&format!("@{n}(")) {
                        pieces += 1;
                        let label = format!("`{}` (registered on `{n}`)", t.qualname);
                        parts.add(Kind::Helper, file, t, label);
                        queue.push(span(t.start, t.end));
                    }
                }
            } else if let Some(t) = top.iter().find(|t| t.qualname == n) {
                if t.end - t.start < 150 {
                    pieces += 1;
                    parts.add(Kind::Helper, file, t, format!("`{n}`"));
                    queue.push(span(t.start, t.end));
                }
            }
        }
    }
}

/// The code of `tests` from the tree at `root`, within `budget` characters.
pub fn choose(inst: &Instance, tests: &[TestId], root: &Path, budget: usize) -> Chosen {
    let mut out = Chosen::default();
    let mut src = Src::new(root);
    let mut parts = Parts::default();
    let mut files_done: Vec<String> = Vec::new();
    for t in tests {
        let file = resolve(&t.file, &src.files).or_else(|| {
            // The image's copy of the file, named by its path inside the image.
            inst.test_image_files
                .iter()
                .filter(|f| f.ends_with(&format!("/{}", t.file)) || t.file.ends_with(f.as_str()))
                .find_map(|f| resolve(f, &src.files))
        });
        let Some(file) = file else {
            out.notes.push(format!(
                "the file of test `{}` ({}) is not in the source tree; its code is not shown",
                t.id, t.file
            ));
            continue;
        };
        let qual = t.qualname();
        let class = (t.path.len() > 1).then(|| t.path[..t.path.len() - 1].join("."));
        let exact = src
            .defs(&file, &qual)
            .into_iter()
            .find(|d| d.qualname == qual);
        let found = match (exact, &class) {
            (Some(d), _) => Some((file.clone(), d)),
            // A test method the class inherits.
            (None, Some(c)) => src.method(&file, c, &t.path[t.path.len() - 1], 0),
            (None, None) => None,
        };
        let Some((def_file, d)) = found else {
            out.notes.push(format!(
                "test `{}` has no definition `{qual}` in {file} that could be found statically; \
                 its code is not shown",
                t.id
            ));
            continue;
        };
        out.targets.push(format!("{def_file}:{}", d.qualname));
        parts.add(Kind::Test, &def_file, &d, format!("test `{}`", d.qualname));
        if let Some(c) = &class {
            add_class(&mut src, &mut parts, &file, c);
        }
        add_fixtures(&mut src, &mut parts, &def_file, class.as_deref(), &d);
        add_helpers(&mut src, &mut parts, &def_file, &d);
        if !files_done.contains(&file) {
            files_done.push(file.clone());
            for (f, a) in autouse(&mut src, &file) {
                let label = format!("autouse fixture `{}`", a.qualname);
                parts.add(Kind::Fixture, &f, &a, label);
            }
        }
    }
    // Every file a piece comes from (test files, conftests, helper modules): what its
    // pieces read at module level, and its imports.
    let mut files: Vec<String> = Vec::new();
    for i in parts
        .tests
        .iter()
        .chain(&parts.classes)
        .chain(&parts.fixtures)
        .chain(&parts.helpers)
    {
        if !files.contains(&i.file) {
            files.push(i.file.clone());
        }
    }
    for f in &files {
        add_module_names(&mut src, &mut parts, f);
        add_imports(&mut src, &mut parts, f);
    }
    let Parts {
        mut tests,
        classes,
        fixtures,
        helpers,
        near,
        ..
    } = parts;
    tests.extend(classes);
    tests.extend(fixtures);
    tests.extend(helpers);
    tests.extend(near);
    let mut chosen = render(&mut src, tests, budget, out);
    for n in &mut chosen.notes {
        if n.contains("left out for the context budget") || n.contains("cut for the context") {
            *n = format!("test code: {n}");
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::{conftests, test_side, usefixtures, TestId};

    #[test]
    fn test_ids_parse_with_classes_parameters_and_wrapped_lines() {
        let t = TestId::parse("tests/a.py::TestC::test_y[Too\nlong-x]").unwrap();
        assert_eq!(t.file, "tests/a.py");
        assert_eq!(t.path, ["TestC", "test_y"]);
        assert_eq!(t.id, "tests/a.py::TestC::test_y[Too long-x]");
        assert!(TestId::parse("a.py").is_none());
        assert!(TestId::parse("not a/b.py::x").is_none());
        assert!(TestId::parse("a.py::f(x)").is_none());
    }

    #[test]
    fn fixture_places_and_test_side_files() {
        let files: Vec<String> = ["conftest.py", "tests/conftest.py", "tests/u/test_a.py"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            conftests("tests/u/test_a.py", &files),
            ["tests/conftest.py", "conftest.py"]
        );
        assert!(test_side("tests/helpers.py"));
        assert!(test_side("sympy/core/tests/test_add.py"));
        assert!(!test_side("src/attr/_make.py"));
        assert_eq!(
            usefixtures("@pytest.mark.usefixtures(\"a\", 'b')"),
            ["a", "b"]
        );
    }
}
