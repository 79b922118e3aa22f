//! Writing a variant instance directory: a copy of the origin instance (without its harvested
//! `oracle.json` / `callgraph.json`), the mutated test files, and `instance.toml` with the new
//! id and a `[variant]` table. Everything else in `instance.toml` is kept byte for byte
//! (`toml_edit`): the question, the tracing config and the extractor parameters refer to the
//! package's source, which a perturbation does not touch.
use crate::mutator::MutatedFile;
use anyhow::{Context, Result};
use std::path::Path;

/// What `[variant]` records.
#[derive(Clone, Debug)]
pub struct VariantInfo {
    pub origin: String,
    pub seed: u64,
    pub proposer: String,
    pub mutations: Vec<String>,
    pub relaxed_assertions: Vec<String>,
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let e = e?;
        let name = e.file_name();
        let n = name.to_string_lossy();
        if n == flux_instance::ORACLE_FILE
            || n == flux_instance::CALL_GRAPH_FILE
            || n == "__pycache__"
            || n == ".pytest_cache"
        {
            continue;
        }
        let ty = e.file_type()?;
        if ty.is_dir() {
            copy_dir(&e.path(), &to.join(&name))?;
        } else if ty.is_file() {
            std::fs::copy(e.path(), to.join(&name))
                .with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// A copy of an instance directory without its harvested files (`dest` is replaced).
pub fn copy_instance(origin_dir: &Path, dest: &Path) -> Result<()> {
    if dest.exists() {
        std::fs::remove_dir_all(dest).with_context(|| format!("removing {}", dest.display()))?;
    }
    copy_dir(origin_dir, dest)
}

/// `instance.toml` text of the variant: the origin's with `id` replaced and `[variant]` set.
pub fn variant_toml(origin_toml: &str, id: &str, info: &VariantInfo) -> Result<String> {
    use toml_edit::{value, Array, DocumentMut, Item, Table};
    let mut doc: DocumentMut = origin_toml
        .parse()
        .context("parsing the origin's instance.toml")?;
    doc["id"] = value(id);
    let mut t = Table::new();
    t["origin"] = value(info.origin.as_str());
    t["seed"] = value(i64::try_from(info.seed).unwrap_or(i64::MAX));
    t["proposer"] = value(info.proposer.as_str());
    let arr = |v: &[String]| {
        let mut a: Array = v.iter().map(String::as_str).collect();
        if v.len() > 1 {
            for item in a.iter_mut() {
                item.decor_mut().set_prefix("\n    ");
            }
            a.set_trailing("\n");
            a.set_trailing_comma(true);
        }
        a
    };
    t["mutations"] = value(arr(&info.mutations));
    t["relaxed_assertions"] = value(arr(&info.relaxed_assertions));
    doc["variant"] = Item::Table(t);
    Ok(doc.to_string())
}

/// Write the variant instance `dest` (whose name is `id`) from the origin directory.
pub fn write_variant(
    origin_dir: &Path,
    dest: &Path,
    id: &str,
    files: &[MutatedFile],
    info: &VariantInfo,
) -> Result<()> {
    copy_instance(origin_dir, dest)?;
    for f in files {
        let p = dest.join(&f.path);
        std::fs::write(&p, &f.source).with_context(|| format!("writing {}", p.display()))?;
    }
    let toml_path = origin_dir.join(flux_instance::INSTANCE_FILE);
    let text = std::fs::read_to_string(&toml_path)
        .with_context(|| format!("reading {}", toml_path.display()))?;
    let out = variant_toml(&text, id, info)?;
    std::fs::write(dest.join(flux_instance::INSTANCE_FILE), out)?;
    flux_instance::load_instance(dest)
        .with_context(|| format!("the variant {} does not load", dest.display()))?;
    Ok(())
}
