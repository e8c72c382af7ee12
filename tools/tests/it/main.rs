//! Integration tests of dsh-tools over the real local providers.

mod commands;
mod durable;
mod files;
mod lsp;
mod lsp_tools;
mod lsp_uris;
mod terminals;
mod world;
