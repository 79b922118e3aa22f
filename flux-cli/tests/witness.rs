//! Two witnesses, one truth: for every program of `tests/witness/` and every interpreter here,
//! `flux trace --calls usdt` (calls/returns from CPython's USDT probes, the hook adding lines,
//! values and exceptions) and `flux trace --calls hook` (the pure in-process reference) must
//! report the same activations, lines, locals, values, unwinds and exceptions of the program's
//! own file, thread by thread. A disagreement is a bug in flux: there is no tolerance here.
//!
//! Interpreters: Debian bookworm's `/usr/bin/python3.11` (USDT returns and lines; entries from
//! the hook), sid's python3.15 in a chroot (USDT entries and returns). python3.13 and 3.14 have
//! no USDT probes at all: there the hook alone must give a complete, balanced trace whose
//! calls/returns of the program equal 3.15's hook witness.
//!
//! Each program targets itself (`{"files": ["<name>.py"]}`), so every line, local and value of
//! the file is recorded. Threads get different tids from run to run, so the per-thread
//! sequences are compared as a multiset (sorted). `FLUX_WITNESS_ONLY=name[,name]` limits a run
//! to some programs while debugging.
//!
//! Needs root, a uprobe-capable kernel and the root filesystems of `cargo xtask images`; where
//! one is missing the test says `skipping: …` and returns.
mod common;

use common::{cannot_trace, config_for, rootfs, tempdir, trace_with, witness_line, Traced, PY311};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/witness");
    let only: Option<Vec<String>> = std::env::var("FLUX_WITNESS_ONLY").ok().map(|s| {
        s.split(',')
            .map(|x| x.trim().trim_end_matches(".py").to_string())
            .collect()
    });
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/witness exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .filter(|p| match &only {
            Some(o) => o.iter().any(|n| p.file_stem().unwrap().to_str() == Some(n)),
            None => true,
        })
        .collect();
    v.sort();
    v
}

/// One interpreter: the host's, or one inside a root filesystem (run through `chroot`).
struct Python {
    label: &'static str,
    /// The interpreter as the program sees it.
    exe: &'static str,
    root: Option<PathBuf>,
}

impl Python {
    fn host_exe(&self) -> PathBuf {
        match &self.root {
            Some(r) => r.join(self.exe.trim_start_matches('/')),
            None => PathBuf::from(self.exe),
        }
    }

    /// Why it cannot be used here, if it cannot.
    fn missing(&self) -> Option<String> {
        if let Some(why) = cannot_trace() {
            return Some(why.to_string());
        }
        let exe = self.host_exe();
        if !exe.exists() {
            return Some(match &self.root {
                Some(r) => format!(
                    "no {} in {} (run `cargo xtask images`)",
                    self.exe,
                    r.display()
                ),
                None => format!("{} is missing", self.exe),
            });
        }
        None
    }

    /// Trace `prog` with `--calls calls`; the events and the program's path as it ran.
    fn trace(&self, prog: &Path, calls: &str) -> (Traced, String) {
        let name = prog.file_name().unwrap().to_str().unwrap();
        let stem = prog.file_stem().unwrap().to_str().unwrap();
        let dir = tempdir();
        let cfg = config_for(&dir, name);
        let cfg = cfg.to_str().unwrap();
        let out = match &self.root {
            None => {
                let p = prog.to_str().unwrap();
                (
                    trace_with(&["--calls", calls, "--config", cfg], &[self.exe, p]),
                    p.to_string(),
                )
            }
            Some(root) => {
                // A directory of its own keeps the program's file name (its target).
                let inside_dir = format!(
                    "/tmp/{}",
                    dir.file_name()
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .replace("flux-test", &format!("flux-witness-{stem}"))
                );
                let host_dir = root.join(inside_dir.trim_start_matches('/'));
                std::fs::create_dir_all(&host_dir).unwrap();
                std::fs::copy(prog, host_dir.join(name)).unwrap();
                let inside = format!("{inside_dir}/{name}");
                let (r, py) = (root.to_str().unwrap(), self.host_exe());
                let t = trace_with(
                    &[
                        "--calls",
                        calls,
                        "--config",
                        cfg,
                        "--root",
                        r,
                        "--python",
                        py.to_str().unwrap(),
                    ],
                    &["chroot", r, self.exe, &inside],
                );
                let _ = std::fs::remove_dir_all(&host_dir);
                (t, inside)
            }
        };
        let _ = std::fs::remove_dir_all(&dir);
        out
    }
}

fn py311() -> Python {
    Python {
        label: "3.11",
        exe: PY311,
        root: None,
    }
}
fn py315() -> Python {
    Python {
        label: "3.15",
        exe: "/usr/bin/python3.15",
        root: Some(rootfs(
            "FLUX_SID_ROOTFS",
            "/var/cache/flux/rootfs/sid-py315",
        )),
    }
}
fn py314() -> Python {
    Python {
        label: "3.14",
        exe: "/usr/bin/python3.14",
        root: Some(rootfs(
            "FLUX_SID314_ROOTFS",
            "/var/cache/flux/rootfs/sid-py314",
        )),
    }
}
fn py313() -> Python {
    Python {
        label: "3.13",
        exe: "/usr/bin/python3.13",
        root: Some(rootfs(
            "FLUX_TRIXIE_ROOTFS",
            "/var/cache/flux/rootfs/trixie-py313",
        )),
    }
}

/// Everything compared of one event: the existing tests' witness view, plus suspension and the
/// exception message.
fn strict_line(e: &Value) -> String {
    format!(
        "{} s={} m={}",
        witness_line(e),
        e["suspended"],
        e["exc"]["msg"]
    )
}

/// The calls and returns only, without depth or values (what 3.13/3.14 must share with 3.15).
fn call_line(e: &Value) -> Option<String> {
    let ev = e["ev"].as_str()?;
    (ev == "call" || ev == "return").then(|| {
        format!(
            "{ev} {} {} u={} s={}",
            e["qualname"]
                .as_str()
                .unwrap_or(e["func"].as_str().unwrap_or("")),
            e["line"],
            e["unwind"],
            e["suspended"]
        )
    })
}

/// Per thread, the lines of the events of `file`, as a sorted multiset of sequences.
fn per_thread(
    events: &[Value],
    file: &str,
    f: impl Fn(&Value) -> Option<String>,
) -> Vec<Vec<String>> {
    let mut order: Vec<(u64, u64)> = Vec::new();
    let mut by: HashMap<(u64, u64), Vec<String>> = HashMap::new();
    for e in events.iter().filter(|e| e["file"] == file) {
        let k = (
            e["pid"].as_u64().unwrap_or(0),
            e["tid"].as_u64().unwrap_or(0),
        );
        let Some(l) = f(e) else { continue };
        if !by.contains_key(&k) {
            order.push(k);
        }
        by.entry(k).or_default().push(l);
    }
    let mut v: Vec<Vec<String>> = order.into_iter().map(|k| by.remove(&k).unwrap()).collect();
    v.sort();
    v
}

/// What is wrong with one run on its own: exit status, completeness, balance.
fn check_run(t: &Traced, file: &str) -> Vec<String> {
    let mut bad = Vec::new();
    if !t.out.status.success() {
        let err = t.stderr();
        let tail: Vec<&str> = err.lines().rev().take(12).collect();
        bad.push(format!(
            "flux exited with {:?}:\n    {}",
            t.out.status.code(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n    ")
        ));
    }
    let mine: Vec<&Value> = t.events.iter().filter(|e| e["file"] == file).collect();
    if !mine
        .iter()
        .any(|e| e["ev"] == "call" && e["func"] == "<module>")
    {
        bad.push("no call of the program's <module>".into());
    }
    let mut open: HashMap<u64, i64> = HashMap::new();
    for e in &mine {
        let a = e["activation"].as_u64().unwrap_or(0);
        match e["ev"].as_str() {
            Some("call") => *open.entry(a).or_default() += 1,
            Some("return") => *open.entry(a).or_default() -= 1,
            _ => {}
        }
    }
    let mut unbalanced: Vec<_> = open.into_iter().filter(|(_, n)| *n != 0).collect();
    unbalanced.sort();
    if !unbalanced.is_empty() {
        bad.push(format!(
            "unbalanced activations (id, calls - returns): {unbalanced:?}"
        ));
    }
    bad
}

/// A readable difference between two multisets of thread sequences.
fn diff(a_name: &str, a: &[Vec<String>], b_name: &str, b: &[Vec<String>]) -> Option<String> {
    if a == b {
        return None;
    }
    if a.len() != b.len() {
        return Some(format!(
            "{} threads in {a_name}, {} in {b_name}",
            a.len(),
            b.len()
        ));
    }
    for (t, (x, y)) in a.iter().zip(b).enumerate() {
        if x == y {
            continue;
        }
        let i = x.iter().zip(y).take_while(|(p, q)| p == q).count();
        let lo = i.saturating_sub(4);
        let show = |s: &[String]| {
            s.iter()
                .enumerate()
                .skip(lo)
                .take(i - lo + 5)
                .map(|(n, l)| format!("      {}{n:>4} {l}", if n == i { ">" } else { " " }))
                .collect::<Vec<_>>()
                .join("\n")
        };
        return Some(format!(
            "thread #{t}: first difference at event {i} ({} vs {} events)\n    {a_name}:\n{}\n    {b_name}:\n{}",
            x.len(),
            y.len(),
            show(x),
            show(y)
        ));
    }
    None
}

fn report(label: &str, results: &[(String, Vec<String>)]) {
    let failed: Vec<&(String, Vec<String>)> =
        results.iter().filter(|(_, b)| !b.is_empty()).collect();
    for (name, _) in results {
        let ok = !failed.iter().any(|(n, _)| n == name);
        eprintln!(
            "witness {label} {name}: {}",
            if ok { "pass" } else { "FAIL" }
        );
    }
    if !failed.is_empty() {
        let mut msg = format!(
            "{} of {} programs disagree on {label}:\n",
            failed.len(),
            results.len()
        );
        for (name, bad) in failed {
            for b in bad {
                msg.push_str(&format!("  {name}: {b}\n"));
            }
        }
        panic!("{msg}");
    }
}

/// USDT and hook witnesses of every program on one interpreter with USDT probes.
fn two_witnesses(py: Python) {
    if let Some(why) = py.missing() {
        flux_skip::skip(&format!("two witnesses on {}", py.label), &why);
        return;
    }
    let mut results = Vec::new();
    for prog in corpus() {
        let name = prog.file_stem().unwrap().to_str().unwrap().to_string();
        let (usdt, file) = py.trace(&prog, "usdt");
        let (hook, file_h) = py.trace(&prog, "hook");
        let mut bad: Vec<String> = Vec::new();
        bad.extend(
            check_run(&usdt, &file)
                .into_iter()
                .map(|b| format!("--calls usdt: {b}")),
        );
        bad.extend(
            check_run(&hook, &file_h)
                .into_iter()
                .map(|b| format!("--calls hook: {b}")),
        );
        let u = per_thread(&usdt.events, &file, |e| Some(strict_line(e)));
        let h = per_thread(&hook.events, &file_h, |e| Some(strict_line(e)));
        if let Some(d) = diff("usdt", &u, "hook", &h) {
            bad.push(d);
        }
        results.push((name, bad));
    }
    report(&format!("python{} usdt=hook", py.label), &results);
}

#[test]
fn python311_usdt_and_hook_witnesses_agree_on_every_program() {
    two_witnesses(py311());
}

#[test]
fn python315_usdt_and_hook_witnesses_agree_on_every_program() {
    two_witnesses(py315());
}

/// Where 3.13's semantics differ from 3.15's, measured with a bare `sys.monitoring` client:
/// 3.13 closes a generator suspended outside any `try` without resuming its frame (no
/// PY_THROW/PY_UNWIND: there is no activation), 3.14+ resumes it to throw `GeneratorExit`,
/// which unwinds at once. Those empty activations (a call directly followed by its unwind with
/// `GeneratorExit`) are left out of both sides of a 3.13 comparison; a close that runs code
/// (a `finally`, an `except GeneratorExit`) is an activation on every version and is compared.
fn without_empty_closes(events: &[Value]) -> Vec<Value> {
    let mut drop = std::collections::HashSet::new();
    // Per thread, the last call or return (the exception record of the thrown-in
    // GeneratorExit may sit between the two).
    let mut last: HashMap<(u64, u64), usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if e["ev"] != "call" && e["ev"] != "return" {
            continue;
        }
        let k = (
            e["pid"].as_u64().unwrap_or(0),
            e["tid"].as_u64().unwrap_or(0),
        );
        if e["ev"] == "return" && e["unwind"] == true && e["exc"]["type"] == "GeneratorExit" {
            if let Some(&j) = last.get(&k) {
                let c = &events[j];
                if c["ev"] == "call" && c["activation"] == e["activation"] {
                    drop.insert(e["activation"].as_u64());
                }
            }
        }
        last.insert(k, i);
    }
    events
        .iter()
        .filter(|e| !drop.contains(&e["activation"].as_u64()))
        .cloned()
        .collect()
}

/// Hook-only interpreters: complete, balanced, and the same calls/returns as 3.15's hook.
fn hook_only(py: Python) {
    if let Some(why) = py.missing() {
        flux_skip::skip(&format!("hook witness on {}", py.label), &why);
        return;
    }
    let reference = py315();
    let reference = reference.missing().is_none().then_some(reference);
    if reference.is_none() {
        flux_skip::skip(
            &format!("the comparison of {} with 3.15", py.label),
            "no python3.15 rootfs",
        );
    }
    let mut results = Vec::new();
    for prog in corpus() {
        let name = prog.file_stem().unwrap().to_str().unwrap().to_string();
        let (t, file) = py.trace(&prog, "hook");
        let mut bad = check_run(&t, &file);
        if let Some(r) = &reference {
            let (rt, rfile) = r.trace(&prog, "hook");
            bad.extend(
                check_run(&rt, &rfile)
                    .into_iter()
                    .map(|b| format!("3.15 --calls hook: {b}")),
            );
            let (mine, theirs) = if py.label == "3.13" {
                (
                    without_empty_closes(&t.events),
                    without_empty_closes(&rt.events),
                )
            } else {
                (t.events.clone(), rt.events.clone())
            };
            let mine = per_thread(&mine, &file, call_line);
            let theirs = per_thread(&theirs, &rfile, call_line);
            if let Some(d) = diff(py.label, &mine, "3.15", &theirs) {
                bad.push(d);
            }
        }
        results.push((name, bad));
    }
    report(
        &format!("python{} hook (calls = 3.15's)", py.label),
        &results,
    );
}

#[test]
fn python313_hook_witness_is_complete_and_agrees_with_315() {
    hook_only(py313());
}

#[test]
fn python314_hook_witness_is_complete_and_agrees_with_315() {
    hook_only(py314());
}

#[test]
fn the_corpus_is_big_enough() {
    if std::env::var_os("FLUX_WITNESS_ONLY").is_none() {
        assert!(corpus().len() >= 30, "{} programs", corpus().len());
    }
}
