//! Extractors: named pure functions from a merged [`Trace`] and parameters to a gold JSON answer.
//!
//! Why a crate of its own: the gold answer of every flux instance is *harvested* by applying one
//! named extractor to the trace of an instrumented test run, and the question prose quotes the
//! extractor's conventions. Keeping the extractors pure (no I/O, no clock, no randomness) makes a
//! gold answer a function of the trace alone, so it can be re-derived and audited.
//!
//! Entry points: [`extractors`] (the registry, with each extractor's exact definition in
//! [`Extractor::doc`]), [`extract`] (validate the parameters, refuse an incomplete trace, run),
//! [`QuestionKind`] and [`answer_size`] (the screening gate).
//!
//! Conventions shared by all extractors (see `flux_trace::query` for the trace-level ones):
//! - `function` is a qualified name (`Add.flatten`, `outer.<locals>.inner`), matched exactly
//!   against `co_qualname`. `invocation` counts that function's frames from 1 in order of their
//!   first call, after the `test` and `file` filters are applied.
//! - Line numbers in parameters are always absolute line numbers of the source file. Line numbers
//!   in answers are absolute unless `normalize = "relative"`, which reports `line - def_line + 1`
//!   (the function's first line is 1); `def_line` is the line of the frame's first `call` event
//!   (CPython reports `co_firstlineno`: the first decorator line for a decorated function) unless
//!   the `def_line` parameter gives it.
//! - Values are the tracer's bounded `repr` strings; a variable's value "after line L" is the
//!   frame's state at its next `line` or `return` event after that execution of L.
//! - Test lists are in the order the tests started in the trace; events outside any test are
//!   ignored by the across-tests (M) extractors.
//!
//! Architecture invariant: this crate reads nothing but its arguments; it does not know about
//! instance files, containers or the agent.
use flux_trace::Trace;
use serde_json::{Map, Value};

mod calls;
mod cfg;
mod common;
mod dataflow;
mod exceptions;
mod kinds;
mod loops;
mod params;
mod state;
pub mod testkit;

pub use dataflow::uses_from_source;
pub use kinds::{answer_size, QuestionKind};
pub use params::Params;

/// Why an extractor could not produce an answer. Every message names what was asked for and
/// what the trace holds, so a failed harvest can be fixed from the message alone.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("unknown extractor `{name}`; known extractors: {known}")]
    UnknownExtractor { name: String, known: String },
    #[error("unknown parameter `{param}`; allowed: {allowed}")]
    UnknownParam { param: String, allowed: String },
    #[error("missing required parameter `{param}`")]
    MissingParam { param: String },
    #[error("parameter `{param}`: expected {expected}, got {got}")]
    BadParam {
        param: String,
        expected: &'static str,
        got: String,
    },
    #[error("parameters must be a JSON object, got {got}")]
    ParamsNotObject { got: String },
    #[error(
        "function `{function}` has {count} invocation(s){scope}; invocation {asked} was asked for"
    )]
    NoInvocation {
        function: String,
        count: usize,
        asked: usize,
        scope: String,
    },
    /// The trace does not show what the parameters ask about (a line never executed, a variable
    /// never bound, no exception of that type).
    #[error("{0}")]
    NotObserved(String),
    #[error("the trace is incomplete ({problems}); no gold answer may be taken from it")]
    Incomplete { problems: String },
    #[error("extractor `{extractor}`: {source}")]
    In {
        extractor: String,
        #[source]
        source: Box<ExtractError>,
    },
}

/// An extractor's entry point.
pub type ExtractFn = fn(&Trace, &Params) -> Result<Value, ExtractError>;

/// One parameter an extractor accepts.
#[derive(Clone, Copy, Debug)]
pub struct ParamDoc {
    pub name: &'static str,
    pub required: bool,
    pub doc: &'static str,
}

/// A registered extractor.
#[derive(Clone, Copy, Debug)]
pub struct Extractor {
    pub name: &'static str,
    /// The question kinds it serves.
    pub kinds: &'static [QuestionKind],
    /// Its exact definition, quotable in question prose.
    pub doc: &'static str,
    pub params: &'static [ParamDoc],
    /// The answer template (JSON text with type names as leaves) for the given parameters.
    pub template: fn(&Params) -> &'static str,
    pub run: ExtractFn,
    /// It reads only what runs inside activations of its `function` / `raised_in` (or of any
    /// traced code), so a trace with `[tracing] scope = "targets"` answers it exactly when the
    /// config targets that function. `call_graph` reads calls made anywhere: it does not.
    pub targets_scope: bool,
}

/// The registry of every extractor, in kind order.
pub fn extractors() -> &'static [Extractor] {
    REGISTRY
}

/// The extractor called `name`.
pub fn find(name: &str) -> Option<&'static Extractor> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// The extractors that serve `kind`.
pub fn for_kind(kind: QuestionKind) -> Vec<&'static Extractor> {
    REGISTRY
        .iter()
        .filter(|e| e.kinds.contains(&kind))
        .collect()
}

/// Check `params` against the extractor's declared parameters (names and presence; values are
/// checked when it runs), without a trace.
pub fn check_params(name: &str, params: &Params) -> Result<&'static Extractor, ExtractError> {
    let ex = find(name).ok_or_else(|| ExtractError::UnknownExtractor {
        name: name.to_string(),
        known: REGISTRY
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let wrap = |source| ExtractError::In {
        extractor: name.to_string(),
        source: Box::new(source),
    };
    for key in params.keys() {
        if !ex.params.iter().any(|p| p.name == key) {
            return Err(wrap(ExtractError::UnknownParam {
                param: key.to_string(),
                allowed: ex
                    .params
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            }));
        }
    }
    for p in ex.params.iter().filter(|p| p.required) {
        if !params.contains(p.name) {
            return Err(wrap(ExtractError::MissingParam {
                param: p.name.to_string(),
            }));
        }
    }
    Ok(ex)
}

/// Run the extractor `name` on `trace`: check the parameters, refuse an incomplete trace, and
/// return the answer. Errors name the extractor.
pub fn extract(trace: &Trace, name: &str, params: &Params) -> Result<Value, ExtractError> {
    let ex = check_params(name, params)?;
    if !trace.meta.complete {
        let problems = if trace.meta.problems.is_empty() {
            "meta.complete is false".to_string()
        } else {
            trace.meta.problems.join("; ")
        };
        return Err(ExtractError::Incomplete { problems });
    }
    (ex.run)(trace, params).map_err(|source| ExtractError::In {
        extractor: name.to_string(),
        source: Box::new(source),
    })
}

/// Parameters from a JSON object (convenience for callers holding a `serde_json::Value`).
pub fn params(v: Value) -> Result<Params, ExtractError> {
    match v {
        Value::Object(m) => Ok(Params::new(m)),
        other => Err(ExtractError::ParamsNotObject {
            got: other.to_string(),
        }),
    }
}

/// Empty parameters.
pub fn no_params() -> Params {
    Params::new(Map::new())
}

use QuestionKind as K;

const P_FUNCTION: ParamDoc = ParamDoc {
    name: "function",
    required: true,
    doc: "qualified name of the target function (co_qualname), e.g. `Add.flatten`",
};
const P_INVOCATION: ParamDoc = ParamDoc {
    name: "invocation",
    required: false,
    doc: "which invocation (frame) of the function, from 1 in order of first call; default 1",
};
const P_TEST: ParamDoc = ParamDoc {
    name: "test",
    required: false,
    doc: "only frames first called in this pytest test (node id, or a suffix after `::` or `/`)",
};
const P_FILE: ParamDoc = ParamDoc {
    name: "file",
    required: false,
    doc: "only functions whose source file lies under this path (component-boundary match)",
};
const P_NORMALIZE: ParamDoc = ParamDoc {
    name: "normalize",
    required: false,
    doc: "`absolute` (default) or `relative` line numbers in the answer (def line = 1)",
};
const P_DEF_LINE: ParamDoc = ParamDoc {
    name: "def_line",
    required: false,
    doc: "absolute line of the function's first line, for `relative`; default: the first call event's line",
};
const P_LINE: ParamDoc = ParamDoc {
    name: "line",
    required: true,
    doc: "absolute source line",
};
const P_OCCURRENCE: ParamDoc = ParamDoc {
    name: "occurrence",
    required: false,
    doc: "which execution of the line, from 1; default 1",
};
const P_HEADER: ParamDoc = ParamDoc {
    name: "header",
    required: true,
    doc: "absolute line of the loop header (`for ...:` / `while ...:`)",
};
const P_BODY_END: ParamDoc = ParamDoc {
    name: "body_end",
    required: true,
    doc: "absolute last line of the loop body (excluding any `else:` clause); must be > header",
};
const P_VARIABLE: ParamDoc = ParamDoc {
    name: "variable",
    required: true,
    doc: "name of a local variable of the function",
};
const P_USES: ParamDoc = ParamDoc {
    name: "uses",
    required: false,
    doc: "object mapping absolute line (as a string) to the local names the line reads; \
          give this or `source`",
};
const P_SOURCE: ParamDoc = ParamDoc {
    name: "source",
    required: false,
    doc: "source text of the function (or file); uses are computed by `uses_from_source`",
};
const P_SOURCE_FIRST_LINE: ParamDoc = ParamDoc {
    name: "source_first_line",
    required: false,
    doc: "absolute line number of the first line of `source`; default 1",
};
const P_WITHIN: ParamDoc = ParamDoc {
    name: "within",
    required: false,
    doc: "only callees (and, for call_graph, callers) whose file lies under this path",
};
const P_TYPE: ParamDoc = ParamDoc {
    name: "type",
    required: false,
    doc: "exception type: equal to the traced type or to its last dotted component",
};
const P_RAISED_IN: ParamDoc = ParamDoc {
    name: "raised_in",
    required: false,
    doc: "only exceptions raised in this function (qualname)",
};

static REGISTRY: &[Extractor] = &[
    Extractor {
        name: "executed_path",
        kinds: &[K::S1],
        doc: cfg::EXECUTED_PATH,
        params: &[P_FUNCTION, P_INVOCATION, P_TEST, P_FILE, P_NORMALIZE, P_DEF_LINE],
        template: |_| r#"{"executed_path": [{"line": "int"}]}"#,
        run: cfg::executed_path,
        targets_scope: true,
    },
    Extractor {
        name: "covered_lines",
        kinds: &[K::S1],
        doc: cfg::COVERED_LINES,
        params: &[P_FUNCTION, P_TEST, P_FILE, P_NORMALIZE, P_DEF_LINE],
        template: |_| r#"{"covered_lines": ["int"]}"#,
        run: cfg::covered_lines,
        targets_scope: true,
    },
    Extractor {
        name: "coverage_across_tests",
        kinds: &[K::M1],
        doc: cfg::COVERAGE_ACROSS_TESTS,
        params: &[
            P_FUNCTION,
            P_FILE,
            P_NORMALIZE,
            P_DEF_LINE,
            ParamDoc {
                name: "line",
                required: false,
                doc: "if given, answer which tests execute this absolute line instead",
            },
        ],
        template: |p| {
            if p.contains("line") {
                r#"{"covering_tests": ["str"], "non_covering_tests": ["str"]}"#
            } else {
                r#"{"coverage": [{"test": "str", "lines": ["int"]}]}"#
            }
        },
        run: cfg::coverage_across_tests,
        targets_scope: true,
    },
    Extractor {
        name: "loop_iterations",
        kinds: &[K::S2],
        doc: loops::LOOP_ITERATIONS,
        params: &[
            P_FUNCTION,
            P_INVOCATION,
            P_TEST,
            P_FILE,
            P_HEADER,
            P_BODY_END,
            ParamDoc {
                name: "entry",
                required: false,
                doc: "count only the Nth entry into the loop (from 1); default: all entries",
            },
        ],
        template: |_| r#"{"loop_iteration_count": "int"}"#,
        run: loops::loop_iterations,
        targets_scope: true,
    },
    Extractor {
        name: "loop_iterations_across_tests",
        kinds: &[K::M2],
        doc: loops::LOOP_ITERATIONS_ACROSS_TESTS,
        params: &[P_FUNCTION, P_FILE, P_HEADER, P_BODY_END],
        template: |_| {
            r#"{"min_iterations": "int", "max_iterations": "int", "tests_with_min": ["str"], "tests_with_max": ["str"]}"#
        },
        run: loops::loop_iterations_across_tests,
        targets_scope: true,
    },
    Extractor {
        name: "state_at",
        kinds: &[K::S3],
        doc: state::STATE_AT,
        params: &[
            P_FUNCTION,
            P_INVOCATION,
            P_TEST,
            P_FILE,
            P_LINE,
            P_OCCURRENCE,
            ParamDoc {
                name: "variables",
                required: false,
                doc: "names of the variables to report, in answer order; default: every bound local, by name",
            },
        ],
        template: |_| r#"{"observed_state": [{"variable": "str", "value": "str"}]}"#,
        run: state::state_at,
        targets_scope: true,
    },
    Extractor {
        name: "state_across_tests",
        kinds: &[K::M3],
        doc: state::STATE_ACROSS_TESTS,
        params: &[P_FUNCTION, P_FILE, P_LINE, P_OCCURRENCE, P_VARIABLE],
        template: |_| r#"{"observed_states": [{"test": "str", "value": "str"}]}"#,
        run: state::state_across_tests,
        targets_scope: true,
    },
    Extractor {
        name: "def_use_pairs",
        kinds: &[K::S4],
        doc: dataflow::DEF_USE_PAIRS,
        params: &[
            P_FUNCTION,
            P_INVOCATION,
            P_TEST,
            P_FILE,
            P_NORMALIZE,
            P_DEF_LINE,
            P_USES,
            P_SOURCE,
            P_SOURCE_FIRST_LINE,
        ],
        template: |_| {
            r#"{"observed_def_use_pairs": [{"variable": "str", "def_line": "int", "use_line": "int", "count": "int"}]}"#
        },
        run: dataflow::def_use_pairs,
        targets_scope: true,
    },
    Extractor {
        name: "def_use_across_tests",
        kinds: &[K::M4],
        doc: dataflow::DEF_USE_ACROSS_TESTS,
        params: &[
            P_FUNCTION,
            P_FILE,
            P_NORMALIZE,
            P_DEF_LINE,
            P_USES,
            P_SOURCE,
            P_SOURCE_FIRST_LINE,
            ParamDoc {
                name: "variable",
                required: false,
                doc: "only pairs of this variable",
            },
        ],
        template: |_| {
            r#"{"def_use_pairs": [{"variable": "str", "def_line": "int", "use_line": "int", "tests": ["str"]}]}"#
        },
        run: dataflow::def_use_across_tests,
        targets_scope: true,
    },
    Extractor {
        name: "exception_info",
        kinds: &[K::S5],
        doc: exceptions::EXCEPTION_INFO,
        params: &[P_TYPE, P_RAISED_IN, P_TEST, P_OCCURRENCE],
        template: |_| {
            r#"{"exception": {"type": "str", "message": "str", "raised_in": "str", "raise_line": "int", "handled_in": "str|null", "handler_line": "int|null", "unwound": ["str"]}}"#
        },
        run: exceptions::exception_info,
        targets_scope: true,
    },
    Extractor {
        name: "raising_tests",
        kinds: &[K::M5],
        doc: exceptions::RAISING_TESTS,
        params: &[
            ParamDoc {
                name: "type",
                required: true,
                doc: "exception type: equal to the traced type or to its last dotted component",
            },
            P_RAISED_IN,
            ParamDoc {
                name: "uncaught",
                required: false,
                doc: "if true, count only exceptions that no traced frame handles; default false",
            },
        ],
        template: |_| r#"{"crashing_tests": ["str"], "safe_tests": ["str"]}"#,
        run: exceptions::raising_tests,
        targets_scope: true,
    },
    Extractor {
        name: "call_sequence",
        kinds: &[K::S6],
        doc: calls::CALL_SEQUENCE,
        params: &[P_FUNCTION, P_INVOCATION, P_TEST, P_FILE, P_WITHIN, P_NORMALIZE, P_DEF_LINE],
        template: |_| r#"{"call_sequence": [{"function": "str", "line": "int"}]}"#,
        run: calls::call_sequence,
        targets_scope: true,
    },
    Extractor {
        name: "callees_count",
        kinds: &[K::S6],
        doc: calls::CALLEES_COUNT,
        params: &[P_FUNCTION, P_INVOCATION, P_TEST, P_FILE, P_WITHIN],
        template: |_| r#"{"callees": [{"function": "str", "count": "int"}]}"#,
        run: calls::callees_count,
        targets_scope: true,
    },
    Extractor {
        name: "callees_across_tests",
        kinds: &[K::M6],
        doc: calls::CALLEES_ACROSS_TESTS,
        params: &[P_FUNCTION, P_FILE, P_WITHIN],
        template: |_| r#"{"callees_per_test": [{"test": "str", "callees": ["str"]}]}"#,
        run: calls::callees_across_tests,
        targets_scope: true,
    },
    Extractor {
        name: "call_graph",
        kinds: &[K::S6, K::M6],
        doc: calls::CALL_GRAPH,
        params: &[
            P_WITHIN,
            P_TEST,
            ParamDoc {
                name: "qualify",
                required: false,
                doc: "`qualname` (default) or `module`: prefix names with their module",
            },
        ],
        template: |_| r#"{"call_graph": {"*": ["str"]}}"#,
        run: calls::call_graph,
        targets_scope: false,
    },
    Extractor {
        name: "invariants_in_test",
        kinds: &[K::S7],
        doc: state::INVARIANTS_IN_TEST,
        params: &[P_FUNCTION, P_TEST, P_FILE, P_LINE, P_VARIABLE],
        template: |_| {
            r#"{"invariants": {"observations": "int", "types": ["str"], "single_type": "bool", "non_negative": "bool", "monotonic": "str", "constant": "bool"}}"#
        },
        run: state::invariants_in_test,
        targets_scope: true,
    },
    Extractor {
        name: "invariants_across_tests",
        kinds: &[K::M7],
        doc: state::INVARIANTS_ACROSS_TESTS,
        params: &[P_FUNCTION, P_FILE, P_LINE, P_VARIABLE],
        template: |_| {
            r#"{"invariants": {"observations": "int", "types": ["str"], "single_type": "bool", "non_negative": "bool", "monotonic": "str", "constant": "bool"}, "tests": ["str"]}"#
        },
        run: state::invariants_across_tests,
        targets_scope: true,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::TraceBuilder;
    use serde_json::json;

    #[test]
    fn every_kind_has_an_extractor_and_names_are_unique() {
        for k in QuestionKind::ALL {
            assert!(!for_kind(k).is_empty(), "no extractor for {k}");
        }
        let mut names: Vec<_> = extractors().iter().map(|e| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), extractors().len());
        for e in extractors() {
            let t: Value = serde_json::from_str((e.template)(&no_params())).unwrap();
            assert!(t.is_object(), "{}", e.name);
            assert!(!e.doc.is_empty());
        }
    }

    #[test]
    fn extract_checks_names_params_and_completeness() {
        let t = TraceBuilder::new()
            .call("f", 1, &[])
            .line(2, &[])
            .ret("None")
            .build();
        let err = extract(&t, "nope", &no_params()).unwrap_err();
        assert!(
            err.to_string().contains("unknown extractor `nope`"),
            "{err}"
        );
        let err = extract(&t, "executed_path", &params(json!({"fn": "f"})).unwrap()).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "extractor `executed_path`: unknown parameter `fn`; allowed: function"
            ),
            "{err}"
        );
        let err = extract(&t, "executed_path", &no_params()).unwrap_err();
        assert!(
            err.to_string()
                .contains("missing required parameter `function`"),
            "{err}"
        );
        let p = params(json!({"function": "f"})).unwrap();
        assert_eq!(
            extract(&t, "executed_path", &p).unwrap(),
            json!({"executed_path": [{"line": 2}]})
        );
        let mut bad = t.clone();
        bad.meta.complete = false;
        bad.meta.problems = vec!["3 events lost".into()];
        let err = extract(&bad, "executed_path", &p).unwrap_err();
        assert!(
            err.to_string().contains("incomplete (3 events lost)"),
            "{err}"
        );
        assert!(params(json!([1])).is_err());
    }

    /// Every extractor refuses parameters that the trace cannot answer, with a message that
    /// says what was asked and what the trace holds.
    #[test]
    fn every_extractor_reports_unanswerable_parameters() {
        let t = TraceBuilder::new()
            .test("t.py::test_a")
            .call("f", 1, &[("n", "1")])
            .line(2, &[])
            .ret("None")
            .end("passed")
            .build();
        let cases = [
            (
                "executed_path",
                json!({"function": "f", "invocation": 2}),
                "function `f` has 1 invocation(s); invocation 2",
            ),
            (
                "covered_lines",
                json!({"function": "f", "test": "test_b"}),
                "function `f` has 0 invocation(s) in test `test_b`",
            ),
            (
                "coverage_across_tests",
                json!({"function": "f", "normalize": "rel"}),
                "parameter `normalize`: expected \"absolute\" or \"relative\"",
            ),
            (
                "loop_iterations",
                json!({"function": "f", "header": 7, "body_end": 8}),
                "line 7 (the loop header) never executes",
            ),
            (
                "loop_iterations_across_tests",
                json!({"function": "f", "header": 5, "body_end": 6}),
                "line 5 (the loop header) of `f` never executes inside a test",
            ),
            (
                "state_at",
                json!({"function": "f", "line": 9}),
                "line 9 executes 0 time(s) in invocation 1 of `f`",
            ),
            (
                "state_across_tests",
                json!({"function": "f", "line": 9, "variable": "n"}),
                "line 9 of `f` executes at least 1 time(s) in no test",
            ),
            (
                "def_use_pairs",
                json!({"function": "f", "uses": {"x": ["n"]}}),
                "parameter `uses`: expected line numbers as keys",
            ),
            (
                "def_use_across_tests",
                json!({"function": "f", "uses": ["n"]}),
                "parameter `uses`: expected an object",
            ),
            (
                "exception_info",
                json!({}),
                "the trace has 0 exception(s) raised; occurrence 1",
            ),
            (
                "raising_tests",
                json!({"type": 3}),
                "parameter `type`: expected a string, got 3",
            ),
            (
                "call_sequence",
                json!({"function": "g"}),
                "function `g` has 0 invocation(s)",
            ),
            (
                "callees_count",
                json!({"function": "f", "invocation": 0}),
                "parameter `invocation`: expected an integer >= 1, got 0",
            ),
            (
                "callees_across_tests",
                json!({"function": "f", "within": 1}),
                "parameter `within`: expected a string",
            ),
            (
                "call_graph",
                json!({"test": false}),
                "parameter `test`: expected a string",
            ),
            (
                "invariants_in_test",
                json!({"function": "f", "line": 2, "variable": "zz"}),
                "`zz` is never bound after line 2 of `f`",
            ),
            (
                "invariants_across_tests",
                json!({"function": "f", "line": 3, "variable": "n"}),
                "`n` is never bound after line 3 of `f` inside a test",
            ),
        ];
        let mut covered = Vec::new();
        for (name, p, want) in cases {
            let err = match extract(&t, name, &params(p).unwrap()) {
                Ok(v) => panic!("{name}: unexpected answer {v}"),
                Err(e) => e.to_string(),
            };
            assert!(err.starts_with(&format!("extractor `{name}`: ")), "{err}");
            assert!(err.contains(want), "{name}: want {want:?} in {err}");
            covered.push(name);
        }
        for e in extractors() {
            assert!(covered.contains(&e.name), "{} has no error case", e.name);
        }
    }
}
