//! Everything `flux gen` runs in a repository's image: listing its files, computing static
//! facts with its interpreter, and traced runs of its test modules (through the harvest's own
//! run, `flux_harvest::run_traced`, so a module trace is made exactly as an instance's is).
use crate::facts::FactsDoc;
use crate::spec::RepoSpec;
use anyhow::{bail, Context, Result};
use flux_container::{ContainerSpec, Mount, Runtime};
use flux_harvest::{HarvestOptions, TracedRun};
use flux_instance::{Expect, ExtractorSpec, Instance, InstanceSpec, TestSpec};
use flux_trace::TracingConfig;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The Docker runtime and where runs and caches go.
pub struct Runner {
    pub rt: Runtime,
    pub opts: HarvestOptions,
    /// `<cache>/gen/`: scratch directories, static-facts and profile caches.
    pub work: PathBuf,
}

/// The test command for `paths` (files or node ids under the repository's `root`).
pub fn pytest_command(repo: &RepoSpec, paths: &[String]) -> Vec<String> {
    let mut cmd = vec![repo.interpreter.clone(), "-m".into(), "pytest".into()];
    cmd.extend(repo.pytest_args.iter().cloned());
    cmd.push(format!("--rootdir={}", repo.root));
    cmd.extend(paths.iter().map(|p| repo.in_image(p)));
    cmd
}

impl Runner {
    pub async fn connect(opts: HarvestOptions) -> Result<Runner> {
        let rt = Runtime::connect()
            .await
            .context("flux gen runs tests in Docker")?;
        let work = std::path::absolute(opts.cache_dir.join("gen"))?;
        std::fs::create_dir_all(&work)?;
        Ok(Runner { rt, opts, work })
    }

    /// The image's content id; an error naming the command that builds a missing image.
    pub async fn image_id(&self, image: &str) -> Result<String> {
        match self.rt.image_id(image).await? {
            Some(id) => Ok(id),
            None => bail!(
                "image {image} is missing; {}",
                flux_container::images::build_hint(image)
            ),
        }
    }

    /// The repository's `package` and `interpreter` checked against its image's manifest
    /// before anything runs: a wrong pin is refused by every run's harvest, so every module
    /// would be skipped and nothing made (issue 26.6).
    pub async fn check_pins(&self, repo: &RepoSpec) -> Result<()> {
        let Some(m) = flux_container::images::image_manifest(&self.rt, &repo.image).await? else {
            bail!(
                "repository {}: image {} carries no flux manifest, so `package` and \
                 `interpreter` cannot be checked against it; {}",
                repo.name,
                repo.image,
                flux_container::images::build_hint(&repo.image)
            );
        };
        flux_container::images::check_pins(&m, &repo.package, &repo.interpreter).map_err(|e| {
            anyhow::anyhow!(
                "repository {} (package {}) does not describe image {}: {e}",
                repo.name,
                repo.package,
                repo.image
            )
        })
    }

    /// A fresh scratch directory under this process's [`scratch_root`].
    fn scratch(&self, what: &str) -> Result<PathBuf> {
        let d = scratch_root(&self.work)
            .join(format!("{what}-{}", flux_container::runtime::new_run_id()));
        std::fs::create_dir_all(&d)?;
        Ok(d)
    }

    /// Run `script` (Python source) with the repository's interpreter in its image, with
    /// `static_facts` importable; it writes `/flux/out/out.json`, which is returned.
    async fn python(&self, repo: &RepoSpec, script: &str, args: &[String]) -> Result<Vec<u8>> {
        let dir = self.scratch("py")?;
        for (name, text) in [("script.py", script), ("static_facts.py", STATIC_FACTS)] {
            std::fs::write(dir.join(name), text)?;
            set_mode(&dir.join(name), 0o644)?;
        }
        let run = dir.join("run");
        std::fs::create_dir_all(&run)?;
        // The run directory is read-only in a test's container: the script writes to `out/`,
        // read back as untrusted (no links followed), as harvest reads a reference's logs.
        let outd = dir.join("out");
        std::fs::create_dir_all(&outd)?;
        set_mode(&outd, 0o777)?;
        let mut cmd = vec![
            crate::runtime::tools_python(repo).to_string(),
            "/flux/gen/script.py".to_string(),
        ];
        cmd.extend(args.iter().cloned());
        let mut spec = ContainerSpec::new(&repo.image, cmd, &run);
        spec.mounts.push(Mount::read_only(&dir, "/flux/gen"));
        spec.mounts.push(Mount::read_write(&outd, "/flux/out"));
        spec.env = BTreeMap::from([
            ("PYTHONPATH".into(), "/flux/gen".into()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        ]);
        spec.timeout = Duration::from_secs(600);
        spec.workdir = Some("/flux/run".into());
        let out = self
            .rt
            .run(spec)
            .await
            .with_context(|| format!("running a script in {}", repo.image))?;
        if out.exit_code != 0 {
            bail!(
                "a script in {} exited with {}: {}",
                repo.image,
                out.exit_code,
                tail(&out.stderr_lossy(), 20)
            );
        }
        let mut bytes = Vec::new();
        flux_harvest::read_untrusted(&outd, |n| n == "out.json", |b| bytes.extend_from_slice(b))
            .with_context(|| format!("the output of a script in {}", repo.image))?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(bytes)
    }

    /// Every source file (`.py`, or the runtime's) under the repository's code and test
    /// directories, relative to `root`, sorted.
    pub async fn list_files(&self, repo: &RepoSpec) -> Result<Vec<String>> {
        let dirs = list_dirs(repo);
        let bytes = self
            .python(repo, LIST_SCRIPT, &{
                let mut a = vec![
                    crate::runtime::source_ext(repo).to_string(),
                    repo.root.clone(),
                ];
                a.extend(dirs);
                a
            })
            .await?;
        let files: Vec<String> = serde_json::from_slice(&bytes).context("file list")?;
        Ok(files)
    }

    /// Static facts of `files` (paths under `root`), by the image's interpreter.
    pub async fn static_facts(&self, repo: &RepoSpec, files: &[String]) -> Result<FactsDoc> {
        if files.is_empty() {
            return Ok(FactsDoc::default());
        }
        let abs: Vec<String> = files.iter().map(|f| repo.in_image(f)).collect();
        let bytes = self.python(repo, FACTS_SCRIPT, &abs).await?;
        serde_json::from_slice(&bytes).context("static facts of the image's files")
    }

    /// The test methods a JUnit test class (`module`, a `.java` file under `root`) declares,
    /// as `<binary class name>.<method>`: methods annotated `@Test`, or, in a class without
    /// `@Test` (JUnit 3), its `public void test…()` methods. Read from the source in the image;
    /// the trace decides which of them ran (only those get a window).
    pub async fn test_methods(&self, repo: &RepoSpec, module: &str) -> Result<Vec<String>> {
        let class = crate::runtime::test_class(repo, module)
            .with_context(|| format!("{module} is not a test class's source"))?;
        let bytes = self
            .python(repo, TEST_METHODS_SCRIPT, &[repo.in_image(module)])
            .await?;
        let names: Vec<String> = serde_json::from_slice(&bytes).context("test methods")?;
        Ok(names.into_iter().map(|m| format!("{class}.{m}")).collect())
    }

    /// One traced run of `paths` (files or node ids under `root`) in the repository's image
    /// with `config`, as a harvest runs an instance; `id` names the run directory.
    pub async fn trace(
        &self,
        repo: &RepoSpec,
        id: &str,
        paths: &[String],
        config: TracingConfig,
        timeout_s: u64,
        max_events: usize,
    ) -> Result<TracedRun> {
        let mut opts = self.opts.clone();
        opts.tracer.max_events = max_events;
        let mut attempt = 1;
        loop {
            let dir = self.scratch(id)?;
            std::fs::write(
                dir.join("README.md"),
                "A run of the repository's own tests by flux gen; the tests live in the image.\n",
            )?;
            let inst = run_instance(repo, id, paths, config.clone(), timeout_s, &dir);
            let r = flux_harvest::run_traced(&self.rt, &inst, &opts).await;
            let _ = std::fs::remove_dir_all(&dir);
            match r {
                Err(e) if attempt < RUN_ATTEMPTS => {
                    eprintln!(
                        "flux gen: run {id} could not be made (attempt {attempt}), again: {e:#}"
                    );
                    tokio::time::sleep(Duration::from_secs(2 * attempt as u64)).await;
                    attempt += 1;
                }
                Ok(run) if attempt < RUN_ATTEMPTS && lost_to_load(&run).is_some() => {
                    eprintln!(
                        "flux gen: run {id} lost {} events to a busy machine (attempt {attempt}), again",
                        lost_to_load(&run).unwrap_or(0)
                    );
                    drop(run);
                    tokio::time::sleep(Duration::from_secs(2 * attempt as u64)).await;
                    attempt += 1;
                }
                r => return r,
            }
        }
    }
}

/// This process's scratch directories, `<work>/scratch/gen-<pid>/` (`work` is
/// [`Runner::work`], `<cache>/gen/`): one directory to remove when a gen is interrupted, and
/// none of another gen's.
pub fn scratch_root(work: &Path) -> PathBuf {
    work.join("scratch")
        .join(format!("gen-{}", std::process::id()))
}

/// Events the kernel counted but the agent was not delivered (its ring buffer full while the
/// machine was too busy to drain it): the machine's, not the test's, so the run is made again
/// (up to [`RUN_ATTEMPTS`]) rather than its module refused — a module refused on one machine
/// and not another would make a regeneration differ (the shard test's occasional failure:
/// "kernel counted 555,600 events but 544,293 were delivered").
fn lost_to_load(run: &flux_harvest::TracedRun) -> Option<u64> {
    let lost = run.trace.meta.lost_events;
    (lost > 0 && run.timed_out.is_none() && run.killed.is_none()).then_some(lost)
}

/// Attempts at one run. An `Err` from a run is the machinery's (the container did not start,
/// the daemon answered 500), never the tests' (a failing, hanging or killed test is a result):
/// on a shared machine it passes, and a set must not lose an instance to it — a regeneration
/// would differ.
const RUN_ATTEMPTS: u32 = 3;

/// The (unused) template of a run's instance: `call_graph`'s.
const RUN_TEMPLATE: &str = r#"{"call_graph": {"*": ["str"]}}"#;

/// An instance (never written, never validated) whose test is `paths` of `repo`: what
/// `flux_harvest::run_traced` runs. Only the image, interpreter, command, timeout and tracing
/// config are read by a run.
fn run_instance(
    repo: &RepoSpec,
    id: &str,
    paths: &[String],
    config: TracingConfig,
    timeout_s: u64,
    dir: &Path,
) -> Instance {
    let spec = InstanceSpec {
        id: id.to_string(),
        repository: repo.name.clone(),
        package: repo.package.clone(),
        image: repo.image.clone(),
        interpreter: repo.interpreter.clone(),
        kind: flux_extract::QuestionKind::M6,
        question: "(a run of flux gen)".into(),
        preamble: None,
        template: RUN_TEMPLATE.into(),
        order_insensitive: Vec::new(),
        min_answer_size: None,
        test: TestSpec {
            files: vec!["README.md".into()],
            image_files: paths
                .iter()
                .map(|p| crate::runtime::image_file(repo, p))
                .collect(),
            command: crate::runtime::test_command(repo, paths),
            expect: Expect::Pass,
            timeout_s,
            layout: None,
        },
        tracing: config,
        extractor: ExtractorSpec {
            name: "call_graph".into(),
            params: Default::default(),
            answer: Default::default(),
        },
        variant: None,
        generated: None,
    };
    Instance {
        dir: dir.to_path_buf(),
        spec,
        template: flux_instance::Template::parse(RUN_TEMPLATE).expect("a valid template"),
        projection: flux_instance::Projection::identity(),
        params: flux_extract::no_params(),
    }
}

fn set_mode(p: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// argv: EXT ROOT DIR... → out.json: the sorted `EXT` files under ROOT/DIR, relative to ROOT.
/// The directories (under `root`) whose files [`Runner::list_files`] lists: the code, the
/// listed modules' directories and, since tests may live outside the code (`tests/` beside
/// `src/`), the directory of the select glob's literal prefix.
pub fn list_dirs(repo: &RepoSpec) -> Vec<String> {
    let mut dirs: Vec<String> = repo.code.clone();
    dirs.extend(
        repo.modules
            .iter()
            .filter_map(|m| m.rsplit_once('/').map(|(d, _)| format!("{d}/"))),
    );
    if let Some(sel) = &repo.select {
        let lit = sel.glob.split(['*', '?']).next().unwrap_or("");
        if let Some((d, _)) = lit.rsplit_once('/') {
            dirs.push(format!("{d}/"));
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

const LIST_SCRIPT: &str = r#"
import json, os, sys
ext, root, dirs = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3:]
out = set()
for d in dirs:
    base = os.path.join(root, d)
    if os.path.isfile(base):
        out.add(os.path.relpath(base, root))
        continue
    for dp, dns, fns in os.walk(base):
        dns[:] = sorted(x for x in dns if x != "__pycache__" and not x.startswith("."))
        for f in fns:
            if f.endswith(ext):
                out.add(os.path.relpath(os.path.join(dp, f), root))
with open("/flux/out/out.json", "w") as fh:
    json.dump(sorted(out), fh)
"#;

/// argv: FILE.java → out.json: the names of the test methods it declares (see
/// [`Runner::test_methods`]); comments are dropped first.
const TEST_METHODS_SCRIPT: &str = r#"
import json, re, sys
src = open(sys.argv[1], encoding="utf-8", errors="replace").read()
src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
src = re.sub(r"//[^\n]*", " ", src)
names = []
ann = r"@(?:org\.junit\.(?:jupiter\.api\.)?)?Test\b(?!\w)(?:\s*\([^)]*\))?"
other = r"(?:\s*@\w[\w.]*(?:\s*\([^)]*\))?)*"
mods = r"\s*(?:(?:public|protected|private|static|final|synchronized)\s+)*"
for m in re.finditer(ann + other + mods + r"void\s+(\w+)\s*\(", src):
    names.append(m.group(1))
if "@Test" not in src:
    for m in re.finditer(r"public\s+void\s+(test\w*)\s*\(\s*\)", src):
        names.append(m.group(1))
out = []
for n in names:
    if n not in out:
        out.append(n)
with open("/flux/out/out.json", "w") as fh:
    json.dump(out, fh)
"#;

/// `flux_hook.static_facts` (stdlib only), run as a module of its own in the image.
const STATIC_FACTS: &str = include_str!("../../flux-hook/flux_hook/static_facts.py");

/// argv: FILE... → out.json: `flux_hook.static_facts` of the files.
const FACTS_SCRIPT: &str = r#"
import json, sys
import static_facts
out = {"version": 1, "files": {}, "errors": {}}
for p in sys.argv[1:]:
    try:
        out["files"][p] = static_facts.facts_for_file(p)
    except (OSError, SyntaxError, ValueError) as e:
        out["errors"][p] = "%s: %s" % (type(e).__name__, e)
with open("/flux/out/out.json", "w") as fh:
    json.dump(out, fh, separators=(",", ":"))
"#;

/// Why a run's trace cannot give gold answers (a timeout, a kill, an incomplete trace).
pub(crate) fn run_problem(run: &flux_harvest::TracedRun) -> Option<String> {
    if run.timed_out.is_some() {
        return Some("timed out".into());
    }
    // The event budget stops the program with SIGKILL: name the budget, not the signal (a
    // scout stopped at `budget.scout_events` read "killed: signal 9", like an OOM kill).
    let m = &run.trace.meta;
    if let Some(p) = m
        .problems
        .iter()
        .find(|p| p.starts_with(flux_harvest::BUDGET_PROBLEM))
    {
        return Some(p.clone());
    }
    if let Some(k) = &run.killed {
        return Some(format!("killed: {k}"));
    }
    if !m.complete || m.lost_events > 0 {
        return Some(format!(
            "incomplete trace ({} lost{}{})",
            m.lost_events,
            if m.problems.is_empty() { "" } else { ": " },
            m.problems.join("; ")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that exited 0 with an empty trace, for the tests to change.
    fn stopped_run() -> flux_harvest::TracedRun {
        flux_harvest::TracedRun {
            trace: flux_trace::Trace::default(),
            run_dir: PathBuf::new(),
            exit_code: 0,
            timed_out: None,
            killed: None,
            stdout: vec![],
            stderr: vec![],
            stdout_truncated: false,
            stderr_truncated: false,
            image_id: String::new(),
            image_identity: String::new(),
            interpreter_version: String::new(),
            labels: vec![],
            program_seconds: 0.0,
            whole_sha256: None,
        }
    }

    /// The shard test's occasional failure: a run on a busy machine lost events (the ring
    /// buffer full), its module was refused, and the regeneration differed. Such a run is made
    /// again; a timed-out or killed one (the test's) and a complete one are not.
    #[test]
    fn a_run_that_lost_events_to_load_is_made_again() {
        let run = |lost: u64, timed_out: bool| {
            let mut r = stopped_run();
            r.trace.meta.lost_events = lost;
            r.timed_out = timed_out.then(|| Duration::from_secs(1));
            r
        };
        assert_eq!(lost_to_load(&run(11_307, false)), Some(11_307));
        assert_eq!(lost_to_load(&run(0, false)), None);
        assert_eq!(lost_to_load(&run(5, true)), None);
    }

    /// A scout stopped by the event budget read "killed: signal 9" (found generating
    /// flux-gen-v2's trial): the budget's own problem is named first.
    #[test]
    fn a_run_stopped_by_the_event_budget_says_so_not_killed() {
        let mut run = stopped_run();
        run.killed = Some("signal 9".into());
        run.trace.meta.problems = vec![format!(
            "{}: the program made more than 3000000 USDT events",
            flux_harvest::BUDGET_PROBLEM
        )];
        let why = run_problem(&run).unwrap();
        assert!(why.starts_with(flux_harvest::BUDGET_PROBLEM), "{why}");
        run.trace.meta.problems.clear();
        assert_eq!(run_problem(&run).as_deref(), Some("killed: signal 9"));
    }

    /// A select glob over `tests/` beside `src/` listed nothing before: only the code's and the
    /// listed modules' directories were read.
    #[test]
    fn select_glob_outside_the_code_is_listed() {
        let text = crate::spec::tests::GOOD.replace(
            "split = \"test\"",
            "split = \"test\"\nselect = { glob = \"tests/test_*.py\", count = 2 }",
        );
        let spec = crate::spec::parse(&text, std::path::Path::new("gen.toml")).unwrap();
        let dirs = list_dirs(&spec.repositories[0]);
        assert!(dirs.contains(&"tests/".to_string()), "{dirs:?}");
        assert!(dirs.contains(&"sympy/".to_string()), "{dirs:?}");
    }
}
