//! `flux gen --reauthor SET`: a set's questions written again by this flux's prose
//! ([`crate::author::question`], against its kind's preamble) and its instances screened
//! ([`crate::discriminate`]), without running anything: the gold answers (`oracle.json`) stay
//! byte for byte as they are, `instance.toml` gets the new question and `preamble`, the
//! dropped instances leave the set and are recorded in `screened.json`, and `index.json` is
//! written again. Deterministic: a function of the set and the repositories' sources in the
//! cache (`<cache>/src/<name>-<version>/`: the static baseline's `easy`, which reads the
//! question, is taken again on it, and `echoed-literal` reads the tests there; a repository
//! without one is reported, its `easy` kept and that screen left unchecked for it); running it
//! twice changes nothing.
//!
//! What the prose needs besides the instance (the target's `def` line, where its arguments are
//! defined, a loop's keyword and first body line: static facts the set does not keep) is read
//! from the question it replaces, which states them in both the long and the short form.
use crate::author::{question, Ask, Subject};
use crate::discriminate::{self, Screened, SCREENED_FILE};
use crate::results::{Candidate, ModuleResult};
use crate::spec::RepoSpec;
use anyhow::{bail, Context, Result};
use flux_instance::InstanceSpec;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a re-authoring did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Reauthored {
    pub set: String,
    /// Instances before the screens.
    pub instances: usize,
    /// Questions whose text changed.
    pub rewritten: usize,
    /// Instances kept.
    pub kept: usize,
    /// Dropped now, per screen.
    pub dropped: BTreeMap<String, usize>,
    /// Repositories whose source was not in the cache (`echoed-literal` unchecked for them,
    /// and `easy` kept as it was).
    pub without_source: Vec<String>,
    /// Instances whose `easy` (the static baseline's verdict) the new question changed.
    pub easy_changed: usize,
    /// Candidates of the module results the set was assembled from (`<cache>/gen/<set>/
    /// modules/`) whose question was rewritten as the set's were ([`reauthor_modules`]).
    pub module_questions_rewritten: usize,
}

/// The first number after `pat` in `q` that `then` follows.
fn number_after(q: &str, pat: &str, then: &str) -> Option<u32> {
    q.match_indices(pat).find_map(|(at, _)| {
        let rest = &q[at + pat.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        rest[digits.len()..]
            .starts_with(then)
            .then(|| digits.parse().ok())
            .flatten()
    })
}

/// What the question `spec` holds says about its target (see the module doc).
pub fn subject_of(spec: &InstanceSpec) -> Result<Subject> {
    let q = spec
        .question
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let p = &spec.extractor.params;
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if spec.extractor.name == "call_graph" {
        return Ok(Subject::default());
    }
    let def_line = number_after(&q, "defined at line ", " of `")
        .with_context(|| format!("{}: the question names no `def` line", spec.id))?;
    let first_line = number_after(&q, "defined at line ", " for its arguments")
        .or_else(|| number_after(&q, "arguments are defined at line ", ""))
        .unwrap_or(def_line);
    let loop_head = match p.get("header") {
        None => None,
        Some(_) => {
            let at = q
                .find("` loop ")
                .with_context(|| format!("{}: the question names no loop", spec.id))?;
            let kw = q[..at].rsplit('`').next().unwrap_or("for").to_string();
            let first = number_after(&q, "body: lines ", " to ")
                .with_context(|| format!("{}: the question names no loop body", spec.id))?;
            Some((kw, first))
        }
    };
    // Exception questions name their function `raised_in` and no file: the question does.
    let qualname = Some(s("function"))
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| s("raised_in"));
    let named_file = || {
        let pat = format!("defined at line {def_line} of `");
        let at = q.find(&pat)? + pat.len();
        q[at..].split('`').next().map(str::to_string)
    };
    let file = Some(s("file"))
        .filter(|f| !f.is_empty())
        .or_else(named_file)
        .with_context(|| format!("{}: the question names no file", spec.id))?;
    Ok(Subject {
        qualname,
        file,
        def_line,
        first_line,
        loop_head,
    })
}

/// Re-author the instance `spec` (its question and preamble) as this flux writes it.
pub fn reauthor_spec(repo: &RepoSpec, spec: &mut InstanceSpec) -> Result<()> {
    // A calls-only question's target is its extractor's `function` and `file`: no lines.
    let subject = if crate::runtime::calls_only(repo) {
        Subject::default()
    } else {
        subject_of(spec)?
    };
    let tests = discriminate::command_tests(&spec.test.command);
    let ask = Ask {
        kind: spec.kind,
        extractor: &spec.extractor.name,
        params: &spec.extractor.params,
        tests: &tests,
        functions: &spec.tracing.functions,
    };
    spec.question = question(repo, &subject, &ask);
    spec.preamble = Some(crate::runtime::preamble(repo, spec.kind).id());
    Ok(())
}

/// The repository's unpacked source in the cache, if there.
pub fn cached_source(cache: &Path, repo: &RepoSpec) -> Option<PathBuf> {
    let (n, v) = repo.name_version();
    let dir = cache.join("src").join(format!("{n}-{v}"));
    dir.is_dir().then_some(dir)
}

/// `screened.json` of `dir`, if any.
pub fn read_screened(dir: &Path) -> Result<Vec<Screened>> {
    let path = dir.join(SCREENED_FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path)?;
    serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))
}

/// Write `screened.json`: the earlier drops and `now`, by repository and id.
pub fn write_screened(dir: &Path, now: &[Screened]) -> Result<()> {
    std::fs::write(
        dir.join(SCREENED_FILE),
        screened_json(dir, now, &|_| false)?,
    )?;
    Ok(())
}

/// The text of `dir`'s `screened.json` with `now` added (what [`write_screened`] writes). An
/// earlier drop whose id `decided` says was judged again is replaced by today's verdict (in
/// `now`, or kept: a gen's assembly screens every candidate of the set again).
pub fn screened_json(
    dir: &Path,
    now: &[Screened],
    decided: &dyn Fn(&str) -> bool,
) -> Result<String> {
    let mut all = read_screened(dir)?;
    all.retain(|a| !decided(&a.id));
    for s in now {
        if !all.iter().any(|a| a.id == s.id) {
            all.push(s.clone());
        }
    }
    all.sort_by(|a, b| (&a.repository, &a.id).cmp(&(&b.repository, &b.id)));
    Ok(serde_json::to_string_pretty(&all)? + "\n")
}

/// The module results under `out` (`<out>/modules/<repository>/<module>.json`, what `flux gen`
/// assembled the set from), each candidate's question and preamble re-authored as the set's
/// instances are ([`reauthor_spec`]), and how many questions changed. Nothing is written:
/// [`reauthor`] writes them with the set. Without them re-authored, `flux gen --check --shard`
/// compared a fresh module (asking the new question) with its stored result (the old one) and
/// reported every re-authored candidate's instance.toml as different. `easy` stays as it is
/// (module results do not hold it: the set's assembly decides it).
pub fn reauthor_modules(
    out: &Path,
    spec: &crate::spec::GenSpec,
) -> Result<(Vec<ModuleResult>, usize)> {
    let mut results = Vec::new();
    let mut changed = 0;
    for repo in &spec.repositories {
        let dir = out.join("modules").join(&repo.name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path)?;
            let mut r: ModuleResult = serde_json::from_str(&text)
                .with_context(|| format!("reading {}", path.display()))?;
            for c in &mut r.candidates {
                let before = c.spec.question.clone();
                reauthor_spec(repo, &mut c.spec)
                    .with_context(|| format!("{}: {}", path.display(), c.id))?;
                changed += usize::from(before != c.spec.question);
            }
            results.push(r);
        }
    }
    Ok((results, changed))
}

/// Re-author the set at `set_dir` (see the module doc), reading sources from `cache`, and the
/// module results it was assembled from (`<cache>/gen/<set>/`, [`reauthor_modules`]).
pub fn reauthor(set_dir: &Path, cache: &Path) -> Result<Reauthored> {
    let spec = crate::spec::load(set_dir)?;
    let _lock = crate::lock::SetLock::acquire(set_dir, crate::lock::Use::Whole)?;
    // Read (and re-authored in memory) first, so a question that does not parse leaves both
    // the set and the module results as they were.
    let gen_out = cache.join("gen").join(&spec.name);
    let (modules, module_questions) = reauthor_modules(&gen_out, &spec)?;
    let root = set_dir.join("instances");
    let dirs = flux_instance::discover(&[&root])?;
    let mut out = Reauthored {
        set: spec.name.clone(),
        instances: dirs.len(),
        ..Reauthored::default()
    };
    let mut cands = Vec::new();
    for dir in &dirs {
        let path = dir.join(flux_instance::INSTANCE_FILE);
        let text = std::fs::read_to_string(&path)?;
        let mut ispec: InstanceSpec =
            toml::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
        let Some(repo) = spec
            .repositories
            .iter()
            .find(|r| r.name == ispec.repository)
        else {
            bail!(
                "{}: repository {} is not in {}'s gen.toml",
                path.display(),
                ispec.repository,
                set_dir.display()
            );
        };
        let before = ispec.question.clone();
        reauthor_spec(repo, &mut ispec)?;
        out.rewritten += usize::from(before != ispec.question);
        let oracle = flux_instance::read_oracle(dir)?;
        let tests = discriminate::command_tests(&ispec.test.command);
        let p = &ispec.extractor.params;
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        cands.push(Candidate {
            id: ispec.id.clone(),
            kind: ispec.kind,
            extractor: ispec.extractor.name.clone(),
            function: s("function"),
            file: s("file"),
            tests,
            priority: 0,
            spec: ispec,
            oracle,
        });
    }
    let sources: BTreeMap<String, PathBuf> = spec
        .repositories
        .iter()
        .filter_map(|r| Some((r.name.clone(), cached_source(cache, r)?)))
        .collect();
    out.without_source = spec
        .repositories
        .iter()
        .filter(|r| !sources.contains_key(&r.name))
        .map(|r| r.name.clone())
        .collect();
    // The static baseline reads the question (the functions it names): its verdict, `easy`,
    // is taken again on the new one where the source is at hand.
    let scratch = std::env::temp_dir().join(format!("flux-reauthor-{}", std::process::id()));
    let mut flipped = 0;
    for c in cands.iter_mut() {
        let Some(src) = sources.get(&c.spec.repository) else {
            continue;
        };
        let easy = crate::screen::baseline_answers(&scratch, Some(src), c)
            .with_context(|| format!("the static baseline on {}", c.id))?;
        if let Some(g) = c.spec.generated.as_mut() {
            flipped += usize::from(g.easy != easy);
            g.easy = easy;
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    out.easy_changed = flipped;
    let (kept, dropped) = discriminate::apply(cands, &|r| sources.get(r).cloned());
    for c in &kept {
        let dir = root.join(&c.spec.repository).join(&c.id);
        std::fs::write(
            dir.join(flux_instance::INSTANCE_FILE),
            crate::screen::instance_toml(&c.spec)?,
        )?;
        flux_instance::load_instance(&dir)
            .with_context(|| format!("{}: the re-authored instance", dir.display()))?;
    }
    for d in &dropped {
        std::fs::remove_dir_all(root.join(&d.repository).join(&d.id))?;
        *out.dropped.entry(d.screen.clone()).or_insert(0) += 1;
    }
    write_screened(set_dir, &dropped)?;
    std::fs::write(set_dir.join("index.json"), crate::set::index_json(&kept)?)?;
    for r in &modules {
        crate::module::write_result(&gen_out, r)?;
    }
    out.module_questions_rewritten = module_questions;
    out.kept = kept.len();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(question: &str, params: serde_json::Value) -> InstanceSpec {
        let mut s = crate::screen::tests::fake("x", flux_extract::QuestionKind::S2, "f", &[]).spec;
        s.question = question.into();
        s.extractor.params = params.as_object().unwrap().clone();
        s
    }

    /// The facts the prose needs are read back from the long (v1) question and from the short
    /// one alike, so re-authoring twice writes the same question.
    #[test]
    fn the_subject_is_read_from_long_and_short_questions() {
        let long = spec_with(
            "How many iterations does the `while` loop whose header is line 12 (its body: lines \
             13 to\n20, not counting) of `C.f`, defined at line 9 of `pkg/m.py` perform? A \
             variable is defined at line 8 for its arguments",
            serde_json::json!({"function": "C.f", "file": "pkg/m.py", "header": 12, "body_end": 20}),
        );
        let s = subject_of(&long).unwrap();
        assert_eq!(
            s,
            Subject {
                qualname: "C.f".into(),
                file: "pkg/m.py".into(),
                def_line: 9,
                first_line: 8,
                loop_head: Some(("while".into(), 13)),
            }
        );
        let spec = crate::spec::parse(crate::spec::tests::GOOD, Path::new("gen.toml")).unwrap();
        let repo = &spec.repositories[0];
        let ask = Ask {
            kind: long.kind,
            extractor: "loop_iterations",
            params: &long.extractor.params,
            tests: &["t.py::t".to_string()],
            functions: &[],
        };
        let short = spec_with(
            &question(repo, &s, &ask),
            serde_json::Value::Object(long.extractor.params.clone()),
        );
        let again = subject_of(&short).unwrap();
        assert_eq!(again.loop_head, s.loop_head);
        assert_eq!(again.def_line, 9);
        // Without a decorator the arguments are defined at the `def` line.
        let plain = spec_with(
            "`f`, defined at line 4 of `m.py`: at the function's `def` line for its arguments",
            serde_json::json!({"function": "f", "file": "m.py"}),
        );
        assert_eq!(subject_of(&plain).unwrap().first_line, 4);
        // An exception question names its function `raised_in`, its file only in the text.
        let exc = spec_with(
            "raised in `g`, defined at line 7 of `pkg/e.py` (by its own code",
            serde_json::json!({"raised_in": "g", "type": "E"}),
        );
        let s = subject_of(&exc).unwrap();
        assert_eq!((s.qualname.as_str(), s.file.as_str()), ("g", "pkg/e.py"));
    }

    /// `flux gen --reauthor` rewrote each instance's question in the set but not the module
    /// results the set was assembled from (`<cache>/gen/<set>/modules/`): a later `flux gen
    /// --check --shard K/N`, whose fresh modules ask the new question, then reported every
    /// re-authored candidate's instance.toml as different from its stored result.
    #[test]
    fn check_shard_of_a_reauthored_set_reports_no_stale_module_question() {
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets/flux-gen-v1");
        let mut dirs = flux_instance::discover(&[committed.join("instances/flask")]).unwrap();
        dirs.truncate(4);
        // The committed set is what this flux writes: its questions are the fresh ones.
        let mut by_module: BTreeMap<String, ModuleResult> = BTreeMap::new();
        for d in &dirs {
            let spec: InstanceSpec = toml::from_str(
                &std::fs::read_to_string(d.join(flux_instance::INSTANCE_FILE)).unwrap(),
            )
            .unwrap();
            let module = spec.generated.as_ref().unwrap().module.clone();
            let r = by_module
                .entry(module.clone())
                .or_insert_with(|| ModuleResult {
                    repository: spec.repository.clone(),
                    module,
                    ..ModuleResult::default()
                });
            r.candidates.push(Candidate {
                id: spec.id.clone(),
                kind: spec.kind,
                extractor: spec.extractor.name.clone(),
                function: String::new(),
                file: String::new(),
                tests: vec![],
                priority: 0,
                oracle: flux_instance::read_oracle(d).unwrap(),
                spec,
            });
        }
        let fresh: Vec<ModuleResult> = by_module.into_values().collect();
        let n = dirs.len();
        // A set and its module results as an older flux wrote them: another question.
        let t = tempfile::tempdir().unwrap();
        let (set, cache) = (t.path().join("set"), t.path().join("cache"));
        let gen_out = cache.join("gen/flux-gen-v1");
        std::fs::create_dir_all(&set).unwrap();
        std::fs::copy(committed.join("gen.toml"), set.join("gen.toml")).unwrap();
        for r in &fresh {
            let mut old = r.clone();
            for c in &mut old.candidates {
                c.spec.question = format!("An older prose. {}", c.spec.question);
                let to = set.join("instances/flask").join(&c.id);
                std::fs::create_dir_all(&to).unwrap();
                std::fs::write(
                    to.join(flux_instance::INSTANCE_FILE),
                    crate::screen::instance_toml(&c.spec).unwrap(),
                )
                .unwrap();
                std::fs::write(
                    to.join(flux_instance::ORACLE_FILE),
                    crate::screen::oracle_json(&c.oracle).unwrap(),
                )
                .unwrap();
            }
            crate::module::write_result(&gen_out, &old).unwrap();
        }
        let stale = crate::set::check_modules(&gen_out, &fresh).unwrap();
        assert_eq!(stale.len(), n, "{stale:?}");
        assert!(stale.iter().all(|d| d.ends_with("instance.toml differs")));
        let r = reauthor(&set, &cache).unwrap();
        assert_eq!(r.rewritten, n);
        assert_eq!(r.module_questions_rewritten, n);
        assert_eq!(
            [
                crate::set::check_modules(&gen_out, &fresh).unwrap(),
                crate::set::check_set_modules(&set, &fresh).unwrap()
            ]
            .concat(),
            Vec::<String>::new()
        );
        // Re-authoring again rewrites nothing, in the set or in the modules.
        let again = reauthor(&set, &cache).unwrap();
        assert_eq!((again.rewritten, again.module_questions_rewritten), (0, 0));
    }

    /// Every question of the committed sets (pytest and JUnit) is the one this flux writes for
    /// its instance, byte for byte, with the same preamble: the prose is a function of the
    /// instance, and a change of how it is organised must not change a word of it.
    #[test]
    fn the_committed_sets_questions_are_what_this_flux_writes() {
        let sets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets");
        let mut seen: BTreeMap<flux_extract::QuestionKind, usize> = BTreeMap::new();
        for set in ["flux-gen-v1", "flux-java-v1"] {
            let dir = sets.join(set);
            let spec = crate::spec::load(&dir.join("gen.toml")).unwrap();
            for d in flux_instance::discover(&[dir.join("instances")]).unwrap() {
                let text = std::fs::read_to_string(d.join(flux_instance::INSTANCE_FILE)).unwrap();
                let stored: InstanceSpec = toml::from_str(&text).unwrap();
                let repo = spec
                    .repositories
                    .iter()
                    .find(|r| r.name == stored.repository)
                    .unwrap();
                let mut again = stored.clone();
                reauthor_spec(repo, &mut again).unwrap();
                assert_eq!(
                    (&again.question, &again.preamble),
                    (&stored.question, &stored.preamble),
                    "{}",
                    d.display()
                );
                *seen.entry(stored.kind).or_insert(0) += 1;
            }
        }
        assert_eq!(
            seen.len(),
            flux_extract::QuestionKind::ALL.len(),
            "{seen:?}"
        );
    }

    #[test]
    fn tests_are_the_commands_ids_relative_to_the_root() {
        let spec = crate::spec::parse(crate::spec::tests::GOOD, Path::new("gen.toml")).unwrap();
        let repo = &spec.repositories[0];
        let cmd = crate::runner::pytest_command(repo, &["t/a.py::x".into(), "t/b.py::y[1]".into()]);
        assert_eq!(
            discriminate::command_tests(&cmd),
            ["t/a.py::x", "t/b.py::y[1]"]
        );
    }
}
