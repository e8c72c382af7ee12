//! dsh-subprocess-e2b's integration tests, one binary (nextest runs each test in
//! its own process), against a real e2b-local: spawning and output, terminals,
//! faults, the conformance kit and the plugin through dlopen (through the
//! `dsh` CLI in dsh-cli's `e2b_host` tests, where cargo builds `dsh`).

mod conformance;
mod dylib;
mod faults;
mod first;
mod spawn;
mod stdin;
mod support;
mod terminal;
