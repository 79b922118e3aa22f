//! End-to-end tests of the evaluation harness against a real HTTP server on 127.0.0.1 that
//! speaks both protocols with scripted replies, followed by scoring with flux-score.

use flux_eval::{run_eval, run_validate, Api, EvalError, EvalOptions, Mode, RetryPolicy, Source};
use flux_score::{run_score, Format, ScoreOptions};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

// ---------- a tiny scripted HTTP/1.1 server ----------

#[derive(Debug, Clone)]
struct Recorded {
    path: String,
    headers: HashMap<String, String>,
    body: Value,
    instance: String,
}

#[derive(Default)]
struct State {
    calls: HashMap<String, usize>,
    log: Vec<Recorded>,
    inflight: usize,
    max_inflight: usize,
}

struct Server {
    url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    fn calls(&self, inst: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .calls
            .get(inst)
            .copied()
            .unwrap_or(0)
    }
    fn log(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().log.clone()
    }
    fn max_inflight(&self) -> usize {
        self.state.lock().unwrap().max_inflight
    }
}

/// What the script answers: (HTTP status, extra headers, model text).
fn script(instance: &str, call: usize, body: &Value) -> (u16, Vec<(&'static str, String)>, String) {
    let id = instance.rsplit('/').next().unwrap_or("");
    let validate = body.to_string().contains("reasoning");
    let good = if validate {
        r#"{"loop_iteration_count": 3, "reasoning": "the loop runs over range(3)"}"#.to_string()
    } else {
        "Here is my answer:\n```json\n{\"loop_iteration_count\": 3}\n```\n".to_string()
    };
    match id {
        "correct" => (200, vec![], good),
        "wrong" if validate => (
            200,
            vec![],
            r#"{"loop_iteration_count": 4, "reasoning": "I counted the else branch too"}"#.into(),
        ),
        "wrong" => (200, vec![], r#"{"loop_iteration_count": 4}"#.into()),
        "repair" if call == 0 => (200, vec![], "I think it is {\"loop_iteration_count\": ".into()),
        "repair" => (200, vec![], good),
        "ratelimit" if call == 0 => (429, vec![("Retry-After", "0".into())], "slow down".into()),
        "ratelimit" => (200, vec![], good),
        "down" => (500, vec![], "internal error".into()),
        "shape" => (200, vec![], r#"{"loop_iteration_count": "three"}"#.into()),
        // Tools mode: two calls (one escaping the root), then a listing, then the answer only
        // when every tool result came back as expected.
        "tools" if call == 0 => (
            200,
            vec![],
            json!({"tools": [["read_file", {"path": "/usr/lib/python3.11/site-packages/toy/core.py", "start_line": 3}],
                             ["read_file", {"path": "../../../etc/passwd"}]]})
            .to_string(),
        ),
        "tools" if call == 1 => (200, vec![], json!({"tools": [["list_files", {"path": "toy"}]]}).to_string()),
        "tools" => {
            let t = body.to_string();
            let ok = t.contains("3  def count_up(n):") && t.contains("not allowed") && t.contains("toy/other.py");
            (200, vec![], if ok { good } else { r#"{"loop_iteration_count": 99}"#.into() })
        }
        "targeted" | "sampled" | "nosource" | "stall" | "huge" => (200, vec![], good),
        // Agent mode: a search, then a read of what it found, then the answer only when both
        // tool results came back with the source's text.
        "agent" if call == 0 => (200, vec![], json!({"tools": [["search", {"query": "def count_up"}]]}).to_string()),
        "agent" if call == 1 => (200, vec![], json!({"tools": [["read_file", {"path": "toy/core.py", "start_line": 3, "end_line": 7}]]}).to_string()),
        "agent" => {
            let t = body.to_string();
            let ok = t.contains("toy/core.py:3: def count_up(n):") && t.contains("5      for i in range(n):");
            (200, vec![], if ok { good } else { r#"{"loop_iteration_count": 99}"#.into() })
        }
        _ => (404, vec![], "unknown instance".into()),
    }
}

fn envelope(path: &str, text: &str) -> Value {
    let tools: Option<Vec<Value>> = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("tools").and_then(|t| t.as_array()).cloned());
    if let Some(calls) = tools {
        return if path.ends_with("/chat/completions") {
            let tc: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    json!({"id": format!("call_{i}"), "type": "function",
                                     "function": {"name": c[0], "arguments": c[1].to_string()}})
                })
                .collect();
            json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": tc},
                                "finish_reason": "tool_calls"}],
                   "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
        } else {
            let mut blocks = vec![json!({"type": "text", "text": "Let me look."})];
            blocks.extend(calls.iter().enumerate().map(|(i, c)| {
                json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": c[0], "input": c[1]})
            }));
            json!({"content": blocks, "stop_reason": "tool_use",
                   "usage": {"input_tokens": 100, "output_tokens": 10}})
        };
    }
    if path.ends_with("/chat/completions") {
        json!({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
               "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
    } else {
        json!({"id": "x", "type": "message", "content": [{"type": "text", "text": text}],
               "usage": {"input_tokens": 100, "output_tokens": 10}})
    }
}

async fn handle(mut sock: tokio::net::TcpStream, state: Arc<Mutex<State>>) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let Ok(n) = sock.read(&mut tmp).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .unwrap_or("")
        .split(' ')
        .nth(1)
        .unwrap_or("")
        .to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let Ok(n) = sock.read(&mut tmp).await else {
            return;
        };
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
    let text = body.to_string();
    let instance = text
        .split("Instance: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("")
        .to_string();
    let call = {
        let mut st = state.lock().unwrap();
        let c = st.calls.entry(instance.clone()).or_insert(0);
        let call = *c;
        *c += 1;
        st.log.push(Recorded {
            path: path.clone(),
            headers,
            body: body.clone(),
            instance: instance.clone(),
        });
        st.inflight += 1;
        st.max_inflight = st.max_inflight.max(st.inflight);
        call
    };
    // Some latency, so that concurrent requests overlap and the limit can be observed.
    tokio::time::sleep(Duration::from_millis(25)).await;
    state.lock().unwrap().inflight -= 1;
    let (status, extra, content) = script(&instance, call, &body);
    let payload = if status == 200 {
        envelope(&path, &content).to_string()
    } else {
        content
    };
    let mut resp = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        payload.len()
    );
    for (k, v) in extra {
        resp.push_str(&format!("{k}: {v}\r\n"));
    }
    resp.push_str("\r\n");
    match instance.rsplit('/').next().unwrap_or("") {
        // A reply that says it is 40 MB long.
        "huge" => {
            resp = resp.replace(
                &format!("content-length: {}", payload.len()),
                "content-length: 40000000",
            );
            resp.push('{');
        }
        // The first reply stops halfway through its body (past the client's timeout).
        "stall" if call == 0 => {
            resp.push_str(&payload[..payload.len() / 2]);
            let _ = sock.write_all(resp.as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            return;
        }
        _ => resp.push_str(&payload),
    }
    let _ = sock.write_all(resp.as_bytes()).await;
    let _ = sock.shutdown().await;
}

async fn start_server() -> Server {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let state = Arc::new(Mutex::new(State::default()));
    let st = state.clone();
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = l.accept().await {
            tokio::spawn(handle(sock, st.clone()));
        }
    });
    Server { url, state, task }
}

// ---------- a temp instance store ----------

fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

const IDS: &[&str] = &["correct", "wrong", "repair", "ratelimit", "down", "shape"];

fn store(root: &Path) -> (PathBuf, PathBuf) {
    let inst = root.join("instances");
    let src = root.join("src");
    for id in IDS {
        let d = inst.join("toy").join(id);
        write(
            &d.join("instance.toml"),
            &format!(
                r#"id = "{id}"
repository = "toy"
kind = "S2_Loops"
question = "How many iterations does the loop in `count_up` (toy/core.py) run in test_count?"
template = '{{"loop_iteration_count": "int"}}'
order_insensitive = []
package = "toy==1.0"
[test]
files = ["test_toy.py"]
[tracing]
files = ["toy/core.py"]
functions = ["toy.core.count_up"]
"#
            ),
        );
        write(
            &d.join("test_toy.py"),
            "from toy.core import count_up\n\ndef test_count():\n    assert count_up(3) == 3\n",
        );
        write(
            &d.join("oracle.json"),
            &json!({"question_kind": "S2_Loops", "question": "q",
                    "template_answer": {"loop_iteration_count": "int"},
                    "oracle_answer": {"loop_iteration_count": 3}, "provenance": {}})
            .to_string(),
        );
    }
    // One instance that is not harvested.
    write(
        &inst.join("toy/unharvested/instance.toml"),
        "id = \"unharvested\"\nrepository = \"toy\"\nkind = \"S2_Loops\"\nquestion = \"q\"\ntemplate = '{}'\n",
    );
    write(
        &src.join("toy-1.0/toy/core.py"),
        "# toy module\n\ndef count_up(n):\n    total = 0\n    for i in range(n):\n        total += 1\n    return total\n",
    );
    write(
        &src.join("toy-1.0/toy/other.py"),
        "def other():\n    return 1\n",
    );
    (inst, src)
}

/// A copy of `toy/correct` under another id (the script answers by id).
fn copy_instance(inst: &Path, id: &str) -> PathBuf {
    let from = inst.join("toy/correct");
    let to = inst.join("toy").join(id);
    std::fs::create_dir_all(&to).unwrap();
    for f in ["instance.toml", "oracle.json", "test_toy.py"] {
        let t = std::fs::read_to_string(from.join(f))
            .unwrap()
            .replace("id = \"correct\"", &format!("id = \"{id}\""));
        std::fs::write(to.join(f), t).unwrap();
    }
    to
}

fn options(server: &Server, api: Api, inst: &Path, src: &Path, out: &Path) -> EvalOptions {
    let mut o = EvalOptions::new("gpt-test", api, &server.url);
    o.instances = vec![inst.to_path_buf()];
    o.source = Source::Root(src.to_path_buf());
    o.out = out.to_path_buf();
    o.concurrency = 3;
    o.api_key = Some("sk-secret-test-key".into());
    o.retry = RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
    };
    o.price_in = Some(1.0);
    o.price_out = Some(2.0);
    o
}

fn meta(out: &Path, id: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(out.join("toy").join(id).join("meta.json")).unwrap(),
    )
    .unwrap()
}

fn grep_dir(dir: &Path, needle: &str) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read_to_string(&p)
                .unwrap_or_default()
                .contains(needle)
            {
                return true;
            }
        }
    }
    false
}

async fn end_to_end(api: Api) {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    let out = tmp.path().join("answers");
    let o = options(&server, api, &inst, &src, &out);

    let s = run_eval(&o).await.unwrap();
    assert_eq!(
        (s.instances, s.answered, s.not_harvested),
        (6, 6, 1),
        "{s:?}"
    );
    assert_eq!((s.ok, s.infra_errors, s.unparseable), (4, 1, 1), "{s:?}");
    assert_eq!((s.scored, s.passed), (5, 3), "{s:?}");

    // Per-instance meta.
    let m = meta(&out, "repair");
    assert_eq!(m["status"], "ok");
    assert_eq!(m["attempts"], 2);
    assert_eq!(m["tokens_in"], 200);
    assert_eq!(m["tokens_out"], 20);
    assert!((m["cost"].as_f64().unwrap() - (200.0 * 1.0 + 20.0 * 2.0) / 1e6).abs() < 1e-12);
    assert_eq!(meta(&out, "ratelimit")["retries"], 1);
    assert_eq!(meta(&out, "ratelimit")["status"], "ok");
    let down = meta(&out, "down");
    assert_eq!(down["status"], "infra_error");
    assert!(
        down["error"].as_str().unwrap().contains("HTTP 500"),
        "{down}"
    );
    assert_eq!(server.calls("toy/down"), 3, "first try + 2 retries");
    assert!(!out.join("toy/down/answer.json").exists());
    let shape = meta(&out, "shape");
    assert_eq!(shape["status"], "unparseable");
    assert_eq!(shape["attempts"], 3, "one try + two repair rounds");
    assert!(
        shape["error"].as_str().unwrap().contains("expected int"),
        "{shape}"
    );
    // The target's span, not the other files of its directory.
    assert_eq!(
        meta(&out, "correct")["context_files"],
        json!(["toy/core.py:3-7"])
    );
    assert_eq!(
        meta(&out, "correct")["targets"],
        json!(["toy/core.py:count_up"])
    );

    // What the server saw: the protocol, temperature 0, the prompt content, the repair message.
    let log = server.log();
    for r in &log {
        assert_eq!(r.body["temperature"].as_f64(), Some(0.0));
        assert_eq!(r.body["model"], "gpt-test");
        match api {
            Api::OpenAi => {
                assert_eq!(r.path, "/chat/completions");
                assert_eq!(r.headers["authorization"], "Bearer sk-secret-test-key");
                assert_eq!(r.body["messages"][0]["role"], "system");
            }
            Api::Anthropic => {
                assert_eq!(r.path, "/v1/messages");
                assert_eq!(r.headers["x-api-key"], "sk-secret-test-key");
                assert_eq!(r.headers["anthropic-version"], "2023-06-01");
                assert!(r.body["system"].is_string() && r.body["max_tokens"].is_u64());
            }
        }
    }
    let first = log
        .iter()
        .find(|r| r.instance == "toy/correct")
        .unwrap()
        .body
        .to_string();
    assert!(first.contains("def count_up(n):"), "source included");
    assert!(
        first.contains("assert count_up(3) == 3"),
        "test file included"
    );
    assert!(first.contains("loop_iteration_count"), "template included");
    let repair2 = log
        .iter()
        .filter(|r| r.instance == "toy/repair")
        .nth(1)
        .unwrap();
    let msgs = &repair2.body["messages"];
    let last = msgs.as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap();
    assert!(last.contains("could not be used"), "{last}");

    // The concurrency limit (3) held, and requests did run in parallel.
    let mi = server.max_inflight();
    assert!((2..=3).contains(&mi), "max in flight {mi}");

    // The key is never written anywhere.
    assert!(!grep_dir(&out, "sk-secret-test-key"));

    // Scoring the run: infra errors excluded, every failure explained.
    let mut so = ScoreOptions::new(&out);
    so.instances = vec![inst.clone()];
    so.format = Format::Json;
    let rep = run_score(&so).unwrap().report;
    assert_eq!(
        (rep.total, rep.passed, rep.infra_errors, rep.not_harvested),
        (5, 3, 1, 1)
    );
    assert!((rep.accuracy - 0.6).abs() < 1e-9);
    // Usage from meta.json: 1+1+2+1+3 answered calls × 100 tokens in (the infra error has none).
    assert_eq!((rep.usage.with_meta, rep.usage.tokens_in), (6, 800));
    assert_eq!(rep.usage.models, vec!["gpt-test".to_string()]);
    assert!((rep.usage.cost - (800.0 + 80.0 * 2.0) / 1e6).abs() < 1e-12);
    let reason = |id: &str| {
        rep.instances
            .iter()
            .find(|i| i.id == id)
            .unwrap()
            .reason
            .clone()
            .unwrap_or_default()
    };
    assert!(
        reason("wrong").contains("expected 3, got 4"),
        "{}",
        reason("wrong")
    );
    assert!(
        reason("shape").starts_with("unparseable"),
        "{}",
        reason("shape")
    );

    // Resume: ok and unparseable answers are kept; only the infra error is asked again.
    let before = server.calls("toy/correct");
    let shape_calls = server.calls("toy/shape");
    let s2 = run_eval(&o).await.unwrap();
    assert_eq!(
        (s2.skipped_existing, s2.kept_unparseable, s2.answered),
        (5, 1, 1),
        "{s2:?}"
    );
    assert!(s2.to_text().contains("kept 1 unparseable answer(s)"));
    assert_eq!(server.calls("toy/correct"), before);
    assert_eq!(server.calls("toy/shape"), shape_calls);
    assert_eq!(server.calls("toy/down"), 6);
    // Asked for: the unparseable one too.
    let mut o3 = o.clone();
    o3.retry_unparseable = true;
    let s3 = run_eval(&o3).await.unwrap();
    assert_eq!((s3.skipped_existing, s3.answered), (4, 2), "{s3:?}");
    assert_eq!(server.calls("toy/shape"), shape_calls + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_end_to_end() {
    end_to_end(Api::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_end_to_end() {
    end_to_end(Api::Anthropic).await;
}

#[tokio::test]
async fn oracle_solver_scores_100_percent() {
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    let out = tmp.path().join("oracle");
    let mut o = EvalOptions::new("oracle", Api::OpenAi, "http://127.0.0.1:9");
    o.instances = vec![inst.clone()];
    o.source = Source::Root(src);
    o.out = out.clone();
    let s = run_eval(&o).await.unwrap();
    assert_eq!((s.ok, s.scored, s.passed), (6, 6, 6));
    assert_eq!(s.accuracy, 1.0);
    assert_eq!(s.cost, Some(0.0));
    let t = s.to_text();
    assert!(
        t.contains("6/6 passed (100.0%)") && t.contains("1 not harvested"),
        "{t}"
    );
    let mut so = ScoreOptions::new(&out);
    so.instances = vec![inst];
    assert_eq!(run_score(&so).unwrap().report.accuracy, 1.0);
}

#[tokio::test]
async fn static_baseline_answers_from_source() {
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    // A path question and a call-sequence question on the same toy function.
    let d = inst.join("toy").join("path");
    write(
        &d.join("instance.toml"),
        r#"id = "path"
repository = "toy"
kind = "S1_IntraProceduralCFG"
question = "Which lines of `count_up` run, and which functions does it call?"
template = '{"executed_path": [{"file": "str", "func": "str", "line": "int"}], "calls": ["str"], "loop_iteration_count": "int", "call_sequence": [{"function": "str", "line": "int"}], "callees": [{"function": "str", "count": "int"}], "call_graph": {"*": ["str"]}}'
package = "toy==1.0"
[tracing]
files = ["toy/core.py"]
"#,
    );
    write(
        &d.join("oracle.json"),
        &json!({"question_kind": "S1_IntraProceduralCFG", "question": "q", "template_answer": {},
                "oracle_answer": {"executed_path": [], "calls": ["range"], "loop_iteration_count": 3}})
        .to_string(),
    );
    let out = tmp.path().join("static");
    let mut o = EvalOptions::new("static-baseline", Api::OpenAi, "http://127.0.0.1:9");
    o.instances = vec![inst.join("toy").join("path")];
    o.source = Source::Root(src);
    o.out = out.clone();
    let s = run_eval(&o).await.unwrap();
    assert_eq!(s.ok, 1);
    let a: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("toy/path/answer.json")).unwrap())
            .unwrap();
    let lines: Vec<i64> = a["executed_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["line"].as_i64().unwrap())
        .collect();
    assert_eq!(lines, vec![4, 5, 6, 7]);
    assert_eq!(a["executed_path"][0]["file"], "toy/core.py");
    assert_eq!(a["executed_path"][0]["func"], "count_up");
    assert_eq!(a["calls"], json!(["range"]));
    assert_eq!(a["loop_iteration_count"], 0);
    assert_eq!(
        a["call_sequence"],
        json!([{"function": "range", "line": 5}])
    );
    assert_eq!(a["callees"], json!([{"function": "range", "count": 1}]));
    assert_eq!(a["call_graph"], json!({"count_up": ["range"]}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_lists_failures_with_reasoning() {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    let out = tmp.path().join("validate");
    let mut o = options(&server, Api::Anthropic, &inst, &src, &out);
    o.instances = vec![inst.join("toy/correct"), inst.join("toy/wrong")];
    let v = run_validate(&o).await.unwrap();
    assert_eq!((v.total, v.passed), (2, 1));
    assert_eq!(v.review.len(), 1);
    assert_eq!(v.review[0].id, "wrong");
    assert_eq!(
        v.review[0].reasoning.as_deref(),
        Some("I counted the else branch too")
    );
    let txt = std::fs::read_to_string(out.join("validation.txt")).unwrap();
    assert!(
        txt.contains("toy/wrong") && txt.contains("I counted the else branch too"),
        "{txt}"
    );
    assert!(out.join("validation.json").is_file());
    // The reasoning is kept in meta, not in the answer.
    let a: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("toy/correct/answer.json")).unwrap(),
    )
    .unwrap();
    assert!(a.get("reasoning").is_none());
}

#[tokio::test]
async fn missing_api_key_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let (inst, _src) = store(tmp.path());
    // The vendor's own URL needs a key; no request is made without one.
    let mut o = EvalOptions::new("some-model", Api::Anthropic, "https://api.anthropic.com");
    o.instances = vec![inst];
    o.out = tmp.path().join("x");
    if std::env::var("ANTHROPIC_API_KEY").is_ok()
        && flux_skip::not_applicable(
            "missing_api_key_is_an_error",
            "ANTHROPIC_API_KEY is set in this environment",
        )
    {
        return;
    }
    let e = run_eval(&o).await.unwrap_err();
    assert!(matches!(e, EvalError::NoApiKey("ANTHROPIC_API_KEY")), "{e}");
}

#[tokio::test]
async fn a_refused_connection_stops_the_run_at_once_without_retries() {
    // Port 9 (discard) on loopback: nothing listens there in the test environment.
    let tmp = tempfile::tempdir().unwrap();
    let (inst, _src) = store(tmp.path());
    let mut o = EvalOptions::new("gpt-test", Api::OpenAi, "http://127.0.0.1:9");
    o.instances = vec![inst.join("toy/correct")];
    o.out = tmp.path().join("x");
    o.source = Source::Off;
    o.api_key = Some("k".into());
    o.retry = RetryPolicy {
        max_retries: 1,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
    };
    // Three instances, four tries each allowed: the first refused connection stops the run,
    // without a retry and without asking the others.
    o.instances = vec![inst.join("toy")];
    o.concurrency = 1;
    o.retry = RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_secs(5),
        max_backoff: Duration::from_secs(5),
    };
    let t = std::time::Instant::now();
    let e = run_eval(&o).await.unwrap_err();
    assert!(matches!(e, EvalError::Unreachable(_)), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("cannot connect to http://127.0.0.1:9"),
        "{msg}"
    );
    assert!(
        msg.contains("--base-url") && msg.contains("stopped"),
        "{msg}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "retried: {:?}",
        t.elapsed()
    );
    // Nothing was written as an answer (a rerun asks every instance).
    assert!(!grep_dir(&o.out, "infra_error"));
}

async fn tools_mode(api: Api) {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    // A copy of an instance under the id the script answers with tool calls.
    let to = copy_instance(&inst, "tools");
    let out = tmp.path().join("answers");
    let mut o = options(&server, api, &to, &src, &out);
    o.mode = Mode::ContextTools;
    let s = run_eval(&o).await.unwrap();
    assert_eq!((s.ok, s.passed), (1, 1), "{s:?}");
    let m = meta(&out, "tools");
    assert_eq!(m["tool_calls"], 3);
    assert_eq!(m["attempts"], 3);
    let log = server.log();
    assert!(log
        .iter()
        .all(|r| r.body["tools"].as_array().map(Vec::len) == Some(3)));
    // The tool results went back in the protocol's own form.
    let last = log.last().unwrap().body.to_string();
    match api {
        Api::OpenAi => assert!(
            last.contains("\"role\":\"tool\"") && last.contains("\"tool_call_id\":\"call_0\"")
        ),
        Api::Anthropic => assert!(
            last.contains("\"type\":\"tool_result\"")
                && last.contains("\"tool_use_id\":\"toolu_1\"")
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_tools_mode() {
    tools_mode(Api::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_tools_mode() {
    tools_mode(Api::Anthropic).await;
}

// ---------- source by default, transcripts, samples, settings, agent mode ----------

/// An instance `toy/<id>` of package `big==2.0` targeting `target` in `big/core.py`.
fn big_instance(inst: &Path, id: &str) -> PathBuf {
    let d = inst.join("toy").join(id);
    write(
        &d.join("instance.toml"),
        &format!(
            r#"id = "{id}"
repository = "toy"
package = "big==2.0"
image = "flux/big:2.0-py3.11"
kind = "S2_Loops"
question = "How many iterations does the loop in `target` run?"
template = '{{"loop_iteration_count": "int"}}'
[test]
files = ["test_big.py"]
[tracing]
files = ["big/core.py"]
functions = ["target"]
[extractor]
name = "loop_iterations"
[extractor.params]
function = "target"
"#
        ),
    );
    write(
        &d.join("test_big.py"),
        "from big.core import target\n\ndef test_t():\n    target(3)\n",
    );
    write(
        &d.join("oracle.json"),
        &json!({"question_kind": "S2_Loops", "question": "q",
                "template_answer": {"loop_iteration_count": "int"},
                "oracle_answer": {"loop_iteration_count": 3}})
        .to_string(),
    );
    d
}

/// A source tree for `big==2.0` where the target sits deep in a long module, calls a helper
/// of the same module and a function of another, and a same-named file elsewhere defines a
/// function of the same name.
fn big_source(src: &Path) {
    let mut core = String::from("# FILLER_TOP: the top of the module\nfrom big import util\nfrom big.util import scale as sc\n\nLIMIT = 3\n");
    for i in 0..300 {
        core.push_str(&format!(
            "def filler_{i}(x):\n    return x + {i}  # FILLER_BODY\n\n"
        ));
    }
    core.push_str("def helper(x):\n    return x * 2  # HELPER_BODY\n\n");
    for i in 300..600 {
        core.push_str(&format!(
            "def filler_{i}(x):\n    return x + {i}  # FILLER_BODY\n\n"
        ));
    }
    core.push_str(
        "def target(n):\n    total = 0\n    for i in range(min(n, LIMIT)):\n        total += helper(i) + util.fmt(i) + sc(i)\n    return total\n",
    );
    write(&src.join("big-2.0/big/core.py"), &core);
    write(
        &src.join("big-2.0/big/util.py"),
        "# UTIL_TOP\n\ndef fmt(x):\n    return len(str(x))  # FMT_BODY\n\ndef scale(x):\n    return x  # SCALE_BODY\n\ndef unused():\n    return 0  # UNUSED_BODY\n",
    );
    write(&src.join("big-2.0/big/__init__.py"), "");
    write(
        &src.join("big-2.0/vendor/core.py"),
        "def target(n):\n    return -1  # ELSEWHERE_BODY\n",
    );
}

fn user_text(r: &Recorded) -> String {
    r.body.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeted_source_reaches_the_server_by_default_and_replies_land_in_transcripts() {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("instances");
    let d = big_instance(&inst, "targeted");
    // The default: the cache's unpacked source, <cache>/src/<name>-<version>/.
    let cache = tmp.path().join("cache");
    big_source(&cache.join("src"));
    let out = tmp.path().join("answers");
    let mut o = EvalOptions::new("gpt-test", Api::OpenAi, &server.url);
    assert_eq!(o.source, Source::Cache(PathBuf::from(".flux-cache")));
    o.source = Source::Cache(cache.clone());
    o.instances = vec![d];
    o.out = out.clone();
    let s = run_eval(&o).await.unwrap();
    assert_eq!((s.ok, s.passed), (1, 1), "{s:?}");

    let log = server.log();
    assert_eq!(log.len(), 1);
    let body = user_text(&log[0]);
    // The target whole, with its own line numbers; what it calls; the constant it reads.
    assert!(
        body.contains(" 1809  def target(n):"),
        "target with its line number"
    );
    assert!(body.contains("HELPER_BODY"), "same-module callee");
    assert!(body.contains("FMT_BODY"), "callee through `import util`");
    assert!(
        body.contains("SCALE_BODY"),
        "callee through `from … import … as`"
    );
    assert!(body.contains("LIMIT = 3"), "module-level name it reads");
    // Not the rest of the module, nor same-named files elsewhere, nor unused code.
    assert!(
        !body.contains("FILLER_BODY"),
        "filler functions are not context"
    );
    assert!(
        !body.contains("ELSEWHERE_BODY"),
        "same-named file elsewhere"
    );
    assert!(!body.contains("UNUSED_BODY") && !body.contains("UTIL_TOP"));
    // No key was configured and none is needed by a server other than the vendor's.
    assert!(!log[0].headers.contains_key("authorization"));

    let m = meta(&out, "targeted");
    assert_eq!(m["targets"], json!(["big/core.py:target"]));
    assert_eq!(
        m["source"].as_str(),
        Some(cache.join("src/big-2.0").to_str().unwrap())
    );
    let files: Vec<String> = serde_json::from_value(m["context_files"].clone()).unwrap();
    assert!(
        files.iter().any(|f| f.starts_with("big/core.py:")),
        "{files:?}"
    );
    assert!(
        files.iter().any(|f| f.starts_with("big/util.py:")),
        "{files:?}"
    );

    // The transcript: the request's messages, the raw reply, usage, latency, cost.
    let t: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("toy/targeted/transcript.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(t["mode"], "context");
    assert_eq!(t["params"]["temperature"], 0.0);
    assert!(t["system"].as_str().unwrap().contains("JSON"));
    let s1 = &t["samples"][0];
    assert_eq!(s1["status"], "ok");
    assert_eq!(s1["answer"], json!({"loop_iteration_count": 3}));
    let a = &s1["attempts"][0];
    assert_eq!(a["status"], "ok");
    assert_eq!(a["messages_sent"], 1);
    assert_eq!(
        (a["tokens_in"].as_u64(), a["tokens_out"].as_u64()),
        (Some(100), Some(10))
    );
    assert!(a["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(a["http"][0]["status"], 200);
    assert_eq!(a["response"]["choices"][0]["message"]["role"], "assistant");
    assert!(a["text"].as_str().unwrap().contains("loop_iteration_count"));
    // The conversation: the prompt as sent, then the reply.
    let msgs = s1["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["content"], log[0].body["messages"][1]["content"]);
    assert_eq!(msgs[1]["role"], "assistant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_source_is_an_error_naming_the_path_and_the_command_unless_no_source() {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let inst = tmp.path().join("instances");
    let d = big_instance(&inst, "nosource");
    let cache = tmp.path().join("cache");
    std::fs::create_dir_all(cache.join("src")).unwrap();
    let mut o = EvalOptions::new("gpt-test", Api::OpenAi, &server.url);
    o.source = Source::Cache(cache.clone());
    o.instances = vec![d];
    o.out = tmp.path().join("answers");
    let e = run_eval(&o).await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, EvalError::NoSource(_)), "{msg}");
    assert!(
        msg.contains(cache.join("src/big-2.0").to_str().unwrap()),
        "{msg}"
    );
    assert!(
        msg.contains("flux images source flux/big:2.0-py3.11"),
        "{msg}"
    );
    assert!(msg.contains("--no-source"), "{msg}");
    assert!(server.log().is_empty(), "no request without source");
    // The static baseline needs the source too.
    let mut sb = o.clone();
    sb.model = "static-baseline".into();
    assert!(matches!(run_eval(&sb).await, Err(EvalError::NoSource(_))));
    // On purpose: asked without source, and the prompt says so.
    o.source = Source::Off;
    let s = run_eval(&o).await.unwrap();
    assert_eq!(s.ok, 1);
    let body = user_text(&server.log()[0]);
    assert!(body.contains("no repository source is given"), "{body}");
    assert!(!body.contains("## Repository source"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_and_sampling_settings_reach_the_server() {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    let to = copy_instance(&inst, "sampled");
    let out = tmp.path().join("answers");
    let mut o = EvalOptions::new("local-model", Api::OpenAi, &server.url);
    o.instances = vec![to];
    o.source = Source::Root(src);
    o.out = out.clone();
    o.samples = 3;
    o.params.temperature = Some(0.7);
    o.params.max_tokens = Some(123);
    o.params.reasoning_effort = Some("low".into());
    o.system = Some("You are terse.".into());
    let s = run_eval(&o).await.unwrap();
    assert_eq!((s.ok, s.samples), (1, 3), "{s:?}");
    let log = server.log();
    assert_eq!(log.len(), 3, "one request per sample");
    for r in &log {
        assert_eq!(r.body["temperature"].as_f64(), Some(0.7));
        assert_eq!(
            r.body["max_tokens"], 123,
            "a non-OpenAI server reads max_tokens"
        );
        assert_eq!(r.body["reasoning_effort"], "low");
        assert_eq!(r.body["messages"][0]["content"], "You are terse.");
        assert!(!r.headers.contains_key("authorization"));
    }
    for f in [
        "answer.json",
        "answer-2.json",
        "answer-3.json",
        "transcript.json",
    ] {
        assert!(out.join("toy/sampled").join(f).is_file(), "{f}");
    }
    let m = meta(&out, "sampled");
    assert_eq!(m["samples"].as_array().unwrap().len(), 3);
    assert_eq!(m["attempts"], 3);
    assert_eq!(m["tokens_in"], 300);
    // Resumable: three ok samples are there, nothing is asked again; four are not.
    run_eval(&o).await.unwrap();
    assert_eq!(server.log().len(), 3);
    o.samples = 4;
    run_eval(&o).await.unwrap();
    assert_eq!(server.log().len(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infrastructure_errors_keep_every_http_try_in_the_transcript() {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    let out = tmp.path().join("answers");
    let mut o = options(&server, Api::OpenAi, &inst.join("toy/down"), &src, &out);
    o.instances = vec![inst.join("toy/down"), inst.join("toy/ratelimit")];
    let s = run_eval(&o).await.unwrap();
    assert_eq!(s.infra_errors, 1);
    assert_eq!(s.infra_error_instances.len(), 1);
    assert!(
        s.infra_error_instances[0].starts_with("toy/down: HTTP 500"),
        "{s:?}"
    );
    assert!(s
        .to_text()
        .contains("infra error (after retries): toy/down"));
    let t: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("toy/down/transcript.json")).unwrap(),
    )
    .unwrap();
    let a = &t["samples"][0]["attempts"][0];
    assert_eq!(a["status"], "infra_error");
    let http = a["http"].as_array().unwrap();
    assert_eq!(http.len(), 3, "first try and two retries");
    assert!(http.iter().all(|h| h["status"] == 500));
    assert!(http[0]["backoff_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(
        http[2]["backoff_seconds"], 0.0,
        "no backoff after the last try"
    );
    // A 429 then a success: both tries recorded in the one attempt.
    let t: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("toy/ratelimit/transcript.json")).unwrap(),
    )
    .unwrap();
    let http = t["samples"][0]["attempts"][0]["http"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        http.iter()
            .map(|h| h["status"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![429, 200]
    );
}

async fn agent_mode(api: Api) {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    let to = copy_instance(&inst, "agent");
    let out = tmp.path().join("answers");
    let mut o = options(&server, api, &to, &src, &out);
    o.mode = Mode::Agent;
    let s = run_eval(&o).await.unwrap();
    assert_eq!((s.ok, s.passed), (1, 1), "{s:?}");
    let log = server.log();
    // The first prompt holds no source, only the way to it.
    let first = log[0].body.to_string();
    assert!(!first.contains("def count_up(n):"), "{first}");
    assert!(first.contains("`search`"));
    let names: Vec<String> = log[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t.pointer("/function/name")
                .or_else(|| t.get("name"))
                .and_then(Value::as_str)
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, vec!["list_files", "search", "read_file"]);
    // Tool calls and their results are in the transcript.
    let t: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("toy/agent/transcript.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(t["tools"], json!(["list_files", "search", "read_file"]));
    let atts = t["samples"][0]["attempts"].as_array().unwrap();
    assert_eq!(atts.len(), 3);
    assert_eq!(atts[0]["tool_calls"][0]["name"], "search");
    assert!(atts[0]["tool_calls"][0]["result"]
        .as_str()
        .unwrap()
        .contains("toy/core.py:3: def count_up(n):"));
    assert_eq!(atts[1]["tool_calls"][0]["arguments"]["start_line"], 3);
    assert_eq!(meta(&out, "agent")["tool_calls"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_agent_mode() {
    agent_mode(Api::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_agent_mode() {
    agent_mode(Api::Anthropic).await;
}

#[tokio::test]
async fn a_reply_cut_by_the_timeout_mid_body_is_retried_and_a_huge_one_refused() {
    let server = start_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let (inst, src) = store(tmp.path());
    let out = tmp.path().join("answers");
    let stall = copy_instance(&inst, "stall");
    let huge = copy_instance(&inst, "huge");
    let mut o = options(&server, Api::OpenAi, &stall, &src, &out);
    o.instances = vec![stall, huge];
    o.request_timeout = Duration::from_millis(800);
    let s = run_eval(&o).await.unwrap();
    // The stalled body: a timeout, retried, then answered.
    assert_eq!(server.calls("toy/stall"), 2);
    let t: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("toy/stall/transcript.json")).unwrap(),
    )
    .unwrap();
    let http = t["samples"][0]["attempts"][0]["http"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(http.len(), 2, "{http:?}");
    let first = http[0]["error"].as_str().unwrap_or("");
    assert!(
        first.contains("reading the reply failed (timed out)"),
        "{first}"
    );
    assert_eq!(meta(&out, "stall")["status"], "ok");
    // The 40 MB one: refused at once, not retried, an infrastructure error.
    assert_eq!(server.calls("toy/huge"), 1);
    assert_eq!(s.infra_errors, 1, "{s:?}");
    assert!(
        s.infra_error_instances[0].contains("larger than 32 MiB"),
        "{s:?}"
    );
}
