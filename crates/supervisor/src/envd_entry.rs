//! An entry as envd describes it (`EntryInfo`, docs/e2b-protocol.md §6.2)
//! and `dsh-fs-e2b`'s version of that description: one formula for the
//! provider, which hashes what envd answers, and for `dsh-supervisor world`,
//! which describes the entries it meets in the sandbox the same way, so a
//! walked entry's version is its `lstat`'s (docs/design.md §5.1).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// envd's `EntryInfo` fields that describe an entry's state (not its name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryState<'a> {
    /// envd's file type code: 0 unspecified, 1 file, 2 directory (a
    /// symlink is reported as its target's type).
    pub type_code: i32,
    /// Go's `os.FileMode.String()` of the entry's own `st_mode`.
    pub permissions: &'a str,
    /// The `0o777` bits (a symlink's: its target's).
    pub mode: u32,
    pub size: u64,
    pub owner: &'a str,
    pub group: &'a str,
    /// mtime (seconds, nanoseconds); `None` when envd omits it (zero).
    pub modified: Option<(i64, i32)>,
    /// envd's resolved symlink target.
    pub symlink_target: Option<&'a str>,
    /// The `user.e2b.*` extended attributes, without the prefix.
    pub metadata: &'a BTreeMap<String, String>,
}

/// How many bytes of the digest a version keeps (128 bits: collisions are
/// not a practical concern, and the token stays short).
const VERSION_BYTES: usize = 16;

impl EntryState<'_> {
    /// The version token of this state: a SHA-256 of every field,
    /// length-prefixed, cut to 128 bits, in hex.
    pub fn version(&self) -> String {
        let mut hash = Sha256::new();
        let mut field = |bytes: &[u8]| {
            // Length-prefixed, so no two field lists hash alike.
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        field(&self.type_code.to_le_bytes());
        field(self.permissions.as_bytes());
        field(&self.mode.to_le_bytes());
        field(&self.size.to_le_bytes());
        field(self.owner.as_bytes());
        field(self.group.as_bytes());
        match self.modified {
            Some((seconds, nanos)) => {
                field(&seconds.to_le_bytes());
                field(&nanos.to_le_bytes());
            }
            None => field(b"no mtime"),
        }
        field(self.symlink_target.unwrap_or("").as_bytes());
        field(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in self.metadata {
            field(key.as_bytes());
            field(value.as_bytes());
        }
        let digest = hash.finalize();
        // By nibble, not `write!`: the formatter was about 3.5% of a
        // 1,000-entry listing's time in the sandbox.
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut token = String::with_capacity(VERSION_BYTES * 2);
        for byte in &digest[..VERSION_BYTES] {
            token.push(char::from(DIGITS[usize::from(byte >> 4)]));
            token.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        token
    }
}

/// Go's `os.FileMode.String()` for a Unix `st_mode`, as envd renders
/// `EntryInfo.permissions`: type and special-bit letters in Go's order
/// (`d`, `L`, `D`, `p`, `S`, `u`, `g`, `c`, `t`; `-` when none apply),
/// then `rwxrwxrwx`.
pub fn go_mode_string(st_mode: u32) -> String {
    const S_IFMT: u32 = 0o170_000;
    let format = st_mode & S_IFMT;
    let is = |kind: u32| format == kind;
    let (dir, chr, blk, fifo, lnk, sock) = (
        0o040_000, 0o020_000, 0o060_000, 0o010_000, 0o120_000, 0o140_000,
    );
    let mut letters = String::with_capacity(12);
    for (set, letter) in [
        (is(dir), 'd'),
        (is(lnk), 'L'),
        (is(blk) || is(chr), 'D'),
        (is(fifo), 'p'),
        (is(sock), 'S'),
        (st_mode & 0o4000 != 0, 'u'),
        (st_mode & 0o2000 != 0, 'g'),
        (is(chr), 'c'),
        (st_mode & 0o1000 != 0, 't'),
    ] {
        if set {
            letters.push(letter);
        }
    }
    if letters.is_empty() {
        letters.push('-');
    }
    for (bit, letter) in "rwxrwxrwx".chars().enumerate() {
        letters.push(if st_mode & (1 << (8 - bit)) != 0 {
            letter
        } else {
            '-'
        });
    }
    letters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_strings_are_gos() {
        assert_eq!(go_mode_string(0o100_644), "-rw-r--r--");
        assert_eq!(go_mode_string(0o040_755), "drwxr-xr-x");
        assert_eq!(go_mode_string(0o120_777), "Lrwxrwxrwx");
        assert_eq!(go_mode_string(0o041_777), "dtrwxrwxrwx");
        assert_eq!(go_mode_string(0o020_666), "Dcrw-rw-rw-");
        assert_eq!(go_mode_string(0o060_660), "Drw-rw----");
        assert_eq!(go_mode_string(0o104_755), "urwxr-xr-x");
        assert_eq!(go_mode_string(0o010_644), "prw-r--r--");
    }
}
