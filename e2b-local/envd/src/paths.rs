//! envd's path rules (docs/e2b-protocol.md §5.4, §6.3): `~` expansion, relative paths joined to the
//! user's home (not the working directory), an empty path meaning the default working
//! directory, and `mkdir -p` with every created component chowned to the user.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::users::User;

/// Why a requested path cannot be resolved (answered as `invalid_argument` / HTTP 400).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PathError {
    #[error("path {0:?} contains a NUL byte")]
    Nul(String),
    #[error(
        "failed to expand path '{path}' for user '{user}': cannot expand user-specific home dir"
    )]
    UserHome { path: String, user: String },
}

/// Resolves `path` for `user` as envd does: empty → `default_workdir` (or the home directory),
/// `~`/`~/x` → under the home directory, relative → joined to the home directory and cleaned,
/// absolute → unchanged.
pub(crate) fn expand_and_resolve(
    path: &str,
    user: &User,
    default_workdir: Option<&Path>,
) -> Result<PathBuf, PathError> {
    if path.contains('\0') {
        return Err(PathError::Nul(path.to_owned()));
    }
    let path: String = if path.is_empty() {
        match default_workdir {
            Some(workdir) => workdir.to_string_lossy().into_owned(),
            None => String::new(),
        }
    } else {
        path.to_owned()
    };
    let home = user.home.to_string_lossy();
    let path = if let Some(rest) = path.strip_prefix('~') {
        if !rest.is_empty() && !rest.starts_with('/') && !rest.starts_with('\\') {
            return Err(PathError::UserHome {
                path,
                user: user.name.clone(),
            });
        }
        join(&home, rest)
    } else {
        path
    };
    if path.starts_with('/') {
        return Ok(PathBuf::from(path));
    }
    Ok(PathBuf::from(join(&home, &path)))
}

/// Go's `filepath.Join`: joins non-empty elements with `/` and cleans the result.
pub(crate) fn join(base: &str, rest: &str) -> String {
    match (base.is_empty(), rest.is_empty()) {
        (true, true) => String::new(),
        (true, false) => clean(rest),
        (false, true) => clean(base),
        (false, false) => clean(&format!("{base}/{rest}")),
    }
}

/// Go's `path.Clean`: removes repeated slashes, `.` elements, `..` elements with their parent,
/// and a trailing slash; an empty result is `.`.
pub(crate) fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| *last != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Go's `filepath.Base`: the last element after trailing slashes are removed; `/` for a root.
pub(crate) fn base_name(path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    let trimmed = {
        let mut end = bytes.len();
        while end > 0 && bytes[end - 1] == b'/' {
            end -= 1;
        }
        &bytes[..end]
    };
    if trimmed.is_empty() {
        return if bytes.is_empty() {
            ".".to_owned()
        } else {
            "/".to_owned()
        };
    }
    let start = trimmed
        .iter()
        .rposition(|b| *b == b'/')
        .map_or(0, |i| i + 1);
    OsStr::from_bytes(&trimmed[start..])
        .to_string_lossy()
        .into_owned()
}

/// Go's `filepath.Dir` for absolute paths: everything before the last element, cleaned.
pub(crate) fn parent(path: &Path) -> PathBuf {
    let text = path.to_string_lossy();
    match text.rfind('/') {
        Some(index) => PathBuf::from(clean(&text[..=index])),
        None => PathBuf::from("."),
    }
}

/// `mkdir -p` as envd does it: every missing component of `path` is created with mode 0755
/// (minus the umask) and chowned to `uid:gid`; existing components are left alone. A component
/// that exists but is not a directory fails with "path is a file".
pub(crate) fn ensure_dirs(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let mut chain = Vec::new();
    let mut current = PathBuf::from(clean(&path.to_string_lossy()));
    while current != Path::new("/") && current != Path::new(".") {
        let next = parent(&current);
        chain.push(current);
        current = next;
    }
    chain.reverse();
    for dir in chain {
        match std::fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("path is a file: {}", dir.display()),
                ));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                use std::os::unix::fs::DirBuilderExt;
                match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
                    Ok(()) => {}
                    Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(err) => {
                        return Err(io::Error::new(
                            err.kind(),
                            format!("failed to create directory {}: {err}", dir.display()),
                        ));
                    }
                }
                // Chown even when a concurrent request created it first: it may not have
                // chowned it yet, and chown is idempotent.
                std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(|err| {
                    io::Error::new(
                        err.kind(),
                        format!("failed to chown directory {}: {err}", dir.display()),
                    )
                })?;
            }
            Err(err) => {
                return Err(io::Error::new(
                    err.kind(),
                    format!("failed to stat directory {}: {err}", dir.display()),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> User {
        User {
            name: "user".to_owned(),
            uid: 1000,
            gid: 1000,
            home: PathBuf::from("/home/user"),
        }
    }

    #[test]
    fn resolves_like_envd() {
        let user = user();
        let resolve = |path: &str, workdir: Option<&str>| {
            expand_and_resolve(path, &user, workdir.map(Path::new))
                .map(|p| p.to_string_lossy().into_owned())
        };
        assert_eq!(resolve("", None).unwrap(), "/home/user");
        assert_eq!(resolve("", Some("/work")).unwrap(), "/work");
        assert_eq!(resolve("~", None).unwrap(), "/home/user");
        assert_eq!(resolve("~/a/../b", None).unwrap(), "/home/user/b");
        assert_eq!(resolve("a/b/", None).unwrap(), "/home/user/a/b");
        assert_eq!(resolve("../x", None).unwrap(), "/home/x");
        // Relative paths join the home, not the workdir.
        assert_eq!(resolve("x", Some("/work")).unwrap(), "/home/user/x");
        // Absolute paths are kept as requested.
        assert_eq!(resolve("/tmp/./a/", None).unwrap(), "/tmp/./a/");
        assert!(matches!(
            resolve("~root/x", None),
            Err(PathError::UserHome { .. })
        ));
        assert!(matches!(resolve("a\0b", None), Err(PathError::Nul(_))));
    }

    #[test]
    fn clean_matches_go() {
        for (input, want) in [
            ("", "."),
            ("/", "/"),
            ("//a//b/", "/a/b"),
            ("a/./b/..", "a"),
            ("/../a", "/a"),
            ("../../a", "../../a"),
            ("a/../..", ".."),
        ] {
            assert_eq!(clean(input), want, "clean({input:?})");
        }
    }

    #[test]
    fn base_and_parent_match_go() {
        assert_eq!(base_name(Path::new("/a/b/")), "b");
        assert_eq!(base_name(Path::new("/")), "/");
        assert_eq!(base_name(Path::new("a")), "a");
        assert_eq!(parent(Path::new("/a/b")), PathBuf::from("/a"));
        assert_eq!(parent(Path::new("/a")), PathBuf::from("/"));
    }

    #[test]
    fn ensure_dirs_creates_missing_components_and_rejects_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("a/b/c");
        ensure_dirs(&target, 0, 0).expect("mkdir -p");
        assert!(target.is_dir());
        ensure_dirs(&target, 0, 0).expect("idempotent");
        std::fs::write(dir.path().join("file"), b"x").expect("write");
        let err = ensure_dirs(&dir.path().join("file/sub"), 0, 0).unwrap_err();
        assert!(err.to_string().contains("path is a file"), "{err}");
    }
}
