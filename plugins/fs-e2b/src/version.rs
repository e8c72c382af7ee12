//! Opaque version tokens derived from envd's metadata of an entry.
//!
//! A version hashes every field of envd's `EntryInfo` that describes the
//! entry's state rather than its name: type, mode string and mode bits,
//! size, owner, group, modification time to the nanosecond, the resolved
//! symlink target, and the `user.e2b.*` extended attributes (`metadata`).
//! `name` and `path` are left out, so a file has one version whether it is
//! reached by `Stat`, `ListDir` or the `Move` that published it.
//!
//! Why it is sound for writes through this provider: envd exposes neither
//! inode nor ctime, and file timestamps tick coarsely (a kernel clock tick,
//! milliseconds), so two writes of the same size within one tick would
//! otherwise look alike. Every write therefore stores a fresh random token
//! as the `dsh-write` metadata of the file it publishes (an extended
//! attribute that the publishing rename keeps), and consecutive writes
//! always differ — A, B, A again included. A change made by someone else
//! is seen when it moves the size, the mtime, the mode or the owner; an
//! in-place rewrite of the same size within the same tick is not (the
//! limit of what envd reports).

use dsh_plugin_api::fs::Version;
use dsh_supervisor::envd_entry::EntryState;
use e2b_client::{EntryInfo, FileType};

/// The metadata key under which each write stores its random token (envd
/// keeps it as the extended attribute `user.e2b.dsh-write`). Versions hash
/// envd's metadata of an entry — type, mode string and bits, size, owner,
/// group, mtime to the nanosecond, resolved symlink target and these
/// `user.e2b.*` attributes — so two writes of the same size within one
/// timestamp tick still differ; a same-size rewrite made in the sandbox
/// within one tick (envd reports neither inode nor ctime) does not.
pub const WRITE_TOKEN_KEY: &str = "dsh-write";

/// The version of the state `entry` describes (the formula is
/// `dsh_supervisor::envd_entry`'s, shared with the supervisor's walks).
pub(crate) fn version_of(entry: &EntryInfo) -> Version {
    Version(
        EntryState {
            type_code: type_code(entry.file_type),
            permissions: &entry.permissions,
            mode: entry.mode,
            size: entry.size,
            owner: &entry.owner,
            group: &entry.group,
            modified: entry
                .modified
                .map(|time| (time.as_second(), time.subsec_nanosecond())),
            symlink_target: entry.symlink_target.as_deref(),
            metadata: &entry.metadata,
        }
        .version(),
    )
}

/// A fresh random write token (128 bits, hex).
pub(crate) fn new_write_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

fn type_code(file_type: FileType) -> i32 {
    match file_type {
        FileType::Unspecified => 0,
        FileType::File => 1,
        FileType::Directory => 2,
        FileType::Symlink => 3,
        FileType::Other(code) => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::tests::entry;

    #[test]
    fn equal_states_share_a_version_wherever_they_were_read() {
        let a = entry("-rw-r--r--", 0o644);
        let mut listed = a.clone();
        listed.path = "/elsewhere/x".into();
        listed.name = "other-name".into();
        assert_eq!(version_of(&a), version_of(&listed));
        assert_eq!(version_of(&a).0.len(), 32);
    }

    #[test]
    fn every_state_field_moves_the_version() {
        let base = entry("-rw-r--r--", 0o644);
        let before = version_of(&base);
        type Change = Box<dyn Fn(&mut EntryInfo)>;
        let changes: [Change; 10] = [
            Box::new(|e| e.size += 1),
            Box::new(|e| e.permissions = "-rwxr--r--".into()),
            Box::new(|e| e.mode = 0o600),
            Box::new(|e| e.owner = "root".into()),
            Box::new(|e| e.group = "root".into()),
            Box::new(|e| e.modified = Some(jiff::Timestamp::new(1_700_000_000, 124).unwrap())),
            Box::new(|e| e.modified = None),
            Box::new(|e| e.symlink_target = Some("/t".into())),
            Box::new(|e| e.file_type = FileType::Directory),
            Box::new(|e| {
                e.metadata.insert(WRITE_TOKEN_KEY.into(), new_write_token());
            }),
        ];
        for (index, change) in changes.iter().enumerate() {
            let mut changed = base.clone();
            change(&mut changed);
            assert_ne!(version_of(&changed), before, "change {index}");
        }
    }

    #[test]
    fn write_tokens_are_fresh() {
        let a = new_write_token();
        assert_eq!(a.len(), 32);
        assert_ne!(a, new_write_token());
    }
}
