//! The `e2b` owner's integration tests, one binary: the owner against a real
//! e2b-local server (in-process, through the host and through `dsh`), and
//! against E2B's real service when credentials are given. The shipped
//! manifests through `dsh` are dsh-cli's `e2b_manifests` tests.

mod cloud;
mod faults;
mod host;
mod lease;
mod lifecycle;
mod secrets;
mod setup;
mod support;
