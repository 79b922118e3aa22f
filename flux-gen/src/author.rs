//! Author an instance from a draft: the question prose ([`question`]: a run clause, then its
//! kind's prose from `crate::recipe`, saying in plain words what to compute; the conventions
//! it relies on — line numbering, what counts as an invocation, an iteration, a call, a
//! definition — are its kind's preamble, `flux_instance::preamble`, which the instance names),
//! the answer template, the narrowed tracing config, and the test as the repository's own node
//! ids, referenced in the image.
//!
//! No LLM: the prose is a function of the draft, so it is reproducible byte for byte.
use crate::draft::Draft;
use crate::facts::{FileFacts, FunctionFacts};
use crate::plan::{narrowed, Target};
use crate::spec::RepoSpec;
use flux_extract::QuestionKind as K;
use flux_instance::{Expect, ExtractorSpec, InstanceSpec, TestSpec};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What the prose needs besides the draft.
pub struct Prose<'a> {
    pub repo: &'a RepoSpec,
    pub target: &'a Target,
    pub func: &'a FunctionFacts,
    pub file: &'a FileFacts,
}

/// What a question says about its target besides the draft's parameters: read from the static
/// facts when drafting ([`Prose`]), from the question it replaces when re-authoring
/// (`crate::reauthor`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Subject {
    pub qualname: String,
    /// Relative to the repository's root.
    pub file: String,
    pub def_line: u32,
    /// The first line of its code object, where its arguments are defined: its first
    /// decorator's line for a decorated function, else `def_line`.
    pub first_line: u32,
    /// The loop a loop question names: its keyword (`for`, `while`, `async for`) and its
    /// body's first line.
    pub loop_head: Option<(String, u32)>,
}

/// What a question asks: a draft's kind, extractor, parameters and tests, and the functions
/// its tracing follows (an exception's frames).
pub struct Ask<'a> {
    pub kind: K,
    pub extractor: &'a str,
    pub params: &'a Map<String, Value>,
    pub tests: &'a [String],
    pub functions: &'a [String],
}

impl<'a> Ask<'a> {
    pub fn of(d: &'a Draft) -> Ask<'a> {
        Ask {
            kind: d.kind,
            extractor: d.extractor,
            params: &d.params,
            tests: &d.tests,
            functions: &d.functions,
        }
    }
}

/// "Run the test `…` of flask 3.1.3 (Python 3.11)." The preamble says how pytest runs it and
/// what its ids are relative to.
fn run_clause(repo: &RepoSpec, a: &Ask) -> String {
    let (name, version) = repo.name_version();
    let py = python_version(&repo.interpreter);
    let tests: Vec<String> = a.tests.iter().map(|t| code(t)).collect();
    if a.kind.is_multi_test() {
        format!(
            "Run these {} tests of {name} {version} (Python {py}) together, in this order: {}.",
            tests.len(),
            list_and(&tests)
        )
    } else {
        let t = tests.first().cloned().unwrap_or_default();
        format!("Run the test {t} of {name} {version} (Python {py}).")
    }
}

pub(crate) fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// "first", "2nd", ...
pub(crate) fn nth(n: u64) -> String {
    if n == 1 {
        "first".to_string()
    } else {
        ordinal(n)
    }
}

pub(crate) fn code(s: &str) -> String {
    format!("`{s}`")
}

pub(crate) fn list_and(items: &[String]) -> String {
    match items.len() {
        0 => String::new(),
        1 => items[0].clone(),
        2 => format!("{} and {}", items[0], items[1]),
        _ => format!(
            "{} and {}",
            items[..items.len() - 1].join(", "),
            items[items.len() - 1]
        ),
    }
}

pub(crate) fn python_version(interpreter: &str) -> &str {
    interpreter
        .rsplit('/')
        .next()
        .and_then(|n| n.strip_prefix("python"))
        .filter(|v| !v.is_empty())
        .unwrap_or("3")
}

fn int(p: &Map<String, Value>, k: &str) -> u64 {
    p.get(k).and_then(Value::as_u64).unwrap_or(1)
}

fn s<'a>(p: &'a Map<String, Value>, k: &str) -> &'a str {
    p.get(k).and_then(Value::as_str).unwrap_or("")
}

/// "`pkg/`": where the counted callees are defined.
fn within(p: &Map<String, Value>) -> String {
    code(s(p, "within"))
}

impl Prose<'_> {
    /// What the facts say about the target (and the draft's loop, if any).
    pub fn subject(&self, d: &Draft) -> Subject {
        let header = d.params.get("header").and_then(Value::as_u64);
        let loop_head = header.map(|h| {
            let l = self.file.loops.iter().find(|l| u64::from(l.line) == h);
            let kw = match l.map(|l| l.kind.as_str()) {
                Some("while") => "while",
                Some("async_for") => "async for",
                _ => "for",
            };
            let first = l
                .map(|l| l.body_first_line)
                .filter(|&b| b > 0)
                .unwrap_or(h as u32 + 1);
            (kw.to_string(), first)
        });
        Subject {
            qualname: self.target.qualname.clone(),
            file: self.target.file.clone(),
            def_line: self.func.def_line,
            first_line: if self.func.first_line > 0 {
                self.func.first_line
            } else {
                self.func.def_line
            },
            loop_head,
        }
    }

    /// The question for `d`.
    pub fn question(&self, d: &Draft) -> String {
        question(self.repo, &self.subject(d), &Ask::of(d))
    }
}

/// The words a kind's prose (`crate::recipe::KindRecipe::prose`) says its question with,
/// in its runtime's terms: the target, the invocation asked about, the callees that count.
pub struct Say<'a> {
    pub ask: &'a Ask<'a>,
    pub subject: &'a Subject,
    /// The target: "`f` (defined at line 3 of `pkg/m.py`)".
    pub f: String,
    /// "its first invocation".
    pub inv: String,
    /// The callees a call question counts: "functions defined under `pkg/`".
    pub callees: String,
    /// The nodes of a call graph: "functions defined in files under `pkg/`".
    pub graph: String,
    /// Whether the runtime reports lines (a calls-only one does not).
    pub lines: bool,
}

impl<'a> Say<'a> {
    /// A pytest question's words: the target from the facts of `t`.
    fn python(t: &'a Subject, a: &'a Ask<'a>) -> Say<'a> {
        let under = within(a.params);
        Say {
            ask: a,
            subject: t,
            f: format!(
                "{} (defined at line {} of {})",
                code(&t.qualname),
                t.def_line,
                code(&t.file)
            ),
            inv: format!("its {} invocation", nth(int(a.params, "invocation"))),
            callees: format!("functions defined under {under}"),
            graph: format!("functions defined in files under {under}"),
            lines: true,
        }
    }

    /// The integer parameter `k` (1 if absent).
    pub fn int(&self, k: &str) -> u64 {
        int(self.ask.params, k)
    }

    /// The string parameter `k` ("" if absent).
    pub fn s(&self, k: &str) -> &'a str {
        s(self.ask.params, k)
    }

    /// "the `while` loop at line 3 (body: lines 4 to 9)".
    pub fn the_loop(&self) -> String {
        let (kw, first) = self.subject.loop_head.clone().unwrap_or(("for".into(), 0));
        format!(
            "the `{kw}` loop at line {} (body: lines {first} to {})",
            self.int("header"),
            self.int("body_end")
        )
    }

    /// "Its arguments are defined at line 2".
    pub fn args(&self) -> String {
        format!(
            "Its arguments are defined at line {}",
            self.subject.first_line
        )
    }
}

/// The question of `a` about `t`: the run clause, then what to compute in plain words (its
/// kind's prose, `crate::recipe`), under the conventions of its kind's preamble
/// (`flux_instance::preamble`), which it must not repeat.
pub fn question(repo: &RepoSpec, t: &Subject, a: &Ask) -> String {
    let (clause, say) = if crate::runtime::calls_only(repo) {
        (
            crate::calls_only::run_clause(repo, a),
            crate::calls_only::say(t, a),
        )
    } else {
        (run_clause(repo, a), Say::python(t, a))
    };
    let body = (crate::recipe::recipe(a.kind).prose)(&say);
    wrap(&format!("{clause} {body}"), 96)
}

/// The instance spec of `d` (question, template, narrowed config, test in the image).
pub fn instance_spec(
    repo: &RepoSpec,
    d: &Draft,
    id: &str,
    template: &str,
    question: String,
    files_of: &BTreeMap<String, String>,
) -> InstanceSpec {
    let mut files: Vec<String> = d
        .functions
        .iter()
        .filter_map(|f| files_of.get(f).cloned())
        .collect();
    // The target's own file: `files_of` holds one file per qualname, and two targets of a
    // module may share one (sqlglot's `flatten` in helper.py and in optimizer/simplify.py).
    if let Some(f) = d.params.get("file").and_then(Value::as_str) {
        files.push(f.to_string());
    }
    files.sort();
    files.dedup();
    let mut functions = d.functions.clone();
    functions.sort();
    let tracing = if crate::runtime::calls_only(repo) {
        let methods: Vec<String> = d
            .tests
            .iter()
            .filter_map(|t| crate::runtime::test_method(t))
            .collect();
        crate::runtime::calls_config(repo, &methods)
    } else if d.extractor == "call_graph" {
        crate::plan::scout_config()
    } else {
        narrowed(files, functions)
    };
    let image_files: Vec<String> = {
        let mut v: Vec<String> = d
            .tests
            .iter()
            .map(|t| crate::runtime::image_file(repo, t))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    InstanceSpec {
        id: id.to_string(),
        repository: repo.name.clone(),
        package: repo.package.clone(),
        image: repo.image.clone(),
        interpreter: repo.interpreter.clone(),
        kind: d.kind,
        question,
        preamble: Some(crate::runtime::preamble(repo, d.kind).id()),
        template: template.to_string(),
        order_insensitive: Vec::new(),
        min_answer_size: None,
        test: TestSpec {
            files: Vec::new(),
            image_files,
            command: crate::runtime::test_command(repo, &d.tests),
            expect: Expect::Pass,
            timeout_s: 300,
            layout: None,
        },
        tracing,
        extractor: ExtractorSpec {
            name: d.extractor.to_string(),
            params: d.params.clone(),
            answer: Default::default(),
        },
        variant: None,
        generated: None,
    }
}

/// The question of a call-graph draft (no target function: the test's calls among the
/// repository's functions).
pub fn call_graph_question(repo: &RepoSpec, d: &Draft) -> String {
    question(repo, &Subject::default(), &Ask::of(d))
}

/// Wrap `text` at `width` columns on spaces (a question reads better in instance.toml).
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// A stable id: `<repository>-<function slug>-<kind>-<8 hex of the draft's key>`.
pub fn instance_id(repo: &str, d: &Draft, scope: &str) -> String {
    let slug: String = d
        .functions
        .first()
        .map(String::as_str)
        .unwrap_or("f")
        .replace(".<locals>.", ".")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let slug: String = slug.chars().take(32).collect();
    let slug = slug.trim_end_matches('-');
    let h = crate::keyed::hash64(0, &format!("{scope}/{}", d.key));
    format!(
        "{repo}-{slug}-{}-{:08x}",
        d.kind.as_str()[..2].to_ascii_lowercase(),
        h >> 32
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_lists_and_wrapping() {
        assert_eq!(
            [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal),
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]
        );
        assert_eq!(
            list_and(&["a".into(), "b".into(), "c".into()]),
            "a, b and c"
        );
        let w = wrap("aaa bbb ccc ddd", 7);
        assert_eq!(w, "aaa bbb\nccc ddd\n");
        assert_eq!(python_version("/usr/bin/python3.11"), "3.11");
    }

    #[test]
    fn ids_are_stable_and_readable() {
        let d = Draft {
            kind: K::S2,
            extractor: "loop_iterations",
            params: Map::new(),
            tests: vec![],
            functions: vec!["Poly.<locals>.inner".into()],
            key: "k".into(),
        };
        let id = instance_id("sympy", &d, "sympy/m.py");
        assert!(id.starts_with("sympy-poly-inner-s2-"), "{id}");
        assert_eq!(id, instance_id("sympy", &d, "sympy/m.py"));
        assert_ne!(id, instance_id("sympy", &d, "sympy/n.py"));
    }

    /// sqlglot's clickhouse module has two targets named `flatten` (helper.py and
    /// optimizer/simplify.py): the qualname → file map kept one, so the other's instances
    /// traced the wrong file and did not load (6 left out as `invalid`).
    #[test]
    fn a_target_sharing_its_qualname_with_another_traces_its_own_file() {
        let spec =
            crate::spec::parse(crate::spec::tests::GOOD, std::path::Path::new("gen.toml")).unwrap();
        let mut params = Map::new();
        params.insert("function".into(), Value::from("flatten"));
        params.insert("file".into(), Value::from("pkg/helper.py"));
        let d = Draft {
            kind: K::S1,
            extractor: "executed_path",
            params,
            tests: vec!["tests/t.py::t".into()],
            functions: vec!["flatten".into()],
            key: "k".into(),
        };
        let files_of: BTreeMap<String, String> =
            [("flatten".to_string(), "pkg/simplify.py".to_string())].into();
        let ispec = instance_spec(
            &spec.repositories[0],
            &d,
            "x",
            "{}",
            String::new(),
            &files_of,
        );
        assert!(
            ispec
                .tracing
                .files
                .iter()
                .any(|f| f.ends_with("pkg/helper.py")),
            "{:?}",
            ispec.tracing.files
        );
    }

    /// The audit found def-use gold pairing arguments with line 604 of a question about a
    /// function "defined at line 605": a decorated function's code starts at its decorator.
    #[test]
    fn def_use_of_a_decorated_function_names_its_first_line() {
        let doc: crate::facts::FactsDoc = serde_json::from_str(crate::facts::tests::DOC).unwrap();
        let ff = &doc.files["/r/pkg/m.py"];
        let func = crate::facts::FileFactsExt::function(ff, "C.f").unwrap();
        let spec =
            crate::spec::parse(crate::spec::tests::GOOD, std::path::Path::new("gen.toml")).unwrap();
        let target = Target {
            fid: 0,
            file: "pkg/m.py".into(),
            abs_file: "/r/pkg/m.py".into(),
            qualname: "C.f".into(),
            first_line: 2,
            def_line: 3,
            last_line: 9,
            tests: vec!["t.py::t".into()],
            calls: 1,
            repo_callees: 0,
            loops: 1,
            branches: 1,
            handlers: 0,
            write_lines: 1,
            statements: 4,
            estimated_events: 10,
        };
        let prose = Prose {
            repo: &spec.repositories[0],
            target: &target,
            func,
            file: ff,
        };
        let mut p = Map::new();
        p.insert("invocation".into(), 1.into());
        p.insert("uses".into(), serde_json::json!({"5": ["n"]}));
        let d = Draft {
            kind: K::S4,
            extractor: "def_use_pairs",
            params: p.clone(),
            tests: vec!["t.py::t".into()],
            functions: vec!["C.f".into()],
            key: "k".into(),
        };
        let q = prose.question(&d).replace('\n', " ");
        assert!(q.contains("defined at line 3 of"), "{q}");
        assert!(q.contains("Its arguments are defined at line 2;"), "{q}");
        // One variable reads as one.
        p.insert("variables".into(), serde_json::json!(["t"]));
        p.insert("line".into(), 4.into());
        p.insert("occurrence".into(), 1.into());
        let d = Draft {
            kind: K::S3,
            extractor: "state_at",
            params: p,
            ..d
        };
        let q = prose.question(&d).replace('\n', " ");
        assert!(
            q.contains("what is the value of the local variable `t` right after"),
            "{q}"
        );
    }
}
