//! Each rule of the native mapping (`flux_interop::native::RULES`, the table in
//! docs/swe-flux-interop.md) on questions written for these tests in SWE-Flux's layout (their
//! eval.sh skeleton, their template, a parser in their style), each with reworded variants of
//! the same question (a phrase broken across lines, names without backticks, the definition
//! in other words, the facts only in the parser's constants) that must map identically.
use flux_instance::ExtractorSpec;
use flux_interop::native::{native_extractor, predicates, prose_predicate, Question, RULES};
use serde_json::{json, Value};

/// An eval.sh in their skeleton for `TRACE_FILE=src/pkg/mod.py`, `TRACE_FUNC=func`.
fn eval(func: &str) -> flux_interop::evalsh::EvalSh {
    flux_interop::evalsh::parse(&evalsh_text(func)).unwrap()
}

/// The text of [`eval`]'s eval.sh.
fn evalsh_text(func: &str) -> String {
    format!(
        "#!/bin/bash\nset -euo pipefail\n\nROOT_DIR=\"${{1:-/testbed}}\"\nINSTANCE_ID=\"x\"\n\
         TEST_ID=\"pkg_qa/x/files/testcase.py::T::test_a\"\nLOG_DIR=\"$ROOT_DIR/logs/pkg_qa/$INSTANCE_ID\"\n\n\
         TRACE_LOG=\"$LOG_DIR/trace.log\"\nORACLE_JSON=\"$LOG_DIR/oracle.json\"\n\nmkdir -p \"$LOG_DIR\"\n\
         cd \"$ROOT_DIR\"\n\nexport TRACE_ON=\"1\"\nexport TRACE_FILE=\"src/pkg/mod.py\"\n\
         export TRACE_FUNC=\"{func}\"\nexport TRACE_EVENTS=\"line,call,return,exception\"\n\
         export TRACE_LOG_ALL_LINES=\"1\"\nexport TRACE_OUT=\"$TRACE_LOG\"\n\n\
         pytest -rA -s \"$TEST_ID\" 2>&1 | tee \"$PYTEST_LOG\"\n\n\
         python pkg_qa/x/files/parser.py \\\n  --trace-log \"$TRACE_LOG\" \\\n  --out \"$ORACLE_JSON\"\n"
    )
}

fn map(func: &str, text: &str, template: &Value, parser: Option<&str>) -> ExtractorSpec {
    native_extractor(&Question {
        eval: &eval(func),
        text,
        template,
        parser,
    })
    .unwrap_or_else(|e| panic!("not mapped: {e}\n{text}"))
}

/// Every variant (question text, parser) maps to one extractor spec; it is returned.
fn same(func: &str, template: Value, variants: &[(&str, Option<&str>)]) -> ExtractorSpec {
    let specs: Vec<ExtractorSpec> = variants
        .iter()
        .map(|(t, p)| map(func, t, &template, *p))
        .collect();
    for s in &specs {
        projects(s, &template);
    }
    let first = serde_json::to_value(&specs[0]).unwrap();
    for (i, s) in specs.iter().enumerate().skip(1) {
        assert_eq!(
            serde_json::to_value(s).unwrap(),
            first,
            "variant {i} maps otherwise:\n{}",
            variants[i].0
        );
    }
    specs.into_iter().next().unwrap()
}

#[test]
fn loop_iterations_reworded() {
    let x = same(
        "C.run",
        json!({"loop_iteration_count": "int"}),
        &[
            (
                "Consider the second invocation of `pkg.mod.C.run` in `src/pkg/mod.py`. How many \
                 iterations does the `for` loop whose header begins at line 40 execute?",
                None,
            ),
            (
                "Consider the second\ninvocation of pkg.mod.C.run in src/pkg/mod.py. How many\n\
                 iterations does the for loop whose header\nbegins at line 40 execute?",
                None,
            ),
            (
                "For invocation 2 of pkg.mod.C.run, count the iterations of its loop.",
                Some("TARGET_FUNC = \"pkg.mod.C.run\"\nLOOP_HEADER_LINE = 40\nINVOCATION = 2\n"),
            ),
        ],
    );
    assert_eq!(x.name, "loop_iterations");
    assert_eq!(
        (
            &x.params["header"],
            &x.params["invocation"],
            &x.params["function"]
        ),
        (&json!(40), &json!(2), &json!("C.run"))
    );
}

#[test]
fn loop_stats_reworded() {
    let t = json!({"max_iterations": "int", "min_iterations": "int"});
    let x = same(
        "f",
        t,
        &[
            (
                "Consider `pkg.mod.f`. A loop activation is one complete execution of the `for` \
                 statement whose header begins on line 12.",
                None,
            ),
            (
                "Consider pkg.mod.f. A loop\nactivation is one complete execution of the for \
                 statement whose header\nbegins on line 12.",
                None,
            ),
        ],
    );
    assert_eq!(
        (x.name.as_str(), &x.params["per"], &x.params["header"]),
        ("loop_stats", &json!("entry"), &json!(12))
    );
}

/// Their "total number of iterations summed over every invocation": `loop_stats`'
/// `total_iterations` over every invocation (zero-iteration ones included), an iteration being
/// an execution of the body's first line.
#[test]
fn total_iterations_reworded() {
    let x = same(
        "C._fmt",
        json!({"total_iterations": "int"}),
        &[
            (
                "Consider exactly `pkg.mod.C._fmt` in `src/pkg/mod.py`. For the `for` loop \
                 whose header is absolute source line 148, what is the total number of \
                 iterations summed over every completed invocation of the target function?",
                None,
            ),
            (
                "Consider exactly pkg.mod.C._fmt in src/pkg/mod.py. For the for loop whose\n\
                 header is absolute source line 148, what is the total number of iterations\n\
                 summed over every completed invocation?",
                None,
            ),
            (
                "Sum, over all calls of pkg.mod.C._fmt, how many times the loop iterates.",
                Some("TARGET_FUNC = 'pkg.mod.C._fmt'\nLOOP_HEADER_LINE = 148\n"),
            ),
        ],
    );
    assert_eq!(
        (
            x.name.as_str(),
            &x.params["header"],
            &x.params["invocations"],
            &x.params["count"]
        ),
        (
            "loop_stats",
            &json!(148),
            &json!("all"),
            &json!("body_line")
        )
    );
    assert!(x.params.get("per").is_none());
}

#[test]
fn executed_path_reworded() {
    let t = json!({"executed_path": [{"file": "str", "func": "str", "line": "int"}]});
    let x = same(
        "f",
        t,
        &[
            (
                "For the first invocation of `pkg.mod.f`, list the executed lines; attribute \
                 each line to its innermost enclosing statement.",
                None,
            ),
            (
                "For the first invocation of pkg.mod.f, list the executed lines; attribute each \
                 line to its innermost\nenclosing statement.",
                None,
            ),
            (
                "For the first invocation of `pkg.mod.f`, list the executed lines, normalised \
                 to the statement's starting line.",
                None,
            ),
            (
                "For the first invocation of pkg.mod.f, list the executed lines.",
                Some(
                    "import ast\nTARGET = \"pkg.mod.f\"\n\ndef starts(tree):\n    for node in \
                     ast.walk(tree):\n        if isinstance(node, ast.stmt):\n            \
                     yield node.lineno, node.end_lineno\n",
                ),
            ),
        ],
    );
    assert_eq!(x.params["line_mode"], "statement");
    assert_eq!(x.params["invocation"], 1);
}

#[test]
fn covered_lines_reworded() {
    let t = json!({"covered_lines": ["int"]});
    let x = same(
        "C.m",
        t,
        &[
            (
                "Which lines of `pkg.mod.C.m` run? Frames of `pkg.mod.C.m.<locals>.helper` \
                 count too.",
                None,
            ),
            (
                "Which lines of pkg.mod.C.m run? Frames of\npkg.mod.C.m.<locals>.helper count \
                 too.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["nested"], true);
}

#[test]
fn state_at_reworded() {
    let t = json!({"observed_state": [{"value": "str", "variable": "str"}]});
    let x = same(
        "App.add",
        t,
        &[
            (
                "During the test, consider `pkg.mod.App.add` in `src/pkg/mod.py`. What are the \
                 values of the local variables `endpoint` and `options` immediately after line \
                 650 has executed for the 19th time?",
                None,
            ),
            (
                "During the test, consider pkg.mod.App.add in src/pkg/mod.py. What are the \
                 values of the local\nvariables `options` and `endpoint` immediately after the \
                 statement that begins on line 650 has executed for the 19th time?",
                None,
            ),
            (
                "During the test, consider pkg.mod.App.add: which values do its locals hold \
                 there?",
                Some(
                    "TARGET_FUNC = \"pkg.mod.App.add\"\nOBSERVED_LINE = 650\nOCCURRENCE = 19\n\
                     VARIABLES = (\"endpoint\", \"options\")\n",
                ),
            ),
        ],
    );
    assert_eq!(x.name, "state_at");
    assert_eq!(
        (
            &x.params["line"],
            &x.params["occurrence"],
            &x.params["variables"]
        ),
        (&json!(650), &json!(19), &json!(["endpoint", "options"]))
    );
}

#[test]
fn unique_values_of_one_local_and_of_a_tuple() {
    let t = json!({"unique_values": ["str"]});
    let x = same(
        "f",
        t.clone(),
        &[
            (
                "Track the local variable `acc` of `pkg.mod.f` after line 7 executes.",
                None,
            ),
            (
                "Track the local variable `acc` of pkg.mod.f\nafter line 7 executes.",
                None,
            ),
        ],
    );
    assert_eq!(
        (&x.params["variable"], &x.params["lines"]),
        (&json!("acc"), &json!([7]))
    );
    // Two locals: the repr of their tuple.
    let x = same(
        "f",
        t,
        &[
            (
                "For `pkg.mod.f`, the local variables `a` and `b` after line 7: report the \
                 distinct (a, b) pairs.",
                None,
            ),
            (
                "For pkg.mod.f, report the distinct pairs.",
                Some("TARGET_FUNC = 'pkg.mod.f'\nTRACKED_VARS = ('a', 'b')\nAFTER_LINE = 7\n"),
            ),
        ],
    );
    assert_eq!(x.params["variables"], json!(["a", "b"]));
    assert!(x.params.get("variable").is_none());
}

#[test]
fn value_histories_reworded() {
    let x = same(
        "f",
        json!({"temporal_value_history": ["str"]}),
        &[
            (
                "Consider `pkg.mod.f`: the ordered history of local variable `acc` immediately \
                 after line 7 has executed, for each invocation.",
                None,
            ),
            (
                "Consider pkg.mod.f: the ordered history of local\nvariable `acc` immediately \
                 after line 7 has executed, for each\ninvocation.",
                None,
            ),
        ],
    );
    assert_eq!(
        x.answer["/temporal_value_history/*"],
        "/value_history/*/value"
    );
    let x = same(
        "f",
        json!({"value_history": [{"value": "str"}]}),
        &[
            (
                "For `pkg.mod.f`, the local variable `n` at each `line` event at line 4 and \
                 each `return` event at line 9.",
                None,
            ),
            (
                "For pkg.mod.f, the local variable `n` at each line event at line 4 and each\n\
                 return event at line 9.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["event"], "line_and_return");
    assert_eq!(x.params["lines"], json!([4, 9]));
}

/// "after each execution of the statement that begins on line N and ends on line M": the
/// statement's line, read per run of the statement (its continuation lines are no executions).
#[test]
fn value_history_after_a_multi_line_statement_reworded() {
    let x = same(
        "f",
        json!({"value_history": ["str"]}),
        &[
            (
                "Consider `pkg.mod.f`. Record the value of the local variable `key` immediately \
                 after each execution of the assignment statement that begins on line 89 and \
                 ends on line 92, in order.",
                None,
            ),
            (
                "Consider pkg.mod.f. Record the value of the local variable `key` immediately\n\
                 after each execution of the assignment statement that\nbegins on line 89 and \
                 ends on line 92, in order.",
                None,
            ),
            (
                "In `pkg.mod.f`, list the values of the local `key` right after every run of \
                 the statement starting on line 89 (it spans lines 89-92), in execution order.",
                None,
            ),
            (
                "In pkg.mod.f, list the values of `key` after each execution of the statement \
                 beginning on line 89.",
                Some("TARGET_FUNC = 'pkg.mod.f'\nVAR_NAME = 'key'\nOBSERVED_LINE = 89\n"),
            ),
        ],
    );
    assert_eq!(x.name, "value_history");
    assert_eq!(
        (&x.params["variable"], &x.params["lines"], &x.params["at"]),
        (&json!("key"), &json!([89]), &json!("after"))
    );
    assert_eq!(x.params["line_mode"], "statement");
    // "after line N" alone stays per reported line event.
    let x = map(
        "f",
        "Consider `pkg.mod.f`: the values of the local variable `key` after line 89 executes.",
        &json!({"value_history": ["str"]}),
        None,
    );
    assert_eq!(x.params["lines"], json!([89]));
    assert!(x.params.get("line_mode").is_none());
    assert_eq!(x.params["at"], "after");
}

/// "on each `line` event for line 384, immediately before the return statement beginning there
/// executes": the state the line event shows, before the line runs (scrapy
/// referer_policy_m3_state, dev: mapped to "after" it was equal only because a `return` changes
/// no local); "just before line N+1 executes" still observes N after it ran.
#[test]
fn observations_before_the_line_runs_reworded() {
    let t = json!({"unique_values": ["str"]});
    let x = same(
        "C.policy",
        t.clone(),
        &[
            (
                "Consider `pkg.mod.C.policy`. What is the sorted set of distinct values taken by \
                 the local variable `cls` at every execution of absolute source line 384? \
                 Observe `cls` on each `line` event for line 384, immediately before the \
                 return statement beginning there executes.",
                None,
            ),
            (
                "Consider pkg.mod.C.policy. What is the sorted set of distinct values taken by\n\
                 the local variable `cls` at every execution of line 384? Observe `cls` on\n\
                 each line event for line 384, immediately before the return statement\n\
                 beginning there executes.",
                None,
            ),
            (
                "Consider `pkg.mod.C.policy`: the distinct values of the local variable `cls` \
                 just before line 384 executes.",
                Some("TARGET_FUNC = 'pkg.mod.C.policy'\nOBSERVED_LINE = 384\n"),
            ),
        ],
    );
    assert_eq!(
        (&x.params["lines"], &x.params["at"]),
        (&json!([384]), &json!("before"))
    );
    let x = map(
        "f",
        "Consider `pkg.mod.f`: the distinct values of the local variable `acc` after the \
         statement that begins on line 7 has run, just before line 8 executes.",
        &t,
        None,
    );
    assert_eq!(
        (&x.params["lines"], &x.params["at"]),
        (&json!([7]), &json!("after"))
    );
}

/// llama_factory trainer_utils_create_apollo_optimizer_s4_dataflow (dev): "Names bound locally
/// by a … comprehension or generator expression are scoped to that comprehension and are
/// excluded as defs and uses; reads of tracked outer locals in a comprehension's iterable or
/// other expressions still count" turned comprehension reads off, and the pair of `name` read
/// by `any(target in name for target in apollo_targets)` was missing.
#[test]
fn def_use_pairs_keep_a_comprehensions_reads_of_outer_locals_when_they_still_count() {
    let t = json!({"observed_def_use_pairs": [{"def_line": "int", "use_line": "int",
                   "variable": "str"}]});
    let x = same(
        "f",
        t.clone(),
        &[
            (
                "For every invocation of `pkg.mod.f`, report the def-use pairs of `a`, `b`. \
                 Names bound locally by a list, set, or dict comprehension or generator \
                 expression are scoped to that comprehension and are excluded as defs and uses; \
                 reads of tracked outer locals in a comprehension's iterable or other \
                 expressions still count.",
                None,
            ),
            (
                "For every invocation of pkg.mod.f, report the def-use pairs of `a`, `b`.\n\
                 A comprehension's own names are excluded as defs and uses, but reads of\n\
                 tracked outer locals inside a comprehension still count.",
                None,
            ),
        ],
    );
    assert!(
        x.params.get("comprehension_uses").is_none(),
        "{:?}",
        x.params
    );
    let out = same(
        "f",
        t,
        &[(
            "For every invocation of `pkg.mod.f`, report the def-use pairs of `a`, `b`. Reads \
             inside comprehensions are excluded.",
            None,
        )],
    );
    assert_eq!(out.params["comprehension_uses"], false);
}

/// llama_factory trainer_utils_create_apollo_optimizer_s4_dataflow__r20260714 (dev): their
/// parser visits every `ast.Name` of the function by context, so a set comprehension's own
/// `param` was a use and a definition of the function's: `scopes = "flat"`, read from the
/// parser; a parser that tells comprehensions apart keeps Python's scopes.
#[test]
fn def_use_pairs_take_flat_scopes_from_a_parser_that_walks_names() {
    let t = json!({"observed_def_use_pairs": [{"def_line": "int", "use_line": "int",
                   "variable": "str"}]});
    let q = "Analyze function `pkg.mod.f` in `src/pkg/mod.py`. Track exactly these local \
             variable names: `a`, `b`. Report all unique observed runtime def-use pairs.";
    let flat = "import ast\nTRACKED = [\"a\", \"b\"]\nclass V(ast.NodeVisitor):\n    \
                def visit_Name(self, node: ast.Name) -> None:\n        \
                if isinstance(node.ctx, ast.Load):\n            uses.add(node.lineno)\n";
    let x = same("f", t.clone(), &[(q, Some(flat))]);
    assert_eq!(x.params["scopes"], "flat");
    let walked = "import ast\nfor node in ast.walk(func):\n    if isinstance(node, ast.Name) \
                  and isinstance(node.ctx, ast.Load):\n        uses.add(node.lineno)\n";
    assert_eq!(
        same("f", t.clone(), &[(q, Some(walked))]).params["scopes"],
        "flat"
    );
    let scoped = format!("{flat}    def visit_ListComp(self, node):\n        return\n");
    let y = same("f", t, &[(q, Some(scoped.as_str())), (q, None)]);
    assert!(y.params.get("scopes").is_none(), "{:?}", y.params);
}

/// llama_factory llamafy_qwen_save_weight_m3_state (dev): "Define program points
/// `line_58_exec_1` and `line_58_exec_3` as the first and third executions of line 58 … an
/// array of objects with keys `point`, `variable`, `value`" was refused ("the question names no
/// observation line"): the points' names give the line, the executions and the label.
#[test]
fn state_snapshots_at_program_points_named_by_line_and_execution_reworded() {
    let t = json!({"state_snapshots": [{"point": "str", "value": "str", "variable": "str"}]});
    let x = same(
        "save",
        t,
        &[
            (
                "Analyze function `pkg.mod.save` defined in `src/pkg/mod.py`. Count executions \
                 of source line 58 in 1-based order within a single invocation. Define program \
                 points `line_58_exec_1` and `line_58_exec_3` as the first and third executions \
                 of line 58. At each program point, report the local variables `key` and `size`.",
                None,
            ),
            (
                "In pkg.mod.save (src/pkg/mod.py), report the state at the program\n\
                 points `line_58_exec_3` and `line_58_exec_1` (the third and the first time\n\
                 line 58 runs).",
                Some("TARGET_VARIABLES = [\"key\", \"size\"]\n"),
            ),
        ],
    );
    assert_eq!(x.name, "state_snapshots");
    assert_eq!(
        (
            &x.params["lines"],
            &x.params["occurrences"],
            &x.params["point_label"]
        ),
        (
            &json!([58]),
            &json!([1, 3]),
            &json!("line_{line}_exec_{nth}")
        )
    );
    assert_eq!(x.params["rows"], "variables");
}

#[test]
fn def_use_pairs_reworded_with_their_conventions() {
    let t = json!({"observed_def_use_pairs": [{"def_line": "int", "use_line": "int",
                   "variable": "str"}]});
    let x = same(
        "f",
        t,
        &[
            (
                "For all invocations of `pkg.mod.f`, list the def-use pairs of the local \
                 variables `a`, `b`. Reads inside generator expressions and comprehensions are \
                 excluded from the outer frame's uses; reads of these locals by nested \
                 functions are included. Each load of a name is a separate use.",
                None,
            ),
            (
                "For all invocations of pkg.mod.f, list the def-use pairs of the local\n\
                 variables `a`, `b`. Reads inside generator expressions and comprehensions\n\
                 are excluded from the outer frame's uses; reads of these locals by nested\n\
                 functions are included. Each load of a name is a separate use.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["comprehension_uses"], false);
    assert_eq!(x.params["closure_uses"], true);
    assert_eq!(x.params["use_count"], "load");
    assert_eq!(x.params["variables"], json!(["a", "b"]));
    assert!(x.params.get("iterable_uses").is_none());
    // A `for` header's iterable used once per entry into the loop.
    let t = json!({"observed_def_use_pairs": [{"count": "int", "def_line": "int",
                   "use_line": "int", "variable": "str"}]});
    let x = same(
        "f",
        t,
        &[
            (
                "List the def-use pairs of the outer-function locals `items`, `out` of \
                 `pkg.mod.f`. For `for item in collection`, the iterable expression uses \
                 `collection` once when the loop is entered.",
                None,
            ),
            (
                "List the def-use pairs of the outer-function locals `items`, `out` of\n\
                 pkg.mod.f. For `for item in collection`, the iterable expression uses\n\
                 `collection` once when the loop is entered.",
                None,
            ),
            (
                "List the def-use pairs of the outer-function locals `items`, `out` of \
                 `pkg.mod.f`; a loop's iterable is read only once, when the loop starts, not \
                 at every iteration.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["iterable_uses"], "entry");
    assert_eq!(x.params["variables"], json!(["items", "out"]));
    // Definitions at their statement's first line, uses where read (llama_factory
    // cal_ppl_calculate_ppl_m4_dataflow, dev).
    let t = json!({"observed_def_use_pairs": [{"def_line": "int", "use_line": "int",
                   "variable": "str"}]});
    let x = same(
        "f",
        t,
        &[
            (
                "List the def-use pairs of `a`, `b` in `pkg.mod.f`. For a multiline statement, \
                 a definition uses the line where the defining statement begins; a use uses the \
                 line containing the read identifier in the executed expression.",
                None,
            ),
            (
                "List the def-use pairs of `a`, `b` in pkg.mod.f. For a multiline\nstatement, \
                 a definition uses the line where the defining statement begins; a use\nuses \
                 the line on which the identifier is read.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["line_mode"], "statement");
    assert_eq!(x.params["use_lines"], "reported");
}

#[test]
fn exceptions_reworded_and_the_flat_propagated_shape() {
    for (shape, name) in [
        (json!({"caught_exception_kinds": ["str"]}), "caught_types"),
        (
            json!({"exception_type_counts": [{"count": "int", "exception_type": "str"}]}),
            "exception_counts",
        ),
    ] {
        let x = same(
            "f",
            shape,
            &[
                ("Which exceptions does `pkg.mod.f` catch?", None),
                ("Which exceptions does\npkg.mod.f catch?", None),
            ],
        );
        assert_eq!(x.name, name);
    }
    // Their counts are their tracer's exception events: flux's inferred bare re-raises are
    // left out, however the prose words re-raises.
    let x = same(
        "f",
        json!({"exception_type_counts": [{"count": "int", "exception_type": "str"}]}),
        &[
            (
                "Across every invocation of `pkg.mod.f`, how many target-frame observations \
                 are there of each exception type? A bare re-raise in the target frame does not \
                 count as another observation when it re-raises the same exception object.",
                None,
            ),
            (
                "Across every invocation of pkg.mod.f, count each exception type observed in\n\
                 its frame. Count an observation whenever Python reports an exception event in \
                 that exact target frame.",
                Some("TARGET_FUNC = 'pkg.mod.f'\n"),
            ),
        ],
    );
    assert_eq!(x.params["events"], "reported");
    let x = same(
        "f",
        json!({"exception_type": "str", "exception_message": "str"}),
        &[
            (
                "Which exception propagates out of `pkg.mod.f`? Give its type and message.",
                None,
            ),
            (
                "Which exception propagates out of\npkg.mod.f? Give its type and message.",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "exception_info");
    assert_eq!(x.params["escapes"], "f");
    // wherever it was raised: their tracer sees only the target (llama_factory
    // adapter_setup_freeze_tuning_s5_exceptions, dev: raised in the test's untraced code)
    assert_eq!(x.params["origins"], "any");
    assert_eq!(x.answer["/exception_type"], "/exception/type");
}

/// "every function lexically contained in the body of class `C`, including definitions in
/// classes nested within `C` ... Exclude ... comprehension frames, and functions nested inside
/// a method" (scrapy media_process_request_m6_calls, dev): the class with `methods`, and no
/// `code_objects` (comprehensions are excluded there, not included).
#[test]
fn class_scope_with_nested_classes_and_excluded_comprehensions() {
    let x = same(
        "C._run",
        json!({"invocation_counts": [{"count": "int", "file": "str", "func": "str"}]}),
        &[
            (
                "The target reached is `pkg.mod.C._run`. Consider every function or method \
                 definition lexically contained in the body of class `C` in `src/pkg/mod.py`, including definitions in classes nested \
                 within `C`. Exclude module-level functions, comprehension frames, and \
                 functions or closures nested inside a method.",
                None,
            ),
            (
                "The target reached is pkg.mod.C._run. Consider every method definition in\n\
                 the body of class `C` in src/pkg/mod.py,\n\
                 including definitions in classes nested\nwithin `C`. Exclude comprehension \
                 frames and functions nested inside a method. Function identity is the executing \
                 code object's dotted qualname.",
                None,
            ),
        ],
    );
    assert_eq!(
        (&x.params["class"], &x.params["methods"]),
        (&json!("C"), &json!(true))
    );
    assert!(x.params.get("code_objects").is_none());
}

#[test]
fn calls_reworded() {
    let x = same(
        "C.run,C.step,helper",
        json!({"function_call_order": [{"function": "str"}]}),
        &[
            (
                "During the first invocation of `pkg.mod.C.run`, track calls to exactly these \
                 functions: `pkg.mod.C.step`, `pkg.mod.helper`. Every resumption of a generator \
                 counts as a call event, and the call that begins the invocation itself.",
                None,
            ),
            (
                "During the first invocation of pkg.mod.C.run, track calls to exactly these\n\
                 functions: pkg.mod.C.step, pkg.mod.helper. Every resumption of a generator\n\
                 counts as a call event, and the call that begins the invocation itself.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["functions"], json!(["C.step", "helper"]));
    assert_eq!(x.params["resumptions"], true);
    assert_eq!(x.params["include_self"], true);
    let x = same(
        "P.fresh",
        json!({"invocation_counts": [{"count": "int", "file": "str", "func": "str"}]}),
        &[
            (
                "The target is `pkg.mod.P.fresh`. Count calls of every code object defined in \
                 the body of class `P`, comprehensions included; report 0 for those never \
                 called. The tracked scope is every function defined directly in the body of \
                 class `P`.",
                None,
            ),
            (
                "The target is pkg.mod.P.fresh. Count calls of every code object defined in\n\
                 the body of class `P`, comprehensions included; report 0 for those never\n\
                 called. The tracked scope is every function defined directly in the body of\n\
                 class `P`.",
                None,
            ),
        ],
    );
    assert_eq!(
        (&x.params["class"], &x.params["code_objects"]),
        (&json!("P"), &json!(true))
    );
    let x = same(
        "f,g",
        json!({"covered_functions": [{"file": "str", "func": "str"}]}),
        &[
            (
                "Tracked functions: `pkg.mod.f`, `pkg.mod.g`. Which of them run?",
                None,
            ),
            (
                "Tracked functions: pkg.mod.f,\npkg.mod.g. Which of them run?",
                None,
            ),
            (
                "Which of the tracked functions run?",
                Some("TRACKED_FUNCS = ('pkg.mod.f', 'pkg.mod.g')\n"),
            ),
        ],
    );
    assert_eq!(x.params["functions"], json!(["f", "g"]));
}

#[test]
fn line_counts_reworded() {
    let x = same(
        "C.f",
        json!({"line_execution_counts": [{"count": "int", "line": "int"}]}),
        &[
            (
                "For `pkg.mod.C.f`, report the execution count of every line from 365 through \
                 389 inclusive; attribute a continuation line to the line where its innermost \
                 enclosing statement begins.",
                None,
            ),
            (
                "For pkg.mod.C.f, report the execution count of every line from 365 through\n\
                 389 inclusive; attribute a continuation line to the line where its innermost\n\
                 enclosing statement begins.",
                None,
            ),
        ],
    );
    assert_eq!(
        (&x.params["from"], &x.params["to"], &x.params["line_mode"]),
        (&json!(365), &json!(389), &json!("statement"))
    );
}

#[test]
fn invariants_reworded_and_prose_predicates_compiled() {
    let t = json!({"invariant_report": [{"held_always": "bool", "observations": "int",
                   "predicate": "str", "violations": "int"}]});
    let x = same(
        "C.run",
        t.clone(),
        &[
            (
                "For the target frame `pkg.mod.C.run`, evaluate these candidate predicates: \
                 `len(x) > 2` at line 95; `y is None` at line 91.",
                None,
            ),
            (
                "For the target frame pkg.mod.C.run, evaluate these candidate predicates:\n\
                 `len(x) > 2` at line 95;\n`y is None` at line 91.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["predicates"], json!(["len(x) > 2", "y is None"]));
    // A predicate in prose is compiled to the Python it unambiguously means.
    let ps = predicates(&Question {
        eval: &eval("C.run"),
        text: "For the target frame `pkg.mod.C.run`: `'/' occurs in repr(path)` at line 40.",
        template: &t,
        parser: None,
    })
    .unwrap();
    assert_eq!(ps[0].expr, "('/') in (repr(path))");
    assert_eq!(ps[0].lines, [40]);
    assert_eq!(
        prose_predicate("`count` is at least `len(items)`").as_deref(),
        Some("(count) >= (len(items))")
    );
    assert_eq!(
        prose_predicate("`stack` is non-empty").as_deref(),
        Some("len(stack) > 0")
    );
    assert_eq!(prose_predicate("len(x) > 2"), None, "Python already");
    let one = json!({"is_invariant_always_held": "bool", "total_iterations_observed": "int",
                     "violating_iteration_count": "int"});
    let x = same(
        "f",
        one,
        &[
            (
                "Across every invocation of `pkg.mod.f`, did the candidate predicate `n % 13 != \
                 0` hold at every iteration? An iteration is one execution of the statement at \
                 line 39.",
                None,
            ),
            (
                "Across every invocation of pkg.mod.f, did the candidate predicate\n`n % 13 != \
                 0` hold at every iteration? An iteration is one execution of the\nstatement at \
                 line 39.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["predicates"], json!(["n % 13 != 0"]));
}

/// Every rule of the table has a test above (a new rule needs one).
#[test]
fn every_rule_is_tested_here() {
    let me = include_str!("native_rules.rs");
    for (shape, _) in RULES {
        let first = shape.split('+').next().unwrap();
        assert!(
            me.contains(&format!("\"{first}\"")),
            "rule `{shape}` has no test in tests/native_rules.rs"
        );
    }
}

/// "what distinct exception types are observed in `exception` trace events delivered to the
/// target frame" (kedro starters_fetch_validate_parse_config_from_file_m5_exceptions and
/// jupyter_create_kernel_m5_exceptions, dev): `exception_counts`' `exception_types`, sorted
/// unless the prose asks for first-occurrence order.
#[test]
fn exception_types_sorted_or_in_first_occurrence_order() {
    let t = json!({"exception_types": ["str"]});
    let x = same(
        "f",
        t.clone(),
        &[
            (
                "Across the whole test run, what distinct exception types are observed in \
                 Python `exception` trace events delivered to the exact target frame \
                 `pkg.mod.f` in `src/pkg/mod.py`? Remove duplicates, then sort the remaining \
                 strings in ascending lexicographic order.",
                None,
            ),
            (
                "Across the whole test run, which distinct exception types reach the frame of\n\
                 pkg.mod.f in src/pkg/mod.py as exception events? Deduplicate and sort them\n\
                 by Unicode code point.",
                Some("TARGET_FUNC = \"pkg.mod.f\"\n"),
            ),
        ],
    );
    assert_eq!(x.name, "exception_counts");
    assert_eq!(x.params["events"], "reported");
    assert!(x.params.get("order").is_none());
    let x = same(
        "f",
        t,
        &[
            (
                "Report the distinct exception types whose exception events occur in the frame \
                 of `pkg.mod.f` over the whole run, keeping only their first occurrence. Emit \
                 the list in chronological first-occurrence order across all invocations; do \
                 not sort it alphabetically.",
                None,
            ),
            (
                "Report the distinct exception types whose exception events occur in the frame\n\
                 of pkg.mod.f over the whole run, in chronological first-occurrence\norder; do \
                 not sort it.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["order"], "first_seen");
}

/// The Nth execution of a line with no invocation to count it in is counted across the test
/// (scrapy curl_curl_to_request_kwargs_s3_state, dev: "for the 11th time across all
/// invocations"; "Count executions of line 141 chronologically from 1 across the complete
/// execution of the named test method"; their parser's counter is never reset at a `call`).
#[test]
fn state_at_counts_the_nth_execution_across_the_test() {
    let t = json!({"observed_state": [{"value": "str", "variable": "str"}]});
    let x = same(
        "curl",
        t.clone(),
        &[
            (
                "Consider `pkg.mod.curl` in `src/pkg/mod.py`. What are the values of the local \
                 variables `argv` and `url` immediately after line 141 has executed for the \
                 11th time across all invocations of the target function during the test run?",
                None,
            ),
            (
                "Consider pkg.mod.curl in src/pkg/mod.py. What are the values of the local\n\
                 variables `url` and `argv` immediately after line 141 has executed for the 11th \
                 time? Count executions of line 141 chronologically from 1 across the complete \
                 execution of the named test method.",
                None,
            ),
            (
                "Consider pkg.mod.curl: which values do the local variables `argv` and `url` \
                 hold immediately after line 141 has executed for the 11th time?",
                None,
            ),
        ],
    );
    assert_eq!(
        (&x.params["across_invocations"], &x.params["occurrence"]),
        (&json!(true), &json!(11))
    );
    assert!(x.params.get("invocation").is_none());
    // an invocation named: the Nth execution within it
    let x = map(
        "curl",
        "During the 2nd invocation of `pkg.mod.curl`, what are the values of the local \
         variables `argv` and `url` immediately after line 141 has executed for the 3rd time?",
        &t,
        None,
    );
    assert_eq!(
        (&x.params["invocation"], &x.params["occurrence"]),
        (&json!(2), &json!(3))
    );
    assert!(x.params.get("across_invocations").is_none());
}

/// A tracked set that lists the target itself puts the target's own call first (scrapy
/// engine_open_spider_async_s6_calls, dev: the tracked set opens with the target, "including
/// the target's initial entry, its resumptions", and their answer starts and ends with it).
#[test]
fn call_order_with_the_target_among_the_tracked_functions() {
    let x = same(
        "open_spider,pause,unpause",
        json!({"function_call_order": [{"file": "str", "func": "str"}]}),
        &[
            (
                "During the first invocation of `pkg.mod.E.open_spider` in `src/pkg/mod.py`, \
                 what is the exact chronological sequence of Python `call` trace events for \
                 this tracked set of functions: `pkg.mod.E.open_spider`, `pkg.mod.E.pause`, \
                 `pkg.mod.E.unpause`? Include calls whenever their `call` events occur during \
                 that lifetime, including the target's initial entry, its resumptions, and \
                 nested calls made while awaited work runs even when the target frame is \
                 suspended.",
                None,
            ),
            (
                "During the first invocation of pkg.mod.E.open_spider in src/pkg/mod.py, list\n\
                 the `call` events of the tracked set of functions pkg.mod.E.open_spider,\n\
                 pkg.mod.E.pause, pkg.mod.E.unpause in order. A `call` event emitted when this \
                 same coroutine frame resumes after an `await` is another entry; nested calls \
                 count too, and every call during its lifetime, while the target frame is \
                 suspended as well.",
                None,
            ),
        ],
    );
    assert_eq!(
        x.params["functions"],
        json!(["E.open_spider", "E.pause", "E.unpause"])
    );
    assert_eq!(
        (
            &x.params["include_self"],
            &x.params["resumptions"],
            &x.params["lifetime"]
        ),
        (&json!(true), &json!(true), &json!(true))
    );
}

/// A run before Python 3.11 named frames `module.co_name`: their parser's constant says
/// `pkg.mod.run` where the prose names `pkg.mod.Session.run` (kedro session_run_s5_exceptions,
/// dev: `TARGET_FUNC = "kedro.framework.session.session.run"`, the question
/// `kedro.framework.session.session.KedroSession.run`); the target is the method.
#[test]
fn a_co_name_target_in_the_parser_is_the_method_the_prose_names() {
    let t = json!({"caught_exception_kinds": ["str"]});
    let x = same(
        "run",
        t,
        &[
            (
                "Consider every invocation of `pkg.mod.Session.run` in `src/pkg/mod.py`. \
                 Which exception types are caught inside the target function?",
                Some("TARGET_FILE = \"src/pkg/mod.py\"\nTARGET_FUNC = \"pkg.mod.run\"\n"),
            ),
            (
                "Consider every invocation of\npkg.mod.Session.run in src/pkg/mod.py. Which \
                 exception types are caught inside the target function?",
                None,
            ),
        ],
    );
    assert_eq!(x.params["function"], "Session.run");
    // the prose naming it in a `src/` layout (`src.pkg.mod.Session.run`: llama_factory
    // mm_plugin_process_messages_m2_loops, dev: `TARGET_FUNC =
    // "llamafactory.data.mm_plugin.process_messages"`, the question
    // `src.llamafactory.data.mm_plugin.MiniCPMVPlugin.process_messages`)
    let x = same(
        "run",
        json!({"caught_exception_kinds": ["str"]}),
        &[
            (
                "Consider every invocation of `src.pkg.mod.Session.run` in `src/pkg/mod.py`. \
                 Which exception types are caught inside the target function?",
                Some("TARGET_FILE = \"src/pkg/mod.py\"\nTARGET_FUNC = \"pkg.mod.run\"\n"),
            ),
            (
                "Consider every invocation of src.pkg.mod.Session.run in\nsrc/pkg/mod.py. \
                 Which exception types are caught inside the target function?",
                Some("TARGET_FUNC = \"pkg.mod.run\"\n"),
            ),
        ],
    );
    assert_eq!(x.params["function"], "Session.run");
    // a module-level function named by the parser stays itself
    let x = map(
        "run",
        "Which exception types does `pkg.mod.run` catch?",
        &json!({"caught_exception_kinds": ["str"]}),
        Some("TARGET_FUNC = \"pkg.mod.run\"\n"),
    );
    assert_eq!(x.params["function"], "run");
}

/// No observation line: "Record every distinct value each variable holds from the moment it is
/// first assigned until the frame exits ... COMBINED into one set", of a nested helper function
/// the prose names without `<locals>` and a pre-3.11 parser names by its `co_name` (kedro
/// node_from_dict_m3_state, dev): every change of the locals, their values pooled, the target
/// `C.m.<locals>._helper`.
#[test]
fn unique_values_of_every_change_pooled_in_a_nested_function() {
    let parser = "# The tracer falls back to co_name before 3.11\n\
                  TARGET_FUNC_QUALNAME = \"pkg.mod._helper\"\nTRACKED_VARS = (\"keys\", \"result\")\n";
    let x = same(
        "_helper",
        json!({"unique_values": ["str"]}),
        &[
            (
                "Every call reaches the nested helper function `pkg.mod.C.m._helper` (defined in \
                 `src/pkg/mod.py`, lines 499-527). During every invocation, observe the two local \
                 variables `result` and `keys` of the `_helper` frame. Record every distinct \
                 value each variable holds from the moment it is first assigned until the frame \
                 exits. Collect the distinct repr strings observed for `result` and `keys` \
                 COMBINED into one set, across all invocations and all observation points.",
                Some(parser),
            ),
            (
                "Every call reaches the nested\nhelper function pkg.mod.C.m._helper (defined in \
                 src/pkg/mod.py). In every invocation, record every distinct value each of the \
                 local variables `keys` and `result` holds, from the moment it is first \
                 assigned; the repr strings of both are combined into one set.",
                Some(parser),
            ),
        ],
    );
    assert_eq!(x.name, "unique_values");
    assert_eq!(x.params["function"], "C.m.<locals>._helper");
    // "the sorted set of distinct values taken by either local variable `a` or local variable
    // `b` at the observation events defined below: (1) function entry ... (2) immediately
    // before every source line that Python executes in that frame" (kedro
    // omegaconf_config_check_duplicates_m3_state, dev): the same options, a module function.
    let y = same(
        "f",
        json!({"unique_values": ["str"]}),
        &[
            (
                "Consider every invocation of `pkg.mod.f` in `src/pkg/mod.py`. What is the \
                 sorted set of distinct values taken by either local variable `keys` or local \
                 variable `result` at the observation events defined below? An observation \
                 event is: (1) function entry; (2) immediately before every source line that \
                 Python executes in that frame; (3) before the frame returns.",
                None,
            ),
            (
                "Consider every invocation of pkg.mod.f in src/pkg/mod.py. Deduplicate the repr \
                 strings of the local variables `keys` and `result` across both variables and \
                 all invocations, observed immediately before every source line that\nPython \
                 executes in that frame.",
                Some("VARIABLES = (\"keys\", \"result\")\n"),
            ),
        ],
    );
    assert_eq!(
        (
            &y.params["event"],
            &y.params["combine"],
            &y.params["function"]
        ),
        (&json!("change"), &json!("union"), &json!("f"))
    );
    assert_eq!(
        (
            &x.params["event"],
            &x.params["combine"],
            &x.params["variables"]
        ),
        (
            &json!("change"),
            &json!("union"),
            &json!(["keys", "result"])
        )
    );
    assert!(x.params.get("lines").is_none());
}

/// "Each predicate has its own observation point, shown after the colon: - `p`: line 176."
/// (scrapy contracts_from_method_m7_invariants, dev: their parser keeps the lines in a dict
/// keyed by other constants' names, so the prose is read): each candidate at its line.
#[test]
fn invariant_candidates_listed_with_their_line_after_a_colon() {
    let t = json!({"invariant_report": [{"held_always": "bool", "observations": "int",
                   "predicate": "str", "violations": "int"}]});
    let x = same(
        "M.from_method",
        t,
        &[
            (
                "Evaluate the candidate predicates below in the target frame of \
                 `pkg.mod.M.from_method`. Each predicate has its own observation point, shown \
                 after the colon:\n\n- `(\"url\" in kwargs) and len(kwargs[\"url\"]) % 5 == 1`: \
                 line 176.\n- `request_cls is not Request`: line 165, where `Request` is the \
                 imported class.\n- `sum(int(i.args[0]) for i in contracts) % 17 != 1`: line \
                 181; `i` is only the predicate's generator-expression variable.",
                None,
            ),
            (
                "Evaluate the candidate predicates below in the target frame of\n\
                 pkg.mod.M.from_method, each at its own line:\n\
                 - `(\"url\" in kwargs) and len(kwargs[\"url\"]) % 5 == 1` at line 176;\n\
                 - `request_cls is not Request` at line 165;\n\
                 - `sum(int(i.args[0]) for i in contracts) % 17 != 1` at line 181.",
                None,
            ),
        ],
    );
    assert_eq!(
        x.params["predicates"],
        json!([
            "(\"url\" in kwargs) and len(kwargs[\"url\"]) % 5 == 1",
            "request_cls is not Request",
            "sum(int(i.args[0]) for i in contracts) % 17 != 1"
        ])
    );
}

/// One candidate "evaluated verbatim against the target frame's locals: `p`", observed "at each
/// Python `line` execution event for absolute, 1-based source line 134" (llama_factory
/// evaluator_eval_m7_invariants and trainer_batched_forward_pass_m7_invariants, dev, read) or
/// where "an iteration observation is one Python line event ... at absolute line 667" (kedro
/// runner_outputs_needed_by_children_m7_invariants, dev).
#[test]
fn one_candidate_with_its_observation_line_in_other_words() {
    let one = json!({"is_invariant_always_held": "bool", "total_iterations_observed": "int",
                     "violating_iteration_count": "int"});
    let x = same(
        "f",
        one,
        &[
            (
                "Consider only runtime events from the exact function body `pkg.mod.f`. Observe \
                 the target frame at each Python `line` execution event for absolute, 1-based \
                 source line 134, whose statement begins `results[subject] =`. At every \
                 observation, evaluate this one candidate predicate verbatim against the target \
                 frame's current Python locals using ordinary Python semantics: `end - start >= \
                 1 + (i % 5)`. A violating iteration is an observation at which it is false.",
                None,
            ),
            (
                "During the complete test run, consider every invocation of pkg.mod.f. At every \
                 iteration observation defined below, did the candidate predicate `end - start \
                 >= 1 + (i % 5)` hold? An iteration observation is one Python line event in the \
                 target function's own frame at absolute line 134, the line where the \
                 assignment begins.",
                None,
            ),
        ],
    );
    assert_eq!(
        x.params["predicates"],
        json!(["end - start >= 1 + (i % 5)"])
    );
    let ps = predicates(&Question {
        eval: &eval("f"),
        text: "Consider `pkg.mod.f`. Did the candidate predicate `n > 0` hold? An iteration \
               observation is one Python line event at absolute line 12.",
        template: &json!({"is_invariant_always_held": "bool", "total_iterations_observed": "int",
                          "violating_iteration_count": "int"}),
        parser: None,
    })
    .unwrap();
    assert_eq!(ps[0].lines, [12]);
}

/// "Track the local variable `name` (the string assembled inside `parse_test`)": the aside's
/// name is not a variable (jinja parser_parse_test_m3_state, dev: mapped to `name` and
/// `parse_test`, "never bound at an observation point"); a list under a bold heading ends at the
/// next heading (jinja runtime_new_context_m4_dataflow, dev: "**Tracked variables** (only
/// these ten names; …): `a`, … **Def and use rules** (…)").
#[test]
fn variables_named_beside_asides_and_under_a_heading() {
    let t = json!({"unique_values": ["str"]});
    let x = same(
        "C.parse",
        t.clone(),
        &[
            (
                "The target is `pkg.mod.C.parse` in `src/pkg/mod.py`. Track the local variable \
                 `name` (the dotted name assembled inside `parse`). Record its value at each \
                 `line` event at line 60 and each `return` event at line 88.",
                None,
            ),
            (
                "The target is pkg.mod.C.parse in src/pkg/mod.py. Track the local\nvariable \
                 `name` (the dotted name assembled\ninside `parse`). Record its value at each \
                 `line` event at line 60 and each `return` event at line 88.",
                None,
            ),
        ],
    );
    assert_eq!(
        (x.params.get("variable"), x.params.get("variables")),
        (Some(&json!("name")), None),
        "{:?}",
        x.params
    );
    let t = json!({"observed_def_use_pairs": [{"variable": "str", "def_line": "int",
                   "use_line": "int", "count": "int"}]});
    let x = same(
        "make",
        t,
        &[
            (
                "The target is `pkg.mod.make` in `src/pkg/mod.py`.\n\n**Tracked variables** \
                 (only these three names; ignore any other locals):\n\n`env`, `key`, `value`\n\n\
                 **Def and use rules** (line numbers are absolute; the `line` event fires on \
                 the statement's first line):\n\n- Parameters (`env`) are defined at line 9 on \
                 each `call` event.\n- `return f(env)` at line 20 uses `env` on line 20 (each \
                 AST load counts separately).",
                None,
            ),
            (
                "The target is pkg.mod.make in src/pkg/mod.py. **Tracked variables** (only these \
                 three names): `env`, `key`, `value` **Def and use rules** (absolute lines): \
                 - Parameters (`env`) are defined at line 9 on each `call` event. - `return \
                 f(env)` at line 20 uses `env` on line 20 (each AST load counts separately).",
                None,
            ),
        ],
    );
    assert_eq!(x.params["variables"], json!(["env", "key", "value"]));
    assert_eq!(x.params["use_count"], json!("load"));
}

/// jinja async_utils_wrapper_s6_calls (dev): `IS_ASYNC_FUNC` sorts before `TARGET_FUNC`, and
/// the first constant of the target role was taken: the target is `TARGET…`'s. The path is a
/// cross-function one over the tracked functions ("1. `a` 2. `b`", an example in an aside),
/// for every activation "across the entire pytest run", where the mapping had taken the
/// first invocation of `is_async` alone (1 of 1,224 lines).
#[test]
fn a_cross_function_path_over_every_activation_of_the_target() {
    let t = json!({"executed_path": [{"file": "str", "func": "str", "line": "int"}]});
    let parser = "TARGET_REL_FILE = \"src/pkg/mod.py\"\n\
                  TARGET_FUNC = \"pkg.mod.deco.<locals>.wrapper\"\n\
                  IS_ASYNC_FUNC = \"pkg.mod.deco.<locals>.is_async\"\n\
                  TRACKED_FUNCS = frozenset({TARGET_FUNC, IS_ASYNC_FUNC})\n";
    let x = same(
        "wrapper,is_async",
        t,
        &[
            (
                "Report the executed_path while the target function is active. The target \
                 function is `pkg.mod.deco.<locals>.wrapper` defined in `src/pkg/mod.py`.\n\n\
                 **Tracked functions** (only these two; use the format `module.qualname`, for \
                 example `pkg.mod.deco.<locals>.is_async`):\n\n1. \
                 `pkg.mod.deco.<locals>.wrapper`\n2. `pkg.mod.deco.<locals>.is_async`\n\n\
                 Collect every `line` event of a tracked function whenever at least one wrapper \
                 frame is active, in order across the entire pytest run.",
                Some(parser),
            ),
            (
                "Report the executed_path while the target function is active. The target \
                 function is pkg.mod.deco.<locals>.wrapper defined in src/pkg/mod.py. \
                 **Tracked functions** (only these two): 1. pkg.mod.deco.<locals>.wrapper 2. \
                 pkg.mod.deco.<locals>.is_async. Collect every `line` event of a tracked \
                 function whenever at least one wrapper frame is active, in order across the \
                 entire\npytest run.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["function"], "deco.<locals>.wrapper");
    assert_eq!(
        x.params["functions"],
        json!(["deco.<locals>.wrapper", "deco.<locals>.is_async"])
    );
    assert_eq!(x.params["all_invocations"], json!(true));
    assert!(x.params.get("invocation").is_none());
}

/// jinja generate_identifier_pattern_main_s6_calls (dev): their parser tracks `main` to find
/// the 7th invocation, and the prose says "Do not include `call` events for `main` itself":
/// the target among the tracked functions had made its own call the first entry (272 for 271).
#[test]
fn call_order_without_the_targets_own_call_when_the_prose_says_so() {
    let t = json!({"function_call_order": [{"file": "str", "func": "str"}]});
    let parser = "TARGET_FUNC = \"pkg.mod.main\"\nTARGET_INVOCATION = 7\n\
                  TRACKED_FUNCS: tuple[str, ...] = (\"pkg.mod.build\", \"pkg.mod.scan\", \
                  \"pkg.mod.main\")\n";
    let x = same(
        "main,build,scan",
        t,
        &[
            (
                "In `src/pkg/mod.py`, `pkg.mod.main` is invoked many times; answer for its 7th \
                 invocation. Track calls to exactly these functions: `pkg.mod.build`, \
                 `pkg.mod.scan`. Do not include `call` events for `main` itself in the answer \
                 sequence. Include calls made by tracked callees nested inside those calls.",
                Some(parser),
            ),
            (
                "In src/pkg/mod.py, pkg.mod.main is invoked many times; answer for its 7th\n\
                 invocation. Track calls to exactly these functions: pkg.mod.build, \
                 pkg.mod.scan. Do not include `call` events for `main`\nitself in the answer \
                 sequence. Include calls made by tracked callees nested inside those calls.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["functions"], json!(["build", "scan"]));
    assert!(x.params.get("include_self").is_none(), "{:?}", x.params);
    assert_eq!(x.params["invocation"], json!(7));
}

/// jinja visitor_visit_m6_calls (dev): "Exclude nested functions, closures, comprehension
/// frames, properties, `__init__`, dunder methods" — a `__call__` of a Protocol class in the
/// module was a sixth row.
#[test]
fn module_call_counts_without_dunder_methods() {
    let t = json!({"invocation_counts": [{"file": "str", "func": "str", "count": "int"}]});
    let x = same(
        "visit",
        t,
        &[
            (
                "The primary target is `pkg.mod.V.visit` in `src/pkg/mod.py`. Scope: consider \
                 every function and method defined in `src/pkg/mod.py`, all methods of its \
                 classes. Exclude nested functions, closures, comprehension frames, properties, \
                 `__init__`, dunder methods, and inherited methods.",
                None,
            ),
            (
                "The primary target is pkg.mod.V.visit in src/pkg/mod.py. Scope: consider \
                 every function and method defined in src/pkg/mod.py, all methods of its\n\
                 classes. Exclude nested functions, closures, comprehension frames,\nproperties, \
                 `__init__`, dunder\nmethods, and inherited methods.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["exclude_dunder"], json!(true));
    assert_eq!(x.params["methods"], json!(true));
    let kept = map(
        "visit",
        "The primary target is `pkg.mod.V.visit` in `src/pkg/mod.py`. Count every function \
         and all methods of its classes, dunder methods included.",
        &json!({"invocation_counts": [{"file": "str", "func": "str", "count": "int"}]}),
        None,
    );
    assert!(kept.params.get("exclude_dunder").is_none());
}

/// Candidates as quoted strings with their lines (jinja filters_do_urlize_m7_invariants, dev:
/// the spans `def` and `event=line` were taken as candidates and the hook refused the run,
/// "predicate 'def' does not compile"); and candidates observed at observation points numbered
/// in a list of their own, in prose, reported in the question's words (jinja
/// debug_get_template_locals_m7_invariants, dev: unmapped); a candidate in prose flux does not
/// compile is refused by name, never sent to the hook.
#[test]
fn invariant_candidates_quoted_or_at_numbered_observation_points() {
    let t = json!({"invariant_report": [{"held_always": "bool", "observations": "int",
                   "predicate": "str", "violations": "int"}]});
    let x = same(
        "urlize",
        t.clone(),
        &[
            (
                "Target function: `pkg.mod.urlize` (the function whose `def` begins at line 742 \
                 of `src/pkg/mod.py`).\n\nCandidate predicates (verbatim strings) and their \
                 observation points:\n- \"isinstance(rel_parts, set)\" observed at line 795 \
                 (`event=line`)\n- \"nofollow is False or \"nofollow\" in rel_parts\" observed \
                 at line 795 (`event=line`)\n- \"len(value) > 0\" observed at line 804 \
                 (`event=line`)\n\nLine numbers are absolute.",
                None,
            ),
            (
                "Target function: pkg.mod.urlize (the function whose `def` begins at line\n742 \
                 of src/pkg/mod.py). Candidate predicates (verbatim strings) and their \
                 observation points: - \"isinstance(rel_parts, set)\" observed at line\n795 \
                 (`event=line`) - \"nofollow is False or \"nofollow\" in rel_parts\" observed \
                 at line 795 (`event=line`) - \"len(value) > 0\" observed at line 804 \
                 (`event=line`) Line numbers are absolute.",
                None,
            ),
        ],
    );
    assert_eq!(
        x.params["predicates"],
        json!([
            "isinstance(rel_parts, set)",
            "nofollow is False or \"nofollow\" in rel_parts",
            "len(value) > 0"
        ])
    );
    assert!(x.params.get("labels").is_none());
    let points = |cands: &str| {
        format!(
            "The target function is `pkg.mod.get_locals` defined in `src/pkg/mod.py` (the \
             `def get_locals` line is line 131).\n\n**Observation points**:\n\n1. **Line 150, \
             `line` event** — the statement `if not name.startswith(\"l_\"):`.\n2. **Line 167, \
             `line` event** — the statement `if value is missing:`.\n\n**Candidate \
             predicates** (evaluate verbatim):\n\n{cands}\n\nReturn JSON."
        )
    };
    let prose = "- `len(name) is strictly greater than 8` — at observation point 1 only.\n\
                 - `name is non-empty` — at observation point 2 only.";
    let x = same(
        "get_locals",
        t.clone(),
        &[
            (points(prose).as_str(), None),
            (
                &points(prose)
                    .replace("\n\n", " ")
                    .replace(" only.", " only"),
                None,
            ),
        ],
    );
    assert_eq!(
        x.params["predicates"],
        json!(["(len(name)) > (8)", "len(name) > 0"])
    );
    assert_eq!(
        x.params["labels"],
        json!(["len(name) is strictly greater than 8", "name is non-empty"])
    );
    let q = points("- `name starts with l underscore` — at observation point 1 only.");
    let err = native_extractor(&Question {
        eval: &eval("get_locals"),
        text: &q,
        template: &t,
        parser: None,
    })
    .unwrap_err();
    assert!(
        err.contains("`name starts with l underscore` is prose"),
        "{err}"
    );
}

/// "At each observation point … record Python `repr(async_func.__name__)`" (jinja
/// async_utils_decorator_m3_state, dev): the answer is computed from the local, and flux's
/// observations are the local's own repr (`<function async_a at 0x…>`): refused by name rather
/// than answered with other values.
#[test]
fn values_computed_from_a_local_are_refused_not_answered_with_its_repr() {
    let text = "The target is `pkg.mod.deco` in `src/pkg/mod.py`. Track the local parameter \
                `async_func` (the callable passed into `deco`). At each observation point below, \
                read its runtime `__name__` attribute and record Python \
                `repr(async_func.__name__)`. Observation points: each `call` event at line 16 \
                and each `return` event at line 54.";
    let err = native_extractor(&Question {
        eval: &eval("deco"),
        text,
        template: &json!({"unique_values": ["str"]}),
        parser: None,
    })
    .unwrap_err();
    assert!(err.contains("`repr(async_func.__name__)`"), "{err}");
}

/// "For each observation, construct this five-item Python tuple: `(invocation_number,
/// executed_line_number, len(html), tuple(params.keys()), key_if_defined_else_None)`" (fastapi
/// docs_get_swagger_ui_html_m3_state, dev: mapped to the locals `key_if_defined_else_None` and
/// `key`, "never bound"); "take the value of `name` as Python `repr(name)`" stays the local's.
#[test]
fn a_constructed_tuple_of_expressions_is_refused_and_a_locals_repr_is_not() {
    let t = json!({"unique_values": ["str"]});
    let text = "Consider every invocation of `pkg.mod.page` in `src/pkg/mod.py`. At every \
                execution of line 171 or line 184, observe the frame immediately before the \
                statement on that line executes. For each observation, construct this \
                five-item Python tuple, in order: `(invocation_number, executed_line_number, \
                len(html), tuple(params.keys()), key_if_defined_else_None)`. Here `html`, \
                `params`, and `key` are the local variables in that frame.";
    let err = native_extractor(&Question {
        eval: &eval("page"),
        text,
        template: &t,
        parser: None,
    })
    .unwrap_err();
    assert!(err.contains("a value computed from locals"), "{err}");
    let x = map(
        "page",
        "Consider every invocation of `pkg.mod.page` in `src/pkg/mod.py`. Track the local \
         variable `name`. Record it as Python `repr(name)` at each `line` event at line 60 \
         and each `return` event at line 88.",
        &t,
        None,
    );
    assert_eq!(x.params["variable"], json!("name"));
}

/// "The tracked function set is exactly: - `{"file": "src/pkg/mod.py", "func":
/// "pkg.mod.C.get"}` …", their parser keeping (file, function) pairs (fastapi
/// tutorial003_py310_websocket_endpoint_m6_calls, dev: "the question lists no tracked
/// functions"); and a TRACE_FILE that is the whole root (`/testbed/`), the target's file given
/// relative (fastapi utils_deep_dict_update_s6_calls, dev: "names no `module.qualname` of
/// TRACE_FILE").
#[test]
fn tracked_functions_as_file_and_func_objects_and_a_root_wide_trace_file() {
    let t = json!({"covered_functions": [{"file": "str", "func": "str"}]});
    let list = "The tracked function set is exactly:\n\
                - `{\"file\": \"src/pkg/mod.py\", \"func\": \"pkg.mod.C.connect\"}`\n\
                - `{\"file\": \"src/pkg/mod.py\", \"func\": \"pkg.mod.C.send\"}`\n\
                - `{\"file\": \"src/pkg/mod.py\", \"func\": \"pkg.mod.endpoint\"}`\n\n\
                A tracked function is covered if at least one invocation of it begins.";
    let q = format!(
        "Determine dynamic function coverage for `pkg.mod.endpoint` in `src/pkg/mod.py`.\n\n{list}"
    );
    let parser = "TARGET_FUNC = \"pkg.mod.endpoint\"\nTRACKED_FUNCTIONS = (\n    \
                  (\"src/pkg/mod.py\", \"pkg.mod.C.connect\"),\n    (\"src/pkg/mod.py\", \
                  \"pkg.mod.C.send\"),\n    (\"src/pkg/mod.py\", \"pkg.mod.endpoint\"),\n)\n";
    let x = same(
        "endpoint,C.connect,C.send",
        t,
        &[(q.as_str(), None), (q.as_str(), Some(parser))],
    );
    assert_eq!(
        x.params["functions"],
        json!(["C.connect", "C.send", "endpoint"])
    );
    let text = "The primary target is `pkg.util.merge` in `pkg/util.py`. Report the ordered \
                call-event sequence for the first invocation of the primary target, considering \
                exactly this tracked function set:\n\n- `pkg.util.merge`\n- `pkg.util.visit`\n";
    let root_wide = flux_interop::evalsh::parse(
        &evalsh_text("merge,visit")
            .replace("TRACE_FILE=\"src/pkg/mod.py\"", "TRACE_FILE=\"/testbed/\""),
    )
    .unwrap();
    let x = native_extractor(&Question {
        eval: &root_wide,
        text,
        template: &json!({"function_call_order": [{"file": "str", "func": "str"}]}),
        parser: None,
    })
    .unwrap_or_else(|e| panic!("not mapped: {e}"));
    assert_eq!(x.params["function"], json!("merge"));
}

/// One candidate whose observation line is given otherwise (fastapi's dev instances, all three
/// "lists no candidate predicates with observation lines"): "An outer-loop observation is each
/// execution of the line event for absolute, 1-based source line 171" (sponsors_main_m7),
/// "For every execution of absolute, 1-based line 110" (translation_fixer_fix_all_m7), "at every
/// execution of the line-373 `if …` statement" (translate_list_outdated_m7), or only in their
/// parser's `OBSERVATION_LINE`.
#[test]
fn one_candidate_observed_at_a_line_named_in_yet_other_words() {
    let t = json!({"is_invariant_always_held": "bool", "total_iterations_observed": "int",
                   "violating_iteration_count": "int"});
    let head = "For `pkg.mod.main` in the repository-relative file `src/pkg/mod.py`, check the \
                candidate predicate\n`key % 3 != 0`\nat every outer-loop observation point.";
    let x = same(
        "main",
        t.clone(),
        &[
            (
                &format!(
                    "{head}\n\nAn outer-loop observation is each execution of the line event \
                     for absolute,\n1-based source line 171, immediately before the statement \
                     executes."
                ),
                None,
            ),
            (
                &format!(
                    "For every execution of absolute, 1-based line 171 in that file, observe \
                     the locals. {head}"
                ),
                None,
            ),
            (
                &format!(
                    "{head} Evaluate it at every execution of the line-171 `if x:` statement."
                ),
                None,
            ),
            (
                head,
                Some("TARGET_FUNC = \"pkg.mod.main\"\nOBSERVATION_LINE = 171\n"),
            ),
        ],
    );
    assert_eq!(x.params["predicates"], json!(["key % 3 != 0"]));
    let parser = "TARGET_FUNC = \"pkg.mod.main\"\nOBSERVATION_LINE = 171\n";
    for (text, parser) in [
        (format!("{head} An outer-loop observation is each execution of the line event for absolute, 1-based source line 171."), None),
        (format!("For every execution of absolute, 1-based line 171 in that file, observe. {head}"), None),
        (format!("{head} Evaluate it at every execution of the line-171 `if x:` statement."), None),
        (head.to_string(), Some(parser)),
    ] {
        let ps = predicates(&Question {
            eval: &eval("main"),
            text: &text,
            template: &t,
            parser,
        })
        .unwrap();
        assert_eq!(ps[0].lines, [171], "{text}");
    }
}

/// "Report the set of concrete exception types caught by the function's `except
/// InvalidTokenError` clause whose `except` keyword begins at absolute, 1-based line 104"
/// (fastapi tutorial004_py310_get_current_user_s5_exceptions, dev: every handler's catches were
/// counted, an `HTTPException` caught elsewhere in the function among them): that clause only.
#[test]
fn caught_types_of_the_handler_the_prose_names() {
    let t = json!({"caught_exception_kinds": ["str"]});
    let x = same(
        "get_user",
        t.clone(),
        &[
            (
                "Consider every invocation of `pkg.mod.get_user` in `src/pkg/mod.py`. Report the \
                 set of concrete exception types caught by the function's `except \
                 InvalidTokenError` clause whose `except` keyword begins at absolute, 1-based \
                 line 104 of that file.",
                None,
            ),
            (
                "Consider every invocation of pkg.mod.get_user in src/pkg/mod.py. Report the set \
                 of exception types caught by the `except` clause at\nline 104.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["line"], json!(104));
    let all = map(
        "get_user",
        "Which exception types does `pkg.mod.get_user` in `src/pkg/mod.py` catch?",
        &t,
        None,
    );
    assert!(all.params.get("line").is_none());
}

/// "report the chronological call-event sequence around every invocation of `pkg.mod.C.run` …
/// this question aggregates all of them. Count exactly these three function identities: …"
/// (scrapy genspider_run_s6_calls, dev: "lists no tracked functions").
#[test]
fn call_order_around_every_invocation_of_the_target() {
    let t = json!({"function_call_order": [{"file": "str", "func": "str"}]});
    let x = same(
        "C.run,C._find,verify",
        t,
        &[
            (
                "Across that complete test run, report the chronological call-event sequence \
                 around every invocation of `pkg.mod.C.run` in `src/pkg/mod.py`.\n\nAn \
                 invocation means one `call` event for that exact function; invocations are \
                 numbered from 1 in chronological order, and this question aggregates all of \
                 them. Count exactly these three function identities:\n`pkg.mod.C.run`,\n\
                 `pkg.mod.C._find`, and\n`pkg.mod.verify`.\n\nInclude the `call` event that \
                 begins each `C.run` invocation, and nested/transitive calls.",
                None,
            ),
            (
                "Across that complete test run, report the call-event sequence around every \
                 invocation of pkg.mod.C.run in src/pkg/mod.py. Invocations are numbered from 1, \
                 and this question aggregates all of them. Count exactly these three function \
                 identities: pkg.mod.C.run, pkg.mod.C._find, and pkg.mod.verify. Include the \
                 `call` event that begins each C.run invocation, and nested/transitive calls.",
                None,
            ),
        ],
    );
    assert_eq!(x.params["functions"], json!(["C.run", "C._find", "verify"]));
    assert_eq!(x.params["all_invocations"], json!(true));
    assert_eq!(x.params["include_self"], json!(true));
}

/// "every function whose `def` or `async def` statement is an immediate child of either the
/// `Slot` class body or the `Downloader` class body … Include explicitly defined `__init__` and
/// other dunder methods" (scrapy downloader_process_queue_m6_calls, dev: mapped to the module's
/// functions, "show no function"), or their parser's `TRACKED_CLASSES`.
#[test]
fn call_counts_over_several_classes_bodies() {
    let t = json!({"invocation_counts": [{"count": "int", "file": "str", "func": "str"}]});
    let x = same(
        "pkg.mod.Slot,pkg.mod.Downloader",
        t,
        &[
            (
                "The target is `pkg.mod.Downloader._process` in `src/pkg/mod.py`. How many \
                 `call` events occur for each function in the scope defined below?\n\nThe \
                 tracked scope is every function whose `def` or `async def` statement is an \
                 immediate child of either the `Slot` class body or the `Downloader` class body \
                 in `src/pkg/mod.py`. Include explicitly defined `__init__` and other dunder \
                 methods. Exclude module-level functions and nested functions.",
                None,
            ),
            (
                "The target is pkg.mod.Downloader._process in src/pkg/mod.py. How many call \
                 events occur for each function in scope? Include explicitly defined \
                 `__init__` and other dunder methods.",
                Some(
                    "TARGET_FUNC = \"pkg.mod.Downloader._process\"\n\
                     TRACKED_CLASSES = (\"Slot\", \"Downloader\")\n",
                ),
            ),
        ],
    );
    assert_eq!(x.params["classes"], json!(["Slot", "Downloader"]));
    assert!(x.params.get("exclude_dunder").is_none());
    assert!(x.params.get("module").is_none());
}

/// Statement words beside a definition that keeps each event's own line (scrapy dev:
/// redirect_process_response_s1_cfg, "report the line where the particular executed statement
/// or expression begins, rather than a later closing or continuation-only line": 205 was
/// reported for their 206; redirect_build_redirect_request_m1_cfg, "do not normalize an event on
/// an executable continuation line back to the statement's first line", over "the body of" the
/// function: no line range was read).
#[test]
fn raw_lines_where_the_prose_keeps_each_events_own_line() {
    let t = json!({"executed_path": [{"file": "str", "func": "str", "line": "int"}]});
    let x = map(
        "C.process",
        "Consider the 21st invocation of `pkg.mod.C.process` in `src/pkg/mod.py`. Each line \
         event uses the executing target frame's `f_lineno`: for a multi-line statement, \
         condition, or call, report the line where the particular executed statement or \
         expression begins, rather than a later closing or continuation-only line.",
        &t,
        None,
    );
    assert!(x.params.get("line_mode").is_none(), "{:?}", x.params);
    let t = json!({"line_execution_counts": [{"count": "int", "line": "int"}]});
    let x = map(
        "C.build",
        "What are the total line-event execution counts for every physical source line in the \
         body of `pkg.mod.C.build` in `src/pkg/mod.py`? For a multi-line statement, credit each \
         event to its `frame.f_lineno`: normally the line where the statement begins; do not \
         normalize an event on an executable continuation line back to the statement's first \
         line. Counts are summed over every invocation.",
        &t,
        None,
    );
    assert!(x.params.get("line_mode").is_none(), "{:?}", x.params);
    assert!(x.params.get("from").is_none() && x.params.get("invocation").is_none());
}

/// "For the `for` loop whose header is on line 35, what is the value of the loop variable
/// `repo` at iteration 73? … iteration N means the Nth execution of the loop body's first
/// line, line 36" with the answer `{nth_iteration, value, variable}` (fastapi
/// topic_repos_main_s2_loops, dev: "no flux extractor is mapped for the answer shape
/// `nth_iteration+value+variable`"): `iteration_value`, read before that body line runs.
#[test]
fn the_loop_variable_at_the_nth_iteration_reworded() {
    let x = same(
        "main",
        json!({"nth_iteration": "int", "value": "str", "variable": "str"}),
        &[
            (
                "Consider the first invocation of `pkg.mod.main` in `src/pkg/mod.py`. For the \
                 `for` loop whose header is on line 35, what is the value of the loop variable \
                 `item` at iteration 12? Iteration N means the Nth execution of the loop body's \
                 first line, line 36, in that invocation's frame. Report `repr(item)` \
                 immediately before line 36 executes.",
                None,
            ),
            (
                "Consider the first\ninvocation of pkg.mod.main in src/pkg/mod.py. For the for \
                 loop whose\nheader is on line 35, give the loop variable `item` as it is at \
                 the 12th\niteration, an iteration being one execution of the first line of \
                 the loop body (line 36).",
                None,
            ),
            (
                "Report the loop variable `item` of pkg.mod.main at the requested iteration.",
                Some(
                    "TARGET_FUNC = \"pkg.mod.main\"\nLOOP_HEADER_LINE = 35\n\
                     LOOP_BODY_FIRST_LINE = 36\nREQUESTED_ITERATION = 12\n",
                ),
            ),
        ],
    );
    assert_eq!(x.name, "iteration_value");
    assert_eq!(
        serde_json::to_value(&x.params).unwrap(),
        json!({"function": "main", "file": "src/pkg/mod.py", "header": 35, "count": "body_line",
               "body_line": 36, "iteration": 12, "invocation": 1, "variable": "item"})
    );
}

/// "`value` is the raw Python `str` held by `name`, encoded as a JSON string; do not return
/// Python `repr()` quoting around that value" (llama_factory
/// trainer_utils_create_galore_optimizer_s2_loops, dev: the repr `'sectors.…'` was answered
/// where the string's text was asked): `render = "str"`, in each wording; a question that says
/// nothing of it keeps the repr.
#[test]
fn the_loop_variable_as_its_str_reworded() {
    let asked = |how: &str| {
        format!(
            "Consider the first invocation of `pkg.mod.main` in `src/pkg/mod.py`. What is the \
             value of the loop variable `name` on the 47th iteration of the loop whose header \
             is at line 205, an iteration being one execution of the body's first line, line \
             206? {how}"
        )
    };
    let x = same(
        "main",
        json!({"nth_iteration": "int", "value": "str", "variable": "str"}),
        &[
            (
                &asked(
                    "`value` is the raw Python `str` held by `name`, encoded as a JSON string; \
                     do not return Python `repr()` quoting around that value.",
                ),
                None,
            ),
            (
                &asked("Give the value\nwithout repr() quoting, as str() gives it."),
                None,
            ),
        ],
    );
    assert_eq!(x.name, "iteration_value");
    assert_eq!(
        x.params.get("render"),
        Some(&json!("str")),
        "{:?}",
        x.params
    );
    let plain = same(
        "main",
        json!({"nth_iteration": "int", "value": "str", "variable": "str"}),
        &[(&asked("Report `repr(name)`."), None)],
    );
    assert!(plain.params.get("render").is_none(), "{:?}", plain.params);
}

/// "At every Python `line` event in the target function's own frame, observe the two local
/// variables `content_encoding` and `kwargs` … and compute … `repr((content_encoding,
/// kwargs))`" (scrapy httpcompression_process_response_m3_state, dev: "the question names no
/// observation line"; the backticked `repr((a, b))` was also read as a local named `repr`):
/// the state every line event of the frame shows, the repr of the tuple of the two locals. A
/// `repr((a, b))` the question records is their tuple, not a value computed from them.
#[test]
fn unique_values_at_every_line_event_of_the_frame_reworded() {
    let x = same(
        "C.handle",
        json!({"unique_values": ["str"]}),
        &[
            (
                "Consider every invocation of `pkg.mod.C.handle` in `src/pkg/mod.py`. At every \
                 Python `line` event in the target function's own frame, observe the two local \
                 variables `enc` and `opts` if and only if both are bound, and compute the \
                 expression `repr((enc, opts))` at that point. Exclude `call`, `return` and \
                 `exception` events.",
                None,
            ),
            (
                "Across every invocation of pkg.mod.C.handle in src/pkg/mod.py, on each line\n\
                 event of the function's frame record `repr((enc, opts))` for the local \
                 variables `enc` and `opts` (skip events where either is unbound).",
                None,
            ),
            (
                // llama_factory chat_process_request_m3_state (dev): the locals only in a
                // backticked tuple, `repr()` named (not an expression), "before each executed
                // source line"
                "Across every invocation of `pkg.mod.C.handle` in `src/pkg/mod.py`, report the \
                 distinct values of the state tuple `(enc, opts)` at executed-line observation \
                 points: the state of the target function's own frame immediately before each \
                 executed source line begins. At each point construct the tuple and apply \
                 Python `repr()` to it.",
                None,
            ),
            (
                // llama_factory supervised_encode_data_example_m3_state (dev)
                "Across every invocation of `pkg.mod.C.handle` in `src/pkg/mod.py`, report the \
                 distinct values of the state tuple `(enc, opts)`: an observation point is the \
                 state of the target function's own frame immediately before an executed \
                 source line begins.",
                None,
            ),
            (
                "For all line events of pkg.mod.C.handle's frame, in every invocation, give \
                 the distinct values of the tracked pair.",
                Some(
                    "TARGET_FUNC = \"pkg.mod.C.handle\"\nTRACKED_VARIABLES = (\"enc\", \"opts\")\n",
                ),
            ),
        ],
    );
    assert_eq!(x.name, "unique_values");
    assert_eq!(
        serde_json::to_value(&x.params).unwrap(),
        json!({"function": "C.handle", "file": "src/pkg/mod.py", "variables": ["enc", "opts"],
               "event": "line", "at": "before"})
    );
    // a line named with the events stays an observation line
    let one = map(
        "C.handle",
        "Consider every invocation of `pkg.mod.C.handle` in `src/pkg/mod.py`. Record the local \
         variable `enc` at every line event at line 40.",
        &json!({"unique_values": ["str"]}),
        None,
    );
    assert_eq!(one.params["lines"], json!([40]));
}

/// "observe the function frame at each Python executed-line event on absolute, 1-based source
/// lines 134 and 136 … immediately before the statement or expression beginning on the
/// reported line executes … a two-element Python tuple … `nodes` … `edges`" (fastapi
/// sponsors_get_individual_sponsors_m3_state, dev: "the question names no observation
/// line"): every line listed is an observation line, the state before it runs.
#[test]
fn unique_values_at_several_listed_lines_reworded() {
    let x = same(
        "collect",
        json!({"unique_values": ["str"]}),
        &[
            (
                "For every invocation of `pkg.mod.collect` in `src/pkg/mod.py`, observe the \
                 function frame at each Python executed-line event on absolute, 1-based source \
                 lines 134 and 136. A line event occurs immediately before the statement \
                 beginning on the reported line executes. At every included event, form a \
                 two-element tuple of the local variable `nodes` and the local variable `edges` \
                 and take `repr()` of the whole tuple.",
                None,
            ),
            (
                "For every invocation of pkg.mod.collect in src/pkg/mod.py, take each line\n\
                 event at lines 134\nor 136 (the state just before the statement on that line \
                 runs) and record the tuple of the local variables `nodes` and `edges`.",
                None,
            ),
            (
                // kedro pipeline_validate_datasets_exist_m3_state (dev)
                "Consider every invocation of `pkg.mod.collect` in `src/pkg/mod.py`. Observe only \
                 Python line events in the target function's own frame for which the current \
                 absolute line is 134 or 136 and both local variables `nodes` and `edges` are \
                 bound. A line event observes locals immediately before the statement beginning \
                 on that line executes. Form the tuple `(nodes, edges)` and take its `repr()`.",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "unique_values");
    assert_eq!(
        serde_json::to_value(&x.params).unwrap(),
        json!({"function": "collect", "file": "src/pkg/mod.py", "variables": ["nodes", "edges"],
               "lines": [134, 136], "at": "before"})
    );
    // a range is not a list of observation lines
    let err = native_extractor(&Question {
        eval: &eval("collect"),
        text: "Consider every invocation of `pkg.mod.collect` in `src/pkg/mod.py`. Record the \
               local variable `nodes` at the line events between lines 134 and 136.",
        template: &json!({"unique_values": ["str"]}),
        parser: None,
    });
    assert!(
        err.as_ref()
            .map_or(true, |x| x.params.get("lines") != Some(&json!([134, 136]))),
        "{err:?}"
    );
}

/// "For each invocation that reaches a normal return, use the function's local variables at the
/// return point … exactly these local names: `a`, `b` … `state_snapshots` … `invocation`,
/// `variable`, `value`", the target named `src.pkg.mod.f` (llama_factory
/// adapter_setup_freeze_tuning_m3_state, dev: no rule for the shape, and the `src.` module not
/// read as the file's): `state_snapshots` at each normal return, one row per local.
#[test]
fn state_snapshots_at_each_return_one_row_per_local_reworded() {
    let t = json!({"state_snapshots": [{"invocation": "int", "variable": "str", "value": "str"}]});
    let x = same(
        "setup",
        t,
        &[
            (
                "During the test, analyze function `src.pkg.mod.setup` defined in \
                 `src/pkg/mod.py`. For each invocation that reaches a normal return, use the \
                 function's local variables at the return point. Compute values for exactly \
                 these local names: `layers`, `name`. Sort by `invocation`, then `variable`, \
                 then `value`.",
                None,
            ),
            (
                "Analyze pkg.mod.setup in src/pkg/mod.py: at the return point of each\n\
                 invocation, report the tracked locals.",
                Some(
                    "TARGET_FUNC = \"pkg.mod.setup\"\nTARGET_VARIABLES = [\"layers\", \"name\"]\n",
                ),
            ),
        ],
    );
    assert_eq!(x.name, "state_snapshots");
    assert_eq!(
        serde_json::to_value(&x.params).unwrap(),
        json!({"function": "setup", "file": "src/pkg/mod.py", "variables": ["layers", "name"],
               "event": "return", "rows": "variables"})
    );
}

/// "`always_executed` are executable lines seen in every invocation; `sometimes_executed` …
/// in at least one but not all invocations" of one test (llama_factory
/// adapter_setup_lora_tuning_m1_cfg__r20260714, dev: no rule for the shape): `line_classes`
/// over the invocations; the same over the tests running it stays per test.
#[test]
fn line_classes_over_invocations_or_tests_reworded() {
    let t = json!({"always_executed": ["int"], "never_executed": ["int"], "sometimes_executed": ["int"]});
    let x = same(
        "setup",
        t.clone(),
        &[
            (
                "Consider every runtime invocation of `pkg.mod.setup` in `src/pkg/mod.py` during \
                 the test. Using the executable lines of its body, `always_executed` are the lines \
                 seen in every invocation, `sometimes_executed` those seen in at least one but \
                 not all invocations, `never_executed` those never seen.",
                None,
            ),
            (
                "For pkg.mod.setup (src/pkg/mod.py), classify the body's executable lines as\n\
                 executed in each invocation, in some invocations, or in none.",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "line_classes");
    assert_eq!(x.params["over"], json!("invocations"));
    let y = map(
        "setup",
        "Across the tests in which `pkg.mod.setup` (in `src/pkg/mod.py`) runs, classify its \
         lines as executed in every test, in some tests, or in none.",
        &t,
        None,
    );
    assert_eq!(y.params.get("over"), None);
    assert_eq!(y.params["tests"], json!("running"));
}

/// The answer a spec's extractor computes fits the question's template through its bindings.
fn projects(spec: &ExtractorSpec, template: &Value) {
    use flux_instance::template::{Projection, Template};
    let ex = flux_extract::extractors()
        .iter()
        .find(|e| e.name == spec.name)
        .unwrap();
    let params = flux_extract::params(Value::Object(spec.params.clone())).unwrap();
    // every parameter is one the extractor takes (as the instance's load checks)
    flux_extract::check_params(&spec.name, &params)
        .unwrap_or_else(|e| panic!("{} takes not these parameters: {e}", spec.name));
    let shape = Template::parse((ex.shape)(&params)).unwrap();
    let template = Template::parse(&template.to_string()).unwrap();
    Projection::compile(&template, &shape, &spec.answer)
        .unwrap_or_else(|e| panic!("{} does not project: {e}", spec.name));
}

/// "For invocation 2 only, list the exact executed source line numbers … in temporal order …
/// `executed_line_sequence` of type `array<int>`" (llama_factory
/// loader_load_single_dataset_s1_cfg, dev: no rule for the shape): `executed_path`, its lines.
/// The other shapes of this pass project too.
#[test]
fn the_executed_line_sequence_is_the_paths_lines() {
    let t = json!({"executed_line_sequence": ["int"]});
    let x = same(
        "load",
        t.clone(),
        &[
            (
                "For the function `src.pkg.mod.load` defined in `src/pkg/mod.py`, for invocation \
                 2 only, list the executed source line numbers of this function body in temporal \
                 order, keeping duplicates.",
                None,
            ),
            (
                "List pkg.mod.load's executed lines (src/pkg/mod.py) in order, for its\n\
                 second invocation.",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "executed_path");
    assert_eq!(x.params["invocation"], json!(2));
    projects(&x, &t);
    for (func, text, template) in [
        (
            "setup",
            "At the return point of each invocation of `pkg.mod.setup` in `src/pkg/mod.py`, \
             report exactly these local names: `a`, `b`.",
            json!({"state_snapshots": [{"invocation": "int", "variable": "str", "value": "str"}]}),
        ),
        (
            "main",
            "In the first invocation of `pkg.mod.main` in `src/pkg/mod.py`, what is the loop \
             variable `item` at iteration 3 of the loop whose header is on line 35?",
            json!({"nth_iteration": "int", "value": "str", "variable": "str"}),
        ),
        (
            "setup",
            "Classify the lines of `pkg.mod.setup` in `src/pkg/mod.py` over every invocation of \
             it.",
            json!({"always_executed": ["int"], "never_executed": ["int"], "sometimes_executed": ["int"]}),
        ),
    ] {
        projects(&map(func, text, &template, None), &template);
    }
}

/// "determine, for each of the 14 test methods, whether the call raises an exception out of
/// `_validate` ('crashes') … and the type … Both lists are sorted in ascending lexicographic
/// order by test id" with crashing rows `{exception_type, test}` (kedro
/// pipeline_validate_inputs_outputs_m5_exceptions, dev: no rule for the shape):
/// `raising_tests` `escapes` the target, sorted, its `crashes` as the rows.
#[test]
fn crashing_and_safe_tests_of_an_exception_out_of_the_target() {
    let t = json!({"crashing_tests": [{"exception_type": "str", "test": "str"}], "safe_tests": ["str"]});
    let x = same(
        "_validate",
        t.clone(),
        &[
            (
                "Each test method calls the helper once. Determine for each test whether the \
                 call raises an exception out of `pkg.mod._validate` (in `src/pkg/mod.py`) \
                 ('crashes') or completes ('safe'), with the type of the exception that \
                 propagates out of the target function. Both lists are sorted in ascending \
                 lexicographic order by test id.",
                None,
            ),
            (
                "For every test, does an exception propagate out of pkg.mod._validate\n\
                 (src/pkg/mod.py)? List crashing tests with the exception type and the safe \
                 tests, each list sorted as Python's sorted() orders the test ids.",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "raising_tests");
    assert_eq!(
        serde_json::to_value(&x.params).unwrap(),
        json!({"file": "src/pkg/mod.py", "escapes": "_validate", "order": "sorted"})
    );
    projects(&x, &t);
}

/// "For invocation 2, take the program point at function return … Report the values of local
/// variables `a`, `b` … `observed_state` … sorted by `variable`" (llama_factory
/// runner_parse_train_args_s3_state__r20260714, dev: "names no observed line"): the locals at
/// the Nth invocation's normal return, `state_snapshots` rows bound as the observed state.
#[test]
fn observed_state_at_the_return_of_the_nth_invocation() {
    let t = json!({"observed_state": [{"variable": "str", "value": "str"}]});
    let x = same(
        "C.parse",
        t.clone(),
        &[
            (
                "Consider `src.pkg.mod.C.parse` defined in `src/pkg/mod.py`. For invocation 2, \
                 take the program point at function return. Report the values of local \
                 variables `args`, `stage` at that program point, sorted by `variable`.",
                None,
            ),
            (
                "At the return point of the second invocation of pkg.mod.C.parse\n\
                 (src/pkg/mod.py), give the tracked locals.",
                Some(
                    "TARGET_FUNC = \"pkg.mod.C.parse\"\nTARGET_VARIABLES = [\"args\", \"stage\"]\n",
                ),
            ),
        ],
    );
    assert_eq!(x.name, "state_snapshots");
    assert_eq!(
        serde_json::to_value(&x.params).unwrap(),
        json!({"function": "C.parse", "file": "src/pkg/mod.py", "variables": ["args", "stage"],
               "event": "return", "rows": "variables", "invocation": 2})
    );
    projects(&x, &t);
}

/// "the values of the local variables … immediately after line 394 has executed for the 11th
/// time during this test run", their parser naming both `PRECEDING_LINE = 394` and
/// `OBSERVATION_EVENT_LINE = 395` (kedro starters_new_s3_state, dev: run, answered at line 395's
/// 11th execution instead): the executed line is the one counted, read after it runs.
#[test]
fn the_state_after_the_executed_line_not_at_the_observing_event() {
    let t = json!({"observed_state": [{"value": "str", "variable": "str"}]});
    let x = same(
        "new",
        t,
        &[
            (
                "Consider the direct calls to `pkg.mod.new` in `src/pkg/mod.py`. What are the \
                 values of the local variables `args` and `ctx` immediately after line 394 has \
                 executed for the 11th time during this test run? An occurrence is counted each \
                 time that line executes, across the whole test run.",
                None,
            ),
            (
                "Consider the direct calls to `pkg.mod.new` in `src/pkg/mod.py`. What are the \
                 values of the local variables `args` and `ctx` immediately after line 394 has \
                 executed for the 11th time during this test run? An occurrence is counted each \
                 time that line executes, across the whole test run.",
                Some(
                    "TARGET_FUNC = \"pkg.mod.new\"\nPRECEDING_LINE = 394\n\
                     OBSERVATION_EVENT_LINE = 395\nOBSERVATION_OCCURRENCE = 11\n",
                ),
            ),
        ],
    );
    assert_eq!(x.name, "state_at");
    assert_eq!(x.params["line"], json!(394));
    assert_eq!(x.params["occurrence"], json!(11));
}

/// Their questions are third-party text: a letter whose lowercase is longer in UTF-8 (`İ` →
/// `i̇`) before a phrase the mapping looks for shifted the lowercased text's offsets against
/// the original's, which were then sliced with them: a panic, or a word cut in the middle
/// (found by feeding generated questions to the mapping).
#[test]
fn letters_whose_lowercase_is_longer_shift_no_offsets() {
    let t = json!({"unique_values": ["str"]});
    for text in [
        "İİİİ Consider every invocation of `pkg.mod.f` in `src/pkg/mod.py`. Record the local \
         variable `count` at every line event at line 40.",
        "Consider every invocation of `pkg.mod.f` in `src/pkg/mod.py`. İİİİİİİİ Record the \
         local variables `count` and `total` at every line event at line 40.",
        "İİİİİİ Consider every invocation of `pkg.mod.f`. Record `repr(count)` of the local \
         variable `count` after line 40.",
    ] {
        let x = map("f", text, &t, None);
        let v = x
            .params
            .get("variable")
            .or_else(|| x.params.get("variables"));
        assert!(
            v.is_some_and(|v| v.to_string().contains("count")),
            "{text}: {:?}",
            x.params
        );
    }
}

/// llama_factory chat_process_request_s5_exceptions (dev): shape `exception_events` (each
/// exception event of the target with `line`, `exception_type`, `message`, `handled`) had no
/// rule. Types "fully qualified" in the prose or only in the parser's table (`builtins.X`).
#[test]
fn exception_events_of_the_target_reworded() {
    let t = json!({"exception_events": [{"line": "int", "exception_type": "str", "message": "str", "handled": "bool"}]});
    let x = same(
        "_load",
        t.clone(),
        &[
            (
                "During the test, consider function `pkg.mod._load` in `src/pkg/mod.py`. An \
                 `exception event` means any runtime point in this function where an exception \
                 is reported at a source line while the call is active. For each such event, \
                 record `line`, `exception_type` (str fully qualified exception type name), \
                 `message` (`str(exc)`) and `handled` (true iff execution continues to a later \
                 `line` event in the same invocation).",
                None,
            ),
            (
                "Consider pkg.mod._load in src/pkg/mod.py. List every exception\nevent of \
                 its frames in runtime order with its line, its fully\nqualified exception \
                 type name, its message and whether it was handled.",
                None,
            ),
            (
                "List the exception events of pkg.mod._load in order.",
                Some(
                    "TARGET_FUNC_SUFFIXES = (\".pkg.mod._load\", \"._load\")\n\
                     TYPE_FQN = {\"RuntimeError\": \"builtins.RuntimeError\"}\n",
                ),
            ),
        ],
    );
    assert_eq!(x.name, "exception_events");
    assert_eq!(
        (
            &x.params["function"],
            &x.params["events"],
            &x.params["type_names"]
        ),
        (&json!("_load"), &json!("reported"), &json!("qualified"))
    );
    // Builtins bare when the question says so.
    let bare = map(
        "_load",
        "Consider `pkg.mod._load` in `src/pkg/mod.py`. List its exception events; name \
         builtin types bare (`ValueError`, never `builtins.ValueError`).",
        &t,
        None,
    );
    assert!(bare.params.get("type_names").is_none(), "{:?}", bare.params);
}

/// llama_factory parser_get_dataset_list_s6_calls__r20260714 (dev): shape `callee_sequence`
/// (a bare list of names) had no rule, and its callees are named in full in other modules than
/// the target's ("restricted to callees whose qualified names are exactly one of: -
/// `src.pkg.util.use_cache` …"), which the tracked-functions reader (the target's modules
/// only) dropped.
#[test]
fn callee_sequence_of_callees_named_in_full_reworded() {
    let t = json!({"callee_sequence": ["str"]});
    let x = same(
        "load_all,use_cache,fetch,join",
        t,
        &[
            (
                "In the test, consider the 3rd runtime invocation of `src.pkg.mod.load_all` in \
                 `src/pkg/mod.py`.\n\nFor this 3rd invocation, compute the exact ordered list \
                 of direct callees of `src.pkg.mod.load_all` restricted to callees whose \
                 qualified names are exactly one of:\n- `src.pkg.util.use_cache`\n- \
                 `src.pkg.util.fetch`\n- `src.pkg.mod.join`\n\nOutput JSON must contain \
                 exactly one key:\n- `callee_sequence` (type: array of strings).",
                None,
            ),
            (
                "Consider the third invocation of src.pkg.mod.load_all in src/pkg/mod.py. \
                 List its direct callees in call order, restricted to callees\nwhose \
                 qualified names are exactly one of: src.pkg.util.use_cache,\n\
                 src.pkg.util.fetch, src.pkg.mod.join.",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "call_sequence");
    assert_eq!(
        (
            &x.params["function"],
            &x.params["invocation"],
            &x.params["functions"],
            &x.params["module_names"]
        ),
        (
            &json!("load_all"),
            &json!(3),
            &json!([
                "src.pkg.util.use_cache",
                "src.pkg.util.fetch",
                "src.pkg.mod.join"
            ]),
            &json!("runtime")
        )
    );
    assert_eq!(x.answer["/callee_sequence/*"], "/call_sequence/*/func");
}

/// llama_factory quantization_configure_quantization_m5_exceptions (dev): shape `invocations`
/// (per invocation an index, "the caller saw an exception", and its exception records with a
/// message and `handled_where`) had no rule.
#[test]
fn exception_records_per_invocation_reworded() {
    let t = json!({"invocations": [{"caller_saw_exception": "bool",
        "exceptions": [{"exception_message": "str", "exception_type": "str",
                        "handled_where": "str", "line": "int"}],
        "invocation_index": "int"}]});
    let x = same(
        "configure",
        t.clone(),
        &[
            (
                "Analyze `pkg.mod.configure` in `src/pkg/mod.py`. Treat each runtime entry into \
                 that exact function as one invocation; assign `invocation_index` from 1. For \
                 each invocation output `caller_saw_exception` and its exception events with \
                 `line`, `exception_type` (qualified type string), `exception_message` and \
                 `handled_where`.",
                Some("    if \".\" not in raw_type:\n        qualified_type = f\"builtins.{raw_type}\"\n"),
            ),
            (
                "Analyze pkg.mod.configure in src/pkg/mod.py. Per\ninvocation, did the caller \
                 see an exception, and which exception\nevents (line, fully qualified \
                 exception type name, message, where handled)?",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "exception_events");
    assert_eq!(x.params["type_names"], "qualified");
    assert_eq!(
        x.answer["/invocations/*/caller_saw_exception"],
        "/per_invocation/*/raised"
    );
    assert_eq!(
        x.answer["/invocations/*/exceptions/*/exception_message"],
        "/per_invocation/*/exceptions/*/message"
    );
    // `invocations` of other records is refused, naming why.
    let loops = json!({"invocations": [{"invocation_index": "int",
        "inner_iterations_per_outer": [{"outer_iteration": "int", "inner_iterations": "int"}]}]});
    let why = native_extractor(&Question {
        eval: &eval("configure"),
        text: "Analyze `pkg.mod.configure` in `src/pkg/mod.py`.",
        template: &loops,
        parser: None,
    })
    .unwrap_err();
    assert!(why.contains("no list of exception records"), "{why}");
}

/// llama_factory longlora_llama_sdpa_attention_forward_m4_dataflow__r20260714 (dev): def-use
/// pairs and dead definitions per invocation with the tracked variables (shape
/// `invocation_dead_defs+invocation_def_use_pairs+tracked_variables`) had no rule.
#[test]
fn def_use_pairs_and_dead_definitions_per_invocation_reworded() {
    let t = json!({"invocation_dead_defs": [{"def_line": "int", "invocation_index": "int", "variable": "str"}],
                   "invocation_def_use_pairs": [{"def_line": "int", "invocation_index": "int", "use_line": "int", "variable": "str"}],
                   "tracked_variables": ["str"]});
    let x = same(
        "forward",
        t,
        &[
            (
                "Analyze runtime data flow in function `pkg.mod.forward` from file \
                 `src/pkg/mod.py`. Track exactly these variables: `mask`, `out`, `cos`. A \
                 definition (def) is any executed assignment to a tracked variable within this \
                 function. A definition is dead if it is overwritten before any paired use.",
                None,
            ),
            (
                "Analyze the data flow of pkg.mod.forward in src/pkg/mod.py for every \
                 invocation.",
                Some("VARIABLES = [\"mask\", \"out\", \"cos\"]\n"),
            ),
        ],
    );
    assert_eq!(x.name, "def_use_pairs");
    assert_eq!(
        (&x.params["all_invocations"], &x.params["variables"]),
        (&json!(true), &json!(["mask", "out", "cos"]))
    );
    assert_eq!(
        x.answer["/invocation_dead_defs"],
        "/per_invocation_dead_defs"
    );
    assert_eq!(
        x.answer["/invocation_def_use_pairs/*/invocation_index"],
        "/per_invocation_pairs/*/invocation"
    );
    assert_eq!(x.answer["/tracked_variables"], "/variables");
}

/// llama_factory vllm_engine_generate_m4_dataflow__r20260714 (dev): the same definition with
/// flat keys (`dead_defs+observed_def_use_pairs+tracked_variables`, each row carrying its
/// `invocation_index`) was refused: "no flux extractor is mapped for the answer shape".
#[test]
fn def_use_pairs_and_dead_definitions_per_invocation_flat_reworded() {
    let t = json!({"dead_defs": [{"def_line": "int", "invocation_index": "int", "variable": "str"}],
                   "observed_def_use_pairs": [{"def_line": "int", "invocation_index": "int", "use_line": "int", "variable": "str"}],
                   "tracked_variables": ["str"]});
    let x = same(
        "Engine._generate",
        t,
        &[
            (
                "Analyze runtime data flow in `pkg.mod.Engine._generate` (file                  `src/pkg/mod.py`). Track exactly these variables: `max_tokens` and `data`.                  Invocation indices start at 1 and increase on each call. If a definition is                  followed by another definition of the same variable before any counted use,                  that earlier definition is a dead definition.",
                None,
            ),
            (
                "For every invocation of pkg.mod.Engine._generate in src/pkg/mod.py, pair each\n\
                 use with its definition and list the dead definitions.",
                Some("TRACKED_VARIABLES = [\"max_tokens\", \"data\"]\n"),
            ),
        ],
    );
    assert_eq!(x.name, "def_use_pairs");
    assert_eq!(x.params["variables"], json!(["max_tokens", "data"]));
    assert_eq!(x.answer["/dead_defs"], "/per_invocation_dead_defs");
    assert_eq!(x.answer["/observed_def_use_pairs"], "/per_invocation_pairs");
    assert_eq!(
        x.answer["/dead_defs/*/invocation_index"],
        "/per_invocation_dead_defs/*/invocation"
    );
    assert_eq!(x.answer["/tracked_variables"], "/variables");
}

/// llama_factory loader_load_model_s6_calls__r20260714 (dev): "let `callers` be the set of
/// immediate caller qualnames for those invocations … Return JSON with keys
/// `invocation_count` (int) and `callers`" was refused by shape (`callers+invocation_count`):
/// `callers`, counting their tracer's `call` events, modules as the code runs them.
#[test]
fn callers_of_the_target_with_its_invocation_count_reworded() {
    let x = same(
        "load",
        json!({"callers": ["str"], "invocation_count": "int"}),
        &[
            (
                "During the test, consider calls to target function `pkg.mod.load` defined in \
                 file `src/pkg/mod.py`. Count each invocation when a `call` event enters the \
                 target function body. Let `callers` be the set of immediate caller qualnames \
                 for those invocations. Return JSON with keys `invocation_count` (int) and \
                 `callers` (array of str).",
                None,
            ),
            (
                "Which functions call pkg.mod.load (src/pkg/mod.py)\nimmediately, and how many \
                 times is it entered?",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "callers");
    assert_eq!(
        (
            &x.params["function"],
            &x.params["count"],
            &x.params["module_names"]
        ),
        (&json!("load"), &json!("calls"), &json!("runtime"))
    );
}

/// kedro project_find_pipelines_s3_state (dev): "a list of exactly five objects, in the
/// variable order listed above" — the mapping sorted the variables by name, so the native
/// answer's rows came in another order than theirs.
#[test]
fn observed_state_rows_keep_the_listed_order_when_asked() {
    let t = json!({"observed_state": [{"value": "str", "variable": "str"}]});
    let q = |order: &str| {
        format!(
            "Target function: `pkg.mod.find` in `src/pkg/mod.py`. Report the values of the \
             following local variables observed immediately after line 459 has executed for \
             the 7th time:\n\n1. `pipeline_name`\n2. `pipeline_module_name`\n3. `raise_errors`\n\n\
             Answer format: `observed_state`, a list of exactly three objects{order}."
        )
    };
    // and fastapi deploy_docs_status_main_s3_state (dev): "Report `message`, `links`, …, in
    // exactly that order"
    let listed = [
        ", in the variable order listed above",
        " in the order listed",
        ", in exactly that order",
    ];
    let x = same(
        "find",
        t.clone(),
        &listed
            .map(|o| (q(o), None))
            .iter()
            .map(|(s, p)| (s.as_str(), *p))
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        x.params["variables"],
        json!(["pipeline_name", "pipeline_module_name", "raise_errors"])
    );
    let sorted = map("find", &q(", sorted by variable name"), &t, None);
    assert_eq!(
        sorted.params["variables"],
        json!(["pipeline_module_name", "pipeline_name", "raise_errors"])
    );
}

/// kedro ipython_resolve_project_path_m1_cfg (dev): "statement-based coverage" by each
/// executed statement's OWN LINES (its span less its nested statements', the signature
/// covered once invoked): flux answered the lines that had events.
#[test]
fn covered_lines_by_own_lines_of_executed_statements_reworded() {
    let x = same(
        "_resolve",
        json!({"covered_lines": ["int"]}),
        &[
            (
                "Task: determine which source lines of `pkg.mod._resolve` (defined in \
                 `src/pkg/mod.py`) are COVERED during the entire test, under the \
                 statement-based coverage convention defined below. The OWN LINES of a \
                 statement are the physical lines of its span that do not belong to the span \
                 of any statement nested directly inside it.",
                None,
            ),
            (
                "Which lines of pkg.mod._resolve in src/pkg/mod.py are covered? A\nline is \
                 covered iff it is one of the own lines of\nat least one executed statement.",
                None,
            ),
        ],
    );
    assert_eq!(x.name, "covered_lines");
    assert_eq!(x.params["coverage"], "own_lines");
    assert!(x.params.get("line_mode").is_none());
}

/// fastapi utils_deep_dict_update_s6_calls (dev): the tracked set holds the test file's own
/// methods (`testcase.ProbeDict.items`, their tracer naming the module as pytest imports it);
/// the reader kept only the question's modules, so flux tracked the target alone (19 entries
/// for their 966).
#[test]
fn call_order_with_methods_of_the_test_file_reworded() {
    let t = json!({"function_call_order": [{"file": "str", "func": "str"}]});
    let x = same(
        "merge,Probe.items,Probe.__getitem__",
        t,
        &[
            (
                "The primary target is `pkg.mod.merge` in `src/pkg/mod.py`. Report the ordered \
                 call-event sequence for the first invocation of the primary target, \
                 considering exactly this tracked function set:\n\n- `pkg.mod.merge`\n- \
                 `testcase.Probe.items`\n- `testcase.Probe.__getitem__`\n\nThrough all \
                 nested and transitive calls.",
                None,
            ),
            (
                "The primary target is pkg.mod.merge in src/pkg/mod.py. Report the\nordered \
                 call-event sequence of its first invocation, considering exactly this \
                 tracked\nfunction set: pkg.mod.merge, testcase.Probe.items, \
                 testcase.Probe.__getitem__ (nested calls too).",
                None,
            ),
        ],
    );
    assert_eq!(
        x.params["functions"],
        json!(["merge", "Probe.items", "Probe.__getitem__"])
    );
    assert_eq!(x.params["module_names"], "runtime");
}
