//! Integration tests of dsh-tools over the real local providers.

mod commands;
mod files;
mod terminals;
mod world;
