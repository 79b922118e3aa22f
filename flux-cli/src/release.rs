//! `flux gen SET --release NAME=VERSION [--released DATE] [--image IMAGE]`: regenerate one
//! repository of a set for a new release (issue 26.4; `flux_gen::release` holds the logic).
//!
//! Before anything runs: the new release's date (PyPI's upload time of its sdist, or
//! `--released`), the new `gen.toml` (pin, image, `release = {…}` naming the previous release
//! and its image), checked. Then the current release's instances are archived as
//! `<id>@<old version>` (and its module results as `modules/<repo>@<old version>/`), `gen.toml`
//! is written and the set generated with `--resume` (the other repositories' module results
//! are kept). A failed generation puts `gen.toml` and the archived instances back as they were;
//! a successful one dates the archived instances with the old release's date (gen.toml's, else
//! PyPI's).
use anyhow::{bail, Context, Result};
use flux_gen::release::{self, Archived};
use flux_gen::spec::RepoRelease;
use std::path::{Path, PathBuf};

/// What a release run prepared, to finish or undo it.
pub struct Prepared {
    spec_file: PathBuf,
    old_text: String,
    archived: Archived,
    old_version: String,
    package: String,
    /// The old release's date and source, when gen.toml had them (else PyPI's, looked up
    /// once the generation ran).
    old_date: Option<(String, String)>,
}

/// PyPI's release date of `package==version`: its project JSON (`/pypi/<name>/json`, whose
/// `releases` list every version's files). The system's CA bundle (`SSL_CERT_FILE`, else
/// Debian's) is trusted besides the built-in roots, as pip and curl trust it (an index behind
/// a proxy of its own CA).
fn pypi_date(package: &str, version: &str) -> Result<(String, String)> {
    let url = format!("https://pypi.org/pypi/{package}/json");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30));
    let bundle = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
    if let Ok(pem) = std::fs::read(&bundle) {
        for cert in reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default() {
            client = client.add_root_certificate(cert);
        }
    }
    let client = client.build()?;
    let json: serde_json::Value = rt.block_on(async {
        let r = client.get(&url).send().await?.error_for_status()?;
        anyhow::Ok(r.json().await?)
    })?;
    release::pypi_release(&json, version).with_context(|| format!("{package}=={version} on PyPI"))
}

/// Check and write everything but the run (see the module doc).
pub fn prepare(
    set: &Path,
    out: &Path,
    arg: &str,
    released: Option<&str>,
    image: Option<&str>,
) -> Result<Prepared> {
    let Some((name, version)) = arg.split_once('=').map(|(a, b)| (a.trim(), b.trim())) else {
        bail!("--release {arg:?}: expected NAME=VERSION");
    };
    let set_dir = if set.is_dir() {
        set.to_path_buf()
    } else {
        set.parent().map(PathBuf::from).unwrap_or_default()
    };
    let spec_file = set_dir.join(flux_gen::spec::SPEC_FILE);
    let spec = flux_gen::spec::load(&spec_file)?;
    let Some(repo) = spec.repositories.iter().find(|r| r.name == name) else {
        let names: Vec<&str> = spec.repositories.iter().map(|r| r.name.as_str()).collect();
        bail!(
            "--release {arg}: {} has no repository `{name}` (it has {})",
            spec_file.display(),
            names.join(", ")
        );
    };
    let (package, old) = repo.name_version();
    if version.is_empty() || version == old {
        bail!("--release {arg}: `{name}` is at {old} already; name a new version");
    }
    let image = match image {
        Some(i) => i.to_string(),
        None if repo.image.contains(old) => repo.image.replacen(old, version, 1),
        None => bail!(
            "--release {arg}: the image `{}` does not name version {old}: give --image",
            repo.image
        ),
    };
    let (date, source) = match released {
        Some(d) => {
            if flux_instance::release_day(d).is_none() {
                bail!("--released {d:?}: expected YYYY-MM-DD or an ISO 8601 time");
            }
            (d.to_string(), "given".to_string())
        }
        None => pypi_date(package, version).with_context(|| {
            format!("the release date of {package}=={version} (or give --released DATE)")
        })?,
    };
    let old_date = repo
        .release
        .as_ref()
        .map(|r| (r.date.clone(), r.source.clone()));
    let rel = RepoRelease {
        date,
        source,
        previous: Some(old.to_string()),
        previous_image: Some(repo.image.clone()),
    };
    let old_text = std::fs::read_to_string(&spec_file)?;
    let new_text = release::edit_spec(&old_text, (name, package), version, &image, &rel)?;
    flux_gen::spec::parse(&new_text, &spec_file)?;
    let archived = release::archive(&set_dir, out, name, old)?;
    if let Err(e) = std::fs::write(&spec_file, &new_text) {
        release::restore(&archived)?;
        return Err(e.into());
    }
    eprintln!(
        "flux gen: --release {name} {old} → {version} (released {}, {}): {} path(s) of {old} \
         kept as <id>@{old}",
        rel.date,
        rel.source,
        archived.moved.len()
    );
    Ok(Prepared {
        spec_file,
        old_text,
        archived,
        old_version: old.to_string(),
        package: package.to_string(),
        old_date,
    })
}

impl Prepared {
    /// The generation ran: date the archived instances (the old release's date).
    pub fn finish(self) -> Result<()> {
        let old = &self.old_version;
        let date = match self.old_date.clone() {
            Some(d) => Some(d),
            None => pypi_date(&self.package, old)
                .map_err(|e| eprintln!("flux gen: --release: {old} left undated: {e:#}"))
                .ok(),
        };
        if let Some((date, source)) = &date {
            let n = release::date_archived(&self.archived, old, date, source)?;
            eprintln!("flux gen: --release: {n} instance(s) of {old} dated {date} ({source})");
        }
        Ok(())
    }

    /// The generation failed: `gen.toml` and the archived instances back as they were.
    pub fn undo(self) -> Result<()> {
        std::fs::write(&self.spec_file, &self.old_text)?;
        release::restore(&self.archived)
    }
}
