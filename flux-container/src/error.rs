//! One error type for the crate. Every variant names the thing it is about (socket, image,
//! container, path) so that a caller only has to add the instance name.

use std::path::PathBuf;
use std::time::Duration;

/// Why a container ended without a normal exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    /// The kernel's OOM killer hit the container (memory limit).
    Oom,
    /// The init process died of this signal (exit status 128 + signal).
    Signal(i32),
}

impl std::fmt::Display for KillReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KillReason::Oom => f.write_str("out of memory (OOM killer)"),
            KillReason::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "Docker is not reachable at {socket}: {source}; is dockerd running? \
         start it with `nohup dockerd >/tmp/dockerd.log 2>&1 &` (or `systemctl start docker`)"
    )]
    DockerUnreachable {
        socket: String,
        #[source]
        source: bollard::errors::Error,
    },

    /// `hint` is [`build_hint`]'s.
    #[error("image {image} is missing; {hint}")]
    ImageMissing { image: String, hint: String },

    #[error("container {container} timed out after {after:?} and was killed")]
    TimedOut { container: String, after: Duration },

    #[error("container {container} was killed: {reason}")]
    Killed {
        container: String,
        reason: KillReason,
    },

    #[error(
        "disk full while building {what} ({detail}); free space in /var/lib/docker, \
         /var/cache/flux or .flux-cache and retry"
    )]
    DiskFull { what: String, detail: String },

    #[error("docker: {op} failed: {source}")]
    Docker {
        op: String,
        #[source]
        source: bollard::errors::Error,
    },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },

    #[error("invalid image definitions in {path}: {message}")]
    Definition { path: PathBuf, message: String },

    #[error("building image {image} failed: {message}")]
    Build { image: String, message: String },

    #[error("the test suite of image {image} did not run: {message}")]
    Suite { image: String, message: String },

    #[error("container {container} exited right after start (exit code {exit_code:?}): {message}")]
    ExitedEarly {
        container: String,
        exit_code: Option<i64>,
        message: String,
    },

    #[error("container {container}: {message}")]
    Storage { container: String, message: String },

    #[error("invalid container spec: {0}")]
    Spec(String),

    #[error("file {path} not found in the layers of {what}")]
    FileNotInImage { what: String, path: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn docker(op: impl Into<String>, source: bollard::errors::Error) -> Self {
        Error::Docker {
            op: op.into(),
            source,
        }
    }

    /// True if the underlying cause is ENOSPC / "no space left on device".
    pub fn is_disk_full(&self) -> bool {
        const MSG: &str = "no space left on device";
        match self {
            Error::DiskFull { .. } => true,
            Error::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            Error::Command { stderr, .. } => stderr.to_ascii_lowercase().contains(MSG),
            Error::Docker { source, .. } => source.to_string().to_ascii_lowercase().contains(MSG),
            Error::Build { message, .. } => message.to_ascii_lowercase().contains(MSG),
            _ => false,
        }
    }
}

/// True if a bollard error is a 404 from the daemon.
pub(crate) fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// The one "how to build this image" hint, naming the user-facing command: `flux images build
/// <image>` for an image of flux's namespace, a note that flux does not build it otherwise.
pub fn build_hint(image: &str) -> String {
    let ours = image.strip_prefix("flux/").is_some_and(|rest| {
        rest.split_once(':')
            .is_some_and(|(r, t)| !r.is_empty() && !t.is_empty())
    });
    if ours {
        format!("build it with `flux images build {image}`")
    } else {
        format!(
            "flux builds only the images of images/images.toml (`flux images list`); {image} is \
             not one of them: define it there or make it available to Docker yourself"
        )
    }
}
