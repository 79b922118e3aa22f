//! The Inspect task's scorer without the flux binary (issue 24.5): `flux_scoring.py`, flux's
//! scoring rules in pure Python, gives `flux score --predictions`'s verdict, partial credit,
//! per-field scores, reason, failure class and call-graph counts instance by instance, on a
//! fixture set that covers every rule: hand-written cases (each rule of flux-score's compare,
//! partial and callgraph modules, both ways) and, for the committed sets' golds, answers
//! derived from each gold (itself, lists reversed or cut, scalars stringified or changed, keys
//! dropped, names qualified, no answer, not an object). Its reading of a reply is
//! `flux_eval::parse::extract_json`'s.
//!
//! The committed sets' instances are sampled (every starter and variant, every fifth generated
//! instance by key), the derived answers are fixed rules, not tuned to the port.

use crate::common::{run_flux, tempdir};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A Python 3 interpreter (the port needs only its standard library), or a loud skip.
fn python(what: &str) -> Option<PathBuf> {
    let py = std::env::var_os("FLUX_PORT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"));
    let ok = Command::new(&py)
        .args(["-c", "import json, sys; assert sys.version_info >= (3, 8)"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(py)
    } else {
        flux_skip::skip(what, &format!("{} is not a Python >= 3.8", py.display()));
        None
    }
}

/// One fixture instance: its gold, order-insensitive patterns and answer (`None`: no answer).
struct Case {
    key: String,
    gold: Value,
    order_insensitive: Vec<String>,
    answer: Option<Value>,
}

fn case(key: &str, gold: Value, oi: &[&str], answer: Option<Value>) -> Case {
    Case {
        key: format!("rules/{key}"),
        gold,
        order_insensitive: oi.iter().map(|s| s.to_string()).collect(),
        answer,
    }
}

/// One case per answer, all of the same gold.
fn add(v: &mut Vec<Case>, name: &str, gold: Value, oi: &[&str], answers: Vec<Value>) {
    for (n, a) in answers.into_iter().enumerate() {
        v.push(case(&format!("{name}-{n}"), gold.clone(), oi, Some(a)));
    }
}

/// Hand-written cases, one or more per rule of flux-score (and each rule's near misses).
fn rule_cases() -> Vec<Case> {
    let mut v = Vec::new();
    walk_cases(&mut v);
    scalar_cases(&mut v);
    graph_and_step_cases(&mut v);
    // No answer at all.
    v.push(case("none", json!({"a": 1}), &[], None));
    v
}

/// The gold-driven walk: keys, shapes, lists in and out of order.
fn walk_cases(v: &mut Vec<Case>) {
    // Gold-driven walk: extra keys ignored, missing keys fail, shapes.
    add(
        v,
        "keys",
        json!({"a": 1, "b": {"c": [1, 2]}, "z": "q"}),
        &[],
        vec![
            json!({"a": 1, "b": {"c": [1, 2]}, "z": "q", "extra": 5}),
            json!({"a": 1, "z": "q"}),
            json!({"a": 1, "b": [1, 2], "z": "q"}),
            json!({"a": 1, "b": {"c": 3}, "z": "q"}),
            json!({"a": 1, "b": {"c": [1]}, "z": "q"}),
            json!([1, 2]),
            json!("a string"),
            json!({}),
            json!({"weird \"key\"\n": 1}),
        ],
    );
    // Order-sensitive and order-insensitive lists, by pointer pattern and bare key name.
    let calls = json!({"calls": [{"f": "a", "args": [3, 1]}, {"f": "b", "args": [2]}],
                       "seen": [1, 2, 2, 3]});
    let reordered = json!({"calls": [{"f": "b", "args": [2]}, {"f": "a", "args": [1, 3]}],
                           "seen": [3, 2, 1, 2]});
    for (name, oi) in [
        ("order-none", vec![]),
        ("order-calls", vec!["/calls"]),
        ("order-deep", vec!["/calls", "/calls/*/args"]),
        ("order-bare", vec!["seen", "args"]),
        ("order-all", vec!["/calls", "args", "/seen"]),
    ] {
        add(
            v,
            name,
            calls.clone(),
            &oi,
            vec![
                reordered.clone(),
                json!({"calls": [{"f": "b", "args": [2]}, {"f": "a", "args": [3, 1]}],
                       "seen": [1, 2, 3, 3]}),
                json!({"calls": [{"f": "a", "args": [3, 1]}], "seen": [2, 2, 1, 3]}),
                json!({"calls": [{"f": "a.x.b", "args": ["2"]}, {"f": "a", "args": [1, "3.0"]}],
                       "seen": ["1", 2, 2.0000001, 3]}),
            ],
        );
    }
}

/// Scalars: numbers, booleans, nulls, alternatives, class names, paths, dotted names.
fn scalar_cases(v: &mut Vec<Case>) {
    // Numbers: tolerance, ints vs floats, big ints, strings that spell numbers.
    add(
        v,
        "numbers",
        json!({"i": 3, "f": 0.1, "big": 9_007_199_254_740_993_i64, "tiny": 1e-9, "neg": -2.5,
               "count": 6, "s": "1.0"}),
        &[],
        vec![
            json!({"i": 3.0, "f": 0.1000000001, "big": 9_007_199_254_740_993_i64, "tiny": 2e-9,
                   "neg": "-2.5", "count": "6", "s": 1}),
            json!({"i": "3", "f": "0.1", "big": 9_007_199_254_740_992_i64, "tiny": 0,
                   "neg": -2.50001, "count": 4, "s": "1"}),
            json!({"i": 4, "f": 0.11, "big": "9007199254740993", "tiny": 1e-9, "neg": -2.5,
                   "count": 9, "s": "+1"}),
            json!({"i": " 3 ", "f": "1e-1", "big": 9.007_199_254_740_993e15, "tiny": "nan",
                   "neg": "-inf", "count": "x", "s": "1e0"}),
            json!({"i": "3_0", "f": ".1", "big": 1e300, "tiny": "1e-9", "neg": 2.5,
                   "count": true, "s": "inf"}),
        ],
    );
    // Booleans and nulls, stringified; `|||` alternatives; `<class '…'>`.
    add(
        v,
        "scalars",
        json!({"t": true, "f": false, "n": null, "alt": "ValueError|||TypeError",
               "cls": "<class 'KeyError'>", "s": "True", "empty": ""}),
        &[],
        vec![
            json!({"t": "True", "f": "false", "n": "None", "alt": "TypeError",
                   "cls": "KeyError", "s": true, "empty": ""}),
            json!({"t": "TRUE", "f": "0", "n": "null", "alt": " ValueError ",
                   "cls": "<class \"KeyError\">", "s": "true", "empty": null}),
            json!({"t": 1, "f": null, "n": "none", "alt": "OSError",
                   "cls": "builtins.KeyError", "s": "True ", "empty": " "}),
            json!({"t": "yes", "f": "False", "n": "NULL", "alt": "ValueError|||TypeError",
                   "cls": "<class 'KeyErr'>", "s": "TRUE", "empty": "None"}),
        ],
    );
    // Paths (suffix at a `/`, file names only) and dotted names (suffix at a `.`).
    add(
        v,
        "names",
        json!({"p": "/usr/lib/python3/site-packages/pkg/mod.py", "q": "pkg/mod.py",
               "d": "sympy.core.add.Add.flatten", "l": "Foo.<locals>.bar", "r": "1/2",
               "u": "módulo.función"}),
        &[],
        vec![
            json!({"p": "pkg/mod.py", "q": "./pkg/mod.py", "d": "Add.flatten", "l": "bar",
                   "r": "2", "u": "función"}),
            json!({"p": "kg/mod.py", "q": "/x/pkg/mod.py/", "d": "dd.Add.flatten",
                   "l": "<locals>.bar", "r": "1/2", "u": "unción"}),
            json!({"p": "mod.py", "q": "mod.py", "d": "flatten ", "l": "Foo.bar",
                   "r": "x/1/2", "u": "módulo.función"}),
            json!({"p": "/other/pkg/mod.py", "q": "pkg/mod.pyc", "d": ".flatten",
                   "l": "3.bar", "r": 0.5, "u": "x.módulo.función"}),
        ],
    );
}

/// Partial credit, call graphs and the failure classes of step lists.
fn graph_and_step_cases(v: &mut Vec<Case>) {
    // Partial credit: nested objects, multisets with repeats, empty lists.
    add(
        v,
        "partial",
        json!({"xs": [1, 1, 2, 3], "o": {"a": [1, 2], "b": "x", "c": {}}, "e": [], "k": 5}),
        &[],
        vec![
            json!({"xs": [1, 2, 2], "o": {"a": [2], "b": "y", "c": {"q": 1}}, "e": [], "k": 5}),
            json!({"xs": [], "o": {"b": "x"}, "e": [1], "k": [5]}),
            json!({"xs": [3, 2, 1, 1], "o": "x", "e": {}, "k": "5"}),
        ],
    );
    // Call graphs: edge F1, duplicate edges, lenient names, non-string callees.
    let cg = json!({"call_graph": {"pkg.a": ["pkg.b", "pkg.c", "pkg.b"], "pkg.b": [],
                                   "pkg.c": ["pkg.a", 3]}});
    add(
        v,
        "callgraph",
        cg,
        &[],
        vec![
            json!({"call_graph": {"pkg.c": ["3", "a"], "a": ["b", "c"]}}),
            json!({"call_graph": {"pkg.a": ["pkg.b"]}}),
            json!({"call_graph": {"pkg.a": ["pkg.b", "pkg.c", "pkg.d"], "pkg.c": ["pkg.a", 3],
                                  "x": ["y"]}}),
            json!({"call_graph": {}}),
            json!({"graph": {"pkg.a": ["pkg.b"]}}),
            json!({"call_graph": {"pkg.a": "pkg.b", "pkg.c": [["pkg.a"]]}}),
        ],
    );
    add(
        v,
        "callgraph-empty",
        json!({"call_graph": {}}),
        &[],
        vec![
            json!({"call_graph": {}}),
            json!({"call_graph": {"a": ["b"]}}),
        ],
    );
    // Failure classes on paths of steps.
    let path = |lines: &[i64]| {
        json!({"executed_path": lines.iter().map(|l| json!({"file": "a.py", "line": l, "value": l * 10}))
            .collect::<Vec<_>>(), "loop_iteration_count": lines.len()})
    };
    add(
        v,
        "steps",
        path(&[1, 2, 3, 2, 3, 4]),
        &[],
        vec![
            path(&[1, 2, 3]),
            path(&[1, 2, 5, 4]),
            path(&[1, 2, 3, 4]),
            path(&[1, 3, 2, 2, 3, 4]),
            json!({"executed_path": [1, 2, 3, 2, 3, 4], "loop_iteration_count": 6}),
            json!({"executed_path": path(&[1, 2, 3, 2, 3, 4])["executed_path"],
                   "loop_iteration_count": "7"}),
        ],
    );
    // Floats as flux quotes them in reasons (fixed and exponent notations, their bounds).
    for (n, x) in [
        1e16,
        1e15,
        1.5e-7,
        0.00001234,
        0.0001234,
        1.234_567_890_123_456_7e17,
        -2e300,
        5e-324,
    ]
    .into_iter()
    .enumerate()
    {
        v.push(case(
            &format!("float-{n}"),
            json!({"v": x}),
            &[],
            Some(json!({"v": [x]})),
        ));
        v.push(case(
            &format!("float-got-{n}"),
            json!({"v": "x"}),
            &[],
            Some(json!({"v": x})),
        ));
    }
}

/// Answers derived from a gold by fixed rules.
fn derived(gold: &Value) -> Vec<(&'static str, Option<Value>)> {
    fn map(v: &Value, f: &dyn Fn(&Value) -> Option<Value>) -> Value {
        if let Some(x) = f(v) {
            return x;
        }
        match v {
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, x)| (k.clone(), map(x, f))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| map(x, f)).collect()),
            _ => v.clone(),
        }
    }
    let reversed = map(gold, &|v| {
        v.as_array()
            .map(|a| Value::Array(a.iter().rev().map(|x| map(x, &|_| None)).collect()))
    });
    let stringified = map(gold, &|v| match v {
        Value::Number(n) => Some(Value::String(n.to_string())),
        Value::Bool(b) => Some(json!(if *b { "True" } else { "False" })),
        Value::Null => Some(json!("None")),
        _ => None,
    });
    let near = map(gold, &|v| match v {
        Value::Number(n) if n.is_f64() => Some(json!(n.as_f64().unwrap() * (1.0 + 1e-7))),
        Value::Number(n) => n.as_i64().map(|i| json!(i + 1)),
        _ => None,
    });
    let qualified = map(gold, &|v| {
        v.as_str().map(|s| {
            if s.ends_with(".py") {
                json!(format!("/site-packages/x/{s}"))
            } else {
                json!(format!("pkg.{s}"))
            }
        })
    });
    let mut cut = gold.clone();
    cut_first_list(&mut cut);
    let mut dropped = gold.clone();
    if let Some(m) = dropped.as_object_mut() {
        let k = m.keys().next_back().cloned();
        k.map(|k| m.remove(&k));
    }
    vec![
        ("gold", Some(gold.clone())),
        ("reversed", Some(reversed)),
        ("stringified", Some(stringified)),
        ("near", Some(near)),
        ("qualified", Some(qualified)),
        ("cut", Some(cut)),
        ("dropped", Some(dropped)),
        ("listed", Some(json!([gold]))),
        ("none", None),
    ]
}

/// Drop the last item of the first non-empty list (depth first).
fn cut_first_list(v: &mut Value) -> bool {
    match v {
        Value::Array(a) if !a.is_empty() => {
            a.pop();
            true
        }
        Value::Object(m) => m.values_mut().any(cut_first_list),
        _ => false,
    }
}

fn committed_cases() -> Vec<Case> {
    let roots = [
        workspace().join("instances"),
        workspace().join("variants"),
        workspace().join("sets/flux-gen-v1/instances"),
    ];
    let mut out = Vec::new();
    let mut generated = 0;
    for i in flux_score::discover(&roots).unwrap() {
        let Some(gold) = i.oracle.clone() else {
            continue;
        };
        if i.set.is_some() {
            generated += 1;
            if generated % 5 != 0 {
                continue;
            }
        }
        for (name, answer) in derived(&gold) {
            out.push(Case {
                key: format!("{}/{}~{name}", i.repository, i.id),
                gold: gold.clone(),
                order_insensitive: i.order_insensitive.clone(),
                answer,
            });
        }
    }
    out
}

/// Score each fixture row with the port; print `{key: result}` on one line.
const PORT: &str = r#"
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("flux_scoring", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
rows = [json.loads(l) for l in open(sys.argv[2])]
preds = {p["instance_id"]: p["answer"] for p in map(json.loads, open(sys.argv[3]))}
replies = json.load(open(sys.argv[4]))
out = {}
for r in rows:
    out[r["instance_id"]] = m.score(json.loads(r["gold"]), preds[r["instance_id"]],
                                    r["order_insensitive"])
print(json.dumps({"scores": out, "replies": [m.extract_json(t) for t in replies]}))
"#;

/// Replies as models write them, for the reading of a reply.
const REPLIES: &[&str] = &[
    r#"{"a": 1}"#,
    "  {\"a\": [1, 2]}\n",
    "The answer:\n```json\n{\"a\": 2}\n```\nand {\"b\": 3}",
    "```\nno object here\n```\n{\"c\": 4}",
    "I think {\"a\": 1, \"b\": {\"c\": \"}\"}} is it",
    "broken {\"a\": } then {\"a\": 5}",
    "{\"a\": NaN} then {\"b\": Infinity}",
    "[1, 2] and nothing else",
    "I cannot tell.",
    "unclosed {\"a\": 1",
    "{\"a\": \"\\u00e9\", \"k\": 1e400}",
    "```python\n{'a': 1}\n```",
    "\u{2003}{\"a\": 1}\u{2003}",
];

/// The Python port and `flux score --predictions` agree instance by instance on every field
/// they report, on hand-written rule cases and answers derived from the committed sets' golds;
/// the port reads replies as `flux eval` does.
#[test]
fn python_scorer_agrees_with_flux_score_on_every_rule() {
    let Some(py) = python("the Python port of flux's scoring rules") else {
        return;
    };
    let d = tempdir();
    let mut cases = rule_cases();
    let rules = cases.len();
    cases.extend(committed_cases());
    let (mut rows, mut preds) = (String::new(), String::new());
    for c in &cases {
        let (repo, id) = c.key.split_once('/').unwrap();
        let row = json!({
            "instance_id": c.key, "id": id, "repository": repo, "kind": "S0_Fixture",
            "question": "?", "split": "test", "template": "{}",
            "gold": c.gold.to_string(), "order_insensitive": c.order_insensitive,
        });
        rows.push_str(&format!("{row}\n"));
        preds.push_str(&format!(
            "{}\n",
            json!({"instance_id": c.key, "answer": c.answer})
        ));
    }
    let (rows_f, preds_f, replies_f) = (
        d.join("rows.jsonl"),
        d.join("preds.jsonl"),
        d.join("r.json"),
    );
    let module = d.join(flux_interop::inspect::SCORING_FILE);
    std::fs::write(&rows_f, rows).unwrap();
    std::fs::write(&preds_f, preds).unwrap();
    std::fs::write(&replies_f, json!(REPLIES).to_string()).unwrap();
    std::fs::write(&module, flux_interop::inspect::SCORING).unwrap();
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let out = run_flux(&[
        "score",
        "--instances",
        &p(&rows_f),
        "--predictions",
        &p(&preds_f),
        "--format",
        "json",
        "--results",
        &p(&d.join("results.json")),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = Command::new(&py)
        .args([
            "-c",
            PORT,
            &p(&module),
            &p(&rows_f),
            &p(&preds_f),
            &p(&replies_f),
        ])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let port: Value = serde_json::from_slice(&run.stdout).unwrap();
    let _ = std::fs::remove_dir_all(&d);
    let flux: BTreeMap<String, &Value> = report["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["repo"].as_str().unwrap(),
                    r["id"].as_str().unwrap()
                ),
                r,
            )
        })
        .collect();
    assert_eq!(flux.len(), cases.len());
    let mut differ = Vec::new();
    let (mut passed, mut partial, mut classes) = (0, 0, BTreeMap::<String, usize>::new());
    for c in &cases {
        let (f, py) = (flux[&c.key], &port["scores"][&c.key]);
        let want = expected_port(f);
        if !same(&want, py) {
            differ.push(format!("{}: flux {want}\n   port {py}", c.key));
        }
        passed += usize::from(f["pass"] == json!(true));
        let pc = f["partial"].as_f64().unwrap();
        partial += usize::from(pc > 0.0 && pc < 1.0);
        if let Some(k) = f["failure"].as_str() {
            *classes.entry(k.to_string()).or_default() += 1;
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        cases.len(),
        differ[..differ.len().min(20)].join("\n")
    );
    // The fixture exercises both verdicts, partial credit and every failure class.
    assert!(
        passed > rules / 5 && passed < cases.len() - rules,
        "{passed} passed"
    );
    assert!(partial > rules / 5, "{partial} partially right");
    for k in flux_score::FailureClass::ALL {
        assert!(
            classes.get(k.as_str()).is_some_and(|n| *n > 0),
            "no {} in {classes:?}",
            k.as_str()
        );
    }
    for (t, got) in REPLIES.iter().zip(port["replies"].as_array().unwrap()) {
        let want = flux_eval::parse::extract_json(t).ok();
        assert_eq!(got, &want.unwrap_or(Value::Null), "{t:?}");
    }
}

/// What the port should say for one `flux score` instance line (the fields it reports).
fn expected_port(f: &Value) -> Value {
    let mut m = Map::new();
    m.insert("pass".into(), json!(f["pass"] == json!(true)));
    for k in [
        "partial",
        "reason",
        "path",
        "fields",
        "failure",
        "call_graph",
    ] {
        m.insert(k.into(), f.get(k).cloned().unwrap_or(Value::Null));
    }
    Value::Object(m)
}

/// Equal, floats within 1e-12.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() <= 1e-12
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w))
        }
        _ => a == b,
    }
}
