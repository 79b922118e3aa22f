//! The integration tests of flux-harvest (harvests end to end): one test binary, `integration`,
//! with a module per concern (ripgrep keeps its own so: `autotests = false` and one `[[test]]`).
//! One module alone: `cargo test -p flux-harvest --test integration -- <module>::`.

mod common;

mod harvest;
mod hostile;
mod pins;
