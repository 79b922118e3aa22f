//! Perturbation variants: fixed benchmarks get memorised, so flux regenerates instances by
//! mutating the inputs of an instance's test and re-harvesting the gold answer from a traced
//! run of the mutated test.
//!
//! Per instance ([`perturb`]):
//! 1. **propose** N variants: the seeded AST mutator ([`mutator`], a stdlib-only Python module
//!    embedded in the binary: it parses the test files with `ast`, picks input literals of the
//!    test functions, applies seeded operators and re-renders only the changed nodes with
//!    `ast.unparse`), or a model ([`llm`]) whose literal replacements go through the same
//!    syntax-tree path. Variant `k` (1..=N) uses seed `S + k - 1` and is named
//!    `<origin id>--v<seed>`; the same origin, seed and options give the same bytes.
//! 2. **stage** each distinct, changed proposal as an instance of its own (a copy of the origin
//!    with the mutated test files, a new id and a `[variant]` table; [`variant`]) in a staging
//!    directory `<out>/.flux-perturb-staging/<pid>/`;
//! 3. **re-harvest** the staged variants through `flux_harvest::harvest` (same gates as any
//!    instance: the test ends as `test.expect` says, the trace is complete, the extractor
//!    succeeds, the answer fits the template and has the minimum size). The origin's gold
//!    answer is its `oracle.json`, or, when it has none yet, the answer harvested from a staged
//!    copy of it (the origin itself is never written);
//! 4. **keep** a harvested variant only if its gold answer differs from the origin's under the
//!    scorer's own comparison (`flux_score::compare`: a memorised origin answer would be scored
//!    wrong on it); kept variants move to `<out>/<repository>/<id>--v<seed>/` with their
//!    `oracle.json`, everything else is deleted and reported with the reason;
//! 5. optionally (`check`) re-harvest each kept variant from a clean run and discard it unless
//!    it reproduces.
//!
//! The assertion policy (relax stale exact-value asserts to the calls they make, keep the
//! rest; or keep all) is documented with the mutator in `py/flux_perturb.py`.
pub mod llm;
pub mod mutator;
pub mod variant;

pub use mutator::{Assertions, Edit, Mutated, Mutation, Mutator, Relaxed, Site, TestFile};

use anyhow::{Context, Result};
use flux_harvest::{HarvestOptions, Status};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Who proposes the input changes.
#[derive(Clone, Debug)]
pub enum Proposer {
    Ast,
    Llm(llm::LlmOptions),
}

impl Proposer {
    pub fn name(&self) -> &'static str {
        match self {
            Proposer::Ast => "ast",
            Proposer::Llm(_) => "llm",
        }
    }
}

#[derive(Clone, Debug)]
pub struct PerturbOptions {
    /// Variants attempted per instance (at most, with `keep`).
    pub n: usize,
    /// Stop trying seeds for an instance once this many variants are kept: seeds are tried in
    /// rounds of `keep` (at least 2), each round staged and harvested together, until enough
    /// are kept or `n` have been attempted. `None`: attempt all `n` in one round.
    pub keep: Option<usize>,
    /// Seed of the first variant; variant k uses `seed + k - 1`.
    pub seed: u64,
    /// At most this many mutations per variant (the mutator draws 1..=max).
    pub max_mutations: usize,
    pub assertions: Assertions,
    pub proposer: Proposer,
    /// Root under which `<repository>/<variant id>/` are written; default: the origin's
    /// instances root (the parent of its repository directory).
    pub out: Option<PathBuf>,
    pub mutator: Mutator,
    /// `None`: write the proposed variants without harvesting them (nothing is kept; they are
    /// reported as `proposed`).
    pub harvest: Option<HarvestOptions>,
    /// Re-harvest kept variants from a clean run and drop those that do not reproduce.
    pub check: bool,
    /// Replace variant directories that already exist.
    pub force: bool,
}

impl PerturbOptions {
    pub fn new(harvest: Option<HarvestOptions>) -> Self {
        PerturbOptions {
            n: 3,
            keep: None,
            seed: 1,
            max_mutations: 3,
            assertions: Assertions::Relax,
            proposer: Proposer::Ast,
            out: None,
            mutator: Mutator::default(),
            harvest,
            check: false,
            force: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VariantStatus {
    Kept,
    Discarded,
    /// Written without a harvest (`harvest: None`).
    Proposed,
}

/// What happened to one attempted variant.
#[derive(Clone, Debug, Serialize)]
pub struct VariantOutcome {
    pub id: String,
    pub seed: u64,
    pub status: VariantStatus,
    /// Why it was discarded: `no-mutation`, `duplicate`, `exists`, `test-outcome`, `timeout`,
    /// `killed`, `incomplete-trace`, `screened`, `template`, `extractor`, `unchanged`,
    /// `not-reproduced`, `harvest`, `proposer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the variant is (kept or proposed ones only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// The test ran and every harvest gate passed.
    pub harvested: bool,
    pub mutations: Vec<String>,
    pub relaxed_assertions: Vec<String>,
    /// Edits of the proposer that could not be applied (llm).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejected_edits: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub render: Option<String>,
    /// For a kept variant: where its gold answer first differs from the origin's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub differs: Option<String>,
    /// The harvest's run directory (trace and logs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<PathBuf>,
}

/// One origin instance.
#[derive(Clone, Debug, Serialize)]
pub struct InstanceOutcome {
    /// `<repository>/<id>`, or the directory when it did not load.
    pub origin: String,
    pub dir: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub attempted: usize,
    pub harvested: usize,
    pub kept: usize,
    /// `stored` (its oracle.json) or `harvested` (from a staged copy, for the comparison).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin_oracle: Option<String>,
    /// A failure of the whole instance (it did not load, the origin could not be harvested).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub variants: Vec<VariantOutcome>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    pub instances: usize,
    pub instances_with_kept: usize,
    pub attempted: usize,
    pub harvested: usize,
    pub kept: usize,
    /// instances_with_kept / instances.
    pub instance_yield: f64,
    /// harvested / attempted.
    pub harvest_rate: f64,
    /// Discarded variants per reason kind.
    pub discarded: BTreeMap<String, usize>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub proposer: String,
    pub seed: u64,
    pub n: usize,
    /// Seeds stopped once this many variants were kept (`PerturbOptions::keep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep: Option<usize>,
    pub assertions: Assertions,
    pub harvest: bool,
    pub instances: Vec<InstanceOutcome>,
    pub totals: Totals,
}

impl Report {
    fn finish(&mut self) {
        let mut t = Totals {
            instances: self.instances.len(),
            ..Totals::default()
        };
        for i in &self.instances {
            t.attempted += i.attempted;
            t.harvested += i.harvested;
            t.kept += i.kept;
            if i.kept > 0 {
                t.instances_with_kept += 1;
            }
            for v in &i.variants {
                if v.status == VariantStatus::Discarded {
                    *t.discarded
                        .entry(v.reason_kind.clone().unwrap_or_default())
                        .or_default() += 1;
                }
            }
        }
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        t.instance_yield = ratio(t.instances_with_kept, t.instances);
        t.harvest_rate = ratio(t.harvested, t.attempted);
        self.totals = t;
    }

    /// The table printed by `flux perturb`.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let w = self
            .instances
            .iter()
            .map(|i| i.origin.len())
            .max()
            .unwrap_or(8)
            .max(8);
        s.push_str(&format!(
            "{:<w$}  {:>9}  {:>9}  {:>4}\n",
            "instance", "attempted", "harvested", "kept"
        ));
        for i in &self.instances {
            s.push_str(&format!(
                "{:<w$}  {:>9}  {:>9}  {:>4}\n",
                i.origin, i.attempted, i.harvested, i.kept
            ));
            if let Some(e) = &i.error {
                s.push_str(&format!("    error: {}\n", first_line(e)));
            }
            for v in &i.variants {
                let what = match v.status {
                    VariantStatus::Kept => format!(
                        "kept      {}{}",
                        v.dir
                            .as_ref()
                            .map(|d| d.display().to_string())
                            .unwrap_or_default(),
                        v.differs
                            .as_ref()
                            .map(|d| format!(" (differs {})", first_line(d)))
                            .unwrap_or_default()
                    ),
                    VariantStatus::Proposed => format!(
                        "proposed  {}",
                        v.dir
                            .as_ref()
                            .map(|d| d.display().to_string())
                            .unwrap_or_default()
                    ),
                    VariantStatus::Discarded => format!(
                        "discarded {}: {}",
                        v.reason_kind.as_deref().unwrap_or("-"),
                        v.reason.as_deref().map(first_line).unwrap_or_default()
                    ),
                };
                s.push_str(&format!("    v{:<4} {what}\n", v.seed));
                for m in &v.mutations {
                    s.push_str(&format!("           {m}\n"));
                }
            }
        }
        let t = &self.totals;
        s.push_str(&format!(
            "total: {} instance(s), {} attempted, {} harvested ({:.1}%), {} kept; {} of {} instances \
             ({:.1}%) have at least one kept variant\n",
            t.instances,
            t.attempted,
            t.harvested,
            100.0 * t.harvest_rate,
            t.kept,
            t.instances_with_kept,
            t.instances,
            100.0 * t.instance_yield
        ));
        if !t.discarded.is_empty() {
            let parts: Vec<String> = t
                .discarded
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            s.push_str(&format!("discarded: {}\n", parts.join(", ")));
        }
        s
    }
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.chars().count() > 160 {
        format!("{}...", l.chars().take(157).collect::<String>())
    } else {
        l.to_string()
    }
}

/// Sort a harvest error into a reason kind, with the error's first meaningful line.
pub fn classify(error: &str) -> (String, String) {
    let e = error.trim();
    // `instance repo/id: ` prefix from the harvest report.
    let e = match e.strip_prefix("instance ") {
        Some(rest) => rest.split_once(": ").map(|(_, r)| r).unwrap_or(rest),
        None => e,
    };
    let kind = if e.contains("expected to pass") || e.contains("expected to fail") {
        "test-outcome"
    } else if e.contains("timed out") {
        "timeout"
    } else if e.contains("was killed") {
        "killed"
    } else if e.contains("trace is incomplete") {
        "incomplete-trace"
    } else if e.contains("screened out") {
        "screened"
    } else if e.contains("does not fit the template") {
        "template"
    } else if e.contains("extract") {
        "extractor"
    } else {
        "harvest"
    };
    (kind.to_string(), first_line(e))
}

/// Where a candidate gold answer first differs from the origin's (the origin's answer scored
/// against the variant's gold, as a model that memorised it would be), or `None` when the
/// scorer would accept the origin's answer.
pub fn answer_change(
    variant: &Value,
    origin: &Value,
    order_insensitive: &[String],
) -> Option<String> {
    let opts = flux_score::CompareOptions {
        order_insensitive: order_insensitive.to_vec(),
    };
    flux_score::compare(variant, origin, &opts)
        .err()
        .map(|m| m.to_string())
}

struct Staged {
    seed: u64,
    id: String,
    staged: PathBuf,
    dest: PathBuf,
    outcome: VariantOutcome,
}

fn discarded(id: &str, seed: u64, kind: &str, reason: String) -> VariantOutcome {
    VariantOutcome {
        id: id.to_string(),
        seed,
        status: VariantStatus::Discarded,
        reason_kind: Some(kind.to_string()),
        reason: Some(reason),
        dir: None,
        harvested: false,
        mutations: Vec::new(),
        relaxed_assertions: Vec::new(),
        rejected_edits: Vec::new(),
        render: None,
        differs: None,
        run_dir: None,
    }
}

/// Perturb every instance at or under `paths`. `progress` gets one line per event worth
/// showing (variant staged, harvested, kept, discarded). Fails as a whole only when nothing can
/// run (no instance found, or the harvest cannot trace here).
pub async fn perturb(
    paths: &[PathBuf],
    opts: &PerturbOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Report> {
    let dirs = flux_instance::discover(paths)?;
    if dirs.is_empty() {
        anyhow::bail!("no instance.toml at or under the given paths");
    }
    let mut report = Report {
        proposer: opts.proposer.name().to_string(),
        seed: opts.seed,
        n: opts.n,
        keep: opts.keep,
        assertions: opts.assertions,
        harvest: opts.harvest.is_some(),
        instances: Vec::new(),
        totals: Totals::default(),
    };
    let stage_tag = format!("{}", std::process::id());
    for dir in dirs {
        let out = perturb_one(&dir, opts, &stage_tag, progress).await?;
        progress(&format!(
            "{}: {} attempted, {} harvested, {} kept",
            out.origin, out.attempted, out.harvested, out.kept
        ));
        report.instances.push(out);
    }
    report.finish();
    Ok(report)
}

/// A fatal harvest error (cannot trace here) stops everything; other errors are per instance.
async fn perturb_one(
    dir: &Path,
    opts: &PerturbOptions,
    stage_tag: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<InstanceOutcome> {
    let mut out = InstanceOutcome {
        origin: dir.display().to_string(),
        dir: dir.to_path_buf(),
        kind: None,
        attempted: 0,
        harvested: 0,
        kept: 0,
        origin_oracle: None,
        error: None,
        variants: Vec::new(),
    };
    let inst = match flux_instance::load_instance(dir) {
        Ok(i) => i,
        Err(e) => {
            out.error = Some(e.to_string());
            return Ok(out);
        }
    };
    out.origin = format!("{}/{}", inst.spec.repository, inst.id());
    out.kind = Some(inst.kind().as_str().to_string());
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let root = match &opts.out {
        Some(o) => o.clone(),
        None => abs
            .parent()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    let staging = root.join(".flux-perturb-staging").join(stage_tag);
    // Without a harvest nothing is kept: every seed is proposed at once.
    let round = match (&opts.harvest, opts.keep) {
        (Some(_), Some(k)) => k.max(2),
        _ => opts.n,
    }
    .max(1);
    let mut state = RoundState::default();
    let mut result = Ok(());
    let mut next = 0usize;
    while next < opts.n {
        let seeds: Vec<u64> = (next..opts.n.min(next + round))
            .map(|k| opts.seed.wrapping_add(k as u64))
            .collect();
        next += seeds.len();
        result = stage_and_harvest(
            &inst, &abs, &root, &staging, opts, seeds, &mut state, &mut out, progress,
        )
        .await;
        let kept = out
            .variants
            .iter()
            .filter(|v| v.status == VariantStatus::Kept)
            .count();
        if result.is_err() || opts.harvest.is_none() || opts.keep.is_some_and(|k| kept >= k) {
            break;
        }
        if let Some(k) = opts.keep {
            if next < opts.n {
                progress(&format!(
                    "{}: {kept} of {k} kept after {next} seed(s); trying more",
                    out.origin
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&staging);
    if let Ok(mut rd) = std::fs::read_dir(root.join(".flux-perturb-staging")) {
        if rd.next().is_none() {
            let _ = std::fs::remove_dir(root.join(".flux-perturb-staging"));
        }
    }
    match result {
        Ok(()) => {}
        Err(e) if e.is::<flux_harvest::FatalError>() => return Err(e),
        Err(e) => out.error = Some(format!("{e:#}")),
    }
    out.attempted = out.variants.len();
    out.harvested = out.variants.iter().filter(|v| v.harvested).count();
    out.kept = out
        .variants
        .iter()
        .filter(|v| v.status == VariantStatus::Kept)
        .count();
    Ok(out)
}

async fn propose(
    inst: &flux_instance::Instance,
    files: &[TestFile],
    opts: &PerturbOptions,
    seeds: Vec<u64>,
) -> Result<Vec<(u64, Result<Mutated, String>)>> {
    let Some(&first) = seeds.first() else {
        return Ok(Vec::new());
    };
    let q = &inst.spec.question;
    match &opts.proposer {
        Proposer::Ast => Ok(seeds
            .into_iter()
            .map(|s| {
                let m = opts
                    .mutator
                    .mutate(files, q, s, opts.max_mutations, opts.assertions)
                    .map_err(|e| format!("{e:#}"));
                (s, m)
            })
            .collect()),
        Proposer::Llm(lo) => {
            let (sites, _) = opts.mutator.sites(files, q)?;
            let expect = match inst.spec.test.expect {
                flux_instance::Expect::Pass => "pass",
                flux_instance::Expect::Fail => "fail",
            };
            let name = format!("{}/{}", inst.spec.repository, inst.id());
            let ask = llm::Ask {
                name: &name,
                question: q,
                expect,
                files,
                sites: &sites,
                n: seeds.len(),
                seed: first,
                max_edits: opts.max_mutations,
            };
            let proposals = llm::propose(lo, &ask).await;
            let proposals = match proposals {
                Ok(p) => p,
                Err(e) => {
                    let msg = format!("{e:#}");
                    return Ok(seeds.into_iter().map(|s| (s, Err(msg.clone()))).collect());
                }
            };
            Ok(seeds
                .into_iter()
                .enumerate()
                .map(|(k, s)| {
                    let m = match proposals.get(k) {
                        None => Err(format!("the model proposed no variant #{}", k + 1)),
                        Some(edits) if edits.is_empty() => {
                            Err(format!("the model's variant #{} has no usable edit", k + 1))
                        }
                        Some(edits) => opts
                            .mutator
                            .apply(files, q, edits, opts.assertions)
                            .map_err(|e| format!("{e:#}")),
                    };
                    (s, m)
                })
                .collect())
        }
    }
}

/// What one instance's rounds share: the test sources already tried (a later seed producing
/// the same files is a duplicate), and the origin's gold answer once known.
#[derive(Default)]
struct RoundState {
    seen: Vec<(Vec<String>, String)>,
    origin_answer: Option<Value>,
}

#[expect(
    clippy::too_many_arguments,
    reason = "one stage of the round: what it reads, and the round's state, report and progress it writes"
)]
async fn stage_and_harvest(
    inst: &flux_instance::Instance,
    origin_dir: &Path,
    root: &Path,
    staging: &Path,
    opts: &PerturbOptions,
    seeds: Vec<u64>,
    state: &mut RoundState,
    out: &mut InstanceOutcome,
    progress: &mut dyn FnMut(&str),
) -> Result<()> {
    let repo = &inst.spec.repository;
    let files = mutator::read_test_files(origin_dir, &inst.spec.test.files)?;
    if files.is_empty() {
        anyhow::bail!("the instance has no Python test file to perturb");
    }
    let origin_id = inst
        .spec
        .variant
        .as_ref()
        .map(|v| v.origin.clone())
        .unwrap_or_else(|| inst.id().to_string());
    let proposals = propose(inst, &files, opts, seeds).await?;
    let mut staged: Vec<Staged> = Vec::new();
    let seen = &mut state.seen;
    for (seed, m) in proposals {
        let id = format!("{}--v{seed}", inst.id());
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                let kind = if matches!(opts.proposer, Proposer::Llm(_)) {
                    "proposer"
                } else {
                    "no-mutation"
                };
                out.variants.push(discarded(&id, seed, kind, e));
                continue;
            }
        };
        let mut outcome = discarded(&id, seed, "", String::new());
        outcome.mutations = m.mutations.iter().map(Mutation::describe).collect();
        outcome.relaxed_assertions = m.relaxed.iter().map(Relaxed::describe).collect();
        outcome.rejected_edits = m
            .rejected
            .iter()
            .map(|r| format!("{}: {}", r.edit, r.reason))
            .collect();
        outcome.render = Some(m.render.clone());
        let no = |out: &mut InstanceOutcome, kind: &str, reason: String| {
            let mut o = outcome.clone();
            o.reason_kind = Some(kind.to_string());
            o.reason = Some(reason);
            out.variants.push(o);
        };
        if !m.changed() || m.mutations.is_empty() {
            no(
                out,
                "no-mutation",
                "no applicable mutation (the test files are unchanged)".into(),
            );
            continue;
        }
        let key: Vec<String> = m.files.iter().map(|f| f.source.clone()).collect();
        if let Some((_, other)) = seen.iter().find(|(k, _)| *k == key) {
            no(out, "duplicate", format!("the same test files as {other}"));
            continue;
        }
        seen.push((key, id.clone()));
        let dest = root.join(repo).join(&id);
        if dest.exists() && !opts.force {
            no(
                out,
                "exists",
                format!(
                    "{} already exists; not replaced (use --force)",
                    dest.display()
                ),
            );
            continue;
        }
        let info = variant::VariantInfo {
            origin: origin_id.clone(),
            seed,
            proposer: opts.proposer.name().to_string(),
            mutations: outcome.mutations.clone(),
            relaxed_assertions: outcome.relaxed_assertions.clone(),
        };
        let at = staging.join(repo).join(&id);
        if let Err(e) = variant::write_variant(origin_dir, &at, &id, &m.files, &info) {
            no(out, "harvest", format!("{e:#}"));
            continue;
        }
        progress(&format!(
            "{repo}/{id}: staged ({})",
            outcome.mutations.join("; ")
        ));
        staged.push(Staged {
            seed,
            id,
            staged: at,
            dest,
            outcome,
        });
    }
    let Some(hopts) = &opts.harvest else {
        for s in staged {
            let mut o = s.outcome;
            place(&s.staged, &s.dest)?;
            o.status = VariantStatus::Proposed;
            o.reason_kind = None;
            o.reason = None;
            o.dir = Some(s.dest.clone());
            out.variants.push(o);
        }
        sort_variants(out);
        return Ok(());
    };
    if staged.is_empty() {
        sort_variants(out);
        return Ok(());
    }
    // The origin's gold answer: stored, else harvested from a staged copy.
    let mut paths: Vec<PathBuf> = staged.iter().map(|s| s.staged.clone()).collect();
    let stored = if let Some(a) = &state.origin_answer {
        Some(a.clone())
    } else if inst.oracle_path().exists() {
        out.origin_oracle = Some("stored".into());
        Some(flux_instance::read_oracle(&inst.dir)?.oracle_answer)
    } else {
        None
    };
    let origin_copy = staging.join(repo).join(inst.id());
    if stored.is_none() {
        variant::copy_instance(origin_dir, &origin_copy)?;
        paths.push(origin_copy.clone());
    }
    let mut hopts = hopts.clone();
    hopts.check = false;
    hopts.replace = true;
    let mut line = |r: &flux_harvest::InstanceReport| {
        let what = match (&r.status, &r.error) {
            (Status::Failed, Some(e)) => format!("harvest failed: {}", first_line(&classify(e).1)),
            (s, _) => format!("harvested ({}, {:.1}s)", s.as_str(), r.seconds),
        };
        progress(&format!("{}: {what}", r.name));
    };
    let hr = flux_harvest::harvest(&paths, &hopts, &mut line)
        .await
        .map_err(anyhow::Error::new)?;
    let by_dir: BTreeMap<PathBuf, &flux_harvest::InstanceReport> =
        hr.instances.iter().map(|r| (r.dir.clone(), r)).collect();
    let origin_answer = match stored {
        Some(a) => a,
        None => {
            let r = by_dir.get(&origin_copy);
            match r {
                Some(r) if r.status != Status::Failed => {
                    out.origin_oracle = Some("harvested".into());
                    let a = flux_instance::read_oracle(&origin_copy)?.oracle_answer;
                    state.origin_answer = Some(a.clone());
                    a
                }
                other => {
                    let why = other
                        .and_then(|r| r.error.clone())
                        .unwrap_or_else(|| "no report".into());
                    for s in staged {
                        let mut o = s.outcome;
                        o.harvested = by_dir
                            .get(&s.staged)
                            .is_some_and(|r| r.status != Status::Failed);
                        o.reason_kind = Some("origin".into());
                        o.reason = Some("the origin could not be harvested to compare with".into());
                        out.variants.push(o);
                    }
                    sort_variants(out);
                    anyhow::bail!("the origin could not be harvested: {}", first_line(&why));
                }
            }
        }
    };
    let mut kept_dirs = Vec::new();
    for s in staged {
        let mut o = s.outcome;
        let r = by_dir.get(&s.staged);
        o.run_dir = r.and_then(|r| r.run_dir.clone());
        match r {
            Some(r) if r.status != Status::Failed => {
                o.harvested = true;
                let answer = flux_instance::read_oracle(&s.staged)?.oracle_answer;
                match answer_change(&answer, &origin_answer, &inst.spec.order_insensitive) {
                    None => {
                        o.reason_kind = Some("unchanged".into());
                        o.reason = Some("the gold answer equals the origin's".into());
                    }
                    Some(d) => {
                        place(&s.staged, &s.dest)?;
                        o.status = VariantStatus::Kept;
                        o.reason_kind = None;
                        o.reason = None;
                        o.differs = Some(d);
                        o.dir = Some(s.dest.clone());
                        kept_dirs.push(s.dest.clone());
                        progress(&format!("{repo}/{}: kept -> {}", s.id, s.dest.display()));
                    }
                }
            }
            Some(r) => {
                let (k, why) = classify(r.error.as_deref().unwrap_or("failed"));
                o.reason_kind = Some(k);
                o.reason = Some(why);
            }
            None => {
                o.reason_kind = Some("harvest".into());
                o.reason = Some("the harvest did not report on it".into());
            }
        }
        let _ = s.seed;
        out.variants.push(o);
    }
    if opts.check && !kept_dirs.is_empty() {
        let mut copts = hopts.clone();
        copts.check = true;
        copts.replace = false;
        let mut line = |r: &flux_harvest::InstanceReport| {
            progress(&format!("{}: --check {}", r.name, r.status.as_str()));
        };
        let cr = flux_harvest::harvest(&kept_dirs, &copts, &mut line)
            .await
            .map_err(anyhow::Error::new)?;
        for r in &cr.instances {
            if r.status == Status::Failed {
                if let Some(v) = out
                    .variants
                    .iter_mut()
                    .find(|v| v.dir.as_ref() == Some(&r.dir))
                {
                    let _ = std::fs::remove_dir_all(&r.dir);
                    v.status = VariantStatus::Discarded;
                    v.dir = None;
                    v.reason_kind = Some("not-reproduced".into());
                    v.reason = Some(first_line(r.error.as_deref().unwrap_or("--check failed")));
                }
            }
        }
    }
    sort_variants(out);
    Ok(())
}

fn sort_variants(out: &mut InstanceOutcome) {
    out.variants.sort_by_key(|v| v.seed);
}

/// Move a staged variant to its place (replacing an older one when asked for with --force;
/// the caller checked).
fn place(staged: &Path, dest: &Path) -> Result<()> {
    if dest.exists() {
        std::fs::remove_dir_all(dest).with_context(|| format!("removing {}", dest.display()))?;
    }
    if let Some(p) = dest.parent() {
        std::fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))?;
    }
    std::fs::rename(staged, dest)
        .with_context(|| format!("moving {} to {}", staged.display(), dest.display()))
}
