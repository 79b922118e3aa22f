//! Harness shared by the end-to-end tests: run the real `flux` binary, read its trace, and
//! decide at run time whether the machine can run a case (`skipping: …` when it cannot).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const PY311: &str = "/usr/bin/python3.11";

/// A Debian root filesystem made by `cargo xtask images`, overridable by an environment variable.
pub fn rootfs(env: &str, default: &str) -> PathBuf {
    std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// sid with python3.15 (USDT entries and returns).
pub fn sid_root() -> PathBuf {
    rootfs("FLUX_SID_ROOTFS", "/var/cache/flux/rootfs/sid-py315")
}

/// Why this machine cannot load eBPF programs, if it cannot.
pub fn cannot_trace() -> Option<&'static str> {
    // SAFETY: trivial syscall.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root to load eBPF programs");
    }
    if !Path::new("/sys/bus/event_source/devices/uprobe/type").exists() {
        return Some("kernel has no uprobe PMU");
    }
    None
}

/// The Python environment `cargo xtask setup` makes (`<workspace>/.flux-cache/venv-hub`, or
/// the interpreter `$FLUX_HUB_PYTHON` names) if it imports `modules`, else a loud skip.
pub fn hub_python(what: &str, modules: &[&str]) -> Option<PathBuf> {
    let py = std::env::var_os("FLUX_HUB_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../.flux-cache/venv-hub/bin/python")
        });
    let ok = Command::new(&py)
        .args(["-c", &format!("import {}", modules.join(", "))])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(py);
    }
    flux_skip::skip(
        what,
        &format!(
            "{} cannot import {} (`cargo xtask setup` installs them)",
            py.display(),
            modules.join(", ")
        ),
    );
    None
}

pub fn skip(what: &str) -> bool {
    match cannot_trace() {
        Some(why) => flux_skip::skip(what, why),
        None => false,
    }
}

pub struct Traced {
    pub events: Vec<Value>,
    pub out: Output,
}

impl Traced {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
}

pub fn run_flux(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(args)
        .output()
        .expect("run flux")
}

/// `flux trace --out FILE EXTRA -- CMD`, and the events it wrote.
pub fn trace_with(extra: &[&str], cmd: &[&str]) -> Traced {
    trace_with_env(extra, cmd, &[])
}

/// [`trace_with`] with extra environment variables for flux (and so for the program).
pub fn trace_with_env(extra: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> Traced {
    let dir = tempdir();
    let out_path = dir.join("t.jsonl");
    let mut args = vec!["trace", "--out", out_path.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    let out = Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(&args)
        .envs(env.iter().copied())
        .output()
        .expect("run flux");
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    // Events only: a trace's JSONL opens with a `{"facts": …}` line per targeted file that ran.
    let events = text
        .lines()
        .filter(|l| !l.starts_with("{\"facts\":"))
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    Traced { events, out }
}

/// Why a test needing Docker image `image` cannot run here (`None`: it can); `build` names the
/// command that builds it.
pub fn image_missing(image: &str, build: &str) -> Option<String> {
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "image {image} is missing or docker does not answer ({build}): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("docker CLI not runnable: {e}")),
    }
}

/// A fresh directory under the system temp dir (unique per process, call and clock), removed
/// with what is in it when the value is dropped (the tests left hundreds behind). Not
/// `tempfile`'s: containers running as another user read and write in it (its mode is the
/// default's, 0755, not 0700).
pub fn tempdir() -> TempDir {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "flux-test-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// [`tempdir`]'s directory: a path while it lives, gone when dropped.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TempDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl TempDir {
    /// The path, the directory kept: whoever takes it removes it.
    pub fn keep(mut self) -> PathBuf {
        std::mem::take(&mut self.0)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// One event as both witnesses must report it: sources, ids and timestamps differ by design.
pub fn witness_line(e: &Value) -> String {
    format!(
        "{} {} {} d{} v={} u={} x={} l={}",
        e["ev"].as_str().unwrap(),
        e["qualname"]
            .as_str()
            .unwrap_or(e["func"].as_str().unwrap()),
        e["line"],
        e["depth"],
        e["value"]["repr"],
        e["unwind"],
        e["exc"]["type"],
        e["locals"]
    )
}

/// The comparable content of a merged trace, for the events of one file.
pub fn witness_view(events: &[Value], file: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["file"] == file)
        .map(witness_line)
        .collect()
}

/// A tracing config that targets `target` (a file name suffix), written in `dir`.
pub fn config_for(dir: &Path, target: &str) -> PathBuf {
    let p = dir.join("cfg.json");
    std::fs::write(&p, format!(r#"{{"files": ["{target}"]}}"#)).unwrap();
    p
}
