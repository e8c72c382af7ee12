//! Joining to a cwd (after the kit's input checks), and canonical identity
//! with `realpath -m` semantics.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use dsh_plugin_api::{ErrorKind, Result};
use dsh_provider_kit::paths::check;

use crate::errors::{Op, subject};

/// How many symbolic links one canonicalisation follows before it reports a
/// loop (Linux's own limit for a path walk).
const MAX_SYMLINK_FOLLOWS: usize = 40;

/// `path` made absolute against `base` (an absolute directory), after the
/// kit's [`check`]. Nothing is resolved: `..` and symlinks are left for the
/// kernel or for [`canonicalize`].
pub(crate) fn absolute(op: &'static str, base: &Path, path: &str) -> Result<PathBuf> {
    check(op, path)?;
    Ok(base.join(path))
}

/// The canonical form of the absolute path `path` with `realpath -m`
/// semantics: every existing component is resolved (symbolic links
/// followed, `.` and `..` applied physically), components that do not exist
/// (or lie under a non-directory) are kept as spelled, and `..` after a
/// missing component removes it lexically.
///
/// Costs one `lstat` per existing component (plus a `readlink` per link),
/// like `realpath(3)`. Errors other than "missing" (permission denied on a
/// component, a symlink loop) are reported against `op`.
pub(crate) fn canonicalize(op: Op<'_>, path: &Path) -> Result<PathBuf> {
    debug_assert!(path.is_absolute(), "canonicalize needs an absolute path");
    // Components still to walk, last first, so a symlink's target can be
    // spliced in front of the remainder.
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut out = PathBuf::from("/");
    let mut depth = 0_usize;
    // Depth of the first component found missing; below it nothing is
    // looked up until a `..` climbs back above it.
    let mut missing_from: Option<usize> = None;
    let mut follows = 0_usize;
    while let Some(component) = pending.pop() {
        if component == ".." {
            if out.pop() {
                depth -= 1;
            }
            if missing_from.is_some_and(|from| depth < from) {
                missing_from = None;
            }
            continue;
        }
        out.push(&component);
        depth += 1;
        if missing_from.is_some() {
            continue;
        }
        match fs::symlink_metadata(&out) {
            Ok(meta) if meta.file_type().is_symlink() => {
                follows += 1;
                if follows > MAX_SYMLINK_FOLLOWS {
                    return Err(op.error(
                        ErrorKind::Io,
                        format_args!(
                            "too many levels of symbolic links while resolving {}",
                            out.display()
                        ),
                    ));
                }
                let target = fs::read_link(&out)
                    .map_err(|err| op.io_at(format_args!("readlink {}", out.display()), &err))?;
                out.pop();
                depth -= 1;
                if target.is_absolute() {
                    out = PathBuf::from("/");
                    depth = 0;
                }
                push_components(&mut pending, &target);
            }
            Ok(_) => {}
            Err(err) if is_missing(&err) => missing_from = Some(depth),
            Err(err) => {
                return Err(op.io_at(format_args!("resolve {}", out.display()), &err));
            }
        }
    }
    Ok(out)
}

/// Pushes `path`'s components onto `stack` so the first one pops first.
fn push_components(stack: &mut Vec<OsString>, path: &Path) {
    let start = stack.len();
    for component in path.components() {
        match component {
            Component::Normal(name) => stack.push(name.to_os_string()),
            Component::ParentDir => stack.push(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    stack[start..].reverse();
}

/// Whether a lookup failure means "this component does not exist" for
/// `realpath -m` (absent, or under something that is not a directory).
fn is_missing(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// The canonical parent of `path` joined with its final name, *without*
/// following a symlink in the final component — the object `remove` and
/// `rename` act on. Refuses `/` and a final `..` (as `rm` does), which name
/// no single entry of a directory.
pub(crate) fn entry(op: Op<'_>, path: &Path) -> Result<PathBuf> {
    match path.components().next_back() {
        Some(Component::Normal(name)) => {
            let parent = path.parent().unwrap_or(Path::new("/"));
            Ok(canonicalize(op, parent)?.join(name))
        }
        Some(Component::ParentDir) => Err(op.error(
            ErrorKind::InvalidInput,
            "the path ends in `..`, which names no single directory entry",
        )),
        _ => Err(op.error(ErrorKind::InvalidInput, "refusing to operate on `/`")),
    }
}

/// Splits a canonical file path into its parent and final name, refusing `/`
/// (a directory, never a file).
pub(crate) fn split_file(op: Op<'_>, canonical: &Path) -> Result<(PathBuf, OsString)> {
    match (canonical.parent(), canonical.file_name()) {
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), name.to_os_string())),
        _ => Err(op.error(ErrorKind::IsADirectory, "`/` is a directory")),
    }
}

/// The path as a `String`, or `InvalidInput` when a resolved component (a
/// symlink's target) is not UTF-8 and so cannot cross the seam losslessly.
pub(crate) fn into_string(op: Op<'_>, path: PathBuf) -> Result<String> {
    path.into_os_string().into_string().map_err(|raw| {
        op.error(
            ErrorKind::InvalidInput,
            format_args!(
                "the resolved path {} is not valid UTF-8",
                subject(Path::new(&raw))
            ),
        )
    })
}

/// A directory entry's name as text. Names on disk need not be UTF-8; such a
/// name is shown with U+FFFD in place of the invalid bytes (it can then not
/// be used to address the entry, which the `list` docs state).
pub(crate) fn name_string(name: &OsStr) -> String {
    match name.to_str() {
        Some(text) => text.to_owned(),
        None => String::from_utf8_lossy(name.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_join_the_base() {
        let base = Path::new("/w");
        assert_eq!(absolute("stat", base, "a/b").unwrap(), Path::new("/w/a/b"));
        assert_eq!(absolute("stat", base, "/x").unwrap(), Path::new("/x"));
    }

    #[test]
    fn missing_components_are_kept_and_dotdot_applies_lexically_below_them() {
        let op = Op::new("resolve", Path::new("/"));
        let missing = "/nonexistent-dsh-test-root";
        assert_eq!(
            canonicalize(op, Path::new(&format!("{missing}/a/./b/../c"))).unwrap(),
            Path::new(&format!("{missing}/a/c"))
        );
        assert_eq!(
            canonicalize(op, Path::new(&format!("{missing}/../tmp"))).unwrap(),
            fs::canonicalize("/tmp").unwrap()
        );
        assert_eq!(canonicalize(op, Path::new("/..")).unwrap(), Path::new("/"));
    }

    #[test]
    fn entry_refuses_root_and_trailing_dotdot() {
        let op = Op::new("remove", Path::new("/"));
        assert_eq!(
            entry(op, Path::new("/")).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            entry(op, Path::new("/tmp/x/..")).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }
}
