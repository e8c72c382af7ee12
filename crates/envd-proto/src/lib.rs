//! envd's `process.Process` and `filesystem.Filesystem` services.
//!
//! Messages, server traits and (with the `client` feature) clients are
//! generated at build time from this crate's own `.proto` files, which follow
//! the names and field numbers E2B's clients use on the wire
//! (`docs/e2b-protocol.md` §5–6). Both e2b-local (server) and e2b-client
//! (client) build on these types, so the two sides cannot drift apart.

#![forbid(unsafe_code)]
#![allow(
    clippy::all,
    clippy::allow_attributes_without_reason,
    missing_docs,
    rust_2018_idioms,
    reason = "generated code: its style is the generator's"
)]

connectrpc::include_generated!();
