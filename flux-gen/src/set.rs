//! The benchmark set: which modules a spec names, running them (all, or one shard), and
//! assembling the screened candidates of every module into `sets/<name>/` (phase 2), which
//! depends on nothing but the module results — so shards merged give the unsharded set.
//!
//! Layout of a set directory:
//! ```text
//! sets/<name>/gen.toml                       the generation spec
//! sets/<name>/index.json                     every instance: kind, module, split, easy, features
//! sets/<name>/instances/<repository>/<id>/   instance.toml + oracle.json (flux's layout)
//! ```
//! and of a run's output directory (`--out`, default `<cache>/gen/<name>/`):
//! ```text
//! modules/<repository>/<module>.json         each module's result (what a shard writes)
//! report.json                                the last run's summary: counts, left-out rules, times
//! ```
use crate::keyed::{seeded_order, Shard};
use crate::module::{self, Gen};
use crate::results::{Candidate, ModuleResult};
use crate::runner::Runner;
use crate::screen;
use crate::spec::{self, GenSpec, RepoSpec};
use anyhow::{bail, Context, Result};
use futures_util::stream::StreamExt;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What to do.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// `sets/<name>/` (holding `gen.toml`), or the spec file.
    pub spec: PathBuf,
    pub shard: Shard,
    /// Module results and the run report; default `<cache>/gen/<name>/`.
    pub out: Option<PathBuf>,
    /// Only assemble the set from the module results in `out` (every module must have one).
    pub merge: bool,
    /// Reuse module results already in `out` instead of running those modules again.
    pub resume: bool,
    /// Compare with the set instead of writing it: the whole set (unsharded), or with
    /// `--shard K/N` a sample — that shard's modules made again into a fresh `out`, compared
    /// with the module results the set was assembled from and the set's instances of them.
    pub check: bool,
    pub harvest: flux_harvest::HarvestOptions,
}

/// One module of the work list.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Work {
    pub repository: String,
    pub module: String,
}

impl Work {
    pub fn key(&self) -> String {
        format!("{}/{}", self.repository, self.module)
    }
}

/// The modules of `repo`: `modules`, then `select.count` more chosen with the seed among the
/// image's files matching `select.glob` (none of `select.exclude`). A glob that matches no
/// file of the image (after `exclude`) is an error naming it: it is a wrong spec, and the set
/// it would make would lack the repository.
pub fn modules_of(spec: &GenSpec, repo: &RepoSpec, files: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = repo.modules.clone();
    if let Some(sel) = &repo.select {
        let matching: Vec<&String> = files
            .iter()
            .filter(|f| spec::glob_match(&sel.glob, f))
            .filter(|f| !sel.exclude.iter().any(|x| spec::glob_match(x, f)))
            .collect();
        if matching.is_empty() {
            bail!(
                "repository {}: select glob `{}` matches no file of image {} under {} ({} `.py` \
                 file(s) listed{})",
                repo.name,
                sel.glob,
                repo.image,
                repo.root,
                files.len(),
                if sel.exclude.is_empty() {
                    String::new()
                } else {
                    format!(", exclude {:?}", sel.exclude)
                }
            );
        }
        let mut pool: Vec<String> = matching
            .into_iter()
            .filter(|f| !out.contains(f))
            .cloned()
            .collect();
        seeded_order(spec.seed, &mut pool, |f| format!("{}/{f}", repo.name));
        out.extend(pool.into_iter().take(sel.count));
    }
    Ok(out)
}

/// The run's summary (`<out>/report.json`, printed by `flux gen`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub set: String,
    pub shard: String,
    pub modules: usize,
    pub modules_run: usize,
    pub modules_skipped: Vec<(String, String)>,
    /// Screened candidates of the modules (before the set's selection).
    pub candidates: usize,
    /// Of those, the ones the static baseline answers right (`easy`).
    pub easy_candidates: usize,
    /// Instances in the set (after phase 2; 0 for a shard).
    pub instances: usize,
    pub by_kind: BTreeMap<String, usize>,
    pub repositories: BTreeMap<String, usize>,
    pub drafted: BTreeMap<String, usize>,
    pub left_out: BTreeMap<String, usize>,
    pub seconds: BTreeMap<String, f64>,
    pub check_runs: usize,
    /// Instances the third witness agreed with, and those it did not confirm (both answers).
    pub witnessed: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub witness: Vec<crate::witness::WitnessReport>,
    pub wall_seconds: f64,
    /// `--check`: what differs between the set and its regeneration.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
}

fn default_out(spec: &GenSpec, harvest: &flux_harvest::HarvestOptions) -> PathBuf {
    harvest.cache_dir.join("gen").join(&spec.name)
}

/// The set directory of a spec path (`sets/<name>/gen.toml` → `sets/<name>/`).
pub fn set_dir(spec_path: &Path) -> PathBuf {
    if spec_path.is_dir() {
        spec_path.to_path_buf()
    } else {
        spec_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// `flux gen`: see the crate docs. Progress goes to stderr; the report is returned.
pub async fn generate(opts: &GenOptions) -> Result<Report> {
    let t0 = std::time::Instant::now();
    let spec = spec::load(&opts.spec)?;
    // One gen at a time on a set (shards of it side by side), before anything runs.
    let _lock = crate::lock::SetLock::acquire(
        &set_dir(&opts.spec),
        if opts.shard.count > 1 && !opts.merge {
            crate::lock::Use::Shard {
                index: opts.shard.index,
                count: opts.shard.count,
            }
        } else {
            crate::lock::Use::Whole
        },
    )?;
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out(&spec, &opts.harvest));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let runner = Runner::connect(opts.harvest.clone()).await?;
    // The work list: every repository's modules (the image's files are listed once).
    let mut work = Vec::new();
    for repo in &spec.repositories {
        runner.image_id(&repo.image).await?;
        runner.check_pins(repo).await?;
        let files = if repo.select.is_some() {
            runner.list_files(repo).await?
        } else {
            Vec::new()
        };
        for m in modules_of(&spec, repo, &files)? {
            work.push(Work {
                repository: repo.name.clone(),
                module: m,
            });
        }
    }
    let mut report = Report {
        set: spec.name.clone(),
        shard: opts.shard.to_string(),
        modules: work.len(),
        ..Report::default()
    };
    let mine = opts.shard.select(work.clone(), Work::key);
    let g = Gen {
        spec: &spec,
        runner: &runner,
        artifacts: runner.work.join("artifacts").join(&spec.name),
        facts: tokio::sync::Mutex::new(BTreeMap::new()),
    };
    if !opts.merge {
        let todo: Vec<(usize, &Work)> = mine
            .iter()
            .enumerate()
            .filter(|(i, w)| {
                let path = out
                    .join("modules")
                    .join(&w.repository)
                    .join(module::result_file(&w.module));
                let keep = opts.resume && read_result(&path).is_ok();
                if keep {
                    eprintln!(
                        "flux gen: [{}/{}] {}: kept from {}",
                        i + 1,
                        mine.len(),
                        w.key(),
                        path.display()
                    );
                }
                !keep
            })
            .collect();
        let n = mine.len();
        let todo_n = todo.len();
        let started = std::time::Instant::now();
        let mut done = 0;
        let g = &g;
        let out_dir = &out;
        let spec = &spec;
        // Modules run side by side (`budget.modules`): one's container runs while another's
        // trace is merged and read. Each result is written as soon as it is done.
        let mut runs = futures_util::stream::iter(todo.into_iter().map(|(i, w)| async move {
            let repo = spec
                .repositories
                .iter()
                .find(|r| r.name == w.repository)
                .expect("work comes from the spec");
            (i, module::run_module(g, repo, &w.module).await)
        }))
        .buffer_unordered(spec.budget.modules.max(1));
        while let Some((i, r)) = runs.next().await {
            module::write_result(out_dir, &r)?;
            done += 1;
            eprintln!(
                "flux gen: [{}/{n}] {} ({})",
                i + 1,
                line(&r),
                progress(done, todo_n, started.elapsed())
            );
            report.modules_run += 1;
        }
    }
    // Read back this shard's (or every) module result.
    let wanted = if opts.shard.count > 1 && !opts.merge {
        mine
    } else {
        work
    };
    let mut results = Vec::new();
    let mut missing = Vec::new();
    for w in &wanted {
        let path = out
            .join("modules")
            .join(&w.repository)
            .join(module::result_file(&w.module));
        match read_result(&path) {
            Ok(r) => results.push(r),
            Err(_) => missing.push(w.key()),
        }
    }
    if !missing.is_empty() {
        bail!(
            "no result for {} module(s) in {} (run their shards first): {}",
            missing.len(),
            out.display(),
            missing.join(", ")
        );
    }
    if opts.check && opts.shard.count > 1 && !opts.merge {
        // A sample check: this shard's modules made again from scratch, compared with the
        // results the set was assembled from and with the set's instances of those modules.
        let reference = default_out(&spec, &opts.harvest);
        if std::path::absolute(&out).ok() == std::path::absolute(&reference).ok() {
            bail!(
                "--check --shard makes its modules again into a fresh --out: {} holds the \
                 results the set was assembled from",
                reference.display()
            );
        }
        report.differences = check_modules(&reference, &results)?;
        finish(&spec, &runner, &mut results, &mut report).await?;
        report
            .differences
            .extend(check_set_modules(&set_dir(&opts.spec), &results)?);
    }
    for r in &results {
        report.candidates += r.candidates.len();
        report.check_runs += r.check_runs;
        report.witnessed += r.witnessed;
        report.witness.extend(r.witness.iter().cloned());
        for (k, v) in &r.left_out {
            *report.left_out.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &r.drafted {
            *report.drafted.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &r.seconds {
            *report.seconds.entry(k.clone()).or_insert(0.0) += v;
        }
        if let Some(why) = &r.skipped {
            report
                .modules_skipped
                .push((format!("{}/{}", r.repository, r.module), why.clone()));
        }
    }
    if opts.shard.count == 1 || opts.merge {
        finish(&spec, &runner, &mut results, &mut report).await?;
        // The answers that do not discriminate are screened out before the set's selection
        // (`flux gen --reauthor` applies the same screens to a set on disk).
        let mut sources = BTreeMap::new();
        for repo in &spec.repositories {
            if let Some(src) = screen::source_root(&runner, repo).await {
                sources.insert(repo.name.clone(), src);
            }
        }
        let judged: BTreeSet<String> = results
            .iter()
            .flat_map(|r| r.candidates.iter().map(|c| c.id.clone()))
            .collect();
        let (chosen, screened) = assemble(&spec, results, &|r| sources.get(r).cloned());
        for d in &screened {
            *report
                .left_out
                .entry(format!("screen:{}", d.screen))
                .or_insert(0) += 1;
        }
        for c in &chosen {
            *report
                .by_kind
                .entry(c.kind.as_str().to_string())
                .or_insert(0) += 1;
            *report
                .repositories
                .entry(c.spec.repository.clone())
                .or_insert(0) += 1;
        }
        report.instances = chosen.len();
        let dir = set_dir(&opts.spec);
        if opts.check {
            report.differences = check_set(&dir, &chosen)?;
        } else {
            refuse_hollow_set(&spec, &dir, &report)?;
            write_set_with(&dir, &chosen, Some((&screened, &judged)))?;
        }
    }
    report.wall_seconds = t0.elapsed().as_secs_f64();
    std::fs::write(
        out.join(if opts.shard.count > 1 && !opts.merge {
            format!(
                "report-shard-{}-of-{}.json",
                opts.shard.index, opts.shard.count
            )
        } else {
            "report.json".to_string()
        }),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    Ok(report)
}

/// What the set's candidates are made of besides the module results: each gold cut to its
/// template as a harvest cuts it ([`screen::to_template`]; the ones it screens out are counted
/// under `set:answer-size`), the audit's posing screens ([`screen::ill_posed`], under
/// `set:<rule>`), of two with one function, kind and cut answer the later in the seeded order
/// (`set:same-answer`), and `easy`, the static baseline's verdict ([`screen::mark_easy`]). Pure functions of the module results and the repository's source,
/// so `--resume`, `--merge` and shards give the same set.
async fn finish(
    spec: &GenSpec,
    runner: &Runner,
    results: &mut [ModuleResult],
    report: &mut Report,
) -> Result<()> {
    let scratch = runner.work.join("baseline");
    for repo in &spec.repositories {
        let src = screen::source_root(runner, repo).await;
        // The previous release's source, when the set dates releases (targets are compared).
        let old_src = match crate::release::previous_repo(repo) {
            Some(prev) => screen::source_root(runner, &prev).await,
            None => None,
        };
        for r in results.iter_mut().filter(|r| r.repository == repo.name) {
            let mut kept = Vec::new();
            let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
            let mut cands = std::mem::take(&mut r.candidates);
            cands.sort_by_key(|c| (c.priority, c.id.clone()));
            for mut c in cands {
                let cut = screen::to_template(&scratch, &c, spec.budget.max_answer_size)
                    .with_context(|| format!("{}: its gold in its template", c.id))?;
                let Some(answer) = cut else {
                    *report.left_out.entry("set:answer-size".into()).or_insert(0) += 1;
                    continue;
                };
                c.oracle.oracle_answer = answer.clone();
                if let Some(rule) = screen::ill_posed(&c, src.as_deref()) {
                    *report.left_out.entry(format!("set:{rule}")).or_insert(0) += 1;
                    continue;
                }
                let key = (
                    c.function.clone(),
                    c.kind.as_str().to_string(),
                    answer.to_string(),
                );
                if !seen.insert(key) {
                    *report.left_out.entry("set:same-answer".into()).or_insert(0) += 1;
                    continue;
                }
                c.oracle.oracle_answer = answer;
                kept.push(c);
            }
            kept.sort_by(|a, b| a.id.cmp(&b.id));
            crate::release::stamp(repo, &mut kept, src.as_deref(), old_src.as_deref());
            r.candidates = kept;
            report.easy_candidates +=
                screen::mark_easy(&scratch, src.as_deref(), &mut r.candidates)?;
        }
    }
    Ok(())
}

/// `3/40 run, 2m05s, about 26m left`: modules run of those to run now, the time so far, and
/// the rest at the mean pace so far (modules run side by side, so the pace is the run's own).
fn progress(done: usize, total: usize, elapsed: std::time::Duration) -> String {
    let left = total.saturating_sub(done);
    let eta = if done == 0 || left == 0 {
        String::new()
    } else {
        let per = elapsed.as_secs_f64() / done as f64;
        format!(", about {} left", clock(per * left as f64))
    };
    format!("{done}/{total} run, {}{eta}", clock(elapsed.as_secs_f64()))
}

/// `45s`, `2m05s`, `1h02m`.
fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

fn line(r: &ModuleResult) -> String {
    match &r.skipped {
        Some(why) => format!("{}/{}: skipped: {why}", r.repository, r.module),
        None => format!(
            "{}/{}: {} instance(s) ({} drafted, {} own runs, {:.0}s)",
            r.repository,
            r.module,
            r.candidates.len(),
            r.drafted.values().sum::<usize>(),
            r.check_runs,
            r.seconds.values().sum::<f64>()
        ),
    }
}

fn read_result(path: &Path) -> Result<ModuleResult> {
    let b = std::fs::read(path)?;
    Ok(serde_json::from_slice(&b)?)
}

/// Phase 2: the set, per repository: the discriminating screens ([`crate::discriminate`]) over
/// every module's candidates first, then the set's selection over what they keep (kinds in
/// turn, `per_repository`, `repository_per_function`, `repository_per_file` across modules),
/// so a screened answer never takes a place another candidate could have had. Returns the set
/// and what the screens dropped. A pure function of the results (and the repositories'
/// source), whatever order they come in.
pub fn assemble(
    spec: &GenSpec,
    mut results: Vec<ModuleResult>,
    sources: &dyn Fn(&str) -> Option<std::path::PathBuf>,
) -> (Vec<Candidate>, Vec<crate::discriminate::Screened>) {
    results.sort_by(|a, b| (&a.repository, &a.module).cmp(&(&b.repository, &b.module)));
    let q = &spec.quotas;
    let mut out = Vec::new();
    let mut screened = Vec::new();
    for repo in &spec.repositories {
        let cands: Vec<Candidate> = results
            .iter()
            .filter(|r| r.repository == repo.name)
            .flat_map(|r| r.candidates.iter().cloned())
            .collect();
        let (kept, dropped) = crate::discriminate::apply(cands, sources);
        screened.extend(dropped);
        out.extend(screen::select(
            kept,
            q.per_repository,
            q.repository_per_function.unwrap_or(q.per_function),
            q.repository_per_file.unwrap_or(q.per_file),
            &q.kinds,
            &mut |_| {},
        ));
    }
    out.sort_by(|a, b| (&a.spec.repository, &a.id).cmp(&(&b.spec.repository, &b.id)));
    screened.sort_by(|a, b| (&a.repository, &a.id).cmp(&(&b.repository, &b.id)));
    (out, screened)
}

/// `index.json`: one row per instance.
#[derive(Serialize)]
struct IndexRow<'a> {
    id: &'a str,
    repository: &'a str,
    kind: &'a str,
    extractor: &'a str,
    module: &'a str,
    split: &'a str,
    easy: bool,
    difficulty: &'a flux_instance::Difficulty,
    /// The independent witness that agreed with its gold (`reference`), when one was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    witness: Option<&'a str>,
    /// The release date of its repository version, when the set dates releases.
    #[serde(skip_serializing_if = "Option::is_none")]
    released: Option<&'a str>,
    /// Its target since the previous release: `changed`, `unchanged` or `new`.
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
}

pub(crate) fn index_json(chosen: &[Candidate]) -> Result<String> {
    let rows: Vec<IndexRow> = chosen
        .iter()
        .filter_map(|c| {
            let g = c.spec.generated.as_ref()?;
            Some(IndexRow {
                id: &c.id,
                repository: &c.spec.repository,
                kind: c.kind.as_str(),
                extractor: &c.extractor,
                module: &g.module,
                split: &g.split,
                easy: g.easy,
                difficulty: &g.difficulty,
                witness: c.oracle.provenance.witness.as_ref().map(|w| w.by.as_str()),
                released: g.release.as_ref().map(|r| r.date.as_str()),
                target: g.release.as_ref().and_then(|r| r.target.as_deref()),
            })
        })
        .collect();
    Ok(serde_json::to_string_pretty(&rows)? + "\n")
}

/// Write the set: `instances/` made to hold exactly `chosen` and the earlier releases' kept
/// instances ([`crate::release::is_archived`]; an instance whose oracle.json
/// differs only in [`RUN_FIELDS`] and the question it records keeps its file as it is, so a
/// regeneration that changes nothing changes no byte: [`owned_by_harvest`]), and `index.json`.
pub fn write_set(dir: &Path, chosen: &[Candidate]) -> Result<()> {
    write_set_with(dir, chosen, None)
}

/// The scratch directory inside a set where its next version is made before it replaces the
/// set (`instances/`, `index.json`, `screened.json`).
pub const STAGING_DIR: &str = ".gen.new";

/// [`write_set`], and `screened.json` with `screened` added when given (with the ids of every
/// candidate this assembly judged: their earlier verdicts are replaced, so no instance of the
/// set is listed as screened by an older run). Everything is made in
/// [`STAGING_DIR`] first; only then is the set replaced, by renames alone (`instances/`, then
/// each file): a failure while making it leaves the set as it was, byte for byte.
pub fn write_set_with(
    dir: &Path,
    chosen: &[Candidate],
    screened: Option<(&[crate::discriminate::Screened], &BTreeSet<String>)>,
) -> Result<()> {
    let inst_root = dir.join("instances");
    let stage = dir.join(STAGING_DIR);
    let _ = std::fs::remove_dir_all(&stage);
    let staging = stage.join("instances");
    std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    for c in chosen {
        let d = screen::write_instance(&staging, c)?;
        let old = inst_root.join(&c.spec.repository).join(&c.id);
        // The previous file stays when it differs only in the fields that name the run (an
        // answer and question alone kept provenance made before the image identity was
        // recorded).
        if let Ok(prev) = std::fs::read_to_string(old.join(flux_instance::ORACLE_FILE)) {
            let now = screen::oracle_json(&c.oracle)?;
            if owned_by_harvest(&prev).is_some()
                && owned_by_harvest(&prev) == owned_by_harvest(&now)
            {
                std::fs::write(d.join(flux_instance::ORACLE_FILE), prev)?;
            }
        }
    }
    std::fs::write(stage.join("index.json"), index_json(chosen)?)?;
    let screened_file = crate::discriminate::SCREENED_FILE;
    if let Some((now, judged)) = screened {
        std::fs::write(
            stage.join(screened_file),
            crate::reauthor::screened_json(dir, now, &|id| judged.contains(id))?,
        )?;
    }
    // The set is replaced: renames only from here.
    // Earlier releases' instances (`<id>@<version>`, `flux gen --release`) stay as they are:
    // moved into the new set by renames.
    for d in flux_instance::discover(&[&inst_root]).unwrap_or_default() {
        if crate::release::is_archived(&d) {
            if let Ok(rel) = d.strip_prefix(&inst_root) {
                let to = staging.join(rel);
                std::fs::create_dir_all(to.parent().unwrap_or(&staging))?;
                std::fs::rename(&d, &to)?;
            }
        }
    }
    let old = dir.join(".instances.old");
    let _ = std::fs::remove_dir_all(&old);
    if inst_root.exists() {
        std::fs::rename(&inst_root, &old)?;
    }
    std::fs::rename(&staging, &inst_root)?;
    std::fs::rename(stage.join("index.json"), dir.join("index.json"))?;
    if screened.is_some() {
        std::fs::rename(stage.join(screened_file), dir.join(screened_file))?;
    }
    let _ = std::fs::remove_dir_all(&old);
    let _ = std::fs::remove_dir_all(&stage);
    Ok(())
}

/// Refuse to write a set in which a repository of the spec has no instance: that is what a
/// wrong pin, a timeout of nothing or a broken image make (every module skipped), and writing
/// it replaced a good set with an empty one (issue 26.6). The set on disk is left as it is.
pub fn refuse_hollow_set(spec: &GenSpec, dir: &Path, report: &Report) -> Result<()> {
    let empty: Vec<String> = spec
        .repositories
        .iter()
        .filter(|r| report.repositories.get(&r.name).copied().unwrap_or(0) == 0)
        .map(|r| {
            let prefix = format!("{}/", r.name);
            let skipped: Vec<String> = report
                .modules_skipped
                .iter()
                .filter(|(m, _)| m.starts_with(&prefix))
                .take(3)
                .map(|(m, why)| format!("{m}: {why}"))
                .collect();
            if skipped.is_empty() {
                r.name.clone()
            } else {
                format!("{} (skipped: {})", r.name, skipped.join("; "))
            }
        })
        .collect();
    if !empty.is_empty() {
        bail!(
            "not writing the set {}: no instance of repository {}; the set on disk is left as \
             it was",
            dir.display(),
            empty.join(", ")
        );
    }
    Ok(())
}

/// Provenance fields that name the run that made a gold answer (when, the digest of that run's
/// trace, and the build of the image it ran in — `image_id` changes with every rebuild of one
/// image definition, whose `image_identity`, compared, stays): the only bytes a regeneration
/// may change.
const RUN_FIELDS: [&str; 3] = ["harvested_at", "trace_sha256", "image_id"];

/// What of an oracle.json a harvest owns and a regeneration must reproduce: everything but the
/// [`RUN_FIELDS`] and `question`. The question is the instance's (instance.toml, compared byte
/// for byte on its own): `flux gen --reauthor` rewrites it there and leaves oracle.json as it
/// was, so the `question` oracle.json records is the text it was harvested under, which a
/// fresh generation (asking the new text) does not reproduce.
fn owned_by_harvest(oracle_json: &str) -> Option<serde_json::Value> {
    let mut v: serde_json::Value = serde_json::from_str(oracle_json).ok()?;
    if let Some(o) = v.as_object_mut() {
        o.remove("question");
    }
    if let Some(p) = v.get_mut("provenance").and_then(|p| p.as_object_mut()) {
        for f in RUN_FIELDS {
            p.remove(f);
        }
        // The witness's run is named by its trace's digest, as the gold's run is.
        if let Some(w) = p.get_mut("witness").and_then(|w| w.as_object_mut()) {
            w.remove("trace_sha256");
        }
    }
    Some(v)
}

/// `--check`: what differs between the set in `dir` and `chosen` (instance.toml byte for byte,
/// oracle.json byte for byte save [`RUN_FIELDS`] and its recorded question
/// ([`owned_by_harvest`]), index.json, and which instances there are).
pub fn check_set(dir: &Path, chosen: &[Candidate]) -> Result<Vec<String>> {
    let mut diffs = Vec::new();
    let inst_root = dir.join("instances");
    let have: BTreeSet<PathBuf> = flux_instance::discover(&[&inst_root])
        .unwrap_or_default()
        .into_iter()
        .filter(|d| !crate::release::is_archived(d))
        .collect();
    let mut want = BTreeSet::new();
    for c in chosen {
        let d = inst_root.join(&c.spec.repository).join(&c.id);
        want.insert(d.clone());
        let toml_now = screen::instance_toml(&c.spec)?;
        match std::fs::read_to_string(d.join(flux_instance::INSTANCE_FILE)) {
            Ok(t) if t == toml_now => {}
            Ok(_) => diffs.push(format!("{}: instance.toml differs", d.display())),
            Err(_) => {
                diffs.push(format!("{}: missing from the set", d.display()));
                continue;
            }
        }
        let oracle_now = screen::oracle_json(&c.oracle)?;
        let old = std::fs::read_to_string(d.join(flux_instance::ORACLE_FILE)).unwrap_or_default();
        if owned_by_harvest(&old) != owned_by_harvest(&oracle_now) {
            diffs.push(format!("{}: oracle.json differs", d.display()));
        }
    }
    for d in have.difference(&want) {
        diffs.push(format!("{}: in the set, not regenerated", d.display()));
    }
    let index_now = index_json(chosen)?;
    if std::fs::read_to_string(dir.join("index.json")).unwrap_or_default() != index_now {
        diffs.push(format!(
            "{}: index.json differs",
            dir.join("index.json").display()
        ));
    }
    Ok(diffs)
}

/// `--check --shard K/N`, first half: what differs between `fresh` (this shard's modules made
/// again) and the module results in `reference` (what the set was assembled from): which
/// modules were skipped, which candidates there are, their instance.toml and oracle.json save
/// [`RUN_FIELDS`].
pub fn check_modules(reference: &Path, fresh: &[ModuleResult]) -> Result<Vec<String>> {
    let mut diffs = Vec::new();
    let texts = |c: &Candidate| -> Result<(String, Option<serde_json::Value>)> {
        Ok((
            screen::instance_toml(&c.spec)?,
            owned_by_harvest(&screen::oracle_json(&c.oracle)?),
        ))
    };
    for r in fresh {
        let key = format!("{}/{}", r.repository, r.module);
        let path = reference
            .join("modules")
            .join(&r.repository)
            .join(module::result_file(&r.module));
        let Ok(old) = read_result(&path) else {
            diffs.push(format!("{key}: no stored result at {}", path.display()));
            continue;
        };
        if old.skipped.is_some() != r.skipped.is_some() {
            diffs.push(format!(
                "{key}: skipped before ({:?}), now ({:?})",
                old.skipped, r.skipped
            ));
        }
        let old_ids: BTreeSet<&str> = old.candidates.iter().map(|c| c.id.as_str()).collect();
        let new_ids: BTreeSet<&str> = r.candidates.iter().map(|c| c.id.as_str()).collect();
        for id in old_ids.difference(&new_ids) {
            diffs.push(format!("{key}: {id}: a candidate before, not now"));
        }
        for id in new_ids.difference(&old_ids) {
            diffs.push(format!("{key}: {id}: a candidate now, not before"));
        }
        for c in &r.candidates {
            let Some(o) = old.candidates.iter().find(|o| o.id == c.id) else {
                continue;
            };
            // `easy` is decided at the set's assembly: module results do not hold it.
            let unmarked = |c: &Candidate| {
                let mut c = c.clone();
                if let Some(g) = c.spec.generated.as_mut() {
                    g.easy = false;
                }
                c
            };
            let (t_new, j_new) = texts(&unmarked(c))?;
            let (t_old, j_old) = texts(&unmarked(o))?;
            if t_old != t_new {
                diffs.push(format!("{key}: {}: instance.toml differs", c.id));
            }
            if j_old != j_new {
                diffs.push(format!("{key}: {}: oracle.json differs", c.id));
            }
        }
    }
    Ok(diffs)
}

/// `--check --shard K/N`, second half: the set's instances of `fresh`'s modules (finished as
/// the set's assembly finishes them) must each be a fresh candidate, byte for byte (save
/// [`RUN_FIELDS`]).
pub fn check_set_modules(dir: &Path, fresh: &[ModuleResult]) -> Result<Vec<String>> {
    let mut diffs = Vec::new();
    let texts = |c: &Candidate| -> Result<(String, Option<serde_json::Value>)> {
        Ok((
            screen::instance_toml(&c.spec)?,
            owned_by_harvest(&screen::oracle_json(&c.oracle)?),
        ))
    };
    let mine: BTreeSet<(String, String)> = fresh
        .iter()
        .map(|r| (r.repository.clone(), r.module.clone()))
        .collect();
    let by_id: BTreeMap<&str, &Candidate> = fresh
        .iter()
        .flat_map(|r| r.candidates.iter())
        .map(|c| (c.id.as_str(), c))
        .collect();
    let inst_root = dir.join("instances");
    for d in flux_instance::discover(&[&inst_root]).unwrap_or_default() {
        if crate::release::is_archived(&d) {
            continue;
        }
        let toml_text =
            std::fs::read_to_string(d.join(flux_instance::INSTANCE_FILE)).unwrap_or_default();
        let Ok(spec) = toml::from_str::<flux_instance::InstanceSpec>(&toml_text) else {
            diffs.push(format!("{}: instance.toml does not parse", d.display()));
            continue;
        };
        let Some(g) = &spec.generated else { continue };
        if !mine.contains(&(spec.repository.clone(), g.module.clone())) {
            continue;
        }
        let Some(c) = by_id.get(spec.id.as_str()) else {
            diffs.push(format!("{}: in the set, not regenerated", d.display()));
            continue;
        };
        let (t_new, j_new) = texts(c)?;
        if toml_text != t_new {
            diffs.push(format!("{}: instance.toml differs", d.display()));
        }
        let old = std::fs::read_to_string(d.join(flux_instance::ORACLE_FILE)).unwrap_or_default();
        if owned_by_harvest(&old) != j_new {
            diffs.push(format!("{}: oracle.json differs", d.display()));
        }
    }
    Ok(diffs)
}

/// Harvest paths of `--shard K/N`: the instance directories at or under `paths` that fall in
/// the shard (keyed by `<repository>/<id>`, as the directories name them).
pub fn shard_instances(paths: &[PathBuf], shard: Shard) -> Result<Vec<PathBuf>> {
    let dirs = flux_instance::discover(paths)?;
    Ok(shard.select(dirs, |d| {
        let id = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let repo = d
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("{repo}/{id}")
    }))
}

#[cfg(test)]
mod tests {
    /// `flux gen` ran for hours with no idea of when it would end: each module's line says
    /// how many are run and about how long the rest will take.
    #[test]
    fn progress_says_how_many_are_run_and_about_how_long_is_left() {
        use std::time::Duration;
        assert_eq!(
            super::progress(3, 40, Duration::from_secs(125)),
            "3/40 run, 2m05s, about 25m42s left"
        );
        assert_eq!(
            super::progress(40, 40, Duration::from_secs(4000)),
            "40/40 run, 1h06m"
        );
        assert_eq!(super::progress(0, 5, Duration::ZERO), "0/5 run, 0s");
    }

    use super::*;
    use crate::screen::tests::fake;
    use flux_extract::QuestionKind as K;

    fn result(repo: &str, module: &str, ids: &[(&str, K, &str)]) -> ModuleResult {
        ModuleResult {
            repository: repo.into(),
            module: module.into(),
            candidates: ids
                .iter()
                .map(|(id, k, f)| {
                    let mut c = fake(id, *k, f, &["t::a"]);
                    c.spec.repository = repo.into();
                    // A gold of its own that no screen drops (the M2 kind aside: below).
                    c.oracle.oracle_answer = match k {
                        K::M2 => serde_json::json!({"min_iterations": 1, "max_iterations": 1}),
                        _ => serde_json::json!({ "answer": id }),
                    };
                    c
                })
                .collect(),
            ..ModuleResult::default()
        }
    }

    /// Phase 2 depends on the module results alone: in any order (shards finish in any
    /// order, and each writes its own modules), the set is the same.
    #[test]
    fn assembly_is_the_same_whatever_order_the_modules_come_in() {
        let mut spec = crate::spec::parse(crate::spec::tests::GOOD, Path::new("gen.toml")).unwrap();
        spec.repositories[0].name = "r".into();
        spec.quotas.per_repository = 5;
        spec.quotas.per_function = 2;
        let a = result(
            "r",
            "m1.py",
            &[("a1", K::S1, "f"), ("a2", K::S2, "f"), ("a3", K::S3, "f")],
        );
        let b = result(
            "r",
            "m2.py",
            &[("b1", K::S1, "g"), ("b2", K::M1, "g"), ("b3", K::S5, "h")],
        );
        let c = result("x", "m3.py", &[("c1", K::S1, "k")]);
        let one = assemble(&spec, vec![a.clone(), b.clone(), c.clone()], &|_| None).0;
        let two = assemble(&spec, vec![c.clone(), b.clone(), a.clone()], &|_| None).0;
        assert_eq!(one, two);
        // The repository-wide cap is the set's: f may now have 3 across the modules.
        let mut wide = spec.clone();
        wide.quotas.repository_per_function = Some(3);
        wide.quotas.per_repository = 10;
        let three = assemble(&wide, vec![a.clone(), b.clone(), c.clone()], &|_| None).0;
        assert_eq!(three.iter().filter(|c| c.function == "f").count(), 3);
        let ids: Vec<&str> = one.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(one.len(), 5, "{ids:?}");
        // Repository `x` is not in the spec: none of its candidates.
        assert!(!ids.contains(&"c1"));
        // f is capped at 2 across the modules.
        assert!(one.iter().filter(|c| c.function == "f").count() <= 2);
    }

    /// flux-gen-v2 assembled 5,047 instances of 13,677 candidates, M5 at 0.4 %: the screens ran
    /// after the set's selection, so every screened answer (2,590) had taken a place, and a
    /// per-function cap, that a candidate the screens keep could have had.
    #[test]
    fn screened_answers_do_not_take_the_set_places_of_others() {
        let mut spec = crate::spec::parse(crate::spec::tests::GOOD, Path::new("gen.toml")).unwrap();
        spec.repositories[0].name = "r".into();
        spec.quotas.per_repository = 3;
        spec.quotas.repository_per_function = Some(3);
        // The M2 golds are `constant` (as many iterations in every test).
        let r = result(
            "r",
            "m1.py",
            &[
                ("a1", K::M2, "f"),
                ("a2", K::M2, "f"),
                ("b1", K::S1, "g"),
                ("b2", K::S1, "h"),
                ("b3", K::S1, "k"),
            ],
        );
        let (set, screened) = assemble(&spec, vec![r], &|_| None);
        let ids: Vec<&str> = set.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["b1", "b2", "b3"]);
        let gone: Vec<&str> = screened.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(gone, ["a1", "a2"]);
    }

    /// The `[generated]` table of set `s`'s instances from module `m1.py` of repository `r`.
    fn generated_m1() -> flux_instance::GeneratedSpec {
        flux_instance::GeneratedSpec {
            set: "s".into(),
            split: "test".into(),
            module: "m1.py".into(),
            trace: "r/m1.py".into(),
            easy: false,
            difficulty: Default::default(),
            release: None,
        }
    }

    /// `--check --shard`: a module made again is compared with its stored result and with
    /// the set's instances of it; a changed gold answer is found, the run fields are not.
    #[test]
    fn a_sample_check_compares_fresh_modules_with_stored_results_and_the_set() {
        let t = tempfile::tempdir().unwrap();
        let (set, reference) = (t.path().join("set"), t.path().join("ref"));
        let mut r = result("r", "m1.py", &[("a1", K::S1, "f"), ("a2", K::S2, "g")]);
        for c in &mut r.candidates {
            c.spec.generated = Some(generated_m1());
            c.oracle.oracle_answer = serde_json::json!({"n": 1});
        }
        module::write_result(&reference, &r).unwrap();
        write_set(&set, &r.candidates).unwrap();
        let mut fresh = r.clone();
        fresh.candidates[0].oracle.provenance.harvested_at = "later".into();
        assert_eq!(
            [
                check_modules(&reference, std::slice::from_ref(&fresh)).unwrap(),
                check_set_modules(&set, std::slice::from_ref(&fresh)).unwrap()
            ]
            .concat(),
            Vec::<String>::new()
        );
        fresh.candidates[1].oracle.oracle_answer = serde_json::json!({"n": 2});
        let d = [
            check_modules(&reference, std::slice::from_ref(&fresh)).unwrap(),
            check_set_modules(&set, std::slice::from_ref(&fresh)).unwrap(),
        ]
        .concat();
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].contains("a2: oracle.json differs"), "{d:?}");
        assert!(d[1].ends_with("a2: oracle.json differs"), "{d:?}");
        fresh.candidates.remove(0);
        let d = [
            check_modules(&reference, std::slice::from_ref(&fresh)).unwrap(),
            check_set_modules(&set, &[fresh]).unwrap(),
        ]
        .concat();
        assert!(
            d.iter()
                .any(|x| x.contains("a1: a candidate before, not now")),
            "{d:?}"
        );
        assert!(
            d.iter()
                .any(|x| x.ends_with("a1: in the set, not regenerated")),
            "{d:?}"
        );
    }

    /// Writing the set kept an oracle.json whose answer and question were unchanged, with the
    /// provenance it had (an empty image identity): only the run fields may stay old.
    #[test]
    fn a_rewritten_set_keeps_old_oracles_only_when_just_the_run_differs() {
        let t = tempfile::tempdir().unwrap();
        let mut r = result("r", "m1.py", &[("a1", K::S1, "f")]);
        r.candidates[0].oracle.provenance.harvested_at = "t0".into();
        write_set(t.path(), &r.candidates).unwrap();
        let read = || -> flux_instance::Oracle {
            let p = t
                .path()
                .join("instances/r/a1")
                .join(flux_instance::ORACLE_FILE);
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
        };
        r.candidates[0].oracle.provenance.harvested_at = "t1".into();
        write_set(t.path(), &r.candidates).unwrap();
        assert_eq!(
            read().provenance.harvested_at,
            "t0",
            "only the run differs: kept"
        );
        r.candidates[0].oracle.provenance.image_identity = "flux-id:ab".into();
        write_set(t.path(), &r.candidates).unwrap();
        assert_eq!(read().provenance.image_identity, "flux-id:ab");
        assert_eq!(read().provenance.harvested_at, "t1");
    }

    /// flux-gen-v2 assembled again after a screen was mended listed 131 of its M5 instances in
    /// `screened.json` too: a gen's write added today's drops to every earlier one, so a verdict
    /// that no longer holds stayed. A candidate judged again gets today's verdict alone; a drop
    /// of a candidate not judged now (an earlier release's) stays.
    #[test]
    fn an_instance_in_the_set_is_not_listed_as_screened_by_an_older_run() {
        let t = tempfile::tempdir().unwrap();
        let r = result("r", "m1.py", &[("a1", K::S1, "f"), ("a2", K::S1, "g")]);
        let drop = |id: &str| crate::discriminate::Screened {
            id: id.into(),
            repository: "r".into(),
            kind: "S1_IntraProceduralCFG".into(),
            screen: "near-duplicate".into(),
        };
        let judged: BTreeSet<String> = ["a1".to_string(), "a2".to_string()].into();
        let first = [drop("a2"), drop("old")];
        write_set_with(t.path(), &r.candidates[..1], Some((&first, &judged))).unwrap();
        write_set_with(t.path(), &r.candidates, Some((&[], &judged))).unwrap();
        let listed: Vec<String> = crate::reauthor::read_screened(t.path())
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(listed, ["old"]);
    }

    /// `cargo xtask setup` rebuilt sympy's image (a new `image_id`, the same `image_identity`):
    /// `--check` reported every sympy oracle.json as different, though nothing an answer
    /// depends on had changed. A changed identity still differs.
    #[test]
    fn a_rebuilt_image_is_no_difference_a_changed_identity_is() {
        let t = tempfile::tempdir().unwrap();
        let mut r = result("r", "m1.py", &[("a1", K::S1, "f")]);
        r.candidates[0].oracle.provenance.image_id = "sha256:aa".into();
        r.candidates[0].oracle.provenance.image_identity = "flux-id:ab".into();
        write_set(t.path(), &r.candidates).unwrap();
        r.candidates[0].oracle.provenance.image_id = "sha256:bb".into();
        assert_eq!(
            check_set(t.path(), &r.candidates).unwrap(),
            Vec::<String>::new()
        );
        r.candidates[0].oracle.provenance.image_identity = "flux-id:cd".into();
        let d = check_set(t.path(), &r.candidates).unwrap();
        assert!(
            d.len() == 1 && d[0].ends_with("oracle.json differs"),
            "{d:?}"
        );
    }

    /// `flux gen --reauthor` rewrote each question in instance.toml and left oracle.json (the
    /// harvested answer) as it was, old question included: `--check` then reported every
    /// re-authored instance's oracle.json as different, though its answer was the fresh one.
    /// The question is instance.toml's; a changed answer still differs.
    #[test]
    fn check_of_a_reauthored_set_reports_no_stale_oracle_question() {
        let t = tempfile::tempdir().unwrap();
        let mut r = result("r", "m1.py", &[("a1", K::S1, "f")]);
        let c = &mut r.candidates[0];
        c.spec.question = "A long question that spells out every convention.".into();
        c.oracle.question = c.spec.question.clone();
        write_set(t.path(), &r.candidates).unwrap();
        let dir = t.path().join("instances/r/a1");
        let oracle_before = std::fs::read(dir.join(flux_instance::ORACLE_FILE)).unwrap();
        // Re-authored: the new question in instance.toml only.
        let c = &mut r.candidates[0];
        c.spec.question = "Which lines run?".into();
        std::fs::write(
            dir.join(flux_instance::INSTANCE_FILE),
            screen::instance_toml(&c.spec).unwrap(),
        )
        .unwrap();
        // A fresh generation asks (and harvests under) the new question.
        c.oracle.question = c.spec.question.clone();
        assert_eq!(
            check_set(t.path(), &r.candidates).unwrap(),
            Vec::<String>::new()
        );
        // Writing the regenerated set changes no byte of the harvested file.
        write_set(t.path(), &r.candidates).unwrap();
        assert_eq!(
            std::fs::read(dir.join(flux_instance::ORACLE_FILE)).unwrap(),
            oracle_before
        );
        r.candidates[0].oracle.oracle_answer = serde_json::json!({"n": 2});
        let d = check_set(t.path(), &r.candidates).unwrap();
        assert!(
            d.len() == 1 && d[0].ends_with("oracle.json differs"),
            "{d:?}"
        );
    }

    /// A set regenerated for a new release (`flux gen --release`) keeps the earlier release's
    /// instances (`<id>@<version>`): writing the set leaves them, `--check` does not count
    /// them as instances the spec no longer makes.
    #[test]
    fn a_new_release_keeps_the_old_releases_instances() {
        let t = tempfile::tempdir().unwrap();
        let mut r = result("r", "m1.py", &[("a1", K::S1, "f"), ("a2", K::S2, "g")]);
        for c in &mut r.candidates {
            c.spec.generated = Some(generated_m1());
        }
        write_set(t.path(), &r.candidates).unwrap();
        crate::release::archive(t.path(), &t.path().join("out"), "r", "1").unwrap();
        // The new release: a1 again (the same id), a2 gone.
        r.candidates.truncate(1);
        assert_eq!(check_set(t.path(), &r.candidates).unwrap().len(), 2);
        write_set(t.path(), &r.candidates).unwrap();
        let names: Vec<String> = flux_instance::discover(&[t.path().join("instances")])
            .unwrap()
            .iter()
            .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a1", "a1@1", "a2@1"]);
        assert_eq!(
            check_set(t.path(), &r.candidates).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            check_set_modules(t.path(), std::slice::from_ref(&r)).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn module_selection_is_seeded_and_keeps_the_listed_ones_first() {
        let spec = crate::spec::parse(
            &crate::spec::tests::GOOD.replace(
                "split = \"test\"",
                "split = \"test\"\nselect = { glob = \"sympy/*/tests/test_*.py\", count = 2 }",
            ),
            Path::new("gen.toml"),
        )
        .unwrap();
        let repo = &spec.repositories[0];
        let files: Vec<String> = [
            "sympy/core/tests/test_arit.py",
            "sympy/core/add.py",
            "sympy/ntheory/tests/test_factor_.py",
            "sympy/sets/tests/test_sets.py",
            "sympy/logic/tests/test_boolalg.py",
        ]
        .map(String::from)
        .into();
        let m = modules_of(&spec, repo, &files).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0], "sympy/ntheory/tests/test_factor_.py");
        assert!(m[1..]
            .iter()
            .all(|f| f.contains("/tests/test_") && f != &m[0]));
        let mut rev = files.clone();
        rev.reverse();
        assert_eq!(modules_of(&spec, repo, &rev).unwrap(), m);
    }

    /// A spec error that skips every module of a repository (a wrong pin, a broken image) made
    /// a set without it, and with one repository an empty set (`index.json = []`) written
    /// over the good one: now refused, naming the repository and why its modules were skipped.
    #[test]
    fn a_set_without_a_repositorys_instances_is_not_written() {
        let spec = crate::spec::parse(crate::spec::tests::GOOD, Path::new("gen.toml")).unwrap();
        let t = tempfile::tempdir().unwrap();
        let mut report = Report {
            modules_skipped: vec![(
                "sympy/sympy/ntheory/tests/test_factor_.py".into(),
                "instance.toml does not describe image".into(),
            )],
            ..Report::default()
        };
        let e = refuse_hollow_set(&spec, t.path(), &report)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no instance of repository sympy (skipped: sympy/sympy/ntheory"),
            "{e}"
        );
        assert!(e.contains("left as it was"), "{e}");
        report.repositories.insert("sympy".into(), 3);
        refuse_hollow_set(&spec, t.path(), &report).unwrap();
    }

    /// A select glob that matched no file gave a work list without the repository, and the set
    /// was written without it (or empty): now an error naming the glob (issue 26.6).
    #[test]
    fn select_glob_matching_nothing_is_an_error() {
        let spec = crate::spec::parse(
            &crate::spec::tests::GOOD.replace(
                "split = \"test\"",
                "split = \"test\"\nselect = { glob = \"sympy/*/testz/test_*.py\", count = 2 }",
            ),
            Path::new("gen.toml"),
        )
        .unwrap();
        let files = vec!["sympy/core/tests/test_arit.py".to_string()];
        let e = modules_of(&spec, &spec.repositories[0], &files)
            .unwrap_err()
            .to_string();
        assert!(e.contains("select glob `sympy/*/testz/test_*.py`"), "{e}");
        assert!(e.contains("repository sympy"), "{e}");
    }
}
