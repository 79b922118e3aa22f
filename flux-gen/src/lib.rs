//! `flux gen`: benchmark instances mined from repositories' own test suites, without an LLM.
//!
//! Why: a gold answer is a pure function of a trace, so one traced run of a test module answers
//! hundreds of questions, and where the interesting behaviour is (loops that iterate, exceptions
//! that cross frames, calls into the repository, state that changes) can be read from the run
//! instead of guessed from source.
//!
//! Data flows one way (repository → scouted trace → planned questions → instances), and reuses
//! the harvest's run and the extractors unchanged:
//!
//! ```text
//! gen.toml ─► modules of each image (seeded) ─► per module (a shard's unit):
//!   scout run (calls only, scope "tests")      → profile: calls per test, callers, callees, depth
//!   static facts (flux_hook.static_facts in the image) → loops, branches, handlers, writes/reads
//!   plan (rules + budgets, seeded)             → targets
//!   shared trace (scope "targets", all events) → the trace artifact
//!   drafts per kind from what the trace shows  → params + tests; gold from the tests' sub-trace
//!   screens (size, same answer, loads, static baseline → easy)
//!   module selection, then each instance's own run (its tests alone, narrowed config) = gold?
//! ─► every module's screened candidates ─► the set's selection ─► sets/<name>/
//! ```
//!
//! Module map: [`spec`] (gen.toml), [`keyed`] (seeded choices and shards), [`runner`] (what runs
//! in images), [`profile`] (the scout's reading), [`facts`] (static facts), [`plan`] (targets),
//! [`recipe`] (each kind's drafting rule and prose, one recipe a kind), [`draft`] (questions
//! from the trace), [`author`] (prose and instance), [`features`]
//! (difficulty), [`screen`] (gates, selection, cross-check), [`artifact`] (the shared trace),
//! [`module`] (one module end to end), [`runtime`] (the runtime seam: pytest on CPython, JUnit
//! on HotSpot) and [`calls_only`] (a module of a runtime whose probes report calls only),
//! [`set`] (the work list, phase 2, the set on disk), [`discriminate`] (the screens of answers
//! that do not discriminate), [`reauthor`] (`flux gen --reauthor`: a set's questions written
//! again and screened, nothing run), [`release`] (dated releases: `flux gen --release`, the old
//! release's instances kept, targets diffed), [`stats`] (`flux stats`).
//!
//! Architecture invariants: every seeded choice is a function of the seed and a stable key of
//! what is chosen (never of processing order), so shards merge into the unsharded set; nothing
//! is kept whose own run does not reproduce its gold; an instance refers to its test in the
//! image (`[test] image_files`), never copies it.
pub mod artifact;
pub mod author;
pub mod calls_only;
pub mod discriminate;
pub mod draft;
pub mod facts;
pub mod features;
pub mod keyed;
pub mod lock;
pub mod module;
pub mod plan;
pub mod profile;
pub mod reauthor;
pub mod recipe;
pub mod release;
pub mod results;
pub mod runner;
pub mod runtime;
pub mod screen;
pub mod set;
pub mod spec;
pub mod stats;
pub mod witness;

pub use keyed::Shard;
pub use set::{generate, GenOptions, Report};

/// [`generate`] on a runtime of its own.
pub fn generate_blocking(opts: &GenOptions) -> anyhow::Result<Report> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(generate(opts))
}

/// [`generate`] on a runtime of its own, stopped by SIGINT or SIGTERM: then every container
/// this process has is removed (`flux_harvest::until_interrupted`), and so are its scratch
/// directories ([`runner::scratch_root`], removed after any run) and a set being staged
/// ([`set::STAGING_DIR`], never the set itself); module results already written stay in the
/// output directory, where `--resume` keeps them. `Ok(Err(signal))` when interrupted.
pub fn generate_interruptible(
    opts: &GenOptions,
) -> anyhow::Result<Result<Report, flux_harvest::Interrupted>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let r = rt.block_on(flux_harvest::until_interrupted(generate(opts)));
    if let Ok(work) = std::path::absolute(opts.harvest.cache_dir.join("gen")) {
        let _ = std::fs::remove_dir_all(runner::scratch_root(&work));
    }
    match r {
        Ok(r) => r.map(Ok),
        Err(sig) => {
            let _ = std::fs::remove_dir_all(set::set_dir(&opts.spec).join(set::STAGING_DIR));
            // Tasks of the dropped run may still be ending: do not wait for them.
            rt.shutdown_background();
            Ok(Err(sig))
        }
    }
}
