//! The `flux` binary end to end on hand-made instances (and, for the prompts eval sends, a
//! seeded sample of the committed sets): eval → score, score formats, export layouts, bad
//! input. No Docker, no eBPF: every test runs the real binary in a fresh temporary directory
//! and compares what it wrote or printed with what is expected, showing a line diff when they
//! differ.
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

// ---------------------------------------------------------------------------------------------
// Harness

static N: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory `<tmp>/flux-cli-<pid>-<n>`, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let d = std::env::temp_dir().join(format!(
            "flux-cli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel))
            .unwrap_or_else(|e| panic!("reading {rel}: {e}\nfiles:\n{}", self.tree()))
    }

    fn json(&self, rel: &str) -> Value {
        serde_json::from_str(&self.read(rel)).unwrap_or_else(|e| panic!("{rel}: not JSON: {e}"))
    }

    /// Every file under the scratch directory, relative, sorted (for failure messages).
    fn tree(&self) -> String {
        fn walk(root: &Path, d: &Path, out: &mut Vec<String>) {
            let Ok(rd) = std::fs::read_dir(d) else { return };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    out.push(p.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let mut v = Vec::new();
        walk(&self.0, &self.0, &mut v);
        v.sort();
        v.join("\n")
    }

    /// Files under `rel`, relative to it, sorted.
    fn files_under(&self, rel: &str) -> Vec<String> {
        let prefix = format!("{rel}/");
        self.tree()
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
            .collect()
    }

    /// Run `flux ARGS` in the scratch directory.
    fn flux(&self, args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_flux"))
            .args(args)
            .current_dir(&self.0)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("FLUX_CACHE")
            .output()
            .expect("run flux");
        Run {
            args: args.join(" "),
            out,
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Run {
    args: String,
    out: Output,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn describe(&self) -> String {
        format!(
            "flux {}\nexit: {:?}\n--- stdout\n{}--- stderr\n{}---",
            self.args,
            self.out.status.code(),
            self.stdout(),
            self.stderr()
        )
    }
    /// Assert the exit code and return self.
    fn code(self, expected: i32) -> Run {
        assert_eq!(
            self.out.status.code(),
            Some(expected),
            "expected exit code {expected}\n{}",
            self.describe()
        );
        self
    }
    fn ok(self) -> Run {
        self.code(0)
    }
    fn stderr_has(self, needles: &[&str]) -> Run {
        let err = self.stderr();
        for n in needles {
            assert!(err.contains(n), "stderr lacks {n:?}\n{}", self.describe());
        }
        self
    }
    fn stdout_json(&self) -> Value {
        serde_json::from_str(&self.stdout())
            .unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", self.describe()))
    }
}

/// A line diff (longest common subsequence): `-` expected only, `+` got only.
fn diff(expected: &str, got: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = got.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out += &format!("  {}\n", a[i]);
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out += &format!("- {}\n", a[i]);
            i += 1;
        } else {
            out += &format!("+ {}\n", b[j]);
            j += 1;
        }
    }
    out
}

#[track_caller]
fn assert_text(what: &str, expected: &str, got: &str) {
    if expected != got {
        panic!(
            "{what} differs (- expected, + got):\n{}",
            diff(expected, got)
        );
    }
}

#[track_caller]
fn assert_json(what: &str, expected: &Value, got: &Value) {
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap();
    assert_text(what, &pretty(expected), &pretty(got));
}

// ---------------------------------------------------------------------------------------------
// Instances

/// `instance.toml` of an instance `<repo>/<id>` (valid per instances/README.md).
#[expect(
    clippy::too_many_arguments,
    reason = "one argument per field of the template that the tests vary"
)]
fn instance_toml(
    repo: &str,
    id: &str,
    kind: &str,
    template: &str,
    order_insensitive: &str,
    files: &str,
    command: &str,
    extractor: &str,
) -> String {
    format!(
        r#"id = "{id}"
repository = "{repo}"
package = "{repo}==1.0"
image = "flux/{repo}:1.0-py3.11"
interpreter = "/usr/bin/python3.11"
kind = "{kind}"
question = """
A hand-made question about {id}.
"""
template = '{template}'
order_insensitive = {order_insensitive}

[test]
files = {files}
command = {command}
expect = "pass"

[tracing]
files = ["{repo}/core.py"]

[extractor]
{extractor}
"#
    )
}

fn oracle_json(kind: &str, template: &str, answer: Value, extractor: &str) -> String {
    let o = json!({
        "question_kind": kind,
        "question": "A hand-made question.",
        "template_answer": serde_json::from_str::<Value>(template).unwrap(),
        "oracle_answer": answer,
        "provenance": {
            "image": "flux/demo:1.0-py3.11",
            "interpreter": "3.11.2",
            "flux_version": "0.1.0",
            "trace_sha256": "00",
            "harvested_at": "2026-11-29T09:00:00Z",
            "complete": true,
            "labels": [],
            "extractor": extractor,
            "params": {},
            "order_insensitive": []
        }
    });
    serde_json::to_string_pretty(&o).unwrap()
}

const LOOP_T: &str = r#"{"loop_iteration_count": "int"}"#;
const PATH_T: &str = r#"{"executed_path": [{"line": "int"}]}"#;
const GRAPH_T: &str = r#"{"call_graph": {"*": ["str"]}}"#;

/// The store used by most tests:
/// * `demo/demo-loop` (S2, with a harvested callgraph.json),
/// * `demo/demo-path` (S1, two test files, one in a subdirectory),
/// * `other/other-graph` (S6 `call_graph`, no callgraph.json),
/// * `demo/demo-unharvested` (no oracle.json).
fn store(s: &Scratch) {
    s.write(
        "instances/demo/demo-loop/instance.toml",
        &instance_toml(
            "demo",
            "demo-loop",
            "S2_Loops",
            LOOP_T,
            "[]",
            r#"["test_loop.py"]"#,
            r#"["python3.11", "-m", "pytest", "-q", "test_loop.py"]"#,
            r#"name = "loop_iterations"
params = { function = "count", header = 3, body_end = 4 }"#,
        ),
    );
    s.write(
        "instances/demo/demo-loop/test_loop.py",
        "def test_loop():\n    assert True\n",
    );
    s.write(
        "instances/demo/demo-loop/oracle.json",
        &oracle_json(
            "S2_Loops",
            LOOP_T,
            json!({"loop_iteration_count": 5}),
            "loop_iterations",
        ),
    );
    s.write(
        "instances/demo/demo-loop/callgraph.json",
        r#"{"demo.core.count": ["demo.core.step", "demo.core.tick"], "demo.core.step": []}"#,
    );

    s.write(
        "instances/demo/demo-path/instance.toml",
        &instance_toml(
            "demo",
            "demo-path",
            "S1_IntraProceduralCFG",
            PATH_T,
            "[]",
            r#"["test_path.py", "helpers/conftest.py"]"#,
            r#"["python3.11", "-m", "pytest", "-q", "test_path.py::test_walk"]"#,
            r#"name = "executed_path"
params = { function = "walk" }"#,
        ),
    );
    s.write(
        "instances/demo/demo-path/test_path.py",
        "def test_walk():\n    pass\n",
    );
    s.write("instances/demo/demo-path/helpers/conftest.py", "# helper\n");
    s.write(
        "instances/demo/demo-path/oracle.json",
        &oracle_json(
            "S1_IntraProceduralCFG",
            PATH_T,
            json!({"executed_path": [{"line": 10}, {"line": 11}, {"line": 13}]}),
            "executed_path",
        ),
    );

    s.write(
        "instances/other/other-graph/instance.toml",
        &instance_toml(
            "other",
            "other-graph",
            "S6_InterProceduralCFG",
            GRAPH_T,
            "[]",
            r#"["test_graph.py"]"#,
            r#"["python3.11", "-m", "pytest", "test_graph.py"]"#,
            r#"name = "call_graph"
params = { within = "other/", qualify = "module" }"#,
        ),
    );
    s.write(
        "instances/other/other-graph/test_graph.py",
        "def test_graph():\n    pass\n",
    );
    s.write(
        "instances/other/other-graph/oracle.json",
        &oracle_json(
            "S6_InterProceduralCFG",
            GRAPH_T,
            json!({"call_graph": {"other.core.main": ["other.core.a", "other.core.b"]}}),
            "call_graph",
        ),
    );

    s.write(
        "instances/demo/demo-unharvested/instance.toml",
        &instance_toml(
            "demo",
            "demo-unharvested",
            "S2_Loops",
            LOOP_T,
            "[]",
            r#"["test_u.py"]"#,
            r#"["python3.11", "-m", "pytest", "test_u.py"]"#,
            r#"name = "loop_iterations"
params = { function = "count", header = 3, body_end = 4 }"#,
        ),
    );
    s.write(
        "instances/demo/demo-unharvested/test_u.py",
        "def test_u():\n    pass\n",
    );
}

/// Break `demo/demo-loop`'s instance.toml with a misspelt `[test]` field.
fn break_demo_loop(s: &Scratch) {
    let p = "instances/demo/demo-loop/instance.toml";
    let text = s
        .read(p)
        .replace("files = [\"test_loop.py\"]", "fles = [\"test_loop.py\"]");
    s.write(p, &text);
}

/// (id, status, reason) of every instance of a JSON score report, one per line.
fn verdicts(report: &Value) -> String {
    report["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{} {} {}",
                i["id"].as_str().unwrap(),
                i["status"].as_str().unwrap(),
                i["reason"].as_str().unwrap_or("-")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------------
// eval → score

#[test]
fn oracle_answers_score_1() {
    let s = Scratch::new();
    store(&s);
    let run = s.flux(&["eval", "--model", "oracle", "--quiet"]).ok();
    assert!(
        run.stdout().contains("answers in answers/oracle"),
        "{}",
        run.describe()
    );
    assert_eq!(
        s.files_under("answers/oracle"),
        [
            "demo/demo-loop/answer.json",
            "demo/demo-loop/meta.json",
            "demo/demo-path/answer.json",
            "demo/demo-path/meta.json",
            "other/other-graph/answer.json",
            "other/other-graph/meta.json",
            "summary.json",
        ],
        "{}",
        s.tree()
    );
    let r = s
        .flux(&["score", "--answers", "answers/oracle", "--format", "json"])
        .ok()
        .stdout_json();
    let got = json!({
        "accuracy": r["accuracy"], "total": r["total"], "passed": r["passed"],
        "not_harvested": r["not_harvested"], "invalid_instances": r["invalid_instances"],
    });
    let expected = json!({
        "accuracy": 1.0, "total": 3, "passed": 3, "not_harvested": 1, "invalid_instances": [],
    });
    assert_json("score of the oracle's answers", &expected, &got);
}

#[test]
fn wrong_answers_score_below_1_with_reasons() {
    let s = Scratch::new();
    store(&s);
    s.write(
        "answers/m/demo/demo-loop/answer.json",
        r#"{"loop_iteration_count": 4}"#,
    );
    s.write(
        "answers/m/demo/demo-path/answer.json",
        r#"{"executed_path": [{"line": 10}, {"line": 11}, {"line": 13}]}"#,
    );
    // other/other-graph: no answer at all.
    let run = s
        .flux(&[
            "score",
            "--answers",
            "answers/m",
            "--instances",
            "instances",
            "--format",
            "json",
        ])
        .ok();
    let r = run.stdout_json();
    assert!(
        (r["accuracy"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9,
        "{}",
        run.describe()
    );
    let v = verdicts(&r);
    for (line, needles) in v.lines().zip([
        &["demo-loop fail", "5", "4"][..],
        &["demo-path pass -"][..],
        &["demo-unharvested not_harvested"][..],
        &["other-graph fail no answer"][..],
    ]) {
        for n in needles {
            assert!(
                line.contains(n),
                "verdict line {line:?} lacks {n:?}; all verdicts:\n{v}"
            );
        }
    }
    assert_eq!(v.lines().count(), 4, "verdicts:\n{v}");
}

#[test]
fn text_report_on_stdout() {
    let s = Scratch::new();
    store(&s);
    s.flux(&["eval", "--model", "oracle", "--quiet"]).ok();
    let run = s.flux(&["score", "--answers", "answers/oracle"]).ok();
    assert!(run.stdout().contains("100"), "{}", run.describe());
}

#[test]
fn html_report_is_one_file_with_svg() {
    let s = Scratch::new();
    store(&s);
    s.flux(&["eval", "--model", "oracle", "--quiet"]).ok();
    let run = s
        .flux(&[
            "score",
            "--answers",
            "answers/oracle",
            "--format",
            "html",
            "--out",
            "reports/score.html",
        ])
        .ok()
        .stderr_has(&["report written to reports/score.html", "3/3 passed"]);
    assert_eq!(
        run.stdout(),
        "",
        "the report goes to the file\n{}",
        run.describe()
    );
    let html = s.read("reports/score.html");
    assert!(html.contains("<svg"), "no <svg in the report:\n{html}");
    for external in ["<script src=", "<link ", "src=\"http"] {
        assert!(
            !html.contains(external),
            "not self-contained ({external}):\n{html}"
        );
    }
}

#[test]
fn validate_writes_to_validation_model_by_default() {
    let s = Scratch::new();
    store(&s);
    let run = s.flux(&["validate", "--model", "oracle", "--quiet"]).ok();
    assert!(run.stdout().contains("3/3 passed"), "{}", run.describe());
    let v = s.json("validation/oracle/validation.json");
    assert_json("validation review", &json!([]), &v["review"]);
    assert!(
        s.path("validation/oracle/validation.txt").is_file(),
        "{}",
        s.tree()
    );
}

#[test]
fn eval_of_a_model_without_key_fails_without_printing_keys() {
    let s = Scratch::new();
    store(&s);
    sources(&s);
    // The vendor's own URL (the default) needs a key.
    s.flux(&["eval", "--model", "gpt-test", "--api", "openai"])
        .code(2)
        .stderr_has(&["OPENAI_API_KEY"]);
    s.flux(&["eval", "--model", "claude-x", "--api", "anthropic"])
        .code(2)
        .stderr_has(&["ANTHROPIC_API_KEY"]);
}

/// The package sources of the store's instances where `flux images source` unpacks them:
/// `.flux-cache/src/<name>-<version>/` (found as the nearest `.flux-cache` above the cwd).
fn sources(s: &Scratch) {
    for repo in ["demo", "other"] {
        s.write(
            &format!(".flux-cache/src/{repo}-1.0/{repo}/core.py"),
            "def count(n):\n    for i in range(n):\n        step(i)\n\ndef step(i):\n    return i\n",
        );
    }
}

#[test]
fn eval_without_source_fails_naming_the_path_and_the_build_command() {
    let s = Scratch::new();
    store(&s);
    let run = s
        .flux(&["eval", "--model", "static-baseline", "--quiet"])
        .code(2)
        .stderr_has(&[
            ".flux-cache/src/demo-1.0 does not exist",
            "`flux images source flux/demo:1.0-py3.11` unpacks it into the cache",
            "--cache DIR or FLUX_CACHE=DIR names another cache",
            "--no-source",
        ]);
    // No cache here or above: the one it falls back to is new, and said so. (A `.flux-cache` in
    // the temporary directory or above it, left by something else run there, is found instead:
    // then there is nothing to note, and the test says why it does not look.)
    match s
        .0
        .ancestors()
        .skip(1)
        .find(|d| d.join(".flux-cache").is_dir())
    {
        None => {
            run.stderr_has(&["flux: note: no cache found"]);
        }
        Some(d) => eprintln!(
            "not checking the no-cache note: {} has a .flux-cache, which flux rightly uses",
            d.display()
        ),
    }
    // --cache names another cache; the message follows it.
    s.flux(&[
        "eval",
        "--model",
        "static-baseline",
        "--quiet",
        "--cache",
        "elsewhere",
    ])
    .code(2)
    .stderr_has(&["elsewhere/src/demo-1.0 does not exist"]);
    // On purpose, without source; and with the source in place.
    s.flux(&[
        "eval",
        "--model",
        "static-baseline",
        "--quiet",
        "--no-source",
    ])
    .ok();
    sources(&s);
    s.flux(&["eval", "--model", "static-baseline", "--quiet", "--force"])
        .ok();
    let m = s.json("answers/static-baseline/demo/demo-loop/meta.json");
    assert!(
        m["source"]
            .as_str()
            .unwrap_or("")
            .ends_with(".flux-cache/src/demo-1.0"),
        "{m:#}"
    );
}

/// A fake OpenAI-compatible endpoint on 127.0.0.1: answers each chat completion from the
/// instance named in the prompt (`Instance: <key>`) and records the requests' first lines and
/// `authorization` headers.
struct FakeApi {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

fn fake_openai(answers: &'static [(&'static str, &'static str)]) -> FakeApi {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let all_bodies = bodies.clone();
    std::thread::spawn(move || {
        for sock in l.incoming() {
            let Ok(mut sock) = sock else { return };
            let log = log.clone();
            let bodies = all_bodies.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 8192];
                let head_end = loop {
                    let Ok(n) = sock.read(&mut tmp) else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let header = |name: &str| {
                    head.lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                        })
                        .unwrap_or_default()
                };
                let len: usize = header("content-length").parse().unwrap_or(0);
                while buf.len() < head_end + len {
                    match sock.read(&mut tmp) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                    }
                }
                let body = String::from_utf8_lossy(&buf[head_end..]).into_owned();
                let first = head.lines().next().unwrap_or("").to_string();
                log.lock().unwrap().push((first, header("authorization")));
                bodies.lock().unwrap().push(body.clone());
                let content = answers
                    .iter()
                    .find(|(key, _)| body.contains(&format!("Instance: {key} ")))
                    .map(|(_, a)| *a)
                    .unwrap_or("I do not know.");
                // `!500`: the server fails with that status.
                let (status, payload) = match content.strip_prefix('!') {
                    Some(code) => (code.to_string(), "server trouble".to_string()),
                    None => (
                        "200".to_string(),
                        json!({
                            "choices": [{"message": {"role": "assistant", "content": content}}],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 10}
                        })
                        .to_string(),
                    ),
                };
                let resp = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
                    payload.len()
                );
                let _ = sock.write_all(resp.as_bytes());
            });
        }
    });
    FakeApi { url, seen, bodies }
}

#[test]
fn eval_through_an_openai_endpoint_uses_the_key_from_env_and_never_shows_it() {
    const KEY: &str = "sk-flux-test-0123456789-SECRET";
    let api = fake_openai(&[
        (
            "demo/demo-loop",
            "```json\n{\"loop_iteration_count\": 4}\n```",
        ),
        (
            "demo/demo-path",
            r#"{"executed_path": [{"line": 10}, {"line": 11}, {"line": 13}]}"#,
        ),
        (
            "other/other-graph",
            r#"{"call_graph": {"other.core.main": ["other.core.a", "other.core.b"]}}"#,
        ),
    ]);
    let s = Scratch::new();
    store(&s);
    sources(&s);
    let out = Command::new(env!("CARGO_BIN_EXE_flux"))
        .args([
            "eval",
            "--model",
            "test-model",
            "--api",
            "openai",
            "--base-url",
            &api.url,
        ])
        .args(["--price-in", "1", "--price-out", "2", "--concurrency", "2"])
        .current_dir(&s.0)
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    let run = Run {
        args: "eval --model test-model …".into(),
        out,
    }
    .ok();
    for n in ["3 answered now", "score of answers/test-model: 2/3 passed"] {
        assert!(
            run.stdout().contains(n),
            "stdout lacks {n:?}\n{}",
            run.describe()
        );
    }
    let seen = api.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "requests: {seen:?}");
    for (first, auth) in &seen {
        assert_eq!(first, "POST /v1/chat/completions HTTP/1.1");
        assert_eq!(auth, &format!("Bearer {KEY}"));
    }
    let summary = s.json("answers/test-model/summary.json");
    let cost = summary["cost"].as_f64().unwrap_or(-1.0);
    assert!(
        (cost - 3.0 * (100.0 * 1.0 + 10.0 * 2.0) / 1e6).abs() < 1e-12,
        "{summary:#}"
    );
    assert!(
        !run.stdout().contains(KEY) && !run.stderr().contains(KEY),
        "{}",
        run.describe()
    );
    for f in s.files_under("answers/test-model") {
        let text = s.read(&format!("answers/test-model/{f}"));
        assert!(
            !text.contains(KEY),
            "the API key is in answers/test-model/{f}"
        );
    }
}

/// 14.4: answers that are still infrastructure errors after retries make the run fail; the
/// same command again retries only those and succeeds. A local server needs no key.
#[test]
fn eval_exits_non_zero_while_any_answer_is_an_infrastructure_error() {
    let down = fake_openai(&[
        ("demo/demo-loop", "!500"),
        ("demo/demo-path", r#"{"executed_path": [{"line": 10}]}"#),
        ("other/other-graph", r#"{"call_graph": {}}"#),
    ]);
    let s = Scratch::new();
    store(&s);
    sources(&s);
    let args = |url: &str| {
        vec![
            "eval".to_string(),
            "--model".into(),
            "local".into(),
            "--base-url".into(),
            url.to_string(),
            "--retries".into(),
            "1".into(),
            "--backoff".into(),
            "0".into(),
            "--quiet".into(),
        ]
    };
    let a = args(&down.url);
    let run = s.flux(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let run = run
        .code(1)
        .stderr_has(&["1 answer(s) still an infrastructure error after retries"]);
    assert!(
        run.stdout()
            .contains("infra error (after retries): demo/demo-loop: HTTP 500"),
        "{}",
        run.describe()
    );
    // First try + one retry for the failing instance, one request for each other.
    assert_eq!(down.seen.lock().unwrap().len(), 4);
    assert!(
        down.seen
            .lock()
            .unwrap()
            .iter()
            .all(|(_, auth)| auth.is_empty()),
        "no key sent"
    );
    // The targeted source went with the question.
    let bodies = down.bodies.lock().unwrap().clone();
    assert!(
        bodies.iter().all(|b| b.contains("def count(n):")),
        "{bodies:?}"
    );
    let t = s.json("answers/local/demo/demo-loop/transcript.json");
    assert_eq!(
        t["samples"][0]["attempts"][0]["http"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    let up = fake_openai(&[("demo/demo-loop", r#"{"loop_iteration_count": 5}"#)]);
    let a = args(&up.url);
    s.flux(&a.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    assert_eq!(
        up.seen.lock().unwrap().len(),
        1,
        "only the failed one is asked again"
    );
}

// ---------------------------------------------------------------------------------------------
// export

#[test]
fn export_swe_flux_layout() {
    let s = Scratch::new();
    store(&s);
    s.flux(&["export", "--format", "swe-flux", "out"])
        .ok()
        .stderr_has(&["skipped", "demo-unharvested", "not harvested"]);
    assert_text(
        "exported files",
        "demo_qa/demo-loop/eval.sh
demo_qa/demo-loop/files/testcase.py
demo_qa/demo-loop/flux/callgraph.json
demo_qa/demo-loop/flux/instance.toml
demo_qa/demo-loop/flux/oracle.json
demo_qa/demo-loop/oracle.json
demo_qa/demo-loop/question.json
demo_qa/demo-path/eval.sh
demo_qa/demo-path/files/helpers/conftest.py
demo_qa/demo-path/files/testcase.py
demo_qa/demo-path/flux/instance.toml
demo_qa/demo-path/flux/oracle.json
demo_qa/demo-path/oracle.json
demo_qa/demo-path/question.json
other_qa/other-graph/eval.sh
other_qa/other-graph/files/testcase.py
other_qa/other-graph/flux/instance.toml
other_qa/other-graph/flux/oracle.json
other_qa/other-graph/oracle.json
other_qa/other-graph/question.json",
        &s.files_under("out").join("\n"),
    );
    assert_json(
        "oracle.json",
        &json!({
            "question_kind": "S2_Loops",
            "question": "A hand-made question about demo-loop.",
            "template_answer": {"loop_iteration_count": "int"},
            "oracle_answer": {"loop_iteration_count": 5},
        }),
        &s.json("out/demo_qa/demo-loop/oracle.json"),
    );
    assert_json(
        "question.json",
        &json!({
            "question_kind": "S2_Loops",
            "question": "A hand-made question about demo-loop.",
            "template_answer": {"loop_iteration_count": "int"},
        }),
        &s.json("out/demo_qa/demo-loop/question.json"),
    );
    assert_text(
        "testcase.py",
        "def test_walk():\n    pass\n",
        &s.read("out/demo_qa/demo-path/files/testcase.py"),
    );
    let eval = s.read("out/demo_qa/demo-path/eval.sh");
    let last = eval.lines().last().unwrap_or("");
    assert_text(
        "eval.sh command",
        "python3.11 -m pytest -q demo_qa/demo-path/files/testcase.py::test_walk",
        last,
    );
    assert!(eval.starts_with("#!/bin/bash\n"), "{eval}");
    assert!(
        eval.contains("TEST_ID=demo_qa/demo-path/files/testcase.py\n"),
        "{eval}"
    );
}

#[test]
fn export_traceeval_layout() {
    let s = Scratch::new();
    store(&s);
    s.flux(&[
        "export",
        "--format",
        "traceeval",
        "--instances",
        "instances",
        "te",
    ])
    .ok()
    .stderr_has(&[
        "demo-path: no call graph",
        "demo-unharvested: not harvested",
    ]);
    assert_text(
        "exported files",
        "demo/demo-loop/callgraph.json\nother/other-graph/callgraph.json\nsplits.json",
        &s.files_under("te").join("\n"),
    );
    assert_json(
        "splits.json",
        &json!({"python": ["demo/demo-loop", "other/other-graph"]}),
        &s.json("te/splits.json"),
    );
    assert_json(
        "harvested callgraph.json",
        &json!({"demo.core.count": ["demo.core.step", "demo.core.tick"], "demo.core.step": []}),
        &s.json("te/demo/demo-loop/callgraph.json"),
    );
    assert_json(
        "callgraph.json from a call_graph oracle",
        &json!({"other.core.main": ["other.core.a", "other.core.b"]}),
        &s.json("te/other/other-graph/callgraph.json"),
    );
}

// ---------------------------------------------------------------------------------------------
// bad input

/// 14.6: the committed instances and variants as a Hugging Face dataset: one JSONL and one
/// Parquet file per split, every row the same columns, gold as JSON text equal to the harvested
/// answer, and a card whose YAML header names each split's file and size (24.5: with the
/// `num_bytes` `datasets` requires of each split, else it calls the `splits` malformed).
#[test]
fn export_hf_dataset_keeps_splits_and_writes_a_card() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let s = Scratch::new();
    let (inst, var) = (root.join("instances"), root.join("variants"));
    let run = s
        .flux(&[
            "export",
            "--format",
            "hf",
            "--no-source",
            "--instances",
            inst.to_str().unwrap(),
            "--instances",
            var.to_str().unwrap(),
            "ds",
        ])
        .ok();
    let count = |dir: &Path| {
        let mut n = 0;
        for repo in std::fs::read_dir(dir).unwrap().flatten() {
            for i in std::fs::read_dir(repo.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                n += usize::from(i.path().join("oracle.json").is_file());
            }
        }
        n
    };
    let (n_test, n_var) = (count(&inst), count(&var));
    assert!(n_test >= 30 && n_var >= 30, "{n_test} {n_var}");
    assert!(
        run.stdout()
            .contains(&format!("test {n_test}, variants {n_var}")),
        "{}",
        run.describe()
    );
    let features: Vec<&str> = flux_interop::hf::COLUMNS.iter().map(|c| c.0).collect();
    for (split, n, dir) in [("test", n_test, &inst), ("variants", n_var, &var)] {
        let text = s.read(&format!("ds/data/{split}.jsonl"));
        let rows: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), n, "{split}");
        for r in &rows {
            let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
            let mut want = features.to_vec();
            want.sort();
            let mut got = keys.clone();
            got.sort();
            assert_eq!(got, want, "{split} row columns");
            let oracle: Value = serde_json::from_str(
                &std::fs::read_to_string(
                    dir.join(r["repository"].as_str().unwrap())
                        .join(r["id"].as_str().unwrap())
                        .join("oracle.json"),
                )
                .unwrap(),
            )
            .unwrap();
            let gold: Value = serde_json::from_str(r["gold"].as_str().unwrap()).unwrap();
            assert_eq!(gold, oracle["oracle_answer"], "{}", r["id"]);
            assert_eq!(r["variant_of"].is_null(), split == "test");
            // The starters' tests are in their directories: the prompt shows them.
            assert!(!r["test_source"].as_str().unwrap().is_empty());
            assert!(r["prompt"]
                .as_str()
                .unwrap()
                .contains(r["question"].as_str().unwrap()));
        }
    }
    let card = s.read("ds/README.md");
    assert!(card.starts_with("---\n"), "{card}");
    let header = card.split("\n---\n").next().unwrap();
    for needle in [
        "configs:\n- config_name: default\n  data_files:\n",
        "  - split: test\n    path: data/test.parquet\n",
        "  - split: variants\n    path: data/variants.parquet\n",
        &format!("    num_examples: {n_test}\n"),
        "  - name: test\n    num_bytes: ",
        "task_categories:",
        "  - name: gold\n    dtype: string\n",
    ] {
        assert!(
            header.contains(needle),
            "card header lacks {needle:?}:\n{header}"
        );
    }
    assert!(card.contains("## Fields") && card.contains("## Scoring"));
    assert!(card.contains("## Citation") && card.contains("## Repositories"));
    for split in ["test", "variants"] {
        let pq = std::fs::read(s.path(&format!("ds/data/{split}.parquet"))).unwrap();
        assert!(
            pq.starts_with(b"PAR1") && pq.ends_with(b"PAR1"),
            "{split}.parquet"
        );
    }
}

#[test]
fn score_with_missing_answers_dir_fails_naming_it() {
    let s = Scratch::new();
    store(&s);
    s.flux(&["score", "--answers", "no-such-answers"])
        .code(2)
        .stderr_has(&["no-such-answers", "no such directory"]);
}

#[test]
fn missing_instances_root_fails_naming_it() {
    let s = Scratch::new();
    s.write("answers/x/.keep", "");
    s.flux(&["score", "--answers", "answers/x", "--instances", "nowhere"])
        .code(2)
        .stderr_has(&["nowhere"]);
    s.flux(&["eval", "--model", "oracle", "--instances", "nowhere"])
        .code(2)
        .stderr_has(&["nowhere"]);
    s.flux(&[
        "export",
        "--format",
        "swe-flux",
        "--instances",
        "nowhere",
        "out",
    ])
    .code(2)
    .stderr_has(&["nowhere"]);
}

#[test]
fn malformed_instance_fails_export_after_exporting_the_rest() {
    let s = Scratch::new();
    store(&s);
    break_demo_loop(&s);
    s.flux(&["export", "--format", "swe-flux", "out"])
        .code(1)
        .stderr_has(&["instances/demo/demo-loop/instance.toml", "test.fles"]);
    let dirs: Vec<String> = s
        .files_under("out")
        .iter()
        .filter_map(|f| f.strip_suffix("/oracle.json").map(str::to_string))
        .filter(|d| !d.ends_with("/flux"))
        .collect();
    assert_eq!(
        dirs,
        ["demo_qa/demo-path", "other_qa/other-graph"],
        "{}",
        s.tree()
    );
}

#[test]
fn malformed_instance_fails_score_naming_the_file() {
    let s = Scratch::new();
    store(&s);
    s.flux(&["eval", "--model", "oracle", "--quiet"]).ok();
    s.write(
        "instances/demo/demo-loop/instance.toml",
        "id = \"demo-loop\"\nkind = [\n",
    );
    let run = s
        .flux(&["score", "--answers", "answers/oracle", "--format", "json"])
        .code(1)
        .stderr_has(&["invalid instance", "instances/demo/demo-loop"]);
    assert_eq!(run.stdout_json()["passed"], json!(2), "{}", run.describe());
}

#[test]
fn malformed_oracle_is_reported_with_its_field() {
    let s = Scratch::new();
    store(&s);
    s.write(
        "instances/demo/demo-path/oracle.json",
        &oracle_json(
            "S1_IntraProceduralCFG",
            PATH_T,
            json!({"executed_path": [{"line": "ten"}]}),
            "executed_path",
        ),
    );
    s.flux(&["export", "--format", "swe-flux", "out"])
        .code(1)
        .stderr_has(&["instances/demo/demo-path/oracle.json", "oracle_answer"]);
}

#[test]
fn unknown_export_format_is_a_usage_error() {
    let s = Scratch::new();
    s.flux(&["export", "--format", "swe-bench", "out"])
        .code(2)
        .stderr_has(&["swe-bench", "swe-flux, traceeval"]);
}

// ---------------------------------------------------------------------------------------------
// images

/// With nothing built, every image of the definitions is listed as not built (and said to be
/// from the built-in definitions when no images.toml is found from the working directory).
#[test]
fn images_list_on_an_empty_cache() {
    let s = Scratch::new();
    let run = s.flux(&["images", "list", "--cache-dir", "cache"]).ok();
    let out = run.stdout();
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("definitions <builtin>/images/images.toml, cache cache"),
        "{}",
        run.describe()
    );
    assert!(
        lines.next().unwrap_or("").starts_with("IMAGE"),
        "{}",
        run.describe()
    );
    let rows: Vec<&str> = lines.collect();
    assert!(
        rows.iter()
            .any(|r| r.starts_with("flux/base:py3.11-bookworm ")),
        "{}",
        run.describe()
    );
    assert!(
        rows.iter().all(|r| r.contains("not built")),
        "{}",
        run.describe()
    );
}

/// A manifest of an image the definitions do not have is still listed (with its identity
/// schema and interpreter), and a broken manifest is named and fails the command.
#[test]
fn images_list_shows_manifests_and_reports_bad_ones() {
    let s = Scratch::new();
    let manifest = json!({
        "schema": 1, "image": "flux/demo:1.0-py3.11", "kind": "repo",
        "image_id": "sha256:0123456789abcdef0123", "definition_hash": "h", "definition": {},
        "suite": "bookworm", "mirror": "http://deb.debian.org/debian",
        "debootstrap_date": "2026-11-29T08:00:00Z",
        "interpreter": {"path": "/usr/bin/python3.11", "version": "3.11.2"},
        "pip_freeze": ["demo==1.0"], "wheels": [],
        "built_at": "2026-11-29T08:10:00Z", "build_seconds": 1.0
    });
    s.write(
        "cache/images/flux_demo_1.0-py3.11.json",
        &manifest.to_string(),
    );
    s.write("cache/images/broken.json", "{");
    let run = s
        .flux(&["images", "list", "--cache-dir", "cache"])
        .code(1)
        .stderr_has(&["cache/images/broken.json"]);
    let out = run.stdout();
    let line = out
        .lines()
        .find(|l| l.starts_with("flux/demo:1.0-py3.11 "))
        .unwrap_or("");
    for n in ["repo", "not defined", "schema 1", "3.11.2"] {
        assert!(
            line.contains(n),
            "line {line:?} lacks {n:?}\n{}",
            run.describe()
        );
    }
}

/// The committed starter set, end to end through the binary: the oracle solver answers every
/// harvested question and `flux score` gives 100%, per kind and per repository too.
#[test]
fn the_starter_set_scores_100_percent_with_the_oracle_solver() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../instances");
    let s = Scratch::new();
    let ans = s.path("answers");
    let (root, ans) = (root.to_str().unwrap(), ans.to_str().unwrap());
    let eval = std::process::Command::new(env!("CARGO_BIN_EXE_flux"))
        .args([
            "eval",
            "--model",
            "oracle",
            "--quiet",
            "--instances",
            root,
            "--out",
            ans,
        ])
        .output()
        .unwrap();
    assert!(
        eval.status.success(),
        "{}",
        String::from_utf8_lossy(&eval.stderr)
    );
    let score = std::process::Command::new(env!("CARGO_BIN_EXE_flux"))
        .args([
            "score",
            "--answers",
            ans,
            "--instances",
            root,
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        score.status.success(),
        "{}",
        String::from_utf8_lossy(&score.stderr)
    );
    let r: Value = serde_json::from_slice(&score.stdout).unwrap();
    assert_eq!(r["accuracy"], 1.0, "{r}");
    assert_eq!(r["not_harvested"], 0, "{r}");
    assert!(r["total"].as_u64().unwrap() >= 30, "{r}");
    for k in ["by_kind", "by_repository"] {
        let groups = r[k]
            .as_object()
            .unwrap_or_else(|| panic!("{k} is an object: {r}"));
        assert!(!groups.is_empty());
        for (name, g) in groups {
            assert_eq!(g["accuracy"], 1.0, "{k} {name}: {g}");
        }
    }
}

/// The seeded order flux-eval's `prompts` test samples the committed sets in (FNV-1a of the
/// `repo/id` key under its seed).
fn prompt_sample_order(key: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ 20_261_201;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Issue 24.1 over the wire: against a fake OpenAI-compatible server, `flux eval` sends each
/// instance of a seeded sample of 40 per committed set (the sample flux-eval's `prompts` test
/// checks: its prompt defines the tests its question names and its target) the system and user
/// messages `flux_eval::prompt::build` renders from the cache's source tree, and each user
/// message shows its target's `def` with a line number. Repositories whose source tree is not
/// in the cache are skipped loudly.
#[test]
fn eval_sends_each_sampled_instance_of_the_committed_sets_its_self_contained_prompt() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cache = std::env::var_os("FLUX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.join(".flux-cache"));
    let api = fake_openai(&[]);
    let source = flux_eval::Source::Cache(cache.clone());
    let mut want = std::collections::BTreeMap::new();
    for set in [
        "instances",
        "variants",
        "sets/flux-gen-v1/instances",
        "sets/flux-java-v1/instances",
    ] {
        let root = ws.join(set);
        let mut insts: Vec<flux_score::Instance> =
            flux_score::discover(std::slice::from_ref(&root)).unwrap();
        // The JVM starter's test is its own file and its target the JDK's: not sampled.
        insts.retain(|i| {
            i.test_image_files.iter().any(|f| f.ends_with(".java"))
                || (!i.test_files.iter().any(|f| f.ends_with(".java"))
                    && !i.image.as_deref().is_some_and(|m| m.contains("jdk")))
        });
        insts.sort_by_key(|i| (prompt_sample_order(&i.key()), i.key()));
        insts.truncate(40);
        let mut ids = Vec::new();
        for i in insts.into_iter().filter(|i| i.oracle.is_some()) {
            let located = flux_eval::source::locate(&i, &source);
            if let flux_eval::Located::Missing { path, .. } = &located {
                flux_skip::skip(
                    &format!("the over-the-wire prompt of {}", i.key()),
                    &format!("{} is not in the cache", path.display()),
                );
                continue;
            }
            let cfg = flux_eval::prompt::PromptConfig {
                source: &located,
                max_context_tokens: 100_000,
                reasoning: false,
                mode: flux_eval::Mode::Context,
                system: None,
            };
            let p = flux_eval::prompt::build(&i, &cfg);
            ids.push(format!("id={}", i.id));
            want.insert(i.key(), (i, p.system, p.user));
        }
        if ids.is_empty() {
            continue;
        }
        let s = Scratch::new();
        let filter = ids.join(",");
        let cache_arg = cache.to_str().unwrap();
        let run = s.flux(&[
            "eval",
            "--model",
            "fake",
            "--api",
            "openai",
            "--base-url",
            &api.url,
            "--cache",
            cache_arg,
            "--instances",
            root.to_str().unwrap(),
            "--filter",
            &filter,
            "--repair-rounds",
            "0",
            "--concurrency",
            "2",
            "--quiet",
        ]);
        assert!(run.out.status.success(), "{}", run.describe());
    }
    let bodies = api.bodies.lock().unwrap().clone();
    let mut sent = std::collections::BTreeSet::new();
    for b in &bodies {
        let v: Value = serde_json::from_str(b).unwrap();
        let text = |role: &str| -> String {
            let m = v["messages"].as_array().unwrap();
            let m = m.iter().find(|m| m["role"] == role).unwrap();
            m["content"].as_str().unwrap().to_string()
        };
        let user = text("user");
        let key = user
            .split("Instance: ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        let Some((i, system, built)) = want.get(key) else {
            continue; // an instance of the same id in another repository
        };
        assert_eq!(
            &user, built,
            "{key}: the user message is not prompt::build's"
        );
        assert_eq!(&text("system"), system, "{key}: the system message");
        let target = i
            .extractor_function
            .as_deref()
            .or(i.tracing_functions.first().map(String::as_str));
        // A Java target is declared `… name(…) {`: its name after a space, on a line that is no
        // statement.
        let java = i.image.as_deref().is_some_and(|m| m.contains("-jdk"));
        if let Some(t) = target.map(|t| t.rsplit(['.', ':']).next().unwrap_or(t)) {
            let def = if java {
                format!(" {t}(")
            } else {
                format!("def {t}(")
            };
            let shown = !t.starts_with('<')
                && user.lines().any(|l| {
                    let l = l.trim_start();
                    let code = l.trim_start_matches(|c: char| c.is_ascii_digit());
                    let code = code.trim_start().trim_start_matches("async ");
                    code.len() < l.len()
                        && if java {
                            format!(" {code}").contains(&def) && !code.ends_with(';')
                        } else {
                            code.starts_with(&def)
                        }
                });
            assert!(
                shown || t.starts_with('<'),
                "{key}: no numbered `{def}` in the prompt"
            );
        }
        sent.insert(key.to_string());
    }
    let expected: std::collections::BTreeSet<String> = want.keys().cloned().collect();
    assert_eq!(sent, expected, "instances asked vs sampled");
    eprintln!("{} prompts sent as prompt::build renders them", sent.len());
}
