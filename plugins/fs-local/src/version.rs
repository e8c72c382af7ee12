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

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use dsh_plugin_api::fs::Version;

/// The version of the state `meta` describes (from `stat`, `lstat` or
/// `fstat`: the same file gives the same token through each).
///
/// Formatted by hand (lowercase hex fields joined by `:`) because it is
/// computed on every read and stat, where `format!` would cost a
/// measurable share of a small read.
pub(crate) fn version_of(meta: &Metadata) -> Version {
    let fields = [
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
        meta.ctime() as u64,
        meta.ctime_nsec() as u64,
        u64::from(meta.mode()),
        u64::from(meta.uid()),
        u64::from(meta.gid()),
    ];
    let mut token = String::with_capacity(fields.len() * 17);
    for (index, field) in fields.into_iter().enumerate() {
        if index > 0 {
            token.push(':');
        }
        push_hex(&mut token, field);
    }
    Version(token)
}

/// Appends `value` in lowercase hex without leading zeros.
fn push_hex(out: &mut String, value: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0_u8; 16];
    let mut at = buf.len();
    let mut rest = value;
    loop {
        at -= 1;
        buf[at] = DIGITS[(rest & 0xf) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    for &digit in &buf[at..] {
        out.push(char::from(digit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_fields_are_minimal_lowercase() {
        let mut out = String::new();
        for value in [0, 9, 0xabc, u64::MAX] {
            push_hex(&mut out, value);
            out.push(' ');
        }
        assert_eq!(out, "0 9 abc ffffffffffffffff ");
    }

    #[test]
    fn a_file_has_one_version_through_stat_and_fstat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        let by_path = version_of(&std::fs::metadata(&path).unwrap());
        let by_fd = version_of(&std::fs::File::open(&path).unwrap().metadata().unwrap());
        assert_eq!(by_path, by_fd);
        assert_eq!(by_path.0.split(':').count(), 10);
    }
}
