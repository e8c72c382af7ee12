//! What a path names, as the tools report it.

use dsh_plugin_api::fs::FileKind;

/// The kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    Directory,
    Symlink,
    /// A socket, FIFO or device.
    Other,
}

impl From<FileKind> for EntryKind {
    fn from(kind: FileKind) -> EntryKind {
        match kind {
            FileKind::File => EntryKind::File,
            FileKind::Directory => EntryKind::Directory,
            FileKind::Symlink => EntryKind::Symlink,
            FileKind::Other => EntryKind::Other,
        }
    }
}
