//! `--proposer llm` against a real HTTP server on 127.0.0.1 with scripted replies (both wire
//! protocols): the model's literal replacements go through the AST path; bad ones are
//! rejected with a reason; variants are written (no harvest here: `harvest: None`).
use flux_eval::{Api, RetryPolicy};
use flux_perturb::{llm::LlmOptions, PerturbOptions, Proposer, VariantStatus};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Default)]
struct State {
    bodies: Vec<(String, Value, Option<String>)>,
}

const REPLY: &str = r#"Here you go:
```json
{"variants": [
  [{"file": "test_factorint_small_path.py", "line": 6, "col": 43, "old": "60984", "new": "60985"},
   {"file": "test_factorint_small_path.py", "line": "6", "col": 57, "old": "600", "new": "700"}],
  [{"line": 6, "col": 43, "old": "60984", "new": "__import__('os').system('x')"}],
  [{"line": 7, "col": 24, "old": "3", "new": "4"}, {"line": 6, "col": 1, "old": "15", "new": "14"}]
]}
```"#;

fn envelope(path: &str, text: &str) -> Value {
    if path.ends_with("/chat/completions") {
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
    } else {
        json!({"type": "message", "content": [{"type": "text", "text": text}],
               "usage": {"input_tokens": 10, "output_tokens": 5}})
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
    let mut len = 0usize;
    let mut auth = None;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            if k == "content-length" {
                len = v.trim().parse().unwrap_or(0);
            }
            if k == "authorization" || k == "x-api-key" {
                auth = Some(v.trim().to_string());
            }
        }
    }
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
    state
        .lock()
        .unwrap()
        .bodies
        .push((path.clone(), body, auth));
    let payload = envelope(&path, REPLY).to_string();
    let resp = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
    let _ = sock.write_all(resp.as_bytes()).await;
    let _ = sock.shutdown().await;
}

async fn server() -> (String, Arc<Mutex<State>>, tokio::task::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let state = Arc::new(Mutex::new(State::default()));
    let st = state.clone();
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = l.accept().await {
            tokio::spawn(handle(sock, st.clone()));
        }
    });
    (url, state, task)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn origin(root: &Path) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("instances/sympy/sympy-factorint-small-path");
    let d = root.join("instances/sympy/sympy-factorint-small-path");
    copy_dir(&src, &d);
    let _ = std::fs::remove_file(d.join("oracle.json"));
    let _ = std::fs::remove_file(d.join("callgraph.json"));
    d
}

async fn run(api: Api) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = origin(tmp.path());
    let (url, state, task) = server().await;
    let base = match api {
        Api::OpenAi => format!("{url}/v1"),
        Api::Anthropic => url.clone(),
    };
    let mut lo = LlmOptions::new(api, &base, "scripted-model");
    lo.api_key = Some("sk-test-secret".into());
    lo.retry = RetryPolicy {
        max_retries: 0,
        initial_backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
    };
    let mut opts = PerturbOptions::new(None);
    opts.n = 4;
    opts.seed = 11;
    opts.proposer = Proposer::Llm(lo);
    let mut lines = Vec::new();
    let report = flux_perturb::perturb(std::slice::from_ref(&dir), &opts, &mut |l: &str| {
        lines.push(l.to_string())
    })
    .await
    .unwrap();
    task.abort();
    // one request, the prompt names the instance, shows the test with line numbers and the sites
    let bodies = state.lock().unwrap().bodies.clone();
    assert_eq!(bodies.len(), 1);
    let (path, body, auth) = &bodies[0];
    match api {
        Api::OpenAi => assert!(path.ends_with("/v1/chat/completions"), "{path}"),
        Api::Anthropic => assert!(path.ends_with("/v1/messages"), "{path}"),
    }
    assert!(auth.as_deref().unwrap().contains("sk-test-secret"));
    let text = body.to_string();
    assert!(
        text.contains("Instance: sympy/sympy-factorint-small-path"),
        "{text}"
    );
    assert!(
        text.contains("   6      n, next_p = _factorint_small(factors, 60984, 2**15, 600)"),
        "{text}"
    );
    assert!(
        text.contains("test_factorint_small_path.py:6:43 int test_trial_division_finishes: 60984"),
        "{text}"
    );
    assert!(
        text.contains("Propose 4 different variants (variation seed 11)"),
        "{text}"
    );
    assert_eq!(body["temperature"], json!(0));

    let inst = &report.instances[0];
    assert_eq!(inst.attempted, 4, "{:#?}", inst);
    let v: Vec<_> = inst.variants.iter().collect();
    // variant 1: both edits applied, written, with its [variant] table
    assert_eq!(v[0].status, VariantStatus::Proposed, "{:?}", v[0]);
    assert_eq!(v[0].id, "sympy-factorint-small-path--v11");
    let vdir = v[0].dir.clone().unwrap();
    assert_eq!(
        vdir,
        tmp.path()
            .join("instances/sympy/sympy-factorint-small-path--v11")
    );
    let test = std::fs::read_to_string(vdir.join("test_factorint_small_path.py")).unwrap();
    assert!(
        test.contains("_factorint_small(factors, 60985, 2**15, 700)"),
        "{test}"
    );
    assert!(
        test.contains("\n    (factors)\n") && !test.contains("{2: 3, 3: 2, 7: 1, 11: 2}"),
        "relaxed, the stale value gone:\n{test}"
    );
    let loaded = flux_instance::load_instance(&vdir).unwrap();
    let var = loaded.spec.variant.unwrap();
    assert_eq!(
        (var.origin.as_str(), var.seed, var.proposer.as_str()),
        ("sympy-factorint-small-path", 11, "llm")
    );
    assert_eq!(var.mutations.len(), 2);
    assert!(!vdir.join("oracle.json").exists());
    // variant 2: its only edit is not a literal
    assert_eq!(v[1].status, VariantStatus::Discarded);
    assert_eq!(v[1].reason_kind.as_deref(), Some("no-mutation"));
    assert!(
        v[1].rejected_edits[0].contains("not a literal"),
        "{:?}",
        v[1].rejected_edits
    );
    // variant 3: one edit hits an expected value (rejected), the other a real input
    assert_eq!(v[2].status, VariantStatus::Proposed, "{:?}", v[2]);
    assert_eq!(v[2].rejected_edits.len(), 1, "{:?}", v[2].rejected_edits);
    // variant 4: the model proposed only three
    assert_eq!(v[3].reason_kind.as_deref(), Some("proposer"));
    // the key is nowhere in the report or the written files
    let json = serde_json::to_string(&report).unwrap();
    assert!(!json.contains("sk-test-secret"));
    assert!(!std::fs::read_to_string(vdir.join("instance.toml"))
        .unwrap()
        .contains("sk-test"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_proposals_go_through_the_ast_path() {
    run(Api::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_proposals_go_through_the_ast_path() {
    run(Api::Anthropic).await;
}
