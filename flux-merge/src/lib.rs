//! flux-merge: from the two witnesses' raw records to one oracle trace.
//!
//! - [`usdt`]: the kernel's ring-buffer records, decoded through the shared ABI types of
//!   `flux-common`, their strings resolved, and the USDT capture's completeness verdict.
//! - [`raw_store`]: a capture's raw USDT records per thread, spilled to a file the caller gives
//!   once more than a bound are held, read back a block at a time by the merge.
//! - [`protocol`]: the in-process hook's wire protocol, decoded into typed records;
//!   [`hook_store`] keeps a stream's records per thread (spilled as lines past a bound) and
//!   what the merge reads of the whole stream.
//! - [`spill`]: what the two stores share: their counts, the file past the bound, and what
//!   could not be read back from it.
//! - [`plan`]: what each witness reports for an interpreter and scope, decided once.
//! - [`merge`]: the merge itself, a small core and one module per concern, each rule named.
//! - [`jvm`]: a JVM's trace from its method probes alone (no hook), with rules of its own.
//! - [`fixture`]: the merge's inputs as recorded fixtures (normalised so a recording is
//!   reproducible) and the merged trace rendered as stable text, for the offline corpus.
//!
//! Why a crate of its own: the merge is the heart of every gold answer and must be testable
//! by anyone — it builds on stable Rust without aya, tokio or the eBPF toolchain, so the
//! corpus of recorded inputs (`tests/corpus/`) runs in a plain `cargo test`.
//!
//! Invariants: nothing here does I/O beyond the readers, writers and files given to it; the merge
//! never invents an event (inferred unwinds are counted and labelled) and never drops one
//! silently (every dropped record is counted under its rule's name; anything unplaceable makes
//! the trace incomplete).
pub mod fixture;
pub mod hook_store;
pub mod jvm;
pub mod merge;
pub mod plan;
pub mod protocol;
pub mod raw_store;
pub mod spill;
pub mod usdt;

pub use merge::{merge, merge_writing, scrub_addresses, Whole};
pub use plan::{plan, CallsMode, Capabilities, HookCalls, Leave, Plan, ProbeSet};
pub use protocol::{HookCapture, Stream};
