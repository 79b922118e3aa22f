//! The agent's side of the in-process hook (`flux-hook/`): ship it, configure it, and receive its
//! streams.
//!
//! The hook package is embedded in the binary and written into a run directory, so an installed
//! `flux` needs nothing else on disk, and the repository under test is never touched (it is put
//! on `PYTHONPATH` with a `sitecustomize`). Every process of the traced program connects once to
//! a Unix socket the agent listens on and streams JSON-lines records (protocol in
//! `flux-hook/README.md`). A stream that ends without its `bye`, or whose `bye` count disagrees
//! with what arrived, makes the trace incomplete: nothing is dropped silently on either side.
use anyhow::{Context, Result};
use flux_trace::TracingConfig;
use serde_json::Value as J;
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use tokio::io::AsyncBufReadExt;

const FILES: &[(&str, &str)] = &[
    (
        "sitecustomize.py",
        include_str!("../../flux-hook/sitecustomize.py"),
    ),
    (
        "flux_hook/__init__.py",
        include_str!("../../flux-hook/flux_hook/__init__.py"),
    ),
    (
        "flux_hook/_core.py",
        include_str!("../../flux-hook/flux_hook/_core.py"),
    ),
    (
        "flux_hook/_settrace.py",
        include_str!("../../flux-hook/flux_hook/_settrace.py"),
    ),
    (
        "flux_hook/_sysmon.py",
        include_str!("../../flux-hook/flux_hook/_sysmon.py"),
    ),
    (
        "flux_hook/pytest_plugin.py",
        include_str!("../../flux-hook/flux_hook/pytest_plugin.py"),
    ),
];

/// Write the hook package into `dir` (which becomes a `PYTHONPATH` entry), readable by anyone
/// (containers run the test as an unprivileged user).
pub fn install(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for (rel, text) in FILES {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))?;
        }
        std::fs::write(&p, text)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(())
}

/// What the hook reports about calls (`FLUX_HOOK_CALLS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookCalls {
    /// Every activation start and end: the pure in-process witness.
    All,
    /// Every activation start (3.11, whose entry probe misses Python-to-Python calls).
    Entries,
    /// Starts of generator/coroutine activations only (3.15, whose entry probe cannot tell a
    /// generator's creation from its first resumption).
    Generators,
    /// None: USDT has both ends.
    None,
}

impl HookCalls {
    pub fn as_str(self) -> &'static str {
        match self {
            HookCalls::All => "all",
            HookCalls::Entries => "entries",
            HookCalls::Generators => "generators",
            HookCalls::None => "none",
        }
    }
}

/// Environment that turns the hook on in the traced program, for `plan` on `interp`. Paths are
/// as the program sees them (inside a container they differ from the agent's).
pub fn hook_env(
    interp: &crate::interp::Interpreter,
    plan: &crate::merge::Plan,
    config: &TracingConfig,
    socket_seen: &str,
    hook_dir_seen: &str,
    existing_pythonpath: Option<&str>,
) -> Vec<(String, String)> {
    let pythonpath = match existing_pythonpath {
        Some(p) if !p.is_empty() => format!("{hook_dir_seen}:{p}"),
        _ => hook_dir_seen.to_string(),
    };
    let mut env = vec![
        ("PYTHONPATH".to_string(), pythonpath),
        ("FLUX_HOOK_SOCKET".to_string(), socket_seen.to_string()),
        (
            "FLUX_HOOK_CALLS".to_string(),
            plan.hook_calls.as_str().to_string(),
        ),
        (
            "FLUX_HOOK_CONFIG".to_string(),
            serde_json::to_string(config).expect("config serialises"),
        ),
    ];
    if config.tests {
        env.push(("PYTEST_PLUGINS".into(), "flux_hook.pytest_plugin".into()));
    }
    if config.scope.windows() {
        env.extend(semaphores_var(interp, plan.probes));
    }
    env
}

/// `FLUX_HOOK_SEMAPHORES` for a run scoped to tests (`scope = "tests"`): the file name and
/// file offset of the semaphore of every probe the plan attaches. The hook zeroes them in its
/// process outside test windows, so CPython skips the probes there (no trap at all), and
/// restores the kernel's count inside. `None` when no attached probe has a semaphore.
fn semaphores_var(
    interp: &crate::interp::Interpreter,
    probes: crate::tracer::ProbeSet,
) -> Option<(String, String)> {
    let name = interp
        .probes
        .path
        .file_name()?
        .to_string_lossy()
        .into_owned();
    let mut offs: Vec<u64> = interp
        .probes
        .sites
        .iter()
        .filter(|s| s.provider == "python" && s.semaphore_offset != 0)
        .filter(|s| match s.name.as_str() {
            "function__entry" => probes.entry,
            "function__return" => probes.ret,
            "line" => probes.line,
            _ => false,
        })
        .map(|s| s.semaphore_offset)
        .collect();
    offs.sort_unstable();
    offs.dedup();
    if offs.is_empty() {
        return None;
    }
    let v: Vec<String> = offs.iter().map(|o| format!("{name}:{o:x}")).collect();
    Some(("FLUX_HOOK_SEMAPHORES".into(), v.join(",")))
}

/// A code object as the hook defined it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeDef {
    pub file: String,
    pub name: String,
    pub qualname: String,
    pub firstlineno: u32,
    /// The code's highest line (hooks before it was sent: unknown).
    pub last_line: Option<u32>,
    /// [`CODE_GEN`] | [`CODE_NO_FIRST_LINE`] | [`CODE_TARGET`] (unknown from older hooks).
    pub traits: Option<u32>,
    /// `__name__` of its globals: sent for targeted code in dialect `swe-flux` only.
    pub module: Option<String>,
}

/// A generator, coroutine or async generator.
pub const CODE_GEN: u32 = 1;
/// Its first instruction has no line (`MAKE_CELL`, `COPY_FREE_VARS`, 3.15's generator
/// expressions): 3.15's USDT entry, which reports the line of the frame's current instruction,
/// says 0 for a fresh frame of it.
pub const CODE_NO_FIRST_LINE: u32 = 2;
/// Targeted by the tracing config (lines and values recorded; with scope "targets" the hook
/// reports its activations' starts itself).
pub const CODE_TARGET: u32 = 4;

impl CodeDef {
    /// Whether a USDT entry of this code's (file, name) at `line` may be one of this code's:
    /// `None` when the hook did not say enough to decide.
    pub fn may_enter_at(&self, line: u32) -> Option<bool> {
        if line == 0 {
            return self.traits.map(|t| t & CODE_NO_FIRST_LINE != 0);
        }
        self.last_line
            .map(|last| self.firstlineno <= line && line <= last)
    }

    /// Its lines hold `line` (unknown last line: no).
    pub fn holds_line(&self, line: u32) -> bool {
        self.last_line
            .is_some_and(|last| self.firstlineno <= line && line <= last)
    }

    pub fn is_generator(&self) -> Option<bool> {
        self.traits.map(|t| t & CODE_GEN != 0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    Return,
    Yield,
    Unwind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExcKind {
    Raise,
    Reraise,
    Propagate,
    /// Dialect `swe-flux`: a bare re-raise the hook inferred (3.11 reports no tracer event).
    ReraiseInferred,
    /// Dialect `swe-flux`: 3.11's `StopIteration` at the end of a `yield from`/`await`,
    /// reported to tracers only (not a raise).
    TracerOnly,
}

impl ExcKind {
    /// The event's `outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExcKind::Raise => "raise",
            ExcKind::Reraise => "reraise",
            ExcKind::Propagate => "propagate",
            ExcKind::ReraiseInferred => "reraise-inferred",
            ExcKind::TracerOnly => "tracer-only",
        }
    }
}

pub type Locals = Vec<(String, (String, String))>;

#[derive(Clone, Debug, PartialEq)]
pub enum Rec {
    Call {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        /// Dialect `swe-flux`: opened by `gen.throw()`/`close()` without a tracer call event.
        thrown: bool,
        /// Dialect `swe-flux`, targeted code: locals changed since the frame's previous event
        /// (all of them for a fresh frame).
        locals: Locals,
        deleted: Vec<String>,
    },
    Ret {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        how: How,
        payload: Option<(String, String)>,
        locals: Locals,
        /// Locals gone since the frame's previous event (dialect `swe-flux`).
        deleted: Vec<String>,
    },
    Line {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        locals: Locals,
        deleted: Vec<String>,
    },
    Exc {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        ty: String,
        msg: String,
        kind: ExcKind,
        /// Dialect `swe-flux`: locals changed before the exception, and the exception object
        /// (`type(e).__name__`, plain repr).
        locals: Locals,
        deleted: Vec<String>,
        object: Option<(String, String)>,
    },
    Handled {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        ty: String,
        msg: String,
    },
    TestStart {
        ts: u64,
        tid: u32,
        nodeid: String,
    },
    TestEnd {
        ts: u64,
        tid: u32,
        nodeid: String,
        outcome: String,
    },
    /// `["hx", t0, tid, t1]`: from `ts` to `until` the hook's own work ran in this thread
    /// (3.11's settrace back-end: it may run program code, a `__repr__`, that only USDT sees).
    Internal {
        ts: u64,
        tid: u32,
        until: u64,
    },
    /// `["wo", ts, tid]` / `["wc", ts, tid]` (scope "tests"): a test window opens / closes;
    /// outside windows the process records nothing and its USDT probes are off.
    WindowOpen {
        ts: u64,
        tid: u32,
    },
    WindowClose {
        ts: u64,
        tid: u32,
    },
    /// `["xo", ts, tid]` / `["xc", ts, tid]` (scope "targets"): this thread enters / leaves the
    /// extent of targeted code (its outermost targeted activation starts or resumes / returns,
    /// yields or unwinds). The USDT probes are on only while some thread is inside one.
    ExtentOpen {
        ts: u64,
        tid: u32,
    },
    ExtentClose {
        ts: u64,
        tid: u32,
    },
}

impl Rec {
    pub fn ts(&self) -> u64 {
        match self {
            Rec::Call { ts, .. }
            | Rec::Ret { ts, .. }
            | Rec::Line { ts, .. }
            | Rec::Exc { ts, .. }
            | Rec::Handled { ts, .. }
            | Rec::TestStart { ts, .. }
            | Rec::TestEnd { ts, .. }
            | Rec::Internal { ts, .. }
            | Rec::WindowOpen { ts, .. }
            | Rec::WindowClose { ts, .. }
            | Rec::ExtentOpen { ts, .. }
            | Rec::ExtentClose { ts, .. } => *ts,
        }
    }
    pub fn tid(&self) -> u32 {
        match self {
            Rec::Call { tid, .. }
            | Rec::Ret { tid, .. }
            | Rec::Line { tid, .. }
            | Rec::Exc { tid, .. }
            | Rec::Handled { tid, .. }
            | Rec::TestStart { tid, .. }
            | Rec::TestEnd { tid, .. }
            | Rec::Internal { tid, .. }
            | Rec::WindowOpen { tid, .. }
            | Rec::WindowClose { tid, .. }
            | Rec::ExtentOpen { tid, .. }
            | Rec::ExtentClose { tid, .. } => *tid,
        }
    }
}

/// One process's stream.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    pub pid: u32,
    pub python: String,
    pub mode: String,
    pub calls: String,
    /// `run`; `tests`: the hook recorded only inside test windows (`wo`/`wc` records);
    /// `targets`: and there only inside extents of targeted code (`xo`/`xc` records).
    pub scope: String,
    pub codes: HashMap<u32, CodeDef>,
    pub records: Vec<Rec>,
    /// The record count the hook said it sent, if it said goodbye.
    pub bye: Option<u64>,
    /// Records counted on arrival (definitions included, as the hook counts them).
    pub received: u64,
    /// Lines that could not be parsed, with the reason.
    pub bad: Vec<String>,
    /// What the hook itself reported losing (`lost` records: a callback that could not run at
    /// the recursion limit, tracing switched off behind its back, a fork from C).
    pub lost: Vec<String>,
}

impl Stream {
    /// Why this stream cannot be trusted, if it cannot.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        match self.bye {
            None => p.push(format!(
                "hook stream of pid {} ended without `bye` (process killed, or exec after fork)",
                self.pid
            )),
            Some(n) if n != self.received => p.push(format!(
                "hook stream of pid {}: {} records announced, {} received",
                self.pid, n, self.received
            )),
            _ => {}
        }
        for l in self.lost.iter().take(3) {
            p.push(format!("hook of pid {} lost records: {l}", self.pid));
        }
        for b in self.bad.iter().take(3) {
            p.push(format!("hook stream of pid {}: {b}", self.pid));
        }
        p
    }
}

fn s(v: &J) -> String {
    v.as_str().unwrap_or_default().to_string()
}
fn u(v: &J) -> u64 {
    v.as_u64().unwrap_or(0)
}
fn pair(v: &J) -> Option<(String, String)> {
    let a = v.as_array()?;
    Some((s(a.first()?), s(a.get(1)?)))
}
fn locals(v: &J) -> Locals {
    match v.as_object() {
        Some(m) => m
            .iter()
            .filter_map(|(k, v)| pair(v).map(|p| (k.clone(), p)))
            .collect(),
        None => Vec::new(),
    }
}
/// The names a changed-locals object maps to `null`: gone since the previous event.
fn deleted(v: &J) -> Vec<String> {
    match v.as_object() {
        Some(m) => m
            .iter()
            .filter(|(_, v)| v.is_null())
            .map(|(k, _)| k.clone())
            .collect(),
        None => Vec::new(),
    }
}

impl Stream {
    /// Parse one line of the protocol into this stream.
    pub fn feed(&mut self, line: &str) {
        let v: J = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                self.bad
                    .push(format!("unparseable record ({e}): {:.80}", line));
                return;
            }
        };
        if let Some(o) = v.as_object() {
            if o.contains_key("hello") {
                self.pid = u(&v["pid"]) as u32;
                self.python = s(&v["python"]);
                self.mode = s(&v["mode"]);
                self.calls = s(&v["calls"]);
                self.scope = s(&v["scope"]);
            } else {
                self.bad.push(format!("unexpected object: {:.80}", line));
            }
            return;
        }
        let Some(a) = v.as_array() else {
            self.bad.push(format!("not a record: {:.80}", line));
            return;
        };
        let tag = a.first().and_then(|t| t.as_str()).unwrap_or("");
        let g = |i: usize| a.get(i).unwrap_or(&J::Null);
        if tag == "bye" {
            self.bye = Some(u(g(1)));
            return;
        }
        self.received += 1;
        let (ts, tid) = (u(g(1)), u(g(2)) as u32);
        let rec = match tag {
            "C" => {
                self.codes.insert(
                    u(g(1)) as u32,
                    CodeDef {
                        file: s(g(2)),
                        name: s(g(3)),
                        qualname: s(g(4)),
                        firstlineno: u(g(5)) as u32,
                        last_line: g(6).as_u64().map(|v| v as u32),
                        traits: g(7).as_u64().map(|v| v as u32),
                        module: g(8).as_str().map(str::to_string),
                    },
                );
                return;
            }
            "c" => Rec::Call {
                ts,
                tid,
                code: u(g(3)) as u32,
                frame: u(g(4)),
                line: u(g(5)) as u32,
                thrown: g(6).as_str() == Some("throw"),
                locals: locals(g(7)),
                deleted: deleted(g(7)),
            },
            "r" => Rec::Ret {
                ts,
                tid,
                code: u(g(3)) as u32,
                frame: u(g(4)),
                line: u(g(5)) as u32,
                how: match g(6).as_str() {
                    Some("yield") => How::Yield,
                    Some("unwind") => How::Unwind,
                    _ => How::Return,
                },
                payload: pair(g(7)),
                locals: locals(g(8)),
                deleted: deleted(g(8)),
            },
            "l" => Rec::Line {
                ts,
                tid,
                code: u(g(3)) as u32,
                frame: u(g(4)),
                line: u(g(5)) as u32,
                locals: locals(g(6)),
                deleted: deleted(g(6)),
            },
            "x" => Rec::Exc {
                ts,
                tid,
                code: u(g(3)) as u32,
                frame: u(g(4)),
                line: u(g(5)) as u32,
                ty: s(g(6)),
                msg: s(g(7)),
                kind: match g(8).as_str() {
                    Some("reraise") => ExcKind::Reraise,
                    Some("propagate") => ExcKind::Propagate,
                    Some("reraise-inferred") => ExcKind::ReraiseInferred,
                    Some("tracer-only") => ExcKind::TracerOnly,
                    _ => ExcKind::Raise,
                },
                locals: locals(g(9)),
                deleted: deleted(g(9)),
                object: pair(g(10)),
            },
            "h" => Rec::Handled {
                ts,
                tid,
                code: u(g(3)) as u32,
                frame: u(g(4)),
                line: u(g(5)) as u32,
                ty: s(g(6)),
                msg: s(g(7)),
            },
            "ts" => Rec::TestStart {
                ts,
                tid,
                nodeid: s(g(3)),
            },
            "te" => Rec::TestEnd {
                ts,
                tid,
                nodeid: s(g(3)),
                outcome: s(g(4)),
            },
            "hx" => Rec::Internal {
                ts,
                tid,
                until: u(g(3)),
            },
            "wo" => Rec::WindowOpen { ts, tid },
            "wc" => Rec::WindowClose { ts, tid },
            "xo" => Rec::ExtentOpen { ts, tid },
            "xc" => Rec::ExtentClose { ts, tid },
            "lost" => {
                self.lost.push(format!("thread {tid}: {}", s(g(3))));
                return;
            }
            other => {
                self.bad.push(format!("unknown record tag {other:?}"));
                return;
            }
        };
        self.records.push(rec);
    }
}

/// Everything the hook sent during one run.
#[derive(Clone, Debug, Default)]
pub struct HookCapture {
    pub streams: Vec<Stream>,
    /// Problems outside any one stream (accept errors, streams cut by the grace timeout).
    pub problems: Vec<String>,
}

/// Longest path a `sockaddr_un` holds (108 bytes with its terminating NUL on Linux).
const SUN_PATH_MAX: usize = 107;

/// Bind a listening Unix socket at `path`, however deep the directory: a run directory under a
/// long checkout path (CI clones into one) would exceed `sun_path`, so a long path is bound as
/// `/proc/self/fd/<dir fd>/<name>`, which the kernel resolves to the same directory entry. The
/// hook connects the same way (`_core.connect_unix`).
fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener> {
    use std::os::unix::ffi::OsStrExt;
    if path.as_os_str().as_bytes().len() <= SUN_PATH_MAX {
        return Ok(tokio::net::UnixListener::bind(path)?);
    }
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) => (d, n),
        _ => anyhow::bail!("socket path {} has no directory and name", path.display()),
    };
    // O_PATH: a handle on the directory itself, enough to resolve names under it.
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(dir)
        .with_context(|| format!("opening {}", dir.display()))?;
    let short = Path::new("/proc/self/fd")
        .join(dir.as_raw_fd().to_string())
        .join(name);
    if short.as_os_str().as_bytes().len() > SUN_PATH_MAX {
        anyhow::bail!(
            "socket name {:?} is too long even under /proc/self/fd",
            name
        );
    }
    Ok(tokio::net::UnixListener::bind(&short)?)
}

/// Listening socket for hook streams.
pub struct HookServer {
    listener: tokio::net::UnixListener,
    path: PathBuf,
}

impl HookServer {
    /// Bind at `path` (removed first if stale), world-connectable so an unprivileged program in
    /// a container can connect. Must be called inside a tokio runtime.
    pub fn bind(path: &Path) -> Result<HookServer> {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::remove_file(path);
        let listener = bind_unix(path)
            .with_context(|| format!("binding the hook socket {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))?;
        Ok(HookServer {
            listener,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accept and read connections in the background until [`HookCollector::finish`].
    pub fn spawn(self) -> HookCollector {
        let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
        let path = self.path.clone();
        let task = tokio::spawn(async move {
            let mut readers = Vec::new();
            let mut problems = Vec::new();
            loop {
                tokio::select! {
                    r = self.listener.accept() => match r {
                        Ok((conn, _)) => readers.push(tokio::spawn(read_stream(conn))),
                        Err(e) => problems.push(format!("accepting a hook connection: {e}")),
                    },
                    _ = stop_rx.changed() => break,
                }
            }
            (readers, problems)
        });
        HookCollector {
            stop: stop_tx,
            task,
            path,
        }
    }
}

async fn read_stream(conn: tokio::net::UnixStream) -> Stream {
    let mut st = Stream::default();
    let mut lines = tokio::io::BufReader::with_capacity(1 << 16, conn).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(l)) => {
                if !l.is_empty() {
                    st.feed(&l);
                }
            }
            Ok(None) => break,
            Err(e) => {
                st.bad.push(format!("read error: {e}"));
                break;
            }
        }
    }
    st
}

type Accepted = (Vec<tokio::task::JoinHandle<Stream>>, Vec<String>);

/// Handle on the background acceptor.
pub struct HookCollector {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Accepted>,
    path: PathBuf,
}

impl HookCollector {
    /// Stop accepting and collect every stream. Call after the traced program ended: its
    /// connections are then closed; one still open after `grace` is cut and reported.
    pub async fn finish(self, grace: std::time::Duration) -> Result<HookCapture> {
        let _ = self.stop.send(true);
        let (readers, mut problems) = self.task.await.context("hook acceptor task")?;
        let mut streams = Vec::new();
        let deadline = tokio::time::Instant::now() + grace;
        for r in readers {
            match tokio::time::timeout_at(deadline, r).await {
                Ok(Ok(s)) => streams.push(s),
                Ok(Err(e)) => problems.push(format!("hook reader task failed: {e}")),
                Err(_) => problems.push(format!(
                    "a hook stream stayed open {grace:?} after the program ended (a process outlived it)"
                )),
            }
        }
        let _ = std::fs::remove_file(&self.path);
        Ok(HookCapture { streams, problems })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_record_kind_and_checks_the_goodbye() {
        let mut st = Stream::default();
        for l in [
            r#"{"hello":1,"pid":7,"python":"3.15.2","mode":"monitoring","calls":"all","clock":"monotonic_ns"}"#,
            r#"["C",1,"/a.py","f","C.f",3,6,2]"#,
            r#"["c",10,7,1,140,3]"#,
            r#"["l",11,7,1,140,4,{"x":["1","int"]}]"#,
            r#"["x",12,7,1,140,4,"ValueError","bad","raise"]"#,
            r#"["h",13,7,1,140,5,"ValueError","bad"]"#,
            r#"["r",14,7,1,140,6,"return",["2","int"],null]"#,
            r#"["ts",15,7,"t.py::test_a"]"#,
            r#"["te",16,7,"t.py::test_a","passed"]"#,
            r#"["hx",17,7,19]"#,
            r#"["wo",20,7]"#,
            r#"["wc",21,7]"#,
            r#"["bye",11]"#,
        ] {
            st.feed(l);
        }
        assert_eq!(st.pid, 7);
        assert_eq!(st.codes[&1].qualname, "C.f");
        assert_eq!(
            (st.codes[&1].last_line, st.codes[&1].traits),
            (Some(6), Some(2))
        );
        assert_eq!(
            st.codes[&1].may_enter_at(0),
            Some(true),
            "no first line: USDT says 0"
        );
        assert_eq!(st.codes[&1].may_enter_at(7), Some(false));
        assert_eq!(st.records.len(), 10);
        assert_eq!(
            st.records[7],
            Rec::Internal {
                ts: 17,
                tid: 7,
                until: 19
            }
        );
        assert_eq!(st.records[8], Rec::WindowOpen { ts: 20, tid: 7 });
        assert_eq!(st.records[9], Rec::WindowClose { ts: 21, tid: 7 });
        assert!(st.problems().is_empty(), "{:?}", st.problems());
        assert_eq!(
            st.records[1],
            Rec::Line {
                ts: 11,
                tid: 7,
                code: 1,
                frame: 140,
                line: 4,
                locals: vec![("x".into(), ("1".into(), "int".into()))],
                deleted: vec![],
            }
        );
        assert!(matches!(
            st.records[4],
            Rec::Ret {
                how: How::Return,
                payload: Some(_),
                ..
            }
        ));
        st.bye = Some(12);
        assert!(st.problems()[0].contains("12 records announced, 11 received"));
        st.bye = None;
        assert!(st.problems()[0].contains("without `bye`"));
        st.bye = Some(9);
        st.feed(r#"["lost",17,7,"RecursionError at the limit"]"#);
        assert!(st
            .problems()
            .iter()
            .any(|p| p.contains("lost records: thread 7: RecursionError")));
    }

    #[test]
    fn the_swe_flux_dialect_fields_are_read() {
        let mut st = Stream::default();
        for l in [
            r#"{"hello":1,"pid":7,"python":"3.11.2","mode":"settrace","calls":"entries"}"#,
            r#"["C",1,"/a.py","f","C.f",3,6,0,"pkg.a"]"#,
            r#"["C",2,"/a.py","g","g",9,9,0]"#,
            r#"["c",10,7,1,140,3,"throw",{"a":["1","int"]}]"#,
            r#"["l",11,7,1,140,4,{"x":["1","int"],"e":null}]"#,
            r#"["x",12,7,1,140,5,"KeyError","'k'","raise",{"y":["2","int"]},["KeyError('k')","KeyError"]]"#,
            r#"["x",13,7,1,140,5,"StopIteration","","tracer-only",null,["StopIteration()","StopIteration"]]"#,
            r#"["x",14,7,1,140,5,"KeyError","'k'","reraise-inferred"]"#,
            r#"["bye",7]"#,
        ] {
            st.feed(l);
        }
        assert!(st.problems().is_empty(), "{:?}", st.problems());
        assert_eq!(st.codes[&1].module.as_deref(), Some("pkg.a"));
        assert_eq!(st.codes[&2].module, None, "older records have no module");
        assert!(
            matches!(&st.records[0], Rec::Call { thrown: true, locals, .. } if locals[0].0 == "a")
        );
        assert!(
            matches!(&st.records[1], Rec::Line { locals, deleted, .. } if locals.len() == 1 && deleted == &["e"])
        );
        match &st.records[2] {
            Rec::Exc {
                kind,
                locals,
                object,
                ..
            } => {
                assert_eq!(*kind, ExcKind::Raise);
                assert_eq!(locals[0].0, "y");
                assert_eq!(
                    object.as_ref(),
                    Some(&("KeyError('k')".to_string(), "KeyError".to_string()))
                );
            }
            r => panic!("{r:?}"),
        }
        assert!(matches!(
            st.records[3],
            Rec::Exc {
                kind: ExcKind::TracerOnly,
                ..
            }
        ));
        assert!(matches!(
            &st.records[4],
            Rec::Exc { kind: ExcKind::ReraiseInferred, object: None, .. }
        ));
    }

    #[test]
    fn garbage_is_reported_not_ignored() {
        let mut st = Stream::default();
        st.feed("{nope");
        st.feed(r#"["zz",1,2]"#);
        st.bye = Some(1);
        let p = st.problems();
        assert!(p.iter().any(|m| m.contains("unparseable")), "{p:?}");
        assert!(p.iter().any(|m| m.contains("unknown record tag")), "{p:?}");
    }
}
