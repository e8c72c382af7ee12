//! dsh-e2b-gateway's integration tests, one binary: both sides of the
//! gateway against a real e2b-local sandbox.

mod e2b_local;
