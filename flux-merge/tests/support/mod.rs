//! Shared by the corpus tests.
use flux_merge::fixture::Fixture;
use std::path::Path;

/// A fixture of the corpus (`.jsonl.gz`).
pub fn load(path: &Path) -> Fixture {
    let f = std::fs::File::open(path).unwrap();
    let r = std::io::BufReader::new(flate2::read::GzDecoder::new(f));
    Fixture::read(r).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
