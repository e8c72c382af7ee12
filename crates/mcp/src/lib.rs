//! `dsh-mcp`: the world as MCP tools (docs/design.md §11) — the server
//! behind `dsh mcp`, on the official Rust SDK (`rmcp`).
//!
//! A thin shell over `dsh-consumers`: [`catalog`] names each tool, says how it
//! treats the world (MCP's read-only / destructive / idempotent hints) and
//! maps it to one `dsh-consumers` method; [`DshMcp`] lists the catalog and runs
//! calls — arguments decoded into the tool's request type (a mistyped or
//! missing argument is a tool error naming it), the result returned as a
//! short text for the model plus the structured value, errors as tool
//! errors naming the operation and subject, progress notified while a call
//! waits, and a client's cancellation dropping the call (which stops what it
//! started). Transports: stdio ([`serve_stdio`]: every line that is not a
//! message answered with a JSON-RPC error) and streamable HTTP
//! ([`serve_http`]: a bearer token on every address, sessions bounded and
//! expiring, a disconnected client's calls cancelled).

#![forbid(unsafe_code)]

pub mod catalog;
mod entry;
mod http;
mod server;
mod sessions;
mod stdio;
mod wire;

pub use http::{HttpError, HttpOptions, check_token, generate_token, serve_http};
pub use server::{DshMcp, McpOptions, UnknownGroup, check_groups, groups};
pub use sessions::SessionLimits;
pub use stdio::{StdioError, serve_stdio};
