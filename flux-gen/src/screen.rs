//! The screens after drafting: does the authored instance load, does the static baseline get
//! it right (`easy`, decided at the set's assembly), the module's selection, and the cross-check — each instance's own run
//! (its tests alone, its narrowed config, a fresh container) must give the gold answer the
//! shared trace gave.
use crate::results::{Candidate, ModuleResult};
use crate::runner::Runner;
use crate::spec::{Budget, GenSpec, RepoSpec};
use anyhow::{Context, Result};
use flux_extract::QuestionKind;
use flux_instance::Oracle;
use futures_util::stream::StreamExt;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

/// `instance.toml` text of `spec` (what the set holds; deterministic).
pub fn instance_toml(spec: &flux_instance::InstanceSpec) -> Result<String> {
    Ok(toml::to_string(spec)?)
}

/// `oracle.json` text of `oracle`.
pub fn oracle_json(oracle: &flux_instance::Oracle) -> Result<String> {
    Ok(serde_json::to_string_pretty(oracle)? + "\n")
}

/// Write `c` as an instance directory `<root>/<repository>/<id>/`.
pub fn write_instance(root: &Path, c: &Candidate) -> Result<PathBuf> {
    let dir = root.join(&c.spec.repository).join(&c.id);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join(flux_instance::INSTANCE_FILE),
        instance_toml(&c.spec)?,
    )?;
    std::fs::write(
        dir.join(flux_instance::ORACLE_FILE),
        oracle_json(&c.oracle)?,
    )?;
    Ok(dir)
}

/// Where the static baseline reads the repository's source: the unpacked source tree in the
/// cache (`<cache>/src/<name>-<version>/`) when there is one, else the image's own files: the
/// layer that holds the code's `__init__.py` (a regular file: the layer of the source tree; the
/// topmost layer holding the code's *directory* may hold only later `__pycache__`s, which left
/// the baseline with no source to read), else the one that holds the directory.
pub async fn source_root(runner: &Runner, repo: &RepoSpec) -> Option<PathBuf> {
    let (n, v) = repo.name_version();
    let cached = runner.opts.cache_dir.join("src").join(format!("{n}-{v}"));
    if cached.is_dir() {
        return Some(cached);
    }
    let code = repo.code.first()?.trim_end_matches('/');
    for rel in [format!("{code}/__init__.py"), code.to_string()] {
        let Ok(mut root) = runner
            .rt
            .image_file(&repo.image, &repo.in_image(&rel))
            .await
        else {
            continue;
        };
        for _ in rel.split('/') {
            root.pop();
        }
        return Some(root);
    }
    None
}

/// `spec` loaded as `flux harvest` loads an instance (its `instance.toml` alone, written to a
/// scratch directory and removed).
pub fn instance_of(
    scratch: &Path,
    spec: &flux_instance::InstanceSpec,
) -> Result<flux_instance::Instance> {
    let dir = scratch.join(&spec.repository).join(&spec.id);
    std::fs::create_dir_all(&dir)?;
    let result = (|| {
        std::fs::write(dir.join(flux_instance::INSTANCE_FILE), instance_toml(spec)?)?;
        Ok(flux_instance::load_instance(&dir)?)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// An authored instance's oracle: `spec` loaded as `flux harvest` loads it (the same checks),
/// its oracle made by `oracle` from the loaded instance, and the pair read as the scorer reads
/// them — in one scratch directory, written once and removed. The error is the first check's
/// (an `InstanceError::Screened` from `oracle` stays one). The module phase screens with this;
/// whether the static baseline answers it ([`mark_easy`]) is decided when the set is assembled,
/// so the module results do not depend on the baseline.
pub fn authored_oracle(
    scratch: &Path,
    spec: &flux_instance::InstanceSpec,
    oracle: impl FnOnce(&flux_instance::Instance) -> Result<Oracle, flux_instance::InstanceError>,
) -> Result<Oracle> {
    let dir = scratch.join(&spec.repository).join(&spec.id);
    std::fs::create_dir_all(&dir)?;
    let result = (|| {
        std::fs::write(dir.join(flux_instance::INSTANCE_FILE), instance_toml(spec)?)?;
        let inst = flux_instance::load_instance(&dir)?;
        let o = oracle(&inst)?;
        std::fs::write(dir.join(flux_instance::ORACLE_FILE), oracle_json(&o)?)?;
        flux_score::instance::load(&dir).context("reading it as the scorer does")?;
        Ok(o)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `c`'s gold cut to its template as `flux harvest` cuts an extractor's output (the instance's
/// projection, then the template's check) and screened by size again: Ok(None) when the cut
/// answer is below the kind's minimum or above `max_size`. The module phase keeps the
/// extractor's output (screens and the cross-check compare it, a stricter test); the set holds
/// what a harvest of the instance writes. (The gold of `call_sequence`, `callees_count`,
/// `executed_path` and `raising_tests` instances carried the extractor's extra fields, which no
/// template asks for: an answer in the template's shape could never match.)
pub fn to_template(scratch: &Path, c: &Candidate, max_size: usize) -> Result<Option<Value>> {
    let dir = write_instance(scratch, c)?;
    let result = (|| {
        let inst = flux_instance::load_instance(&dir)?;
        let answer = inst
            .projection
            .apply(&c.oracle.oracle_answer)
            .context("cutting the gold to the template")?;
        inst.template
            .validate(&answer)
            .context("the gold in the template's shape")?;
        let size = flux_extract::answer_size(&answer);
        Ok((size >= inst.min_answer_size() && size <= max_size).then_some(answer))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Is `c` well posed, reading the repository's source at `src`? `Some(rule)` names the rule it
/// breaks (the audit's classes of miss; counted under `set:<rule>` at assembly):
/// - `raised-by-callee`: an `exception_info` raise at a line that neither is a `raise`
///   statement nor calls only built-ins: the exception came out of a Python callee the trace
///   does not follow line by line (`ctx.exit()`, `inspect.signature(f)`), which the question's
///   own words say is not raised there;
/// - `continuation-line`: the question names a `line` that is not the first line of its
///   statement (`) from e`): what "executes" there is a tracing artefact, not a statement;
/// - `random-value`: a value in the gold names a temporary path (`/tmp/tmpa1b2…`), which comes
///   from the seeded random generator, not from anything the code and the test show.
pub fn ill_posed(c: &Candidate, src: Option<&Path>) -> Option<&'static str> {
    if mentions_tmp(&c.oracle.oracle_answer) {
        return Some("random-value");
    }
    let p = &c.spec.extractor.params;
    // The target's file (the extractor's `file`, else the candidate's).
    let file = p.get("file").and_then(Value::as_str).unwrap_or(&c.file);
    let text = std::fs::read_to_string(src?.join(file)).ok()?;
    let spans = flux_eval::pysrc::logical_spans(&text);
    let span_of = |line: u64| {
        spans
            .iter()
            .find(|(a, b, _)| *a as u64 <= line && line <= *b as u64)
    };
    if let Some(line) = p.get("line").and_then(Value::as_u64) {
        if span_of(line).is_some_and(|(a, _, _)| *a as u64 != line) {
            return Some("continuation-line");
        }
    }
    if c.extractor == "exception_info" {
        let line = c.oracle.oracle_answer["exception"]["raise_line"].as_u64()?;
        let (_, _, code) = span_of(line)?;
        let code = code.trim_start();
        let own = code.starts_with("raise ") || code == "raise";
        let builtins_only = flux_eval::pysrc::calls_in_code(code)
            .iter()
            .all(|n| BUILTINS.contains(&n.as_str()));
        if !own && !builtins_only {
            return Some("raised-by-callee");
        }
    }
    None
}

/// Built-in functions and types a line may call while an exception it raises still counts as
/// raised there (C code, not followed by the trace).
const BUILTINS: &[&str] = &[
    "abs",
    "all",
    "any",
    "ascii",
    "bin",
    "bool",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "complex",
    "delattr",
    "dict",
    "divmod",
    "enumerate",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "hasattr",
    "hash",
    "hex",
    "id",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "str",
    "sum",
    "tuple",
    "type",
    "vars",
    "zip",
];

fn mentions_tmp(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains("/tmp/"),
        Value::Array(a) => a.iter().any(mentions_tmp),
        Value::Object(m) => m.values().any(mentions_tmp),
        _ => false,
    }
}

/// Does the static-baseline solver (with the repository's source at `src`) answer `c` right?
pub fn baseline_answers(scratch: &Path, src: Option<&Path>, c: &Candidate) -> Result<bool> {
    let dir = write_instance(scratch, c)?;
    let result = (|| {
        let inst = flux_score::instance::load(&dir).context("reading it as the scorer does")?;
        let answer = flux_eval::solvers::static_baseline_answer(&inst, src);
        let opts = flux_score::compare::CompareOptions {
            order_insensitive: c.spec.order_insensitive.clone(),
        };
        Ok(flux_score::compare::matches(
            &c.oracle.oracle_answer,
            &answer,
            &opts,
        ))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Set `[generated] easy` of every candidate: whether the static baseline answers it right.
/// A pure function of the candidate and the repository's source, so the module results can
/// be reused (`--resume`, `--merge`) whatever baseline they were made beside.
pub fn mark_easy(scratch: &Path, src: Option<&Path>, cands: &mut [Candidate]) -> Result<usize> {
    let mut n = 0;
    for c in cands.iter_mut() {
        let easy = baseline_answers(scratch, src, c)
            .with_context(|| format!("the static baseline on {}", c.id))?;
        if let Some(g) = c.spec.generated.as_mut() {
            g.easy = easy;
        }
        n += usize::from(easy);
    }
    Ok(n)
}

/// Kinds take turns, rarest first (fewest candidates), each taking its best remaining
/// candidate (not easy before easy, then the seeded order) that keeps within `per_function`
/// and `per_file`, until `per_module`; what is not taken is counted as `module-quota`. Among
/// a kind's next few candidates, one whose own run is already needed by a candidate taken
/// (the same tests and config: one run checks both) goes first, so the cross-check makes
/// fewer runs.
pub fn select_module(
    spec: &GenSpec,
    cands: Vec<Candidate>,
    r: &mut ModuleResult,
) -> Vec<Candidate> {
    let q = &spec.quotas;
    let key = match spec.budget.own_runs {
        crate::spec::OwnRuns::PerTests => share_key,
        crate::spec::OwnRuns::PerConfig => run_key,
    };
    select_by(
        cands,
        (q.per_module, q.per_function, q.per_file),
        &q.kinds,
        key,
        &mut |_| *r.left_out.entry("module-quota".into()).or_insert(0) += 1,
    )
}

/// The selection rule of [`select_module`], also the set's per repository.
pub fn select(
    cands: Vec<Candidate>,
    total: usize,
    per_function: usize,
    per_file: usize,
    kinds: &[QuestionKind],
    dropped: &mut dyn FnMut(&Candidate),
) -> Vec<Candidate> {
    select_by(
        cands,
        (total, per_function, per_file),
        kinds,
        run_key,
        dropped,
    )
}

/// [`select`] with the key of the runs it prefers to share (`run_key`, or `share_key` when
/// configs are widened to share runs).
fn select_by(
    mut cands: Vec<Candidate>,
    (total, per_function, per_file): (usize, usize, usize),
    kinds: &[QuestionKind],
    key: fn(&Candidate) -> String,
    dropped: &mut dyn FnMut(&Candidate),
) -> Vec<Candidate> {
    cands.sort_by_key(|c| (easy(c), c.priority, c.id.clone()));
    let mut by_kind: BTreeMap<QuestionKind, VecDeque<Candidate>> = BTreeMap::new();
    for c in cands {
        if kinds.contains(&c.kind) {
            by_kind.entry(c.kind).or_default().push_back(c);
        } else {
            dropped(&c);
        }
    }
    let mut order: Vec<QuestionKind> = by_kind.keys().copied().collect();
    order.sort_by_key(|k| (by_kind[k].len(), *k));
    let mut out: Vec<Candidate> = Vec::new();
    let mut per_f: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut per_file_n: BTreeMap<String, usize> = BTreeMap::new();
    let mut open: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    loop {
        let mut took = false;
        for k in &order {
            if out.len() >= total {
                break;
            }
            let q = by_kind.get_mut(k).expect("a kind with candidates");
            let fits = |c: &Candidate| {
                per_f
                    .get(&(c.file.clone(), c.function.clone()))
                    .copied()
                    .unwrap_or(0)
                    < per_function
                    && per_file_n.get(&c.file).copied().unwrap_or(0) < per_file
            };
            if let Some(i) = q
                .iter()
                .take(LOOKAHEAD)
                .position(|c| open.contains(&key(c)) && fits(c))
            {
                let c = q.remove(i).expect("a position in the queue");
                q.push_front(c);
            }
            while let Some(c) = q.pop_front() {
                let fk = (c.file.clone(), c.function.clone());
                let nf = per_f.get(&fk).copied().unwrap_or(0);
                let nfile = per_file_n.get(&c.file).copied().unwrap_or(0);
                if nf >= per_function || nfile >= per_file {
                    dropped(&c);
                    continue;
                }
                per_f.insert(fk, nf + 1);
                per_file_n.insert(c.file.clone(), nfile + 1);
                open.insert(key(&c));
                out.push(c);
                took = true;
                break;
            }
        }
        if !took || out.len() >= total {
            break;
        }
    }
    for q in by_kind.into_values() {
        for c in q {
            dropped(&c);
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// How far down a kind's queue [`select`] looks for a candidate whose run is already needed.
const LOOKAHEAD: usize = 12;

/// Candidates with the same key are checked by one run: the same tests, the same config.
pub fn run_key(c: &Candidate) -> String {
    format!(
        "{}\n{}",
        c.tests.join(" "),
        serde_json::to_string(&c.spec.tracing).unwrap_or_default()
    )
}

/// `[budget] own_runs = "per-tests"` (the default): chosen candidates of one module that run
/// the same tests with configs differing only in what they target (`files`, `functions`,
/// `events`) are given one config, the union of theirs, so one own run (and one reference run
/// of the witness) checks them all — what a module's questions mostly share is their tests.
/// The union targets more than each question needs, which no extractor reads beyond its own
/// function and file (the own run still has to give each gold exactly, and the witness
/// re-derives it). Candidates with invariant predicates keep their own config. Returns the
/// number of candidates whose config was widened.
pub fn share_own_runs(chosen: &mut [Candidate]) -> usize {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, c) in chosen.iter().enumerate() {
        if !c.spec.tracing.predicates.is_empty() {
            continue;
        }
        groups.entry(share_key(c)).or_default().push(i);
    }
    let mut widened = 0;
    for members in groups.into_values().filter(|m| m.len() > 1) {
        let union = |f: &dyn Fn(&Candidate) -> &Vec<String>| -> Vec<String> {
            let set: std::collections::BTreeSet<&String> =
                members.iter().flat_map(|&i| f(&chosen[i])).collect();
            set.into_iter().cloned().collect()
        };
        let files = union(&|c| &c.spec.tracing.files);
        let functions = union(&|c| &c.spec.tracing.functions);
        let events: Vec<flux_trace::config::HookEvent> = flux_trace::config::HookEvent::ALL
            .into_iter()
            .filter(|e| {
                members
                    .iter()
                    .any(|&i| chosen[i].spec.tracing.events.contains(e))
            })
            .collect();
        for &i in &members {
            let t = &mut chosen[i].spec.tracing;
            if t.files != files || t.functions != functions || t.events != events {
                widened += 1;
                t.files = files.clone();
                t.functions = functions.clone();
                t.events = events.clone();
            }
        }
    }
    widened
}

/// Candidates [`share_own_runs`] may give one run: the same tests, configs that differ at most
/// in what they target.
pub fn share_key(c: &Candidate) -> String {
    let mut rest = c.spec.tracing.clone();
    rest.files.clear();
    rest.functions.clear();
    rest.events.clear();
    format!(
        "{}\n{}",
        c.tests.join(" "),
        serde_json::to_string(&rest).unwrap_or_default()
    )
}

fn easy(c: &Candidate) -> bool {
    c.spec.generated.as_ref().is_some_and(|g| g.easy)
}

/// Run every chosen instance's test alone with its narrowed config (instances with the same
/// tests and config share one run: the same command and config make the same run), and keep
/// those whose answer there equals the gold.
pub async fn cross_check(
    runner: &Runner,
    repo: &RepoSpec,
    budget: &Budget,
    chosen: Vec<Candidate>,
    r: &mut ModuleResult,
) -> Vec<Candidate> {
    let mut groups: BTreeMap<String, Vec<Candidate>> = BTreeMap::new();
    for c in chosen {
        groups.entry(run_key(&c)).or_default().push(c);
    }
    r.check_runs += groups.len();
    let runs = futures_util::stream::iter(groups.into_values().enumerate().map(
        |(i, group)| async move {
            let first = &group[0];
            let run = runner
                .trace(
                    repo,
                    &format!("gen-check-{i}"),
                    &first.tests,
                    first.spec.tracing.clone(),
                    first.spec.test.timeout_s,
                    flux_agent::tracer::TracerOptions::default().max_events,
                )
                .await;
            (group, run)
        },
    ))
    .buffer_unordered(budget.jobs.max(1))
    .collect::<Vec<_>>()
    .await;
    let mut kept = Vec::new();
    for (group, run) in runs {
        let run = match run {
            Ok(run) => run,
            Err(e) => {
                eprintln!("flux gen: the own run of {} failed: {e:#}", group[0].id);
                for _ in &group {
                    r.count("not-reproduced");
                }
                continue;
            }
        };
        let why_not = if run.exit_code != 0 {
            Some(format!("its tests exited with {}", run.exit_code))
        } else {
            crate::runner::run_problem(&run)
        };
        // One index of the run for every candidate it checks.
        let ix = why_not
            .is_none()
            .then(|| flux_trace::TraceIndex::new(&run.trace));
        for c in group {
            let verdict = match (&why_not, &ix) {
                (None, Some(ix)) => check_one(ix, &c),
                (Some(w), _) => Err(w.clone()),
                (None, None) => Err("no index".into()),
            };
            match verdict {
                Ok(()) => kept.push(c),
                Err(why) => {
                    r.count("not-reproduced");
                    if std::env::var_os("FLUX_GEN_VERBOSE").is_some() {
                        eprintln!("flux gen: {} not reproduced: {why}", c.id);
                    }
                }
            }
        }
    }
    kept.sort_by(|a, b| a.id.cmp(&b.id));
    kept
}

fn check_one(ix: &flux_trace::TraceIndex, c: &Candidate) -> Result<(), String> {
    let params = flux_extract::params(Value::Object(c.spec.extractor.params.clone()))
        .map_err(|e| e.to_string())?;
    let got =
        flux_extract::extract_indexed(ix, &c.extractor, &params).map_err(|e| e.to_string())?;
    if got == c.oracle.oracle_answer {
        Ok(())
    } else {
        Err(flux_harvest::json_diff(
            &c.oracle.oracle_answer,
            &got,
            "shared trace",
            "own run",
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use flux_instance::{Expect, ExtractorSpec, InstanceSpec, Oracle, Provenance, TestSpec};

    /// A candidate for selection tests: `function` in `file`, run by `tests`.
    pub(crate) fn fake(id: &str, kind: QuestionKind, function: &str, tests: &[&str]) -> Candidate {
        let tests: Vec<String> = tests.iter().map(|t| t.to_string()).collect();
        let spec = InstanceSpec {
            id: id.into(),
            repository: "r".into(),
            package: "r==1".into(),
            image: "i".into(),
            interpreter: "/usr/bin/python3.11".into(),
            kind,
            question: "q".into(),
            preamble: None,
            template: "{}".into(),
            order_insensitive: vec![],
            min_answer_size: None,
            test: TestSpec {
                files: vec![],
                image_files: vec!["/r/t.py".into()],
                command: vec!["python".into()],
                expect: Expect::Pass,
                timeout_s: 300,
                layout: None,
            },
            tracing: crate::plan::narrowed(vec!["m.py".into()], vec![function.into()]),
            extractor: ExtractorSpec {
                name: "x".into(),
                params: Default::default(),
                answer: Default::default(),
            },
            variant: None,
            generated: None,
        };
        Candidate {
            id: id.into(),
            kind,
            extractor: "x".into(),
            function: function.into(),
            file: "m.py".into(),
            tests,
            priority: crate::keyed::hash64(1, id),
            oracle: Oracle {
                question_kind: kind,
                question: "q".into(),
                template_answer: Value::Null,
                oracle_answer: Value::Null,
                provenance: Provenance {
                    image: "i".into(),
                    image_id: String::new(),
                    image_identity: String::new(),
                    interpreter: "3.11".into(),
                    flux_version: "0".into(),
                    trace_sha256: String::new(),
                    harvested_at: String::new(),
                    complete: true,
                    labels: vec![],
                    extractor: "x".into(),
                    params: Default::default(),
                    order_insensitive: vec![],
                    witness: None,
                },
            },
            spec,
        }
    }

    /// The audit's classes of miss: an exception that came out of a Python callee counted as
    /// raised by the target (`ctx.exit()`), a question about a statement's continuation line
    /// (`) from e`), and a value that is a seeded-random temporary path.
    #[test]
    fn ill_posed_questions_are_found_in_the_source() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join("m.py"),
            "def f(ctx, d):\n    ctx.exit()\n    getattr(d, 'x')\n    raise ValueError(\n        'no')\n",
        )
        .unwrap();
        let exc = |line: u64| {
            let mut c = fake("e", QuestionKind::S5, "f", &["t::a"]);
            c.extractor = "exception_info".into();
            c.oracle.oracle_answer = serde_json::json!({"exception": {"raise_line": line}});
            c
        };
        let src = Some(t.path());
        assert_eq!(ill_posed(&exc(2), src), Some("raised-by-callee"));
        assert_eq!(ill_posed(&exc(3), src), None, "getattr is C code");
        assert_eq!(ill_posed(&exc(4), src), None, "its own raise");
        let mut at = fake("s", QuestionKind::S3, "f", &["t::a"]);
        at.spec.extractor.params.insert("line".into(), 5.into());
        assert_eq!(ill_posed(&at, src), Some("continuation-line"));
        at.spec.extractor.params.insert("line".into(), 4.into());
        assert_eq!(ill_posed(&at, src), None);
        at.oracle.oracle_answer = serde_json::json!({"v": [{"value": "'/tmp/my\\ndir7_37l17z'"}]});
        assert_eq!(ill_posed(&at, src), Some("random-value"));
    }

    /// Issue 26.1: a module's chosen instances on one test each had their own narrowed config,
    /// so each made an own run (and a reference run) of the same test: 90 runs for 223
    /// candidates of the bench slice. Widened to their union, one run checks them all.
    #[test]
    fn instances_on_the_same_tests_share_one_own_run() {
        let mut c = vec![
            fake("a", QuestionKind::S1, "f", &["t.py::a"]),
            fake("b", QuestionKind::S2, "g", &["t.py::a"]),
            fake("c", QuestionKind::S3, "h", &["t.py::b"]),
            fake("d", QuestionKind::M7, "k", &["t.py::a"]),
        ];
        c[1].spec.tracing.files = vec!["n.py".into()];
        c[1].spec.tracing.events = vec![flux_trace::config::HookEvent::Call];
        c[3].spec.tracing.predicates = vec![flux_trace::config::Predicate {
            expr: "x > 0".into(),
            lines: vec![3],
            function: None,
        }];
        let before: Vec<_> = c.iter().map(run_key).collect();
        assert_eq!(share_own_runs(&mut c), 2);
        assert_eq!(run_key(&c[0]), run_key(&c[1]), "one run checks a and b");
        let t = &c[0].spec.tracing;
        assert_eq!(t.files, ["m.py", "n.py"]);
        assert_eq!(t.functions, ["f", "g"]);
        assert_eq!(
            t.events,
            fake("x", QuestionKind::S1, "f", &[]).spec.tracing.events
        );
        assert_eq!(run_key(&c[2]), before[2], "another test keeps its config");
        assert_eq!(run_key(&c[3]), before[3], "predicates keep theirs");
        assert_eq!(share_own_runs(&mut c), 0, "a second pass widens nothing");
    }

    #[test]
    fn selection_takes_kinds_in_turn_within_caps_and_shares_runs() {
        use QuestionKind as K;
        let mut cands = Vec::new();
        // Many S1 about f, one S5 about g (the rare kind), S2 about f and h.
        for i in 0..6 {
            cands.push(fake(&format!("s1-{i}"), K::S1, "f", &["t::a"]));
        }
        cands.push(fake("s5", K::S5, "g", &["t::b"]));
        cands.push(fake("s2-f", K::S2, "f", &["t::a"]));
        cands.push(fake("s2-h", K::S2, "h", &["t::c"]));
        let mut dropped = Vec::new();
        let out = select(cands, 4, 3, 10, &K::ALL, &mut |c| {
            dropped.push(c.id.clone())
        });
        let ids: Vec<&str> = out.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(out.len(), 4, "{ids:?}");
        // The rare kind is in; no function beyond its cap of 3.
        assert!(ids.contains(&"s5"), "{ids:?}");
        assert!(out.iter().filter(|c| c.function == "f").count() <= 3);
        // Both S2 candidates wait behind the kinds' turns; the one sharing f's run goes first.
        assert!(ids.contains(&"s2-f"), "{ids:?}");
        assert_eq!(dropped.len(), 5);
        // Kinds not asked for are dropped.
        let mut n = 0;
        let out = select(
            vec![fake("m", K::M1, "f", &["t::a", "t::b"])],
            4,
            3,
            10,
            &[K::S1],
            &mut |_| n += 1,
        );
        assert!(out.is_empty());
        assert_eq!(n, 1);
    }
}
