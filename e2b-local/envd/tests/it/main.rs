//! e2b-local-envd's integration tests, one binary: the daemon in-process on
//! a loopback port (or a Unix socket), driven over the wire as the official
//! SDKs drive envd — Connect RPCs for processes and the filesystem, `/files`,
//! watches, routes and the access token.

mod acting_user;
mod common;
mod connect_protocol;
mod files_http;
mod filesystem;
mod process_control;
mod process_start;
mod process_streams;
mod routes_and_auth;
mod watch;
