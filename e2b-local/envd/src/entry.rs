//! `EntryInfo` as envd builds it (docs/e2b-protocol.md §6.2): `lstat`-based, a symlink reported as
//! its target's type and permission bits (a dangling one as UNSPECIFIED), Go's mode string, owner
//! names, and `user.e2b.*` metadata.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use buffa::{EnumValue, MessageField};
use buffa_types::google::protobuf::Timestamp;
use envd_proto::filesystem::{EntryInfo, FileType};

use crate::paths::base_name;
use crate::users::OwnerNames;
use crate::xattr;

/// Builds the entry for `path` (kept as given in `EntryInfo.path`). A missing path is an
/// `io::ErrorKind::NotFound` error; metadata is best effort (unreadable xattrs are left out).
pub(crate) fn entry_info(path: &Path, names: &OwnerNames) -> io::Result<EntryInfo> {
    let meta = std::fs::symlink_metadata(path)?;
    let file_type = meta.file_type();
    let (kind, mode, symlink_target) = if file_type.is_symlink() {
        // envd reports the fully resolved target, or the link itself when it cannot resolve.
        let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        match std::fs::metadata(&target) {
            Ok(target_meta) => (
                kind_of(&target_meta.file_type()),
                target_meta.mode() & 0o777,
                Some(target),
            ),
            Err(_) => (FileType::FILE_TYPE_UNSPECIFIED, 0, Some(target)),
        }
    } else {
        (kind_of(&file_type), meta.mode() & 0o777, None)
    };
    let modified_time = if meta.mtime() == 0 && meta.mtime_nsec() == 0 {
        MessageField::none()
    } else {
        MessageField::some(Timestamp {
            seconds: meta.mtime(),
            nanos: i32::try_from(meta.mtime_nsec()).unwrap_or(0),
            ..Default::default()
        })
    };
    Ok(EntryInfo {
        name: base_name(path),
        r#type: EnumValue::Known(kind),
        path: path.to_string_lossy().into_owned(),
        size: i64::try_from(meta.size()).unwrap_or(i64::MAX),
        mode,
        permissions: go_mode_string(meta.mode()),
        owner: names.user(meta.uid()),
        group: names.group(meta.gid()),
        modified_time,
        symlink_target: symlink_target.map(|target| target.to_string_lossy().into_owned()),
        metadata: xattr::read(path).unwrap_or_default().into_iter().collect(),
        ..Default::default()
    })
}

fn kind_of(file_type: &std::fs::FileType) -> FileType {
    if file_type.is_file() {
        FileType::FILE_TYPE_FILE
    } else if file_type.is_dir() {
        FileType::FILE_TYPE_DIRECTORY
    } else {
        FileType::FILE_TYPE_UNSPECIFIED
    }
}

/// Go's `os.FileMode.String()` for a Unix `st_mode`: type and special-bit letters from
/// `dalTLDpSugct?` (or `-` when none apply), then `rwxrwxrwx`.
pub(crate) fn go_mode_string(st_mode: u32) -> String {
    let format = st_mode & libc::S_IFMT;
    // Letters in Go's order: d a l T L D p S u g c t ?
    let mut letters = String::new();
    let is = |kind: u32| format == kind;
    if is(libc::S_IFDIR) {
        letters.push('d');
    }
    if is(libc::S_IFLNK) {
        letters.push('L');
    }
    if is(libc::S_IFBLK) || is(libc::S_IFCHR) {
        letters.push('D');
    }
    if is(libc::S_IFIFO) {
        letters.push('p');
    }
    if is(libc::S_IFSOCK) {
        letters.push('S');
    }
    if st_mode & libc::S_ISUID != 0 {
        letters.push('u');
    }
    if st_mode & libc::S_ISGID != 0 {
        letters.push('g');
    }
    if is(libc::S_IFCHR) {
        letters.push('c');
    }
    if st_mode & libc::S_ISVTX != 0 {
        letters.push('t');
    }
    if letters.is_empty() {
        letters.push('-');
    }
    const RWX: &[u8; 9] = b"rwxrwxrwx";
    for (bit, letter) in RWX.iter().enumerate() {
        let mask = 1 << (8 - bit);
        letters.push(if st_mode & mask != 0 {
            char::from(*letter)
        } else {
            '-'
        });
    }
    letters
}

/// True if `err` means the file is simply not there.
pub(crate) fn is_not_found(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn go_mode_strings() {
        assert_eq!(go_mode_string(libc::S_IFREG | 0o644), "-rw-r--r--");
        assert_eq!(go_mode_string(libc::S_IFDIR | 0o755), "drwxr-xr-x");
        assert_eq!(go_mode_string(libc::S_IFLNK | 0o777), "Lrwxrwxrwx");
        assert_eq!(
            go_mode_string(libc::S_IFDIR | libc::S_ISVTX | 0o777),
            "dtrwxrwxrwx"
        );
        assert_eq!(go_mode_string(libc::S_IFCHR | 0o666), "Dcrw-rw-rw-");
        assert_eq!(
            go_mode_string(libc::S_IFREG | libc::S_ISUID | 0o755),
            "urwxr-xr-x"
        );
        assert_eq!(go_mode_string(libc::S_IFIFO | 0o600), "prw-------");
    }

    #[test]
    fn symlinks_report_their_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("file.txt");
        std::fs::write(&file, b"hello").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("missing"), &dangling).expect("symlink");
        let names = OwnerNames::default();

        let entry = entry_info(&link, &names).expect("stat link");
        assert_eq!(entry.r#type, EnumValue::Known(FileType::FILE_TYPE_FILE));
        assert_eq!(entry.mode, 0o640);
        assert_eq!(entry.permissions, "Lrwxrwxrwx");
        assert_eq!(
            entry.symlink_target.as_deref(),
            Some(std::fs::canonicalize(&file).unwrap().to_str().unwrap())
        );
        assert_eq!(entry.name, "link");

        let entry = entry_info(&dangling, &names).expect("stat dangling");
        assert_eq!(
            entry.r#type,
            EnumValue::Known(FileType::FILE_TYPE_UNSPECIFIED)
        );
        assert_eq!(entry.mode, 0);
        assert_eq!(entry.symlink_target.as_deref(), dangling.to_str());

        let entry = entry_info(&file, &names).expect("stat file");
        assert_eq!(entry.size, 5);
        assert!(entry.symlink_target.is_none());
        assert!(entry.modified_time.is_set());
        assert!(is_not_found(
            &entry_info(&dir.path().join("nope"), &names).unwrap_err()
        ));
    }
}
