//! Reproducible, locally built images and a container runtime for flux.
//!
//! Two halves:
//! * [`images`]: image definitions as data (`images/images.toml`) and an incremental builder
//!   (debootstrap → `docker import` base per interpreter, offline-installed layer per repo with
//!   its source at `/testbed`), a manifest with a content identity per image, and runs of a
//!   repository's own test suite. Driven by `flux images` and `cargo xtask images`.
//! * [`runtime`]: create → start → (tracer attaches) → release → wait → remove, over bollard.
//!   The container's command is held on a gate until released, so a tracer can attach to the
//!   interpreter's inode and filter on the container's PID namespace first.
//!
//! This crate knows nothing about tracing or instances: callers add the instance name to errors.

pub mod error;
pub mod images;
pub mod runtime;

pub use error::{Error, KillReason, Result};
pub use images::{BuildConfig, Definitions, Manifest};
pub use runtime::{
    Container, ContainerSpec, Limits, LogStream, Mount, Outcome, PidNs, Runtime, Started, Writes,
};
