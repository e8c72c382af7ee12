//! dsh-subprocess-local's integration tests, one binary (nextest runs each test in
//! its own process): spawning, output modes, inherit, terminals, terminate,
//! the plugin through its ABI and dlopen, and host memory under bulk output.

mod dylib;
mod inherit;
mod output;
mod plugin;
mod rss;
mod spawn;
mod support;
mod terminal;
mod terminate;
