//! One test module, start to end (phase 1 of `flux gen`, the unit a shard runs):
//! scout → static facts → plan → the shared targeted trace (the artifact) → drafts with gold
//! answers from the sub-traces of their tests → screens → the instances' own runs (the
//! cross-check of each narrowed config) → the third witness on the instances the spec's
//! `[witness]` chooses (`crate::witness`) → screened candidates, written to
//! `<out>/modules/<repository>/<module>.json` for the set's selection (phase 2).
//!
//! Screening rules, each counted under its name in [`ModuleResult::left_out`]:
//! - `heavy-test` (tests, not drafts): a test made more than `budget.test_calls` calls in the
//!   scout run; it is left out of the profile, the shared trace and every instance;
//! - `not-observed`: the extractor could not answer on the sub-trace (a generator bug when it
//!   happens often: drafts are made from what the trace shows);
//! - `address-in-answer`: a value shows a memory address (`<X object at 0x7f…>`), which another
//!   run would not reproduce;
//! - `small-answer` / `large-answer`: below the kind's minimum, above `budget.max_answer_size`;
//! - `same-answer`: another question about the same function and kind has the same answer;
//! - `invalid`: the authored instance does not load (a generator bug; the message is kept);
//! - `module-quota`: left out by the module's selection (kinds in turn, `per_function`,
//!   `per_file`, `per_module`);
//! - `not-reproduced`: the instance's own run (its tests alone, its narrowed config) gave a
//!   different answer, did not pass, or made an incomplete trace — tests that depend on each
//!   other, or a config that misses something the answer needs;
//! - `witness-disagrees` / `witness-unavailable`: the plain settrace reference, asked by the
//!   spec's `[witness]`, gave another answer / could not check it (`crate::witness`).
//!
//! `easy` is recorded, not screened out, when the set is assembled (`set::generate`): the
//! static-baseline solver answers it right.
use crate::artifact::{self, TestOutcome, TraceArtifact};
use crate::author::{instance_id, Prose};
use crate::draft::{self, Ctx, Draft};
use crate::facts::{FileFacts, FileFactsExt};
use crate::plan::Target;
use crate::profile::ModuleProfile;
use crate::results::{Candidate, ModuleResult};
use crate::runner::{run_problem, Runner};
use crate::spec::{GenSpec, RepoSpec};
use crate::{features, plan};
use anyhow::{Context, Result};
use flux_extract::QuestionKind;
use flux_instance::{GeneratedSpec, Oracle};
use flux_trace::TraceIndex;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The file name of a module's result in `<out>/modules/<repository>/`.
pub fn result_file(module: &str) -> String {
    format!("{}.json", module.replace('/', "__"))
}

/// Shared state of a generation run.
pub struct Gen<'a> {
    pub spec: &'a GenSpec,
    pub runner: &'a Runner,
    /// The artifacts' root for this set.
    pub artifacts: PathBuf,
    /// Static facts already computed, per (image id, file).
    pub facts: tokio::sync::Mutex<BTreeMap<(String, String), FileFacts>>,
}

impl Gen<'_> {
    /// Facts of `files` (paths under the repository's root), computing the missing ones in
    /// one container run; files whose facts cannot be computed are left out.
    async fn facts_for(
        &self,
        repo: &RepoSpec,
        image_id: &str,
        files: &[String],
    ) -> Result<BTreeMap<String, FileFacts>> {
        let cache_dir = self.runner.work.join("facts").join(
            image_id
                .trim_start_matches("sha256:")
                .get(..16)
                .unwrap_or("image"),
        );
        let mut have = self.facts.lock().await;
        let mut missing = Vec::new();
        for f in files {
            let k = (image_id.to_string(), f.clone());
            if have.contains_key(&k) {
                continue;
            }
            let on_disk = cache_dir.join(format!("{}.json", f.replace('/', "__")));
            match std::fs::read(&on_disk)
                .ok()
                .and_then(|b| serde_json::from_slice::<FileFacts>(&b).ok())
            {
                Some(ff) => {
                    have.insert(k, ff);
                }
                None => missing.push(f.clone()),
            }
        }
        if !missing.is_empty() {
            let doc = self.runner.static_facts(repo, &missing).await?;
            std::fs::create_dir_all(&cache_dir)?;
            for f in &missing {
                if let Some(ff) = doc.files.get(&repo.in_image(f)) {
                    let on_disk = cache_dir.join(format!("{}.json", f.replace('/', "__")));
                    std::fs::write(&on_disk, serde_json::to_vec(ff)?)?;
                    have.insert((image_id.to_string(), f.clone()), ff.clone());
                }
            }
        }
        Ok(files
            .iter()
            .filter_map(|f| {
                have.get(&(image_id.to_string(), f.clone()))
                    .map(|ff| (f.clone(), ff.clone()))
            })
            .collect())
    }
}

/// Run `module` of `repo` through phase 1.
pub async fn run_module(g: &Gen<'_>, repo: &RepoSpec, module: &str) -> ModuleResult {
    let mut r = ModuleResult {
        repository: repo.name.clone(),
        module: module.to_string(),
        ..ModuleResult::default()
    };
    // The runtime's probes decide what a trace holds: calls only (the JVM's) or everything.
    let done = if crate::runtime::calls_only(repo) {
        crate::calls_only::run_module(g, repo, module, &mut r).await
    } else {
        run_module_inner(g, repo, module, &mut r).await
    };
    if let Err(e) = done {
        r.skipped = Some(format!("{e:#}"));
        r.candidates.clear();
    }
    r
}

/// Call graphs a pytest module asks (a calls-only module asks more: `calls_only`).
pub(crate) const GRAPHS_PER_MODULE: usize = 2;

/// Call-graph questions from the scout's trace: up to `per_module` passed tests (seeded) that
/// call the repository's code a moderate number of times, when every such call carries its
/// qualname.
pub(crate) fn call_graphs(
    spec: &GenSpec,
    repo: &RepoSpec,
    scope: &str,
    (profile, trace): (&ModuleProfile, &flux_trace::Trace),
    per_module: usize,
    r: &mut ModuleResult,
) -> Vec<(Draft, Value)> {
    let within = repo.code.first().cloned().unwrap_or_default();
    let named = trace.events.iter().all(|e| {
        e.ev != flux_trace::Kind::Call
            || !e.qualname().is_empty()
            || repo
                .relative(e.file())
                .is_none_or(|f| !repo.is_target_file(f))
    });
    if !named {
        return Vec::new();
    }
    let mut pool: Vec<&str> = profile
        .tests
        .iter()
        .filter(|t| t.outcome == "passed" && !repo.skips(&t.nodeid))
        .filter(|t| {
            let repo_calls: u64 = t
                .functions
                .iter()
                .filter(|(f, _)| {
                    repo.relative(&profile.functions[**f].file)
                        .is_some_and(|rel| repo.is_target_file(rel))
                })
                .map(|(_, c)| c.calls)
                .sum();
            (2..=300).contains(&repo_calls)
        })
        .map(|t| t.nodeid.as_str())
        .collect();
    crate::keyed::seeded_order(spec.seed, &mut pool, |t| format!("{scope}/graph/{t}"));
    let mut out = Vec::new();
    if pool.is_empty() || per_module == 0 {
        return out;
    }
    // One index of the scout's trace for every graph it answers.
    let ix = TraceIndex::new(trace);
    for test in pool.into_iter().take(per_module) {
        let d = crate::recipe::call_graph(test, &within, crate::runtime::calls_only(repo));
        *r.drafted.entry(d.kind.as_str().to_string()).or_insert(0) += 1;
        let Ok(params) = flux_extract::params(Value::Object(d.params.clone())) else {
            continue;
        };
        match flux_extract::extract_indexed(&ix, d.extractor, &params) {
            Ok(gold) => {
                let size = flux_extract::answer_size(&gold);
                if size < d.kind.min_answer_size() {
                    r.count("small-answer");
                } else if size > spec.budget.max_answer_size {
                    r.count("large-answer");
                } else {
                    out.push((d, gold));
                }
            }
            Err(_) => r.count("not-observed"),
        }
    }
    out
}

/// Tests of `trace` with more than `limit` call events (none when `limit` is 0).
pub(crate) fn heavy_tests(trace: &flux_trace::Trace, limit: u64) -> BTreeSet<String> {
    if limit == 0 {
        return BTreeSet::new();
    }
    let mut calls: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &trace.events {
        if e.ev == flux_trace::Kind::Call && !e.test.is_empty() {
            *calls.entry(e.test.as_str()).or_insert(0) += 1;
        }
    }
    calls
        .into_iter()
        .filter(|(_, n)| *n > limit)
        .map(|(t, _)| t.to_string())
        .collect()
}

fn outcomes(trace: &flux_trace::Trace) -> BTreeMap<String, String> {
    flux_trace::query::tests(trace)
        .into_iter()
        .map(|t| (t.id, t.outcome))
        .collect()
}

/// One pytest module through phase 1, stage by stage (each a function below, with typed
/// inputs and outputs): scout → static facts → plan → the shared trace → drafts with gold →
/// author → the module's selection and each instance's own run (and the witness).
async fn run_module_inner(
    g: &Gen<'_>,
    repo: &RepoSpec,
    module: &str,
    r: &mut ModuleResult,
) -> Result<()> {
    let unit = Unit::new(repo, module);
    let image_id = g.runner.image_id(&repo.image).await?;
    let scouted = scout(g, &unit, r).await?;
    let t = Instant::now();
    let facts = static_facts(g, &unit, &image_id, &scouted.profile).await?;
    r.time("facts", t);
    let plan = plan_targets(g.spec, &unit, &scouted, &facts, r)?;
    let shared = shared_trace(g, &unit, &scouted, &plan, r).await?;
    let t = Instant::now();
    let targeted = targeted_of(&plan.targets);
    let drafting = Drafting {
        spec: g.spec,
        repo,
        scope: &unit.scope,
        targets: &plan.targets,
        facts: &facts,
        trace: &shared.run.trace,
        kept: &shared.kept,
        targeted: &targeted,
    };
    let authored = draft_golds(&drafting, scouted.graphs, r)?;
    r.time("draft", t);
    let t = Instant::now();
    let authoring = Authoring {
        drafting,
        module,
        profile: &scouted.profile,
        run: RunIds {
            image_id: &shared.run.image_id,
            image_identity: &shared.run.image_identity,
            interpreter: &shared.run.interpreter_version,
            digest: &shared.artifact.trace_sha256,
        },
        scratch: g.runner.work.join("baseline"),
    };
    let cands = author(&authoring, authored, r)?;
    r.time("author", t);
    let kept = select_and_check(g, repo, cands, r).await;
    r.artifact = Some(shared.artifact);
    r.candidates = kept;
    Ok(())
}

/// A module's names: its repository, its path, its scope (`<repository>/<module>`: the key of
/// its seeded choices and its artifact's id) and its slug (in container names).
struct Unit<'a> {
    repo: &'a RepoSpec,
    module: &'a str,
    scope: String,
    slug: String,
}

impl<'a> Unit<'a> {
    fn new(repo: &'a RepoSpec, module: &'a str) -> Unit<'a> {
        Unit {
            repo,
            module,
            scope: format!("{}/{module}", repo.name),
            slug: module.replace('/', "__").replace(".py", ""),
        }
    }
}

/// What the scout stage gives (its trace is dropped: the shared trace is what questions read).
struct Scouted {
    /// Of the tests within `budget.test_calls`.
    profile: ModuleProfile,
    /// Each test's outcome in the scout.
    outcomes: BTreeMap<String, String>,
    /// Call-graph questions with their gold, from the scout's trace.
    graphs: Vec<(Draft, Value)>,
    /// What the shared trace runs: the module, or its light tests by node id.
    paths: Vec<String>,
}

/// Stage 1, the scout: a calls-only run of the module, its heavy tests (over
/// `budget.test_calls`) left out from here on — of the profile, the plan, the shared trace
/// (which then runs the other tests by node id) and every instance.
async fn scout(g: &Gen<'_>, unit: &Unit<'_>, r: &mut ModuleResult) -> Result<Scouted> {
    let (spec, repo, module) = (g.spec, unit.repo, unit.module);
    let budget = &spec.budget;
    let t = Instant::now();
    let scout = g
        .runner
        .trace(
            repo,
            &format!("gen-scout-{}", unit.slug),
            &[module.to_string()],
            plan::scout_config(),
            budget.module_timeout_s,
            budget.scout_events,
        )
        .await
        .context("the scout run")?;
    r.time("scout", t);
    r.scout_events = scout.trace.events.len();
    if let Some(e) = run_problem(&scout) {
        anyhow::bail!("the scout run of {module}: {e}");
    }
    let t = Instant::now();
    let heavy = heavy_tests(&scout.trace, budget.test_calls);
    let (scout_trace, paths) = if heavy.is_empty() {
        (scout.trace, vec![module.to_string()])
    } else {
        *r.left_out.entry("heavy-test".into()).or_insert(0) += heavy.len();
        let light: Vec<String> = flux_trace::query::tests(&scout.trace)
            .into_iter()
            .map(|t| t.id)
            .filter(|t| !heavy.contains(t))
            .collect();
        if light.is_empty() {
            anyhow::bail!(
                "every test of {module} makes more than {} calls (budget.test_calls)",
                budget.test_calls
            );
        }
        let sub = draft::sub_trace(&scout.trace, &light);
        drop(scout);
        (sub, light)
    };
    let profile = ModuleProfile::from_trace(&scout_trace);
    let outcomes = outcomes(&scout_trace);
    let graphs = call_graphs(
        spec,
        repo,
        &unit.scope,
        (&profile, &scout_trace),
        GRAPHS_PER_MODULE,
        r,
    );
    drop(scout_trace);
    r.time("profile", t);
    Ok(Scouted {
        profile,
        outcomes,
        graphs,
        paths,
    })
}

/// Stage 2: the static facts of the repository's files that ran, per file (relative to the
/// repository's root).
async fn static_facts(
    g: &Gen<'_>,
    unit: &Unit<'_>,
    image_id: &str,
    profile: &ModuleProfile,
) -> Result<BTreeMap<String, FileFacts>> {
    let repo = unit.repo;
    let files: BTreeSet<String> = profile
        .functions
        .iter()
        .filter_map(|k| repo.relative(&k.file))
        .filter(|rel| repo.is_target_file(rel))
        .map(String::from)
        .collect();
    let files: Vec<String> = files.into_iter().collect();
    g.facts_for(repo, image_id, &files).await
}

/// Stage 3, the plan: the targets of the shared trace (what its rules left out counted as
/// `plan:<rule>`); an error when there is none.
fn plan_targets(
    spec: &GenSpec,
    unit: &Unit<'_>,
    scouted: &Scouted,
    facts: &BTreeMap<String, FileFacts>,
    r: &mut ModuleResult,
) -> Result<plan::ModulePlan> {
    let plan = plan::plan_module(spec, unit.repo, unit.module, &scouted.profile, facts);
    for (rule, n) in &plan.left_out {
        *r.left_out.entry(format!("plan:{rule}")).or_insert(0) += n;
    }
    if plan.targets.is_empty() {
        anyhow::bail!("no target function passed the plan's rules");
    }
    Ok(plan)
}

/// What the shared-trace stage gives.
struct Shared {
    run: flux_harvest::TracedRun,
    /// Its artifact (written), which every question of the module names.
    artifact: TraceArtifact,
    /// Tests that passed in the scout and the shared trace and are not skipped: the tests
    /// questions may run.
    kept: BTreeSet<String>,
}

/// Stage 4, the shared trace: the module's tests (`scouted.paths`) with every target, written
/// as the module's trace artifact.
async fn shared_trace(
    g: &Gen<'_>,
    unit: &Unit<'_>,
    scouted: &Scouted,
    plan: &plan::ModulePlan,
    r: &mut ModuleResult,
) -> Result<Shared> {
    let (repo, budget) = (unit.repo, &g.spec.budget);
    let t = Instant::now();
    let config = plan.config();
    let run = g
        .runner
        .trace(
            repo,
            &format!("gen-trace-{}", unit.slug),
            &scouted.paths,
            config.clone(),
            budget.module_timeout_s,
            budget.trace_events * 4,
        )
        .await
        .context("the shared trace")?;
    r.time("trace", t);
    if let Some(e) = run_problem(&run) {
        anyhow::bail!("the shared trace of {}: {e}", unit.module);
    }
    let t = Instant::now();
    let trace_outcomes = outcomes(&run.trace);
    let tests: Vec<TestOutcome> = scouted
        .profile
        .tests
        .iter()
        .map(|tp| TestOutcome {
            nodeid: tp.nodeid.clone(),
            scout: scouted
                .outcomes
                .get(&tp.nodeid)
                .cloned()
                .unwrap_or_default(),
            trace: trace_outcomes.get(&tp.nodeid).cloned().unwrap_or_default(),
        })
        .collect();
    let kept: BTreeSet<String> = tests
        .iter()
        .filter(|t| t.kept() && !repo.skips(&t.nodeid))
        .map(|t| t.nodeid.clone())
        .collect();
    let dir = artifact::dir_of(&g.artifacts, &unit.scope);
    let digest = artifact::write_trace(&dir, &run.trace)?;
    let art = TraceArtifact {
        id: unit.scope.clone(),
        image: repo.image.clone(),
        image_id: run.image_id.clone(),
        interpreter: run.interpreter_version.clone(),
        command: crate::runtime::test_command(repo, &scouted.paths),
        config,
        plan: plan
            .targets
            .iter()
            .map(|t| (t.file.clone(), t.qualname.clone()))
            .collect(),
        trace_sha256: digest,
        events: run.trace.events.len(),
        complete: run.trace.meta.complete,
        tests,
        program_seconds: run.program_seconds,
    };
    artifact::write_artifact(&dir, &art)?;
    artifact::prune_traces(&g.artifacts, artifact::KEEP_TRACES);
    r.time("artifact", t);
    Ok(Shared {
        run,
        artifact: art,
        kept,
    })
}

/// The run an instance's gold comes from, as its oracle's provenance names it.
pub(crate) struct RunIds<'a> {
    pub image_id: &'a str,
    pub image_identity: &'a str,
    pub interpreter: &'a str,
    /// The shared trace's digest.
    pub digest: &'a str,
}

/// What the authoring stage reads besides the drafts.
pub(crate) struct Authoring<'a> {
    pub drafting: Drafting<'a>,
    pub module: &'a str,
    /// The scout's (for each instance's difficulty).
    pub profile: &'a ModuleProfile,
    pub run: RunIds<'a>,
    /// Where instances are written to be loaded (and removed).
    pub scratch: PathBuf,
}

/// Stage 6, authoring: each draft's question (its recipe's prose; a call graph's own),
/// template, config and oracle (through `Instance::oracle_for`, the harvest's one
/// constructor), kept if it loads as `flux harvest` and the scorer load it
/// (`screen::authored_oracle`; `invalid` otherwise, `small-answer` for a gold under the
/// instance's own minimum). The baseline's
/// `easy` is decided at the set's assembly.
pub(crate) fn author(
    a: &Authoring,
    authored: Vec<Authored>,
    r: &mut ModuleResult,
) -> Result<Vec<Candidate>> {
    let mut cands = Vec::new();
    for (d, gold, ti) in authored {
        let Some(ispec) = instance_spec_of(a, &d, ti)? else {
            continue;
        };
        let id = ispec.id.clone();
        let run_facts = flux_instance::RunFacts {
            harvested_at: flux_instance::utc_timestamp(std::time::SystemTime::now()),
            image_id: a.run.image_id.to_string(),
            image_identity: a.run.image_identity.to_string(),
            interpreter: a.run.interpreter.to_string(),
            trace_sha256: Some(a.run.digest.to_string()),
            labels: Vec::new(),
        };
        let oracle = match crate::screen::authored_oracle(&a.scratch, &ispec, |inst| {
            draft_oracle(inst, gold, a.drafting.trace, &run_facts)
        }) {
            Ok(o) => o,
            Err(e) => {
                let screened = matches!(
                    e.downcast_ref::<flux_instance::InstanceError>(),
                    Some(flux_instance::InstanceError::Screened { .. })
                );
                if screened {
                    r.count("small-answer");
                } else {
                    r.count("invalid");
                    eprintln!("flux gen: {id}: does not load: {e:#}");
                }
                continue;
            }
        };
        let (function, file) = match ti {
            Some(ti) => {
                let target = &a.drafting.targets[ti];
                (target.qualname.clone(), target.file.clone())
            }
            // A call graph is about a test: it counts against the test's function.
            None => (d.tests[0].clone(), a.module.to_string()),
        };
        let c = Candidate {
            priority: crate::keyed::hash64(a.drafting.spec.seed, &id),
            id,
            kind: d.kind,
            extractor: d.extractor.to_string(),
            function,
            file,
            tests: d.tests.clone(),
            spec: ispec,
            oracle,
        };
        cands.push(c);
    }
    Ok(cands)
}

/// The instance spec of draft `d` about target `ti` (None: a call graph): its question,
/// template, config and `[generated]`.
fn instance_spec_of(
    a: &Authoring,
    d: &Draft,
    ti: Option<usize>,
) -> Result<Option<flux_instance::InstanceSpec>> {
    let dr = &a.drafting;
    let repo = dr.repo;
    let id = instance_id(&repo.name, d, dr.scope);
    let ex = flux_extract::find(d.extractor).expect("a registered extractor");
    let params = flux_extract::params(Value::Object(d.params.clone()))?;
    let template = (ex.template)(&params).to_string();
    let question = match ti {
        Some(ti) => {
            let target = &dr.targets[ti];
            let ff = &dr.facts[&target.file];
            let Some(func) = ff.function(&target.qualname) else {
                return Ok(None);
            };
            let prose = Prose {
                repo,
                target,
                func,
                file: ff,
            };
            prose.question(d)
        }
        None => crate::author::call_graph_question(repo, d),
    };
    let mut ispec = crate::author::instance_spec(repo, d, &id, &template, question, dr.targeted);
    ispec.generated = Some(GeneratedSpec {
        set: dr.spec.name.clone(),
        split: repo.split.as_str().to_string(),
        module: a.module.to_string(),
        trace: dr.scope.to_string(),
        easy: false,
        difficulty: features::difficulty(repo, a.profile, dr.facts, &d.tests),
        release: None,
    });
    Ok(Some(ispec))
}

/// Stage 7: the module's selection, then each chosen instance's own run (the cross-check),
/// then the third witness on the instances its policy chooses.
async fn select_and_check(
    g: &Gen<'_>,
    repo: &RepoSpec,
    cands: Vec<Candidate>,
    r: &mut ModuleResult,
) -> Vec<Candidate> {
    let spec = g.spec;
    let mut chosen = crate::screen::select_module(spec, cands, r);
    if spec.budget.own_runs == crate::spec::OwnRuns::PerTests {
        r.configs_widened += crate::screen::share_own_runs(&mut chosen);
    }
    let t = Instant::now();
    let kept = crate::screen::cross_check(g.runner, repo, &spec.budget, chosen, r).await;
    r.time("check", t);
    if spec.witness.is_off() {
        return kept;
    }
    let t = Instant::now();
    let kept = crate::witness::witness(g.runner, spec, kept, r).await;
    r.time("witness", t);
    kept
}

/// The functions a module's shared trace targets (qualname → file), for exceptions' configs.
pub(crate) fn targeted_of(targets: &[Target]) -> BTreeMap<String, String> {
    targets
        .iter()
        .map(|t| (t.qualname.clone(), t.file.clone()))
        .collect()
}

/// A draft with its gold answer and the index of its target in the plan (None: a call graph,
/// which is about a test).
pub(crate) type Authored = (Draft, Value, Option<usize>);

/// What the drafting stage reads: the plan's targets, their facts, the shared trace and the
/// tests questions may run.
pub(crate) struct Drafting<'a> {
    pub spec: &'a GenSpec,
    pub repo: &'a RepoSpec,
    /// `<repository>/<module>`.
    pub scope: &'a str,
    pub targets: &'a [Target],
    /// Static facts per file (relative to the repository's root).
    pub facts: &'a BTreeMap<String, FileFacts>,
    pub trace: &'a flux_trace::Trace,
    /// Tests that passed in the scout and the shared trace (and are not skipped).
    pub kept: &'a BTreeSet<String>,
    /// [`targeted`] of the targets.
    pub targeted: &'a BTreeMap<String, String>,
}

impl<'a> Drafting<'a> {
    /// What drafting about target `ti` needs (None when its facts do not know it).
    fn ctx(&self, ti: usize, within: &'a str) -> Option<Ctx<'a>> {
        let target = &self.targets[ti];
        let ff = &self.facts[&target.file];
        Some(Ctx {
            seed: self.spec.seed,
            scope: self.scope,
            target,
            func: ff.function(&target.qualname)?,
            file: ff,
            within,
            max_answer_size: self.spec.budget.max_answer_size,
            max_tests: self.spec.budget.max_tests,
            targeted: self.targeted,
            exceptions: self.spec.budget.exceptions,
        })
    }
}

/// The drafting stage: every target's drafts with their gold answers from the sub-trace of
/// their tests, screened (`not-observed`, `address-in-answer`, `small-answer`,
/// `large-answer`, `same-answer`), after the scout's call graphs whose test is kept.
///
/// One index of the shared trace chooses every target's tests; each distinct set of tests
/// (a single test, or a multi-test question's) makes one sub-trace and one index, which every
/// target asked on it drafts from and its golds are extracted from; one is held at a time.
/// What a target drafts keeps its place (the target's single-test drafts, then its
/// multi-test ones, targets in plan order) whatever order the sub-traces are made in.
pub(crate) fn draft_golds(
    d: &Drafting,
    graphs: Vec<(Draft, Value)>,
    r: &mut ModuleResult,
) -> Result<Vec<Authored>> {
    let kept = d.kept;
    let within = d.repo.code.first().cloned().unwrap_or_default();
    // Each target's tests: (tests, [(target, what is asked on them)]).
    let shared = TraceIndex::new(d.trace);
    let mut asked_on: BTreeMap<Vec<String>, Vec<(usize, Ask)>> = BTreeMap::new();
    // Per tests, a target prefers the tests earlier targets were asked on (one own run each).
    let share = d.spec.budget.own_runs == crate::spec::OwnRuns::PerTests;
    // The tests earlier targets were asked on (empty when runs are not shared).
    let mut taken: BTreeSet<Vec<String>> = BTreeSet::new();
    for (ti, target) in d.targets.iter().enumerate() {
        let Some(ctx) = d.ctx(ti, &within) else {
            continue;
        };
        let running = draft::tests_running(&shared, target, kept);
        let single = draft::choose_test_sharing(&ctx, &shared, &running, &taken);
        let multi = draft::choose_tests_sharing(&ctx, &running, &taken);
        let with = draft::tests_with_exceptions(&shared, target, &running);
        let (exc_single, exc_multi) =
            draft::exception_tests(&ctx, &running, &with, (single.as_ref(), &multi));
        let asks = [
            (single.map(|t| vec![t]), Ask::Single),
            (Some(multi).filter(|m| m.len() >= 2), Ask::Multi),
            (exc_single.map(|t| vec![t]), Ask::Exceptions),
            (exc_multi.filter(|m| m.len() >= 2), Ask::Exceptions),
        ];
        for (tests, ask) in asks {
            if let Some(tests) = tests {
                if share {
                    taken.insert(tests.clone());
                }
                asked_on.entry(tests).or_default().push((ti, ask));
            }
        }
    }
    drop(shared);
    let mut per_target: Vec<[Vec<Authored>; 2]> = vec![Default::default(); d.targets.len()];
    for (tests, askers) in asked_on {
        let sub = draft::sub_trace(d.trace, &tests);
        let ix = TraceIndex::new(&sub);
        for (ti, ask) in askers {
            let ctx = d.ctx(ti, &within).expect("a target with facts");
            let drafts = match ask {
                Ask::Single => draft::single_test(&ctx, &ix, &tests[0]),
                Ask::Multi => draft::multi_test(&ctx, &ix, &tests),
                Ask::Exceptions => draft::exception_drafts(&ctx, &ix, &tests),
            };
            let multi = tests.len() >= 2;
            for dr in drafts {
                if let Some((dr, gold)) = gold_of(d, &ix, dr, r)? {
                    per_target[ti][usize::from(multi)].push((dr, gold, Some(ti)));
                }
            }
        }
    }
    let mut authored: Vec<Authored> = graphs
        .into_iter()
        .filter(|(d, _)| kept.contains(&d.tests[0]))
        .map(|(d, g)| (d, g, None))
        .collect();
    authored.extend(per_target.into_iter().flatten().flatten());
    drop_same_answers(d.spec.seed, d.scope, &mut authored, r);
    Ok(authored)
}

/// What a target is asked on a set of tests: the single-test kinds, the multi-test kinds, or
/// only the exception kinds (S5 on one test, M5 on more), on tests chosen for them
/// ([`draft::exception_tests`]) when the others' tests miss what they need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ask {
    Single,
    Multi,
    Exceptions,
}

/// `draft`'s gold on the indexed sub-trace of its tests, screened: None (counted under its
/// rule) when not observed, showing an address, or outside the answer sizes; its
/// after-gold step made.
fn gold_of(
    d: &Drafting,
    ix: &TraceIndex,
    mut draft: Draft,
    r: &mut ModuleResult,
) -> Result<Option<(Draft, Value)>> {
    *r.drafted
        .entry(draft.kind.as_str().to_string())
        .or_insert(0) += 1;
    let params = flux_extract::params(Value::Object(draft.params.clone()))?;
    let Ok(gold) = flux_extract::extract_indexed(ix, draft.extractor, &params) else {
        r.count("not-observed");
        return Ok(None);
    };
    if has_address(&gold) {
        r.count("address-in-answer");
        return Ok(None);
    }
    let size = flux_extract::answer_size(&gold);
    if size < draft.kind.min_answer_size() {
        r.count("small-answer");
        return Ok(None);
    }
    if size > d.spec.budget.max_answer_size {
        r.count("large-answer");
        return Ok(None);
    }
    if let Some(after_gold) = crate::recipe::recipe(draft.kind).after_gold {
        after_gold(&mut draft, &gold, d.targeted);
    }
    Ok(Some((draft, gold)))
}

/// No two questions about one function and kind with the same answer (`same-answer`): of
/// equals, the first in a seeded order of their keys is kept.
pub(crate) fn drop_same_answers(
    seed: u64,
    scope: &str,
    authored: &mut Vec<(Draft, Value, Option<usize>)>,
    r: &mut ModuleResult,
) {
    let mut seen: BTreeSet<(String, QuestionKind, String)> = BTreeSet::new();
    authored
        .sort_by_cached_key(|(d, _, _)| crate::keyed::hash64(seed, &format!("{scope}/{}", d.key)));
    authored.retain(|(d, gold, _)| {
        let who = d
            .functions
            .first()
            .cloned()
            .unwrap_or_else(|| d.tests.join(" "));
        let fresh = seen.insert((who, d.kind, gold.to_string()));
        if !fresh {
            *r.left_out.entry("same-answer".into()).or_insert(0) += 1;
        }
        fresh
    });
}

/// A draft's oracle, made by the one constructor `flux harvest` uses
/// ([`flux_instance::Instance::oracle_for`]): its labels (the trace's and the run's), its
/// `order_insensitive` and its answer-size gate are the instance's own, so a generated gold
/// and a harvested one of the same instance cannot differ in anything but the run.
pub(crate) fn draft_oracle(
    inst: &flux_instance::Instance,
    gold: Value,
    trace: &flux_trace::Trace,
    facts: &flux_instance::RunFacts,
) -> Result<Oracle, flux_instance::InstanceError> {
    inst.oracle_for(gold, trace, facts)
}

/// Does the answer show a memory address (`<object at 0x7f3a…>`)? Another run puts the
/// object elsewhere: such an answer is not reproducible.
pub fn has_address(v: &Value) -> bool {
    match v {
        Value::String(s) => s.match_indices(" at 0x").any(|(i, _)| {
            s[i + 6..].chars().take(4).all(|c| c.is_ascii_hexdigit()) && s.len() >= i + 10
        }),
        Value::Array(a) => a.iter().any(has_address),
        Value::Object(m) => m.values().any(has_address),
        _ => false,
    }
}

/// Write `r` to `<out>/modules/<repository>/<module>.json`.
pub fn write_result(out: &Path, r: &ModuleResult) -> Result<PathBuf> {
    let dir = out.join("modules").join(&r.repository);
    std::fs::create_dir_all(&dir)?;
    let p = dir.join(result_file(&r.module));
    let tmp = p.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(r)? + "\n")?;
    std::fs::rename(&tmp, &p)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A test's calls are counted from its own events (`test` set by the merge); a budget of
    /// 0 leaves nothing out, so a spec with `test_calls = 0` makes what it made before.
    #[test]
    fn tests_over_the_call_budget_are_heavy() {
        use flux_trace::{Event, Kind, Source};
        let mut t = flux_trace::Trace::default();
        for (i, (test, kind)) in [
            ("m.py::a", Kind::TestStart),
            ("m.py::a", Kind::Call),
            ("m.py::a", Kind::Return),
            ("", Kind::Call),
            ("", Kind::Call),
            ("m.py::b", Kind::TestStart),
            ("m.py::b", Kind::Call),
            ("m.py::b", Kind::Call),
            ("m.py::b", Kind::Line),
        ]
        .into_iter()
        .enumerate()
        {
            let mut e = Event::new(i as u64, 1, 1, kind, Source::Usdt);
            e.test = test.into();
            t.events.push(e);
        }
        assert_eq!(
            heavy_tests(&t, 1).into_iter().collect::<Vec<_>>(),
            ["m.py::b"],
            "calls outside a test count for none; lines are not calls"
        );
        assert!(heavy_tests(&t, 2).is_empty());
        assert!(heavy_tests(&t, 0).is_empty(), "0: no limit");
    }

    /// Issue 23.7: gen built its oracle from a literal of its own, so an instance's
    /// `order_insensitive`, its own `min_answer_size` and the run's labels never reached a
    /// generated gold, which a harvest of the same instance would carry. Now the gold is made by
    /// `Instance::oracle_for`: the same provenance as `Instance::build_oracle`, the same gate.
    #[test]
    fn a_drafts_oracle_is_the_harvests_one_constructor() {
        use flux_extract::testkit::TraceBuilder;
        let trace = TraceBuilder::new()
            .test("t.py::test_a")
            .call("f", 1, &[])
            .line(2, &[])
            .raise("ValueError", "no")
            .unwind("ValueError", "no")
            .end("failed")
            .test("t.py::test_b")
            .call("f", 1, &[])
            .line(3, &[])
            .ret("None")
            .end("passed")
            .build();
        let mut c = crate::screen::tests::fake(
            "r-f-m5",
            QuestionKind::M5,
            "f",
            &["t.py::test_a", "t.py::test_b"],
        );
        c.spec.template = r#"{"crashing_tests": ["str"], "safe_tests": ["str"]}"#.into();
        c.spec.extractor.name = "raising_tests".into();
        c.spec.extractor.params = json!({"type": "ValueError"}).as_object().cloned().unwrap();
        c.spec.order_insensitive = vec!["/safe_tests".into()];
        let scratch = tempfile::tempdir().unwrap();
        let inst = crate::screen::instance_of(scratch.path(), &c.spec).unwrap();
        let facts = flux_instance::RunFacts {
            harvested_at: "2026-12-02T00:00:00Z".into(),
            image_id: "sha256:ab".into(),
            image_identity: "flux-id:cd".into(),
            interpreter: "3.11.2".into(),
            trace_sha256: Some("ef".into()),
            labels: vec!["not reproducible".into()],
        };
        let params = flux_extract::params(Value::Object(c.spec.extractor.params.clone())).unwrap();
        let gold = flux_extract::extract(&trace, "raising_tests", &params).unwrap();
        let made = draft_oracle(&inst, gold, &trace, &facts).unwrap();
        let harvested = inst.build_oracle(&trace, &facts).unwrap();
        // The module keeps the extractor's whole output (the set cuts it to the template).
        assert_eq!(
            made.oracle_answer["crashing_tests"],
            harvested.oracle_answer["crashing_tests"]
        );
        assert_eq!(made.provenance, harvested.provenance);
        assert_eq!(made.provenance.order_insensitive, ["/safe_tests"]);
        assert_eq!(made.provenance.labels, ["not reproducible"]);
        assert_eq!(
            (&made.question, &made.template_answer),
            (&harvested.question, &harvested.template_answer)
        );
        // The instance's own minimum, not the kind's default (M5: 2).
        c.spec.min_answer_size = Some(9);
        let inst = crate::screen::instance_of(scratch.path(), &c.spec).unwrap();
        let gold = flux_extract::extract(&trace, "raising_tests", &params).unwrap();
        assert!(matches!(
            draft_oracle(&inst, gold, &trace, &facts),
            Err(flux_instance::InstanceError::Screened { .. })
        ));
    }

    /// Where a module's drafting and authoring time goes, without containers: the stages over
    /// a cached trace artifact (`FLUX_GEN_ARTIFACT=<cache>/gen/artifacts/<set>/<repo>/<module>`,
    /// its `trace.jsonl` carrying the static facts) with the bench slice's spec
    /// (`xtask/bench/gen/gen.toml`), targets planned again from the trace's own calls. Prints
    /// each stage's seconds and a digest of every draft's key and gold (with
    /// `FLUX_GEN_DRAFTS=<file>`, the lines too): a refactoring must leave the digest alone.
    /// `cargo test -p flux-gen --lib -- --ignored --nocapture drafting_stage`
    #[test]
    #[ignore = "reads a cached artifact named by FLUX_GEN_ARTIFACT"]
    fn profile_the_drafting_stage_of_a_cached_artifact() {
        let Some(dir) = std::env::var_os("FLUX_GEN_ARTIFACT").map(PathBuf::from) else {
            return;
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let spec = crate::spec::load(&root.join("xtask/bench/gen/gen.toml")).unwrap();
        let repo = &spec.repositories[0];
        let art: TraceArtifact =
            serde_json::from_slice(&std::fs::read(dir.join("artifact.json")).unwrap()).unwrap();
        let t = Instant::now();
        let f = std::fs::File::open(dir.join("trace.jsonl")).unwrap();
        let trace =
            flux_trace::Trace::read_jsonl(std::io::BufReader::new(f), "trace.jsonl").unwrap();
        eprintln!(
            "read {} events: {:.3}s",
            trace.events.len(),
            t.elapsed().as_secs_f64()
        );
        let facts: BTreeMap<String, FileFacts> = trace
            .facts
            .iter()
            .filter_map(|(abs, ff)| Some((repo.relative(abs)?.to_string(), ff.clone())))
            .collect();
        let module = art
            .id
            .trim_start_matches(&format!("{}/", repo.name))
            .to_string();
        let profile = ModuleProfile::from_trace(&trace);
        let plan = plan::plan_module(&spec, repo, &module, &profile, &facts);
        let targets: Vec<Target> = art
            .plan
            .iter()
            .filter_map(|(file, q)| {
                plan.targets
                    .iter()
                    .find(|t| &t.file == file && &t.qualname == q)
                    .cloned()
            })
            .collect();
        let kept: BTreeSet<String> = art
            .tests
            .iter()
            .filter(|t| t.kept() && !repo.skips(&t.nodeid))
            .map(|t| t.nodeid.clone())
            .collect();
        let targeted = targeted_of(&targets);
        let drafting = Drafting {
            spec: &spec,
            repo,
            scope: &art.id,
            targets: &targets,
            facts: &facts,
            trace: &trace,
            kept: &kept,
            targeted: &targeted,
        };
        let mut r = ModuleResult::default();
        let t = Instant::now();
        let authored = draft_golds(&drafting, Vec::new(), &mut r).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let lines: String = authored
            .iter()
            .map(|(d, gold, ti)| format!("{ti:?} {} {:?} {gold}\n", d.key, d.functions))
            .collect();
        eprintln!(
            "{} of {} planned targets, {} tests kept: {} drafted, {} with gold in {secs:.3}s \
             ({:.1} ms each); left out {:?}; digest {:016x}",
            targets.len(),
            art.plan.len(),
            kept.len(),
            r.drafted.values().sum::<usize>(),
            authored.len(),
            1000.0 * secs / authored.len().max(1) as f64,
            r.left_out,
            crate::keyed::hash64(0, &lines),
        );
        if let Some(out) = std::env::var_os("FLUX_GEN_DRAFTS") {
            std::fs::write(out, &lines).unwrap();
        }
        let scratch = tempfile::tempdir().unwrap();
        let authoring = Authoring {
            drafting,
            module: &module,
            profile: &profile,
            run: RunIds {
                image_id: &art.image_id,
                image_identity: "",
                interpreter: &art.interpreter,
                digest: &art.trace_sha256,
            },
            scratch: scratch.path().to_path_buf(),
        };
        let t = Instant::now();
        let cands = author(&authoring, authored, &mut r).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let written: String = cands
            .iter()
            .map(|c| {
                let toml = crate::screen::instance_toml(&c.spec).unwrap();
                format!("{toml}{}\n", c.oracle.oracle_answer)
            })
            .collect();
        eprintln!(
            "authored {} in {secs:.3}s ({:.1} ms each); digest {:016x}",
            cands.len(),
            1000.0 * secs / cands.len().max(1) as f64,
            crate::keyed::hash64(0, &written),
        );
    }

    #[test]
    fn addresses_in_answers_are_found() {
        assert!(has_address(
            &json!({"v": [{"value": "<Foo object at 0x7f3a9c1d2e80>"}]})
        ));
        assert!(!has_address(&json!({"v": "0x10 at 0xZZ", "n": 3})));
        assert!(!has_address(&json!({"v": "look at 0x1"})));
    }
}
