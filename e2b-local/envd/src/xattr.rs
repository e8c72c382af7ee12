//! File metadata stored as `user.e2b.<key>` extended attributes (envd ≥ 0.6.2): validation of
//! `X-Metadata-*` uploads, replacement on write, and reading back for `EntryInfo.metadata`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::XattrFlags;

/// The xattr namespace envd keeps file metadata in.
pub(crate) const PREFIX: &str = "user.e2b.";
/// The longest key: the VFS limits a full xattr name to 255 bytes.
pub(crate) const MAX_KEY_LEN: usize = 255 - PREFIX.len();
/// The most metadata (prefixed names plus values) one file may carry: one ext4 block.
pub(crate) const MAX_TOTAL_LEN: usize = 4096;

/// Checks a metadata set before anything is written; the message names the offending key.
pub(crate) fn validate(metadata: &BTreeMap<String, String>) -> Result<(), String> {
    let mut total = 0;
    for (key, value) in metadata {
        if key.is_empty() {
            return Err("metadata key must not be empty".to_owned());
        }
        if key.len() > MAX_KEY_LEN {
            return Err(format!("metadata key {key:?} exceeds {MAX_KEY_LEN} bytes"));
        }
        printable_ascii("key", key)?;
        printable_ascii(&format!("value for key {key:?}"), value)?;
        total += PREFIX.len() + key.len() + value.len();
    }
    if total > MAX_TOTAL_LEN {
        return Err(format!(
            "total metadata size {total} exceeds {MAX_TOTAL_LEN} bytes"
        ));
    }
    Ok(())
}

fn printable_ascii(label: &str, text: &str) -> Result<(), String> {
    match text.bytes().position(|b| !(0x20..=0x7e).contains(&b)) {
        Some(offset) => Err(format!(
            "metadata {label} contains non-printable-ASCII byte 0x{:02x} at offset {offset}",
            text.as_bytes()[offset]
        )),
        None => Ok(()),
    }
}

/// True for the errors a filesystem without xattr support returns.
pub(crate) fn is_unsupported(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOTSUP) | Some(libc::ENOSYS))
}

fn split_names(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    list.split(|b| *b == 0).filter(|name| !name.is_empty())
}

/// Reads the `user.e2b.*` attributes of `path` (following symlinks), prefix stripped. Entries
/// that are not UTF-8 are skipped; a filesystem without xattrs yields an empty map.
pub(crate) fn read(path: &Path) -> io::Result<BTreeMap<String, String>> {
    let mut metadata = BTreeMap::new();
    let list = match list_path(path) {
        Ok(list) => list,
        Err(err) if is_unsupported(&err) => return Ok(metadata),
        Err(err) => return Err(err),
    };
    for name in split_names(&list) {
        let Some(key) = name.strip_prefix(PREFIX.as_bytes()) else {
            continue;
        };
        let Ok(key) = std::str::from_utf8(key) else {
            continue;
        };
        let value = match get_path(path, name) {
            Ok(value) => value,
            Err(err) if err.raw_os_error() == Some(libc::ENODATA) => continue,
            Err(err) => return Err(err),
        };
        if let Ok(value) = String::from_utf8(value) {
            metadata.insert(key.to_owned(), value);
        }
    }
    Ok(metadata)
}

fn list_path(path: &Path) -> io::Result<Vec<u8>> {
    loop {
        let size = rustix::fs::listxattr_query(path)?;
        let mut buf = vec![0u8; size];
        match rustix::fs::listxattr(path, &mut buf[..]) {
            Ok(len) => {
                buf.truncate(len);
                return Ok(buf);
            }
            // The list grew between the two calls: ask again.
            Err(rustix::io::Errno::RANGE) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

fn get_path(path: &Path, name: &[u8]) -> io::Result<Vec<u8>> {
    let name = OsStr::from_bytes(name);
    loop {
        let size = rustix::fs::getxattr_query(path, name)?;
        let mut buf = vec![0u8; size];
        match rustix::fs::getxattr(path, name, &mut buf[..]) {
            Ok(len) => {
                buf.truncate(len);
                return Ok(buf);
            }
            Err(rustix::io::Errno::RANGE) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

/// Replaces the metadata of the open file `fd` with `metadata`: stale `user.e2b.*` attributes
/// are removed (an overwrite keeps xattrs across `O_TRUNC`), the given ones are set.
pub(crate) fn replace(fd: impl AsFd, metadata: &BTreeMap<String, String>) -> io::Result<()> {
    let fd = fd.as_fd();
    let list = loop {
        let size = rustix::fs::flistxattr_query(fd)?;
        let mut buf = vec![0u8; size];
        match rustix::fs::flistxattr(fd, &mut buf[..]) {
            Ok(len) => {
                buf.truncate(len);
                break buf;
            }
            Err(rustix::io::Errno::RANGE) => continue,
            Err(err) => return Err(err.into()),
        }
    };
    for name in split_names(&list) {
        let Some(key) = name.strip_prefix(PREFIX.as_bytes()) else {
            continue;
        };
        let keep = std::str::from_utf8(key).is_ok_and(|key| metadata.contains_key(key));
        if keep {
            continue;
        }
        match rustix::fs::fremovexattr(fd, OsStr::from_bytes(name)) {
            Ok(()) | Err(rustix::io::Errno::NODATA) => {}
            Err(err) => return Err(err.into()),
        }
    }
    for (key, value) in metadata {
        rustix::fs::fsetxattr(
            fd,
            format!("{PREFIX}{key}").as_str(),
            value.as_bytes(),
            XattrFlags::empty(),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_rules() {
        let ok = BTreeMap::from([("k".to_owned(), "v w".to_owned())]);
        assert!(validate(&ok).is_ok());
        let empty = BTreeMap::from([(String::new(), "v".to_owned())]);
        assert!(validate(&empty).unwrap_err().contains("empty"));
        let long = BTreeMap::from([("k".repeat(MAX_KEY_LEN + 1), "v".to_owned())]);
        assert!(validate(&long).unwrap_err().contains("exceeds 246 bytes"));
        let control = BTreeMap::from([("k".to_owned(), "a\tb".to_owned())]);
        assert!(validate(&control).unwrap_err().contains("0x09 at offset 1"));
        let big: BTreeMap<String, String> =
            (0..5).map(|i| (format!("k{i}"), "v".repeat(900))).collect();
        assert!(validate(&big).unwrap_err().contains("total metadata size"));
    }

    #[test]
    fn replace_then_read_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let file = std::fs::File::create(&path).expect("create");
        let first = BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]);
        replace(&file, &first).expect("replace (the test filesystem must support user xattrs)");
        let second = BTreeMap::from([("b".to_owned(), "3".to_owned())]);
        replace(&file, &second).expect("replace again");
        let read = read(&path).expect("read");
        assert_eq!(read.len(), 1);
        assert_eq!(read.get("b").map(String::as_str), Some("3"));
    }
}
