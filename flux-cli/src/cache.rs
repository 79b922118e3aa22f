//! The one `--cache` flag every command shares, and how the cache is found without it:
//! `$FLUX_CACHE`, else the nearest `.flux-cache` above the working directory, else
//! `./.flux-cache`. (The old spelling `--cache-dir` of `flux images` still works, hidden.) That
//! last one is new, made where the command runs: a note on stderr says so, since a command run
//! in the wrong directory would otherwise fill a stray cache (and rebuild into it) silently.
use std::path::PathBuf;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct CacheArg {
    /// flux's cache (image manifests, wheelhouse, package sources, runs); default: $FLUX_CACHE,
    /// else the nearest `.flux-cache` above the current directory, else `./.flux-cache`.
    #[arg(long = "cache", alias = "cache-dir", value_name = "DIR")]
    pub cache: Option<PathBuf>,
}

impl CacheArg {
    /// The cache directory to use.
    pub fn dir(&self) -> PathBuf {
        let dir = self.cache.clone().unwrap_or_else(default_cache);
        if self.cache.is_none() && !dir.exists() {
            static NOTED: std::sync::Once = std::sync::Once::new();
            NOTED.call_once(|| {
                eprintln!(
                    "flux: note: no cache found ($FLUX_CACHE is unset, and there is no \
                     .flux-cache here or above); using a new one at {} (--cache DIR or \
                     FLUX_CACHE=DIR names another)",
                    dir.display()
                );
            });
        }
        dir
    }
}

/// `$FLUX_CACHE`, else the nearest `.flux-cache` above the current directory, else
/// `./.flux-cache`.
pub fn default_cache() -> PathBuf {
    if let Some(c) = std::env::var_os("FLUX_CACHE").filter(|c| !c.is_empty()) {
        return PathBuf::from(c);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    cwd.ancestors()
        .map(|d| d.join(".flux-cache"))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| cwd.join(".flux-cache"))
}
