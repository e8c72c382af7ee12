//! The official JS SDK (npm `e2b`: the newest release, 2.51.0, and 2.29.1) drives e2b-local
//! through our suites in
//! `tests/sdk-peers/js/test/`, one server per suite.

use crate::common;

#[test]
fn js_lifecycle() {
    common::peers::run_js("lifecycle.test.mjs");
}

#[test]
fn js_commands() {
    common::peers::run_js("commands.test.mjs");
}

#[test]
fn js_pty() {
    common::peers::run_js("pty.test.mjs");
}

#[test]
fn js_files() {
    common::peers::run_js("files.test.mjs");
}

#[test]
fn js_secure() {
    common::peers::run_js("secure.test.mjs");
}

#[test]
fn js_volumes() {
    common::peers::run_js("volumes.test.mjs");
}

#[test]
fn js_network() {
    common::peers::run_js("network.test.mjs");
}

#[test]
fn js_templates() {
    common::peers::run_js("templates.test.mjs");
}
