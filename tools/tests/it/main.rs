//! Integration tests of dsh-tools over the real local providers.

mod commands;
mod durable;
mod files;
mod lsp;
mod terminals;
mod world;
