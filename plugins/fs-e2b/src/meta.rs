//! envd's `EntryInfo` projected onto the seam's [`Metadata`].
//!
//! envd's `EntryInfo` is `lstat`-based, but two of its fields do not say
//! what the seam needs: `mode` carries only the `0o777` bits (and, for a
//! symlink, its target's), and `type` reports a symlink as its target's
//! type. Both are read instead from `permissions`, Go's rendering of the
//! entry's own `st_mode` (`-rwxr-xr-x`, `dtrwxrwxrwx`, `grwxr-sr-x`,
//! `Lrwxrwxrwx`, `prw-r--r--`, `Dcrw-rw-rw-`): its leading letters name the
//! file type and the set-user-ID (`u`), set-group-ID (`g`) and sticky (`t`)
//! bits, its last nine characters the permission bits.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dsh_plugin_api::fs::{FileKind, Metadata};
use e2b_client::{EntryInfo, FileType};

use crate::version::version_of;

/// The entry's own kind (a symlink is [`FileKind::Symlink`]).
pub(crate) fn kind_of(entry: &EntryInfo) -> FileKind {
    match type_letters(&entry.permissions) {
        Some(letters) => {
            if letters.contains('L') {
                FileKind::Symlink
            } else if letters.contains('d') {
                FileKind::Directory
            } else if letters.contains(['D', 'p', 'S', 'c', '?']) {
                FileKind::Other
            } else {
                FileKind::File
            }
        }
        // No usable mode string (an envd that sends none): the type field,
        // which describes a symlink by its target.
        None if entry.symlink_target.is_some() || entry.file_type == FileType::Symlink => {
            FileKind::Symlink
        }
        None => match entry.file_type {
            FileType::File => FileKind::File,
            FileType::Directory => FileKind::Directory,
            _ => FileKind::Other,
        },
    }
}

/// The entry's own permission bits, set-user-ID, set-group-ID and sticky
/// bits included (`0o7777` mask).
pub(crate) fn mode_of(entry: &EntryInfo) -> u32 {
    let Some(letters) = type_letters(&entry.permissions) else {
        return entry.mode & 0o777;
    };
    let rwx = &entry.permissions[entry.permissions.len() - 9..];
    let mut mode = rwx
        .bytes()
        .fold(0, |bits, byte| (bits << 1) | u32::from(byte != b'-'));
    for (letter, bit) in [('u', 0o4000), ('g', 0o2000), ('t', 0o1000)] {
        if letters.contains(letter) {
            mode |= bit;
        }
    }
    mode
}

/// The leading letters of a Go mode string (`-` when there are none), or
/// `None` when the string is not one (too short, or its last nine
/// characters are not `rwx` / `-`).
fn type_letters(permissions: &str) -> Option<&str> {
    let split = permissions.len().checked_sub(9)?;
    if split == 0 || !permissions.is_char_boundary(split) {
        return None;
    }
    let (letters, rwx) = permissions.split_at(split);
    let valid = rwx
        .bytes()
        .zip(b"rwxrwxrwx")
        .all(|(byte, &letter)| byte == b'-' || byte == letter);
    valid.then_some(letters)
}

/// Modification time; an entry without one (envd omits a zero mtime) is
/// the epoch.
fn modified(entry: &EntryInfo) -> SystemTime {
    let Some(time) = entry.modified else {
        return UNIX_EPOCH;
    };
    let nanos = Duration::from_nanos(u64::try_from(time.subsec_nanosecond()).unwrap_or(0));
    match u64::try_from(time.as_second()) {
        Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs) + nanos,
        Err(_) => UNIX_EPOCH - Duration::from_secs(time.as_second().unsigned_abs()) + nanos,
    }
}

/// Projects `entry`; `symlink_target` is the link's stored text when
/// `entry` describes a symlink itself (`lstat`), `None` otherwise.
pub(crate) fn project(entry: &EntryInfo, symlink_target: Option<String>) -> Metadata {
    Metadata {
        kind: kind_of(entry),
        size: entry.size,
        mode: mode_of(entry),
        modified: modified(entry),
        symlink_target,
        version: version_of(entry),
    }
}

/// A short name of a non-regular, non-directory entry, for messages.
pub(crate) fn other_kind_name(entry: &EntryInfo) -> &'static str {
    let letters = type_letters(&entry.permissions).unwrap_or("");
    if letters.contains('p') {
        "FIFO"
    } else if letters.contains('S') {
        "socket"
    } else if letters.contains('c') {
        "character device"
    } else if letters.contains('D') {
        "block device"
    } else {
        "special file"
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An entry as envd reports it, for unit tests.
    pub(crate) fn entry(permissions: &str, mode: u32) -> EntryInfo {
        EntryInfo {
            name: "x".into(),
            file_type: FileType::File,
            path: "/w/x".into(),
            size: 5,
            mode,
            permissions: permissions.into(),
            owner: "user".into(),
            group: "user".into(),
            modified: Some(jiff::Timestamp::new(1_700_000_000, 123).unwrap()),
            symlink_target: None,
            metadata: Default::default(),
        }
    }

    #[test]
    fn kinds_come_from_the_mode_string() {
        let cases = [
            ("-rw-r--r--", FileKind::File),
            ("urwxr-xr-x", FileKind::File),
            ("drwxr-xr-x", FileKind::Directory),
            ("dtrwxrwxrwx", FileKind::Directory),
            ("dgrwxr-xr-x", FileKind::Directory),
            ("Lrwxrwxrwx", FileKind::Symlink),
            ("prw-r--r--", FileKind::Other),
            ("Dcrw-rw-rw-", FileKind::Other),
            ("Drw-rw----", FileKind::Other),
            ("Srwxr-xr-x", FileKind::Other),
        ];
        for (permissions, kind) in cases {
            assert_eq!(kind_of(&entry(permissions, 0)), kind, "{permissions}");
        }
    }

    #[test]
    fn modes_carry_special_bits_from_the_mode_string() {
        let cases = [
            ("-rw-r--r--", 0o644),
            ("-rwxr-x--x", 0o751),
            ("grwxr-xr-x", 0o2755),
            ("urwxr-xr-x", 0o4755),
            ("dtrwxrwxrwx", 0o1777),
            ("dugtrwx------", 0o7700),
            ("Lrwxrwxrwx", 0o777),
        ];
        for (permissions, mode) in cases {
            assert_eq!(mode_of(&entry(permissions, 0o644)), mode, "{permissions}");
        }
    }

    #[test]
    fn without_a_mode_string_the_numeric_fields_are_used() {
        let mut bare = entry("", 0o640);
        assert_eq!(mode_of(&bare), 0o640);
        assert_eq!(kind_of(&bare), FileKind::File);
        bare.file_type = FileType::Directory;
        assert_eq!(kind_of(&bare), FileKind::Directory);
        bare.symlink_target = Some("/w/y".into());
        assert_eq!(kind_of(&bare), FileKind::Symlink);
        assert_eq!(mode_of(&entry("garbage!!!", 0o600)), 0o600);
    }

    #[test]
    fn projection_keeps_size_time_and_link_text() {
        let meta = project(&entry("-rw-r--r--", 0o644), None);
        assert_eq!(meta.size, 5);
        assert_eq!(
            meta.modified,
            UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_nanos(123)
        );
        let link = project(&entry("Lrwxrwxrwx", 0o644), Some("target".into()));
        assert_eq!(link.kind, FileKind::Symlink);
        assert_eq!(link.symlink_target.as_deref(), Some("target"));
        let mut timeless = entry("-rw-r--r--", 0o644);
        timeless.modified = None;
        assert_eq!(project(&timeless, None).modified, UNIX_EPOCH);
    }
}
