//! Author an instance from a draft: the question prose (one template per extractor, stating
//! the conventions the extractor's definition uses: line numbering, what counts as an
//! invocation, an iteration, a call, a definition), the answer template, the narrowed tracing
//! config, and the test as the repository's own node ids, referenced in the image.
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

/// "In sympy 1.13.3's own test suite (Python 3.11), run the test `…` by itself."
fn run_clause(repo: &RepoSpec, d: &Draft) -> String {
    if crate::runtime::calls_only(repo) {
        return crate::calls_only::run_clause(repo, d);
    }
    let (name, version) = repo.name_version();
    let py = python_version(&repo.interpreter);
    let tests: Vec<String> = d.tests.iter().map(|t| code(t)).collect();
    // Installed packages (the root holds the package) or a source tree (`src/pkg/`).
    let from = match repo.code.first().map(|c| c.trim_end_matches('/')) {
        Some(c) if !c.contains('/') => format!("the directory that holds the `{c}` package"),
        _ => "the top directory of its source tree".to_string(),
    };
    if d.kind.as_str().starts_with('S') {
        format!(
            "Take {name} {version}'s own test suite (Python {py}) and run the test {} by \
             itself with pytest, from {from} (test ids and file paths here are relative to \
             it).",
            tests[0]
        )
    } else {
        format!(
            "Take {name} {version}'s own test suite (Python {py}) and run these {} tests \
             together with pytest, in this order: {} (test ids and file paths are relative \
             to {from}).",
            tests.len(),
            list_and(&tests)
        )
    }
}

fn callee_note(within: &str) -> String {
    format!(
        "Only functions defined in files under {} count. A direct call is a call made by \
         the function's own frame; calls made through built-ins (`map`, `sorted(key=...)`, \
         ...) count as made by it, and comprehensions, generator expressions and lambdas \
         are functions like any other (named like `f.<locals>.<genexpr>`). Resuming a \
         generator is not a call. Functions are named by their qualified name \
         (`__qualname__`, e.g. `Class.method`).",
        code(within)
    )
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

impl Prose<'_> {
    /// "`Class.method`, defined at line 12 of `pkg/mod.py`"
    fn function(&self) -> String {
        format!(
            "{}, defined at line {} of {}",
            code(&self.target.qualname),
            self.func.def_line,
            code(&self.target.file)
        )
    }

    fn invocation(&self, p: &Map<String, Value>, single: bool) -> String {
        let n = int(p, "invocation");
        let during = if single { " in that test" } else { "" };
        if n == 1 {
            format!("its first invocation{during}")
        } else {
            format!(
                "its {} invocation{during} (invocations counted in the order they start)",
                ordinal(n)
            )
        }
    }

    fn lines_note(&self) -> String {
        format!(
            "Line numbers are absolute line numbers of {}. Lines are the ones Python's line \
             tracing reports: a statement spanning several lines may report more than one of \
             them, and the same line again (a call spanning lines reports its first line, then \
             its argument lines, then its first line again as the call is made); lines of the \
             functions it calls are not its lines (nor are those of {}, which run in frames of \
             their own).",
            code(&self.target.file),
            if python_version(&self.repo.interpreter) == "3.11" {
                "lambdas, generator expressions and comprehensions"
            } else {
                "lambdas and generator expressions"
            }
        )
    }

    fn values_note(&self) -> &'static str {
        "Values are given as `repr()` strings, as a bounded tracer renders them: a repr longer \
         than 200 characters is cut to 200 and ends in `...`, containers nested deeper than 3 \
         levels show `...`, dict keys keep insertion order, and memory addresses show as `0x?` \
         (`<Foo object at 0x?>`)."
    }

    fn loop_clause(&self, p: &Map<String, Value>) -> String {
        let header = int(p, "header") as u32;
        let body_end = int(p, "body_end");
        let l = self.file.loops.iter().find(|l| l.line == header);
        let kw = match l.map(|l| l.kind.as_str()) {
            Some("while") => "while",
            Some("async_for") => "async for",
            _ => "for",
        };
        let first = l
            .map(|l| l.body_first_line)
            .filter(|&b| b > 0)
            .unwrap_or(header + 1);
        format!(
            "the `{kw}` loop whose header is line {header} (its body: lines {first} to \
             {body_end}, not counting any `else:` clause)"
        )
    }

    fn iteration_note(&self) -> &'static str {
        "An iteration is one evaluation of the loop header that is followed by the execution of \
         a line of its body: the final evaluation that ends the loop is not an iteration, and a \
         `break` or `return` in the body ends the last one. Every entry into the loop counts."
    }

    fn uses_clause(&self, p: &Map<String, Value>) -> (Vec<String>, String) {
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
                    "{} is read at line{} {}",
                    code(v),
                    if ls.len() > 1 { "s" } else { "" },
                    list_and(&ls)
                )
            })
            .collect();
        (vars, parts.join("; "))
    }

    /// Arguments are defined at the code object's first line: for a decorated function that
    /// is its first decorator's line, not the `def` line the question names it by.
    fn def_use_note(&self) -> String {
        let at = if self.func.first_line != self.func.def_line && self.func.first_line > 0 {
            format!(
                "at line {} for its arguments (the first line of its definition: its first \
                 decorator's, not the `def` line)",
                self.func.first_line
            )
        } else {
            "at the function's `def` line for its arguments".to_string()
        };
        format!(
            "A variable is defined {at}, and at a line L when executing L changes its value (its \
             repr): an assignment that leaves the value unchanged is not a new definition, and \
             the earlier one stays current. Each execution of a use line pairs the variable with \
             its current definition line; a line's uses are taken before its own definitions, so \
             `x += 1` uses the previous definition of `x` and then defines it."
        )
    }

    fn invariants_note(&self) -> &'static str {
        "Over the observations: `observations` is their number; `types` the distinct type \
         names (`type(v).__name__`), sorted; `single_type` whether there is exactly one; \
         `non_negative` whether every value is an int or float >= 0; `constant` whether all \
         reprs are equal; `monotonic` is \"constant\" if constant, else \"non_decreasing\" or \
         \"non_increasing\" if every value is an int or float and each is >= (or <=) the one \
         before, else \"none\"."
    }

    fn exception_scope(&self, d: &Draft) -> String {
        let fs: Vec<String> = d.functions.iter().map(|f| code(f)).collect();
        format!(
            "The exception is followed only through the frames of {} (the functions traced \
             line by line): if it propagates out of them it counts as not handled (null \
             handler), and `unwound` lists the frames of these functions it exits, innermost \
             first. An exception raised by a built-in (C) function counts as raised by the \
             Python function that called it; one that propagates into the function from a \
             callee is not raised there.",
            list_and(&fs)
        )
    }

    /// The question for `d`.
    pub fn question(&self, d: &Draft) -> String {
        let p = &d.params;
        let run = run_clause(self.repo, d);
        let f = self.function();
        let body = match (d.kind, d.extractor) {
            (K::S1, "executed_path") => format!(
                "Which lines of {f} execute during {}, in execution order? Give one entry per \
                 executed line: a line executed k times appears k times. {}",
                self.invocation(p, true),
                self.lines_note()
            ),
            (K::S1, _) => format!(
                "Which lines of {f} execute at least once during that test, over all its \
                 invocations? Give them sorted ascending, each once. {}",
                self.lines_note()
            ),
            (K::S2, _) => format!(
                "How many iterations does {} of {f} perform in {}? {} {}",
                self.loop_clause(p),
                self.invocation(p, true),
                self.iteration_note(),
                self.lines_note()
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
                let occ = int(p, "occurrence");
                format!(
                    "In {} of {f}, what {} right after line {} executes for the {} time (the \
                     frame's state when its next line starts, or when it returns)? {} {}",
                    self.invocation(p, true),
                    if vars.len() == 1 {
                        format!("is the value of the local variable {}", vars[0])
                    } else {
                        format!("are the values of the local variables {}", list_and(&vars))
                    },
                    int(p, "line"),
                    if occ == 1 {
                        "first".to_string()
                    } else {
                        ordinal(occ)
                    },
                    self.values_note(),
                    self.lines_note()
                )
            }
            (K::S4, _) => {
                let (vars, uses) = self.uses_clause(p);
                format!(
                    "Which runtime def-use pairs of {} occur in {} of {f}, and how often each? \
                     Only these reads count as uses: {uses}. {} Report every (variable, \
                     def_line, use_line) pair with the number of times it occurs, sorted by \
                     variable, then def_line, then use_line. {}",
                    list_and(&vars),
                    self.invocation(p, true),
                    self.def_use_note(),
                    self.lines_note()
                )
            }
            (K::S5, _) => {
                let occ = int(p, "occurrence");
                format!(
                    "During that test, consider the {} exception of type {} raised in {f}. What \
                     is its type, its message (`str()` of the exception; a message longer than 200 \
                     characters is cut to 200 and ends in `...`), the function it is raised in and the line of the raise, the function that handles it and the \
                     line of the matching `except` clause, and the functions whose frames it \
                     exits on the way? {} {}",
                    if occ == 1 { "first".to_string() } else { ordinal(occ) },
                    code(s(p, "type")),
                    self.exception_scope(d),
                    self.lines_note()
                )
            }
            (K::S6, "call_sequence") => format!(
                "Which functions does {f} call directly during {}, in the order of the calls? \
                 {} For each call give the callee and the line of {} it is made from (the line \
                 executing when the call starts). {}",
                self.invocation(p, true),
                callee_note(s(p, "within")),
                code(&self.target.qualname),
                self.lines_note()
            ),
            (K::S6, _) => format!(
                "Which functions does {f} call directly during {}, and how many times each? \
                 {} List each callee once with its number of calls, sorted by name.",
                self.invocation(p, true),
                callee_note(s(p, "within"))
            ),
            (K::S7, _) => format!(
                "Observe the value of the local variable {} of {f} right after each execution \
                 of line {} during that test (in every invocation, in execution order; \
                 executions where it is unbound are skipped). {} {} {}",
                code(s(p, "variable")),
                int(p, "line"),
                self.invariants_note(),
                self.values_note(),
                self.lines_note()
            ),
            (K::M1, _) if p.contains_key("line") => format!(
                "Which of these tests execute line {} of {f}? `covering_tests`: the tests in \
                 which it executes at least once; `non_covering_tests`: the others; both in the \
                 order given. {}",
                int(p, "line"),
                self.lines_note()
            ),
            (K::M1, _) => format!(
                "For each of these tests, in the order given, which lines of {f} execute while \
                 the test runs (sorted ascending, each once; an empty list for a test that \
                 never runs it)? {}",
                self.lines_note()
            ),
            (K::M2, _) => format!(
                "For each of these tests, count the iterations of {} of {f} over all its \
                 invocations during the test. {} Over the tests in which the loop's header \
                 line executes, what are the smallest and the largest of these totals, and \
                 which tests attain each (in the order given)? {}",
                self.loop_clause(p),
                self.iteration_note(),
                self.lines_note()
            ),
            (K::M3, _) => format!(
                "For each of these tests in which line {} of {f} executes, what is the value \
                 of the local variable {} right after the line's first execution in that test \
                 (the frame's state when its next line starts, or when it returns)? Give the \
                 tests in the order given, leaving out tests that never reach the line. {} {}",
                int(p, "line"),
                code(s(p, "variable")),
                self.values_note(),
                self.lines_note()
            ),
            (K::M4, _) => {
                let (vars, uses) = self.uses_clause(p);
                format!(
                    "Which runtime def-use pairs of {} occur in any invocation of {f} during \
                     these tests, and in which tests? Only these reads count as uses: {uses}. \
                     {} Report every (variable, def_line, use_line) pair observed, with the \
                     tests in which it is observed (in the order given), sorted by variable, \
                     def_line, use_line. {}",
                    list_and(&vars),
                    self.def_use_note(),
                    self.lines_note()
                )
            }
            (K::M5, _) => format!(
                "In which of these tests is an exception of type {} raised in {f} (by its own \
                 code, or by a built-in function it calls; an exception that only propagates \
                 through it from a function it calls does not count)? `crashing_tests`: those \
                 tests; `safe_tests`: the others; both in the order given.",
                code(s(p, "type"))
            ),
            (K::M6, _) => format!(
                "For each of these tests in which {f} runs (in the order given), which \
                 functions does it call directly, over all its invocations during the test? \
                 {} Give each test's callees sorted by name, each once.",
                callee_note(s(p, "within"))
            ),
            (K::M7, _) => format!(
                "Observe the value of the local variable {} of {f} right after each execution \
                 of line {} during these tests (every invocation, in execution order; \
                 executions where it is unbound are skipped). {} Here `observations`, `types`, \
                 `single_type`, `non_negative` and `constant` are over all the tests' \
                 observations together, while `monotonic` is decided per test and combined: \
                 \"constant\" if every test's sequence is constant, \"non_decreasing\" if each \
                 is constant or non_decreasing, likewise \"non_increasing\", else \"none\". \
                 `tests` lists the tests with at least one observation, in the order given. {} \
                 {}",
                code(s(p, "variable")),
                int(p, "line"),
                self.invariants_note(),
                self.values_note(),
                self.lines_note()
            ),
        };
        wrap(&format!("{run} {body}"), 96)
    }
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
    let within = s(&d.params, "within");
    if crate::runtime::calls_only(repo) {
        return wrap(
            &format!(
                "{} While that test method runs, which methods of the project's classes call \
                 which other such methods directly? Give the dynamic call graph as a map from \
                 each calling method to the sorted list of the distinct methods it calls \
                 directly, its keys sorted; a method that calls none of them is not a key. {}",
                run_clause(repo, d),
                crate::calls_only::callee_note(within, true)
            ),
            96,
        );
    }
    wrap(
        &format!(
            "{} While that test runs (its setup and teardown included), which functions defined \
             in files under {} call which other such functions directly? Give the dynamic call \
             graph as a map from each calling function to the sorted list of the distinct \
             functions it calls directly, its keys sorted; a function that calls none of them is \
             not a key, and neither is a call from or to a function defined elsewhere. {}",
            run_clause(repo, d),
            code(within),
            callee_note(within)
        ),
        96,
    )
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
        assert!(q.contains("defined at line 2 for its arguments"), "{q}");
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
