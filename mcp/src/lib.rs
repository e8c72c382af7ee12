//! `dsh-mcp`: the world as MCP tools (docs/design.md §11) — the server
//! behind `dsh mcp`, on the official Rust SDK (`rmcp`).
//!
//! A thin shell over `dsh-tools`: [`catalog`] names each tool, says how it
//! treats the world (MCP's read-only / destructive / idempotent hints) and
//! maps it to one `dsh-tools` method; [`DshMcp`] lists the catalog and runs
//! calls — arguments decoded into the tool's request type (a mistyped or
//! missing argument is a tool error naming it), the result returned as a
//! short text for the model plus the structured value, errors as tool
//! errors naming the operation and subject, progress notified while a call
//! waits, and a client's cancellation dropping the call (which stops what it
//! started). Transports: stdio ([`serve_stdio`]) and streamable HTTP
//! ([`serve_http`]).

#![forbid(unsafe_code)]

pub mod catalog;
mod entry;
mod http;
mod server;
mod stdio;

pub use http::{HttpError, HttpOptions, serve_http};
pub use server::DshMcp;
pub use stdio::{StdioError, serve_stdio};
