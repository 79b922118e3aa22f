//! Data-driven tests of reply parsing, shape validation, prompt budgeting, prices and retry
//! timing.

use flux_eval::client::{ChatClient, Message};
use flux_eval::parse::{extract_json, validate_shape};
use flux_eval::price::Price;
use flux_eval::{prompt, Api, Located, RetryPolicy};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[test]
fn extracts_the_first_balanced_object() {
    let cases = [
        (r#"{"a": 1}"#, Some(json!({"a": 1}))),
        ("```json\n{\"a\": [1, 2]}\n```", Some(json!({"a": [1, 2]}))),
        (
            "Sure! Here it is:\n```\n{\"a\": \"}{\"}\n```\nHope that helps {x}",
            Some(json!({"a": "}{"})),
        ),
        (
            "The answer is {\"a\": {\"b\": \"q\\\"}\"}} and {\"c\": 2}",
            Some(json!({"a": {"b": "q\"}"}})),
        ),
        (
            "first {not json} then {\"ok\": true}",
            Some(json!({"ok": true})),
        ),
        ("{\"a\": ", None),
        ("no json here", None),
        ("", None),
        ("}}}{{{", None),
        ("[1, 2, 3]", None),
    ];
    for (text, want) in cases {
        let got = extract_json(text);
        match &want {
            Some(v) => assert_eq!(got.as_ref().ok(), Some(v), "{text:?}: {got:?}"),
            None => assert!(got.is_err(), "{text:?} gave {got:?}"),
        }
    }
}

#[test]
fn shape_validation() {
    let t = json!({"executed_path": [{"file": "str", "line": "int"}], "count": "int", "ratio": "float",
                   "ok": "bool", "v": "any", "maybe": "int|str"});
    let good = json!({"executed_path": [{"file": "a.py", "line": 3}], "count": 2, "ratio": 1,
                      "ok": true, "v": [1], "maybe": "x", "extra": 1});
    assert_eq!(validate_shape(&t, &good), Ok(()));
    let bad = [
        (
            json!({"executed_path": [{"file": "a.py", "line": "three"}], "count": 2, "ratio": 1.0, "ok": true, "v": 1, "maybe": 1}),
            "/executed_path/0/line",
        ),
        (
            json!({"executed_path": [{"file": ["a.py"], "line": 3}], "count": 2, "ratio": 1.0, "ok": true, "v": 1, "maybe": 1}),
            "/executed_path/0/file",
        ),
        (
            json!({"executed_path": [], "count": 2.5, "ratio": 1.0, "ok": true, "v": 1, "maybe": 1}),
            "/count",
        ),
        (
            json!({"executed_path": [], "count": 2, "ratio": 1.0, "ok": "yes", "v": 1, "maybe": 1}),
            "/ok",
        ),
        (
            json!({"executed_path": {}, "count": 2, "ratio": 1.0, "ok": true, "v": 1, "maybe": 1}),
            "/executed_path",
        ),
        (
            json!({"count": 2, "ratio": 1.0, "ok": true, "v": 1, "maybe": 1}),
            "missing key \"executed_path\"",
        ),
        (
            json!({"executed_path": [], "count": 2, "ratio": 1.0, "ok": true, "v": 1, "maybe": [1]}),
            "/maybe",
        ),
    ];
    // Leaves as lenient as the scorer: stringified scalars pass.
    let lenient = json!({"executed_path": [{"file": 7, "line": "3"}], "count": "2", "ratio": "0.5",
                         "ok": "True", "v": null, "maybe": null});
    assert_eq!(validate_shape(&t, &lenient), Ok(()));
    // `{"*": T}` is a map (flux-instance's template grammar).
    let cg = json!({"call_graph": {"*": ["str"]}, "x": "int|null"});
    assert_eq!(
        validate_shape(
            &cg,
            &json!({"call_graph": {"a.f": ["b"], "g": []}, "x": null})
        ),
        Ok(())
    );
    assert!(
        validate_shape(&cg, &json!({"call_graph": {"a.f": "b"}, "x": 1}))
            .unwrap_err()
            .contains("/call_graph/a.f")
    );
    assert!(validate_shape(&cg, &json!({"call_graph": [], "x": 1})).is_err());
    for (v, want) in bad {
        let e = validate_shape(&t, &v).unwrap_err();
        assert!(e.contains(want), "{v}: {e}");
    }
}

#[test]
fn prompt_respects_the_budget_and_says_what_was_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let inst_dir = tmp.path().join("instances/big/b1");
    std::fs::create_dir_all(&inst_dir).unwrap();
    std::fs::write(
        inst_dir.join("instance.toml"),
        "id = \"b1\"\nrepository = \"big\"\nkind = \"S2_Loops\"\nquestion = \"What does pkg/a.py do?\"\ntemplate = '{\"n\": \"int\"}'\npackage = \"big==2.0\"\n[test]\nfiles = [\"t.py\"]\n[tracing]\nfiles = [\"/site-packages/pkg/b.py\"]\n",
    )
    .unwrap();
    std::fs::write(inst_dir.join("t.py"), "def test(): pass\n").unwrap();
    let src = tmp.path().join("src/big-2.0/pkg");
    std::fs::create_dir_all(&src).unwrap();
    let big: String = (0..5000)
        .map(|i| format!("x_{i} = {i}  # padding padding padding\n"))
        .collect();
    std::fs::write(src.join("b.py"), &big).unwrap();
    std::fs::write(src.join("a.py"), "A = 1\n").unwrap();
    std::fs::write(src.join("c.py"), "C = 1\n").unwrap();
    let inst = flux_score::instance::load(&inst_dir).unwrap();
    let root = Located::Dir(tmp.path().join("src/big-2.0"));
    let cfg = |source: &'static Located, tokens, reasoning| prompt::PromptConfig {
        source,
        max_context_tokens: tokens,
        reasoning,
        mode: prompt::Mode::Context,
        system: None,
    };
    let root: &'static Located = Box::leak(Box::new(root));

    // No target function is named: the targeted files are shown whole, from line 1, and the
    // notes say why.
    let p = prompt::build(&inst, &cfg(root, 10_000, false));
    assert!(
        p.user.len() <= 10_000 * prompt::CHARS_PER_TOKEN,
        "{}",
        p.user.len()
    );
    // Tracing file first, then the question's file; b.py is cut, a.py left out.
    assert!(
        p.files
            .first()
            .is_some_and(|f| f.starts_with("pkg/b.py:1-")),
        "{:?}",
        p.files
    );
    let has = |p: &prompt::Prompt, a: &str, b: &str| {
        p.notes.iter().any(|n| n.contains(a) && n.contains(b))
    };
    assert!(
        has(&p, "whole file in pkg/b.py cut", "lines 1-"),
        "{:?}",
        p.notes
    );
    assert!(has(&p, "left out", "pkg/a.py"), "{:?}", p.notes);
    assert!(
        has(&p, "no target function could be located", ""),
        "{:?}",
        p.notes
    );
    assert!(p.user.contains("## Context notes"));
    assert!(p.user.contains("def test(): pass"));
    assert!(
        p.user.contains("    1  x_0 = 0"),
        "source lines are numbered"
    );

    // With room, both targeted files are in whole; a file of the same directory that nothing
    // names is not.
    let p = prompt::build(&inst, &cfg(root, 200_000, true));
    assert_eq!(p.files, vec!["pkg/b.py:1-5000", "pkg/a.py:1"]);
    assert!(!has(&p, "cut", ""), "{:?}", p.notes);
    assert!(p.user.contains("\"reasoning\""));

    // No source: said so.
    let missing: &'static Located = Box::leak(Box::new(Located::Missing {
        path: tmp.path().join("nowhere"),
        hint: String::new(),
    }));
    let p = prompt::build(&inst, &cfg(missing, 200_000, false));
    assert!(
        p.notes.iter().any(|n| n.contains("source not available")),
        "{:?}",
        p.notes
    );
}

#[test]
fn prices() {
    let p = Price::resolve("claude-sonnet-4-20250514", None, None).unwrap();
    assert_eq!((p.input, p.output), (3.0, 15.0));
    assert_eq!(
        Price::resolve("gpt-4o-mini-2024", None, None)
            .unwrap()
            .input,
        0.15
    );
    assert_eq!(
        Price::resolve("openai/gpt-4o", None, None).unwrap().input,
        2.5
    );
    assert!(Price::resolve("mystery", None, None).is_none());
    let p = Price::resolve("mystery", Some(1.0), Some(4.0)).unwrap();
    assert!((p.cost(1_000_000, 500_000) - 3.0).abs() < 1e-12);
    assert_eq!(
        Price::resolve("gpt-4o", None, Some(1.0)).unwrap(),
        Price {
            input: 2.5,
            output: 1.0
        }
    );
}

/// A server that answers 429 with `Retry-After: 1` once, then a valid reply.
#[tokio::test]
async fn retry_after_is_honoured() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let server = tokio::spawn(async move {
        for i in 0..2 {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let mut got = Vec::new();
            // Read until the body (announced by content-length) is complete.
            loop {
                let n = s.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some(h) = text.find("\r\n\r\n") {
                    let len: usize = text[..h]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if got.len() >= h + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let resp = if i == 0 {
                "HTTP/1.1 429 Too Many\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string()
            } else {
                let body = json!({"choices": [{"message": {"content": "{\"n\": 1}"}}], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}).to_string();
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len())
            };
            s.write_all(resp.as_bytes()).await.unwrap();
            let _ = s.shutdown().await;
        }
    });
    let retry = RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_secs(5),
    };
    let c = ChatClient::new(
        Api::OpenAi,
        &url,
        "m",
        Some("k".into()),
        100,
        Duration::from_secs(10),
        retry,
    )
    .unwrap();
    let t0 = Instant::now();
    let r = c
        .complete(
            "sys",
            &[Message {
                role: "user",
                content: "hi".into(),
            }],
        )
        .await
        .unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(950),
        "waited {:?}",
        t0.elapsed()
    );
    assert_eq!(
        (r.text.as_str(), r.tokens_in, r.tokens_out, r.retries),
        ("{\"n\": 1}", 5, 1, 1)
    );
    server.await.unwrap();
}

#[test]
fn api_key_is_redacted_in_debug() {
    let c = ChatClient::new(
        Api::Anthropic,
        "http://x",
        "m",
        Some("sk-very-secret".into()),
        1,
        Duration::from_secs(1),
        RetryPolicy::default(),
    )
    .unwrap();
    assert!(!format!("{c:?}").contains("sk-very-secret"));
    let mut o = flux_eval::EvalOptions::new("m", Api::OpenAi, "http://x");
    o.api_key = Some("sk-very-secret".into());
    assert!(!format!("{o:?}").contains("sk-very-secret"));
}

#[test]
fn static_baseline_finds_methods_by_qualname_and_skips_docstrings() {
    use flux_eval::solvers::{called_names, find_function};
    let src = r#"class Mul:
    def flatten(self, seq):
        return seq

class Add(Expr):
    """Sum."""

    @classmethod
    def flatten(cls,
                seq):
        """Flatten.

        Long docstring with f(x) in it.
        """
        terms = {}  # a comment with g(y)
        for o in seq:
            terms[o] = cls._coeff(o)

        return sorted(terms), "h(z)"

def flatten(x):
    return x
"#;
    let f = find_function("sympy/core/add.py", src, "Add.flatten").unwrap();
    assert_eq!(f.def_line, 9);
    let lines: Vec<usize> = f.body.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, vec![15, 16, 17, 19]);
    assert_eq!(called_names(&f), vec!["cls._coeff", "sorted"]);
    assert_eq!(
        find_function("m.py", src, "Mul.flatten").unwrap().def_line,
        2
    );
    assert_eq!(
        find_function("m.py", src, "flatten").unwrap().def_line,
        2,
        "first def anywhere"
    );
    assert_eq!(
        find_function("m.py", src, "Nope.flatten").unwrap().def_line,
        2,
        "falls back to the last component"
    );
    assert!(find_function("m.py", src, "missing").is_none());
}

#[test]
fn tracing_globs_resolve_to_files() {
    let files: Vec<String> = [
        "sympy/core/add.py",
        "sympy/core/mul.py",
        "sympy/core/tests/test_add.py",
        "sympy/abc.py",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(prompt::resolve_all("*/sympy/core/*.py", &files).len(), 3);
    assert_eq!(
        prompt::resolve_all("sympy/core/a*.py", &files),
        vec!["sympy/core/add.py"]
    );
    assert_eq!(
        prompt::resolve_all("/usr/lib/python3.11/site-packages/sympy/abc.py", &files),
        vec!["sympy/abc.py"]
    );
    assert_eq!(
        prompt::resolve_all("core/mul.py", &files),
        vec!["sympy/core/mul.py"]
    );
    assert!(prompt::resolve_all("ore/mul.py", &files).is_empty());
}

/// The static baseline answered generated instances in shapes that could never be right:
/// per-test rows empty, callees unfiltered (`list`, `lines.append`) and unqualified where the
/// question counts only functions defined under `within` and names them by qualname, and no
/// comprehension frames. Now: a row per test the question names, calls resolved to
/// definitions under `within` by qualname, comprehensions and lambdas as `f.<locals>.<…>`.
#[test]
fn static_baseline_answers_generated_questions_in_their_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("pkg")).unwrap();
    std::fs::write(
        src.join("pkg/core.py"),
        r#"from .util import helper


class Box:
    def __init__(self, items):
        self.items = list(items)
        self.check()
        names = [str(i) for i in self.items]
        total = sum(x for x in self.items)
        self.items.sort(key=lambda v: -v)
        helper(names, {k: 1 for k in names})

    def check(self):
        return True
"#,
    )
    .unwrap();
    std::fs::write(src.join("pkg/util.py"), "def helper(a, b):\n    return a\n").unwrap();
    let d = tmp.path().join("inst/pkg/box-m6");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("instance.toml"),
        r#"id = "box-m6"
repository = "pkg"
kind = "M6_InterProceduralCFG"
package = "pkg==1.0"
question = "Run `tests/test_box.py::test_a` and `tests/test_box.py::test_b`. Which functions does `Box.__init__` call?"
template = '{"callees_per_test": [{"test": "str", "callees": ["str"]}], "call_sequence": [{"function": "str", "line": "int"}]}'
[tracing]
files = ["pkg/core.py"]
functions = ["Box.__init__"]
[extractor]
name = "callees_across_tests"
[extractor.params]
file = "pkg/core.py"
function = "Box.__init__"
within = "pkg/"
"#,
    )
    .unwrap();
    let inst = flux_score::instance::load(&d).unwrap();
    let a = flux_eval::solvers::static_baseline_answer(&inst, Some(&src));
    let callees = json!([
        "Box.__init__.<locals>.<dictcomp>",
        "Box.__init__.<locals>.<genexpr>",
        "Box.__init__.<locals>.<lambda>",
        "Box.__init__.<locals>.<listcomp>",
        "Box.check",
        "helper"
    ]);
    assert_eq!(
        a["callees_per_test"],
        json!([
            {"test": "tests/test_box.py::test_a", "callees": callees},
            {"test": "tests/test_box.py::test_b", "callees": callees},
        ]),
        "{a}"
    );
    let seq: Vec<(i64, &str)> = a["call_sequence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["line"].as_i64().unwrap(), c["function"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seq,
        [
            (7, "Box.check"),
            (8, "Box.__init__.<locals>.<listcomp>"),
            (9, "Box.__init__.<locals>.<genexpr>"),
            (10, "Box.__init__.<locals>.<lambda>"),
            (11, "helper"),
            (11, "Box.__init__.<locals>.<dictcomp>"),
        ]
    );
    assert_eq!(
        flux_eval::solvers::nested_scopes("f([a for a in b], {k: v for k in c}, {s for s in d})"),
        ["<listcomp>", "<dictcomp>", "<setcomp>"]
    );
    assert_eq!(
        flux_eval::solvers::nested_scopes("for x in (y for y in z): g(lambda q: {q: 1})"),
        ["<genexpr>", "<lambda>"]
    );
}
