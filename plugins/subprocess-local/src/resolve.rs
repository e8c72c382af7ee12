//! Executable lookup: absolute paths verified, bare names searched on a
//! `PATH` plus explicit extra directories, relative paths with `/` refused.
//!
//! Only absolute search directories are used. Empty or relative entries in
//! the ambient `PATH` (which a shell would resolve against the cwd) are
//! skipped: a command name must never resolve to whatever file sits in the
//! directory an agent happens to work in. Extra directories are the
//! caller's explicit input, so a relative one is an error, not a skip.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use dsh_plugin_api::{Error, ErrorKind, Result};
use rustix::fs::{Access, FileType};

/// Resolves `name` for `operation` (which prefixes every error message).
///
/// - An absolute `name` must be an existing, executable, non-directory file.
/// - A bare `name` is looked up in each absolute directory of `search_path`,
///   then of `extra`; the first executable regular file wins.
/// - Anything else (`bin/ls`, `./x`) is `InvalidInput`.
pub fn find_program(
    operation: &str,
    name: &str,
    search_path: &OsStr,
    extra: &[String],
) -> Result<PathBuf> {
    if name.is_empty() {
        return Err(Error::invalid_input(format!(
            "{operation}: empty program name"
        )));
    }
    if name.contains('\0') {
        return Err(Error::invalid_input(format!(
            "{operation}: program name {:?} contains NUL",
            name.replace('\0', "\\0")
        )));
    }
    for dir in extra {
        if !dir.starts_with('/') || dir.contains('\0') {
            return Err(Error::invalid_input(format!(
                "{operation}: extra search directory {dir:?} is not an absolute path"
            ))
            .with_subject(dir.replace('\0', "\\0")));
        }
    }
    if name.starts_with('/') {
        return verify(operation, Path::new(name)).map(|()| PathBuf::from(name));
    }
    if name.contains('/') {
        return Err(Error::invalid_input(format!(
            "{operation}: relative program path {name:?} contains '/'; use an absolute path or a bare name"
        ))
        .with_subject(name.to_owned()));
    }
    let dirs = std::env::split_paths(search_path)
        .filter(|dir| dir.is_absolute())
        .chain(extra.iter().map(PathBuf::from));
    let mut searched = Vec::new();
    for dir in dirs {
        let candidate = dir.join(name);
        if is_executable_file(&candidate) {
            return Ok(candidate);
        }
        searched.push(dir.display().to_string());
    }
    Err(Error::not_found(format!(
        "{operation}: command not found (searched {})",
        if searched.is_empty() {
            "no directories".to_owned()
        } else {
            searched.join(":")
        }
    ))
    .with_subject(name.to_owned()))
}

/// Checks that `path` is something `execve` can run.
fn verify(operation: &str, path: &Path) -> Result<()> {
    let subject = path.display().to_string();
    let stat = rustix::fs::stat(path).map_err(|errno| {
        Error::from_io(operation, &std::io::Error::from(errno)).with_subject(subject.clone())
    })?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => {
            return Err(Error::new(
                ErrorKind::IsADirectory,
                format!("{operation}: is a directory, not an executable"),
            )
            .with_subject(subject));
        }
        FileType::RegularFile => {}
        _ => {
            return Err(
                Error::invalid_input(format!("{operation}: not a regular file"))
                    .with_subject(subject),
            );
        }
    }
    rustix::fs::access(path, Access::EXEC_OK).map_err(|_| {
        Error::new(
            ErrorKind::PermissionDenied,
            format!("{operation}: not executable"),
        )
        .with_subject(subject)
    })
}

fn is_executable_file(path: &Path) -> bool {
    // Non-UTF-8 candidates are skipped: the seam reports paths as strings.
    if std::str::from_utf8(path.as_os_str().as_bytes()).is_err() {
        return false;
    }
    rustix::fs::stat(path).is_ok_and(|stat| {
        FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
            && rustix::fs::access(path, Access::EXEC_OK).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn find(name: &str, path: &str, extra: &[&str]) -> Result<PathBuf> {
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        find_program("resolve_executable", name, OsStr::new(path), &extra)
    }

    #[test]
    fn bare_names_are_searched_in_order_then_extra() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tool = dir.path().join("my-tool");
        std::fs::write(&tool, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let extra = dir.path().to_str().expect("utf-8");

        assert_eq!(
            find("sh", "/usr/bin:/bin", &[]).expect("sh").parent(),
            Some(Path::new("/usr/bin"))
        );
        assert_eq!(find("my-tool", "/usr/bin", &[extra]).expect("extra"), tool);
        let err = find("my-tool", "/usr/bin", &[]).expect_err("not on PATH");
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.message().contains("command not found"), "{err}");
    }

    #[test]
    fn relative_path_entries_are_skipped() {
        let err = find("sh", ".:bin::", &[]).expect_err("only relative entries");
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.message().contains("searched no directories"), "{err}");
        let err = find("sh", "/usr/bin", &["bin"]).expect_err("relative extra");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn absolute_paths_are_verified() {
        assert_eq!(
            find("/bin/sh", "", &[]).expect("sh"),
            PathBuf::from("/bin/sh")
        );
        assert_eq!(
            find("/no/such/tool", "", &[]).expect_err("missing").kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            find("/tmp", "", &[]).expect_err("dir").kind(),
            ErrorKind::IsADirectory
        );
        assert_eq!(
            find("/dev/null", "", &[]).expect_err("device").kind(),
            ErrorKind::InvalidInput
        );

        let dir = tempfile::tempdir().expect("tempdir");
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "data").expect("write");
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = find(plain.to_str().expect("utf-8"), "", &[]).expect_err("not executable");
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
        assert_eq!(err.subject(), plain.to_str());
    }

    #[test]
    fn malformed_names_are_invalid_input() {
        for name in ["", "bin/ls", "./ls", "ls\0"] {
            let err = find(name, "/bin", &[]).expect_err(name);
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{name:?}");
            assert!(err.message().starts_with("resolve_executable: "), "{err}");
        }
    }
}
