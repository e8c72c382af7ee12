//! Path strings as a caller gives them to a seam: the input checks every
//! provider applies, and POSIX joining and splitting of path strings.
//!
//! Nothing here resolves anything: `.`, `..` and symbolic links are left to
//! the provider's world (its kernel, or its canonicalisation), because only
//! the world knows what a component names.

use dsh_plugin_api::{Error, ErrorKind, Result};

use crate::ErrorContext;

/// Checks a caller-supplied path string: not empty, no NUL byte (neither
/// can name anything in a POSIX world). The error is `InvalidInput` naming
/// `op`; the NUL case names the offset and carries the path (with `\0`
/// shown as `\\0`) as its subject.
pub fn check(op: &'static str, path: &str) -> Result<()> {
    if path.is_empty() {
        return Err(Error::invalid_input(format!("{op}: the path is empty")));
    }
    if let Some(at) = path.bytes().position(|byte| byte == 0) {
        return Err(Error::invalid_input(format!(
            "{op}: the path contains a NUL byte at offset {at}"
        ))
        .with_subject(path.replace('\0', "\\0")));
    }
    Ok(())
}

/// What is wrong with `dir` as a cwd (absolute, no NUL byte), if anything:
/// a phrase completing "the cwd \"…\" …".
pub fn cwd_problem(dir: &str) -> Option<&'static str> {
    if dir.contains('\0') {
        Some("contains a NUL byte")
    } else if !dir.starts_with('/') {
        Some("is not an absolute path")
    } else {
        None
    }
}

/// Checks the `cwd` a caller gave for resolving `path`: `InvalidInput`
/// (`"<op>: the cwd \"…\" <problem>"`, see [`cwd_problem`]) with `path` (NUL
/// shown as `\\0`) as the subject.
pub fn check_cwd(op: &'static str, cwd: &str, path: &str) -> Result<()> {
    match cwd_problem(cwd) {
        Some(problem) => Err(
            Error::invalid_input(format!("{op}: the cwd {cwd:?} {problem}"))
                .with_subject(path.replace('\0', "\\0")),
        ),
        None => Ok(()),
    }
}

/// `path` made absolute against `base` (an absolute directory), after
/// [`check`]. Nothing is resolved.
pub fn absolute(op: &'static str, base: &str, path: &str) -> Result<String> {
    check(op, path)?;
    Ok(join(base, path))
}

/// `rel` joined to `base`; an absolute `rel` replaces `base` (as
/// [`std::path::Path::join`] does).
pub fn join(base: &str, rel: &str) -> String {
    if rel.starts_with('/') {
        rel.to_owned()
    } else if base.ends_with('/') {
        format!("{base}{rel}")
    } else {
        format!("{base}/{rel}")
    }
}

/// `dir` (without trailing slashes, except for `/` itself) joined with the
/// entry `name`: how a listing names its entries.
pub fn child(dir: &str, name: &str) -> String {
    let trimmed = dir.trim_end_matches('/');
    format!("{trimmed}/{name}")
}

/// The entry an absolute path names, as `(parent, name)`: the final
/// component is kept literally (a symlink there is the entry itself, as
/// `remove` and `rename` need), the parent as spelled (to be canonicalised).
/// `.` components and repeated or trailing slashes are ignored; a final
/// `..` or the root names no single directory entry and is refused
/// (`InvalidInput`), as `rm` refuses them.
pub fn entry(op: &impl ErrorContext, path: &str) -> Result<(String, String)> {
    let mut components: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    match components.pop() {
        None => Err(op.error(ErrorKind::InvalidInput, "refusing to operate on `/`")),
        Some("..") => Err(op.error(
            ErrorKind::InvalidInput,
            "the path ends in `..`, which names no single directory entry",
        )),
        Some(name) => Ok((format!("/{}", components.join("/")), name.to_owned())),
    }
}

/// The parent directory and final name of a canonical path; `/` has none
/// (it is a directory, never a file).
pub fn split_canonical(path: &str) -> Option<(&str, &str)> {
    let (parent, name) = path.rsplit_once('/')?;
    if name.is_empty() {
        return None;
    }
    Some((if parent.is_empty() { "/" } else { parent }, name))
}

/// Whether the canonical path `inner` is `outer` or lies below it,
/// component-wise (`/a/bc` is not inside `/a/b`).
pub fn is_within(outer: &str, inner: &str) -> bool {
    if outer == "/" {
        return inner.starts_with('/');
    }
    inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TestOp;

    const REMOVE: TestOp = TestOp {
        name: "remove",
        subject: "/x",
    };

    #[test]
    fn empty_and_nul_paths_are_invalid_input() {
        let err = check("stat", "").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(err.message(), "stat: the path is empty");
        let err = check("stat", "a\0b").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.message().contains("NUL byte at offset 1"), "{err}");
        assert_eq!(err.subject(), Some("a\\0b"));
    }

    #[test]
    fn relative_paths_join_the_base() {
        assert_eq!(absolute("stat", "/w", "a/b").unwrap(), "/w/a/b");
        assert_eq!(absolute("stat", "/w/", "a").unwrap(), "/w/a");
        assert_eq!(absolute("stat", "/w", "/x").unwrap(), "/x");
        assert_eq!(absolute("stat", "/", "x").unwrap(), "/x");
        assert_eq!(
            absolute("stat", "/w", "").unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(cwd_problem("rel"), Some("is not an absolute path"));
        assert_eq!(cwd_problem("/a\0"), Some("contains a NUL byte"));
        assert_eq!(cwd_problem("/a"), None);
        let err = check_cwd("resolve", "rel", "a\0b").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            err.message(),
            "resolve: the cwd \"rel\" is not an absolute path"
        );
        assert_eq!(err.subject(), Some("a\\0b"));
        check_cwd("resolve", "/w", "a").unwrap();
    }

    #[test]
    fn entries_split_off_their_final_name() {
        assert_eq!(
            entry(&REMOVE, "/a/b/./c/").unwrap(),
            ("/a/b".to_owned(), "c".to_owned())
        );
        assert_eq!(
            entry(&REMOVE, "/a/../b").unwrap(),
            ("/a/..".to_owned(), "b".to_owned())
        );
        assert_eq!(
            entry(&REMOVE, "/top").unwrap(),
            ("/".to_owned(), "top".to_owned())
        );
        for refused in ["/", "//", "/a/..", "/."] {
            let err = entry(&REMOVE, refused).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{refused}");
            assert!(err.message().starts_with("remove: "), "{err}");
        }
    }

    #[test]
    fn canonical_paths_split_and_nest_by_component() {
        assert_eq!(split_canonical("/a/b"), Some(("/a", "b")));
        assert_eq!(split_canonical("/a"), Some(("/", "a")));
        assert_eq!(split_canonical("/"), None);
        assert!(is_within("/a/b", "/a/b"));
        assert!(is_within("/a/b", "/a/b/c"));
        assert!(!is_within("/a/b", "/a/bc"));
        assert!(!is_within("/a/b", "/a"));
        assert!(is_within("/", "/anything"));
        assert_eq!(child("/w/", "x"), "/w/x");
        assert_eq!(child("/", "x"), "/x");
    }
}
