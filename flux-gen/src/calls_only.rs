//! One test module of a runtime whose probes report calls only (HotSpot's method probes:
//! entries and returns, no lines, values or exceptions), start to end: phase 1 of `flux gen`
//! for a JUnit test class, the counterpart of [`crate::module`]'s pytest module.
//!
//! ```text
//! test methods the class declares (its source in the image, `Runner::test_methods`)
//!   → one traced run of the class (the kernel keeps the project's classes; each test method's
//!     activation is a test window): the scout and the shared trace at once — nothing narrower
//!     can be traced, and every call of the project is in it
//!   → profile (as a pytest scout's) → targets: methods of the project's main code that call
//!     ≥ 2 of its methods, within the budgets
//!   → drafts of the call-structure kinds (S6 `call_sequence`, `callees_count`, `call_graph`;
//!     M6 `callees_across_tests`), their gold from the sub-trace of their tests
//!   → the module's screens and selection → each instance's own run (its test methods alone)
//!     must reproduce its gold (`crate::screen::cross_check`, as for pytest).
//! ```
//!
//! The probes cannot tell a test's outcome (a test method's return may be an exception's
//! unwind, `flux_merge::jvm`): a class whose run does not exit 0 is skipped, and in one that
//! does every test method's window passed. The screens and their names are the pytest path's
//! ([`crate::module`]); the plan's rules here are `not-repository-code`, `no-passing-test`,
//! `too-many-calls`, `heavy-subtree`, `few-callees` (fewer than 2 distinct callees in the
//! project's main code) and `over-budget`.
use crate::artifact::{self, TestOutcome, TraceArtifact};
use crate::author::{code, instance_id, list_and, nth, Ask, Say, Subject};
use crate::draft::{self, Draft};
use crate::module::{call_graphs, draft_oracle, has_address, heavy_tests, Gen};
use crate::plan::Target;
use crate::profile::ModuleProfile;
use crate::results::{Candidate, ModuleResult};
use crate::runner::run_problem;
use crate::spec::{GenSpec, RepoSpec};
use anyhow::{Context, Result};
use flux_extract::QuestionKind as K;
use flux_instance::GeneratedSpec;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// "Run the test `org/x/FooTest.java::FooTest::testBar` of commons-lang3 3.12.0 (Java 17)."
/// The preamble (`flux_instance::preamble::JVM_CALLS`) says how JUnit runs it.
pub(crate) fn run_clause(repo: &RepoSpec, a: &Ask) -> String {
    let (name, version) = repo.name_version();
    let rt = crate::runtime::runtime_name(repo);
    let ids: Vec<String> = a.tests.iter().map(|t| code(t)).collect();
    match ids.as_slice() {
        [one] => format!("Run the test {one} of {name} {version} ({rt})."),
        _ => format!(
            "Run these {} tests of {name} {version} ({rt}) together, in this order: {}.",
            ids.len(),
            list_and(&ids)
        ),
    }
}

/// "`org.x`": the package whose classes' methods count, from the draft's `within`.
fn package(p: &Map<String, Value>) -> String {
    let within = p.get("within").and_then(Value::as_str).unwrap_or("");
    code(&within.trim_end_matches('/').replace('/', "."))
}

/// "`StringUtils.join` (of class `org.apache.commons.lang3.StringUtils`)": the target method,
/// from the draft's `function` and `file`.
fn method_phrase(p: &Map<String, Value>) -> String {
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
    let pkg = s("file")
        .rsplit_once('/')
        .map_or(String::new(), |(p, _)| p.replace('/', "."));
    let function = s("function");
    let class = function.rsplit_once('.').map_or("", |(c, _)| c);
    format!(
        "{} (of class {})",
        code(function),
        code(&format!("{pkg}.{class}"))
    )
}

/// A calls-only question's words (`crate::author::Say`), under the JVM's call preamble
/// (`flux_instance::preamble::JVM_CALLS`): its target is the draft's `function` and `file` (no
/// static facts: the probes report no lines), its callees a package's methods.
pub(crate) fn say<'a>(t: &'a Subject, a: &'a Ask<'a>) -> Say<'a> {
    let p = a.params;
    let methods = format!("methods of package {}", package(p));
    Say {
        ask: a,
        subject: t,
        f: method_phrase(p),
        inv: format!(
            "its {} invocation",
            nth(p.get("invocation").and_then(Value::as_u64).unwrap_or(1))
        ),
        callees: methods.clone(),
        graph: methods,
        lines: false,
    }
}

/// Call graphs a test class asks (a pytest module asks `module::GRAPHS_PER_MODULE`): a test
/// method's call graph is TraceEval's question, and the class's one traced run answers it for
/// every test method at no further cost.
pub(crate) const GRAPHS_PER_CLASS: usize = 6;

/// Tests a target's S6 questions are asked on (each a call sequence and its callee counts).
pub(crate) const S6_TESTS_PER_TARGET: usize = 2;

/// The plan of a calls-only module: the targets, and what was left out per rule.
fn plan_targets(
    spec: &GenSpec,
    repo: &RepoSpec,
    module: &str,
    profile: &ModuleProfile,
) -> (Vec<Target>, BTreeMap<&'static str, usize>) {
    let passed = profile.passed();
    let mut left: BTreeMap<&'static str, usize> = BTreeMap::new();
    let in_code = |fid: usize| {
        repo.relative(&profile.functions[fid].file)
            .is_some_and(|r| repo.is_target_file(r))
    };
    let mut ok = Vec::new();
    for fid in 0..profile.functions.len() {
        let key = &profile.functions[fid];
        let p = &profile.profiles[fid];
        let rule = if !in_code(fid) {
            Some("not-repository-code")
        } else if p.calls > spec.budget.max_invocations {
            Some("too-many-calls")
        } else if p.subtree_calls > spec.budget.max_subtree_calls {
            Some("heavy-subtree")
        } else {
            None
        };
        let tests: Vec<String> = p
            .per_test
            .keys()
            .map(|&t| profile.tests[t].nodeid.clone())
            .filter(|t| passed.contains(t.as_str()) && !repo.skips(t))
            .collect();
        let repo_callees = p.callees.keys().filter(|&&c| in_code(c)).count();
        let rule = rule.or(if tests.is_empty() {
            Some("no-passing-test")
        } else if repo_callees < 2 {
            Some("few-callees")
        } else {
            None
        });
        if let Some(r) = rule {
            *left.entry(r).or_insert(0) += 1;
            continue;
        }
        ok.push(Target {
            fid,
            file: key.file.clone(),
            abs_file: key.file.clone(),
            qualname: key.name.clone(),
            first_line: 0,
            def_line: 0,
            last_line: 0,
            tests,
            calls: p.calls,
            repo_callees,
            loops: 0,
            branches: 0,
            handlers: 0,
            write_lines: 0,
            statements: 0,
            estimated_events: 2 * (p.calls + p.subtree_calls),
        });
    }
    ok.sort_by_cached_key(|t| {
        let key = format!("{}/{module}/{}/{}", repo.name, t.file, t.qualname);
        (
            std::cmp::Reverse(u8::from(t.tests.len() >= 2)),
            crate::keyed::hash64(spec.seed, &key),
            key,
        )
    });
    let mut targets = Vec::new();
    for t in ok {
        if targets.len() >= spec.quotas.targets_per_module {
            *left.entry("over-budget").or_insert(0) += 1;
        } else {
            targets.push(t);
        }
    }
    (targets, left)
}

/// The drafts about `t` (S6 on one test, M6 over several), with the tests each runs.
fn drafts_of(
    spec: &GenSpec,
    repo: &RepoSpec,
    scope: &str,
    ix: &flux_trace::TraceIndex,
    t: &Target,
    kept: &BTreeSet<String>,
) -> Vec<Draft> {
    let within = repo.code.first().cloned().unwrap_or_default();
    let running = draft::tests_running(ix, t, kept);
    let mut rng = crate::keyed::Rng::new(spec.seed, &format!("{scope}/{}/calls", t.qualname));
    let mut base = Map::new();
    base.insert("function".into(), json!(t.qualname));
    base.insert("file".into(), json!(t.file));
    base.insert("within".into(), json!(within));
    let mut out = Vec::new();
    // One test, preferring tests that invoke it a few times (a reader can follow them).
    let per_test: BTreeMap<&str, usize> = running
        .iter()
        .map(|test| {
            let n = ix
                .invocations(
                    &t.qualname,
                    flux_trace::query::Filter {
                        test: Some(test.as_str()),
                        file: Some(&t.file),
                    },
                )
                .len();
            (test.as_str(), n)
        })
        .collect();
    let few: Vec<&String> = running
        .iter()
        .filter(|x| (1..=5).contains(&per_test[x.as_str()]))
        .collect();
    // S6 on up to `S6_TESTS_PER_TARGET` tests, each drawn from those not drawn yet; the draws
    // after the first come after the M6's, so a count raised later keeps every earlier draft.
    let mut few = few;
    let mut s6_on_a_test = |rng: &mut crate::keyed::Rng, out: &mut Vec<Draft>| {
        let Some(test) = rng.pick(&few).map(|x| x.to_string()) else {
            return;
        };
        few.retain(|x| **x != test);
        let n = 1 + rng.below(per_test[test.as_str()].min(3));
        let mut p = base.clone();
        p.insert("test".into(), json!(test));
        p.insert("invocation".into(), json!(n));
        let tests = [test];
        for ex in ["call_sequence", "callees_count"] {
            out.push(draft::draft(K::S6, ex, p.clone(), &tests, &t.qualname));
        }
    };
    s6_on_a_test(&mut rng, &mut out);
    let mut pool = running.clone();
    rng.shuffle(&mut pool);
    pool.truncate(spec.budget.max_tests);
    let tests: Vec<String> = running
        .iter()
        .filter(|x| pool.contains(x))
        .cloned()
        .collect();
    for _ in 1..S6_TESTS_PER_TARGET {
        s6_on_a_test(&mut rng, &mut out);
    }
    if tests.len() >= 2 {
        out.push(draft::draft(
            K::M6,
            "callees_across_tests",
            base,
            &tests,
            &t.qualname,
        ));
    }
    out
}

/// A draft's gold, or the screen that left it out.
type Gold = Result<Value, &'static str>;

/// Each draft with its gold ([`gold_of`]) on the sub-trace of its tests, in `drafts`' order:
/// one sub-trace and its index per distinct set of tests, made in turn (one held at a time).
fn golds_of(
    spec: &GenSpec,
    trace: &flux_trace::Trace,
    drafts: &[(usize, Draft)],
) -> Vec<((usize, Draft), Gold)> {
    let mut by_tests: BTreeMap<&[String], Vec<usize>> = BTreeMap::new();
    for (k, (_, d)) in drafts.iter().enumerate() {
        by_tests.entry(&d.tests).or_default().push(k);
    }
    let mut golds: Vec<Option<Gold>> = vec![None; drafts.len()];
    for (tests, ks) in by_tests {
        let sub = draft::sub_trace(trace, tests);
        let ix = flux_trace::TraceIndex::new(&sub);
        for k in ks {
            golds[k] = Some(gold_of(spec, &drafts[k].1, &ix));
        }
    }
    drafts
        .iter()
        .cloned()
        .zip(golds)
        .map(|(d, g)| (d, g.unwrap_or(Err("not-observed"))))
        .collect()
}

/// The gold of `d` on the indexed sub-trace of its tests, or the screen that leaves it out.
fn gold_of(spec: &GenSpec, d: &Draft, ix: &flux_trace::TraceIndex) -> Gold {
    let params = flux_extract::params(Value::Object(d.params.clone())).map_err(|_| "invalid")?;
    let gold =
        flux_extract::extract_indexed(ix, d.extractor, &params).map_err(|_| "not-observed")?;
    if has_address(&gold) {
        return Err("address-in-answer");
    }
    let size = flux_extract::answer_size(&gold);
    if size < d.kind.min_answer_size() {
        return Err("small-answer");
    }
    if size > spec.budget.max_answer_size {
        return Err("large-answer");
    }
    Ok(gold)
}

/// The scout of a test class: its declared test methods, one traced run of the class. Its
/// test windows' outcomes are `passed` when the run exited 0 (see the module doc).
async fn scout(
    g: &Gen<'_>,
    repo: &RepoSpec,
    module: &str,
    r: &mut ModuleResult,
) -> Result<(flux_harvest::TracedRun, Vec<String>)> {
    let budget = &g.spec.budget;
    let methods = g
        .runner
        .test_methods(repo, module)
        .await
        .context("reading the test class's test methods")?;
    if methods.is_empty() {
        anyhow::bail!("{module} declares no test method (@Test, or JUnit 3's test…())");
    }
    let slug = module.replace('/', "__").replace(".java", "");
    let t = Instant::now();
    let mut run = g
        .runner
        .trace(
            repo,
            &format!("gen-scout-{slug}"),
            &[module.to_string()],
            crate::runtime::calls_config(repo, &methods),
            budget.module_timeout_s,
            budget.scout_events,
        )
        .await
        .context("the scout run")?;
    r.time("scout", t);
    r.scout_events = run.trace.events.len();
    if let Some(e) = run_problem(&run) {
        anyhow::bail!("the run of {module}: {e}");
    }
    if run.exit_code != 0 {
        anyhow::bail!(
            "the run of {module} exited with {}: the probes cannot tell which test failed",
            run.exit_code
        );
    }
    for e in &mut run.trace.events {
        if e.ev == flux_trace::Kind::TestEnd {
            e.detail_mut().outcome = "passed".into();
        }
    }
    Ok((run, methods))
}

/// Phase 1 of a calls-only module (see the module doc); screened candidates into `r`.
pub(crate) async fn run_module(
    g: &Gen<'_>,
    repo: &RepoSpec,
    module: &str,
    r: &mut ModuleResult,
) -> Result<()> {
    let spec = g.spec;
    let scope = format!("{}/{module}", repo.name);
    let (run, methods) = scout(g, repo, module, r).await?;
    let t = Instant::now();
    let heavy = heavy_tests(&run.trace, spec.budget.test_calls);
    *r.left_out.entry("heavy-test".into()).or_insert(0) += heavy.len();
    let light: Vec<String> = flux_trace::query::tests(&run.trace)
        .into_iter()
        .map(|t| t.id)
        .filter(|t| !heavy.contains(t) && !repo.skips(t))
        .collect();
    if light.is_empty() {
        anyhow::bail!("no test method of {module} ran within the budget");
    }
    let trace = draft::sub_trace(&run.trace, &light);
    let profile = ModuleProfile::from_trace(&trace);
    let graphs = call_graphs(spec, repo, &scope, (&profile, &trace), GRAPHS_PER_CLASS, r);
    let (targets, left) = plan_targets(spec, repo, module, &profile);
    for (rule, n) in left {
        *r.left_out.entry(format!("plan:{rule}")).or_insert(0) += n;
    }
    r.time("profile", t);
    let t = Instant::now();
    let dir = artifact::dir_of(&g.artifacts, &scope);
    let digest = artifact::write_trace(&dir, &run.trace)?;
    let art = TraceArtifact {
        id: scope.clone(),
        image: repo.image.clone(),
        image_id: run.image_id.clone(),
        interpreter: run.interpreter_version.clone(),
        command: crate::runtime::test_command(repo, &[module.to_string()]),
        config: crate::runtime::calls_config(repo, &methods),
        plan: targets
            .iter()
            .map(|t| (t.file.clone(), t.qualname.clone()))
            .collect(),
        trace_sha256: digest.clone(),
        events: run.trace.events.len(),
        complete: run.trace.meta.complete,
        tests: profile
            .tests
            .iter()
            .map(|tp| TestOutcome {
                nodeid: tp.nodeid.clone(),
                scout: tp.outcome.clone(),
                trace: tp.outcome.clone(),
            })
            .collect(),
        program_seconds: run.program_seconds,
    };
    artifact::write_artifact(&dir, &art)?;
    artifact::prune_traces(&g.artifacts, artifact::KEEP_TRACES);
    r.time("artifact", t);
    // Drafts and their gold.
    let t = Instant::now();
    let kept: BTreeSet<String> = light.iter().cloned().collect();
    let mut authored: Vec<(Draft, Value, Option<usize>)> = graphs
        .into_iter()
        .map(|(d, gold)| (d, gold, None))
        .collect();
    let ix = flux_trace::TraceIndex::new(&trace);
    let drafts: Vec<(usize, Draft)> = targets
        .iter()
        .enumerate()
        .flat_map(|(ti, target)| {
            drafts_of(spec, repo, &scope, &ix, target, &kept)
                .into_iter()
                .map(move |d| (ti, d))
        })
        .collect();
    for ((ti, d), gold) in golds_of(spec, &trace, &drafts).into_iter() {
        *r.drafted.entry(d.kind.as_str().to_string()).or_insert(0) += 1;
        match gold {
            Ok(gold) => authored.push((d, gold, Some(ti))),
            Err(rule) => r.count(rule),
        }
    }
    crate::module::drop_same_answers(spec.seed, &scope, &mut authored, r);
    r.time("draft", t);
    let t = Instant::now();
    let cands = Authoring {
        g,
        repo,
        module,
        scope: &scope,
        targets: &targets,
        profile: &profile,
        trace: &trace,
        run: &run,
        digest: &digest,
    }
    .candidates(authored, r)?;
    r.time("author", t);
    let chosen = crate::screen::select_module(spec, cands, r);
    let t = Instant::now();
    let kept = crate::screen::cross_check(g.runner, repo, &spec.budget, chosen, r).await;
    r.time("check", t);
    r.artifact = Some(art);
    r.candidates = kept;
    Ok(())
}

/// What authoring a calls-only module's drafts needs.
struct Authoring<'a> {
    g: &'a Gen<'a>,
    repo: &'a RepoSpec,
    module: &'a str,
    scope: &'a str,
    targets: &'a [Target],
    profile: &'a ModuleProfile,
    trace: &'a flux_trace::Trace,
    run: &'a flux_harvest::TracedRun,
    digest: &'a str,
}

impl Authoring<'_> {
    /// Each draft authored (question, template, config, gold through `Instance::oracle_for`)
    /// and loaded; what does not load is counted `invalid`.
    fn candidates(
        &self,
        authored: Vec<(Draft, Value, Option<usize>)>,
        r: &mut ModuleResult,
    ) -> Result<Vec<Candidate>> {
        let facts = BTreeMap::new();
        let mut cands = Vec::new();
        for (d, gold, ti) in authored {
            let id = instance_id(&self.repo.name, &d, self.scope);
            let ex = flux_extract::find(d.extractor).expect("a registered extractor");
            let params = flux_extract::params(Value::Object(d.params.clone()))?;
            let template = crate::runtime::template(self.repo, d.extractor, (ex.template)(&params));
            let question = crate::author::question(self.repo, &Subject::default(), &Ask::of(&d));
            let (function, file) = match ti {
                Some(ti) => {
                    let target = &self.targets[ti];
                    (target.qualname.clone(), target.file.clone())
                }
                None => (d.tests[0].clone(), self.module.to_string()),
            };
            let files_of = BTreeMap::new();
            let mut ispec =
                crate::author::instance_spec(self.repo, &d, &id, &template, question, &files_of);
            ispec.generated = Some(GeneratedSpec {
                set: self.g.spec.name.clone(),
                split: self.repo.split.as_str().to_string(),
                module: self.module.to_string(),
                trace: self.scope.to_string(),
                easy: false,
                difficulty: crate::features::difficulty(self.repo, self.profile, &facts, &d.tests),
                release: None,
            });
            let run_facts = flux_instance::RunFacts {
                harvested_at: flux_instance::utc_timestamp(std::time::SystemTime::now()),
                image_id: self.run.image_id.clone(),
                image_identity: self.run.image_identity.clone(),
                interpreter: self.run.interpreter_version.clone(),
                trace_sha256: Some(self.digest.to_string()),
                labels: Vec::new(),
            };
            let scratch = self.g.runner.work.join("baseline");
            // (The oracle reads the trace's labels, its sub-traces' too, and is given the digest.)
            let oracle = match crate::screen::authored_oracle(&scratch, &ispec, |inst| {
                draft_oracle(inst, gold, self.trace, &run_facts)
            }) {
                Ok(o) => o,
                Err(e) => {
                    r.count("invalid");
                    eprintln!("flux gen: {id}: does not load: {e:#}");
                    continue;
                }
            };
            let c = Candidate {
                priority: crate::keyed::hash64(self.g.spec.seed, &id),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use flux_extract::testkit::TraceBuilder;

    fn spec() -> GenSpec {
        let text = crate::spec::tests::GOOD
            .replace("root = \"/usr/local/lib/python3.11/dist-packages\"", "root = \"/testbed\"")
            .replace("code = [\"sympy/\"]", "code = [\"org/x/\"]\nnot_targets = [\"*Test.java\"]")
            .replace(
                "split = \"test\"",
                "split = \"test\"\nruntime = { probes = \"hotspot\", classes = [\"org.x.\"], tests = \"src/test/java/\" }",
            );
        crate::spec::parse(&text, std::path::Path::new("gen.toml")).unwrap()
    }

    const TEST_FILE: &str = "org/x/FooTest.java";
    const FOO: &str = "org/x/Foo.java";

    /// Two test methods: `a` calls `Foo.run` once (it calls `Foo.Inner.step` twice and
    /// `Foo.done` once), `b` calls it once (`Foo.Inner.step` once, `Util.log` in org/y: not the
    /// project's). Events named as `flux_merge::jvm` names them (a signature, line 0).
    fn trace() -> flux_trace::Trace {
        let id = |m: &str| format!("{TEST_FILE}::FooTest::{m}");
        let b = TraceBuilder::new()
            .test(&id("a"))
            .call_in("FooTest.a", TEST_FILE, 0, &[])
            .call_in("Foo.run", FOO, 0, &[])
            .call_in("Foo.Inner.step", FOO, 0, &[])
            .ret("")
            .call_in("Foo.Inner.step", FOO, 0, &[])
            .ret("")
            .call_in("Foo.done", FOO, 0, &[])
            .ret("")
            .ret("")
            .ret("")
            .end("passed")
            .test(&id("b"))
            .call_in("FooTest.b", TEST_FILE, 0, &[])
            .call_in("Foo.run", FOO, 0, &[])
            .call_in("Foo.Inner.step", FOO, 0, &[])
            .ret("")
            .call_in("Util.log", "org/y/Util.java", 0, &[])
            .ret("")
            .ret("")
            .ret("")
            .end("passed");
        let mut t = b.build();
        for e in &mut t.events {
            if !e.qualname().is_empty() || !e.func().is_empty() {
                let q = if e.qualname().is_empty() {
                    e.func().clone()
                } else {
                    e.qualname().clone()
                };
                e.code_mut().func = q.rsplit('.').next().unwrap_or(&q).to_string().into();
                e.code_mut().qualname = q;
                e.code_mut().sig = "()V".into();
                e.line = 0;
            }
        }
        t
    }

    /// The plan keys JVM methods by qualname (`Foo.run` and `Foo.Inner.step` share a file),
    /// takes the main code's methods with ≥ 2 project callees, and the drafts' gold names
    /// callees by class and method.
    #[test]
    fn a_test_classs_calls_plan_and_draft_call_structure_questions() {
        let spec = spec();
        let repo = &spec.repositories[0];
        let t = trace();
        let profile = ModuleProfile::from_trace(&t);
        let names: BTreeSet<&str> = profile.functions.iter().map(|k| k.name.as_str()).collect();
        assert!(
            names.contains("Foo.run") && names.contains("Foo.Inner.step"),
            "{names:?}"
        );
        let (targets, left) =
            plan_targets(&spec, repo, "src/test/java/org/x/FooTest.java", &profile);
        let chosen: Vec<&str> = targets.iter().map(|t| t.qualname.as_str()).collect();
        assert_eq!(chosen, ["Foo.run"], "{left:?}");
        assert_eq!(
            left.get("not-repository-code"),
            Some(&3),
            "two test methods and org/y"
        );
        assert_eq!(
            left.get("few-callees"),
            Some(&2),
            "step and done call nothing"
        );
        let kept: BTreeSet<String> = flux_trace::query::tests(&t)
            .into_iter()
            .map(|x| x.id)
            .collect();
        let ix = flux_trace::TraceIndex::new(&t);
        let drafts = drafts_of(&spec, repo, "r/m", &ix, &targets[0], &kept);
        let kinds: Vec<(&str, usize)> = drafts
            .iter()
            .map(|d| (d.extractor, d.tests.len()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("call_sequence", 1),
                ("callees_count", 1),
                ("call_sequence", 1),
                ("callees_count", 1),
                ("callees_across_tests", 2)
            ]
        );
        // The S6 pairs are asked on the two tests, one each.
        let s6_tests: BTreeSet<&str> = drafts
            .iter()
            .filter(|d| d.kind == K::S6)
            .map(|d| d.tests[0].as_str())
            .collect();
        assert_eq!(s6_tests.len(), 2, "{s6_tests:?}");
        let m6 = drafts.iter().find(|d| d.kind == K::M6).unwrap();
        let sub = draft::sub_trace(&t, &m6.tests);
        let gold = gold_of(&spec, m6, &flux_trace::TraceIndex::new(&sub)).unwrap();
        assert_eq!(
            gold,
            json!({"callees_per_test": [
                {"test": format!("{TEST_FILE}::FooTest::a"), "callees": ["Foo.Inner.step", "Foo.done"]},
                {"test": format!("{TEST_FILE}::FooTest::b"), "callees": ["Foo.Inner.step"]},
            ]})
        );
        let q = crate::author::question(repo, &Subject::default(), &Ask::of(m6));
        let flat = q.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("together, in this order: `org/x/FooTest.java::FooTest::a` and"),
            "{q}"
        );
        assert!(
            flat.contains(
                "`Foo.run` (of class `org.x.Foo`) runs, which methods of package `org.x`"
            ),
            "{q}"
        );
        assert!(flat.contains("(Java 17)"), "{q}");
        let ispec = crate::author::instance_spec(repo, m6, "x", "{}", q, &BTreeMap::new());
        assert_eq!(ispec.tracing.classes, ["org.x."]);
        assert_eq!(
            ispec.tracing.test_methods,
            ["org.x.FooTest.a", "org.x.FooTest.b"]
        );
        assert_eq!(
            ispec.test.command,
            [
                crate::runtime::JUNIT_LAUNCHER,
                "--select-method=org.x.FooTest#a",
                "--select-method=org.x.FooTest#b"
            ]
        );
        assert_eq!(
            ispec.test.image_files,
            ["/testbed/src/test/java/org/x/FooTest.java"]
        );
    }
}
