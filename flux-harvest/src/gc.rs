//! `flux gc`: give back what the harvest's caches hold and nothing needs any more.
//!
//! - run directories (`<cache>/runs/<id>-<stamp>/`: traces, logs, for inspection only): all
//!   but the newest `keep` of each instance, then the oldest until the rest fits in
//!   `max_bytes`;
//! - stale image-build scratch directories (`<cache>/build/<image>/`: the probe outputs a
//!   build reads right after its container ends) untouched for an hour — a build running now
//!   is left alone;
//! - containers of flux processes that are gone (`flux_container::Runtime::remove_orphans`),
//!   when Docker answers.
//!
//! Gold files (instances' `oracle.json`, `callgraph.json`, `history/`), image manifests,
//! wheelhouses and venvs are never touched.
use crate::rundir;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What [`gc`] may remove.
#[derive(Clone, Debug)]
pub struct GcOptions {
    pub cache_dir: PathBuf,
    /// Run directories kept per instance (the newest).
    pub keep: usize,
    /// Run directories kept in all, in bytes.
    pub max_bytes: u64,
    /// List what would go, remove nothing.
    pub dry_run: bool,
}

/// What [`gc`] removed (or, dry, would remove).
#[derive(Clone, Debug, Default, Serialize)]
pub struct GcReport {
    /// Directories with their sizes in bytes.
    pub removed: Vec<(PathBuf, u64)>,
    /// Run directories left.
    pub runs_kept: usize,
    /// Orphaned containers removed (`None`: Docker did not answer).
    pub containers: Option<usize>,
}

impl GcReport {
    pub fn bytes(&self) -> u64 {
        self.removed.iter().map(|(_, n)| n).sum()
    }
}

/// How long a build scratch directory must be untouched before it is stale.
const BUILD_STALE: Duration = Duration::from_secs(3600);

/// Remove what `opts` allows (see the module docs).
pub async fn gc(opts: &GcOptions) -> std::io::Result<GcReport> {
    let mut report = GcReport::default();
    let runs = opts.cache_dir.join("runs");
    let mut doomed: Vec<PathBuf> = Vec::new();
    // Newest first within each instance; what is beyond `keep` goes.
    let mut by_instance: BTreeMap<String, Vec<(SystemTime, PathBuf)>> = BTreeMap::new();
    let mut kept: Vec<(SystemTime, PathBuf, u64)> = Vec::new();
    for (t, p) in rundir::runs_by_age(&runs) {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let id = name
            .as_deref()
            .and_then(rundir::split_run_name)
            .map(|(id, _)| id.to_string())
            .unwrap_or_default();
        by_instance.entry(id).or_default().push((t, p));
    }
    for (_, mut dirs) in by_instance {
        dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
        for (i, (t, p)) in dirs.into_iter().enumerate() {
            if i < opts.keep {
                let n = rundir::dir_size(&p);
                kept.push((t, p, n));
            } else {
                doomed.push(p);
            }
        }
    }
    kept.sort_by_key(|k| k.0);
    let mut total: u64 = kept.iter().map(|k| k.2).sum();
    let mut left = kept.len();
    for (_, p, n) in kept {
        if total <= opts.max_bytes {
            break;
        }
        total -= n;
        left -= 1;
        doomed.push(p);
    }
    report.runs_kept = left;
    if let Ok(entries) = std::fs::read_dir(opts.cache_dir.join("build")) {
        for e in entries.filter_map(|e| e.ok()) {
            let stale = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > BUILD_STALE);
            if stale && e.file_type().is_ok_and(|t| t.is_dir()) {
                doomed.push(e.path());
            }
        }
    }
    for p in doomed {
        let n = rundir::dir_size(&p);
        // A run directory in use (a run going on in another flux process) stays.
        let is_run = p.starts_with(&runs);
        if is_run && rundir::in_use(&p) {
            continue;
        }
        if !opts.dry_run {
            if is_run {
                if !rundir::remove_unless_in_use(&p) {
                    continue;
                }
            } else {
                remove(&p)?;
            }
        }
        report.removed.push((p, n));
    }
    if let Ok(rt) = flux_container::Runtime::connect().await {
        report.containers = if opts.dry_run {
            Some(0)
        } else {
            rt.remove_orphans().await.ok()
        };
    }
    Ok(report)
}

fn remove(p: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(std::io::Error::new(
            e.kind(),
            format!("removing {}: {e}", p.display()),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(root: &Path, name: &str, age_s: u64, bytes: usize) {
        let d = root.join("runs").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("trace.jsonl"), vec![b'x'; bytes]).unwrap();
        let at = SystemTime::now() - Duration::from_secs(age_s);
        std::fs::File::open(&d).unwrap().set_modified(at).unwrap();
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// 14.9: nothing but the harvest's own pruning ever gave run directories and build
    /// scratch back.
    #[tokio::test]
    async fn gc_keeps_the_newest_runs_of_each_instance_within_the_byte_cap() {
        let t = tempfile::tempdir().unwrap();
        run(t.path(), "a-20261129T090000Z", 50, 100);
        run(t.path(), "a-20261129T100000Z", 40, 100);
        run(t.path(), "b--v1-20261129T090000Z", 30, 100);
        run(t.path(), "b-20261129T090000Z", 20, 100);
        run(t.path(), "b-20261129T100000Z", 10, 100);
        let fresh_build = t.path().join("build/flux_x_1");
        let stale_build = t.path().join("build/flux_y_1");
        for d in [&fresh_build, &stale_build] {
            std::fs::create_dir_all(d).unwrap();
        }
        let old = SystemTime::now() - Duration::from_secs(7200);
        std::fs::File::open(&stale_build)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let mut opts = GcOptions {
            cache_dir: t.path().to_path_buf(),
            keep: 1,
            max_bytes: 1 << 30,
            dry_run: true,
        };
        let r = gc(&opts).await.unwrap();
        assert_eq!(r.removed.len(), 3, "{:?}", r.removed);
        assert_eq!(
            names(&t.path().join("runs")).len(),
            5,
            "a dry run removes nothing"
        );
        opts.dry_run = false;
        let r = gc(&opts).await.unwrap();
        assert_eq!(r.bytes(), 200);
        assert_eq!(
            names(&t.path().join("runs")),
            [
                "a-20261129T100000Z",
                "b--v1-20261129T090000Z",
                "b-20261129T100000Z"
            ]
        );
        assert_eq!(names(&t.path().join("build")), ["flux_x_1"]);
        // Within 150 bytes: the newest run only.
        opts.max_bytes = 150;
        let r = gc(&opts).await.unwrap();
        assert_eq!(r.runs_kept, 1);
        assert_eq!(names(&t.path().join("runs")), ["b-20261129T100000Z"]);
    }
}
