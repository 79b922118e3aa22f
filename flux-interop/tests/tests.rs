//! The integration tests of flux-interop (SWE-Flux import and export): one test binary,
//! `integration`, with a module per concern (ripgrep keeps its own so: `autotests = false` and one
//! `[[test]]`). One module alone: `cargo test -p flux-interop --test integration -- <module>::`.

mod import_export;
mod native_rules;
