//! The `dsh` program's integration tests, one binary: the built `dsh` and
//! plugin libraries driven as a user would (manifests, exit codes, output,
//! terminals, signals).

mod check;
mod code;
mod conformance;
mod durable;
mod e2b_fs;
mod e2b_host;
mod e2b_manifests;
mod e2b_owner;
mod e2b_production;
mod e2b_shutdown;
mod e2b_template;
mod episode;
mod exec;
mod fs;
mod hostile;
mod lsp;
mod mcp;
mod mcp_owner;
mod plugins;
mod probes;
mod recipes;
mod sh;
mod shutdown;
mod support;
