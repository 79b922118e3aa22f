//! flux-agent: everything between "run this program" and "here is its oracle trace".
//!
//! - [`usdt`]: SystemTap note discovery and argument-spec decoding (aya has no USDT support).
//! - [`interp`]: what an interpreter build can report through USDT, and what the hook must add.
//! - [`attach`]: uprobe perf events with the semaphore's ref_ctr offset, linked with a cookie.
//! - [`tracer`]: load the BPF programs, configure, attach, drain the ring buffer with tokio.
//! - [`spawn`]: run a host command in its own PID namespace, gated until tracing is ready.
//! - [`hook`]: ship the in-process hook, configure it, receive its per-process streams.
//! - [`merge`]: plans for an interpreter; the merge itself (and the decoders of both witnesses'
//!   records) is `flux-merge`, which builds without aya, tokio or nightly.
//! - [`run`]: the whole `flux trace` pipeline over those pieces.
//! - [`turns`]: traced runs of one interpreter file with different probe sets take turns.
//!
//! Invariants: the agent never invents an event; every record that could not be delivered or
//! decoded is counted, and a trace with any such count is marked incomplete.
pub mod attach;
pub mod hook;
pub mod interp;
pub mod merge;
pub mod run;
pub mod spawn;
pub mod tracer;
pub mod turns;
pub mod usdt;
