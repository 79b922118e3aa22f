//! The integration tests of flux-score (scoring and its research statistics): one test binary,
//! `integration`, with a module per concern (ripgrep keeps its own so: `autotests = false` and one
//! `[[test]]`). One module alone: `cargo test -p flux-score --test integration -- <module>::`.

mod honest;
mod research;
mod score;
