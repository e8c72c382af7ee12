//! Volumes as the API names them: a volume's name, and a path inside a volume made absolute and
//! normal (the content API's paths and `volumeMounts`' mount points).

use std::io;

/// The longest volume name.
pub const MAX_NAME_LEN: usize = 64;

/// Whether `name` can name a volume: 1 to [`MAX_NAME_LEN`] of `[A-Za-z0-9_-]` (what the SDKs
/// accept; no `.`, `/` or space, so a name is never a path).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `path` made absolute and free of `.`, `..` and repeated `/` (`..` stops at the root), as the
/// volume's clients name it. `InvalidInput` for an empty path or one holding NUL.
pub fn normalize(path: &str) -> io::Result<String> {
    if path.is_empty() || path.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid path {path:?}: expected a non-empty path without NUL"),
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_words() {
        for good in ["data", "my-vol_2", &"x".repeat(MAX_NAME_LEN)] {
            assert!(is_valid_name(good), "{good}");
        }
        for bad in [
            "",
            "vol name",
            "vol.name",
            "vol/a",
            "{x}",
            "..",
            &"x".repeat(65),
        ] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn paths_are_normalized_inside_the_root() {
        for (given, expected) in [
            ("/", "/"),
            ("a/b", "/a/b"),
            ("/a//b/./c/", "/a/b/c"),
            ("/../../etc/passwd", "/etc/passwd"),
            ("/a/../..", "/"),
        ] {
            assert_eq!(normalize(given).unwrap(), expected, "{given}");
        }
        assert!(normalize("").is_err());
        assert!(normalize("a\0b").is_err());
    }
}
