//! The read-only decorator's integration tests, one binary: its logic
//! in-process, and the built library loaded by a host by manifest.

mod in_process;
mod manifest;
mod support;
mod zero_copy;
