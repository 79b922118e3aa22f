//! Unit tests of the calls extractors on hand-built traces (`testkit`).
use crate::testkit::pick;
use crate::testkit::TraceBuilder;
use crate::{extract, params};
use serde_json::json;

const LIB: &str = "/usr/lib/python3.11/re/__init__.py";

/// test_a: f (10) at line 11 calls g; g calls h (nested, not direct for f); at 12 f calls
/// the stdlib `compile` (file under /usr/lib/python3.11/re); at 13 f calls g again.
/// test_b: f calls nothing.
fn calls() -> flux_trace::Trace {
    TraceBuilder::new()
        .test("t.py::test_a")
        .call("f", 10, &[])
        .line(11, &[])
        .call("g", 20, &[])
        .line(21, &[])
        .call("h", 30, &[])
        .line(31, &[])
        .ret("None")
        .ret("None")
        .line(12, &[])
        .call_in("compile", LIB, 100, &[])
        .ret("None")
        .line(13, &[])
        .call("g", 20, &[])
        .line(21, &[])
        .call("h", 30, &[])
        .line(31, &[])
        .ret("None")
        .ret("None")
        .ret("None")
        .end("passed")
        .test("t.py::test_b")
        .call("f", 10, &[])
        .line(11, &[])
        .ret("None")
        .end("passed")
        .build()
}

#[test]
fn call_sequence_lists_direct_callees_with_call_sites() {
    let t = calls();
    let p = params(json!({"function": "f"})).unwrap();
    assert_eq!(
        pick(
            &extract(&t, "call_sequence", &p).unwrap(),
            &json!({"call_sequence": [{"function": 0, "line": 0}]})
        ),
        json!({"call_sequence": [{"function": "g", "line": 11},
                                 {"function": "compile", "line": 12},
                                 {"function": "g", "line": 13}]})
    );
    let p = params(json!({"function": "f", "within": "site-packages/pkg"})).unwrap();
    assert_eq!(
        pick(
            &extract(&t, "call_sequence", &p).unwrap(),
            &json!({"call_sequence": [{"function": 0, "line": 0}]})
        ),
        json!({"call_sequence": [{"function": "g", "line": 11}, {"function": "g", "line": 13}]})
    );
    let p = params(json!({"function": "f", "invocation": 3})).unwrap();
    let err = extract(&t, "call_sequence", &p).unwrap_err().to_string();
    assert!(
        err.contains("function `f` has 2 invocation(s); invocation 3"),
        "{err}"
    );
}

#[test]
fn callees_count_and_across_tests() {
    let t = calls();
    let p = params(json!({"function": "f"})).unwrap();
    assert_eq!(
        pick(
            &extract(&t, "callees_count", &p).unwrap(),
            &json!({"callees": [{"function": 0, "count": 0}]})
        ),
        json!({"callees": [{"function": "compile", "count": 1}, {"function": "g", "count": 2}]})
    );
    let p = params(json!({"function": "f", "within": "pkg/"})).unwrap();
    assert_eq!(
        extract(&t, "callees_across_tests", &p).unwrap(),
        json!({"callees_per_test": [{"test": "t.py::test_a", "callees": ["g"]},
                                    {"test": "t.py::test_b", "callees": []}]})
    );
}

#[test]
fn call_graph_edges_sorted_unique() {
    let t = calls();
    assert_eq!(
        extract(&t, "call_graph", &crate::no_params()).unwrap(),
        json!({"call_graph": {"f": ["compile", "g"], "g": ["h"]}})
    );
    let p = params(json!({"within": "pkg/"})).unwrap();
    assert_eq!(
        extract(&t, "call_graph", &p).unwrap(),
        json!({"call_graph": {"f": ["g"], "g": ["h"]}})
    );
}

#[test]
fn call_graph_with_module_names() {
    let t = calls();
    assert_eq!(
        extract(
            &t,
            "call_graph",
            &params(json!({"qualify": "module"})).unwrap()
        )
        .unwrap(),
        json!({"call_graph": {"pkg.mod.f": ["pkg.mod.g", "re.compile"], "pkg.mod.g": ["pkg.mod.h"]}})
    );
    // module_of itself is tested in common.rs.
    let err = extract(&t, "call_graph", &params(json!({"qualify": "x"})).unwrap()).unwrap_err();
    assert!(err.to_string().contains("parameter `qualify`"), "{err}");
}

#[test]
fn generator_resumptions_are_not_calls() {
    // f (10) creates gen (frame 2) at line 11 and resumes it at line 12: one call of gen.
    let t = TraceBuilder::new()
        .call("f", 10, &[])
        .line(11, &[])
        .call("gen", 40, &[])
        .line(41, &[])
        .suspend("1")
        .line(12, &[])
        .resume(2, "gen", 41)
        .line(42, &[])
        .ret("None")
        .ret("None")
        .build();
    let p = params(json!({"function": "f"})).unwrap();
    assert_eq!(
        pick(
            &extract(&t, "call_sequence", &p).unwrap(),
            &json!({"call_sequence": [{"function": 0, "line": 0}]})
        ),
        json!({"call_sequence": [{"function": "gen", "line": 11}]})
    );
}

/// The merge's `unseen-starts`: a generator started where nothing was traced (frame 99, no
/// activation's id) and resumed under `f` is resumed there, not called. Before `starts_here`,
/// its first traced activation counted as a fresh call in every calls extractor.
#[test]
fn a_frame_started_untraced_is_no_call_of_the_code_that_resumes_it() {
    let t = TraceBuilder::new()
        .test("t.py::test_a")
        .call("f", 10, &[])
        .line(11, &[])
        .resume(99, "gen", 41)
        .line(42, &[])
        .suspend("1")
        .line(12, &[])
        .call("g", 20, &[])
        .ret("None")
        .ret("None")
        .end("passed")
        .build();
    let p = params(json!({"function": "f"})).unwrap();
    let template = json!({"call_sequence": [{"function": 0, "line": 0}]});
    assert_eq!(
        pick(&extract(&t, "call_sequence", &p).unwrap(), &template),
        json!({"call_sequence": [{"function": "g", "line": 12}]})
    );
    let p = params(json!({"function": "f", "transitive": true})).unwrap();
    assert_eq!(
        pick(&extract(&t, "call_sequence", &p).unwrap(), &template),
        json!({"call_sequence": [{"function": "g", "line": 12}]})
    );
    assert_eq!(
        extract(&t, "call_graph", &crate::no_params()).unwrap(),
        json!({"call_graph": {"f": ["g"]}})
    );
    let p = params(json!({"functions": ["gen", "g"]})).unwrap();
    assert_eq!(
        pick(
            &extract(&t, "invocation_counts", &p).unwrap(),
            &json!({"invocation_counts": [{"function": 0, "count": 0}]})
        ),
        json!({"invocation_counts": [{"function": "g", "count": 1}, {"function": "gen", "count": 0}]})
    );
}

/// SWE-Flux's "all module-level functions and all methods of every class defined in that file;
/// exclude nested functions and properties" (`module` + `methods`, `exclude_decorated`), zero
/// rows included.
#[test]
fn invocation_counts_of_a_modules_functions_and_methods() {
    let src = "def top():\n    def inner():\n        pass\n    inner()\n\nclass C:\n    def m(self):\n        pass\n    @property\n    def p(self):\n        return 1\n    class D:\n        def n(self):\n            pass\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("top", 1, &[])
        .call("top.<locals>.inner", 2, &[])
        .ret("None")
        .ret("None")
        .call("C.m", 7, &[])
        .ret("None")
        .call("C.m", 7, &[])
        .ret("None")
        .build();
    let counts = |extra: serde_json::Value| {
        let mut p = json!({"module": true, "file": crate::testkit::FILE, "count": "calls"});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        count_rows(&t, p)
    };
    let s = |q: &str, n: u64| (q.to_string(), n);
    assert_eq!(counts(json!({})), vec![s("top", 1)]);
    assert_eq!(
        counts(json!({"methods": true, "exclude_decorated": ["property"]})),
        vec![s("C.D.n", 0), s("C.m", 2), s("top", 1)]
    );
}

/// "every function whose `def` … is an immediate child of either the `Slot` class body or the
/// `Downloader` class body" (scrapy downloader_process_queue_m6_calls, dev): `classes`.
#[test]
fn invocation_counts_over_the_methods_of_several_classes() {
    let src = "class A:\n    def a(self):\n        pass\n\nclass B:\n    def b(self):\n        pass\n\nclass C:\n    def c(self):\n        pass\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("B.b", 6, &[])
        .ret("None")
        .build();
    let p = json!({"classes": ["A", "B"], "file": crate::testkit::FILE, "count": "calls"});
    let rows = count_rows(&t, p);
    assert_eq!(rows, [("A.a".to_string(), 0), ("B.b".to_string(), 1)]);
}

/// "Exclude … `__init__`, dunder methods" (jinja visitor_visit_m6_calls, dev: a Protocol's
/// `__call__` in the module was a row of theirs too many): `exclude_dunder`.
#[test]
fn invocation_counts_without_dunder_methods() {
    let src = "class P:\n    def __call__(self):\n        pass\n\nclass V:\n    def __init__(self):\n        pass\n    def visit(self):\n        pass\n    def __x(self):\n        pass\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("V.__init__", 6, &[])
        .ret("None")
        .call("V.visit", 8, &[])
        .ret("None")
        .build();
    let counts = |dunder: bool| {
        let p = json!({"module": true, "methods": true, "file": crate::testkit::FILE,
                       "count": "calls", "exclude_dunder": dunder});
        let v = extract(&t, "invocation_counts", &params(p).unwrap()).unwrap();
        v["invocation_counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["qualname"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        counts(false),
        ["P.__call__", "V.__init__", "V.__x", "V.visit"]
    );
    // a private name (`__x`, no trailing underscores) is not a dunder
    assert_eq!(counts(true), ["V.__x", "V.visit"]);
}

/// "report the chronological call-event sequence around every invocation of `Command.run` …
/// this question aggregates all of them" (scrapy genspider_run_s6_calls, dev): with
/// `all_invocations` each invocation's entries in turn, its own start first with `include_self`;
/// a call of a tracked function outside every invocation is not an entry.
#[test]
fn call_sequence_of_every_invocation_in_turn() {
    let t = TraceBuilder::new()
        .call("run", 10, &[])
        .line(11, &[])
        .call("h", 50, &[])
        .ret("None")
        .ret("None")
        .call("h", 50, &[])
        .ret("None")
        .call("run", 10, &[])
        .line(12, &[])
        .call("g", 60, &[])
        .ret("None")
        .ret("None")
        .build();
    let seq = |extra: serde_json::Value| {
        let mut p = json!({"function": "run", "functions": ["run", "h", "g"],
                           "include_self": true, "transitive": true});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let out = extract(&t, "call_sequence", &params(p).unwrap()).unwrap();
        out["call_sequence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["function"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(seq(json!({})), ["run", "h"]);
    assert_eq!(
        seq(json!({"all_invocations": true})),
        ["run", "h", "run", "g"]
    );
}

/// Issue 25: SWE-Flux counts every `call` event of a generator as a call, the target's own
/// call and its own resumptions included (`include_self` + `resumptions`).
#[test]
fn a_generator_targets_own_resumptions_are_entries_with_include_self_and_resumptions() {
    // run (10) drives gen (40, frame 2): starts it at 11, resumes it at 12; gen calls h at 41
    // and again, after its resumption, at 42.
    let t = TraceBuilder::new()
        .call("run", 10, &[])
        .line(11, &[])
        .call("gen", 40, &[])
        .line(41, &[])
        .call("h", 50, &[])
        .ret("None")
        .suspend("1")
        .line(12, &[])
        .resume(2, "gen", 41)
        .line(42, &[])
        .call("h", 50, &[])
        .ret("None")
        .ret("None")
        .ret("None")
        .build();
    let seq = |extra: serde_json::Value| {
        let mut p = json!({"function": "gen", "functions": ["gen", "h"]});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let out = extract(&t, "call_sequence", &params(p).unwrap()).unwrap();
        out["call_sequence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["function"].as_str().unwrap().to_string(),
                    c["line"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let s = |f: &str, l: u32| (f.to_string(), json!(l));
    assert_eq!(
        seq(json!({"include_self": true, "resumptions": true})),
        [s("gen", 0), s("h", 41), s("gen", 12), s("h", 42)]
    );
    // Either option alone keeps the earlier definitions.
    assert_eq!(
        seq(json!({"include_self": true})),
        [s("gen", 0), s("h", 41), s("h", 42)]
    );
    assert_eq!(seq(json!({"resumptions": true})), [s("h", 41), s("h", 42)]);
}

/// Issue 25: SWE-Flux's call counts over a class's code objects: its methods and every
/// comprehension, generator expression, lambda and nested function under them, never-called
/// ones with 0.
#[test]
fn invocation_counts_over_a_classs_code_objects_include_comprehensions_and_zero_rows() {
    let src = "class C:\n    def m(self, xs):\n        ys = [x for x in xs]\n        g = (y for y in ys)\n        f = lambda v: v\n        return list(g)\n    def n(self):\n        def inner():\n            pass\n        return 1\n\ndef top():\n    pass\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("C.m", 2, &[])
        .call("C.m.<locals>.<listcomp>", 3, &[])
        .ret("[]")
        .call("C.m.<locals>.<genexpr>", 4, &[])
        .ret("None")
        .ret("[]")
        .build();
    let p = json!({"class": "C", "file": crate::testkit::FILE, "count": "calls",
                   "code_objects": true});
    let got = count_rows(&t, p);
    let s = |q: &str, n: u64| (q.to_string(), n);
    assert_eq!(
        got,
        [
            s("C.m", 1),
            s("C.m.<locals>.<genexpr>", 1),
            s("C.m.<locals>.<lambda>", 0),
            s("C.m.<locals>.<listcomp>", 1),
            s("C.n", 0),
            s("C.n.<locals>.inner", 0),
        ]
    );
}

/// SWE-Flux's "every function lexically contained in the body of class `C`, including
/// definitions in classes nested within `C`" and excluding "functions nested inside a method"
/// (scrapy media_process_request_m6_calls, dev: `MediaPipeline.SpiderInfo.__init__`):
/// `methods` with `class` adds the nested classes' methods, not a method's inner function.
#[test]
fn invocation_counts_of_a_class_with_methods_include_nested_classes_methods() {
    let src = "class C:\n    class Info:\n        def __init__(self):\n            pass\n    def m(self):\n        def inner():\n            pass\n        return C.Info()\n\ndef top():\n    pass\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("C.m", 5, &[])
        .call("C.Info.__init__", 3, &[])
        .ret("None")
        .ret("None")
        .build();
    let names = |methods: bool| {
        let p = json!({"class": "C", "file": crate::testkit::FILE, "count": "calls",
                       "methods": methods});
        count_rows(&t, p)
    };
    let s = |q: &str, n: u64| (q.to_string(), n);
    assert_eq!(names(false), [s("C.m", 1)]);
    assert_eq!(names(true), [s("C.Info.__init__", 1), s("C.m", 1)]);
}

/// "Include calls to the listed functions whenever their `call` events occur during that
/// lifetime, including ... nested/transitive calls made while awaited work runs even when the
/// target frame is suspended" (scrapy engine_open_spider_async_s6_calls, dev: 3 of 27 entries
/// without it): `lifetime` takes every call of the thread between the invocation's first and
/// last event, a callback's too.
#[test]
fn a_coroutines_lifetime_takes_the_calls_made_while_it_is_suspended() {
    // test (1) starts co (10, frame 2), which suspends; the loop (test) runs a callback cb (30)
    // that calls h; co resumes and calls h itself, then completes.
    let t = TraceBuilder::new()
        .call("test", 1, &[])
        .line(2, &[])
        .call("co", 10, &[])
        .line(11, &[])
        .call("h", 50, &[])
        .ret("None")
        .suspend("fut")
        .line(3, &[])
        .call("cb", 30, &[])
        .call("h", 50, &[])
        .ret("None")
        .ret("None")
        .line(4, &[])
        .resume(2, "co", 11)
        .line(12, &[])
        .call("h", 50, &[])
        .ret("None")
        .ret("None")
        .ret("None")
        .build();
    let seq = |lifetime: bool| {
        let p = json!({"function": "co", "functions": ["co", "h"], "include_self": true,
                       "resumptions": true, "transitive": true, "lifetime": lifetime});
        let out = extract(&t, "call_sequence", &params(p).unwrap()).unwrap();
        out["call_sequence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["function"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(seq(false), ["co", "h", "co", "h"]);
    assert_eq!(seq(true), ["co", "h", "h", "co", "h"]);
}

/// `invocation_counts` of `t` under `p`: (qualname, count) rows in answer order.
fn count_rows(t: &flux_trace::Trace, p: serde_json::Value) -> Vec<(String, u64)> {
    let v = extract(t, "invocation_counts", &params(p).unwrap()).unwrap();
    v["invocation_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["qualname"].as_str().unwrap().to_string(),
                x["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// llama_factory parser_get_dataset_list_s6_calls (dev) names the callees to keep as
/// `src.llamafactory.extras.misc.use_modelscope`, in other modules than the target's: the
/// filter took qualnames only. An entry may be the `module.qualname` the answer's `func` has.
#[test]
fn call_sequence_keeps_functions_named_by_module_and_qualname() {
    let t = calls();
    let pick_funcs = |p: serde_json::Value| {
        pick(
            &extract(&t, "call_sequence", &params(p).unwrap()).unwrap(),
            &json!({"call_sequence": [{"func": 0}]}),
        )
    };
    // testkit's file is site-packages/pkg/mod.py (module `pkg.mod`); `compile` is re's
    assert_eq!(
        pick_funcs(json!({"function": "f", "functions": ["pkg.mod.g", "re.compile"]})),
        json!({"call_sequence": [{"func": "pkg.mod.g"}, {"func": "re.compile"}, {"func": "pkg.mod.g"}]})
    );
    assert_eq!(
        pick_funcs(json!({"function": "f", "functions": ["re.compile"]})),
        json!({"call_sequence": [{"func": "re.compile"}]})
    );
    assert_eq!(
        pick_funcs(json!({"function": "f", "functions": ["g"]})),
        json!({"call_sequence": [{"func": "pkg.mod.g"}, {"func": "pkg.mod.g"}]})
    );
    assert_eq!(
        pick_funcs(json!({"function": "f", "functions": ["other.g"]})),
        json!({"call_sequence": []})
    );
}

/// fastapi utils_deep_dict_update_s6_calls (dev): their tracer names a test file's methods by
/// the module the test runs as (`testcase.ProbeDict.items`, pytest importing `testcase.py` by
/// its stem); flux named them from the path under the root
/// (`fastapi_qa.….files.testcase.ProbeDict.items`). `module_names = "runtime"` takes the
/// code's `__name__` where the trace records it.
#[test]
fn call_sequence_names_modules_as_the_code_runs_them() {
    let mut t = calls();
    for e in t.events.iter_mut().filter(|e| e.qualname().as_ref() == "g") {
        e.code_mut().module = flux_trace::Name::from("testcase");
    }
    let funcs = |extra: serde_json::Value| {
        let mut p = json!({"function": "f", "functions": ["g", "testcase.g"]});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        pick(
            &extract(&t, "call_sequence", &params(p).unwrap()).unwrap(),
            &json!({"call_sequence": [{"func": 0, "module": 0}]}),
        )
    };
    assert_eq!(
        funcs(json!({"module_names": "runtime"})),
        json!({"call_sequence": [{"func": "testcase.g", "module": "testcase"},
                                 {"func": "testcase.g", "module": "testcase"}]})
    );
    assert_eq!(
        funcs(json!({})),
        json!({"call_sequence": [{"func": "pkg.mod.g", "module": "pkg.mod"},
                                 {"func": "pkg.mod.g", "module": "pkg.mod"}]})
    );
}

/// llama_factory parser_get_dataset_list_s6_calls__r20260714 (dev): their run was on Python
/// 3.10, whose tracer names a frame `module.co_name` (no `co_qualname`): the method
/// `DatasetAttr.join` is `src.llamafactory.data.parser.join` in the question's tracked list and
/// in their answer. `function_names = "co_name"` matches and writes functions that way.
#[test]
fn call_sequence_names_methods_by_co_name_for_a_run_before_3_11() {
    let mut t = calls();
    for e in t.events.iter_mut().filter(|e| e.qualname().as_ref() == "g") {
        e.code_mut().qualname = flux_trace::Name::from("C.g");
    }
    let funcs = |extra: serde_json::Value| {
        let mut p = json!({"function": "f", "functions": ["pkg.mod.g"]});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        pick(
            &extract(&t, "call_sequence", &params(p).unwrap()).unwrap(),
            &json!({"call_sequence": [{"func": 0, "qualname": 0}]}),
        )
    };
    assert_eq!(
        funcs(json!({"function_names": "co_name"})),
        json!({"call_sequence": [{"func": "pkg.mod.g", "qualname": "C.g"},
                                 {"func": "pkg.mod.g", "qualname": "C.g"}]})
    );
    assert_eq!(
        funcs(json!({})),
        json!({"call_sequence": []}),
        "by qualname, `pkg.mod.g` is no method of C"
    );
    // A method the question lists by its class is written so, on that run too (kedro
    // starters_fetch_validate_parse_config_from_user_prompts_s6_calls, dev, Python 3.9:
    // `kedro.framework.cli.starters._Prompt.__init__` in the question and their answer).
    let listed = |names: serde_json::Value| {
        let p = json!({"function": "f", "functions": names, "function_names": "co_name"});
        pick(
            &extract(&t, "call_sequence", &params(p).unwrap()).unwrap(),
            &json!({"call_sequence": [{"func": 0}]}),
        )
    };
    assert_eq!(
        listed(json!(["pkg.mod.C.g"])),
        json!({"call_sequence": [{"func": "pkg.mod.C.g"}, {"func": "pkg.mod.C.g"}]})
    );
}

/// `callers` (SWE-Flux's "the set of immediate caller qualnames … just before each target
/// `call` event", with `invocation_count`): the frame whose activation made each call, by
/// `module.qualname`; a caller missing from the trace is an error, not a gap in the set.
#[test]
fn callers_are_the_frames_that_made_each_call() {
    let t = calls();
    let callers = |p: serde_json::Value| extract(&t, "callers", &params(p).unwrap());
    assert_eq!(
        callers(json!({"function": "g"})).unwrap(),
        json!({"callers": ["pkg.mod.f"], "invocation_count": 2})
    );
    assert_eq!(
        callers(json!({"function": "h", "test": "t.py::test_a"})).unwrap(),
        json!({"callers": ["pkg.mod.g"], "invocation_count": 2})
    );
    let e = callers(json!({"function": "f"})).unwrap_err().to_string();
    assert!(
        e.contains("the caller of invocation 1 of `f` (line 10) is not in the trace"),
        "{e}"
    );
}

/// With `count = "calls"` a generator's resumption is a call too, and its resumer a caller.
#[test]
fn callers_counting_calls_take_resumptions_and_their_resumers() {
    let t = TraceBuilder::new()
        .test("t.py::test_gen")
        .call("main", 1, &[])
        .line(2, &[])
        .call("gen", 10, &[])
        .line(11, &[])
        .ret("1")
        .line(3, &[])
        .call("helper", 20, &[])
        .line(21, &[])
        .resume(2, "gen", 11)
        .line(12, &[])
        .ret("None")
        .ret("None")
        .ret("None")
        .end("passed")
        .build();
    let callers = |count: &str| {
        let p = params(json!({"function": "gen", "count": count})).unwrap();
        extract(&t, "callers", &p).unwrap()
    };
    assert_eq!(
        callers("invocations"),
        json!({"callers": ["pkg.mod.main"], "invocation_count": 1})
    );
    assert_eq!(
        callers("calls"),
        json!({"callers": ["pkg.mod.helper", "pkg.mod.main"], "invocation_count": 2})
    );
}

/// `function_names = "co_name"`: callers as a tracer before 3.11 names frames (llama_factory's
/// `testcase.test_invocation_callers` for the method `TestX.test_invocation_callers`).
#[test]
fn callers_by_co_name_drop_the_class() {
    let t = TraceBuilder::new()
        .test("t.py::TestX::test_m")
        .call("TestX.test_m", 1, &[])
        .line(2, &[])
        .call("load", 10, &[])
        .ret("None")
        .ret("None")
        .end("passed")
        .build();
    let callers = |p: serde_json::Value| extract(&t, "callers", &params(p).unwrap()).unwrap();
    assert_eq!(
        callers(json!({"function": "load"}))["callers"],
        json!(["pkg.mod.TestX.test_m"])
    );
    assert_eq!(
        callers(json!({"function": "load", "function_names": "co_name"}))["callers"],
        json!(["pkg.mod.test_m"])
    );
}
