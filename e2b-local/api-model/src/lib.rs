//! e2b-local's control-plane request models: the REST bodies E2B's SDKs send (docs/e2b-protocol.md
//! §2.3), parsed strictly ([`json_body`]) and checked ([`model`]), with the egress rules and
//! volume names and paths they carry ([`egress`], [`volume`]) and the API's error ([`error`]).
//!
//! Pure decoding and validation, nothing that serves or runs a sandbox: e2b-local's handlers use
//! it (with the `axum` feature, which makes [`error::ApiError`] a response), and the `rest_body`
//! fuzz target (`tests/fuzz`) builds it alone.

#![forbid(unsafe_code)]

pub mod egress;
pub mod error;
pub mod json_body;
pub mod model;
pub mod volume;
