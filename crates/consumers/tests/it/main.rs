//! Integration tests of dsh-consumers over the real local providers.

mod code;
mod commands;
mod durable;
mod file_edits;
mod files;
mod lsp;
mod lsp_tools;
mod lsp_uris;
mod terminals;
mod world;
