//! flux-agent: everything between "run this program" and "here is its oracle trace".
//!
//! - [`usdt`]: SystemTap note discovery and argument-spec decoding (aya has no USDT support).
//! - [`interp`]: what an interpreter build can report through USDT, and what the hook must add.
//! - [`attach`]: uprobe perf events with the semaphore's ref_ctr offset, linked with a cookie.
//! - [`tracer`]: load the BPF programs, configure, attach, drain the ring buffer with tokio.
//! - [`spawn`]: run a host command in its own PID namespace, gated until tracing is ready.
//! - [`assemble`]: turn drained USDT records into ordered trace events.
//! - [`hook`]: ship the in-process hook, configure it, receive its per-process streams.
//! - [`merge`]: one ordered trace from both witnesses, with activations, frames and depths.
//! - [`run`]: the whole `flux trace` pipeline over those pieces.
//!
//! Invariants: the agent never invents an event; every record that could not be delivered or
//! decoded is counted, and a trace with any such count is marked incomplete.
pub mod assemble;
pub mod attach;
pub mod hook;
pub mod interp;
pub mod merge;
pub mod run;
pub mod spawn;
pub mod tracer;
pub mod usdt;
