//! The trace artifact: one module's shared, targeted trace as a first-class thing many
//! questions point at — the merged trace (`trace.jsonl`), its digest, and the config, command
//! and plan that made it. Every instance drafted from it names it (`[generated] trace`) and
//! carries its digest (`provenance.trace_sha256` of its oracle).
//!
//! Artifacts live in the cache (`<cache>/gen/artifacts/<set>/<repository>/<module>/`), not in
//! the set: a trace is large, and the set must stay small. `artifact.json` is kept for every
//! module; the newest [`KEEP_TRACES`] `trace.jsonl` files of a set are kept beside it.
use flux_trace::{Trace, TracingConfig};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `trace.jsonl` files kept per set.
pub const KEEP_TRACES: usize = 24;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceArtifact {
    /// `<repository>/<module>`.
    pub id: String,
    pub image: String,
    pub image_id: String,
    pub interpreter: String,
    pub command: Vec<String>,
    pub config: TracingConfig,
    /// The targets the plan chose (qualname per file), in plan order.
    pub plan: Vec<(String, String)>,
    /// sha256 of `trace.jsonl` ([`flux_instance::trace_digest`] of the trace).
    pub trace_sha256: String,
    pub events: usize,
    pub complete: bool,
    /// Every test of the module with its outcome in the scout and in this trace.
    pub tests: Vec<TestOutcome>,
    pub program_seconds: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOutcome {
    pub nodeid: String,
    pub scout: String,
    pub trace: String,
}

impl TestOutcome {
    /// Passed both times: kept.
    pub fn kept(&self) -> bool {
        self.scout == "passed" && self.trace == "passed"
    }
}

/// Where the artifact of `id` lives under `root` (`<cache>/gen/artifacts/<set>`).
pub fn dir_of(root: &Path, id: &str) -> PathBuf {
    root.join(id.replace("::", "__"))
}

/// Write `trace.jsonl` into `dir` and return its digest (equal to
/// `flux_instance::trace_digest(trace)`).
pub fn write_trace(dir: &Path, trace: &Trace) -> std::io::Result<String> {
    std::fs::create_dir_all(dir)?;
    let f = std::fs::File::create(dir.join("trace.jsonl"))?;
    flux_instance::write_trace_jsonl(trace, std::io::BufWriter::with_capacity(1 << 20, f))
}

/// Write `artifact.json` into `dir`.
pub fn write_artifact(dir: &Path, a: &TraceArtifact) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(a).map_err(std::io::Error::other)? + "\n";
    std::fs::write(dir.join("artifact.json"), text)
}

/// Keep only the newest `keep` `trace.jsonl` files under `root` (artifact.json stays).
pub fn prune_traces(root: &Path, keep: usize) {
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "trace.jsonl") {
                if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                    found.push((t, p));
                }
            }
        }
    }
    found.sort();
    let drop = found.len().saturating_sub(keep);
    for (_, p) in found.into_iter().take(drop) {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flux_trace::{Event, Kind, Source};

    #[test]
    fn the_digest_is_the_instances_trace_digest() {
        let mut t = Trace::default();
        for i in 0..100u64 {
            let mut e = Event::new(i, 1, 1, Kind::Call, Source::Hook);
            e.code_mut().func = format!("f{i}").into();
            t.events.push(e);
        }
        let d = tempfile::tempdir().unwrap();
        let digest = write_trace(d.path(), &t).unwrap();
        assert_eq!(digest, flux_instance::trace_digest(&t));
        for i in 0..3 {
            write_trace(&d.path().join(format!("m{i}")), &t).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        prune_traces(d.path(), 2);
        let left = ["m0", "m1", "m2"]
            .iter()
            .filter(|m| d.path().join(m).join("trace.jsonl").exists())
            .count();
        assert_eq!(left, 2);
        assert!(!d.path().join("trace.jsonl").exists());
    }
}
