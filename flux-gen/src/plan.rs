//! Plan one module's shared trace: which functions become targets, from the scout's profile
//! and the static facts, within the module's budgets.
//!
//! Rules (each a named check in [`why_not`], reported with the count of functions it left out):
//! - `not-repository-code`: the function's file is not the repository's own code (or is a
//!   test, conftest, testing helper: `not_targets`);
//! - `no-static-facts`: its file has no facts, or no code object starts at the line the trace
//!   reports (then no qualname is known for it);
//! - `not-a-function`: lambdas, comprehensions, class bodies and modules are not targets;
//! - `no-passing-test`: it ran only in tests that did not pass;
//! - `too-many-calls`: called more than `budget.max_invocations` times in the module;
//! - `heavy-subtree`: its frames make more than `budget.max_subtree_calls` calls (tracing
//!   its extents would trace them all);
//! - `trivial`: fewer than 3 statements of its own and nothing it could be asked about;
//! - `over-budget`: adding it would take the shared trace over `budget.trace_events` (its
//!   estimated events: each call's statements, at most 40 of them, and two events per call made
//!   under its frames), or the module already has `quotas.targets_per_module` targets.
//!
//! Eligible functions are taken in a seeded order keyed by module and function (so the plan is
//! the same however the work is split), functions eligible for more kinds first, and a
//! function eligible for a rare kind (a loop, a handler, an exception seen) before others.
use crate::facts::{FileFacts, FileFactsExt, FunctionFacts, FunctionFactsExt};
use crate::keyed::hash64;
use crate::profile::{CodeKey, ModuleProfile};
use crate::spec::{GenSpec, RepoSpec};
use flux_trace::{config::HookEvent, Scope, TracingConfig};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A target of a module's shared trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Target {
    /// Index into the scout profile's functions.
    pub fid: usize,
    /// The file, relative to the repository's root.
    pub file: String,
    /// As the interpreter saw it.
    pub abs_file: String,
    pub qualname: String,
    pub first_line: u32,
    pub def_line: u32,
    pub last_line: u32,
    /// Passed tests of the scout in which it ran, in start order.
    pub tests: Vec<String>,
    /// Fresh calls in the scout.
    pub calls: u64,
    /// Distinct direct callees in the repository's code.
    pub repo_callees: usize,
    pub loops: usize,
    pub branches: usize,
    pub handlers: usize,
    /// Lines with assignments of its own (parameters aside).
    pub write_lines: usize,
    pub statements: usize,
    /// What planning it cost.
    pub estimated_events: u64,
}

/// The plan of one module.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ModulePlan {
    pub targets: Vec<Target>,
    /// Functions left out, per rule.
    pub left_out: BTreeMap<&'static str, usize>,
}

impl ModulePlan {
    /// The shared trace's config: every target's file and qualname, everything recorded, only
    /// while targeted code runs.
    pub fn config(&self) -> TracingConfig {
        let files: BTreeSet<&str> = self.targets.iter().map(|t| t.file.as_str()).collect();
        let functions: BTreeSet<&str> = self.targets.iter().map(|t| t.qualname.as_str()).collect();
        narrowed(
            files.into_iter().map(String::from).collect(),
            functions.into_iter().map(String::from).collect(),
        )
    }
}

/// The config of a trace of `functions` in `files`: scope targets, every event recorded.
pub fn narrowed(files: Vec<String>, functions: Vec<String>) -> TracingConfig {
    TracingConfig {
        files,
        functions,
        events: vec![
            HookEvent::Line,
            HookEvent::Call,
            HookEvent::Return,
            HookEvent::Exception,
            HookEvent::Variables,
        ],
        scope: Scope::Targets,
        ..TracingConfig::default()
    }
}

/// The scout's config: calls only (no lines, values or exceptions), inside tests.
pub fn scout_config() -> TracingConfig {
    TracingConfig {
        files: Vec::new(),
        functions: Vec::new(),
        events: vec![HookEvent::Call],
        scope: Scope::Tests,
        ..TracingConfig::default()
    }
}

/// Why `key` is not a target (a rule name of the module doc), or None if it can be one.
fn why_not(
    spec: &GenSpec,
    repo: &RepoSpec,
    profile: &ModuleProfile,
    fid: usize,
    facts: &BTreeMap<String, FileFacts>,
    passed: &BTreeSet<&str>,
) -> Result<Target, &'static str> {
    let key: &CodeKey = &profile.functions[fid];
    let p = &profile.profiles[fid];
    let rel = repo.relative(&key.file).ok_or("not-repository-code")?;
    if !repo.is_target_file(rel) {
        return Err("not-repository-code");
    }
    let ff = facts.get(rel).ok_or("no-static-facts")?;
    let f: &FunctionFacts = ff
        .code_named(&key.name, key.first_line)
        .ok_or("no-static-facts")?;
    if !f.is_function() || f.qualname.contains('<') {
        return Err("not-a-function");
    }
    let tests: Vec<String> = p
        .per_test
        .keys()
        .map(|&t| profile.tests[t].nodeid.clone())
        .filter(|t| passed.contains(t.as_str()) && !repo.skips(t))
        .collect();
    if tests.is_empty() {
        return Err("no-passing-test");
    }
    if p.calls > spec.budget.max_invocations {
        return Err("too-many-calls");
    }
    if p.subtree_calls > spec.budget.max_subtree_calls {
        return Err("heavy-subtree");
    }
    let repo_callees = p
        .callees
        .keys()
        .filter(|&&c| {
            repo.relative(&profile.functions[c].file)
                .is_some_and(|r| repo.is_target_file(r))
        })
        .count();
    let write_lines = f.writes.keys().filter(|&&l| l != f.def_line).count();
    let t = Target {
        fid,
        file: rel.to_string(),
        abs_file: key.file.clone(),
        qualname: f.qualname.clone(),
        first_line: f.first_line,
        def_line: f.def_line,
        last_line: f.last_line,
        tests,
        calls: p.calls,
        repo_callees,
        loops: ff.loops_of(&f.qualname).count(),
        branches: ff.branches_of(&f.qualname).count(),
        handlers: ff.handlers_of(&f.qualname).count(),
        write_lines,
        statements: f.statement_count(),
        estimated_events: p.calls * (f.statement_count().min(40) as u64 + 2) + 2 * p.subtree_calls,
    };
    if t.statements < 3 && t.loops == 0 && t.branches == 0 && t.repo_callees < 2 {
        return Err("trivial");
    }
    Ok(t)
}

impl Target {
    /// How many kinds it may serve (a rough count, for ordering).
    fn breadth(&self) -> usize {
        let multi = self.tests.len() >= 2;
        let mut n = 0;
        n += usize::from(self.statements >= 3); // S1 covered lines
        n += usize::from(self.branches >= 2); // S1 path
        n += 2 * usize::from(self.loops >= 1) * (1 + usize::from(multi)); // S2 S7 / M2 M7
        n += usize::from(self.write_lines >= 1) * (2 + 2 * usize::from(multi)); // S3 S4 / M3 M4
        n += usize::from(self.repo_callees >= 2) * (1 + usize::from(multi)); // S6 / M6
        n += usize::from(self.handlers >= 1) * (1 + usize::from(multi)); // S5 / M5
        n += usize::from(multi); // M1
        n
    }

    fn rare(&self) -> bool {
        self.handlers >= 1 || self.loops >= 1
    }
}

/// Choose the module's targets (see the module doc).
pub fn plan_module(
    spec: &GenSpec,
    repo: &RepoSpec,
    module: &str,
    profile: &ModuleProfile,
    facts: &BTreeMap<String, FileFacts>,
) -> ModulePlan {
    let passed = profile.passed();
    let mut plan = ModulePlan::default();
    let mut ok = Vec::new();
    for fid in 0..profile.functions.len() {
        match why_not(spec, repo, profile, fid, facts, &passed) {
            Ok(t) => ok.push(t),
            Err(rule) => *plan.left_out.entry(rule).or_insert(0) += 1,
        }
    }
    // The same qualname in two code objects of one file (a redefinition): neither, the
    // question could not say which.
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for t in &ok {
        *seen
            .entry((t.file.clone(), t.qualname.clone()))
            .or_insert(0) += 1;
    }
    ok.retain(|t| {
        let unique = seen[&(t.file.clone(), t.qualname.clone())] == 1;
        if !unique {
            *plan.left_out.entry("ambiguous-qualname").or_insert(0) += 1;
        }
        unique
    });
    ok.sort_by_cached_key(|t| {
        let key = format!("{}/{module}/{}/{}", repo.name, t.file, t.qualname);
        (
            std::cmp::Reverse(u8::from(t.rare())),
            std::cmp::Reverse(t.breadth().min(6)),
            hash64(spec.seed, &key),
            key,
        )
    });
    let mut events = 0u64;
    for t in ok {
        if plan.targets.len() >= spec.quotas.targets_per_module
            || events + t.estimated_events > spec.budget.trace_events as u64
        {
            *plan.left_out.entry("over-budget").or_insert(0) += 1;
            continue;
        }
        events += t.estimated_events;
        plan.targets.push(t);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{FunctionFacts, LoopFacts};
    use crate::profile::{FunctionProfile, TestProfile};

    fn spec() -> GenSpec {
        crate::spec::parse(crate::spec::tests::GOOD, std::path::Path::new("gen.toml")).unwrap()
    }

    fn func(q: &str, first: u32, stmts: usize) -> FunctionFacts {
        FunctionFacts {
            qualname: q.into(),
            name: q.rsplit('.').next().unwrap().into(),
            kind: "function".into(),
            code: true,
            def_line: first,
            first_line: first,
            last_line: first + stmts as u32,
            statements: (0..stmts as u32).map(|i| [first + i, first + i]).collect(),
            ..FunctionFacts::default()
        }
    }

    fn profile(calls: &[(&str, &str, u32, u64, u64)]) -> ModuleProfile {
        let mut p = ModuleProfile::default();
        p.tests.push(TestProfile {
            nodeid: "sympy/ntheory/tests/test_factor_.py::test_a".into(),
            outcome: "passed".into(),
            ..TestProfile::default()
        });
        p.tests.push(TestProfile {
            nodeid: "sympy/ntheory/tests/test_factor_.py::test_b".into(),
            outcome: "failed".into(),
            ..TestProfile::default()
        });
        for (file, name, line, n, test) in calls {
            p.functions.push(CodeKey {
                file: format!("/usr/local/lib/python3.11/dist-packages/{file}"),
                name: name.to_string(),
                first_line: *line,
            });
            p.profiles.push(FunctionProfile {
                calls: *n,
                per_test: BTreeMap::from([(*test as usize, *n)]),
                ..FunctionProfile::default()
            });
        }
        p
    }

    #[test]
    fn targets_follow_the_rules_and_the_budget() {
        let spec = spec();
        let repo = &spec.repositories[0];
        let prof = profile(&[
            ("sympy/ntheory/factor_.py", "multiplicity", 10, 5, 0),
            ("sympy/ntheory/factor_.py", "tiny", 40, 5, 0),
            ("sympy/ntheory/factor_.py", "hot", 50, 100_000, 0),
            ("sympy/ntheory/factor_.py", "failing", 60, 3, 1),
            ("sympy/ntheory/tests/test_factor_.py", "test_a", 1, 1, 0),
            ("mpmath/ctx.py", "f", 1, 1, 0),
            ("sympy/ntheory/factor_.py", "unknown", 99, 1, 0),
        ]);
        let ff = FileFacts {
            functions: vec![
                func("multiplicity", 10, 12),
                func("tiny", 40, 1),
                func("hot", 50, 5),
                func("failing", 60, 5),
            ],
            loops: vec![LoopFacts {
                func: "multiplicity".into(),
                kind: "while".into(),
                line: 12,
                end_line: 15,
                body: [13, 15],
                ..LoopFacts::default()
            }],
            ..FileFacts::default()
        };
        let tf = FileFacts {
            functions: vec![func("test_a", 1, 3)],
            ..FileFacts::default()
        };
        let facts = BTreeMap::from([
            ("sympy/ntheory/factor_.py".to_string(), ff),
            ("sympy/ntheory/tests/test_factor_.py".to_string(), tf),
        ]);
        let plan = plan_module(&spec, repo, "m", &prof, &facts);
        let names: Vec<&str> = plan.targets.iter().map(|t| t.qualname.as_str()).collect();
        assert_eq!(names, ["multiplicity"]);
        let t = &plan.targets[0];
        assert_eq!(
            (t.loops, t.statements, t.file.as_str()),
            (1, 12, "sympy/ntheory/factor_.py")
        );
        assert_eq!(
            plan.left_out,
            BTreeMap::from([
                ("no-passing-test", 1),
                ("no-static-facts", 1),
                ("not-repository-code", 2),
                ("too-many-calls", 1),
                ("trivial", 1),
            ])
        );
        let c = plan.config();
        assert_eq!(c.functions, ["multiplicity"]);
        assert_eq!(c.scope, Scope::Targets);
        // A budget too small for it: left out as over budget.
        let mut small = spec.clone();
        small.budget.trace_events = 10;
        let plan = plan_module(&small, &small.repositories[0], "m", &prof, &facts);
        assert!(plan.targets.is_empty());
        assert_eq!(plan.left_out["over-budget"], 1);
    }
}
