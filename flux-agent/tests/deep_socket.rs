//! The hook's socket lives in the run directory, and run directories live wherever the checkout
//! or cache is: a path deeper than `sun_path` (107 bytes) must still be bound by the agent and
//! reached by the hook. (A CI clone under a longer prefix once broke every harvest this way.)
use flux_agent::hook::{self, HookServer, Rec};
use flux_agent::interp::Interpreter;
use flux_agent::merge::{plan, CallsMode};
use std::path::Path;
use std::time::Duration;

const PY: &str = "/usr/bin/python3.11";

#[tokio::test]
async fn hook_streams_through_a_socket_path_longer_than_sun_path() {
    if !Path::new(PY).exists()
        && flux_skip::skip(
            "hook_streams_through_a_socket_path_longer_than_sun_path",
            &format!("{PY} is missing (apt-get install python3.11)"),
        )
    {
        return;
    }
    let base = std::env::temp_dir().join(format!("flux-deep-socket-{}", std::process::id()));
    let deep = base.join("d".repeat(60)).join("e".repeat(60));
    std::fs::create_dir_all(&deep).unwrap();
    let sock = deep.join("hook.sock");
    assert!(
        sock.as_os_str().len() > 107,
        "the test needs a path longer than sun_path"
    );
    std::fs::write(
        deep.join("prog.py"),
        "def f(x):\n    return x + 1\n\nfor i in range(3):\n    f(i)\n",
    )
    .unwrap();
    hook::install(&deep.join("hook")).unwrap();

    let interp = Interpreter::inspect(Path::new(PY), Path::new("/")).unwrap();
    let plan = plan(&interp, CallsMode::Hook, flux_trace::Scope::Run).unwrap();
    let config: flux_trace::TracingConfig =
        serde_json::from_str(r#"{"files": ["prog.py"], "tests": false}"#).unwrap();
    let server = HookServer::bind(&sock).expect("binding a socket at a deep path");
    assert!(
        sock.exists(),
        "the socket is at its real path, not at the short alias"
    );
    let env = hook::hook_env(
        &interp,
        &plan,
        &config,
        sock.to_str().unwrap(),
        deep.join("hook").to_str().unwrap(),
        None,
    );
    let collector = server.spawn();
    // The python below runs in this process's PID namespace.
    collector.restrict_to(flux_agent::spawn::pidns_of(std::process::id()).unwrap());
    let out = tokio::process::Command::new(PY)
        .arg(deep.join("prog.py"))
        .envs(env)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let capture = collector.finish(Duration::from_secs(5)).await.unwrap();
    std::fs::remove_dir_all(&base).unwrap();

    assert!(capture.problems.is_empty(), "{:?}", capture.problems);
    assert_eq!(capture.streams.len(), 1, "one process, one stream");
    let st = &capture.streams[0];
    assert!(st.problems().is_empty(), "{:?}", st.problems());
    assert!(st.pid > 0, "the stream said hello with its pid");
    let f_calls = st
        .records
        .all()
        .iter()
        .filter(|r| matches!(r, Rec::Call { code, .. } if st.codes[code].qualname == "f"))
        .count();
    assert_eq!(
        f_calls, 3,
        "every call of f arrived through the deep socket"
    );
}
