//! `cargo xtask images [--rebuild] [NAME…]`: builds the images of `images/images.toml` through
//! `flux_container::images::build` (what `flux images build` runs too), printing what was built
//! or skipped, each image's content identity and its manifest's path.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use flux_container::images::{self, Action, BuildConfig};
use flux_container::Runtime;

#[derive(clap::Args)]
pub struct Args {
    /// Rebuild even if an image's manifest matches its definition (the rootfs cache is reused).
    #[arg(long)]
    rebuild: bool,
    /// Image definitions (default: <workspace>/images/images.toml).
    #[arg(long)]
    definitions: Option<PathBuf>,
    /// Images to build: a repo name (`sympy`), a base name (`py3.13-trixie`) or a full reference
    /// (`flux/base:py3.15-sid`) or a group (`swe-flux`). None: the default bases and repos.
    names: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = crate::workspace_root();
    let config = BuildConfig {
        definitions: args
            .definitions
            .unwrap_or_else(|| root.join("images/images.toml")),
        cache_dir: root.join(".flux-cache"),
        rebuild: args.rebuild,
    };
    let rt = tokio::runtime::Runtime::new().context("start tokio")?;
    let results = rt.block_on(async {
        let runtime = Runtime::connect().await?;
        images::build(&runtime, &config, &args.names, &mut |line| {
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
                let id = r.manifest.identity.trim_start_matches("flux-id:");
                let short = id.get(..12).unwrap_or(id);
                println!(
                    "{verb} {image} ({short}, python {}) in {:.1}s; manifest {}",
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

/// Build what the tests and the harvest use: the default bases and repository images,
/// then the hook-only bases (3.13, 3.14) the witness tests run on, the Java group (the JDK
/// base and the Java projects the JVM tests run), then the package source
/// trees of the committed sets' repositories (no image: their prompts show their tests' code).
pub fn build_default() -> anyhow::Result<()> {
    for names in [
        vec![],
        vec!["py3.13-trixie".to_string(), "py3.14-sid".to_string()],
        // The JDK base and the Java projects (issue 27): the JVM tests' fixture is one test
        // class of commons-codec, and the fixture instance runs in the base.
        vec!["java".to_string()],
    ] {
        let code = run(Args {
            rebuild: false,
            definitions: None,
            names,
        })?;
        if code != ExitCode::SUCCESS {
            anyhow::bail!("building images failed (see above)");
        }
    }
    fetch_sources(&committed_set_repositories()?)
}

/// The repositories of the committed sets (`sets/*/instances/<repository>/`): their prompts
/// show their tests' code from these trees.
fn committed_set_repositories() -> anyhow::Result<Vec<String>> {
    let mut repos = std::collections::BTreeSet::new();
    let sets = crate::workspace_root().join("sets");
    for set in std::fs::read_dir(&sets).with_context(|| format!("{}", sets.display()))? {
        let Ok(rd) = std::fs::read_dir(set?.path().join("instances")) else {
            continue;
        };
        for repo in rd.flatten().filter(|e| e.path().is_dir()) {
            repos.insert(repo.file_name().to_string_lossy().into_owned());
        }
    }
    Ok(repos.into_iter().collect())
}

/// Fetch and unpack the package sources of `names` into `<workspace>/.flux-cache/src/` (what
/// `flux images source` does; sdists from PyPI, nothing built).
fn fetch_sources(names: &[String]) -> anyhow::Result<()> {
    let root = crate::workspace_root();
    let config = BuildConfig {
        definitions: root.join("images/images.toml"),
        cache_dir: root.join(".flux-cache"),
        rebuild: false,
    };
    let defs = images::Definitions::load(&config.definitions)?;
    let trees = images::fetch_sources(&config, &defs, names, &mut |line| eprintln!("  .. {line}"))?;
    for (image, tree) in trees {
        println!("source  {image}: {}", tree.display());
    }
    Ok(())
}
