//! The integration tests of flux-instance (instance shapes and the starter set): one test binary,
//! `integration`, with a module per concern (ripgrep keeps its own so: `autotests = false` and one
//! `[[test]]`). One module alone: `cargo test -p flux-instance --test integration -- <module>::`.

mod shapes;
mod source_check;
mod starter_set;
