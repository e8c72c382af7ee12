//! The conformance kit's integration tests, one binary: the kit run against
//! the local composition, against deliberately broken providers, against
//! providers that hang or panic, and against a confined fs.

mod confine;
mod local;
mod runner;
mod support;
mod teeth;
