//! `flux import swe-flux SRC... --repository NAME --image IMAGE --out DIR`: instances in
//! SWE-Flux's layout become flux instances (flux_interop::import).
use anyhow::Result;
use flux_interop::import::{self, ImportOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// SWE-Flux's instance directories: eval.sh, files/testcase.py, files/parser.py, oracle.json.
    SweFlux,
}

#[derive(clap::Args)]
pub struct Args {
    /// The layout of the sources.
    #[arg(value_enum)]
    format: Format,
    /// Instance directories in that layout, or directories holding them (searched).
    #[arg(required = true)]
    sources: Vec<PathBuf>,
    /// The flux repository the instances belong to (`<out>/<repository>/<id>/`).
    #[arg(long)]
    repository: String,
    /// The image their test runs in: the repository's source at their root (`/testbed`).
    #[arg(long)]
    image: String,
    /// The instance root to write into.
    #[arg(long)]
    out: PathBuf,
    /// The interpreter in the image.
    #[arg(long, default_value = "/usr/bin/python3.11")]
    interpreter: String,
    /// `name==version` of the package under test (default: from the image's tag).
    #[arg(long)]
    package: Option<String>,
    /// Replace instance directories that exist.
    #[arg(long)]
    replace: bool,
    /// The test's timeout in seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    cache: crate::cache::CacheArg,
}

/// The image's `pip freeze`, from its manifest: the cache's file, else the image's
/// `flux.manifest` label (Docker); `None` (with a warning) when neither can be read.
fn image_packages(image: &str, cache: &std::path::Path) -> Option<Vec<String>> {
    let path = flux_container::images::manifest_path(cache, image);
    if let Ok(m) = flux_container::images::Manifest::load(&path) {
        return Some(m.pip_freeze);
    }
    let labelled = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
        .and_then(|rt| {
            rt.block_on(async {
                let docker = flux_container::Runtime::connect().await.ok()?;
                flux_container::images::image_manifest(&docker, image)
                    .await
                    .ok()
                    .flatten()
            })
        });
    if labelled.is_none() {
        eprintln!(
            "flux: warning: no manifest of image {image} (neither {} nor its label): the \
             imported commands pass no pytest plugin's option",
            path.display()
        );
    }
    labelled.map(|m| m.pip_freeze)
}

/// Exit 0 when every source was imported, 1 when some could not be (each named, with why).
pub fn run(a: Args) -> Result<ExitCode> {
    let Format::SweFlux = a.format;
    let sources = import::discover(&a.sources).map_err(anyhow::Error::msg)?;
    if sources.is_empty() {
        anyhow::bail!(
            "no SWE-Flux instance (a directory with eval.sh and files/) under the sources"
        );
    }
    let image_packages = image_packages(&a.image, &a.cache.dir());
    let opts = ImportOptions {
        image_packages,
        repository: a.repository,
        image: a.image,
        interpreter: a.interpreter,
        package: a.package,
        out: a.out.clone(),
        replace: a.replace,
        timeout_s: a.timeout,
    };
    let report = import::import(&sources, &opts);
    for i in &report.imported {
        match &i.dir {
            Ok(d) => println!(
                "imported {} ({}) -> {}",
                i.source.display(),
                i.kind,
                d.display()
            ),
            Err(why) => println!(
                "imported {} ({}) without their parser: {why}",
                i.source.display(),
                i.kind
            ),
        }
        match &i.native {
            Ok(d) => println!("  native: {}", d.display()),
            Err(why) => println!("  no native instance: {why}"),
        }
    }
    for (src, why) in &report.errors {
        eprintln!("flux: error: {}: {why}", src.display());
    }
    println!(
        "{} instance(s) imported into {}, {} error(s); gold answers: `flux harvest` them",
        report.imported.len(),
        a.out.display(),
        report.errors.len()
    );
    Ok(if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
