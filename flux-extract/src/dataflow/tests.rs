//! Unit tests of the dataflow extractors on hand-built traces (`testkit`).
use super::uses_from_source;
use crate::testkit::TraceBuilder;
use crate::{extract, params};
use serde_json::json;

/// An answer's `observed_def_use_pairs` as (variable, def line, use line).
fn pairs_of(v: &serde_json::Value) -> Vec<(String, i64, i64)> {
    v["observed_def_use_pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["variable"].as_str().unwrap().to_string(),
                x["def_line"].as_i64().unwrap(),
                x["use_line"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// def f(a):          # 1
///     b = a + 1      # 2  uses a
///     b += a         # 3  uses b, a
///     c = b          # 4  uses b
///     c = b          # 5  uses b; c unchanged → no new def of c observed
///     return c       # 6  uses c
/// f(1): call{a:1} 2 3{b:2} 4{b:3} 5{c:3} 6 return.
/// Pairs: (a,1,2) (a,1,3) (b,2,3) (b,3,4) (b,3,5) (c,4,6) — c's def stays at 4 because
/// line 5 leaves its repr unchanged (documented limitation).
fn one() -> flux_trace::Trace {
    TraceBuilder::new()
        .test("t.py::test_one")
        .call("f", 1, &[("a", "1")])
        .line(2, &[])
        .line(3, &[("b", "2")])
        .line(4, &[("b", "3")])
        .line(5, &[("c", "3")])
        .line(6, &[])
        .ret("3")
        .end("passed")
        .test("t.py::test_two")
        .call("f", 1, &[("a", "5")])
        .line(2, &[])
        .line(3, &[("b", "6")])
        .line(4, &[("b", "11")])
        .line(5, &[("c", "11")])
        .line(6, &[])
        .ret("11")
        .end("passed")
        .build()
}

fn uses() -> serde_json::Value {
    json!({"2": ["a"], "3": ["b", "a"], "4": ["b"], "5": ["b"], "6": ["c"]})
}

#[test]
fn def_use_pairs_along_the_path() {
    let t = one();
    let p = params(json!({"function": "f", "uses": uses()})).unwrap();
    assert_eq!(
        extract(&t, "def_use_pairs", &p).unwrap()["observed_def_use_pairs"],
        json!([
            {"variable": "a", "def_line": 1, "use_line": 2, "count": 1},
            {"variable": "a", "def_line": 1, "use_line": 3, "count": 1},
            {"variable": "b", "def_line": 2, "use_line": 3, "count": 1},
            {"variable": "b", "def_line": 3, "use_line": 4, "count": 1},
            {"variable": "b", "def_line": 3, "use_line": 5, "count": 1},
            {"variable": "c", "def_line": 4, "use_line": 6, "count": 1},
        ])
    );
}

#[test]
fn def_use_from_source_matches_the_hand_made_uses() {
    let src = "def f(a):\n    b = a + 1\n    b += a\n    c = b\n    c = b\n    return c\n";
    let t = one();
    let p = params(json!({"function": "f", "source": src})).unwrap();
    let q = params(json!({"function": "f", "uses": uses()})).unwrap();
    assert_eq!(
        extract(&t, "def_use_pairs", &p).unwrap(),
        extract(&t, "def_use_pairs", &q).unwrap()
    );
    let p = params(json!({"function": "f"})).unwrap();
    let err = extract(&t, "def_use_pairs", &p).unwrap_err().to_string();
    assert!(err.contains("needs the static facts of `f`"), "{err}");
}

/// With the static facts of the real source, uses come from the AST and equal the hand-made
/// ones; `definitions = "ast"` defines `c` again at line 5 (an assignment the repr-change
/// definition cannot see), so `c` at 6 pairs with 5 instead of 4.
#[test]
fn def_use_with_static_facts_and_ast_definitions() {
    let src = "def f(a):\n    b = a + 1\n    b += a\n    c = b\n    c = b\n    return c\n";
    let mut t = one();
    t.facts.insert(
        crate::testkit::FILE.to_string(),
        crate::testkit::facts_from_source(src, crate::testkit::FILE),
    );
    let by_hand = params(json!({"function": "f", "uses": uses()})).unwrap();
    let from_facts = params(json!({"function": "f"})).unwrap();
    assert_eq!(
        extract(&t, "def_use_pairs", &from_facts).unwrap(),
        extract(&t, "def_use_pairs", &by_hand).unwrap()
    );
    let ast = params(json!({"function": "f", "definitions": "ast"})).unwrap();
    let pairs = |v: serde_json::Value| pairs_of(&v);
    let s = |v: &str, d, u| (v.to_string(), d, u);
    assert_eq!(
        pairs(extract(&t, "def_use_pairs", &ast).unwrap()),
        vec![
            s("a", 1, 2),
            s("a", 1, 3),
            s("b", 2, 3),
            s("b", 3, 4),
            s("b", 3, 5),
            s("c", 5, 6)
        ]
    );
    // All invocations together (both tests' calls): every pair twice; only `c` with variables.
    let all = params(
        json!({"function": "f", "definitions": "ast", "all_invocations": true,
                            "variables": ["c"]}),
    )
    .unwrap();
    assert_eq!(
        extract(&t, "def_use_pairs", &all).unwrap()["observed_def_use_pairs"],
        json!([{"variable": "c", "def_line": 5, "use_line": 6, "count": 2}])
    );
    // Dead definitions: c's definition at 4 is replaced at 5 before any use (twice, once per
    // invocation).
    let dead = params(json!({"function": "f"})).unwrap();
    assert_eq!(
        extract(&t, "dead_defs", &dead).unwrap(),
        json!({"dead_defs": [{"variable": "c", "def_line": 4, "count": 2}]})
    );
}

#[test]
fn def_use_across_tests_lists_tests_per_pair() {
    let t = one();
    let p = params(json!({"function": "f", "uses": uses(), "variable": "c"})).unwrap();
    assert_eq!(
        extract(&t, "def_use_across_tests", &p).unwrap(),
        json!({"def_use_pairs": [{"variable": "c", "def_line": 4, "use_line": 6,
               "tests": ["t.py::test_one", "t.py::test_two"]}]})
    );
}

#[test]
fn tokenizer_separates_reads_from_targets() {
    let src = "\
x = y + z  # comment w
a[i] = f(k=v, s='q r')
for p, q in items:
obj.attr = other.thing
with open(path) as fh:
n += 1
import os
if a == b and not c:
s = \"\"\"doc
still doc u\"\"\" + t
";
    let u = uses_from_source(src, 10);
    let get = |l: u32| u.get(&l).cloned().unwrap_or_default();
    assert_eq!(get(10), vec!["y", "z"]);
    assert_eq!(get(11), vec!["a", "i", "f", "v"]);
    assert_eq!(get(12), vec!["items"]);
    assert_eq!(get(13), vec!["obj", "other"]);
    assert_eq!(get(14), vec!["open", "path"]);
    assert_eq!(get(15), vec!["n"]);
    assert_eq!(get(16), Vec::<String>::new());
    assert_eq!(get(17), vec!["a", "b", "c"]);
    assert_eq!(get(18), Vec::<String>::new());
    assert_eq!(get(19), vec!["t"]);
}

/// SWE-Flux's "attribute all defs and uses of a multi-line statement to the line where it
/// begins": a call whose arguments are on the statement's 2nd line (3.11 reports a line event
/// there) is a use at the statement's first line with `line_mode = "statement"`.
#[test]
fn def_use_pairs_normalised_to_statements_merge() {
    let src = "def f(a):\n    b = g(\n        a)\n    return b\n";
    let t = crate::testkit::TraceBuilder::new()
        .source(src)
        .call("f", 1, &[("a", "1")])
        .line(2, &[])
        .line(3, &[])
        .line(2, &[("b", "2")])
        .line(4, &[])
        .ret("2")
        .build();
    let pairs = |mode: &str| {
        let p = params(json!({"function": "f", "definitions": "ast", "line_mode": mode})).unwrap();
        pairs_of(&extract(&t, "def_use_pairs", &p).unwrap())
    };
    assert!(
        pairs("reported").contains(&("a".into(), 1, 3)),
        "{:?}",
        pairs("reported")
    );
    let s = pairs("statement");
    assert!(
        s.contains(&("a".into(), 1, 2)) && !s.iter().any(|p| p.2 == 3),
        "{s:?}"
    );
    assert!(s.contains(&("b".into(), 2, 4)), "{s:?}");
}

/// llama_factory cal_ppl_calculate_ppl_m4_dataflow (dev): "a definition uses the line where the
/// defining statement begins; a use uses the line containing the read identifier": uses on a
/// call's continuation line stay there (`use_lines = "reported"`), definitions are normalised.
#[test]
fn def_use_pairs_with_definitions_normalised_and_uses_where_read() {
    let src = "def f(a):\n    b = g(\n        a,\n        a)\n    return b\n";
    let t = crate::testkit::TraceBuilder::new()
        .source(src)
        .call("f", 1, &[("a", "1")])
        .line(2, &[])
        .line(3, &[])
        .line(4, &[])
        .line(2, &[("b", "2")])
        .line(5, &[])
        .ret("2")
        .build();
    let pairs = |extra: serde_json::Value| {
        let mut p = json!({"function": "f", "definitions": "ast", "line_mode": "statement"});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        pairs_of(&extract(&t, "def_use_pairs", &params(p).unwrap()).unwrap())
    };
    let s = pairs(json!({"use_lines": "reported"}));
    assert!(
        s.contains(&("a".into(), 1, 3)) && s.contains(&("a".into(), 1, 4)),
        "uses on the lines they are read on: {s:?}"
    );
    assert!(s.contains(&("b".into(), 2, 5)), "{s:?}");
    let merged = pairs(json!({}));
    assert!(
        merged.contains(&("a".into(), 1, 2)) && !merged.iter().any(|p| p.2 == 3),
        "by default uses follow line_mode: {merged:?}"
    );
}

/// Issue 25: SWE-Flux's def-use definitions vary: reads inside comprehensions and generator
/// expressions in or out of the outer frame's uses, nested-function (lambda) reads of outer
/// locals in or out, and uses counted per load rather than per line.
#[test]
fn comprehension_closure_and_per_load_uses_are_options() {
    let src = "def f(xs):\n    n = len(xs)\n    t = n + n\n    ys = [x * n for x in xs]\n    g = lambda: n\n    return t, ys, g\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("f", 1, &[("xs", "[1]")])
        .line(2, &[])
        .line(3, &[("n", "1")])
        .line(4, &[("t", "2")])
        .line(5, &[("ys", "[1]")])
        .line(6, &[("g", "<function>")])
        .ret("(2, [1], <function>)")
        .build();
    let n_pairs = |extra: serde_json::Value| {
        let mut p = json!({"function": "f", "definitions": "ast", "variables": ["n"]});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let v = extract(&t, "def_use_pairs", &params(p).unwrap()).unwrap();
        v["observed_def_use_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["use_line"].as_i64().unwrap(),
                    x["count"].as_i64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    // n defined at 2; read twice at 3, by the list comprehension at 4, by the lambda at 5.
    assert_eq!(n_pairs(json!({})), [(3, 1), (4, 1), (5, 1)]);
    assert_eq!(
        n_pairs(json!({"use_count": "load"})),
        [(3, 2), (4, 1), (5, 1)]
    );
    assert_eq!(
        n_pairs(json!({"comprehension_uses": false})),
        [(3, 1), (5, 1)]
    );
    assert_eq!(n_pairs(json!({"closure_uses": false})), [(3, 1), (4, 1)]);
    assert_eq!(n_pairs(json!({"nested_uses": false})), [(3, 1)]);
    assert_eq!(
        n_pairs(json!({"nested_uses": false, "closure_uses": true})),
        [(3, 1), (5, 1)]
    );
}

/// SWE-Flux's "for `for item in collection`, the iterable expression uses `collection` once
/// when the loop is entered" (scrapy conf_feed_process_params_from_cli_m4_dataflow, dev): 3.11
/// reports the header at every iteration and at the exit, and flux counted a use at each.
/// With `iterable_uses = "entry"` a header reached from the loop's body uses nothing; a nested
/// loop entered again by the next outer iteration is entered again.
#[test]
fn iterable_uses_once_per_loop_entry() {
    let src = "def f(xs):\n    out = []\n    for x in xs:\n        out.append(x)\n    for y in out:\n        for z in xs:\n            pass\n    return out\n";
    let mut b = TraceBuilder::new()
        .source(src)
        .call("f", 1, &[("xs", "[1, 2]")])
        .line(2, &[])
        .line(3, &[("out", "[]")]);
    for x in ["1", "2"] {
        b = b.line(4, &[("x", x)]).line(3, &[]);
    }
    b = b.line(5, &[]);
    for y in ["1", "2"] {
        b = b.line(6, &[("y", y)]);
        for z in ["1", "2"] {
            b = b.line(7, &[("z", z)]).line(6, &[]);
        }
        b = b.line(5, &[]);
    }
    let t = b.line(8, &[]).ret("[1, 2]").build();
    let counts = |mode: &str| {
        let p = params(json!({"function": "f", "definitions": "ast",
            "variables": ["xs", "out"], "iterable_uses": mode}))
        .unwrap();
        let v = extract(&t, "def_use_pairs", &p).unwrap();
        v["observed_def_use_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["variable"].as_str().unwrap().to_string(),
                    x["use_line"].as_i64().unwrap(),
                    x["count"].as_i64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let row = |v: &str, u: i64, c: i64| (v.to_string(), u, c);
    assert_eq!(
        counts("every"),
        [
            row("out", 4, 2),
            row("out", 5, 3),
            row("out", 8, 1),
            row("xs", 3, 3),
            row("xs", 6, 6)
        ]
    );
    assert_eq!(
        counts("entry"),
        [
            row("out", 4, 2),
            row("out", 5, 1),
            row("out", 8, 1),
            row("xs", 3, 1),
            row("xs", 6, 2)
        ]
    );
    // Targets are still defined at every iteration: `x` at 3 reaches line 4 twice.
    let p = params(
        json!({"function": "f", "definitions": "ast", "variables": ["x"],
        "iterable_uses": "entry"}),
    )
    .unwrap();
    let v = extract(&t, "def_use_pairs", &p).unwrap();
    assert_eq!(v["observed_def_use_pairs"][0]["count"], 2);
}

/// llama_factory longlora_llama_sdpa_attention_forward_m4_dataflow (dev): per invocation, its
/// def-use pairs and its dead definitions, with the tracked variables; the extractor summed
/// pairs over the invocations and gave dead definitions from another extractor only.
#[test]
fn def_use_pairs_per_invocation_with_their_dead_definitions() {
    let src = "def f(a):\n    b = a + 1\n    b += a\n    c = b\n    c = b\n    return c\n";
    let mut t = one();
    t.facts.insert(
        crate::testkit::FILE.to_string(),
        crate::testkit::facts_from_source(src, crate::testkit::FILE),
    );
    let all = params(
        json!({"function": "f", "definitions": "ast", "all_invocations": true,
                            "variables": ["c", "b"]}),
    )
    .unwrap();
    let out = extract(&t, "def_use_pairs", &all).unwrap();
    assert_eq!(
        out["per_invocation_pairs"],
        json!([
            {"invocation": 1, "variable": "b", "def_line": 2, "use_line": 3, "count": 1},
            {"invocation": 1, "variable": "b", "def_line": 3, "use_line": 4, "count": 1},
            {"invocation": 1, "variable": "b", "def_line": 3, "use_line": 5, "count": 1},
            {"invocation": 1, "variable": "c", "def_line": 5, "use_line": 6, "count": 1},
            {"invocation": 2, "variable": "b", "def_line": 2, "use_line": 3, "count": 1},
            {"invocation": 2, "variable": "b", "def_line": 3, "use_line": 4, "count": 1},
            {"invocation": 2, "variable": "b", "def_line": 3, "use_line": 5, "count": 1},
            {"invocation": 2, "variable": "c", "def_line": 5, "use_line": 6, "count": 1},
        ])
    );
    assert_eq!(
        out["per_invocation_dead_defs"],
        json!([
            {"invocation": 1, "variable": "c", "def_line": 4, "count": 1},
            {"invocation": 2, "variable": "c", "def_line": 4, "count": 1},
        ])
    );
    assert_eq!(out["variables"], json!(["b", "c"]));
}

/// `scopes = "flat"` (llama_factory trainer_utils_create_apollo_optimizer_s4_dataflow__r20260714,
/// dev: their parser walks the function's AST by name, so `{id(param) for param in ps}` at 3
/// is a use of the function's `param` defined at 2 and then a definition of it): a nested
/// scope's own names are the function's at their line; by default they are not.
#[test]
fn flat_scopes_make_a_comprehensions_names_the_functions() {
    let src =
        "def f(ps):\n    param = ps[0]\n    ids = {id(param) for param in ps}\n    return param\n";
    let t = TraceBuilder::new()
        .source(src)
        .call("f", 1, &[("ps", "[1]")])
        .line(2, &[])
        .line(3, &[("param", "1")])
        .line(4, &[("ids", "{1}")])
        .ret("1")
        .build();
    let pairs = |scopes: &str| {
        let p = json!({"function": "f", "definitions": "ast", "variables": ["param"],
                       "scopes": scopes});
        let v = extract(&t, "def_use_pairs", &params(p).unwrap()).unwrap();
        v["observed_def_use_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["def_line"].as_i64().unwrap(),
                    x["use_line"].as_i64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(pairs("python"), [(2, 4)]);
    assert_eq!(pairs("flat"), [(2, 3), (3, 4)]);
}
