//! Author an instance from a draft: the question prose (one template per extractor, [`question`],
//! saying in plain words what to compute; the conventions it relies on — line numbering, what
//! counts as an invocation, an iteration, a call, a definition — are its kind's preamble,
//! `flux_instance::preamble`, which the instance names), the answer template, the narrowed
//! tracing config, and the test as the repository's own node ids, referenced in the image.
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
    if crate::runtime::calls_only(repo) {
        return crate::calls_only::run_clause(repo, a);
    }
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

/// `(variables, "of `x` at lines 3 and 5; of `y` at line 4")`: the reads that count as uses.
fn uses_clause(p: &Map<String, Value>) -> (Vec<String>, String) {
    let mut by_var: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    if let Some(Value::Object(m)) = p.get("uses") {
        for (line, names) in m {
            let l: u64 = line.parse().unwrap_or(0);
            for n in names
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                by_var.entry(n.to_string()).or_default().push(l);
            }
        }
    }
    let vars: Vec<String> = by_var.keys().map(|v| code(v)).collect();
    let parts: Vec<String> = by_var
        .iter()
        .map(|(v, ls)| {
            let mut ls = ls.clone();
            ls.sort();
            let ls: Vec<String> = ls.iter().map(u64::to_string).collect();
            format!(
                "of {} at line{} {}",
                code(v),
                if ls.len() > 1 { "s" } else { "" },
                list_and(&ls)
            )
        })
        .collect();
    (vars, parts.join("; "))
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

/// The question of `a` about `t`: what to compute, in plain words, under the conventions of
/// its kind's preamble (`flux_instance::preamble`), which it must not repeat. One arm per
/// kind and extractor (the kind's prose, all of it).
pub fn question(repo: &RepoSpec, t: &Subject, a: &Ask) -> String {
    if crate::runtime::calls_only(repo) {
        return crate::calls_only::question(repo, a);
    }
    let p = a.params;
    if a.extractor == "call_graph" {
        return wrap(
            &format!(
                "{} What is the test's dynamic call graph among the functions defined in files \
                 under {}?",
                run_clause(repo, a),
                within(p)
            ),
            96,
        );
    }
    let f = format!(
        "{} (defined at line {} of {})",
        code(&t.qualname),
        t.def_line,
        code(&t.file)
    );
    let inv = format!("its {} invocation", nth(int(p, "invocation")));
    let the_loop = || {
        let (kw, first) = t.loop_head.clone().unwrap_or(("for".into(), 0));
        format!(
            "the `{kw}` loop at line {} (body: lines {first} to {})",
            int(p, "header"),
            int(p, "body_end")
        )
    };
    let args = format!("Its arguments are defined at line {}", t.first_line);
    let body = match (a.kind, a.extractor) {
        (K::S1, "executed_path") => {
            format!("Which lines of {f} execute during {inv}, in execution order?")
        }
        (K::S1, _) => format!("Which lines of {f} are covered during the test?"),
        (K::S2, _) => format!(
            "How many iterations does {} of {f} perform in {inv}?",
            the_loop()
        ),
        (K::S3, _) => {
            let vars: Vec<String> = p
                .get("variables")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(code)
                .collect();
            format!(
                "In {inv} of {f}, what {} right after line {} executes for the {} time?",
                if vars.len() == 1 {
                    format!("is the value of the local variable {}", vars[0])
                } else {
                    format!("are the values of the local variables {}", list_and(&vars))
                },
                int(p, "line"),
                nth(int(p, "occurrence"))
            )
        }
        (K::S4, _) => {
            let (vars, uses) = uses_clause(p);
            format!(
                "Which def-use pairs of {} occur in {inv} of {f}, and how often each? {args}; \
                 the uses are the reads {uses}.",
                list_and(&vars)
            )
        }
        (K::S5, _) => {
            let mut fs: Vec<String> = a.functions.iter().map(|f| code(f)).collect();
            fs.sort();
            format!(
                "Take the {} exception of type {} raised in {f} during the test, followed through \
                 the frames of {}. What are its type and message, the function and line raising \
                 it, the function handling it and the line of its `except` clause, and the \
                 frames it unwinds?",
                nth(int(p, "occurrence")),
                code(s(p, "type")),
                list_and(&fs)
            )
        }
        (K::S6, "call_sequence") => format!(
            "Which functions defined under {} does {f} call directly during {inv}, in call \
             order, and from which of its lines?",
            within(p)
        ),
        (K::S6, _) => format!(
            "Which functions defined under {} does {f} call directly during {inv}, and how many \
             times each?",
            within(p)
        ),
        (K::S7, _) => format!(
            "Observe the local variable {} of {f} right after each execution of line {} during \
             the test. What are the invariants of these observations?",
            code(s(p, "variable")),
            int(p, "line")
        ),
        (K::M1, _) if p.contains_key("line") => format!(
            "Which of these tests execute line {} of {f}?",
            int(p, "line")
        ),
        (K::M1, _) => format!("For each test, which lines of {f} are covered while it runs?"),
        (K::M2, _) => format!(
            "For each test, count the iterations of {} of {f} over all its invocations. What \
             are the smallest and the largest totals, and which tests attain each?",
            the_loop()
        ),
        (K::M3, _) => format!(
            "For each test in which line {} of {f} executes, what is the value of the local \
             variable {} right after the line's first execution in that test?",
            int(p, "line"),
            code(s(p, "variable"))
        ),
        (K::M4, _) => {
            let (vars, uses) = uses_clause(p);
            format!(
                "Which def-use pairs of {} occur in {f} during these tests, and in which tests? \
                 {args}; the uses are the reads {uses}.",
                list_and(&vars)
            )
        }
        (K::M5, _) => format!(
            "In which of these tests is an exception of type {} raised in {f}?",
            code(s(p, "type"))
        ),
        (K::M6, _) => format!(
            "For each test in which {f} runs, which functions defined under {} does it call \
             directly?",
            within(p)
        ),
        (K::M7, _) => format!(
            "Observe the local variable {} of {f} right after each execution of line {} during \
             these tests. What are the invariants of these observations, over all the tests?",
            code(s(p, "variable")),
            int(p, "line")
        ),
    };
    wrap(&format!("{} {body}", run_clause(repo, a)), 96)
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
            extractor: "branch_outcomes",
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
