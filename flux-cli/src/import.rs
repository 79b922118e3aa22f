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
    let opts = ImportOptions {
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
        println!(
            "imported {} ({}) -> {}",
            i.source.display(),
            i.kind,
            i.dir.display()
        );
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
