//! The integration tests of flux-perturb (perturbation end to end): one test binary, `integration`,
//! with a module per concern (ripgrep keeps its own so: `autotests = false` and one `[[test]]`).
//! One module alone: `cargo test -p flux-perturb --test integration -- <module>::`.

mod e2e;
mod llm;
mod mutator;
mod units;
