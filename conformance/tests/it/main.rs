//! The conformance kit's integration tests, one binary: the kit run against
//! the local composition, against deliberately broken providers, and against
//! providers that hang or panic.

mod local;
mod runner;
mod support;
mod teeth;
