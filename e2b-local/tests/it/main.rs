//! e2b-local's integration tests, one binary: the built server as a client
//! and the host see it (command line, control plane, envd front, envd's file
//! access, isolation of sandbox worlds, volumes), and the official SDKs' suites in
//! `tests/sdk-peers/` run against it.

mod cli;
mod common;
mod confinement;
mod control_plane;
mod file_access;
mod front;
mod hostile;
mod isolation;
mod sdk_js;
mod sdk_python;
mod templates;
mod volumes;
