//! The table of every extractor: name, kinds, definition, typed parameters, output shape, usual
//! answer template, and entry point. `flux extractors` prints it.
use crate::kinds::QuestionKind as K;
use crate::params::ParamType as T;
use crate::{
    calls, cfg, dataflow, exceptions, invariants, loops, state, ExtractError, Extractor, ParamDoc,
    Params,
};

const fn p(name: &'static str, ty: T, doc: &'static str) -> ParamDoc {
    ParamDoc {
        name,
        ty,
        required: false,
        doc,
    }
}

const fn req(name: &'static str, ty: T, doc: &'static str) -> ParamDoc {
    ParamDoc {
        name,
        ty,
        required: true,
        doc,
    }
}

const FUNCTION: ParamDoc = req(
    "function",
    T::Str,
    "qualified name of the target function (co_qualname), e.g. `Add.flatten`",
);
const INVOCATION: ParamDoc = p(
    "invocation",
    T::Pos,
    "which invocation (frame) of the function, from 1 in order of first call; default 1",
);
const ALL_INVOCATIONS: ParamDoc = p(
    "all_invocations",
    T::Bool,
    "take every selected invocation (in trace order) instead of the Nth",
);
const TEST: ParamDoc = p(
    "test",
    T::Str,
    "only frames first called in this pytest test (node id, or a suffix after `::` or `/`)",
);
const FILE: ParamDoc = p(
    "file",
    T::Str,
    "only code whose source file lies under this path (component-boundary match); says which \
     one a name found in several files means",
);
const ROOT: ParamDoc = p(
    "root",
    T::Str,
    "answers write `file` relative to this directory (default: after site-packages/)",
);
const MODULE_ROOT: ParamDoc = p(
    "module_root",
    T::Str,
    "module names (`func`) are derived from the path relative to this directory (a `src/` \
     layout); default `root`, else after site-packages/",
);
const MODULE_NAMES: ParamDoc = p(
    "module_names",
    T::Choice(&["path", "runtime"]),
    "modules (`module`, `func`) named from the file's `path` (default), or as the code's globals \
     name them at `runtime` (`__name__`: a test file imported as `testcase`), where the trace \
     records it (dialect `swe-flux`)",
);
const FUNCTION_NAMES: ParamDoc = p(
    "function_names",
    T::Choice(&["qualname", "co_name"]),
    "`co_name`: a `functions` entry may name a function `module.co_name`, as a tracer on \
     Python before 3.11 names frames (no `co_qualname`: the method `pkg.mod.C.join` is \
     `pkg.mod.join`); `func` is written as the entry names it. Default `qualname`",
);
const NORMALIZE: ParamDoc = p(
    "normalize",
    T::Choice(&["absolute", "relative"]),
    "`absolute` (default) or `relative` line numbers in the answer (def line = 1)",
);
const DEF_LINE: ParamDoc = p(
    "def_line",
    T::Line,
    "absolute line of the function's first line, for `relative`; default: the first call event's line",
);
const LINE_MODE: ParamDoc = p(
    "line_mode",
    T::Choice(&["reported", "statement"]),
    "`reported` (default): lines as the interpreter reports them; `statement`: each normalised \
     to the first line of its statement (static facts)",
);
const LINE: ParamDoc = req("line", T::Line, "absolute source line");
const OCCURRENCE: ParamDoc = p(
    "occurrence",
    T::Pos,
    "which execution of the line, from 1; default 1",
);
const HEADER: ParamDoc = req(
    "header",
    T::Line,
    "absolute line of the loop header (`for ...:` / `while ...:`)",
);
const BODY_END: ParamDoc = p(
    "body_end",
    T::Line,
    "absolute last line of the loop body (excluding any `else:` clause), > header; default \
     from the static facts",
);
const COUNT: ParamDoc = p(
    "count",
    T::Choice(&["header", "body_line"]),
    "how an iteration is counted: `header` (default) or `body_line` (executions of the body's \
     first line)",
);
const BODY_LINE: ParamDoc = p(
    "body_line",
    T::Line,
    "the line whose executions count iterations with `count = \"body_line\"`; default the \
     body's first line from the static facts",
);
const VARIABLE: ParamDoc = req(
    "variable",
    T::Str,
    "name of a local variable of the function",
);
const OPT_VARIABLE: ParamDoc = p(
    "variable",
    T::Str,
    "name of a local variable of the function",
);
const VARIABLES: ParamDoc = p(
    "variables",
    T::StrList,
    "names of local variables (a tuple of their values where one value is observed)",
);
const AT: ParamDoc = p(
    "at",
    T::Choice(&["before", "after"]),
    "read the state `before` the observed line runs (at its `line` event) or `after` it",
);
const EVENT: ParamDoc = p(
    "event",
    T::Choice(&["line", "return", "change", "line_and_return"]),
    "where observations are taken: `line` events (default), normal `return`s, every reported \
     `change` of the variables, or `line_and_return` (both line events and returns)",
);
const LINES: ParamDoc = p("lines", T::LineList, "only at these absolute lines");
const OBS_OCCURRENCE: ParamDoc = p(
    "occurrence",
    T::Pos,
    "keep only the Mth observation of each invocation",
);
const DEDUPE: ParamDoc = p(
    "dedupe_consecutive",
    T::Bool,
    "drop an entry equal to the one before it",
);
const USES: ParamDoc = p(
    "uses",
    T::LineNames,
    "object mapping absolute line (as a string) to the local names the line reads; default \
     from the static facts (or `source`)",
);
const SOURCE: ParamDoc = p(
    "source",
    T::Str,
    "source text of the function (or file); uses are computed by `uses_from_source`",
);
const SOURCE_FIRST_LINE: ParamDoc = p(
    "source_first_line",
    T::Line,
    "absolute line number of the first line of `source`; default 1",
);
const DEFINITIONS: ParamDoc = p(
    "definitions",
    T::Choice(&["changes", "ast"]),
    "`changes`: definitions observed as reported changes of locals; `ast`: assignments the \
     static facts show (SWE-Flux's)",
);
const NESTED_USES: ParamDoc = p(
    "nested_uses",
    T::Bool,
    "with uses from the static facts, count reads by comprehensions, lambdas and closures at a \
     line of the function (default true)",
);
const NESTED_FRAMES: ParamDoc = p(
    "nested_frames",
    T::Bool,
    "lines of the function's nested code objects running while it is active are uses too",
);
const COMPREHENSION_USES: ParamDoc = p(
    "comprehension_uses",
    T::Bool,
    "reads of the function's locals by comprehensions and generator expressions at a line are \
     uses at that line (default: `nested_uses`)",
);
const CLOSURE_USES: ParamDoc = p(
    "closure_uses",
    T::Bool,
    "reads of the function's locals by lambdas and nested functions at a line are uses at that \
     line (default: `nested_uses`)",
);
const ITERABLE_USES: ParamDoc = p(
    "iterable_uses",
    T::Choice(&["every", "entry"]),
    "the names a `for` header reads are uses at `every` execution of the header (default) or \
     once per `entry` into the loop (static facts)",
);
const USE_COUNT: ParamDoc = p(
    "use_count",
    T::Choice(&["line", "load"]),
    "one use per `line` event (`line`, default) or per load of the name by the function's own \
     code (`load`: `x + x` is two)",
);
const TRACKED: ParamDoc = p("variables", T::StrList, "only these variables");
const SCOPES: ParamDoc = p(
    "scopes",
    T::Choice(&["python", "flat"]),
    "`python` (default): a comprehension's or nested function's own names are its own; `flat`: \
     every name read or written at a line by code nested there is the function's (a parser that \
     walks the function's AST by name)",
);
const RENDER: ParamDoc = p(
    "render",
    T::Choice(crate::render::CHOICES),
    "`repr` (default): values as the trace has them; `str`: as `str()` gives them where the \
     repr says (a string's text; None, booleans, numbers and containers unchanged; any other \
     object is an error)",
);
const WITHIN: ParamDoc = p(
    "within",
    T::Str,
    "only callees (and, for call_graph, callers) whose file lies under this path",
);
const FUNCTIONS: ParamDoc = p("functions", T::StrList, "only these functions (qualnames)");
const TRANSITIVE: ParamDoc = p(
    "transitive",
    T::Bool,
    "every call made while the invocation is active, not only its direct calls",
);
const RESUMPTIONS: ParamDoc = p(
    "resumptions",
    T::Bool,
    "count resumptions of generators and coroutines as calls",
);
const TYPE: ParamDoc = p(
    "type",
    T::Str,
    "exception type: equal to the traced type or to its last dotted component",
);
const RAISED_IN: ParamDoc = p(
    "raised_in",
    T::Str,
    "only exceptions raised in this function (qualname)",
);
const RANGE: ParamDoc = p(
    "range",
    T::Choice(cfg::RANGE_CHOICES),
    "`body`, `function` or `statements`: which lines of the function (static facts)",
);
const FROM: ParamDoc = p(
    "from",
    T::Line,
    "first line of an explicit range (with `to`)",
);
const TO: ParamDoc = p(
    "to",
    T::Line,
    "last line of an explicit range (with `from`)",
);

const EXECUTED_PATH_SHAPE: &str = concat!(
    r#"{"executed_path": [{"line": "int", "#,
    crate::loc_fields!(),
    "}]}"
);
const LINE_COUNTS_SHAPE: &str = concat!(
    r#"{"line_execution_counts": [{"line": "int", "count": "int"}], "per_test": [{"test": "str", "line_execution_counts": "#,
    r#"[{"line": "int", "count": "int"}]}]}"#
);
const LOOP_STATS_SHAPE: &str = r#"{"min_iterations": "int", "max_iterations": "int", "total_iterations": "int", "invocations": "int", "zero_iteration_invocations": "int", "per_invocation": [{"invocation": "int", "test": "str", "iterations": "int"}], "per_test": [{"test": "str", "iterations": "int"}]}"#;
const DEF_USE_SHAPE: &str = r#"{"observed_def_use_pairs": [{"variable": "str", "def_line": "int", "use_line": "int", "count": "int"}], "per_invocation_pairs": [{"invocation": "int", "variable": "str", "def_line": "int", "use_line": "int", "count": "int"}], "per_invocation_dead_defs": [{"invocation": "int", "variable": "str", "def_line": "int", "count": "int"}], "variables": ["str"]}"#;
const DEF_USE_TEMPLATE: &str = r#"{"observed_def_use_pairs": [{"variable": "str", "def_line": "int", "use_line": "int", "count": "int"}]}"#;
const CALL_SEQUENCE_SHAPE: &str = concat!(
    r#"{"call_sequence": [{"line": "int", "caller": "str", "#,
    crate::loc_fields!(),
    "}]}"
);
const CALLEES_SHAPE: &str = concat!(
    r#"{"callees": [{"count": "int", "#,
    crate::loc_fields!(),
    "}]}"
);
const COVERED_FUNCTIONS_SHAPE: &str =
    concat!(r#"{"covered_functions": [{"#, crate::loc_fields!(), "}]}");
const INVOCATION_COUNTS_SHAPE: &str = concat!(
    r#"{"invocation_counts": [{"count": "int", "#,
    crate::loc_fields!(),
    "}]}"
);

pub(crate) static REGISTRY: &[Extractor] = &[
    Extractor {
        name: "executed_path",
        kinds: &[K::S1, K::S6],
        doc: cfg::EXECUTED_PATH,
        params: &[
            FUNCTION,
            INVOCATION,
            ALL_INVOCATIONS,
            TEST,
            FILE,
            NORMALIZE,
            DEF_LINE,
            LINE_MODE,
            p(
                "functions",
                T::StrList,
                "the path holds the lines of these functions' frames running while the \
                 invocation is active (the target's own only if listed)",
            ),
            DEDUPE,
            ROOT,
            MODULE_ROOT,
            MODULE_NAMES,
            FUNCTION_NAMES,
        ],
        shape: |_| EXECUTED_PATH_SHAPE,
        template: |_| r#"{"executed_path": [{"line": "int"}]}"#,
        run: cfg::executed_path,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "covered_lines",
        kinds: &[K::S1, K::M1],
        doc: cfg::COVERED_LINES,
        params: &[
            FUNCTION,
            TEST,
            FILE,
            NORMALIZE,
            DEF_LINE,
            LINE_MODE,
            p(
                "nested",
                T::Bool,
                "also the lines of functions defined inside it (`function.<locals>.…`)",
            ),
            p(
                "coverage",
                T::Choice(&["lines", "own_lines"]),
                "`lines` executed (default), or `own_lines`: every own line of each executed \
                 statement, the signature's too",
            ),
        ],
        shape: |_| r#"{"covered_lines": ["int"]}"#,
        template: |_| r#"{"covered_lines": ["int"]}"#,
        run: cfg::covered_lines,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "line_counts",
        kinds: &[K::S1, K::M1],
        doc: cfg::LINE_COUNTS,
        params: &[
            FUNCTION,
            p(
                "invocation",
                T::Pos,
                "only the Nth invocation (default: all selected invocations)",
            ),
            TEST,
            FILE,
            RANGE,
            FROM,
            TO,
            LINE_MODE,
        ],
        shape: |_| LINE_COUNTS_SHAPE,
        template: |_| concat!(r#"{"line_execution_counts": "#, r#"[{"line": "int", "count": "int"}]}"#),
        run: cfg::line_counts,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "coverage_across_tests",
        kinds: &[K::M1],
        doc: cfg::COVERAGE_ACROSS_TESTS,
        params: &[
            FUNCTION,
            FILE,
            NORMALIZE,
            DEF_LINE,
            LINE_MODE,
            p(
                "line",
                T::Line,
                "if given, answer which tests execute this absolute line instead",
            ),
        ],
        shape: |p| {
            if p.contains("line") {
                r#"{"covering_tests": ["str"], "non_covering_tests": ["str"]}"#
            } else {
                r#"{"coverage": [{"test": "str", "lines": ["int"]}]}"#
            }
        },
        template: |p| {
            if p.contains("line") {
                r#"{"covering_tests": ["str"], "non_covering_tests": ["str"]}"#
            } else {
                r#"{"coverage": [{"test": "str", "lines": ["int"]}]}"#
            }
        },
        run: cfg::coverage_across_tests,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "line_classes",
        kinds: &[K::M1],
        doc: cfg::LINE_CLASSES,
        params: &[
            FUNCTION,
            TEST,
            FILE,
            RANGE,
            FROM,
            TO,
            LINE_MODE,
            NORMALIZE,
            DEF_LINE,
            p(
                "tests",
                T::Choice(&["all", "running"]),
                "classify over `all` tests of the trace (default) or those `running` the function",
            ),
            p(
                "over",
                T::Choice(&["tests", "invocations"]),
                "classify over the `tests` (default) or over the function's `invocations`",
            ),
        ],
        shape: |_| {
            r#"{"always_executed": ["int"], "sometimes_executed": ["int"], "never_executed": ["int"]}"#
        },
        template: |_| {
            r#"{"always_executed": ["int"], "sometimes_executed": ["int"], "never_executed": ["int"]}"#
        },
        run: cfg::line_classes,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "loop_iterations",
        kinds: &[K::S2],
        doc: loops::LOOP_ITERATIONS,
        params: &[
            FUNCTION,
            INVOCATION,
            TEST,
            FILE,
            HEADER,
            BODY_END,
            COUNT,
            BODY_LINE,
            p(
                "entry",
                T::Pos,
                "count only the Nth entry into the loop (from 1); default: all entries",
            ),
        ],
        shape: |_| r#"{"loop_iteration_count": "int"}"#,
        template: |_| r#"{"loop_iteration_count": "int"}"#,
        run: loops::loop_iterations,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "loop_stats",
        kinds: &[K::S2, K::M2],
        doc: loops::LOOP_STATS,
        params: &[
            FUNCTION,
            TEST,
            FILE,
            HEADER,
            BODY_END,
            COUNT,
            BODY_LINE,
            p(
                "invocations",
                T::Choice(&["all", "entered"]),
                "count `all` invocations (default; those not reaching the loop with 0) or only \
                 those that `entered` it",
            ),
            p(
                "per",
                T::Choice(&["invocation", "entry", "call"]),
                "what one count is: an `invocation` (default), an `entry` into the loop, or a \
                 `call` event of the frame (generator resumptions are calls)",
            ),
        ],
        shape: |_| LOOP_STATS_SHAPE,
        template: |_| r#"{"min_iterations": "int", "max_iterations": "int"}"#,
        run: loops::loop_stats,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "loop_iterations_across_tests",
        kinds: &[K::M2],
        doc: loops::LOOP_ITERATIONS_ACROSS_TESTS,
        params: &[FUNCTION, FILE, HEADER, BODY_END, COUNT, BODY_LINE],
        shape: |_| {
            r#"{"min_iterations": "int", "max_iterations": "int", "tests_with_min": ["str"], "tests_with_max": ["str"]}"#
        },
        template: |_| {
            r#"{"min_iterations": "int", "max_iterations": "int", "tests_with_min": ["str"], "tests_with_max": ["str"]}"#
        },
        run: loops::loop_iterations_across_tests,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "iteration_value",
        kinds: &[K::S2, K::S3],
        doc: loops::ITERATION_VALUE,
        params: &[
            FUNCTION,
            INVOCATION,
            TEST,
            FILE,
            HEADER,
            BODY_END,
            COUNT,
            BODY_LINE,
            VARIABLE,
            p("iteration", T::Pos, "which iteration, from 1; default 1"),
            AT,
            RENDER,
        ],
        shape: |_| r#"{"nth_iteration": "int", "variable": "str", "value": "str"}"#,
        template: |_| r#"{"nth_iteration": "int", "variable": "str", "value": "str"}"#,
        run: loops::iteration_value,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "state_at",
        kinds: &[K::S3],
        doc: state::STATE_AT,
        params: &[
            FUNCTION,
            INVOCATION,
            TEST,
            FILE,
            LINE,
            OCCURRENCE,
            p(
                "variables",
                T::StrList,
                "names of the variables to report, in answer order; default: every bound local, by name",
            ),
            AT,
            RENDER,
            p(
                "across_invocations",
                T::Bool,
                "count the line's executions over every invocation together, in trace order",
            ),
            LINE_MODE,
        ],
        shape: |_| r#"{"observed_state": [{"variable": "str", "value": "str"}]}"#,
        template: |_| r#"{"observed_state": [{"variable": "str", "value": "str"}]}"#,
        run: state::state_at,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "state_across_tests",
        kinds: &[K::M3],
        doc: state::STATE_ACROSS_TESTS,
        params: &[FUNCTION, FILE, LINE, OCCURRENCE, VARIABLE, AT],
        shape: |_| r#"{"observed_states": [{"test": "str", "value": "str"}]}"#,
        template: |_| r#"{"observed_states": [{"test": "str", "value": "str"}]}"#,
        run: state::state_across_tests,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "unique_values",
        kinds: &[K::S3, K::M3],
        doc: state::UNIQUE_VALUES,
        params: &[
            FUNCTION,
            INVOCATION,
            TEST,
            FILE,
            OPT_VARIABLE,
            VARIABLES,
            EVENT,
            LINES,
            AT,
            OBS_OCCURRENCE,
            LINE_MODE,
            p(
                "combine",
                T::Choice(&["tuple", "union"]),
                "with `variables`: the repr of their `tuple` (default), or the `union` of the \
                 values each one holds",
            ),
            p(
                "order",
                T::Choice(&["sorted", "first_seen"]),
                "`sorted` (default, code-point order) or `first_seen`",
            ),
        ],
        shape: |_| r#"{"unique_values": ["str"], "observations": "int"}"#,
        template: |_| r#"{"unique_values": ["str"]}"#,
        run: state::unique_values,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "value_history",
        kinds: &[K::S3, K::M3],
        doc: state::VALUE_HISTORY,
        params: &[
            FUNCTION,
            INVOCATION,
            TEST,
            FILE,
            OPT_VARIABLE,
            VARIABLES,
            EVENT,
            LINES,
            AT,
            OBS_OCCURRENCE,
            LINE_MODE,
            DEDUPE,
        ],
        shape: |_| {
            r#"{"value_history": [{"step": "int", "value": "str", "invocation": "int", "test": "str", "line": "int"}]}"#
        },
        template: |_| r#"{"value_history": [{"value": "str"}]}"#,
        run: state::value_history,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "state_snapshots",
        kinds: &[K::S3, K::M3],
        doc: state::STATE_SNAPSHOTS,
        params: &[
            FUNCTION,
            INVOCATION,
            TEST,
            FILE,
            VARIABLES,
            EVENT,
            LINES,
            AT,
            OBS_OCCURRENCE,
            p(
                "occurrences",
                T::LineList,
                "keep only these observations of each invocation (places from 1)",
            ),
            p(
                "point_label",
                T::Str,
                "name each observation `point`: the text with `{line}`, `{nth}` (its place in \
                 its invocation) and `{invocation}` filled in",
            ),
            LINE_MODE,
            p(
                "rows",
                T::Choice(&["snapshots", "variables"]),
                "one entry per observation (`snapshots`, default) or per variable of each \
                 observation (`variables`: `{invocation, line, test, variable, value}`, sorted by \
                 invocation, variable, value)",
            ),
        ],
        shape: |p| {
            let rows = p.get("rows").and_then(|v| v.as_str()) == Some("variables");
            match (rows, p.get("point_label").is_some()) {
                (true, false) => r#"{"state_snapshots": [{"invocation": "int", "line": "int", "test": "str", "variable": "str", "value": "str"}]}"#,
                (true, true) => r#"{"state_snapshots": [{"invocation": "int", "line": "int", "test": "str", "point": "str", "variable": "str", "value": "str"}]}"#,
                (false, false) => r#"{"state_snapshots": [{"line": "int", "invocation": "int", "test": "str", "state": {"*": "str"}, "variables": [{"variable": "str", "value": "str"}]}]}"#,
                (false, true) => r#"{"state_snapshots": [{"line": "int", "invocation": "int", "test": "str", "point": "str", "state": {"*": "str"}, "variables": [{"variable": "str", "value": "str"}]}]}"#,
            }
        },
        template: |_| r#"{"state_snapshots": [{"line": "int", "state": {"*": "str"}}]}"#,
        run: state::state_snapshots,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "def_use_pairs",
        // M4 too: with `all_invocations`, over every test a multi-test instance runs (their
        // M4 questions aggregate one class's tests so).
        kinds: &[K::S4, K::M4],
        doc: dataflow::DEF_USE_PAIRS,
        params: &[
            FUNCTION,
            INVOCATION,
            ALL_INVOCATIONS,
            TEST,
            FILE,
            NORMALIZE,
            DEF_LINE,
            LINE_MODE,
            p(
                "use_lines",
                T::Choice(&["line_mode", "reported"]),
                "use lines normalised as `line_mode` says (default), or as reported (the line the \
                 read is on) while definitions are normalised",
            ),
            USES,
            SOURCE,
            SOURCE_FIRST_LINE,
            DEFINITIONS,
            NESTED_USES,
            COMPREHENSION_USES,
            CLOSURE_USES,
            USE_COUNT,
            ITERABLE_USES,
            NESTED_FRAMES,
            TRACKED,
            SCOPES,
        ],
        shape: |_| DEF_USE_SHAPE,
        template: |_| DEF_USE_TEMPLATE,
        run: dataflow::def_use_pairs,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "def_use_across_tests",
        kinds: &[K::M4],
        doc: dataflow::DEF_USE_ACROSS_TESTS,
        params: &[
            FUNCTION,
            FILE,
            NORMALIZE,
            DEF_LINE,
            USES,
            SOURCE,
            SOURCE_FIRST_LINE,
            DEFINITIONS,
            NESTED_USES,
            COMPREHENSION_USES,
            CLOSURE_USES,
            USE_COUNT,
            ITERABLE_USES,
            NESTED_FRAMES,
            TRACKED,
            SCOPES,
            p("variable", T::Str, "only pairs of this variable"),
        ],
        shape: |_| {
            r#"{"def_use_pairs": [{"variable": "str", "def_line": "int", "use_line": "int", "tests": ["str"]}]}"#
        },
        template: |_| {
            r#"{"def_use_pairs": [{"variable": "str", "def_line": "int", "use_line": "int", "tests": ["str"]}]}"#
        },
        run: dataflow::def_use_across_tests,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "dead_defs",
        kinds: &[K::S4, K::M4],
        doc: dataflow::DEAD_DEFS,
        params: &[
            FUNCTION,
            INVOCATION,
            TEST,
            FILE,
            NORMALIZE,
            DEF_LINE,
            USES,
            SOURCE,
            SOURCE_FIRST_LINE,
            DEFINITIONS,
            NESTED_USES,
            COMPREHENSION_USES,
            CLOSURE_USES,
            USE_COUNT,
            ITERABLE_USES,
            NESTED_FRAMES,
            TRACKED,
            SCOPES,
        ],
        shape: |_| r#"{"dead_defs": [{"variable": "str", "def_line": "int", "count": "int"}]}"#,
        template: |_| r#"{"dead_defs": [{"variable": "str", "def_line": "int"}]}"#,
        run: dataflow::dead_defs,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "exception_info",
        kinds: &[K::S5],
        doc: exceptions::EXCEPTION_INFO,
        params: &[
            TYPE,
            RAISED_IN,
            TEST,
            FILE,
            OCCURRENCE,
            p(
                "escapes",
                T::Str,
                "only exceptions that propagate out of this function (qualname)",
            ),
            p(
                "origins",
                T::Choice(&["traced", "any"]),
                "with `escapes`: only exceptions raised in traced code (`traced`, default), or \
                 also those an untraced callee raised (`any`)",
            ),
        ],
        shape: |_| {
            r#"{"exception": {"type": "str", "message": "str", "raised_in": "str", "raise_line": "int", "handled_in": "str|null", "handler_line": "int|null", "unwound": ["str"]}}"#
        },
        template: |_| {
            r#"{"exception": {"type": "str", "message": "str", "raised_in": "str", "raise_line": "int", "handled_in": "str|null", "handler_line": "int|null", "unwound": ["str"]}}"#
        },
        run: exceptions::exception_info,
        targets_scope: true,
        targeted: &["raised_in", "escapes"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "exception_events",
        kinds: &[K::S5, K::M5],
        doc: exceptions::EXCEPTION_EVENTS,
        params: &[
            FUNCTION,
            TEST,
            FILE,
            p(
                "events",
                T::Choice(&["all", "reported"]),
                "list `all` exception events of the frames (default), or those `reported` to a \
                 tracer (flux's inferred bare re-raises left out)",
            ),
            p(
                "type_names",
                T::Choice(&["hook", "qualified"]),
                "types as the hook names them (`hook`, default: bare for builtins) or \
                 `qualified` (`builtins.ValueError`)",
            ),
        ],
        shape: |_| {
            r#"{"exception_events": [{"line": "int", "exception_type": "str", "message": "str", "handled": "bool", "invocation": "int", "test": "str"}], "per_invocation": [{"invocation": "int", "test": "str", "raised": "bool", "exceptions": [{"line": "int", "exception_type": "str", "message": "str", "handled": "bool", "handled_where": "str"}]}]}"#
        },
        template: |_| {
            r#"{"exception_events": [{"line": "int", "exception_type": "str", "message": "str", "handled": "bool"}]}"#
        },
        run: exceptions::exception_events,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "caught_types",
        kinds: &[K::S5, K::M5],
        doc: exceptions::CAUGHT_TYPES,
        params: &[
            FUNCTION,
            TEST,
            FILE,
            p(
                "line",
                T::Line,
                "only exceptions handled by the `except` clause on this line",
            ),
        ],
        shape: |_| {
            r#"{"caught_exception_kinds": ["str"], "caught": [{"exception_type": "str", "line": "int|null", "count": "int"}]}"#
        },
        template: |_| r#"{"caught_exception_kinds": ["str"]}"#,
        run: exceptions::caught_types,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "exception_counts",
        kinds: &[K::S5, K::M5],
        doc: exceptions::EXCEPTION_COUNTS,
        params: &[
            FUNCTION,
            TEST,
            FILE,
            LINES,
            p(
                "events",
                T::Choice(&["all", "raises", "reported"]),
                "count `all` exception events of the frames (default), only `raises`, or those \
                 `reported` to a tracer (flux's inferred bare re-raises left out)",
            ),
            p(
                "order",
                T::Choice(&["sorted", "first_seen"]),
                "`exception_types` `sorted` (default, code-point order) or in the order each \
                 type was first seen",
            ),
        ],
        shape: |_| {
            r#"{"exception_type_counts": [{"exception_type": "str", "count": "int"}], "exception_types": ["str"], "total": "int", "per_test": [{"test": "str", "exception_type_counts": [{"exception_type": "str", "count": "int"}]}]}"#
        },
        template: |_| r#"{"exception_type_counts": [{"exception_type": "str", "count": "int"}]}"#,
        run: exceptions::exception_counts,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "raising_tests",
        kinds: &[K::M5],
        doc: exceptions::RAISING_TESTS,
        params: &[
            TYPE,
            RAISED_IN,
            FILE,
            p(
                "uncaught",
                T::Bool,
                "if true, count only exceptions that no traced frame handles; default false",
            ),
            p(
                "escapes",
                T::Str,
                "instead: tests in which an exception propagates out of this function (qualname)",
            ),
            p(
                "order",
                T::Choice(&["start", "sorted"]),
                "tests in `start` order (default) or `sorted` by id",
            ),
        ],
        shape: |_| {
            r#"{"crashing_tests": ["str"], "safe_tests": ["str"], "crashes": [{"test": "str", "exception_type": "str", "message": "str", "raised_in": "str"}]}"#
        },
        template: |_| r#"{"crashing_tests": ["str"], "safe_tests": ["str"]}"#,
        run: exceptions::raising_tests,
        targets_scope: true,
        targeted: &["raised_in", "escapes"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "call_sequence",
        kinds: &[K::S6, K::M6],
        doc: calls::CALL_SEQUENCE,
        params: &[
            p(
                "function",
                T::Str,
                "the calls made by an invocation of this function (qualname); without it, every \
                 start of `functions` in the trace",
            ),
            INVOCATION,
            ALL_INVOCATIONS,
            TEST,
            FILE,
            WITHIN,
            NORMALIZE,
            DEF_LINE,
            FUNCTIONS,
            TRANSITIVE,
            RESUMPTIONS,
            p(
                "include_self",
                T::Bool,
                "the invocation's own start comes first (line 0)",
            ),
            p(
                "lifetime",
                T::Bool,
                "every call of the invocation's thread from its first to its last event, \
                 wherever it is made from (callbacks run while a coroutine is suspended)",
            ),
            ROOT,
            MODULE_ROOT,
            MODULE_NAMES,
            FUNCTION_NAMES,
        ],
        shape: |_| CALL_SEQUENCE_SHAPE,
        template: |_| r#"{"call_sequence": [{"function": "str", "line": "int"}]}"#,
        run: calls::call_sequence,
        targets_scope: true,
        targeted: &[],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "callees_count",
        kinds: &[K::S6],
        doc: calls::CALLEES_COUNT,
        params: &[
            FUNCTION,
            INVOCATION,
            TEST,
            FILE,
            WITHIN,
            FUNCTIONS,
            TRANSITIVE,
            RESUMPTIONS,
            ROOT,
            MODULE_ROOT,
            MODULE_NAMES,
            FUNCTION_NAMES,
        ],
        shape: |_| CALLEES_SHAPE,
        template: |_| r#"{"callees": [{"function": "str", "count": "int"}]}"#,
        run: calls::callees_count,
        targets_scope: true,
        targeted: &[],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "callers",
        kinds: &[K::S6, K::M6],
        doc: calls::CALLERS,
        params: &[
            FUNCTION,
            TEST,
            FILE,
            p(
                "count",
                T::Choice(&["invocations", "calls"]),
                "`invocations` (default): each frame once; `calls`: every `call` event, \
                 resumptions included",
            ),
            ROOT,
            MODULE_ROOT,
            MODULE_NAMES,
            FUNCTION_NAMES,
        ],
        shape: |_| r#"{"callers": ["str"], "invocation_count": "int"}"#,
        template: |_| r#"{"callers": ["str"], "invocation_count": "int"}"#,
        run: calls::callers,
        targets_scope: false,
        targeted: &[],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "callees_across_tests",
        kinds: &[K::M6],
        doc: calls::CALLEES_ACROSS_TESTS,
        params: &[FUNCTION, FILE, WITHIN, FUNCTIONS, TRANSITIVE],
        shape: |_| r#"{"callees_per_test": [{"test": "str", "callees": ["str"]}]}"#,
        template: |_| r#"{"callees_per_test": [{"test": "str", "callees": ["str"]}]}"#,
        run: calls::callees_across_tests,
        targets_scope: true,
        targeted: &[],
        target_calls_only: calls::direct_callees_only,
    },
    Extractor {
        name: "covered_functions",
        kinds: &[K::S6, K::M6],
        doc: calls::COVERED_FUNCTIONS,
        params: &[
            p(
                "function",
                T::Str,
                "only functions starting while an invocation of this one is active",
            ),
            TEST,
            FILE,
            WITHIN,
            FUNCTIONS,
            ROOT,
            MODULE_ROOT,
            MODULE_NAMES,
            FUNCTION_NAMES,
        ],
        shape: |_| COVERED_FUNCTIONS_SHAPE,
        template: |_| r#"{"covered_functions": [{"file": "str", "func": "str"}]}"#,
        run: calls::covered_functions,
        targets_scope: true,
        targeted: &[],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "invocation_counts",
        kinds: &[K::S6, K::M6],
        doc: calls::INVOCATION_COUNTS,
        params: &[
            p(
                "methods",
                T::Bool,
                "with `module`, also the methods of the module's classes; with `class`, also the methods \
                 of the classes nested in it (not functions nested in functions)",
            ),
            FUNCTIONS,
            p("class", T::Str, "every method defined directly in this class (qualname)"),
            p(
                "classes",
                T::StrList,
                "every method defined directly in each of these classes (qualnames)",
            ),
            p("module", T::Bool, "every function of the module in `file`"),
            p("nested", T::Bool, "also functions defined inside those"),
            p(
                "code_objects",
                T::Bool,
                "also every other code object under the class or module: nested functions, \
                 lambdas, comprehensions, generator expressions",
            ),
            p(
                "exclude_decorated",
                T::StrList,
                "leave out functions with one of these decorators (text, or suffix after `.`)",
            ),
            p(
                "exclude_dunder",
                T::Bool,
                "leave out dunder methods (`__init__`, `__call__`, …: a name `__x__`)",
            ),
            p(
                "count",
                T::Choice(&["invocations", "calls"]),
                "count frames (`invocations`, default) or `call` events (resumptions included)",
            ),
            TEST,
            FILE,
            ROOT,
            MODULE_ROOT,
            MODULE_NAMES,
            FUNCTION_NAMES,
        ],
        shape: |_| INVOCATION_COUNTS_SHAPE,
        template: |_| {
            r#"{"invocation_counts": [{"count": "int", "file": "str", "func": "str"}]}"#
        },
        run: calls::invocation_counts,
        targets_scope: false,
        targeted: &[],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "call_graph",
        kinds: &[K::S6, K::M6],
        doc: calls::CALL_GRAPH,
        params: &[
            WITHIN,
            TEST,
            FILE,
            p(
                "qualify",
                T::Choice(&["qualname", "module"]),
                "`qualname` (default) or `module`: prefix names with their module",
            ),
        ],
        shape: |_| r#"{"call_graph": {"*": ["str"]}}"#,
        template: |_| r#"{"call_graph": {"*": ["str"]}}"#,
        run: calls::call_graph,
        targets_scope: false,
        targeted: &[],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "invariants_in_test",
        kinds: &[K::S7],
        doc: invariants::INVARIANTS_IN_TEST,
        params: &[FUNCTION, TEST, FILE, LINE, VARIABLE],
        shape: |_| INVARIANTS_IN_TEST_SHAPE,
        template: |_| INVARIANTS_IN_TEST_SHAPE,
        run: invariants::invariants_in_test,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "invariants_across_tests",
        kinds: &[K::M7],
        doc: invariants::INVARIANTS_ACROSS_TESTS,
        params: &[FUNCTION, FILE, LINE, VARIABLE],
        shape: |_| INVARIANTS_ACROSS_SHAPE,
        template: |_| INVARIANTS_ACROSS_SHAPE,
        run: invariants::invariants_across_tests,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
    Extractor {
        name: "predicate_report",
        kinds: &[K::S7, K::M7],
        doc: invariants::PREDICATE_REPORT,
        params: &[
            FUNCTION,
            TEST,
            FILE,
            p(
                "predicates",
                T::StrList,
                "the predicates to report (expression texts as in `[tracing] predicates`)",
            ),
            p(
                "labels",
                T::StrList,
                "what each of `predicates` is reported as, in its order (a question's own \
                 wording of a predicate it gave in prose)",
            ),
            LINES,
        ],
        shape: |_| {
            r#"{"invariant_report": [{"predicate": "str", "observations": "int", "violations": "int", "errors": "int", "held_always": "bool", "violating_tests": ["str"]}]}"#
        },
        template: |_| {
            r#"{"invariant_report": [{"predicate": "str", "observations": "int", "violations": "int", "held_always": "bool"}]}"#
        },
        run: invariants::predicate_report,
        targets_scope: true,
        targeted: &["function"],
        target_calls_only: |_| false,
    },
];

const INVARIANTS_IN_TEST_SHAPE: &str = concat!(
    r#"{"invariants": "#,
    r#"{"observations": "int", "types": ["str"], "single_type": "bool", "non_negative": "bool", "monotonic": "str", "constant": "bool"}"#,
    "}"
);
const INVARIANTS_ACROSS_SHAPE: &str = concat!(
    r#"{"invariants": "#,
    r#"{"observations": "int", "types": ["str"], "single_type": "bool", "non_negative": "bool", "monotonic": "str", "constant": "bool"}"#,
    r#", "tests": ["str"]}"#
);

/// Parameters that only make sense together, or exclude each other.
pub(crate) fn check_combinations(ex: &Extractor, p: &Params) -> Result<(), ExtractError> {
    let has = |k: &str| p.contains(k);
    let conflict = |a: &str, b: &str| ExtractError::BadParamType {
        param: a.to_string(),
        expected: format!("not both `{a}` and `{b}`"),
        got: "both".into(),
    };
    if has("from") != has("to") {
        return Err(ExtractError::MissingParam {
            param: if has("from") { "to" } else { "from" }.into(),
        });
    }
    if has("invocation") && has("all_invocations") {
        return Err(conflict("invocation", "all_invocations"));
    }
    if has("uses") && has("source") {
        return Err(conflict("uses", "source"));
    }
    if has("invocation") && has("across_invocations") {
        return Err(conflict("invocation", "across_invocations"));
    }
    match ex.name {
        "unique_values" | "value_history" if has("variable") == has("variables") => {
            return Err(ExtractError::MissingParam {
                param: "exactly one of `variable` and `variables`".into(),
            });
        }
        "call_sequence" if !has("function") && !has("functions") => {
            return Err(ExtractError::MissingParam {
                param: "function (or functions)".into(),
            });
        }
        "raising_tests" if !has("type") && !has("escapes") => {
            return Err(ExtractError::MissingParam {
                param: "type (or escapes)".into(),
            });
        }
        "invocation_counts"
            if !has("functions")
                && !(has("file") && (has("class") || has("classes") || has("module"))) =>
        {
            return Err(ExtractError::MissingParam {
                param: "functions, or file with class, classes or module = true".into(),
            });
        }
        _ => {}
    }
    Ok(())
}

/// The shared conventions an extractor's definition refers to, as (title, text) pairs, for
/// `flux extractors`.
pub fn conventions(ex: &Extractor) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    let has = |n: &str| ex.params.iter().any(|p| p.name == n);
    if has("header") {
        out.push(("iteration", loops::iteration_doc()));
    }
    if has("event") {
        out.push(("observation", state::observations_doc()));
    }
    if has("definitions") {
        out.push(("definitions and uses", dataflow::definitions_doc()));
    }
    if ex.kinds.iter().any(|k| matches!(k, K::S5 | K::M5)) {
        out.push(("exception types", exceptions::naming_doc()));
    }
    out
}
