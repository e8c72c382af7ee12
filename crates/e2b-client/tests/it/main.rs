//! e2b-client's integration tests, one binary: the control-plane client
//! against a scripted HTTP server, `Envd` against a scripted transport
//! ([`fake`]), the client against a real e2b-local ([`world`]), and against
//! E2B's real service when credentials are given.

mod api_http;
mod e2b_cloud;
mod e2b_local;
mod e2b_local_large;
mod envd_wire;
mod fake;
mod world;
