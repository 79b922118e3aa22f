//! 17.7: the hook's socket was mode 0777 with no peer check, so any local user could inject a
//! forged call into a root `flux trace` that came out complete. Now it is 0600 and only peers in
//! the traced PID namespace are read; anyone else is refused and the capture says so.
use flux_agent::hook::HookServer;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const FORGED: &str = concat!(
    r#"{"hello":1,"pid":1,"python":"3.15.2","mode":"monitoring","calls":"all","scope":"run","leave":[],"clock":"monotonic_ns"}"#,
    "\n",
    r#"["C",1,"/app/prog.py","evil","evil",1,2,0]"#,
    "\n",
    r#"["c",10,1,1,140,1]"#,
    "\n",
    r#"["r",11,1,1,140,2,"return",null,null]"#,
    "\n",
    r#"["bye",3]"#,
    "\n"
);

fn dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("flux-hook-socket-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Connect, send the forged stream, and collect what the agent kept.
async fn forge(allowed: (u64, u64), tag: &str) -> (flux_agent::hook::HookCapture, u32) {
    let d = dir(tag);
    let sock = d.join("hook.sock");
    let server = HookServer::bind(&sock).unwrap();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    let collector = server.spawn();
    collector.restrict_to(allowed);
    let s = sock.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = std::os::unix::net::UnixStream::connect(&s).unwrap();
        // A refused peer may see its writes fail: that is the point.
        let _ = c.write_all(FORGED.as_bytes());
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cap = collector.finish(Duration::from_secs(2)).await.unwrap();
    let _ = std::fs::remove_dir_all(&d);
    (cap, mode)
}

#[tokio::test]
async fn a_peer_outside_the_traced_pid_namespace_is_refused_and_reported() {
    let mine = flux_agent::spawn::pidns_of(std::process::id()).unwrap();
    // The traced namespace is another one: this test process is a foreign peer.
    let (cap, mode) = forge((mine.0, mine.1 ^ 1), "foreign").await;
    assert_eq!(mode, 0o600, "the socket is private");
    assert!(
        cap.streams.is_empty(),
        "a foreign stream was read: {:?}",
        cap.streams
    );
    assert!(
        cap.problems
            .iter()
            .any(|p| p.contains("refused a hook connection")
                && p.contains("outside the traced PID namespace")),
        "{:?}",
        cap.problems
    );
    // The merged trace is incomplete, never silently altered.
    let plan = flux_merge::plan(
        flux_merge::Capabilities {
            entry: false,
            ret: false,
            line: false,
        },
        flux_merge::CallsMode::Hook,
        flux_trace::Scope::Run,
    )
    .unwrap();
    let t = flux_merge::merge(None, &cap, "python", &plan);
    assert!(!t.meta.complete && t.events.is_empty(), "{:?}", t.meta);
}

#[tokio::test]
async fn a_peer_inside_the_traced_pid_namespace_is_read() {
    let mine = flux_agent::spawn::pidns_of(std::process::id()).unwrap();
    let (cap, _) = forge(mine, "inside").await;
    assert!(cap.problems.is_empty(), "{:?}", cap.problems);
    assert_eq!(cap.streams.len(), 1);
    assert_eq!(cap.streams[0].records.kept().len(), 2);
}
