//! Built images shared between machines: `flux images save` writes `docker save` archives keyed
//! by the images' content identity, `flux images load` loads them into another machine's
//! Docker and cache, so the nodes of a fleet build nothing (debootstrap, wheels, the source
//! tree) and run exactly the images whose identity the instances were harvested in.
//!
//! An archive directory holds, per image, `<identity>.tar` (the `docker save` stream, the
//! identity's hex without `flux-id:`) and `<identity>.json` (its manifest), and `index.json`
//! listing them with each archive's sha256 and size. Loading checks, before Docker sees a byte,
//! that every archive has the size and sha256 its index entry says and that the manifest's
//! identity is the one it is filed under; after loading, that Docker's image id is the
//! manifest's (Docker's ids are digests of the image config, which names every layer's digest:
//! the same id is the same content). Only then is the manifest written to the cache, where
//! `flux images list` and builds see the image as built.
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{manifest_path, Manifest};
use crate::error::{Error, Result};
use crate::Runtime;

/// The index's schema.
pub const ARCHIVE_SCHEMA: u32 = 1;

/// `index.json` of an archive directory.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct ArchiveIndex {
    pub schema: u32,
    pub images: Vec<ArchiveEntry>,
}

/// One saved image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArchiveEntry {
    /// `flux/sympy:1.13.3-py3.11`.
    pub image: String,
    /// `flux-id:<hex>`.
    pub identity: String,
    /// Docker's image id (`sha256:…`), the same on every machine that loads it.
    pub image_id: String,
    /// `<hex>.tar`, relative to the directory.
    pub file: String,
    /// sha256 (hex) and size of that file.
    pub sha256: String,
    pub bytes: u64,
}

/// What one image's save or load did.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    pub image: String,
    pub identity: String,
    pub bytes: u64,
    /// Already there (the same identity archived, or the same image id in Docker): nothing
    /// written or loaded.
    pub skipped: bool,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |e| Error::io(what, e)
}

fn bad(path: &Path, message: String) -> Error {
    Error::Definition {
        path: path.to_owned(),
        message,
    }
}

fn hex_of(identity: &str) -> Option<&str> {
    identity
        .strip_prefix("flux-id:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The index of `dir` (empty when there is none yet).
pub fn read_index(dir: &Path) -> Result<ArchiveIndex> {
    let path = dir.join("index.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let idx: ArchiveIndex = serde_json::from_str(&text)
                .map_err(|e| bad(&path, format!("not an image archive index: {e}")))?;
            if idx.schema != ARCHIVE_SCHEMA {
                return Err(bad(
                    &path,
                    format!(
                        "archive index schema {} (this flux reads {ARCHIVE_SCHEMA})",
                        idx.schema
                    ),
                ));
            }
            Ok(idx)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ArchiveIndex {
            schema: ARCHIVE_SCHEMA,
            images: Vec::new(),
        }),
        Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(io(format!("write {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io(format!("rename to {}", path.display())))
}

/// sha256 (hex) and size of a file, read in chunks.
pub async fn file_digest(path: &Path) -> Result<(String, u64)> {
    let mut f = tokio::fs::File::open(path)
        .await
        .map_err(io(format!("open {}", path.display())))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f
            .read(&mut buf)
            .await
            .map_err(io(format!("read {}", path.display())))?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((format!("{:x}", h.finalize()), n))
}

/// Save `images` (built by flux: the manifest they carry as a label names their content
/// identity; a manifest of the same name in `cache_dir` must name the same) into `dir`. An image whose identity is already archived there with a matching file is skipped.
pub async fn save(
    rt: &Runtime,
    cache_dir: &Path,
    images: &[String],
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Moved>> {
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let mut index = read_index(dir)?;
    let mut out = Vec::new();
    for image in images {
        let mpath = manifest_path(cache_dir, image);
        let (m, image_id) = what_docker_has(rt, image, &mpath).await?;
        let hex = hex_of(&m.identity)
            .ok_or_else(|| {
                bad(
                    &mpath,
                    format!("{image}: the manifest has no content identity"),
                )
            })?
            .to_owned();
        let file = format!("{hex}.tar");
        let tar = dir.join(&file);
        if let Some(e) = index.images.iter().find(|e| e.identity == m.identity) {
            if tar.is_file() && file_digest(&tar).await?.0 == e.sha256 {
                progress(&format!("{image}: {} already archived", m.identity));
                out.push(Moved {
                    image: image.clone(),
                    identity: m.identity.clone(),
                    bytes: e.bytes,
                    skipped: true,
                });
                continue;
            }
        }
        progress(&format!("{image}: docker save → {}", tar.display()));
        // By name, not id: an archive of an id carries no tag, and `docker load` would give an
        // untagged image (the id was checked to be the name's just above).
        let (sha256, bytes) = export(rt, image, &tar).await?;
        let text = serde_json::to_string_pretty(&m).expect("a manifest serialises") + "\n";
        write_atomically(&dir.join(format!("{hex}.json")), text.as_bytes())?;
        index
            .images
            .retain(|e| e.image != *image && e.identity != m.identity);
        index.images.push(ArchiveEntry {
            image: image.clone(),
            identity: m.identity.clone(),
            image_id,
            file,
            sha256,
            bytes,
        });
        index.images.sort_by(|a, b| a.image.cmp(&b.image));
        let text = serde_json::to_string_pretty(&index).expect("an index serialises") + "\n";
        write_atomically(&dir.join("index.json"), text.as_bytes())?;
        out.push(Moved {
            image: image.clone(),
            identity: m.identity.clone(),
            bytes,
            skipped: false,
        });
    }
    Ok(out)
}

/// The manifest of the image Docker has under `image` (its label, with Docker's id), checked
/// against the cache's manifest of that name when there is one: the same content identity
/// (another checkout's cache may have rebuilt the image since, giving it a new id but, for the
/// same definition, the same identity).
async fn what_docker_has(rt: &Runtime, image: &str, mpath: &Path) -> Result<(Manifest, String)> {
    let Some(id) = rt.image_id(image).await? else {
        return Err(bad(
            mpath,
            format!("{image} is not in Docker: `flux images build` it first"),
        ));
    };
    let cached = Manifest::load(mpath).ok();
    let labelled = super::image_manifest(rt, image).await?;
    let m = match (labelled, cached) {
        (Some(l), Some(c)) if !c.identity.is_empty() && c.identity != l.identity => {
            return Err(bad(
                mpath,
                format!(
                    "{image}: Docker's image is {} but this cache built {}: rebuild it",
                    l.identity, c.identity
                ),
            ))
        }
        (Some(l), _) => l,
        (None, Some(c)) if c.image_id.as_deref() == Some(id.as_str()) => c,
        (None, _) => {
            return Err(bad(
                mpath,
                format!(
                    "{image}: Docker's image ({id}) carries no flux manifest: not built by flux"
                ),
            ))
        }
    };
    Ok((
        Manifest {
            image_id: Some(id.clone()),
            ..m
        },
        id,
    ))
}

/// `docker save` of `image` (a name: the archive then carries its tag for `docker load`) into
/// `tar` (through a temporary file), hashed on the way.
async fn export(rt: &Runtime, image: &str, tar: &Path) -> Result<(String, u64)> {
    let tmp = tar.with_extension("tar.tmp");
    let mut f = tokio::fs::File::create(&tmp)
        .await
        .map_err(io(format!("create {}", tmp.display())))?;
    let mut h = Sha256::new();
    let mut n = 0u64;
    let mut stream = rt.docker().export_image(image);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::Docker {
            op: format!("save {image}"),
            source: e,
        })?;
        h.update(&chunk);
        n += chunk.len() as u64;
        f.write_all(&chunk)
            .await
            .map_err(io(format!("write {}", tmp.display())))?;
    }
    f.sync_all()
        .await
        .map_err(io(format!("sync {}", tmp.display())))?;
    drop(f);
    std::fs::rename(&tmp, tar).map_err(io(format!("rename to {}", tar.display())))?;
    Ok((format!("{:x}", h.finalize()), n))
}

/// Check every entry of `dir`'s index against its files (size, sha256, the manifest's identity
/// and image id) without loading anything: what [`load`] does first. The manifests, in index
/// order.
pub async fn verify(dir: &Path) -> Result<Vec<(ArchiveEntry, Manifest)>> {
    let index = read_index(dir)?;
    if index.images.is_empty() {
        return Err(bad(
            &dir.join("index.json"),
            "no saved images here (`flux images save … --to DIR` writes them)".into(),
        ));
    }
    let mut out = Vec::new();
    for e in index.images {
        let hex = hex_of(&e.identity).ok_or_else(|| {
            bad(
                &dir.join("index.json"),
                format!("{}: identity {:?} is no flux-id", e.image, e.identity),
            )
        })?;
        let tar = dir.join(&e.file);
        if e.file != format!("{hex}.tar") {
            return Err(bad(
                &tar,
                format!(
                    "{}: filed as {} but its identity is {}",
                    e.image, e.file, e.identity
                ),
            ));
        }
        let (sha256, bytes) = file_digest(&tar).await?;
        if bytes != e.bytes || sha256 != e.sha256 {
            return Err(bad(
                &tar,
                format!(
                    "{}: the archive is {bytes} bytes with sha256 {sha256}, the index says {} bytes with sha256 {} (damaged or replaced)",
                    e.image, e.bytes, e.sha256
                ),
            ));
        }
        let mpath = dir.join(format!("{hex}.json"));
        let m = Manifest::load(&mpath)?;
        if m.identity != e.identity
            || m.image != e.image
            || m.image_id.as_deref() != Some(&e.image_id)
        {
            return Err(bad(
                &mpath,
                format!(
                    "{}: the manifest describes {} {} (id {:?}), not the index's entry",
                    e.image, m.image, m.identity, m.image_id
                ),
            ));
        }
        out.push((e, m));
    }
    Ok(out)
}

/// Load every image of `dir` into Docker (those Docker already has with the same id are not
/// loaded again) and write their manifests into `cache_dir`.
pub async fn load(
    rt: &Runtime,
    cache_dir: &Path,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Moved>> {
    let checked = verify(dir).await?;
    let mut out = Vec::new();
    for (e, m) in checked {
        let skipped = rt.image_id(&e.image).await?.as_deref() == Some(e.image_id.as_str());
        if !skipped {
            progress(&format!("{}: docker load ← {}", e.image, e.file));
            import(rt, &dir.join(&e.file)).await?;
            let now = rt.image_id(&e.image).await?;
            if now.as_deref() != Some(e.image_id.as_str()) {
                return Err(bad(
                    &dir.join(&e.file),
                    format!(
                        "{}: after loading, Docker's image is {} where the manifest says {}",
                        e.image,
                        now.as_deref().unwrap_or("none"),
                        e.image_id
                    ),
                ));
            }
        }
        let path = manifest_path(cache_dir, &e.image);
        let parent = path.parent().expect("a manifest path has a parent");
        std::fs::create_dir_all(parent).map_err(io(format!("create {}", parent.display())))?;
        let text = serde_json::to_string_pretty(&m).expect("a manifest serialises") + "\n";
        write_atomically(&path, text.as_bytes())?;
        out.push(Moved {
            image: e.image,
            identity: e.identity,
            bytes: e.bytes,
            skipped,
        });
    }
    Ok(out)
}

/// `docker load` of one archive, streamed from the file.
async fn import(rt: &Runtime, tar: &Path) -> Result<()> {
    let f = tokio::fs::File::open(tar)
        .await
        .map_err(io(format!("open {}", tar.display())))?;
    let chunks = futures_util::stream::unfold(f, |mut f| async move {
        let mut buf = vec![0u8; 1 << 20];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(k) => {
                buf.truncate(k);
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buf)), f))
            }
            Err(e) => Some((Err(e), f)),
        }
    });
    let options = bollard::query_parameters::ImportImageOptionsBuilder::default()
        .quiet(true)
        .build();
    let mut s = rt.docker().import_image_stream(options, chunks, None);
    while let Some(r) = s.next().await {
        let info = r.map_err(|e| Error::Docker {
            op: format!("load {}", tar.display()),
            source: e,
        })?;
        if let Some(err) = info.error_detail.and_then(|d| d.message) {
            return Err(bad(tar, format!("docker load: {err}")));
        }
    }
    Ok(())
}

/// The archive's files for an image (for messages and tests): tar and manifest.
pub fn files_of(dir: &Path, identity: &str) -> Option<(PathBuf, PathBuf)> {
    let hex = hex_of(identity)?;
    Some((
        dir.join(format!("{hex}.tar")),
        dir.join(format!("{hex}.json")),
    ))
}
