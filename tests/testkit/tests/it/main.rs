//! The kit's integration tests, one binary: what a dropped world leaves
//! behind, and the e2b-local server the E2B world is started on.

mod dropped;
mod server;
