//! The audit decorator's integration tests, one binary: in-process over
//! `dsh-subprocess-local`'s rlib, and its built library loaded by manifest.

mod in_process;
mod manifest;
mod support;
