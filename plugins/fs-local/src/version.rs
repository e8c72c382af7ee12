//! Opaque version tokens derived from file metadata.
//!
//! A version is every field of `stat` that a change to the file's content or
//! metadata can move: device and inode (a replacement by rename — every
//! write of this provider — publishes a new inode), size, mtime and ctime to
//! the nanosecond, the full `st_mode` (type and permissions), owner and
//! group.
//!
//! Why it is sound: the kernel updates ctime on *every* change to an inode
//! (content, size, mode, owner, link count, rename), and mtime on every
//! content change, so no change leaves all fields equal unless it lands in
//! the same timestamp tick as the previous state *and* keeps size, inode and
//! mode. Since Linux 6.13, ext4, xfs, btrfs and tmpfs use multigrain
//! timestamps: once a `stat` has observed a timestamp (which is how a caller
//! got the version it holds), the next change receives a fresh fine-grained
//! one, closing that window. Consecutive writes through this provider always
//! differ, because the staged inode exists before the one it replaces is
//! freed, so their inode numbers differ. Equal tokens from different files
//! are impossible (device + inode identify the file).

use std::fmt::Write as _;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use dsh_plugin_api::fs::Version;

/// The version of the state `meta` describes (from `stat`, `lstat` or
/// `fstat`: the same file gives the same token through each).
pub(crate) fn version_of(meta: &Metadata) -> Version {
    let mut token = String::with_capacity(96);
    // Writing into a String cannot fail.
    let _ = write!(
        token,
        "{:x}:{:x}:{:x}:{}.{:09}:{}.{:09}:{:o}:{:x}:{:x}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
        meta.mode(),
        meta.uid(),
        meta.gid(),
    );
    Version(token)
}
