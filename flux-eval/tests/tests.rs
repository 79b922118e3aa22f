//! The integration tests of flux-eval (the evaluation harness): one test binary, `integration`,
//! with a module per concern (ripgrep keeps its own so: `autotests = false` and one `[[test]]`).
//! One module alone: `cargo test -p flux-eval --test integration -- <module>::`.

mod eval;
mod prompts;
mod units;
