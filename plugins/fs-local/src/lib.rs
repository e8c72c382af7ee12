//! `dsh-fs-local`: the `fs` seam ([`dsh_plugin_api::fs::FsProvider`]) on
//! the host filesystem.
//!
//! [`FsLocal`] implements every row of the seam contract (docs/design.md §5.1):
//! canonical identity with `realpath -m` semantics and percent-encoded
//! `file:` URIs, containment on canonical paths, `stat`/`lstat`/`list`,
//! strict UTF-8 reads with binary detection, streamed reads in bounded
//! chunks, atomic guarded writes through a private sibling staging
//! directory, literal edits with line-ending-insensitive matching, and
//! `mkdir -p` / recursive remove / rename with parent creation. Versions
//! are metadata tokens (see the `version` module docs for why they are
//! sound).
//!
//! [`FsLocalPlugin`] is the plugin (`dsh-fs-local`, provides `fs`, injects
//! nothing, config `{ cwd?: absolute path }`), exported for the host as
//! `libdsh_fs_local.so`.

mod beneath;
mod blocking;
#[cfg(test)]
mod cancellation_tests;
mod chunks;
mod commit;
mod edit;
mod errors;
mod list;
mod locks;
mod meta;
mod paths;
mod plugin;
mod provider;
mod read;
mod staging;
mod tree;
mod version;
mod world;
mod write;

/// The world-side operations on the machine this code runs on, for
/// programs that serve them elsewhere (`dsh-supervisor` in a sandbox):
/// the walk and search tree, its entries' description, `read_many`, the
/// seam's kind of a file type, and the pieces of a replacement (an
/// operation's error context, reading a file whole, a staged file).
pub mod native {
    pub use crate::errors::Op;
    pub use crate::meta::kind_of;
    pub use crate::read::read_all;
    pub use crate::staging::Staged;
    pub use crate::world::{Describe, Host, Listed, LocalTree, read_many};
}

pub use chunks::CHUNK_LEN;
pub use plugin::{FsLocalConfig, FsLocalPlugin};
pub use provider::FsLocal;
pub use staging::STAGING_PREFIX;

dsh_plugin_api::export_plugin!(FsLocalPlugin);
