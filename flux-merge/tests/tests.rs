//! The integration tests of flux-merge (the offline merge corpus, reordered records, the protocol
//! as documented): one test binary, `integration`, with a module per concern (ripgrep keeps its own
//! so: `autotests = false` and one `[[test]]`). One module alone: `cargo test -p flux-merge --test
//! integration -- <module>::`.

mod support;

mod corpus;
mod interleavings;
mod protocol_doc;
