//! dsh-subprocess-e2b's integration tests, one binary (nextest runs each test in
//! its own process), against a real e2b-local: spawning and output, terminals,
//! faults, the conformance kit, the plugin through dlopen and the `dsh` CLI.

mod conformance;
mod dylib;
mod faults;
mod host_cli;
mod spawn;
mod support;
mod terminal;
