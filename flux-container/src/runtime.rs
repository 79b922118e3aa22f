//! Running one command in a container, in steps the tracer can hook between.
//!
//! The order matters: the tracer must be attached (and filtering on the container's PID
//! namespace) before the first line of the test runs. So the container's command is wrapped in
//! a gate: `sh -c 'g=$(timeout -s KILL 120 head -n1 /flux/run/.flux-gate); [ "$g" = go ] ||
//! exit 125; timeout -s KILL T "$@"; exit $?' sh CMD…`. The FIFO lives in the run directory on
//! the host; [`Container::start`] returns the init pid, its PID-namespace (dev, ino) and the
//! rootfs while the shell is blocked on the FIFO, and [`Container::release`] writes one line
//! into it. The shell stays PID 1 (`init_pid`) for the container's whole life; its child is
//! `timeout`, whose child is the command. (Not `exec timeout`: coreutils 9.10's `timeout`, in
//! sid's images, exits 125 at once as PID 1; the trailing `exit $?` keeps dash from exec'ing
//! its last command.) A gate never released (flux gone) ends the container after
//! [`GATE_DEADLINE`] without running the command.
//!
//! Deadlines of its own: the host kills a container whose [`Container::wait`] expires, but a
//! host process can die (SIGKILL, a crash) while its container runs on. So the container kills
//! itself: coreutils' `timeout` SIGKILLs the command [`ContainerSpec::timeout`] +
//! [`DEADLINE_GRACE`] after the gate opened, and PID 1 (the shell) exits with it, which ends
//! every process of the namespace. PID 1 of a namespace cannot be killed from inside it; test
//! code that kills `timeout` only ends the container sooner. The container then sits exited
//! until [`Runtime::remove_orphans`] removes it (its creating process is gone).
//!
//! What the container may write ([`Writes`]): a test's container ([`Writes::Tmp`], the default)
//! sees its run directory read-only (root's, so nothing in it can be created, replaced or linked
//! by test code: whatever the host reads or writes there afterwards is the host's own), its root
//! filesystem read-only, and gets `/tmp` and `/var/tmp` as size-capped tmpfs, charged to its
//! memory limit: a run's disk use is bounded. Image builds ([`Writes::Everything`]) write their
//! root filesystem and run directory.
//!
//! Removal: [`Container::remove`] removes explicitly; if a `Container` is dropped without it, its
//! `Drop` removes it (synchronously, on a helper thread with its own client). Every container
//! carries the labels `flux.managed=1`, `flux.run=<run id>` and `flux.pid=<creating pid>`;
//! [`Runtime::remove_orphans`] (call it at the start of every run) removes those whose creating
//! process is gone, [`Runtime::remove_labelled`] those of one run id, and
//! [`Runtime::remove_own`] those of this process (on SIGINT/SIGTERM).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    LogsOptionsBuilder, RemoveContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;

use crate::error::{is_not_found, Error, KillReason, Result};

/// Label put on every container this crate creates.
pub const LABEL_MANAGED: &str = "flux.managed";
/// Label holding the run id; see [`Runtime::remove_labelled`].
pub const LABEL_RUN: &str = "flux.run";
/// Label holding the pid of the process that created the container; see
/// [`Runtime::remove_orphans`].
pub const LABEL_PID: &str = "flux.pid";
/// Where the run directory is mounted inside the container.
pub const RUN_DIR_IN_CONTAINER: &str = "/flux/run";
/// Where a container writes what the host reads afterwards (a test suite's report, a reference
/// tracer's logs, SWE-Flux's parser's answer): a writable directory of the run's on the host,
/// read there as untrusted.
pub const OUT_IN_CONTAINER: &str = "/flux/out";
/// Name of the gate FIFO inside the run directory.
pub const GATE_NAME: &str = ".flux-gate";
/// How long a started container waits for its gate before it exits (125) without running its
/// command: the tracer attaches in seconds, and a flux killed before releasing leaves nothing.
pub const GATE_DEADLINE: Duration = Duration::from_secs(120);
/// How long after [`ContainerSpec::timeout`] the container's own deadline kills its command:
/// the host's timer ([`Container::wait`]) normally comes first and reports the timeout.
pub const DEADLINE_GRACE: Duration = Duration::from_secs(10);

const DEFAULT_SOCKET: &str = "/var/run/docker.sock";
/// Logs kept per stream; the rest is dropped (and `Outcome::*_truncated` set).
pub const LOG_CAP: usize = 64 << 20;

/// A bind mount of a host path into the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub host: PathBuf,
    pub container: String,
    pub read_only: bool,
}

impl Mount {
    pub fn read_only(host: impl Into<PathBuf>, container: impl Into<String>) -> Self {
        Mount {
            host: host.into(),
            container: container.into(),
            read_only: true,
        }
    }
    pub fn read_write(host: impl Into<PathBuf>, container: impl Into<String>) -> Self {
        Mount {
            host: host.into(),
            container: container.into(),
            read_only: false,
        }
    }
}

/// Resource limits; `None` means the daemon's default (unlimited).
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub pids: Option<i64>,
    /// Number of CPUs (fractions allowed), enforced through CFS quota.
    pub cpus: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: Some(4 << 30),
            pids: Some(4096),
            cpus: None,
        }
    }
}

/// What a container may write besides its pipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// A test's container: the run directory is mounted read-only (the host's, root's: test
    /// code can plant nothing in it), the root filesystem is read-only, and `/tmp` and
    /// `/var/tmp` are tmpfs of at most `bytes` each (charged to the memory limit).
    Tmp { bytes: u64 },
    /// An image build: the run directory (chowned to a numeric `user` when the caller is root)
    /// and the root filesystem are writable.
    Everything,
}

impl Default for Writes {
    fn default() -> Self {
        Writes::Tmp { bytes: 1 << 30 }
    }
}

/// What to run. The network is always disabled (`--network none`).
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    pub image: String,
    pub cmd: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub workdir: Option<String>,
    pub mounts: Vec<Mount>,
    /// Host directory mounted at `/flux/run`; holds the gate FIFO. Read-only in the
    /// container unless `writes` is [`Writes::Everything`].
    pub run_dir: PathBuf,
    pub limits: Limits,
    /// What the container may write (default: [`Writes::Tmp`], 1 GiB).
    pub writes: Writes,
    /// Used by [`Runtime::run`] ([`Container::wait`] takes its own), and the container's own
    /// deadline: its command is SIGKILLed by its PID 1 `timeout + DEADLINE_GRACE` after the
    /// gate opened, even if no host process is left to do it.
    pub timeout: Duration,
    /// `uid:gid` (default `1000:1000`) or a user name known to the image.
    pub user: String,
    /// Value of the `flux.run` label; unique per spec unless set.
    pub run_id: String,
    /// Extra labels.
    pub labels: BTreeMap<String, String>,
}

impl ContainerSpec {
    pub fn new(image: impl Into<String>, cmd: Vec<String>, run_dir: impl Into<PathBuf>) -> Self {
        ContainerSpec {
            image: image.into(),
            cmd,
            env: BTreeMap::new(),
            workdir: None,
            mounts: Vec::new(),
            run_dir: run_dir.into(),
            limits: Limits::default(),
            writes: Writes::default(),
            timeout: Duration::from_secs(30 * 60),
            user: "1000:1000".to_owned(),
            run_id: new_run_id(),
            labels: BTreeMap::new(),
        }
    }
}

/// A fresh id for the `flux.run` label: pid, time and a counter.
pub fn new_run_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{:x}-{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// (device, inode) of a PID namespace, as `stat /proc/<pid>/ns/pid` reports them; what
/// `bpf_get_ns_current_pid_tgid` needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PidNs {
    pub dev: u64,
    pub ino: u64,
}

/// What the tracer needs once the container runs (still blocked on its gate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// Host pid of the container's init (the gate shell, PID 1 for the container's life).
    pub init_pid: u32,
    pub pidns: PidNs,
    /// Host path of the merged rootfs (`GraphDriver.Data.MergedDir`).
    pub root_fs: PathBuf,
}

/// How a container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub container: String,
    pub exit_code: i64,
    pub timed_out: bool,
    pub oom_killed: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// From release (or from the call to `wait`) to exit.
    pub elapsed: Duration,
}

impl Outcome {
    /// Turns a timeout, an OOM kill or a death by signal into an error; any exit code of a
    /// normal exit (a failing test too) stays an `Ok`.
    pub fn check(self, timeout: Duration) -> Result<Outcome> {
        if self.timed_out {
            return Err(Error::TimedOut {
                container: self.container,
                after: timeout,
            });
        }
        if self.oom_killed {
            return Err(Error::Killed {
                container: self.container,
                reason: KillReason::Oom,
            });
        }
        if (129..=128 + 64).contains(&self.exit_code) {
            let reason = KillReason::Signal((self.exit_code - 128) as i32);
            return Err(Error::Killed {
                container: self.container,
                reason,
            });
        }
        Ok(self)
    }

    pub fn stdout_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// A connection to the Docker daemon.
#[derive(Clone)]
pub struct Runtime {
    docker: Docker,
    socket: String,
    /// The daemon has [`FIXED_ADDRESSES_RUNTIME`]: containers start with address-space
    /// randomisation off.
    fixed_addresses: bool,
}

/// The OCI runtime flux asks for when the daemon has it: the daemon's `runc`, started with
/// address-space randomisation off (`setarch --addr-no-randomize`), which every process of the
/// container inherits. Docker's default seccomp profile refuses that personality inside a
/// container, and without it a program iterating a set of objects hashed by identity (SymPy's
/// multiple dispatch) takes another path at each run (flux-hook/README.md, "Determinism").
/// `cargo xtask setup` registers it when it starts dockerd (`--add-runtime`); nothing else
/// changes (seccomp, capabilities and mounts are the default runtime's).
pub const FIXED_ADDRESSES_RUNTIME: &str = "flux-fixed-addresses";

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("socket", &self.socket)
            .finish()
    }
}

/// The socket named by `DOCKER_HOST=unix://…`, else `/var/run/docker.sock`.
pub fn default_socket() -> String {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if h.starts_with("unix://") => h.trim_start_matches("unix://").to_owned(),
        _ => DEFAULT_SOCKET.to_owned(),
    }
}

async fn connect_socket(socket: &str) -> Result<Docker> {
    let unreachable = |source| Error::DockerUnreachable {
        socket: socket.to_owned(),
        source,
    };
    let docker = Docker::connect_with_socket(socket, 600, bollard::API_DEFAULT_VERSION)
        .map_err(unreachable)?;
    // The daemon here may be old (20.10 speaks API 1.41): talk its version.
    let docker = docker.negotiate_version().await.map_err(unreachable)?;
    docker.ping().await.map_err(unreachable)?;
    Ok(docker)
}

impl Runtime {
    /// Connects to [`default_socket`] and checks the daemon answers.
    pub async fn connect() -> Result<Runtime> {
        Self::connect_to(&default_socket()).await
    }

    pub async fn connect_to(socket: &str) -> Result<Runtime> {
        let docker = connect_socket(socket).await?;
        let info = docker
            .info()
            .await
            .map_err(|e| Error::docker("docker info".to_owned(), e))?;
        let fixed_addresses = info
            .runtimes
            .is_some_and(|r| r.contains_key(FIXED_ADDRESSES_RUNTIME));
        Ok(Runtime {
            docker,
            socket: socket.to_owned(),
            fixed_addresses,
        })
    }

    /// Whether containers start with address-space randomisation off
    /// ([`FIXED_ADDRESSES_RUNTIME`]).
    pub fn fixed_addresses(&self) -> bool {
        self.fixed_addresses
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// The image id if the image exists locally.
    pub async fn image_id(&self, image: &str) -> Result<Option<String>> {
        match self.docker.inspect_image(image).await {
            Ok(i) => Ok(i.id),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(Error::docker(format!("inspect image {image}"), e)),
        }
    }

    /// Host path of `path` inside `image`, looked up through the image's overlay layers
    /// (symlinks resolved inside the image). The file is the lower-layer inode a uprobe lands on.
    pub async fn image_file(&self, image: &str, path: &str) -> Result<PathBuf> {
        let inspect = match self.docker.inspect_image(image).await {
            Ok(i) => i,
            Err(e) if is_not_found(&e) => return Err(missing_image(image)),
            Err(e) => return Err(Error::docker(format!("inspect image {image}"), e)),
        };
        let data = inspect.graph_driver.map(|g| g.data).unwrap_or_default();
        resolve_in_layers(&layers_of(&data), path).ok_or_else(|| Error::FileNotInImage {
            what: format!("image {image}"),
            path: path.to_owned(),
        })
    }

    /// Creates the container (not started). Fails with [`Error::ImageMissing`] if the image
    /// is not built.
    pub async fn create(&self, spec: ContainerSpec) -> Result<Container> {
        validate(&spec)?;
        if self.image_id(&spec.image).await?.is_none() {
            return Err(missing_image(&spec.image));
        }
        let gate = prepare_run_dir(&spec)?;

        let run_dir_mode = match spec.writes {
            Writes::Tmp { .. } => "ro",
            Writes::Everything => "rw",
        };
        let mut binds = vec![format!(
            "{}:{RUN_DIR_IN_CONTAINER}:{run_dir_mode}",
            spec.run_dir.display()
        )];
        for m in &spec.mounts {
            let mode = if m.read_only { "ro" } else { "rw" };
            binds.push(format!("{}:{}:{mode}", m.host.display(), m.container));
        }
        let mut labels: std::collections::HashMap<String, String> =
            spec.labels.clone().into_iter().collect();
        labels.insert(LABEL_MANAGED.to_owned(), "1".to_owned());
        labels.insert(LABEL_RUN.to_owned(), spec.run_id.clone());
        labels.insert(LABEL_PID.to_owned(), std::process::id().to_string());

        let host_config = HostConfig {
            binds: Some(binds),
            network_mode: Some("none".to_owned()),
            memory: spec.limits.memory_bytes.map(|m| m as i64),
            // No swap beyond the memory limit, so the OOM killer is what a hog meets.
            memory_swap: spec.limits.memory_bytes.map(|m| m as i64),
            pids_limit: spec.limits.pids,
            nano_cpus: spec.limits.cpus.map(|c| (c * 1e9) as i64),
            security_opt: Some(vec!["no-new-privileges".to_owned()]),
            runtime: self
                .fixed_addresses
                .then(|| FIXED_ADDRESSES_RUNTIME.to_owned()),
            readonly_rootfs: Some(matches!(spec.writes, Writes::Tmp { .. })),
            tmpfs: match spec.writes {
                Writes::Tmp { bytes } => Some(
                    ["/tmp", "/var/tmp"]
                        .iter()
                        .map(|d| {
                            let opts = format!("rw,nosuid,nodev,size={bytes},mode=1777");
                            ((*d).to_owned(), opts)
                        })
                        .collect(),
                ),
                Writes::Everything => None,
            },
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            entrypoint: Some(entrypoint(spec.timeout)),
            cmd: Some(spec.cmd.clone()),
            env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            working_dir: spec.workdir.clone(),
            user: Some(spec.user.clone()),
            labels: Some(labels),
            network_disabled: Some(true),
            host_config: Some(host_config),
            ..Default::default()
        };
        let name = format!("flux-{}", spec.run_id);
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| Error::docker(format!("create container from {}", spec.image), e))?;
        Ok(Container {
            docker: self.docker.clone(),
            socket: self.socket.clone(),
            id: created.id,
            name,
            gate,
            removed: false,
            started: None,
            released_at: None,
        })
    }

    /// create → start → release → wait(spec.timeout) → remove, in one call.
    pub async fn run(&self, spec: ContainerSpec) -> Result<Outcome> {
        let timeout = spec.timeout;
        let mut c = self.create(spec).await?;
        let result = async {
            c.start().await?;
            c.release().await?;
            c.wait(timeout).await
        }
        .await;
        let removed = c.remove().await;
        let outcome = result?;
        removed?;
        Ok(outcome)
    }

    /// Removes (force) every container with label `flux.run=<run_id>`, or with any `flux.run`
    /// label if `run_id` is `None`. Returns how many were removed.
    pub async fn remove_labelled(&self, run_id: Option<&str>) -> Result<usize> {
        let ids = self.labelled(run_id).await?;
        for id in &ids {
            remove_container(&self.docker, id).await?;
        }
        Ok(ids.len())
    }

    /// Removes (force) every flux container whose creating process is gone: what a killed
    /// run or build left behind. Containers of live processes (concurrent runs) stay. Call it
    /// at the start of every run. Returns how many were removed.
    pub async fn remove_orphans(&self) -> Result<usize> {
        let list = self.with_label(LABEL_PID.to_owned()).await?;
        let mut removed = 0;
        for c in list {
            // Containers of flux images made elsewhere inherit the label blanked: skip them.
            let Some(pid) = c
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_PID)?.parse::<i32>().ok())
            else {
                continue;
            };
            // SAFETY: signal 0 only checks that the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
            if let (false, Some(id)) = (alive, c.id) {
                remove_container(&self.docker, &id).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Removes (force) every flux container this process created: what SIGINT/SIGTERM leave
    /// running while a run is interrupted. Returns how many were removed.
    pub async fn remove_own(&self) -> Result<usize> {
        let list = self
            .with_label(format!("{LABEL_PID}={}", std::process::id()))
            .await?;
        let mut removed = 0;
        for id in list.into_iter().filter_map(|c| c.id) {
            remove_container(&self.docker, &id).await?;
            removed += 1;
        }
        Ok(removed)
    }

    /// Containers (any state) matching a `label` filter (`key` or `key=value`).
    async fn with_label(&self, filter: String) -> Result<Vec<bollard::models::ContainerSummary>> {
        let mut filters = std::collections::HashMap::new();
        filters.insert("label".to_owned(), vec![filter]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        self.docker
            .list_containers(Some(options))
            .await
            .map_err(|e| Error::docker("list containers", e))
    }

    /// Removes one container by id or name (force); a missing one is not an error.
    pub async fn remove_container(&self, id: &str) -> Result<()> {
        remove_container(&self.docker, id).await
    }

    /// Ids of containers (any state) with `flux.run=<run_id>` (or any non-empty `flux.run`:
    /// containers of flux images inherit the label blanked from the image build).
    pub async fn labelled(&self, run_id: Option<&str>) -> Result<Vec<String>> {
        let filter = match run_id {
            Some(id) => format!("{LABEL_RUN}={id}"),
            None => LABEL_RUN.to_owned(),
        };
        let list = self.with_label(filter).await?;
        Ok(list
            .into_iter()
            .filter(|c| {
                let run = c.labels.as_ref().and_then(|l| l.get(LABEL_RUN));
                run.is_some_and(|r| !r.is_empty())
            })
            .filter_map(|c| c.id)
            .collect())
    }
}

pub(crate) fn missing_image(image: &str) -> Error {
    Error::ImageMissing {
        image: image.to_owned(),
        hint: crate::error::build_hint(image),
    }
}

fn validate(spec: &ContainerSpec) -> Result<()> {
    if spec.cmd.is_empty() {
        return Err(Error::Spec("empty command".into()));
    }
    let bad = |p: &str| p.contains(':') || !p.starts_with('/');
    let run_dir = spec.run_dir.to_string_lossy();
    if bad(&run_dir) {
        return Err(Error::Spec(format!(
            "run_dir {run_dir} must be absolute and without ':'"
        )));
    }
    for m in &spec.mounts {
        let host = m.host.to_string_lossy();
        if bad(&host) || bad(&m.container) {
            return Err(Error::Spec(format!(
                "mount {host} -> {} must use absolute paths without ':'",
                m.container
            )));
        }
        if m.container == RUN_DIR_IN_CONTAINER {
            return Err(Error::Spec(format!(
                "{RUN_DIR_IN_CONTAINER} is reserved for run_dir"
            )));
        }
    }
    Ok(())
}

/// The gate and the deadlines around the command (see the module docs): `sh` waits for the
/// gate's line `go` at most [`GATE_DEADLINE`] (anything else, an EOF or the deadline exits 125:
/// never run ungated), then runs `timeout`, which runs the command and SIGKILLs it at
/// `timeout + DEADLINE_GRACE`, and exits with its status.
fn entrypoint(timeout: Duration) -> Vec<String> {
    let gate_in = format!("{RUN_DIR_IN_CONTAINER}/{GATE_NAME}");
    let deadline = (timeout + DEADLINE_GRACE).as_secs().max(1);
    vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        format!(
            "g=$(timeout -s KILL {gate} head -n1 {gate_in}); [ \"$g\" = go ] || exit 125; \
             timeout -s KILL {deadline} \"$@\"; exit $?",
            gate = GATE_DEADLINE.as_secs()
        ),
        "sh".to_owned(),
    ]
}

fn parse_user(user: &str) -> Option<(u32, u32)> {
    let (u, g) = user.split_once(':').unwrap_or((user, user));
    Some((u.parse().ok()?, g.parse().ok()?))
}

/// Creates `run_dir` and a fresh gate FIFO in it, readable by the container's user (the gate
/// owned by it when we are root and `user` is numeric; the directory too, with
/// [`Writes::Everything`]).
fn prepare_run_dir(spec: &ContainerSpec) -> Result<PathBuf> {
    let dir = &spec.run_dir;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let gate = dir.join(GATE_NAME);
    match std::fs::remove_file(&gate) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(format!("remove stale {}", gate.display()), e)),
    }
    let c = cstring(&gate)?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(Error::io(
            format!("mkfifo {}", gate.display()),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if let (true, Some((uid, gid))) = (root, parse_user(&spec.user)) {
        let owned: &[&Path] = match spec.writes {
            Writes::Tmp { .. } => &[gate.as_path()],
            Writes::Everything => &[dir.as_path(), gate.as_path()],
        };
        for p in owned {
            std::os::unix::fs::chown(p, Some(uid), Some(gid))
                .map_err(|e| Error::io(format!("chown {}", p.display()), e))?;
        }
    } else {
        use std::os::unix::fs::PermissionsExt;
        // Not root, or a named user: let anyone in the container read the gate.
        std::fs::set_permissions(&gate, std::fs::Permissions::from_mode(0o666))
            .map_err(|e| Error::io(format!("chmod {}", gate.display()), e))?;
    }
    Ok(gate)
}

fn cstring(p: &Path) -> Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::Spec(format!("path with NUL: {}", p.display())))
}

async fn remove_container(docker: &Docker, id: &str) -> Result<()> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        // 409: removal already in progress.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => Ok(()),
        Err(e) => Err(Error::docker(format!("remove container {id}"), e)),
    }
}

/// A created container. Removed by [`Container::remove`] or, failing that, on drop.
pub struct Container {
    docker: Docker,
    socket: String,
    id: String,
    name: String,
    gate: PathBuf,
    removed: bool,
    started: Option<Started>,
    released_at: Option<Instant>,
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

impl Container {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn started(&self) -> Option<&Started> {
        self.started.as_ref()
    }

    /// Host path of `path` (inside the container) in the image's layers, usable before start.
    /// The file returned is the real lower/upper-layer file, i.e. the inode a uprobe lands on.
    pub async fn host_path(&self, path: &str) -> Result<PathBuf> {
        let inspect = self
            .docker
            .inspect_container(&self.id, None)
            .await
            .map_err(|e| Error::docker(format!("inspect container {}", self.name), e))?;
        let data = inspect.graph_driver.map(|g| g.data).unwrap_or_default();
        resolve_in_layers(&layers_of(&data), path).ok_or_else(|| Error::FileNotInImage {
            what: format!("container {}", self.name),
            path: path.to_owned(),
        })
    }

    /// Starts the container; its command stays blocked on the gate until [`Container::release`].
    pub async fn start(&mut self) -> Result<Started> {
        self.docker
            .start_container(&self.id, None)
            .await
            .map_err(|e| Error::docker(format!("start container {}", self.name), e))?;
        let inspect = self
            .docker
            .inspect_container(&self.id, None)
            .await
            .map_err(|e| Error::docker(format!("inspect container {}", self.name), e))?;
        let state = inspect.state.unwrap_or_default();
        let pid = state.pid.unwrap_or(0);
        if pid <= 0 || state.running != Some(true) {
            return Err(Error::ExitedEarly {
                container: self.name.clone(),
                exit_code: state.exit_code,
                message: state.error.filter(|e| !e.is_empty()).unwrap_or_else(|| {
                    "before the gate was released (is /bin/sh in the image?)".to_owned()
                }),
            });
        }
        let ns = format!("/proc/{pid}/ns/pid");
        let meta = std::fs::metadata(&ns).map_err(|e| Error::io(format!("stat {ns}"), e))?;
        let data = inspect.graph_driver.map(|g| g.data).unwrap_or_default();
        let root_fs = data
            .get("MergedDir")
            .map(PathBuf::from)
            .ok_or_else(|| Error::Storage {
                container: self.name.clone(),
                message: "no GraphDriver.Data.MergedDir (is the storage driver overlay2?)".into(),
            })?;
        let started = Started {
            init_pid: pid as u32,
            pidns: PidNs {
                dev: meta.dev(),
                ino: meta.ino(),
            },
            root_fs,
        };
        self.started = Some(started.clone());
        Ok(started)
    }

    /// Opens the gate: the wrapped command runs. Waits (up to 30 s) for the container's shell
    /// to be blocked on the FIFO first.
    pub async fn release(&mut self) -> Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let opened = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.gate);
            match opened {
                Ok(mut f) => {
                    f.write_all(b"go\n")
                        .map_err(|e| Error::io(format!("write gate {}", self.gate.display()), e))?;
                    self.released_at = Some(Instant::now());
                    return Ok(());
                }
                // ENXIO: no reader yet.
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(e) => {
                    return Err(Error::io(
                        format!(
                            "open gate {} of container {}",
                            self.gate.display(),
                            self.name
                        ),
                        e,
                    ))
                }
            }
        }
    }

    /// Waits for the exit, collecting stdout and stderr; on expiry kills the container
    /// (SIGKILL) and reports `timed_out`. The container is not removed.
    pub async fn wait(&mut self, timeout: Duration) -> Result<Outcome> {
        self.wait_inner(timeout, None::<fn(LogStream, &[u8])>).await
    }

    /// [`Container::wait`], also handing every chunk of output to `sink` as it arrives.
    ///
    /// Output is read by a task of its own and kept up to [`LOG_CAP`] per stream; chunks reach
    /// `sink` through a bounded queue (the reader waits when it is full), so a test printing
    /// gigabytes costs this process about [`LOG_CAP`]: it cost the whole volume when every
    /// chunk went through an unbounded channel that nobody drained once the container had
    /// exited while Docker was still sending its log (issue 26.6: 3.9 GB in `flux gen`).
    pub async fn wait_streaming(
        &mut self,
        timeout: Duration,
        sink: impl FnMut(LogStream, &[u8]),
    ) -> Result<Outcome> {
        self.wait_inner(timeout, Some(sink)).await
    }

    async fn wait_inner(
        &mut self,
        timeout: Duration,
        mut sink: Option<impl FnMut(LogStream, &[u8])>,
    ) -> Result<Outcome> {
        let from = self.released_at.unwrap_or_else(Instant::now);
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        // Without a sink nothing is queued: the reader only keeps what the caps allow.
        let tx = sink.is_some().then_some(tx);
        let logs = tokio::spawn(collect_logs(self.docker.clone(), self.id.clone(), tx));
        tokio::pin!(logs);
        let mut give = |stream: LogStream, bytes: &[u8]| {
            if let Some(f) = sink.as_mut() {
                f(stream, bytes);
            }
        };
        let waited = {
            let mut waiter = self.docker.wait_container(&self.id, None);
            let next = waiter.next();
            tokio::pin!(next);
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    r = &mut next => break Some(r),
                    _ = &mut deadline => break None,
                    Some((stream, bytes)) = rx.recv() => give(stream, &bytes),
                }
            }
        };
        let timed_out = waited.is_none();
        if let Some(Some(Err(e))) = waited {
            if !matches!(e, bollard::errors::Error::DockerContainerWaitError { .. }) {
                return Err(Error::docker(
                    format!("wait for container {}", self.name),
                    e,
                ));
            }
        }
        let elapsed = from.elapsed();
        if timed_out {
            let options = KillContainerOptionsBuilder::default()
                .signal("SIGKILL")
                .build();
            match self.docker.kill_container(&self.id, Some(options)).await {
                Ok(()) => {}
                // 409: not running any more.
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 409, ..
                }) => {}
                Err(e) => return Err(Error::docker(format!("kill container {}", self.name), e)),
            }
            let mut waiter = self.docker.wait_container(&self.id, None);
            let _ = tokio::time::timeout(Duration::from_secs(30), waiter.next()).await;
        }
        // The rest of the log (at most 30 s), the queue drained meanwhile so the reader can go on.
        let rest = async {
            loop {
                tokio::select! {
                    Some((stream, bytes)) = rx.recv() => give(stream, &bytes),
                    r = &mut logs => break r,
                }
            }
        };
        let (stdout, stdout_truncated, stderr, stderr_truncated) =
            match tokio::time::timeout(Duration::from_secs(30), rest).await {
                Ok(Ok(Ok(l))) => l,
                Ok(Ok(Err(e))) => return Err(e),
                Ok(Err(join)) => {
                    let message = format!("log reader failed: {join}");
                    return Err(Error::Storage {
                        container: self.name.clone(),
                        message,
                    });
                }
                Err(_) => {
                    logs.abort();
                    Default::default()
                }
            };
        while let Ok((stream, bytes)) = rx.try_recv() {
            give(stream, &bytes);
        }
        let inspect = self
            .docker
            .inspect_container(&self.id, None)
            .await
            .map_err(|e| Error::docker(format!("inspect container {}", self.name), e))?;
        let state = inspect.state.unwrap_or_default();
        Ok(Outcome {
            container: self.name.clone(),
            exit_code: state.exit_code.unwrap_or(-1),
            timed_out,
            oom_killed: state.oom_killed.unwrap_or(false),
            stdout,
            stderr,
            stdout_truncated,
            stderr_truncated,
            elapsed,
        })
    }

    /// Removes the container (force: kills it if running).
    pub async fn remove(mut self) -> Result<()> {
        self.removed = true;
        remove_container(&self.docker, &self.id).await
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        // Drop cannot await, and may run while a runtime is shutting down (a panic in a test):
        // remove from a helper thread with its own runtime and client, and wait for it.
        let socket = self.socket.clone();
        let id = self.id.clone();
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let docker = connect_socket(&socket).await.ok()?;
                remove_container(&docker, &id).await.ok()
            })
        })
        .join();
        if !matches!(done, Ok(Some(()))) {
            // Not eprintln!: a closed stderr must not turn a drop into a panic.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "flux-container: could not remove container {} on drop",
                self.name
            );
        }
    }
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStream {
    Stdout,
    Stderr,
}

type Logs = (Vec<u8>, bool, Vec<u8>, bool);

/// Read the container's log to its end, keeping each stream up to [`LOG_CAP`] and, when `tx`
/// is given, queueing every chunk for the sink (waiting while the queue is full).
async fn collect_logs(
    docker: Docker,
    id: String,
    tx: Option<tokio::sync::mpsc::Sender<(LogStream, bytes::Bytes)>>,
) -> Result<Logs> {
    use bollard::container::LogOutput;
    let options = LogsOptionsBuilder::default()
        .follow(true)
        .stdout(true)
        .stderr(true)
        .build();
    let mut stream = docker.logs(&id, Some(options));
    let (mut out, mut out_t, mut err, mut err_t) = (Vec::new(), false, Vec::new(), false);
    let push = |buf: &mut Vec<u8>, trunc: &mut bool, bytes: &[u8]| {
        let room = LOG_CAP.saturating_sub(buf.len());
        if bytes.len() > room {
            *trunc = true;
        }
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    };
    while let Some(item) = stream.next().await {
        let (which, message) = match item {
            Ok(LogOutput::StdOut { message }) => {
                push(&mut out, &mut out_t, &message);
                (LogStream::Stdout, message)
            }
            Ok(LogOutput::StdErr { message }) => {
                push(&mut err, &mut err_t, &message);
                (LogStream::Stderr, message)
            }
            Ok(_) => continue,
            Err(e) if is_not_found(&e) => break,
            Err(e) => return Err(Error::docker(format!("logs of container {id}"), e)),
        };
        if let Some(tx) = &tx {
            let _ = tx.send((which, message)).await;
        }
    }
    Ok((out, out_t, err, err_t))
}

/// Overlay layers from `GraphDriver.Data`, topmost first: UpperDir, then LowerDir's entries.
fn layers_of(data: &std::collections::HashMap<String, String>) -> Vec<PathBuf> {
    let mut layers = Vec::new();
    if let Some(upper) = data.get("UpperDir") {
        layers.push(PathBuf::from(upper));
    }
    if let Some(lower) = data.get("LowerDir") {
        layers.extend(
            lower
                .split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
        );
    }
    layers
}

/// Finds `path` (absolute, inside the image) in overlay `layers` (topmost first), following
/// symlinks inside the image (e.g. `/bin -> usr/bin`). Whiteouts hide lower entries; opaque
/// directories are not considered. Returns the host path of the regular file.
pub fn resolve_in_layers(layers: &[PathBuf], path: &str) -> Option<PathBuf> {
    let mut pending: Vec<String> = path
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .rev()
        .collect();
    let mut current: Vec<String> = Vec::new();
    let mut hops = 0;
    while let Some(comp) = pending.pop() {
        match comp.as_str() {
            "." => continue,
            ".." => {
                current.pop();
                continue;
            }
            _ => {}
        }
        current.push(comp);
        let rel = current.join("/");
        let (layer_path, meta) = layers.iter().find_map(|l| {
            let p = l.join(&rel);
            std::fs::symlink_metadata(&p).ok().map(|m| (p, m))
        })?;
        let ft = meta.file_type();
        use std::os::unix::fs::FileTypeExt;
        if ft.is_char_device() && meta.rdev() == 0 {
            return None; // whiteout
        }
        if ft.is_symlink() {
            hops += 1;
            if hops > 40 {
                return None;
            }
            let target = std::fs::read_link(&layer_path).ok()?;
            let target = target.to_string_lossy();
            current.pop();
            if target.starts_with('/') {
                current.clear();
            }
            pending.extend(
                target
                    .split('/')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .rev(),
            );
            continue;
        }
        if pending.is_empty() {
            return meta.is_file().then_some(layer_path);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two layers, upper first: lower has usr/bin/python3.11 and the /bin -> usr/bin symlink,
    /// upper overrides usr/bin/tool and whites out usr/bin/gone.
    fn layers() -> (tempfile::TempDir, Vec<PathBuf>) {
        let t = tempfile::tempdir().unwrap();
        let (upper, lower) = (t.path().join("upper"), t.path().join("lower"));
        for d in [&upper, &lower] {
            std::fs::create_dir_all(d.join("usr/bin")).unwrap();
        }
        std::fs::write(lower.join("usr/bin/python3.11"), "py").unwrap();
        std::fs::write(lower.join("usr/bin/tool"), "old").unwrap();
        std::fs::write(upper.join("usr/bin/tool"), "new").unwrap();
        std::fs::write(lower.join("usr/bin/gone"), "x").unwrap();
        std::os::unix::fs::symlink("usr/bin", lower.join("bin")).unwrap();
        std::os::unix::fs::symlink("python3.11", lower.join("usr/bin/python3")).unwrap();
        std::os::unix::fs::symlink("/usr/bin/../bin/python3", upper.join("usr/bin/py")).unwrap();
        let c = cstring(&upper.join("usr/bin/gone")).unwrap();
        // SAFETY: valid path; a 0/0 char device is an overlay whiteout (needs root).
        let whiteout = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, 0) } == 0;
        if !whiteout {
            eprintln!("note: not root, whiteout case not built");
        }
        (t, vec![upper, lower])
    }

    #[test]
    fn resolves_files_through_layers_and_symlinks() {
        let (_t, l) = layers();
        let lower = &l[1];
        let upper = &l[0];
        for (path, want) in [
            (
                "/usr/bin/python3.11",
                Some(lower.join("usr/bin/python3.11")),
            ),
            ("/bin/python3.11", Some(lower.join("usr/bin/python3.11"))),
            ("/usr/bin/python3", Some(lower.join("usr/bin/python3.11"))),
            ("/usr/bin/py", Some(lower.join("usr/bin/python3.11"))),
            ("/usr/bin/tool", Some(upper.join("usr/bin/tool"))),
            ("/usr/./bin/../bin/tool", Some(upper.join("usr/bin/tool"))),
            ("/usr/bin", None),
            ("/usr/bin/missing", None),
        ] {
            assert_eq!(resolve_in_layers(&l, path), want, "{path}");
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(resolve_in_layers(&l, "/usr/bin/gone"), None, "whiteout");
        }
    }

    #[test]
    fn symlink_loops_end() {
        let t = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("b", t.path().join("a")).unwrap();
        std::os::unix::fs::symlink("a", t.path().join("b")).unwrap();
        assert_eq!(resolve_in_layers(&[t.path().to_owned()], "/a"), None);
    }

    #[test]
    fn specs_are_validated() {
        let ok = ContainerSpec::new("i", vec!["true".into()], "/tmp/run");
        assert!(validate(&ok).is_ok());
        let mut s = ok.clone();
        s.cmd.clear();
        assert!(validate(&s)
            .unwrap_err()
            .to_string()
            .contains("empty command"));
        let mut s = ok.clone();
        s.mounts.push(Mount::read_only("relative", "/x"));
        assert!(validate(&s).is_err());
        let mut s = ok.clone();
        s.mounts.push(Mount::read_only("/a:b", "/x"));
        assert!(validate(&s).is_err());
        let mut s = ok;
        s.mounts.push(Mount::read_write("/a", RUN_DIR_IN_CONTAINER));
        assert!(validate(&s).unwrap_err().to_string().contains("reserved"));
    }

    #[test]
    fn users_parse() {
        assert_eq!(parse_user("1000:1000"), Some((1000, 1000)));
        assert_eq!(parse_user("0"), Some((0, 0)));
        assert_eq!(parse_user("flux"), None);
    }

    #[test]
    fn outcome_check_maps_kills_and_timeouts() {
        let base = Outcome {
            container: "c".into(),
            exit_code: 1,
            timed_out: false,
            oom_killed: false,
            stdout: vec![],
            stderr: vec![],
            stdout_truncated: false,
            stderr_truncated: false,
            elapsed: Duration::ZERO,
        };
        assert!(
            base.clone().check(Duration::from_secs(1)).is_ok(),
            "a failing test is an outcome"
        );
        let sig = Outcome {
            exit_code: 137,
            ..base.clone()
        };
        let e = sig.check(Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.to_string(), "container c was killed: signal 9");
        let oom = Outcome {
            oom_killed: true,
            exit_code: 137,
            ..base.clone()
        };
        let e = oom.check(Duration::from_secs(1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "container c was killed: out of memory (OOM killer)"
        );
        let t = Outcome {
            timed_out: true,
            exit_code: 137,
            ..base
        };
        let e = t.check(Duration::from_secs(90)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "container c timed out after 90s and was killed"
        );
    }
}
