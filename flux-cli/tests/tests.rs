//! The integration tests of flux-cli (the `flux` binary end to end): one test binary,
//! `integration`, with a module per concern (ripgrep keeps its own so: `autotests = false` and one
//! `[[test]]`). One module alone: `cargo test -p flux-cli --test integration -- <module>::`.

mod common;

mod cli;
mod dataset;
mod extractors;
mod gen;
mod gen_java;
mod gen_safety;
mod harvest;
mod images;
mod k8s;
mod predicates;
mod readme;
mod score_cli;
mod scoring_port;
mod sweflux_import;
mod sweflux_log;
mod trace;
mod witness;
