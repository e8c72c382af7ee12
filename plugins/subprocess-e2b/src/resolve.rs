//! `resolve_executable`: absolute paths verified, bare names searched on
//! the sandbox user's `PATH` plus explicit extra directories, relative
//! paths with `/` refused — decided inside the sandbox, as the sandbox
//! user, by the helper.
//!
//! Only absolute directories are searched: empty or relative `PATH`
//! entries (which a shell would resolve against the cwd) are skipped, and
//! a relative extra directory is an error (it is the caller's input).

use std::sync::Arc;

use dsh_plugin_api::{Error, Result};

use crate::errors::{self, StartContext};
use crate::transport::EnvdTransport;
use crate::wire::{ResolveRequest, Stage};
use crate::world::World;

const OP: &str = "resolve_executable";

/// Checks what must never reach the sandbox.
pub fn validate(name: &str, extra: &[String]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid_input(format!("{OP}: empty program name")));
    }
    if name.contains('\0') {
        return Err(Error::invalid_input(format!(
            "{OP}: program name {:?} contains NUL",
            name.replace('\0', "\\0")
        )));
    }
    for dir in extra {
        if !dir.starts_with('/') || dir.contains('\0') {
            return Err(Error::invalid_input(format!(
                "{OP}: extra search directory {dir:?} is not an absolute path"
            ))
            .with_subject(dir.replace('\0', "\\0")));
        }
    }
    if !name.starts_with('/') && name.contains('/') {
        return Err(Error::invalid_input(format!(
            "{OP}: relative program path {name:?} contains '/'; use an absolute path or a bare name"
        ))
        .with_subject(name.to_owned()));
    }
    Ok(())
}

/// Resolves `name` (see the module docs).
pub async fn resolve<T: EnvdTransport>(
    world: &Arc<World<T>>,
    name: &str,
    extra: &[String],
) -> Result<String> {
    validate(name, extra)?;
    world.check_open(OP)?;
    let ready = world.ready(OP).await?;
    let mut search = dsh_supervisor::ambient::search_dirs(ready.setup.ambient.path());
    search.extend(extra.iter().cloned());
    let request = ResolveRequest {
        identity: ready.setup.identity.clone(),
        name: name.to_owned(),
        search: search.clone(),
    };
    match ready.control.resolve(&request).await {
        Ok(Ok(path)) => Ok(path),
        Ok(Err((errno, _))) => Err(errors::start_failure(
            StartContext {
                operation: OP,
                program: name,
                cwd: "",
                search: &search,
            },
            Stage::Program,
            errno,
            name,
        )),
        Err(err) => Err(err.into_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::ErrorKind;

    #[test]
    fn malformed_names_are_invalid_input_before_anything_is_sent() {
        for name in ["", "bin/ls", "./ls", "../bin/ls", "ls\0"] {
            let err = validate(name, &[]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{name:?}");
            assert!(err.message().starts_with("resolve_executable: "), "{err}");
        }
        let err = validate("ls", &["bin".to_owned()]).unwrap_err();
        assert_eq!(err.subject(), Some("bin"));
        validate("ls", &["/opt/bin".to_owned()]).unwrap();
        validate("/bin/ls", &[]).unwrap();
    }
}
