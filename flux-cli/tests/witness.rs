//! Three witnesses, one truth. For every program of `tests/witness/` and every interpreter here:
//! - `flux trace --calls usdt` (calls/returns from CPython's USDT probes, the hook adding lines,
//!   values and exceptions) and `flux trace --calls hook` (the in-process hook alone) must report
//!   the same activations, lines, locals, values, unwinds and exceptions of the program's own
//!   file, thread by thread;
//! - flux's trace and a plain `sys.settrace` reference (`tests/reference/reference.py`, which
//!   shares no code or bookkeeping with the hook: see its doc for what each of its events means
//!   and what it cannot see) must report the same calls (fresh or resumed), returns (returned,
//!   suspended or unwound), lines, exceptions (raised, propagated, re-raised) and handlers, with
//!   the same relative depths. On 3.11 the two flux witnesses share the hook's exception and
//!   frame logic; the reference is what catches a defect of that logic.
//!
//! A disagreement is a bug in flux: there is no tolerance here. What one side does not define
//! is left out of both, exactly: values and locals (the reference renders none); in USDT mode,
//! how an activation of *untargeted* code ended (USDT's returns do not say; only the `scoped/`
//! programs have untargeted code). Whether a call is a fresh start or a resumption is compared
//! for all code: the hook marks every fresh start of generator code.
//!
//! Interpreters: Debian bookworm's `/usr/bin/python3.11` (USDT returns and lines; entries from
//! the hook), sid's python3.15 in a chroot (USDT entries and returns). python3.13 and 3.14 have
//! no USDT probes at all: there the hook alone must give a complete, balanced trace whose
//! calls/returns of the program equal 3.15's hook witness, and equal the reference.
//!
//! Each program targets itself (`{"files": ["<name>.py"]}`), so every line, local and value of
//! the file is recorded. Threads get different tids from run to run, so the per-thread
//! sequences are compared as a multiset (sorted). `FLUX_WITNESS_ONLY=name[,name]` limits a run
//! to some programs while debugging.
//!
//! A program may say, in a line `# witness: incomplete on 3.11: <text>`, that flux cannot
//! trace it completely on that interpreter: the trace must then be marked incomplete with a
//! problem containing `<text>` (never a complete trace that misses calls), and nothing else is
//! compared there (a scoped program: under each scope it runs with).
//!
//! `tests/witness/scoped/test_*.py` are pytest files run under each `scope` (`run`, `tests`,
//! `targets`), targeting the functions their first line names (`# targets: a, b`): with
//! `tests` the reference's events inside test protocols are compared, with `targets` those
//! inside activations of targeted code; `# witness: scopes tests, targets` limits the scopes a
//! program runs with (a fork inside a test window, which only the scopes with windows lose).
//! pytest comes from the images' wheelhouse
//! (`.flux-cache/wheelhouse`, made by `cargo xtask images`); without it they are skipped, loudly.
//!
//! Needs root, a uprobe-capable kernel and the root filesystems of `cargo xtask images`; where
//! one is missing the test says `skipping: …` and returns.

use crate::common::{cannot_trace, rootfs, tempdir, trace_with_env, witness_line, Traced, PY311};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn witness_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/witness")
}

fn only() -> Option<Vec<String>> {
    std::env::var("FLUX_WITNESS_ONLY").ok().map(|s| {
        s.split(',')
            .map(|x| x.trim().trim_end_matches(".py").to_string())
            .collect()
    })
}

/// The `.py` files of `dir` (not of its subdirectories), or those `FLUX_WITNESS_ONLY` names.
fn programs_in(dir: &Path) -> Vec<PathBuf> {
    let only = only();
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the witness directory exists")
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

fn corpus() -> Vec<PathBuf> {
    programs_in(&witness_dir())
}

fn scoped_corpus() -> Vec<PathBuf> {
    programs_in(&witness_dir().join("scoped"))
}

/// What a program says about itself in its header comments.
#[derive(Default)]
struct Header {
    /// `# witness: incomplete on X.Y: text`: (interpreter label, text).
    incomplete: Vec<(String, String)>,
    /// `# targets: a, b` (scoped programs): the config's `functions`.
    functions: Vec<String>,
    /// `# answer: EXTRACTOR {params} -> {expected}` (scoped programs): what the extractor must
    /// answer on flux's trace under every scope (the keys of `expected` are compared).
    answers: Vec<(String, Value, Value)>,
    /// `# witness: scopes a, b` (scoped programs): the scopes it runs with (all when empty).
    scopes: Vec<String>,
    /// `# witness: gc-timing`: the program's finalizers run when the cyclic GC does, and a
    /// tracer's own allocations move that point, so each side's events are compared as a
    /// multiset (sorted, depths and locals left out): the same events, in whatever order.
    gc_timing: bool,
}

fn header(prog: &Path) -> Header {
    let text = std::fs::read_to_string(prog).unwrap();
    let mut h = Header::default();
    for l in text.lines().take_while(|l| l.starts_with('#')) {
        if let Some(r) = l.strip_prefix("# witness: incomplete on ") {
            let (label, why) = r.split_once(": ").expect("`on X.Y: text`");
            h.incomplete.push((label.to_string(), why.to_string()));
        }
        if let Some(r) = l.strip_prefix("# witness: scopes ") {
            h.scopes = r.split(',').map(|s| s.trim().to_string()).collect();
        }
        if l.trim() == "# witness: gc-timing" {
            h.gc_timing = true;
        }
        if let Some(r) = l.strip_prefix("# targets: ") {
            h.functions = r.split(',').map(|f| f.trim().to_string()).collect();
        }
        if let Some(r) = l.strip_prefix("# answer: ") {
            let (name, rest) = r
                .split_once(' ')
                .expect("`# answer: NAME {params} -> {answer}`");
            let (params, want) = rest.split_once(" -> ").expect("` -> ` before the answer");
            h.answers.push((
                name.to_string(),
                serde_json::from_str(params).expect("params: JSON"),
                serde_json::from_str(want).expect("answer: JSON"),
            ));
        }
    }
    h
}

/// How a program runs: as a script, or as a pytest file under a scope.
#[derive(Clone, Copy, PartialEq)]
enum Run<'a> {
    Script,
    Pytest {
        scope: &'a str,
        functions: &'a [String],
    },
}

impl Run<'_> {
    fn scope(&self) -> &str {
        match self {
            Run::Script => "run",
            Run::Pytest { scope, .. } => scope,
        }
    }
    fn functions(&self) -> &[String] {
        match self {
            Run::Script => &[],
            Run::Pytest { functions, .. } => functions,
        }
    }
    fn config(&self, name: &str) -> String {
        serde_json::json!({
            "files": [name],
            "functions": self.functions(),
            "scope": self.scope(),
        })
        .to_string()
    }
}

/// pytest and its dependencies unpacked from the images' wheelhouse (`None`: no wheelhouse).
fn vendored_pytest() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let cache = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .join(".flux-cache/wheelhouse");
        // pytest's dependencies (pygments since pytest 9), all pure Python.
        let want = ["pytest-", "pluggy-", "iniconfig-", "packaging-"];
        let optional = ["pygments-"];
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&cache)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .collect();
        dirs.sort();
        for d in dirs {
            let mut wheels: Vec<PathBuf> = Vec::new();
            let files: Vec<PathBuf> = std::fs::read_dir(&d)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .collect();
            let find = |w: &str| {
                files.iter().find(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    n.starts_with(w) && n.ends_with("-none-any.whl")
                })
            };
            wheels.extend(want.iter().filter_map(|w| find(w)).cloned());
            if wheels.len() != want.len() {
                continue;
            }
            wheels.extend(optional.iter().filter_map(|w| find(w)).cloned());
            let out =
                std::env::temp_dir().join(format!("flux-witness-pytest-{}", std::process::id()));
            for w in &wheels {
                let st = Command::new(PY311)
                    .args(["-m", "zipfile", "-e"])
                    .arg(w)
                    .arg(&out)
                    .status()
                    .ok()?;
                assert!(st.success(), "unpacking {}", w.display());
            }
            return Some(out);
        }
        None
    })
    .as_deref()
}

/// One interpreter: the host's, or one inside a root filesystem (run through `chroot`).
struct Python {
    label: &'static str,
    /// The interpreter as the program sees it.
    exe: &'static str,
    root: Option<PathBuf>,
}

/// A program placed where an interpreter runs it.
struct Placed {
    /// Its path as the program sees it.
    path: String,
    /// Directory to remove afterwards (chroot).
    cleanup: Option<PathBuf>,
    /// `PYTHONPATH` (as the program sees it) with pytest, for a pytest run.
    pythonpath: Option<String>,
}

impl Drop for Placed {
    fn drop(&mut self) {
        if let Some(d) = &self.cleanup {
            let _ = std::fs::remove_dir_all(d);
        }
    }
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

    /// Put `prog` (and for pytest, pytest itself) where this interpreter sees it; in a
    /// directory of its own, which keeps the program's file name (its target).
    fn place(&self, prog: &Path, run: Run) -> Placed {
        let name = prog.file_name().unwrap().to_str().unwrap();
        let stem = prog.file_stem().unwrap().to_str().unwrap();
        let (host_dir, seen_dir) = match &self.root {
            None => {
                let d = tempdir().keep(); // Placed's cleanup removes it
                (d.clone(), d.display().to_string())
            }
            Some(root) => {
                let t = tempdir();
                let inside = format!(
                    "/tmp/{}",
                    t.file_name()
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .replace("flux-test", &format!("flux-witness-{stem}"))
                );
                let _ = std::fs::remove_dir_all(&t);
                let host = root.join(inside.trim_start_matches('/'));
                std::fs::create_dir_all(&host).unwrap();
                (host, inside)
            }
        };
        std::fs::copy(prog, host_dir.join(name)).unwrap();
        std::fs::copy(reference_py(), host_dir.join("reference.py")).unwrap();
        let pythonpath = match run {
            Run::Script => None,
            Run::Pytest { .. } => {
                let src = vendored_pytest().expect("checked by the caller");
                let st = Command::new("cp")
                    .arg("-r")
                    .arg(src)
                    .arg(host_dir.join("site"))
                    .status()
                    .unwrap();
                assert!(st.success());
                Some(format!("{seen_dir}/site"))
            }
        };
        Placed {
            path: format!("{seen_dir}/{name}"),
            cleanup: Some(host_dir),
            pythonpath,
        }
    }

    /// The command that runs `placed` under `run` (after `prefix`, e.g. the reference).
    fn command(&self, placed: &Placed, run: Run, prefix: &[String]) -> Vec<String> {
        let mut cmd: Vec<String> = Vec::new();
        if let Some(r) = &self.root {
            if matches!(run, Run::Pytest { .. }) {
                // Scopes "tests"/"targets" need /proc (the hook reads /proc/self/maps to find
                // the probes' semaphores): mounted in a mount namespace of the run's own, so
                // the shared root filesystem never sees it.
                cmd.extend(
                    [
                        "unshare",
                        "--mount",
                        "--propagation",
                        "private",
                        "--",
                        "sh",
                        "-c",
                        "mount -t proc proc \"$0/proc\" && exec chroot \"$0\" \"$@\"",
                    ]
                    .map(String::from),
                );
                cmd.push(r.display().to_string());
            } else {
                cmd.push("chroot".into());
                cmd.push(r.display().to_string());
            }
        }
        cmd.push(self.exe.into());
        cmd.extend(prefix.iter().cloned());
        match run {
            Run::Script => cmd.push(placed.path.clone()),
            Run::Pytest { .. } => {
                let dir = placed.path.rsplit_once('/').unwrap().0;
                cmd.extend(
                    [
                        "-m",
                        "pytest",
                        "-q",
                        "-p",
                        "no:cacheprovider",
                        "--rootdir",
                        dir,
                    ]
                    .map(String::from),
                );
                cmd.push(placed.path.clone());
            }
        }
        cmd
    }

    /// Trace `prog` with `--calls calls`; the events and the program's path as it ran.
    fn trace(&self, prog: &Path, calls: &str, run: Run) -> (Traced, String) {
        let name = prog.file_name().unwrap().to_str().unwrap();
        let placed = self.place(prog, run);
        let dir = tempdir();
        let cfg = dir.join("cfg.json");
        std::fs::write(&cfg, run.config(name)).unwrap();
        let cfg = cfg.to_str().unwrap();
        let mut args = vec!["--calls", calls, "--config", cfg];
        let (root, py);
        if let Some(r) = &self.root {
            root = r.display().to_string();
            py = self.host_exe().display().to_string();
            args.extend(["--root", &root, "--python", &py]);
        }
        let cmd = self.command(&placed, run, &[]);
        let cmd: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
        let env: Vec<(&str, &str)> = placed
            .pythonpath
            .as_deref()
            .map(|p| ("PYTHONPATH", p))
            .into_iter()
            .collect();
        let t = trace_with_env(&args, &cmd, &env);
        let _ = std::fs::remove_dir_all(&dir);
        (t, placed.path.clone())
    }

    /// Run `prog` under the settrace reference; its events, or why it failed.
    fn reference(&self, prog: &Path, run: Run) -> Result<Vec<Value>, String> {
        let name = prog.file_name().unwrap().to_str().unwrap();
        let placed = self.place(prog, run);
        let dir = placed.path.rsplit_once('/').unwrap().0.to_string();
        let out_seen = format!("{dir}/reference.jsonl");
        let out_host = placed.cleanup.as_ref().unwrap().join("reference.jsonl");
        let prefix = vec![
            format!("{dir}/reference.py"),
            out_seen,
            format!("/{name}"),
            run.functions().join(","),
            "--".to_string(),
        ];
        let cmd = self.command(&placed, run, &prefix);
        let mut c = Command::new(&cmd[0]);
        c.args(&cmd[1..]);
        if let Some(p) = &placed.pythonpath {
            c.env("PYTHONPATH", p);
        }
        let out = c.output().expect("run the reference");
        if !out.status.success() {
            return Err(format!(
                "the reference exited with {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = std::fs::read_to_string(&out_host).map_err(|e| e.to_string())?;
        Ok(text
            .lines()
            .map(|l| serde_json::from_str(l).expect("the reference writes JSON lines"))
            .collect())
    }
}

fn reference_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/reference.py")
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

/// One event as the reference and flux must both report it (see the module doc): `d` is the
/// depth relative to the thread's first compared event, `known` whether how it ended / that
/// it resumed is defined on both sides.
#[expect(
    clippy::too_many_arguments,
    reason = "one argument per field of the line, in the order the line shows them"
)]
fn ref_line(
    ev: &str,
    q: &str,
    line: u64,
    d: i64,
    known: bool,
    resume: bool,
    how: &str,
    exc: (&str, &str, &str),
) -> String {
    match ev {
        // Whether a call is a fresh start or a resumption is defined for every code: extractors
        // count fresh calls of untargeted code too (a genexpr read as called at each
        // resumption: issue 28).
        "call" => format!("call {q} {line} d{d} resume={resume}"),
        "return" if known => format!("return {q} {line} d{d} {how}"),
        "return" => format!("return {q} {line} d{d}"),
        "exception" => format!("exception {q} {line} d{d} {} {} m={}", exc.0, exc.2, exc.1),
        "handled" => format!("handled {q} {line} d{d} {} m={}", exc.0, exc.1),
        _ => format!("{ev} {q} {line} d{d}"),
    }
}

/// Per thread, events as (segment, depth, render): each segment's depths are rebased on its
/// first event (scope "targets": each extent of targeted code starts anew, as flux's stack
/// does), then each thread's sequence is rendered; the multiset of threads, sorted.
type Seqs = HashMap<(u64, u64), Vec<(u64, i64, Box<dyn Fn(i64) -> String>)>>;

fn relative(seqs: Seqs) -> Vec<Vec<String>> {
    let mut v: Vec<Vec<String>> = seqs
        .into_values()
        .map(|s| {
            let mut base: HashMap<u64, i64> = HashMap::new();
            s.into_iter()
                .map(|(seg, d, f)| f(d - *base.entry(seg).or_insert(d)))
                .collect()
        })
        .collect();
    v.sort();
    v
}

/// The reference's view: per thread (and, scope "targets", per extent), what flux must match.
fn reference_view(events: &[Value], scope: &str, usdt: bool) -> Vec<Vec<String>> {
    let mut seqs: Seqs = HashMap::new();
    for e in events {
        let tid = e["tid"].as_u64().unwrap();
        let (win, ext) = (e["win"] == true, e["ext"] == true);
        let kept = match scope {
            "tests" => win,
            "targets" => win && ext,
            _ => true,
        };
        if !kept {
            continue;
        }
        let seg = if scope == "targets" {
            e["xn"].as_u64().unwrap()
        } else {
            0
        };
        let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
        let (ev, q, how) = (s("ev"), s("q"), s("how"));
        let (ty, msg, kind) = (s("exc"), s("msg"), s("kind"));
        let line = e["line"].as_u64().unwrap();
        let known = e["target"] == true || !usdt;
        let resume = e["resume"] == true;
        seqs.entry((0, tid)).or_default().push((
            seg,
            e["d"].as_i64().unwrap(),
            Box::new(move |d| ref_line(&ev, &q, line, d, known, resume, &how, (&ty, &msg, &kind))),
        ));
    }
    relative(seqs)
}

/// flux's trace seen as the reference sees the program (`targeted`: the config's functions).
fn flux_view(events: &[Value], file: &str, functions: &[String], usdt: bool) -> Vec<Vec<String>> {
    let targeted = |q: &str| {
        functions.is_empty()
            || functions
                .iter()
                .any(|f| q == f || q.starts_with(&format!("{f}.")))
    };
    let mut seqs: Seqs = HashMap::new();
    for e in events.iter().filter(|e| e["file"] == file) {
        let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
        let ev = s("ev");
        let key = (
            e["pid"].as_u64().unwrap_or(0),
            e["tid"].as_u64().unwrap_or(0),
        );
        let depth = e["depth"].as_i64().unwrap_or(0);
        if !["call", "return", "line", "exception", "handled"].contains(&ev.as_str()) {
            continue;
        }
        let q = e["qualname"]
            .as_str()
            .filter(|q| !q.is_empty())
            .unwrap_or(e["func"].as_str().unwrap_or(""))
            .to_string();
        let how = if e["unwind"] == true {
            "unwind"
        } else if e["suspended"] == true {
            "yield"
        } else {
            "return"
        };
        let ty = e["exc"]["type"].as_str().unwrap_or("").to_string();
        let msg = e["exc"]["msg"].as_str().unwrap_or("").to_string();
        let kind = s("outcome");
        let line = e["line"].as_u64().unwrap();
        let known = targeted(&q) || !usdt;
        let resume = e["frame"] != e["activation"];
        seqs.entry(key).or_default().push((
            0,
            depth,
            Box::new(move |d| ref_line(&ev, &q, line, d, known, resume, how, (&ty, &msg, &kind))),
        ));
    }
    relative(seqs)
}

/// What is wrong with one run on its own: exit status, completeness, balance.
fn check_run(t: &Traced, file: &str, pytest: bool) -> Vec<String> {
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
    if !pytest
        && !mine
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

/// A program said flux cannot trace it completely on `label`: is the trace marked so, with
/// the reason it gave? (`None`: the program expects a complete trace there.)
fn expected_incomplete(t: &Traced, h: &Header, label: &str) -> Option<Vec<String>> {
    let (_, why) = h.incomplete.iter().find(|(l, _)| l == label)?;
    let err = t.stderr();
    let marked = err.contains("INCOMPLETE") && err.contains(why.as_str());
    Some(if marked && !t.out.status.success() {
        Vec::new()
    } else {
        vec![format!(
            "expected an incomplete trace naming {why:?}; flux said (status {:?}):\n    {}",
            t.out.status.code(),
            err.lines().rev().take(6).collect::<Vec<_>>().join("\n    ")
        )]
    })
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

/// [`diff`], of the multisets of events when the program says `# witness: gc-timing`.
fn diff_h(
    h: &Header,
    a_name: &str,
    a: &[Vec<String>],
    b_name: &str,
    b: &[Vec<String>],
) -> Option<String> {
    if !h.gc_timing {
        return diff(a_name, a, b_name, b);
    }
    let canon = |v: &[Vec<String>]| -> Vec<Vec<String>> {
        let mut v: Vec<Vec<String>> = v
            .iter()
            .map(|t| {
                let mut t: Vec<String> = t
                    .iter()
                    .map(|l| {
                        // Locals too: a frame's values may show a finalizer's effect or not.
                        let l = match l.find(" l=") {
                            Some(i) => {
                                let j = l[i..].find(" s=").map_or(l.len(), |j| i + j);
                                format!("{}{}", &l[..i], &l[j..])
                            }
                            None => l.clone(),
                        };
                        l.split(' ')
                            .filter(|w| {
                                !(w.len() > 1
                                    && w.starts_with('d')
                                    && w[1..].trim_start_matches('-').parse::<u32>().is_ok())
                            })
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect();
                t.sort();
                t
            })
            .collect();
        v.sort();
        v
    };
    diff(a_name, &canon(a), b_name, &canon(b))
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

/// flux's trace against the reference's run of the same program.
fn against_reference(
    py: &Python,
    h: &Header,
    prog: &Path,
    run: Run,
    flux: &Traced,
    file: &str,
    usdt: bool,
) -> Option<String> {
    let r = match py.reference(prog, run) {
        Ok(r) => r,
        Err(e) => return Some(e),
    };
    let mine = flux_view(&flux.events, file, run.functions(), usdt);
    let theirs = reference_view(&r, run.scope(), usdt);
    diff_h(h, "flux", &mine, "reference", &theirs)
}

/// USDT, hook and reference witnesses of every program on one interpreter with USDT probes.
fn three_witnesses(py: Python) {
    if let Some(why) = py.missing() {
        flux_skip::skip(&format!("two witnesses on {}", py.label), &why);
        return;
    }
    let mut results = Vec::new();
    for prog in corpus() {
        let name = prog.file_stem().unwrap().to_str().unwrap().to_string();
        let h = header(&prog);
        let (usdt, file) = py.trace(&prog, "usdt", Run::Script);
        if let Some(bad) = expected_incomplete(&usdt, &h, py.label) {
            results.push((name, bad));
            continue;
        }
        let (hook, file_h) = py.trace(&prog, "hook", Run::Script);
        let mut bad: Vec<String> = Vec::new();
        bad.extend(
            check_run(&usdt, &file, false)
                .into_iter()
                .map(|b| format!("--calls usdt: {b}")),
        );
        bad.extend(
            check_run(&hook, &file_h, false)
                .into_iter()
                .map(|b| format!("--calls hook: {b}")),
        );
        let u = per_thread(&usdt.events, &file, |e| Some(strict_line(e)));
        let hk = per_thread(&hook.events, &file_h, |e| Some(strict_line(e)));
        if let Some(d) = diff_h(&h, "usdt", &u, "hook", &hk) {
            bad.push(d);
        }
        if let Some(d) = against_reference(&py, &h, &prog, Run::Script, &usdt, &file, true) {
            bad.push(format!("usdt vs the settrace reference: {d}"));
        }
        results.push((name, bad));
    }
    report(&format!("python{} usdt=hook=reference", py.label), &results);
}

#[test]
fn python311_usdt_hook_and_reference_witnesses_agree_on_every_program() {
    three_witnesses(py311());
}

#[test]
fn python315_usdt_hook_and_reference_witnesses_agree_on_every_program() {
    three_witnesses(py315());
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

/// Hook-only interpreters: complete, balanced, the same calls/returns as 3.15's hook, and the
/// reference's view.
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
        let h = header(&prog);
        let (t, file) = py.trace(&prog, "hook", Run::Script);
        if let Some(bad) = expected_incomplete(&t, &h, py.label) {
            results.push((name, bad));
            continue;
        }
        let mut bad = check_run(&t, &file, false);
        if let Some(r) = &reference {
            let (rt, rfile) = r.trace(&prog, "hook", Run::Script);
            bad.extend(
                check_run(&rt, &rfile, false)
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
            if let Some(d) = diff_h(&h, py.label, &mine, "3.15", &theirs) {
                bad.push(d);
            }
        }
        if let Some(d) = against_reference(&py, &h, &prog, Run::Script, &t, &file, false) {
            bad.push(format!("hook vs the settrace reference: {d}"));
        }
        results.push((name, bad));
    }
    report(
        &format!("python{} hook (calls = 3.15's, = reference)", py.label),
        &results,
    );
}

#[test]
fn python313_hook_witness_is_complete_and_agrees_with_315_and_the_reference() {
    hook_only(py313());
}

#[test]
fn python314_hook_witness_is_complete_and_agrees_with_315_and_the_reference() {
    hook_only(py314());
}

/// The pytest programs under every scope: flux (USDT where the interpreter has it, else the
/// hook) against the reference.
fn scoped(py: Python) {
    let what = format!("scoped witnesses on {}", py.label);
    if let Some(why) = py.missing() {
        flux_skip::skip(&what, &why);
        return;
    }
    if vendored_pytest().is_none() {
        flux_skip::skip(
            &what,
            "no pytest wheels in .flux-cache/wheelhouse (run `cargo xtask images`)",
        );
        return;
    }
    let usdt = py.label == "3.11" || py.label == "3.15";
    let calls = if usdt { "usdt" } else { "hook" };
    let mut results = Vec::new();
    for prog in scoped_corpus() {
        let h = header(&prog);
        for scope in ["run", "tests", "targets"] {
            if !h.scopes.is_empty() && !h.scopes.iter().any(|s| s == scope) {
                continue;
            }
            let name = format!(
                "{} (scope {scope})",
                prog.file_stem().unwrap().to_str().unwrap()
            );
            let run = Run::Pytest {
                scope,
                functions: &h.functions,
            };
            let (t, file) = py.trace(&prog, calls, run);
            if let Some(bad) = expected_incomplete(&t, &h, py.label) {
                results.push((name, bad));
                continue;
            }
            let mut bad = check_run(&t, &file, true);
            if let Some(d) = against_reference(&py, &h, &prog, run, &t, &file, usdt) {
                bad.push(format!("{calls} vs the settrace reference: {d}"));
            }
            bad.extend(wrong_answers(&h, &t));
            results.push((name, bad));
        }
    }
    report(&format!("python{} scoped = reference", py.label), &results);
}

/// The program's `# answer:` lines that flux's trace does not give (issue 23.2: where an
/// exception was raised must not depend on what the scope traces).
fn wrong_answers(h: &Header, t: &Traced) -> Vec<String> {
    if h.answers.is_empty() {
        return Vec::new();
    }
    let trace = flux_trace::Trace {
        meta: flux_trace::Meta {
            complete: true,
            ..Default::default()
        },
        events: t
            .events
            .iter()
            .map(|e| serde_json::from_value(e.clone()).expect("a trace event"))
            .collect(),
        facts: Default::default(),
    };
    let mut bad = Vec::new();
    for (name, params, want) in &h.answers {
        let p = flux_extract::params(params.clone()).expect("the program's params");
        match flux_extract::extract(&trace, name, &p) {
            Ok(got) => {
                let got = flux_extract::testkit::pick(&got, want);
                if &got != want {
                    bad.push(format!("{name} {params}: {got}, not {want}"));
                }
            }
            Err(e) => bad.push(format!("{name} {params}: {e}")),
        }
    }
    bad
}

#[test]
fn python311_scoped_programs_agree_with_the_reference_under_every_scope() {
    scoped(py311());
}

#[test]
fn python315_scoped_programs_agree_with_the_reference_under_every_scope() {
    scoped(py315());
}

#[test]
fn python314_scoped_programs_agree_with_the_reference_under_every_scope() {
    scoped(py314());
}

#[test]
fn python313_scoped_programs_agree_with_the_reference_under_every_scope() {
    scoped(py313());
}

#[test]
fn the_corpus_is_big_enough() {
    if std::env::var_os("FLUX_WITNESS_ONLY").is_none() {
        assert!(corpus().len() >= 30, "{} programs", corpus().len());
        assert!(!scoped_corpus().is_empty());
    }
}
