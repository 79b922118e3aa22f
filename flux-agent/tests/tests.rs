//! The integration tests of flux-agent (the agent: the hook socket, long socket paths, the hook's
//! own Python suite): one test binary, `integration`, with a module per concern (ripgrep keeps its
//! own so: `autotests = false` and one `[[test]]`). One module alone: `cargo test -p flux-agent
//! --test integration -- <module>::`.

mod deep_socket;
mod hook_socket;
mod hook_suite;
mod jvm_witness;
