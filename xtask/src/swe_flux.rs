//! `cargo xtask swe-flux-validate DIR`: flux against SWE-Flux's own instances.
//!
//! DIR holds copies of instances of SWE-Flux's public store (read with the search tools; they
//! are third-party files and never enter this repository) and a `repos.toml` saying how to
//! make each repository's image:
//!
//! ```toml
//! [jinja]
//! mirror = "/work/.mirror/pallets+jinja/repo"   # a git directory with their commit
//! commit = "5ef7011"                            # the commit their image's /testbed holds
//! requirements = ["MarkupSafe", "pytest", "flit_core"]  # wheels from PyPI (runtime, tests, build backend)
//! ```
//!
//! and `DIR/<repository>/<instance id>/` in their layout (`eval.sh`, `files/`, `oracle.json`).
//!
//! For each repository: its image `flux/swe-flux-<repository>:<commit>-py3.11` is built when
//! missing (the source at their commit in `/testbed`, installed editable so that code runs from
//! `/testbed`, as in theirs, and writable by the test's user as theirs is by root, for pytest's
//! cache; the requirements' wheels installed offline; on flux's Debian bookworm python3.11
//! base). Then every instance is imported (`flux import swe-flux`) into a scratch instance root
//! and checked (`flux harvest --check`: the test traced by flux, their parser on flux's log in
//! the container, the answer against their stored one under their scoring rules). The report says per instance: equal, or why not; and the figures (overall,
//! per repository, per kind). `--json FILE` keeps the report.
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[derive(clap::Args)]
pub struct Args {
    /// The directory of SWE-Flux instances and its repos.toml.
    dir: PathBuf,
    /// Only these repositories (comma-separated).
    #[arg(long)]
    repos: Option<String>,
    /// Only instances whose id contains one of these (comma-separated).
    #[arg(long)]
    only: Option<String>,
    /// Where scratch instances, runs and image build contexts go.
    #[arg(long, default_value = "/tmp/flux-swe-flux-validate")]
    work: PathBuf,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Rebuild the images even if they exist.
    #[arg(long)]
    rebuild: bool,
    /// The flux binary to use (default: build the release one).
    #[arg(long)]
    flux: Option<PathBuf>,
}

#[derive(Clone, Debug)]
struct Repo {
    name: String,
    mirror: PathBuf,
    commit: String,
    requirements: Vec<String>,
}

fn read_repos(dir: &Path) -> Result<Vec<Repo>> {
    let path = dir.join("repos.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let v: toml::Table = toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for (name, t) in v {
        let s = |k: &str| -> Result<String> {
            t.get(k)
                .and_then(|x| x.as_str())
                .map(str::to_string)
                .with_context(|| format!("{}: [{name}] needs `{k}`", path.display()))
        };
        let requirements = t
            .get("requirements")
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Repo {
            mirror: PathBuf::from(s("mirror")?),
            commit: s("commit")?,
            requirements,
            name,
        });
    }
    Ok(out)
}

fn image_of(r: &Repo) -> String {
    format!(
        "flux/swe-flux-{}:{}-py3.11",
        r.name.replace('_', "-"),
        r.commit
    )
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let st = cmd.status().with_context(|| format!("running {what}"))?;
    if !st.success() {
        bail!("{what} failed ({st})");
    }
    Ok(())
}

fn image_exists(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", image])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The image of a repository: their commit's source at /testbed, installed editable.
fn build_image(r: &Repo, work: &Path, rebuild: bool) -> Result<String> {
    let image = image_of(r);
    if image_exists(&image) && !rebuild {
        return Ok(image);
    }
    const BASE: &str = "flux/base:py3.11-bookworm";
    if !image_exists(BASE) {
        bail!("the base image {BASE} is missing (cargo xtask images)");
    }
    let ctx = work.join("images").join(&r.name);
    let _ = std::fs::remove_dir_all(&ctx);
    let testbed = ctx.join("testbed");
    let wheels = ctx.join("wheels");
    std::fs::create_dir_all(&testbed)?;
    std::fs::create_dir_all(&wheels)?;
    eprintln!(
        "xtask: {}: source at {} from {}",
        r.name,
        r.commit,
        r.mirror.display()
    );
    let archive = Command::new("git")
        .arg("--git-dir")
        .arg(&r.mirror)
        .args(["archive", "--format=tar", &r.commit])
        .output()
        .context("git archive")?;
    if !archive.status.success() {
        bail!(
            "git archive {} of {}: {}",
            r.commit,
            r.mirror.display(),
            String::from_utf8_lossy(&archive.stderr)
        );
    }
    let mut tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&testbed)
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    {
        use std::io::Write;
        tar.stdin
            .take()
            .expect("piped")
            .write_all(&archive.stdout)?;
    }
    if !tar.wait()?.success() {
        bail!("unpacking the source of {}", r.name);
    }
    eprintln!("xtask: {}: wheels ({})", r.name, r.requirements.join(" "));
    let mut pip =
        Command::new(std::env::var("FLUX_HOST_PYTHON").unwrap_or_else(|_| "python3".into()));
    pip.args([
        "-m",
        "pip",
        "download",
        "--quiet",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--dest",
    ])
    .arg(&wheels)
    .args(["pip==25.3", "pytest"])
    .args(&r.requirements);
    run(&mut pip, "pip download")?;
    let pipwhl = std::fs::read_dir(&wheels)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("pip-") && n.ends_with(".whl"))
        .context("no pip wheel was downloaded")?;
    let reqs: Vec<String> = std::iter::once("pytest".to_string())
        .chain(r.requirements.iter().cloned())
        .map(|q| format!("'{}'", q.replace('\'', "")))
        .collect();
    let pip_in = format!("/usr/bin/python3.11 /tmp/wheels/{pipwhl}/pip");
    let docker = format!(
        "FROM {BASE}\n\
         COPY wheels /tmp/wheels\n\
         COPY testbed /testbed\n\
         RUN {pip_in} install --quiet --no-index --find-links /tmp/wheels --break-system-packages --root-user-action=ignore {reqs} \\\n \
         && {pip_in} install --quiet --no-index --find-links /tmp/wheels --no-deps --no-build-isolation --break-system-packages --root-user-action=ignore -e /testbed \\\n \
         && rm -rf /tmp/wheels && chmod -R a+rX /testbed && chown -R 1000:1000 /testbed\n\
         LABEL flux.swe-flux.commit=\"{commit}\"\n",
        reqs = reqs.join(" "),
        commit = r.commit,
    );
    std::fs::write(ctx.join("Dockerfile"), docker)?;
    eprintln!("xtask: {}: docker build -t {image}", r.name);
    run(
        Command::new("docker")
            .args(["build", "--quiet", "--network", "none", "-t", &image])
            .arg(&ctx),
        "docker build",
    )?;
    let _ = std::fs::remove_dir_all(&ctx);
    Ok(image)
}

#[derive(Clone, Debug, serde::Serialize)]
struct Row {
    repository: String,
    instance: String,
    kind: String,
    /// `equal`, `differs`, `error`.
    import: String,
    /// Why, when not equal.
    why: String,
    /// Native: not yet expressible by flux's extractors here.
    native: String,
}

fn kind_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("oracle.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["question_kind"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The first useful line of a failure's message.
fn reason(stderr: &str) -> (String, String) {
    let text = stderr.trim();
    let verdict = if text.contains("not SWE-Flux's stored answer") {
        "differs"
    } else {
        "error"
    };
    let why: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("flux: 1 instance"))
        .take(6)
        .collect();
    (verdict.into(), why.join(" / ").chars().take(600).collect())
}

pub fn run_validate(a: Args) -> Result<ExitCode> {
    let repos = read_repos(&a.dir)?;
    let wanted: Option<Vec<String>> = a
        .repos
        .as_ref()
        .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    let flux = match &a.flux {
        Some(f) => f.clone(),
        None => crate::build_flux_release()?,
    };
    std::fs::create_dir_all(&a.work)?;
    let mut rows = Vec::new();
    for r in repos
        .iter()
        .filter(|r| wanted.as_ref().is_none_or(|w| w.contains(&r.name)))
    {
        let src = a.dir.join(&r.name);
        let mut ids: Vec<PathBuf> = std::fs::read_dir(&src)
            .with_context(|| format!("{}", src.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("eval.sh").is_file())
            .filter(|p| {
                a.only.as_ref().is_none_or(|o| {
                    let id = p.file_name().unwrap().to_string_lossy().into_owned();
                    o.split(',').any(|x| id.contains(x.trim()))
                })
            })
            .collect();
        ids.sort();
        if ids.is_empty() {
            continue;
        }
        let image = match build_image(r, &a.work, a.rebuild) {
            Ok(i) => i,
            Err(e) => {
                for d in &ids {
                    rows.push(Row {
                        repository: r.name.clone(),
                        instance: d.file_name().unwrap().to_string_lossy().into(),
                        kind: kind_of(d),
                        import: "error".into(),
                        why: format!("image: {e:#}"),
                        native: "-".into(),
                    });
                }
                continue;
            }
        };
        let out = a.work.join("instances");
        for d in &ids {
            let id = d.file_name().unwrap().to_string_lossy().into_owned();
            let kind = kind_of(d);
            let imported = Command::new(&flux)
                .args(["import", "swe-flux"])
                .arg(d)
                .args([
                    "--repository",
                    &r.name,
                    "--image",
                    &image,
                    "--replace",
                    "--out",
                ])
                .arg(&out)
                .output()?;
            let (import, why) = if !imported.status.success() {
                (
                    "error".to_string(),
                    format!(
                        "import: {}",
                        String::from_utf8_lossy(&imported.stderr).trim()
                    ),
                )
            } else {
                let checked = Command::new(&flux)
                    .args(["harvest", "--check", "--cache"])
                    .arg(a.work.join("cache"))
                    .arg(out.join(&r.name).join(&id))
                    .output()?;
                if checked.status.success() {
                    ("equal".to_string(), String::new())
                } else {
                    reason(&String::from_utf8_lossy(&checked.stderr))
                }
            };
            eprintln!("xtask: {}/{id} ({kind}): {import} {why}", r.name);
            rows.push(Row {
                repository: r.name.clone(),
                instance: id,
                kind,
                import,
                why,
                native: "no native mapping in this build".into(),
            });
        }
    }
    print_report(&rows);
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&rows)? + "\n")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(rows: &[Row]) {
    println!("| repository | instance | kind | import | why not |");
    println!("|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.repository,
            r.instance,
            r.kind,
            r.import,
            r.why.replace('|', "\\|")
        );
    }
    let pct = |n: usize, d: usize| {
        if d == 0 {
            0.0
        } else {
            100.0 * n as f64 / d as f64
        }
    };
    let mut by: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    for r in rows {
        let eq = usize::from(r.import == "equal");
        for key in [
            ("all".to_string(), String::new()),
            ("repository".into(), r.repository.clone()),
            ("kind".into(), r.kind.clone()),
        ] {
            let e = by.entry(key).or_default();
            e.0 += eq;
            e.1 += 1;
        }
    }
    println!();
    for ((what, name), (eq, n)) in &by {
        println!(
            "import equal, {what} {name}: {eq}/{n} ({:.1} %)",
            pct(*eq, *n)
        );
    }
}
