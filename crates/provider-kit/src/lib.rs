//! Building blocks for providers of the dsh seams.
//!
//! Every provider of a seam must implement some semantics identically —
//! how a path string is checked, how a literal edit matches across line
//! endings, when a write guard holds, how content is decoded as strict
//! UTF-8, how a path becomes a `file:` URI and back, how mutations of one
//! target are serialised; how a terminal refuses and joins operations once
//! terminated, how collected output keeps its tail, how several failures of
//! one disposal become one error. Those contract-level pieces live here, once, each
//! in its own module, so that a provider (ours or a third party's) gets them
//! right by calling them rather than by re-deriving them from the seam docs.
//!
//! The crate depends only on `dsh-plugin-api` and light crates. Nothing in
//! it touches a filesystem or a process: providers bring the world, the kit
//! brings the rules. Async pieces need only tokio's `sync` primitives and
//! run on any runtime.
//!
//! Errors are built in the provider's own context through [`ErrorContext`],
//! so they name the provider's operation and subject like every other error
//! the provider returns.

use std::fmt::Display;

use dsh_plugin_api::{Error, ErrorKind};

pub mod content;
pub mod env;
pub mod failures;
pub mod gate;
pub mod guard;
pub mod literal;
pub mod locks;
pub mod paths;
pub mod registry;
pub mod status;
pub mod tail;
pub mod terminal;
pub mod uri;
pub mod utf8;
pub mod world;

/// The operation and subject an error is about: a provider's context for
/// one seam call. The kit's fallible helpers take one and build their errors
/// through it, so the message starts with the operation (`"write: …"`) and
/// the subject is the path the caller named.
pub trait ErrorContext {
    /// An error of `kind` whose message is `"<operation>: <detail>"`, with
    /// the context's subject.
    fn error(&self, kind: ErrorKind, detail: impl Display) -> Error;
}

/// The context the kit's own tests build errors in.
#[cfg(test)]
pub(crate) struct TestOp {
    pub name: &'static str,
    pub subject: &'static str,
}

#[cfg(test)]
impl ErrorContext for TestOp {
    fn error(&self, kind: ErrorKind, detail: impl Display) -> Error {
        Error::new(kind, format!("{}: {detail}", self.name)).with_subject(self.subject)
    }
}
