//! The manifest: which plugins make up a composition, read from TOML or
//! YAML. The format and its reading are the `dsh-manifest` crate (apart so
//! that the manifest fuzz target builds only it); this module re-exports it
//! unchanged. See that crate for the syntax and the rules.

pub use dsh_manifest::{
    Binding, ENTRY_KEYS, Entry, EntryLabel, MAX_MANIFEST_BYTES, Manifest, ManifestError,
    ManifestFormat, ManifestProblem, ProblemKind,
};
