//! Draft questions about one target from a module's shared trace: for each kind, the
//! extractor, its parameters and the tests the instance runs, chosen with the seed from what
//! the trace shows the target doing (candidates read from the trace, never guessed and
//! discovered through `NotObserved`), then the gold answer from the sub-trace of those tests.
//!
//! What each kind drafts is its recipe's (`crate::recipe`): this module is the machinery
//! around them — the test and tests a target's questions run ([`choose_test`],
//! [`choose_tests`]), their sub-trace, the [`Scene`] of views every recipe drafts from, and the
//! recipes called in their drafting order with the target's seeded generators.
use crate::facts::{FileFacts, FunctionFacts};
use crate::keyed::Rng;
use crate::plan::Target;
use flux_extract::QuestionKind as K;
use flux_trace::query::{Filter, Invocation};
use flux_trace::{Kind, Trace, TraceIndex};
use serde_json::{json, Map, Value};
use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

/// A question before its gold answer and prose.
#[derive(Clone, Debug, PartialEq)]
pub struct Draft {
    pub kind: K,
    pub extractor: &'static str,
    pub params: Map<String, Value>,
    /// The tests the instance runs (node ids, in the trace's start order).
    pub tests: Vec<String>,
    /// Functions its narrowed tracing config targets (the target, and for exceptions the
    /// targeted frames the exception passed through).
    pub functions: Vec<String>,
    /// A stable name: `<kind>/<extractor>/<parameters>`, for ids and seeded choices.
    pub key: String,
}

/// What drafting needs besides the trace.
pub struct Ctx<'a> {
    pub seed: u64,
    /// `<repository>/<module>`.
    pub scope: &'a str,
    pub target: &'a Target,
    pub func: &'a FunctionFacts,
    pub file: &'a FileFacts,
    /// The repository's code for `within` (`sympy/`).
    pub within: &'a str,
    pub max_answer_size: usize,
    pub max_tests: usize,
    /// Functions targeted by the shared trace (qualname → file), for exceptions' configs.
    pub targeted: &'a BTreeMap<String, String>,
    /// How the exception kinds are drafted (`[budget] exceptions`).
    pub exceptions: crate::spec::Exceptions,
}

impl Ctx<'_> {
    fn rng(&self, what: &str) -> Rng {
        Rng::new(
            self.seed,
            &format!("{}/{}/{what}", self.scope, self.target.qualname),
        )
    }

    fn base(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("function".into(), json!(self.target.qualname));
        m.insert("file".into(), json!(self.target.file));
        m
    }
}

/// The events of `tests` only (and their boundaries): what a run of just those tests records,
/// if the tests do not depend on each other (the instance's own harvest checks that).
pub fn sub_trace(trace: &Trace, tests: &[String]) -> Trace {
    let set: BTreeSet<&str> = tests.iter().map(String::as_str).collect();
    Trace {
        meta: trace.meta.clone(),
        events: trace
            .events
            .iter()
            .filter(|e| set.contains(e.test.as_str()))
            .cloned()
            .collect(),
        facts: trace.facts.clone(),
    }
}

/// The target's invocations in the indexed trace (as `flux_trace::query::invocations`).
fn invocations(ix: &TraceIndex<'_>, t: &Target) -> Vec<Invocation> {
    ix.invocations(
        &t.qualname,
        Filter {
            test: None,
            file: Some(&t.file),
        },
    )
}

/// Tests (in start order) in which the target runs, among `kept`.
pub fn tests_running(ix: &TraceIndex, t: &Target, kept: &BTreeSet<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for inv in invocations(ix, t) {
        let test = inv.test.as_str();
        if kept.contains(test) && !out.iter().any(|t| t == test) {
            out.push(test.to_string());
        }
    }
    out
}

fn key_of(kind: K, extractor: &str, p: &Map<String, Value>, tests: &[String]) -> String {
    format!(
        "{}/{extractor}/{}/{}",
        kind.as_str(),
        Value::Object(p.clone()),
        tests.join(",")
    )
}

pub(crate) fn draft(
    kind: K,
    extractor: &'static str,
    p: Map<String, Value>,
    tests: &[String],
    f: &str,
) -> Draft {
    Draft {
        key: key_of(kind, extractor, &p, tests),
        kind,
        extractor,
        params: p,
        tests: tests.to_vec(),
        functions: vec![f.to_string()],
    }
}

/// `(test, value, type)`: one observation of a (line, variable).
pub type Observed = (String, String, String);

/// Observations of (line, variable), each with its (test, value, type) in order.
pub type Observations = BTreeMap<(u32, String), Vec<Observed>>;

/// What a kind's recipe drafts from (`crate::recipe`): a target, the sub-trace of the tests
/// its questions run and what that trace shows of the target, each view computed once for all
/// the kinds that read it.
pub struct Scene<'a> {
    pub ctx: &'a Ctx<'a>,
    /// The index of `sub`, built once for the drafts of every target run by its tests and
    /// their gold answers.
    pub ix: &'a TraceIndex<'a>,
    pub sub: &'a Trace,
    /// The tests (one for the single-test kinds, ≥ 2 in start order for the multi-test ones).
    pub tests: &'a [String],
    /// The target's invocations in `sub`.
    pub invs: Vec<Invocation>,
    /// The invocation the single-test kinds ask about (an index into `invs`).
    pub inv: usize,
    observations: OnceCell<Observations>,
    raises: OnceCell<BTreeSet<usize>>,
}

impl<'a> Scene<'a> {
    fn new(
        ctx: &'a Ctx<'a>,
        ix: &'a TraceIndex<'a>,
        tests: &'a [String],
        invs: Vec<Invocation>,
        inv: usize,
    ) -> Scene<'a> {
        Scene {
            ctx,
            ix,
            sub: ix.trace,
            tests,
            invs,
            inv,
            observations: OnceCell::new(),
            raises: OnceCell::new(),
        }
    }

    /// The target's `function` and `file`.
    pub fn base(&self) -> Map<String, Value> {
        self.ctx.base()
    }

    /// `p` with the single test's `test`.
    pub fn with_test(&self, mut p: Map<String, Value>) -> Map<String, Value> {
        p.insert("test".into(), json!(self.tests[0]));
        p
    }

    /// `p` with the asked invocation (from 1).
    pub fn with_inv(&self, mut p: Map<String, Value>) -> Map<String, Value> {
        p.insert("invocation".into(), json!(self.inv + 1));
        p
    }

    /// A draft about the target on the scene's tests.
    pub fn draft(&self, kind: K, extractor: &'static str, p: Map<String, Value>) -> Draft {
        draft(kind, extractor, p, self.tests, &self.ctx.target.qualname)
    }

    /// Lines of the invocation's `line` events, in order.
    pub fn lines(&self, inv: &Invocation) -> Vec<u32> {
        inv.lines(self.sub)
    }

    /// Lines of the invocation's `line` events whose effects its frame reports (a later line
    /// or return of it), in order.
    pub fn changing_lines(&self, inv: &Invocation) -> Vec<u32> {
        let mut out = Vec::new();
        for (k, &i) in inv.events.iter().enumerate() {
            let e = &self.sub.events[i];
            if e.ev == Kind::Line && inv.effects_of(self.sub, k).is_some() {
                out.push(e.line);
            }
        }
        out
    }

    /// [`observations`] of the target's invocations.
    pub fn observations(&self) -> &Observations {
        self.observations
            .get_or_init(|| observations(self.sub, &self.invs, self.ctx.func))
    }

    /// Indices of the raises in `sub` (the extractors' definition, `flux_extract::raise_origins`).
    pub fn raises(&self) -> &BTreeSet<usize> {
        self.raises
            .get_or_init(|| flux_extract::raise_origins(self.ix).into_iter().collect())
    }
}

/// The drafts of every recipe of the single-test (`multi` false) or multi-test kinds, in
/// `crate::recipe::RECIPES`'s order, drawing from `rng` in turn.
fn drafts_of(scene: &Scene, rng: &mut Rng, multi: bool) -> Vec<Draft> {
    drafts_of_kinds(scene, rng, multi, |_| true)
}

/// [`drafts_of`] for the kinds `want` keeps.
fn drafts_of_kinds(scene: &Scene, rng: &mut Rng, multi: bool, want: fn(K) -> bool) -> Vec<Draft> {
    let mut out = Vec::new();
    for r in crate::recipe::RECIPES {
        if r.kind.is_multi_test() == multi && want(r.kind) {
            out.extend((r.draft)(scene, rng));
        }
    }
    out
}

/// The exception kinds (S5, M5): what an [`exception_tests`] ask drafts.
fn is_exception_kind(k: K) -> bool {
    matches!(k, K::S5 | K::M5)
}

/// Tests (among `running`, in its order) in which the target meets an exception in the
/// indexed trace: an `exception` event in one of its frames (signals aside) or a frame of it
/// unwinding.
pub fn tests_with_exceptions(ix: &TraceIndex, t: &Target, running: &[String]) -> Vec<String> {
    let mut with: BTreeSet<flux_trace::Name> = BTreeSet::new();
    for inv in invocations(ix, t) {
        let meets = inv.events.iter().any(|&i| {
            let e = &ix.trace.events[i];
            (e.ev == Kind::Exception
                && !e
                    .detail()
                    .exc
                    .as_ref()
                    .is_some_and(|x| crate::recipe::signal(&x.ty)))
                || (e.ev == Kind::Return && e.unwind)
        });
        if meets {
            with.insert(inv.test);
        }
    }
    running
        .iter()
        .filter(|t| with.contains(t.as_str()))
        .cloned()
        .collect()
}

/// The tests of a target's exception asks (issue 26: every kind ≥ 3 % of a set), for when
/// the tests chosen for all kinds miss what S5 and M5 need: a test in which the target meets
/// an exception (`single`, when the chosen single test is not one), and up to `max_tests`
/// tests mixing such tests with tests where it meets none (`multi`, when the chosen set lacks
/// either). Seeded; each in `running`'s order; None where nothing is missing or nothing fits.
pub fn exception_tests(
    ctx: &Ctx,
    running: &[String],
    with: &[String],
    (single, multi): (Option<&String>, &[String]),
) -> (Option<String>, Option<Vec<String>>) {
    if with.is_empty() || ctx.exceptions == crate::spec::Exceptions::Shared {
        return (None, None);
    }
    let has = |t: &String| with.contains(t);
    let one = (!single.is_some_and(has))
        .then(|| ctx.rng("exception-test").pick(with).cloned())
        .flatten();
    let without: Vec<String> = running.iter().filter(|t| !has(t)).cloned().collect();
    let mixed = multi.iter().any(has) && multi.iter().any(|t| !has(t));
    let many = (!mixed && !without.is_empty() && ctx.max_tests >= 2).then(|| {
        let mut rng = ctx.rng("exception-tests");
        let (mut a, mut b) = (with.to_vec(), without);
        rng.shuffle(&mut a);
        rng.shuffle(&mut b);
        let half = ctx.max_tests.div_ceil(2);
        a.truncate(half);
        b.truncate(ctx.max_tests - a.len());
        running
            .iter()
            .filter(|t| a.contains(t) || b.contains(t))
            .cloned()
            .collect::<Vec<String>>()
    });
    (one, many)
}

/// The exception kinds' drafts for `ctx.target` over `tests` (one test: S5; more: M5), the
/// ask [`exception_tests`] chose them for.
pub fn exception_drafts(ctx: &Ctx, ix: &TraceIndex, tests: &[String]) -> Vec<Draft> {
    let invs = invocations(ix, ctx.target);
    if invs.is_empty() {
        return Vec::new();
    }
    let multi = tests.len() >= 2;
    let mut rng = ctx.rng(if multi {
        "M-exceptions"
    } else {
        "S-exceptions"
    });
    let scene = Scene::new(ctx, ix, tests, invs, 0);
    drafts_of_kinds(&scene, &mut rng, multi, is_exception_kind)
}

/// Every draft of the single-test kinds for `ctx.target`, run by `test` (`ix` indexes the
/// sub-trace of that test). Most ask about one invocation: seeded among those of a readable
/// length (3..=`max_answer_size` lines).
pub fn single_test(ctx: &Ctx, ix: &TraceIndex, test: &str) -> Vec<Draft> {
    let sub = ix.trace;
    let invs = invocations(ix, ctx.target);
    if invs.is_empty() {
        return Vec::new();
    }
    let mut rng = ctx.rng("S");
    let readable: Vec<usize> = (0..invs.len())
        .filter(|&i| (3..=ctx.max_answer_size).contains(&invs[i].lines(sub).len()))
        .collect();
    let n = rng.pick(&readable).copied().unwrap_or(0);
    let tests = [test.to_string()];
    drafts_of(&Scene::new(ctx, ix, &tests, invs, n), &mut rng, false)
}

/// Every draft of the multi-test kinds for `ctx.target` over `tests` (in start order; `ix`
/// indexes the sub-trace of those tests).
pub fn multi_test(ctx: &Ctx, ix: &TraceIndex, tests: &[String]) -> Vec<Draft> {
    if tests.len() < 2 {
        return Vec::new();
    }
    let invs = invocations(ix, ctx.target);
    let mut rng = ctx.rng("M");
    drafts_of(&Scene::new(ctx, ix, tests, invs, 0), &mut rng, true)
}

/// Observations of (line, variable): after each execution of a line that assigns the
/// variable (per the static facts), its (test, value, type).
pub fn observations(trace: &Trace, invs: &[Invocation], func: &FunctionFacts) -> Observations {
    let mut out = Observations::new();
    for inv in invs {
        let mut state: BTreeMap<String, (String, String)> = BTreeMap::new();
        for (k, &i) in inv.events.iter().enumerate() {
            let e = &trace.events[i];
            for (n, v) in &e.detail().locals {
                state.insert(n.clone(), (v.repr.clone(), v.ty.clone()));
            }
            if e.ev != Kind::Line || e.line == func.def_line {
                continue;
            }
            let Some(j) = inv.effects_of(trace, k) else {
                continue;
            };
            let next = &trace.events[inv.events[j]];
            for var in func.writes_at(e.line) {
                let v = next
                    .detail()
                    .locals
                    .iter()
                    .find(|(n, _)| n == var)
                    .map(|(_, v)| (v.repr.clone(), v.ty.clone()))
                    .or_else(|| state.get(var).cloned());
                if let Some((repr, ty)) = v {
                    out.entry((e.line, var.clone())).or_default().push((
                        inv.test.to_string(),
                        repr,
                        ty,
                    ));
                }
            }
        }
    }
    out
}

/// The tests of a multi-test question about the target: up to `max_tests` of those it runs
/// in, seeded, in start order.
pub fn choose_tests(ctx: &Ctx, running: &[String]) -> Vec<String> {
    let mut pool = running.to_vec();
    ctx.rng("tests").shuffle(&mut pool);
    pool.truncate(ctx.max_tests);
    let mut out: Vec<String> = running
        .iter()
        .filter(|t| pool.contains(t))
        .cloned()
        .collect();
    out.dedup();
    out
}

/// The test of the single-test questions: seeded among those it runs in, preferring tests
/// with few invocations of it (shorter answers, a test a reader can follow).
pub fn choose_test(ctx: &Ctx, ix: &TraceIndex, running: &[String]) -> Option<String> {
    choose_test_sharing(ctx, ix, running, &BTreeSet::new())
}

/// [`choose_test`], preferring among its pool a test already `taken` by the module's earlier
/// targets: one own run (and one reference run) then checks both targets' questions
/// (`[budget] own_runs = "per-tests"`). With nothing taken, the same choice.
pub fn choose_test_sharing(
    ctx: &Ctx,
    ix: &TraceIndex,
    running: &[String],
    taken: &BTreeSet<Vec<String>>,
) -> Option<String> {
    let invs = invocations(ix, ctx.target);
    let mut per: BTreeMap<&str, usize> = BTreeMap::new();
    for inv in &invs {
        *per.entry(inv.test.as_str()).or_insert(0) += 1;
    }
    let few: Vec<&String> = running
        .iter()
        .filter(|t| per.get(t.as_str()).is_some_and(|&n| n <= 5))
        .collect();
    let pool: Vec<&String> = if few.is_empty() {
        running.iter().collect()
    } else {
        few
    };
    let shared: Vec<&String> = pool
        .iter()
        .copied()
        .filter(|t| taken.contains(std::slice::from_ref(*t)))
        .collect();
    let pool = if shared.is_empty() { pool } else { shared };
    ctx.rng("test").pick(&pool).map(|t| t.to_string())
}

/// [`choose_tests`], preferring a set of tests already `taken` by an earlier target (the
/// first in order, of two or more tests) when every test of it runs this target.
pub fn choose_tests_sharing(
    ctx: &Ctx,
    running: &[String],
    taken: &BTreeSet<Vec<String>>,
) -> Vec<String> {
    taken
        .iter()
        .find(|set| set.len() >= 2 && set.iter().all(|t| running.contains(t)))
        .cloned()
        .unwrap_or_else(|| choose_tests(ctx, running))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::LoopFacts;
    use flux_extract::testkit::TraceBuilder;

    fn target() -> Target {
        Target {
            fid: 0,
            file: "pkg/mod.py".into(),
            abs_file: flux_extract::testkit::FILE.into(),
            qualname: "f".into(),
            first_line: 1,
            def_line: 1,
            last_line: 9,
            tests: vec!["t.py::test_a".into(), "t.py::test_b".into()],
            calls: 2,
            repo_callees: 0,
            loops: 1,
            branches: 2,
            handlers: 0,
            write_lines: 2,
            statements: 6,
            estimated_events: 10,
        }
    }

    /// `f(n)`: 2 `i = 0`, 3 `while i < n:` 4 `i += 1`, 5 `return i`.
    fn run(b: TraceBuilder, n: i64) -> TraceBuilder {
        let mut b = b.call("f", 1, &[("n", &n.to_string())]).line(2, &[]);
        let mut i = 0;
        b = b.line(3, &[("i", "0")]);
        while i < n {
            b = b.line(4, &[]);
            i += 1;
            b = b.line(3, &[("i", &i.to_string())]);
        }
        b.line(5, &[]).ret(&i.to_string())
    }

    /// The facts of `f(n)` (see [`run`]): the function (with `reads`) and its file (the loop
    /// at line 3).
    fn facts_of_f(reads: &[(u32, &[&str])]) -> (FunctionFacts, FileFacts) {
        let mut f = FunctionFacts {
            qualname: "f".into(),
            name: "f".into(),
            kind: "function".into(),
            code: true,
            def_line: 1,
            first_line: 1,
            last_line: 5,
            ..FunctionFacts::default()
        };
        for (line, name) in [(1, "n"), (2, "i"), (4, "i")] {
            f.writes.insert(line, vec![name.into()]);
        }
        for (line, names) in reads {
            f.reads
                .insert(*line, names.iter().map(|n| n.to_string()).collect());
        }
        let mut file = FileFacts {
            file: flux_extract::testkit::FILE.into(),
            ..FileFacts::default()
        };
        file.loops.push(LoopFacts {
            func: "f".into(),
            kind: "while".into(),
            line: 3,
            end_line: 4,
            body: [4, 4],
            ..LoopFacts::default()
        });
        (f, file)
    }

    /// Every draft of every function of a real Python 3.11 trace (flux-extract's
    /// `tests/fixtures/sample.jsonl`: loops, a raise and its handler, a generator, three tests),
    /// over seeds and budgets, rendered one per line: drafting is a pure function of the trace,
    /// the facts and the seed, and a refactoring must not change a question (the committed
    /// sets' instances were drafted by these rules). `UPDATE_EXPECT=1` rewrites the snapshot.
    #[test]
    fn drafts_of_a_real_trace_match_their_snapshot() {
        use crate::facts::FileFactsExt;
        let text = include_str!("../../flux-extract/tests/fixtures/sample.jsonl");
        let sample = Trace::read_jsonl(text.as_bytes(), "sample.jsonl").unwrap();
        // And a countdown whose first values differ between its three tests (M3).
        let mut b = TraceBuilder::new();
        for (test, n) in [
            ("t.py::test_a", 3),
            ("t.py::test_b", 1),
            ("t.py::test_c", 2),
        ] {
            b = b
                .test(test)
                .call("f", 1, &[("n", &n.to_string())])
                .line(2, &[]);
            for i in (0..=n).rev() {
                b = b.line(3, &[("i", &i.to_string())]);
                if i > 0 {
                    b = b.line(4, &[]);
                }
            }
            b = b.line(5, &[]).ret("0").end("passed");
        }
        let mut countdown = b.build();
        let (f, mut ff) = facts_of_f(&[(2, &["n"]), (3, &["i"]), (4, &["i"])]);
        ff.functions.push(f);
        countdown.facts.insert(ff.file.clone(), ff);
        let mut got = String::new();
        let targeted = BTreeMap::new();
        let cases = [
            (&sample, "sample.py", "total"),
            (&sample, "sample.py", "safe_total"),
            (&sample, "sample.py", "gen"),
            (&sample, "sample.py", "consume"),
            (&countdown, "pkg/mod.py", "f"),
        ];
        for (trace, file, qualname) in cases {
            let ff = trace.facts.values().next().unwrap();
            let kept: BTreeSet<String> = flux_trace::query::tests(trace)
                .into_iter()
                .map(|t| t.id)
                .collect();
            let func = ff.function(qualname).unwrap();
            let ix = TraceIndex::new(trace);
            let t = Target {
                file: file.into(),
                abs_file: ff.file.clone(),
                qualname: qualname.into(),
                repo_callees: 2,
                branches: 2,
                statements: 6,
                ..target()
            };
            for (seed, max_answer_size, max_tests) in
                (0..24).map(|s| (s, [4, 100][s as usize % 2], [2, 3][s as usize / 2 % 2]))
            {
                let ctx = Ctx {
                    seed,
                    scope: "r/test_sample.py",
                    target: &t,
                    func,
                    file: ff,
                    within: "",
                    max_answer_size,
                    max_tests,
                    targeted: &targeted,
                    exceptions: crate::spec::Exceptions::OwnAsks,
                };
                let running = tests_running(&ix, &t, &kept);
                let mut drafts = Vec::new();
                if let Some(test) = choose_test(&ctx, &ix, &running) {
                    let sub = sub_trace(trace, std::slice::from_ref(&test));
                    drafts.extend(single_test(&ctx, &TraceIndex::new(&sub), &test));
                }
                let m = choose_tests(&ctx, &running);
                if m.len() >= 2 {
                    let sub = sub_trace(trace, &m);
                    drafts.extend(multi_test(&ctx, &TraceIndex::new(&sub), &m));
                }
                for d in drafts {
                    got.push_str(&format!("{seed} {} {:?}\n", d.key, d.functions));
                }
            }
        }
        let snap =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/sample-drafts.snap");
        if std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1") {
            std::fs::write(&snap, &got).unwrap();
        }
        let want = std::fs::read_to_string(&snap).unwrap_or_default();
        assert!(got.lines().count() > 100, "{got}");
        assert!(
            want == got,
            "drafts differ from {} (UPDATE_EXPECT=1 rewrites it)",
            snap.display()
        );
    }

    /// The drafting context of `f` in `r/t.py` the tests below use (seed 1, 4 tests).
    fn ctx_of<'a>(
        t: &'a Target,
        func: &'a FunctionFacts,
        file: &'a FileFacts,
        targeted: &'a BTreeMap<String, String>,
    ) -> Ctx<'a> {
        Ctx {
            seed: 1,
            scope: "r/t.py",
            target: t,
            func,
            file,
            within: "pkg/",
            max_answer_size: 100,
            max_tests: 4,
            targeted,
            exceptions: crate::spec::Exceptions::OwnAsks,
        }
    }

    /// `f(n)` of [`run`] as a target: the target, its facts and file, the targeted map.
    fn f_of_the_loop() -> (Target, FunctionFacts, FileFacts, BTreeMap<String, String>) {
        let (func, file) = facts_of_f(&[(3, &["i", "n"]), (4, &["i"])]);
        let targeted = BTreeMap::from([("f".to_string(), "pkg/mod.py".to_string())]);
        (target(), func, file, targeted)
    }

    /// The tests of the indexed trace that run `t`, every test kept.
    fn running_in_every_test(ix: &TraceIndex, t: &Target) -> Vec<String> {
        let kept: BTreeSet<String> = flux_trace::query::tests(ix.trace)
            .into_iter()
            .map(|t| t.id)
            .collect();
        tests_running(ix, t, &kept)
    }

    /// Issue 26.1: each target drew its test alone, so a module's questions ran on nearly as
    /// many tests as targets, one own run and one reference run each. A test (or set of tests)
    /// an earlier target was asked on is preferred when it runs this target too.
    #[test]
    fn a_target_prefers_the_tests_earlier_targets_were_asked_on() {
        let mut b = TraceBuilder::new();
        for t in ["a", "b", "c", "d"] {
            b = run(b.test(&format!("t.py::test_{t}")), 1).end("passed");
        }
        let trace = b.build();
        let (t, func, file, targeted) = f_of_the_loop();
        let ix = TraceIndex::new(&trace);
        let running = running_in_every_test(&ix, &t);
        assert_eq!(running.len(), 4);
        let none = BTreeSet::new();
        for seed in 0..16 {
            let ctx = Ctx {
                seed,
                max_tests: 2,
                ..ctx_of(&t, &func, &file, &targeted)
            };
            // Nothing taken: the choice of before.
            assert_eq!(
                choose_test_sharing(&ctx, &ix, &running, &none),
                choose_test(&ctx, &ix, &running)
            );
            assert_eq!(
                choose_tests_sharing(&ctx, &running, &none),
                choose_tests(&ctx, &running)
            );
            let taken: BTreeSet<Vec<String>> = [
                vec!["t.py::test_c".to_string()],
                vec!["t.py::test_b".to_string(), "t.py::test_d".to_string()],
                vec!["t.py::test_x".to_string(), "t.py::test_a".to_string()],
            ]
            .into();
            assert_eq!(
                choose_test_sharing(&ctx, &ix, &running, &taken).as_deref(),
                Some("t.py::test_c")
            );
            assert_eq!(
                choose_tests_sharing(&ctx, &running, &taken),
                ["t.py::test_b", "t.py::test_d"],
                "a taken set whose every test runs the target; test_x does not"
            );
        }
    }

    #[test]
    fn drafts_follow_what_the_trace_shows() {
        let b = TraceBuilder::new().test("t.py::test_a");
        let b = run(b, 3).end("passed").test("t.py::test_b");
        let trace = run(b, 1).end("passed").build();
        let (t, func, file, targeted) = f_of_the_loop();
        let ctx = ctx_of(&t, &func, &file, &targeted);
        let kept: BTreeSet<String> = ["t.py::test_a", "t.py::test_b"].map(String::from).into();
        let running = tests_running(&TraceIndex::new(&trace), &t, &kept);
        assert_eq!(running, ["t.py::test_a", "t.py::test_b"]);
        let sub = sub_trace(&trace, &running[..1]);
        assert!(sub.events.iter().all(|e| e.test == "t.py::test_a"));
        let s = single_test(&ctx, &TraceIndex::new(&sub), "t.py::test_a");
        let kinds: Vec<(K, &str)> = s.iter().map(|d| (d.kind, d.extractor)).collect();
        assert!(kinds.contains(&(K::S2, "loop_iterations")), "{kinds:?}");
        assert!(kinds.contains(&(K::S1, "executed_path")), "{kinds:?}");
        let s2 = s.iter().find(|d| d.kind == K::S2).unwrap();
        assert_eq!(s2.params["header"], json!(3));
        assert_eq!(s2.params["body_end"], json!(4));
        let gold = flux_extract::extract(
            &sub,
            s2.extractor,
            &flux_extract::params(Value::Object(s2.params.clone())).unwrap(),
        )
        .unwrap();
        assert_eq!(gold, json!({"loop_iteration_count": 3}));
        let all = sub_trace(&trace, &running);
        let m = multi_test(&ctx, &TraceIndex::new(&all), &running);
        let kinds: Vec<K> = m.iter().map(|d| d.kind).collect();
        assert!(
            kinds.contains(&K::M1) && kinds.contains(&K::M2),
            "{kinds:?}"
        );
        // Test b runs 1 iteration, still a loop question across tests (3 in a). `i` takes the
        // same first values after each of its lines in both tests: no M3 question.
        assert!(!kinds.contains(&K::M3), "{kinds:?}");
        // Every draft's parameters are accepted by its extractor.
        for d in s.iter().chain(&m) {
            flux_extract::check_params(
                d.extractor,
                &flux_extract::params(Value::Object(d.params.clone())).unwrap(),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", d.key));
        }
    }

    /// flux-gen-v2 made M5 questions for 1.3 % of its instances (issue 26: every kind ≥ 3 %):
    /// only a type the target raises itself was asked about. An exception that leaves the
    /// target in some tests, not all (raised in a callee), is asked with `escapes`, and the
    /// extractor's gold splits the tests.
    #[test]
    fn an_exception_leaving_the_target_in_some_tests_is_an_m5_question() {
        let mut b = TraceBuilder::new();
        for (test, fails) in [("t.py::test_a", true), ("t.py::test_b", false)] {
            b = b.test(test).call("f", 1, &[("n", "1")]).line(2, &[]);
            b = if fails {
                b.unwind("ValueError", "bad n")
            } else {
                b.line(5, &[]).ret("1")
            };
            b = b.end("passed");
        }
        let trace = b.build();
        let (t, func, file, targeted) = f_of_the_loop();
        let ctx = ctx_of(&t, &func, &file, &targeted);
        let running = running_in_every_test(&TraceIndex::new(&trace), &t);
        let all = sub_trace(&trace, &running);
        let m = multi_test(&ctx, &TraceIndex::new(&all), &running);
        let m5 = m.iter().find(|d| d.kind == K::M5).expect("an M5 draft");
        assert_eq!(m5.params["escapes"], json!("f"));
        assert_eq!(m5.params["type"], json!("ValueError"));
        let gold = flux_extract::extract(
            &all,
            m5.extractor,
            &flux_extract::params(Value::Object(m5.params.clone())).unwrap(),
        )
        .unwrap();
        assert_eq!(gold["crashing_tests"], json!(["t.py::test_a"]));
        assert_eq!(gold["safe_tests"], json!(["t.py::test_b"]));
        // flux-gen-v1's rules (`[budget] exceptions = "shared"`): raises only.
        let v1 = Ctx {
            exceptions: crate::spec::Exceptions::Shared,
            ..ctx_of(&t, &func, &file, &targeted)
        };
        let m = multi_test(&v1, &TraceIndex::new(&all), &running);
        assert!(m.iter().all(|d| d.kind != K::M5));
    }

    /// flux-gen-v2's S5 and M5 stayed under 3 % of its instances (issue 26): they were drafted
    /// only on the tests chosen for all kinds, which often miss the tests where the target
    /// meets an exception. Then the target gets asks of its own: S5 on a test where it does,
    /// M5 on tests mixing both, and each yields its question.
    #[test]
    fn a_target_whose_chosen_tests_miss_its_exceptions_gets_exception_asks() {
        let mut b = TraceBuilder::new();
        for (t, raises) in [("a", true), ("b", false), ("c", true), ("d", false)] {
            b = b
                .test(&format!("t.py::test_{t}"))
                .call("f", 1, &[("n", "1")])
                .line(2, &[]);
            if raises {
                b = b
                    .raise("ValueError", "bad n")
                    .line(3, &[])
                    .handled(3, "ValueError", "bad n")
                    .line(4, &[]);
            }
            b = b.line(5, &[]).ret("1").end("passed");
        }
        let trace = b.build();
        let (t, func, file, targeted) = f_of_the_loop();
        let ix = TraceIndex::new(&trace);
        let running = running_in_every_test(&ix, &t);
        let with = tests_with_exceptions(&ix, &t, &running);
        assert_eq!(with, ["t.py::test_a", "t.py::test_c"]);
        let (b_, d_) = ("t.py::test_b".to_string(), "t.py::test_d".to_string());
        for seed in 0..8 {
            let ctx = Ctx {
                seed,
                max_tests: 2,
                ..ctx_of(&t, &func, &file, &targeted)
            };
            // The chosen tests already serve them: nothing more.
            let mixed = [b_.clone(), "t.py::test_c".to_string()];
            let (one, many) = exception_tests(&ctx, &running, &with, (Some(&with[0]), &mixed));
            assert_eq!((one, many), (None, None));
            // They miss: a test with an exception, and a mixed pair.
            let (one, many) = exception_tests(
                &ctx,
                &running,
                &with,
                (Some(&b_), &[b_.clone(), d_.clone()]),
            );
            let one = one.expect("an S5 test");
            assert!(with.contains(&one), "{one}");
            let many = many.expect("M5 tests");
            assert_eq!(many.len(), 2, "{many:?}");
            assert_eq!(
                many.iter().filter(|t| with.contains(t)).count(),
                1,
                "{many:?}"
            );
            let s5 = exception_drafts(
                &ctx,
                &TraceIndex::new(&sub_trace(&trace, std::slice::from_ref(&one))),
                &[one],
            );
            assert_eq!(s5.iter().map(|d| d.kind).collect::<Vec<_>>(), [K::S5]);
            let sub = sub_trace(&trace, &many);
            let m5 = exception_drafts(&ctx, &TraceIndex::new(&sub), &many);
            assert_eq!(m5.iter().map(|d| d.kind).collect::<Vec<_>>(), [K::M5]);
            let gold = flux_extract::extract(
                &sub,
                m5[0].extractor,
                &flux_extract::params(Value::Object(m5[0].params.clone())).unwrap(),
            )
            .unwrap();
            assert_eq!(
                gold["crashing_tests"].as_array().unwrap().len(),
                1,
                "{gold}"
            );
            assert_eq!(gold["safe_tests"].as_array().unwrap().len(), 1, "{gold}");
            // flux-gen-v1's rules ask nothing more.
            let v1 = Ctx {
                exceptions: crate::spec::Exceptions::Shared,
                ..ctx
            };
            let none =
                exception_tests(&v1, &running, &with, (Some(&b_), &[b_.clone(), d_.clone()]));
            assert_eq!(none, (None, None));
        }
    }
}
