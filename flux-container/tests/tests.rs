//! The integration tests of flux-container (images and the Docker runtime): one test binary,
//! `integration`, with a module per concern (ripgrep keeps its own so: `autotests = false` and one
//! `[[test]]`). One module alone: `cargo test -p flux-container --test integration -- <module>::`.

mod images;
mod runtime;
