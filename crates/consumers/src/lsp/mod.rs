//! Language intelligence through the seams (issue 12; docs/design.md §11): the protocol layer of
//! an LSP client whose servers run in the world, launched through the `subprocess` seam with
//! their stdin and stdout as pipes.
//!
//! - [`framing`]: the base protocol's `Content-Length` framing, bounded.
//! - [`rpc`]: JSON-RPC requests, responses, notifications and the server's own requests.
//! - [`position`]: 1-based character columns to and from the server's position encoding.
//! - [`server`]: one server in the world: started, initialized, fed documents, asked for the
//!   diagnostics of the version just sent, definitions, references, hover, renames, document
//!   and workspace symbols, its work in progress followed; shut down with its whole process
//!   group.
//! - [`config`]: which server serves which files (defaults: clangd, pyright, typescript).
//! - [`servers`]: one server per (language, workspace root), started on first use, restarted
//!   with backoff, every open document synced from the world before each question.
//! - [`tools`]: [`Lsp`], the tools (`lsp_diagnostics`, `lsp_definition`, `lsp_references`,
//!   `lsp_hover`, `lsp_symbols`, `lsp_rename`).

pub mod config;
pub mod framing;
pub mod position;
pub mod rpc;
pub mod server;
pub mod servers;
pub mod tools;

pub use config::LspConfig;
pub use tools::Lsp;
