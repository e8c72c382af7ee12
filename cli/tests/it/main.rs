//! The `dsh` program's integration tests, one binary: the built `dsh` and
//! plugin libraries driven as a user would (manifests, exit codes, output,
//! terminals, signals).

mod check;
mod conformance;
mod exec;
mod fs;
mod plugins;
mod probes;
mod sh;
mod support;
