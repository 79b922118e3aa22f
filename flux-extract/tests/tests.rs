//! The integration tests of flux-extract (extractors on real and large traces): one test binary,
//! `integration`, with a module per concern (ripgrep keeps its own so: `autotests = false` and one
//! `[[test]]`). One module alone: `cargo test -p flux-extract --test integration -- <module>::`.

mod real_trace;
mod scale;
