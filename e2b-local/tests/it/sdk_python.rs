//! The official Python SDK (PyPI `e2b`: the newest release, 2.63.0, and 2.29.1) drives
//! e2b-local through our suites in
//! `tests/sdk-peers/python/tests/`, one server per suite.

use crate::common;

#[test]
fn python_lifecycle() {
    common::peers::run_python("test_lifecycle.py");
}

#[test]
fn python_commands() {
    common::peers::run_python("test_commands.py");
}

#[test]
fn python_pty() {
    common::peers::run_python("test_pty.py");
}

#[test]
fn python_files() {
    common::peers::run_python("test_files.py");
}

#[test]
fn python_secure() {
    common::peers::run_python("test_secure.py");
}

#[test]
fn python_volumes() {
    common::peers::run_python("test_volumes.py");
}

#[test]
fn python_network() {
    common::peers::run_python("test_network.py");
}

#[test]
fn python_templates() {
    common::peers::run_python("test_templates.py");
}
