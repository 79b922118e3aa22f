//! End to end: `[tracing] predicates` evaluated by the real hook in a real traced interpreter
//! (3.11 settrace + USDT, 3.15 sys.monitoring + USDT), merged into `check` events, and the static
//! facts of the targeted file carried into the trace; then the extractors that read them.
//! Needs root and eBPF (and sid's rootfs for 3.15): skips loudly elsewhere.

use crate::common::{run_flux, sid_root, skip, tempdir, PY311};
use flux_extract::{extract, Params};
use flux_trace::Trace;
use serde_json::{json, Value};
use std::path::Path;

const PROG: &str = "\
def f(n):
    acc = []
    for i in range(n):
        acc.append(i)
    return acc


def never():
    return 0


f(3)
";

const CONFIG: &str = r#"{"files": ["PROG"], "predicates": [
    {"expr": "len(acc) == i", "lines": [4]},
    {"expr": "i < 2", "lines": [4]},
    {"expr": "acc[i] >= 0", "lines": [4]}
]}"#;

/// Trace `PROG` (written at `prog`, seen as `inside` by the interpreter) with `extra` options.
fn trace(prog: &Path, inside: &str, extra: &[&str], cmd: &[&str]) -> Trace {
    std::fs::write(prog, PROG).unwrap();
    let dir = tempdir();
    let cfg = dir.join("cfg.json");
    let name = inside.rsplit('/').next().unwrap();
    std::fs::write(&cfg, CONFIG.replace("PROG", name)).unwrap();
    let out = dir.join("t.jsonl");
    let mut args = vec![
        "trace",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    let o = run_flux(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let t = Trace::read_jsonl(text.as_bytes(), "t.jsonl").unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    t
}

fn params(v: Value) -> Params {
    Params::new(v.as_object().unwrap().clone())
}

fn check_answers(t: &Trace, inside: &str) {
    let r = extract(t, "predicate_report", &params(json!({"function": "f"}))).unwrap();
    let rows: Vec<(String, u64, u64, u64, bool)> = r["invariant_report"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["predicate"].as_str().unwrap().to_string(),
                x["observations"].as_u64().unwrap(),
                x["violations"].as_u64().unwrap(),
                x["errors"].as_u64().unwrap(),
                x["held_always"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("acc[i] >= 0".to_string(), 3, 0, 3, false),
            ("i < 2".to_string(), 3, 1, 0, false),
            ("len(acc) == i".to_string(), 3, 0, 0, true),
        ]
    );
    // The facts of the targeted file came with the trace: `never` (it never ran) has its row.
    assert!(t.facts_of(inside).is_some(), "no static facts of {inside}");
    let r = extract(
        t,
        "invocation_counts",
        &params(json!({"module": true, "file": inside.rsplit('/').next().unwrap()})),
    )
    .unwrap();
    let counts: Vec<(String, u64)> = r["invocation_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["qualname"].as_str().unwrap().to_string(),
                x["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts, vec![("f".to_string(), 1), ("never".to_string(), 0)]);
}

#[test]
fn python311_predicates_and_static_facts_reach_the_trace() {
    if skip("python311_predicates") {
        return;
    }
    if !Path::new(PY311).exists() {
        flux_skip::skip("python311_predicates", &format!("{PY311} is missing"));
        return;
    }
    let dir = tempdir();
    let prog = dir.join("prog_predicates.py");
    let p = prog.to_str().unwrap().to_string();
    let t = trace(&prog, &p, &[], &[PY311, &p]);
    let _ = std::fs::remove_dir_all(&dir);
    check_answers(&t, &p);
}

#[test]
fn python315_predicates_and_static_facts_reach_the_trace() {
    if skip("python315_predicates") {
        return;
    }
    let root = sid_root();
    if !root.join("usr/bin/python3.15").exists() {
        flux_skip::skip(
            "python315_predicates",
            &format!(
                "no sid rootfs with python3.15 at {} (run `cargo xtask images`)",
                root.display()
            ),
        );
        return;
    }
    let inside = format!("/tmp/flux-test-{}-predicates.py", std::process::id());
    let host_copy = root.join(inside.trim_start_matches('/'));
    let py = root.join("usr/bin/python3.15");
    let t = trace(
        &host_copy,
        &inside,
        &[
            "--root",
            root.to_str().unwrap(),
            "--python",
            py.to_str().unwrap(),
        ],
        &[
            "chroot",
            root.to_str().unwrap(),
            "/usr/bin/python3.15",
            &inside,
        ],
    );
    let _ = std::fs::remove_file(&host_copy);
    check_answers(&t, &inside);
}
