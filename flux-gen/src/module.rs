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
            || !e.qualname.is_empty()
            || repo
                .relative(&e.file)
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
    for test in pool.into_iter().take(per_module) {
        let d = crate::recipe::call_graph(test, &within, crate::runtime::calls_only(repo));
        *r.drafted.entry(d.kind.as_str().to_string()).or_insert(0) += 1;
        let Ok(params) = flux_extract::params(Value::Object(d.params.clone())) else {
            continue;
        };
        match flux_extract::extract(trace, d.extractor, &params) {
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

async fn run_module_inner(
    g: &Gen<'_>,
    repo: &RepoSpec,
    module: &str,
    r: &mut ModuleResult,
) -> Result<()> {
    let spec = g.spec;
    let budget = &spec.budget;
    let scope = format!("{}/{module}", repo.name);
    let slug = module.replace('/', "__").replace(".py", "");
    let image_id = g.runner.image_id(&repo.image).await?;
    // 1. Scout.
    let t = Instant::now();
    let scout = g
        .runner
        .trace(
            repo,
            &format!("gen-scout-{slug}"),
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
    // Tests over `budget.test_calls` are left out from here on: the profile, the plan, the
    // shared trace (which then runs the other tests by node id) and every instance.
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
    let scout_outcomes = outcomes(&scout_trace);
    let graphs = call_graphs(
        spec,
        repo,
        &scope,
        (&profile, &scout_trace),
        GRAPHS_PER_MODULE,
        r,
    );
    drop(scout_trace);
    r.time("profile", t);
    // 2. Static facts of the repository's files that ran.
    let t = Instant::now();
    let files: BTreeSet<String> = profile
        .functions
        .iter()
        .filter_map(|k| repo.relative(&k.file))
        .filter(|rel| repo.is_target_file(rel))
        .map(String::from)
        .collect();
    let files: Vec<String> = files.into_iter().collect();
    let facts = g.facts_for(repo, &image_id, &files).await?;
    r.time("facts", t);
    // 3. Plan.
    let plan = plan::plan_module(spec, repo, module, &profile, &facts);
    for (rule, n) in &plan.left_out {
        *r.left_out.entry(format!("plan:{rule}")).or_insert(0) += n;
    }
    if plan.targets.is_empty() {
        anyhow::bail!("no target function passed the plan's rules");
    }
    // 4. The shared trace.
    let t = Instant::now();
    let config = plan.config();
    let run = g
        .runner
        .trace(
            repo,
            &format!("gen-trace-{slug}"),
            &paths,
            config.clone(),
            budget.module_timeout_s,
            budget.trace_events * 4,
        )
        .await
        .context("the shared trace")?;
    r.time("trace", t);
    if let Some(e) = run_problem(&run) {
        anyhow::bail!("the shared trace of {module}: {e}");
    }
    let t = Instant::now();
    let trace_outcomes = outcomes(&run.trace);
    let tests: Vec<TestOutcome> = profile
        .tests
        .iter()
        .map(|tp| TestOutcome {
            nodeid: tp.nodeid.clone(),
            scout: scout_outcomes.get(&tp.nodeid).cloned().unwrap_or_default(),
            trace: trace_outcomes.get(&tp.nodeid).cloned().unwrap_or_default(),
        })
        .collect();
    let kept: BTreeSet<String> = tests
        .iter()
        .filter(|t| t.kept() && !repo.skips(&t.nodeid))
        .map(|t| t.nodeid.clone())
        .collect();
    let dir = artifact::dir_of(&g.artifacts, &scope);
    let digest = artifact::write_trace(&dir, &run.trace)?;
    let art = TraceArtifact {
        id: scope.clone(),
        image: repo.image.clone(),
        image_id: run.image_id.clone(),
        interpreter: run.interpreter_version.clone(),
        command: crate::runtime::test_command(repo, &paths),
        config,
        plan: plan
            .targets
            .iter()
            .map(|t| (t.file.clone(), t.qualname.clone()))
            .collect(),
        trace_sha256: digest.clone(),
        events: run.trace.events.len(),
        complete: run.trace.meta.complete,
        tests,
        program_seconds: run.program_seconds,
    };
    artifact::write_artifact(&dir, &art)?;
    artifact::prune_traces(&g.artifacts, artifact::KEEP_TRACES);
    r.time("artifact", t);
    // 5. Drafts and their gold answers.
    let t = Instant::now();
    let targeted = targeted_of(&plan.targets);
    let drafting = Drafting {
        spec,
        repo,
        scope: &scope,
        targets: &plan.targets,
        facts: &facts,
        trace: &run.trace,
        kept: &kept,
        targeted: &targeted,
    };
    let authored = draft_golds(&drafting, graphs, r)?;
    r.time("draft", t);
    // 6. Author and validate (the baseline's `easy` is decided at the set's assembly).
    let t = Instant::now();
    let mut cands = Vec::new();
    for (d, gold, ti) in authored {
        let id = instance_id(&repo.name, &d, &scope);
        let ex = flux_extract::find(d.extractor).expect("a registered extractor");
        let params = flux_extract::params(Value::Object(d.params.clone()))?;
        let template = (ex.template)(&params).to_string();
        let (question, function, file) = match ti {
            Some(ti) => {
                let target = &plan.targets[ti];
                let ff = &facts[&target.file];
                let func = ff
                    .function(&target.qualname)
                    .expect("drafted from its facts");
                let prose = Prose {
                    repo,
                    target,
                    func,
                    file: ff,
                };
                (
                    prose.question(&d),
                    target.qualname.clone(),
                    target.file.clone(),
                )
            }
            // A call graph is about a test: it counts against the test's function.
            None => (
                crate::author::call_graph_question(repo, &d),
                d.tests[0].clone(),
                module.to_string(),
            ),
        };
        let mut ispec = crate::author::instance_spec(repo, &d, &id, &template, question, &targeted);
        ispec.generated = Some(GeneratedSpec {
            set: spec.name.clone(),
            split: repo.split.as_str().to_string(),
            module: module.to_string(),
            trace: scope.clone(),
            easy: false,
            difficulty: features::difficulty(repo, &profile, &facts, &d.tests),
            release: None,
        });
        let run_facts = flux_instance::RunFacts {
            harvested_at: flux_instance::utc_timestamp(std::time::SystemTime::now()),
            image_id: run.image_id.clone(),
            image_identity: run.image_identity.clone(),
            interpreter: run.interpreter_version.clone(),
            trace_sha256: Some(digest.clone()),
            labels: Vec::new(),
        };
        let scratch = g.runner.work.join("baseline");
        let oracle = match crate::screen::instance_of(&scratch, &ispec)
            .and_then(|inst| draft_oracle(&inst, gold, &run.trace, &run_facts).map_err(Into::into))
        {
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
        let c = Candidate {
            priority: crate::keyed::hash64(spec.seed, &id),
            id,
            kind: d.kind,
            extractor: d.extractor.to_string(),
            function,
            file,
            tests: d.tests.clone(),
            spec: ispec,
            oracle,
        };
        if let Err(e) = crate::screen::loads(&scratch, &c) {
            r.count("invalid");
            eprintln!("flux gen: {}: does not load: {e:#}", c.id);
            continue;
        }
        cands.push(c);
    }
    r.time("author", t);
    // 7. The module's selection, then each instance's own run.
    let chosen = crate::screen::select_module(spec, cands, r);
    let t = Instant::now();
    let kept = crate::screen::cross_check(g.runner, repo, budget, chosen, r).await;
    r.time("check", t);
    // 8. The third witness, on the instances its policy chooses.
    let kept = if spec.witness.is_off() {
        kept
    } else {
        let t = Instant::now();
        let kept = crate::witness::witness(g.runner, spec, kept, r).await;
        r.time("witness", t);
        kept
    };
    r.artifact = Some(art);
    r.candidates = kept;
    Ok(())
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
    // Each target's tests: (tests, [(target, multi-test)]).
    let shared = TraceIndex::new(d.trace);
    let mut asked_on: BTreeMap<Vec<String>, Vec<(usize, bool)>> = BTreeMap::new();
    for (ti, target) in d.targets.iter().enumerate() {
        let Some(ctx) = d.ctx(ti, &within) else {
            continue;
        };
        let running = draft::tests_running(&shared, target, kept);
        if let Some(test) = draft::choose_test(&ctx, &shared, &running) {
            asked_on.entry(vec![test]).or_default().push((ti, false));
        }
        let m_tests = draft::choose_tests(&ctx, &running);
        if m_tests.len() >= 2 {
            asked_on.entry(m_tests).or_default().push((ti, true));
        }
    }
    drop(shared);
    let mut per_target: Vec<[Vec<Authored>; 2]> = vec![Default::default(); d.targets.len()];
    for (tests, askers) in asked_on {
        let sub = draft::sub_trace(d.trace, &tests);
        let ix = TraceIndex::new(&sub);
        for (ti, multi) in askers {
            let ctx = d.ctx(ti, &within).expect("a target with facts");
            let drafts = match multi {
                false => draft::single_test(&ctx, &ix, &tests[0]),
                true => draft::multi_test(&ctx, &ix, &tests),
            };
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
