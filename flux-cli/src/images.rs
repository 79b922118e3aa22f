//! `flux images build|source|list|test`: the reproducible images of `images.toml` (flux-container's
//! builder, the same functions `cargo xtask images` drives), their manifests in
//! `<cache>/images/*.json` and the runs of their repositories' own test suites.
//!
//! The definitions are `--images-toml PATH`, else the nearest `images/images.toml` at or above
//! the current directory, else the copy compiled into this binary — so `flux images build
//! sympy` works outside a checkout. The cache is `--cache` as for every command.
use anyhow::{Context, Result};
use flux_container::images::{self, suite, Action, BuildConfig, Definitions, Manifest, Target};
use flux_container::Runtime;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Build images (incremental: up-to-date images are skipped). Each repository image holds
    /// its package's source at /testbed (imported from there) and the same tree is unpacked
    /// into <cache>/src/<package>-<version>/, where `flux eval` finds it.
    Build(BuildArgs),
    /// Fetch and unpack repositories' package sources into <cache>/src/<package>-<version>/
    /// (what `flux eval` shows models: the code and the tests its questions name) without
    /// building their images: no Docker, only the host's Python and the package index.
    Source(SourceArgs),
    /// List the defined images: built or not, content identity, source layout, test results.
    List(Common),
    /// Run repositories' own test suites in their images, offline; write
    /// <cache>/images/<image>.tests.json and print how many test modules collect and pass.
    Test(TestArgs),
    /// Resolve requirements (any specifiers) into the `==` pins a `[[repo]]` stanza wants, as
    /// the builder would download them (wheels only, CPython on x86-64 Linux).
    Pin(PinArgs),
    /// Save built images into a directory as `docker save` archives keyed by their content
    /// identity (`<identity>.tar`, its manifest, `index.json` with sizes and sha256), for
    /// other machines to `load` instead of building.
    Save(SaveArgs),
    /// Load the images a `save` wrote: archives checked against the index (size, sha256,
    /// identity) before Docker sees them, Docker's image id checked after; their manifests go
    /// to the cache, so the images count as built here.
    Load(LoadArgs),
}

#[derive(clap::Args)]
struct SaveArgs {
    #[command(flatten)]
    common: Common,
    /// The directory to write (created; archives already there are kept, one of the same
    /// identity is not written again).
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    /// Images as `build` names them (a repository's image alone: its archive holds its base's
    /// layers too; a base when named). None: every defined image built here.
    names: Vec<String>,
}

#[derive(clap::Args)]
struct LoadArgs {
    #[command(flatten)]
    common: Common,
    /// A directory `flux images save` wrote.
    dir: PathBuf,
}

#[derive(clap::Args)]
struct PinArgs {
    #[command(flatten)]
    common: Common,
    /// The image's Python (`X.Y`).
    #[arg(long, default_value = "3.11")]
    python: String,
    /// The package at its version first, then its test dependencies: `flask==3.1.3 pytest
    /// asgiref`.
    #[arg(required = true)]
    requirements: Vec<String>,
}

#[derive(clap::Args)]
struct Common {
    /// Image definitions (default: the nearest images/images.toml, else the built-in copy).
    #[arg(long = "images-toml", alias = "definitions", value_name = "PATH")]
    images_toml: Option<PathBuf>,
    /// Manifests go to <cache>/images/, wheelhouses to <cache>/wheelhouse/, package sources to
    /// <cache>/src/.
    #[command(flatten)]
    cache: crate::cache::CacheArg,
}

#[derive(clap::Args)]
struct BuildArgs {
    #[command(flatten)]
    common: Common,
    /// Rebuild even if an image's manifest matches its definition (the rootfs cache is reused).
    #[arg(long)]
    rebuild: bool,
    /// Images to build: a repo name (`sympy`), a group (`swe-flux`), a base name
    /// (`py3.13-trixie`) or a full reference (`flux/sympy:1.13.3-py3.11`). None: the default
    /// bases and repos.
    names: Vec<String>,
}

#[derive(clap::Args)]
struct SourceArgs {
    #[command(flatten)]
    common: Common,
    /// Repositories as `build` names them: a repo (`attrs`), a group (`gen`) or an image
    /// reference (`flux/attrs:26.1.0-py3.11`).
    #[arg(required = true)]
    names: Vec<String>,
}

#[derive(clap::Args)]
struct TestArgs {
    #[command(flatten)]
    common: Common,
    /// Repositories (names, groups or image references) whose suites to run; they must be
    /// built.
    #[arg(required = true)]
    names: Vec<String>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.cmd {
        Cmd::Build(b) => build(b),
        Cmd::Source(s) => source(&s),
        Cmd::List(l) => list(&l),
        Cmd::Test(t) => test(t),
        Cmd::Pin(p) => pin(p),
        Cmd::Save(s) => save(s),
        Cmd::Load(l) => load(l),
    }
}

fn save(a: SaveArgs) -> Result<ExitCode> {
    let (defs, config) = setup(&a.common, false)?;
    let names: Vec<String> = if a.names.is_empty() {
        // Every defined image this cache has a manifest of.
        defs.all()
            .iter()
            .map(Target::image)
            .filter(|i| images::manifest_path(&config.cache_dir, i).is_file())
            .collect()
    } else {
        // A repository's image alone (its archive holds every layer, its base's too: a node
        // runs tests without the base); a base only when it is named itself.
        let mut names = Vec::new();
        for n in &a.names {
            let targets = defs.select(std::slice::from_ref(n), &config.definitions)?;
            let a_base = targets.iter().all(|t| matches!(t, Target::Base(_)));
            for t in targets {
                let image = t.image();
                if (a_base || !matches!(t, Target::Base(_))) && !names.contains(&image) {
                    names.push(image);
                }
            }
        }
        names
    };
    if names.is_empty() {
        anyhow::bail!(
            "no built image to save (no manifest in {}): `flux images build` first",
            config.cache_dir.join("images").display()
        );
    }
    let moved = tokio()?.block_on(async {
        let runtime = Runtime::connect().await?;
        images::archive::save(&runtime, &config.cache_dir, &names, &a.to, &mut |l| {
            eprintln!("  .. {l}")
        })
        .await
    })?;
    print_moved("saved", &moved);
    Ok(ExitCode::SUCCESS)
}

fn load(a: LoadArgs) -> Result<ExitCode> {
    let (_, config) = setup(&a.common, false)?;
    let moved = tokio()?.block_on(async {
        let runtime = Runtime::connect().await?;
        images::archive::load(&runtime, &config.cache_dir, &a.dir, &mut |l| {
            eprintln!("  .. {l}")
        })
        .await
    })?;
    print_moved("loaded", &moved);
    Ok(ExitCode::SUCCESS)
}

fn print_moved(verb: &str, moved: &[images::archive::Moved]) {
    for m in moved {
        println!(
            "{} {}  {}  {:.1} MB",
            if m.skipped { "present" } else { verb },
            m.image,
            m.identity,
            m.bytes as f64 / 1e6
        );
    }
}

fn setup(c: &Common, rebuild: bool) -> Result<(Definitions, BuildConfig)> {
    let cwd = std::env::current_dir().context("the current directory")?;
    let (defs, path) = Definitions::find(c.images_toml.as_deref(), &cwd)?;
    let config = BuildConfig {
        definitions: path,
        cache_dir: c.cache.dir(),
        rebuild,
    };
    Ok((defs, config))
}

fn tokio() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")
}

fn build(a: BuildArgs) -> Result<ExitCode> {
    let (defs, config) = setup(&a.common, a.rebuild)?;
    eprintln!(
        "flux images: definitions {}, cache {}",
        config.definitions.display(),
        config.cache_dir.display()
    );
    let results = tokio()?.block_on(async {
        let runtime = Runtime::connect().await?;
        images::build_with(&runtime, &config, &defs, &a.names, &mut |line| {
            eprintln!("  .. {line}")
        })
        .await
    })?;
    let mut failed = 0;
    for (image, result) in &results {
        match result {
            Ok(r) => {
                let verb = match r.action {
                    Action::Built => "built  ",
                    Action::Skipped => "skipped",
                };
                let source = r
                    .manifest
                    .source
                    .as_ref()
                    .map(|s| {
                        format!(
                            ", source {} (also {})",
                            s.import_root,
                            config.cache_dir.join(&s.cache_tree).display()
                        )
                    })
                    .unwrap_or_default();
                println!(
                    "{verb} {image} ({}, python {}{source}) in {:.1}s; manifest {}",
                    short(&r.manifest.identity),
                    r.manifest.interpreter.version,
                    r.seconds,
                    r.manifest_path.display()
                );
            }
            Err(e) => {
                failed += 1;
                println!("FAILED  {image}: {e}");
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn source(a: &SourceArgs) -> Result<ExitCode> {
    let (defs, config) = setup(&a.common, false)?;
    let trees = images::fetch_sources(&config, &defs, &a.names, &mut |line| {
        eprintln!("  .. {line}")
    })?;
    if trees.is_empty() {
        anyhow::bail!(
            "{} name(s) no repository image with a package source (bases and JVM images have none)",
            a.names.join(" ")
        );
    }
    for (image, tree) in trees {
        println!("{image}: {}", tree.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn test(a: TestArgs) -> Result<ExitCode> {
    let (defs, config) = setup(&a.common, false)?;
    let targets = defs.select(&a.names, &config.definitions)?;
    let mut failed = 0;
    tokio()?.block_on(async {
        let runtime = Runtime::connect().await?;
        for t in &targets {
            let mut progress = |l: &str| eprintln!("  .. {l}");
            let run = match t {
                Target::Repo(r, b) => suite::run(&runtime, &config, r, b, &mut progress).await,
                Target::Java(j, b) => suite::run_java(&runtime, &config, j, b, &mut progress).await,
                Target::Base(_) => continue,
            };
            match run {
                Ok((rep, path)) => println!(
                    "{}: {} test modules collect, {} pass ({} fail to collect); tests: {} \
                     collected, {} passed, {} failed, {} errors, {} skipped, {} not run{} in \
                     {:.0}s; {}",
                    rep.image,
                    rep.modules_collected,
                    rep.modules_passing,
                    rep.modules_collect_errors,
                    rep.tests_collected,
                    rep.tests_passed,
                    rep.tests_failed,
                    rep.tests_errors,
                    rep.tests_skipped,
                    rep.tests_not_run,
                    if rep.timed_out { " (deadline hit)" } else { "" },
                    rep.seconds,
                    path.display()
                ),
                Err(e) => {
                    failed += 1;
                    println!("FAILED  {}: {e}", t.image());
                }
            }
        }
        anyhow::Ok(())
    })?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn pin(a: PinArgs) -> Result<ExitCode> {
    let (defs, config) = setup(&a.common, false)?;
    let name_of = |r: &str| {
        r.split(['=', '<', '>', '!', '~', '[', ' ', ';'])
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
            .replace('_', "-")
    };
    let mut reqs = a.requirements.clone();
    if !reqs.iter().any(|r| name_of(r) == "pip") {
        reqs.push("pip".into());
    }
    std::fs::create_dir_all(&config.cache_dir)
        .with_context(|| format!("creating {}", config.cache_dir.display()))?;
    let pins = images::resolve_pins(&defs.settings, &config.cache_dir, &a.python, &reqs)?;
    let (pip, others): (Vec<String>, Vec<String>) =
        pins.into_iter().partition(|p| p.starts_with("pip=="));
    let first = name_of(&a.requirements[0]);
    let (mut head, rest): (Vec<String>, Vec<String>) = others
        .into_iter()
        .partition(|p| p.split("==").next() == Some(first.as_str()));
    head.extend(rest);
    println!("requirements = [");
    for p in &head {
        println!("    \"{p}\",");
    }
    println!("]");
    if let Some(p) = pip.first() {
        println!("pip = \"{p}\"");
    }
    Ok(ExitCode::SUCCESS)
}

/// `flux-id:0123456789ab…` → `0123456789ab`; `-` when empty.
fn short(id: &str) -> String {
    let hex = id
        .trim_start_matches("flux-id:")
        .trim_start_matches("sha256:");
    if hex.is_empty() {
        "-".into()
    } else {
        hex.get(..12).unwrap_or(hex).to_owned()
    }
}

/// One line per defined image (and per manifest of an image no longer defined); unreadable
/// manifests are reported and make the exit code 1.
fn list(c: &Common) -> Result<ExitCode> {
    let (defs, config) = setup(c, false)?;
    let dir = config.cache_dir.join("images");
    let mut bad = 0;
    let mut rows = Vec::new();
    let mut listed = Vec::new();
    let row = |image: &str, kind: &str, select: String, m: Option<&Manifest>| {
        let tests = m
            .and_then(|m| suite::load_report(&config.cache_dir, &m.image).map(|r| (r, m)))
            .map(|(r, m)| {
                let stale = if suite::report_is_current(&r, m) {
                    ""
                } else {
                    " (stale)"
                };
                format!(
                    "{}/{} modules pass{stale}",
                    r.modules_passing, r.modules_collected
                )
            })
            .unwrap_or_else(|| "-".into());
        [
            image.to_owned(),
            kind.to_owned(),
            select,
            m.map(|m| {
                if m.identity.is_empty() {
                    format!("none (schema {})", m.schema)
                } else {
                    short(&m.identity)
                }
            })
            .unwrap_or_else(|| "not built".into()),
            m.map(|m| m.interpreter.version.clone())
                .unwrap_or_else(|| "-".into()),
            m.and_then(|m| m.source.as_ref())
                .map(|s| s.import_root.clone())
                .unwrap_or_else(|| "-".into()),
            tests,
        ]
    };
    let mut load = |image: &str| -> Option<Manifest> {
        let p = images::manifest_path(&config.cache_dir, image);
        if !p.exists() {
            return None;
        }
        match Manifest::load(&p) {
            Ok(m) => Some(m),
            Err(e) => {
                bad += 1;
                eprintln!("flux: {}: {e}", p.display());
                None
            }
        }
    };
    for t in defs.all() {
        let image = t.image();
        let (kind, select) = match &t {
            Target::Base(b) => (
                "base",
                if b.default { "default" } else { "on demand" }.to_owned(),
            ),
            Target::Repo(r, _) => (
                "repo",
                match (r.default, r.groups.is_empty()) {
                    (true, _) => "default".to_owned(),
                    (false, true) => "on demand".to_owned(),
                    (false, false) => format!("on demand: {}", r.groups.join(",")),
                },
            ),
            Target::Java(j, _) => (
                "java",
                match (j.default, j.groups.is_empty()) {
                    (true, _) => "default".to_owned(),
                    (false, true) => "on demand".to_owned(),
                    (false, false) => format!("on demand: {}", j.groups.join(",")),
                },
            ),
        };
        let m = load(&image);
        rows.push(row(&image, kind, select, m.as_ref()));
        listed.push(images::manifest_path(&config.cache_dir, &image));
    }
    let mut others: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_manifest(p) && !listed.contains(p))
            .collect(),
        Err(_) => Vec::new(),
    };
    others.sort();
    for p in others {
        match Manifest::load(&p) {
            Ok(m) => rows.push(row(&m.image, &m.kind, "not defined".into(), Some(&m))),
            Err(e) => {
                bad += 1;
                eprintln!("flux: {}: {e}", p.display());
            }
        }
    }
    println!(
        "definitions {}, cache {}",
        config.definitions.display(),
        config.cache_dir.display()
    );
    let header = [
        "IMAGE", "KIND", "BUILT BY", "IDENTITY", "PYTHON", "SOURCE", "TESTS",
    ]
    .map(String::from);
    let mut width = [0usize; 7];
    for r in std::iter::once(&header).chain(&rows) {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    for r in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = r
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `<cache>/images/<image>.json`, not a suite report (`*.tests.json`).
fn is_manifest(p: &Path) -> bool {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
    name.is_some_and(|n| n.ends_with(".json") && !n.ends_with(".tests.json")) && p.is_file()
}
