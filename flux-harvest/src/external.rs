//! Answers from outside flux: a peer benchmark's own parser run on flux's trace, and that
//! peer's stored answers to check fresh ones against.
//!
//! The harvest knows no peer format: a crate at the edge (flux-interop, for SWE-Flux)
//! implements [`ExternalAnswers`] and the caller hands it in ([`crate::HarvestOptions::external`]).
//! An instance answered by an external parser (`flux_instance::external`) is refused before any
//! container starts when no implementation was given.
use flux_instance::Instance;
use flux_trace::Trace;
use serde_json::Value;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;

/// A boxed future (the trait's async method, without an async-trait dependency).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A peer benchmark's answers on flux's traces.
pub trait ExternalAnswers: Send + Sync + std::fmt::Debug {
    /// The label every answer it makes carries in the oracle's provenance.
    fn label(&self) -> &str;

    /// The answer of the instance's external parser on `trace` (third-party code: it runs in a
    /// container of the instance's image, never on the host); `run_dir` is the harvest's run
    /// directory. The answer must fit the instance's template.
    fn answer<'a>(
        &'a self,
        rt: &'a flux_container::Runtime,
        inst: &'a Instance,
        trace: &'a Trace,
        run_dir: &'a Path,
    ) -> BoxFuture<'a, anyhow::Result<Value>>;

    /// `--check`: `fresh` against the peer's stored answer under the peer's scoring rules. An
    /// error says where they differ; `Ok(false)` when the instance keeps no stored answer.
    fn check_reference(&self, inst: &Instance, fresh: &Value) -> anyhow::Result<bool>;
}
