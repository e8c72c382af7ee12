//! fs-local's integration tests, one binary: the provider in-process on a
//! private temporary directory, its plugin, and the built library through
//! the plugin API's loader.

mod common;
mod dylib;
mod edit;
mod metadata;
mod plugin;
mod read;
mod resolve;
mod tree;
mod world;
mod write;
