//! fs-e2b's integration tests, one binary: the provider in an e2b-local
//! sandbox (directly, through an in-process owner and as a loaded plugin;
//! through `dsh` in dsh-cli's `e2b_fs` tests, where cargo builds `dsh`), the
//! fs half of the conformance kit, faults, a sandbox user racing
//! an envd that acts as root or confined world-side operations, and E2B's
//! real service when credentials are given; the world-side operations'
//! resident process.

mod behaviour;
mod beneath;
mod cloud;
mod conformance;
mod direct;
mod faults;
mod plugin;
mod races;
mod resident;
mod support;
