//! The agent's side of the in-process hook (`flux-hook/`): ship it, configure it, and receive its
//! streams.
//!
//! The hook package is embedded in the binary and written into a run directory, so an installed
//! `flux` needs nothing else on disk, and the repository under test is never touched (it is put
//! on `PYTHONPATH` with a `sitecustomize`). Every process of the traced program connects once to
//! a Unix socket the agent listens on and streams JSON-lines records (protocol in
//! `flux-hook/README.md`). A stream that ends without its `bye`, or whose `bye` count disagrees
//! with what arrived, makes the trace incomplete: nothing is dropped silently on either side.
//! The protocol's decoder is `flux_merge::protocol` (re-exported here).
//!
//! The socket is private: mode 0600, owned by the owner of its directory (the run directory, which
//! belongs to the traced program's user), and every connection's peer must live in the traced PID
//! namespace (`SO_PEERCRED` pid → `/proc/<pid>/ns/pid`). A foreign peer is refused (its
//! connection closed unread) and counted as a problem of the capture, never merged.
use anyhow::{Context, Result};
use flux_trace::TracingConfig;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
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
        "flux_hook/checks.py",
        include_str!("../../flux-hook/flux_hook/checks.py"),
    ),
    (
        "flux_hook/static_facts.py",
        include_str!("../../flux-hook/flux_hook/static_facts.py"),
    ),
    (
        "flux_hook/pytest_plugin.py",
        include_str!("../../flux-hook/flux_hook/pytest_plugin.py"),
    ),
];

/// The hook's C part for CPython 3.11 (`flux_hook/_fast311.c`, the settrace back-end's
/// `c-fast-path`), built by build.rs against Debian's python3.11 headers; empty where it could
/// not be built (the hook then takes its pure Python path).
const FAST311: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/_fast311.so"));
/// Its import suffix (`.cpython-311-x86_64-linux-gnu.so`): only an interpreter of that ABI
/// loads it.
const FAST311_SUFFIX: &str = include_str!(concat!(env!("OUT_DIR"), "/_fast311.suffix"));

/// Whether this build ships the hook's C fast path for 3.11.
pub fn ships_fast311() -> bool {
    !FAST311.is_empty() && !FAST311_SUFFIX.is_empty()
}

/// The hook's C part for CPython 3.12+ (`flux_hook/_fastmon.c`, the sys.monitoring back-end's
/// `c-monitoring`), built by build.rs for the stable ABI; empty where it could not be built.
/// Shipped as `_fastmon.abi3.so`, which every CPython 3.x on Linux imports.
const FASTMON: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/_fastmon.so"));

/// Whether this build ships the hook's C callbacks for sys.monitoring (3.12+).
pub fn ships_fastmon() -> bool {
    !FASTMON.is_empty()
}

/// Write the hook package into `dir` (which becomes a `PYTHONPATH` entry), readable by anyone
/// (containers run the test as an unprivileged user).
pub fn install(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let write = |rel: &str, bytes: &[u8]| -> std::io::Result<()> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))?;
        }
        std::fs::write(&p, bytes)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))
    };
    for (rel, text) in FILES {
        write(rel, text.as_bytes())?;
    }
    if ships_fast311() {
        write(&format!("flux_hook/_fast311{FAST311_SUFFIX}"), FAST311)?;
    }
    if ships_fastmon() {
        write("flux_hook/_fastmon.abi3.so", FASTMON)?;
    }
    Ok(())
}

pub use flux_merge::plan::HookCalls;
pub use flux_merge::protocol::{CodeDef, ExcKind, HookCapture, How, Rec, Stream};

/// Environment that turns the hook on in the traced program, for `plan` on `interp`: the one
/// environment of every traced run (`flux trace` and `flux harvest` alike). Paths are as the
/// program sees them (inside a container they differ from the agent's).
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
            "FLUX_HOOK_LEAVE".to_string(),
            plan.leave.as_list().join(","),
        ),
        (
            "FLUX_HOOK_CONFIG".to_string(),
            serde_json::to_string(config).expect("config serialises"),
        ),
        // The determinism policy (17.4, flux-hook/README.md "Determinism"): no per-process
        // hash randomisation (set and dict-of-str orders), which only the environment can fix;
        // the hook seeds the program's `random` generators itself (FLUX_HOOK_SEED, default 0).
        ("PYTHONHASHSEED".to_string(), "0".to_string()),
    ];
    if config.tests {
        env.push(("PYTEST_PLUGINS".into(), "flux_hook.pytest_plugin".into()));
    }
    // Scopes with windows zero the semaphores outside them; every scope lowers them while the
    // hook renders values in a single-threaded process (17.13, flux-hook `Hook.vrepr`); the
    // others are watched.
    env.extend(semaphores_var(interp, plan.probes));
    env
}

/// `FLUX_HOOK_SEMAPHORES`: the file name and file offset of the semaphore of every probe the
/// plan attaches. The hook zeroes them in its process outside test windows (scopes with
/// windows) and while it renders values in a single-threaded process, so CPython skips the
/// probes there (no trap at all), and restores the kernel's count after.
///
/// `FLUX_HOOK_FOREIGN_SEMAPHORES`: those of the interpreter's other probes, `<probe>=<file
/// name>:<offset>`. Nothing of flux raises them in this run (runs with other probes take
/// turns, [`crate::turns`]), so one up is another tracer's probe in the program, which then
/// runs otherwise (3.11 deoptimises every instruction while `line`'s is up): the hook checks
/// them at every flush and at exit and reports a loss, and the trace is incomplete.
fn semaphores_var(
    interp: &crate::interp::Interpreter,
    probes: crate::tracer::ProbeSet,
) -> Vec<(String, String)> {
    let Some(name) = interp.probes.path.file_name() else {
        return Vec::new();
    };
    let name = name.to_string_lossy();
    let mut ours: Vec<u64> = Vec::new();
    let mut foreign: Vec<(u64, &str)> = Vec::new();
    for s in &interp.probes.sites {
        if s.provider != "python" || s.semaphore_offset == 0 {
            continue;
        }
        let attached = match s.name.as_str() {
            "function__entry" => probes.entry,
            "function__return" => probes.ret,
            "line" => probes.line,
            _ => false,
        };
        if attached {
            ours.push(s.semaphore_offset);
        } else {
            foreign.push((s.semaphore_offset, s.name.as_str()));
        }
    }
    ours.sort_unstable();
    ours.dedup();
    foreign.retain(|(o, _)| ours.binary_search(o).is_err());
    foreign.sort_unstable();
    foreign.dedup_by_key(|(o, _)| *o);
    let mut env = Vec::new();
    if !ours.is_empty() {
        let v: Vec<String> = ours.iter().map(|o| format!("{name}:{o:x}")).collect();
        env.push(("FLUX_HOOK_SEMAPHORES".into(), v.join(",")));
    }
    if !foreign.is_empty() {
        let v: Vec<String> = foreign
            .iter()
            .map(|(o, p)| format!("{p}={name}:{o:x}"))
            .collect();
        env.push(("FLUX_HOOK_FOREIGN_SEMAPHORES".into(), v.join(",")));
    }
    env
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
    record: bool,
    /// The program's user, when it is not the owner of the socket's directory.
    user: Option<(u32, u32)>,
}

impl HookServer {
    /// Bind at `path` (removed first if stale), mode 0600: nobody but its owner connects (see
    /// [`HookServer::spawn`] for who that is). Must be called inside a tokio runtime.
    pub fn bind(path: &Path) -> Result<HookServer> {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::remove_file(path);
        let listener = bind_unix(path)
            .with_context(|| format!("binding the hook socket {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(HookServer {
            listener,
            path: path.to_path_buf(),
            record: false,
            user: None,
        })
    }

    /// The traced program runs as `uid:gid` (a container's user, or `nobody` on the host) in
    /// a directory it must not own: give the socket to that user instead of the directory's
    /// owner (0600 stays, so nobody else connects).
    pub fn for_user(mut self, uid: u32, gid: u32) -> HookServer {
        self.user = Some((uid, gid));
        self
    }

    /// Keep every line each stream sent ([`Stream::raw`]), to record merge fixtures.
    pub fn recording(mut self) -> HookServer {
        self.record = true;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accept and read connections in the background until [`HookCollector::finish`]. Call
    /// when the program exists and before it runs: the socket is then given to the owner of
    /// its directory (the run directory belongs to the program's user by now). Only peers in
    /// the namespace given to [`HookCollector::restrict_to`] are read.
    pub fn spawn(self) -> HookCollector {
        let owner = match self.user {
            Some((uid, gid)) => give_to(&self.path, uid, gid),
            None => give_to_dir_owner(&self.path),
        }
        .err();
        let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
        let allowed: Arc<OnceLock<(u64, u64)>> = Arc::new(OnceLock::new());
        let path = self.path.clone();
        let record = self.record;
        let expect = allowed.clone();
        let task = tokio::spawn(async move {
            let mut readers = Vec::new();
            let mut problems: Vec<String> = owner.into_iter().collect();
            loop {
                tokio::select! {
                    r = self.listener.accept() => match r {
                        Ok((conn, _)) => match peer_check(&conn, expect.get()) {
                            Ok(()) => readers.push(tokio::spawn(async move {
                                // The hook waits for this byte before it goes on, so it cannot
                                // exit before its check (a short program that ended first was
                                // refused: its /proc entry was gone). A peer gone already has
                                // nothing to say: its stream is read as it is.
                                let mut conn = conn;
                                let _ = tokio::io::AsyncWriteExt::write_all(&mut conn, &[HOOK_ACK]).await;
                                read_stream(conn, record).await
                            })),
                            Err(why) => problems.push(format!("refused a hook connection: {why}")),
                        },
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
            allowed,
        }
    }
}

/// Give the socket at `path` to the owner of its directory (0600 stays: nobody else connects).
fn give_to_dir_owner(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let dir = path.parent().ok_or("the hook socket has no directory")?;
    let d = std::fs::metadata(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let me = std::fs::metadata(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    if (d.uid(), d.gid()) != (me.uid(), me.gid()) {
        give_to(path, d.uid(), d.gid())?;
    }
    Ok(())
}

/// Give the socket at `path` to `uid:gid`.
fn give_to(path: &Path, uid: u32, gid: u32) -> Result<(), String> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(|e| {
        format!(
            "giving the hook socket {} to {uid}:{gid}: {e}",
            path.display()
        )
    })
}

/// The byte that tells the hook its connection passed [`peer_check`] (`flux_hook._core`).
const HOOK_ACK: u8 = 0x06;

/// Whether the peer of `conn` is a process of the traced PID namespace `allowed`.
fn peer_check(conn: &tokio::net::UnixStream, allowed: Option<&(u64, u64)>) -> Result<(), String> {
    let cred = conn
        .peer_cred()
        .map_err(|e| format!("no peer credentials: {e}"))?;
    let pid = cred.pid().ok_or("the peer has no pid")?;
    let Some(allowed) = allowed else {
        return Err(format!(
            "pid {pid} (uid {}) connected before the traced program was released",
            cred.uid()
        ));
    };
    let ns = crate::spawn::pidns_of(pid as u32)
        .map_err(|e| format!("pid {pid}: cannot read its PID namespace: {e}"))?;
    if ns != *allowed {
        return Err(format!(
            "pid {pid} (uid {}) is outside the traced PID namespace (its namespace {}:{}, traced {}:{})",
            cred.uid(),
            ns.0,
            ns.1,
            allowed.0,
            allowed.1
        ));
    }
    Ok(())
}

async fn read_stream(conn: tokio::net::UnixStream, record: bool) -> Stream {
    let mut st = if record {
        Stream::recording()
    } else {
        Stream::default()
    };
    // Past a bound, the stream's records go to an unlinked file as the lines they came as
    // (issue 28); without a file they stay in memory, which only costs memory.
    if let Some(f) = crate::tracer::spill_file("a hook stream's records") {
        st.spill_to(f, spill_after());
    }
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
    if let Some(e) = st.records.kept().spill_error() {
        eprintln!("flux: {e}: the hook records after it stay in memory");
    }
    st
}

/// Hook records a stream holds parsed before it writes them, a block per thread at a time, to
/// its spill file: 1 Mi (about 48 MiB), or `FLUX_SPILL_AFTER` (as for the USDT records:
/// [`crate::tracer::SPILL_AFTER`]).
fn spill_after() -> usize {
    crate::tracer::spill_after()
}

type Accepted = (Vec<tokio::task::JoinHandle<Stream>>, Vec<String>);

/// Handle on the background acceptor.
pub struct HookCollector {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Accepted>,
    path: PathBuf,
    allowed: Arc<OnceLock<(u64, u64)>>,
}

impl HookCollector {
    /// Read only peers whose PID namespace is `pidns` (device, inode): the traced program's.
    /// Call before the program is released; until then every connection is refused.
    pub fn restrict_to(&self, pidns: (u64, u64)) {
        let _ = self.allowed.set(pidns);
    }

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
    /// Regression (the hook imported `flux_hook.checks`, which was not shipped): every module
    /// of the hook package is among the files written into the traced environment.
    #[test]
    fn the_hook_package_is_shipped_whole() {
        let dir = std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../flux-hook/flux_hook"
        ));
        for f in std::fs::read_dir(dir).unwrap() {
            let name = f.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".py") {
                let rel = format!("flux_hook/{name}");
                assert!(
                    super::FILES.iter().any(|(r, _)| *r == rel),
                    "{rel} is not shipped by flux-agent's hook::FILES"
                );
            }
        }
    }
}
