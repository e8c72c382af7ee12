//! [`World`]: the one sandbox a provider works in — its typed envd client,
//! how internal commands run there, and the tasks that must outlive a
//! dropped operation.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use dsh_e2b_gateway::{ControlOutput, ControlShell};
use dsh_plugin_api::{ErrorKind, Result};
use e2b_client::{
    CallOptions, ClientTransport, Command, DownloadOptions, EntryInfo, Envd, UploadOptions,
};
use http_body::Body;
use tokio::runtime::Handle;
use tokio_util::task::TaskTracker;

use crate::direct::UploadAttrs;
use crate::errors::Op;
use crate::identity::EnvdFileAccess;

/// What the provider needs of an envd transport: any `connectrpc`
/// transport whose response body `Envd` can read — the owner's
/// `OwnerTransport` in dsh, a direct `SandboxTransport` in tests and
/// embeddings.
pub trait EnvdTransport:
    ClientTransport<ResponseBody: Unpin + Body<Error: Display>> + Clone + Send + Sync + 'static
{
}

impl<T> EnvdTransport for T where
    T: ClientTransport<ResponseBody: Unpin + Body<Error: Display>> + Clone + Send + Sync + 'static
{
}

/// How long an internal command may run before envd kills it.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of an internal command's stdout (or stderr) is kept; beyond it
/// the output is truncated and the command's answer refused.
pub(crate) const CONTROL_OUTPUT_LIMIT: usize = 16 << 20;

/// One sandbox, as the provider's operations reach it. Shared (`Arc`)
/// between the provider and the detached tasks of its operations.
pub(crate) struct World<T> {
    /// Every envd call: filesystem RPCs, streams, transfers and commands.
    pub envd: Envd<T>,
    /// The world's user, whose permissions every user-facing operation has
    /// (docs/design.md §5.1): `Some(name)`, or `None` for envd's default
    /// user (an envd without one, below 0.4.0, gets `user`), whatever
    /// default `envd` itself was built with.
    pub user: Option<String>,
    /// The options of filesystem calls: as [`World::user`].
    pub fs_options: CallOptions,
    /// Internal commands, as [`World::user`] ([`ControlShell::acting_for`]):
    /// path resolution, staging, mode changes. Nothing else runs as root
    /// but the world-side supervisor's install and the supervisor itself
    /// (see [`crate::native`]).
    pub shell: ControlShell,
    /// Identifies the sandbox in the process-wide lock table.
    pub sandbox_id: Arc<str>,
    /// The owner's private directory, root's alone: what the probe of
    /// [`World::envd_file_access`] lists.
    pub runtime_root: String,
    /// How envd acts for the world's user, once probed (see
    /// [`crate::identity`]).
    pub file_access: tokio::sync::OnceCell<EnvdFileAccess>,
    /// What a fresh upload's file gets from this envd, once learned (see
    /// [`crate::direct`]).
    pub upload_attrs: std::sync::OnceLock<UploadAttrs>,
    /// Detached work (commits, staging clean-up) that must finish even when
    /// the operation that started it was dropped.
    pub tasks: TaskTracker,
    /// The supervisor answering world-side operations in the sandbox, once
    /// installed (`None`: it could not be; see [`crate::native`]).
    pub native: tokio::sync::OnceCell<Option<crate::native::Native>>,
    /// That supervisor's process serving the world-side operations, once
    /// started (see [`crate::native`]).
    pub resident: tokio::sync::Mutex<Option<Arc<crate::native::Resident>>>,
    /// How that process's stdin reaches envd, once probed.
    pub input_route: e2b_client::InputRouteCell,
    /// Replaced files that process held over their writes' renames (see
    /// [`crate::native::Hold`]).
    pub holds: std::sync::atomic::AtomicU64,
    /// Texts that process read (see [`World::read_text_native`]).
    pub native_reads: std::sync::atomic::AtomicU64,
    /// Edits that process stored (see [`World::edit_native`]).
    pub native_edits: std::sync::atomic::AtomicU64,
    /// Writes that process stored (see [`World::write_native`]).
    pub native_writes: std::sync::atomic::AtomicU64,
}

impl<T: EnvdTransport> World<T> {
    /// Options of a `/files` download: as [`World::user`].
    pub(crate) fn download_options(&self) -> DownloadOptions {
        match &self.user {
            Some(user) => DownloadOptions::default().user(user),
            None => DownloadOptions::default(),
        }
    }

    /// Options of a `/files` upload: as [`World::user`].
    pub(crate) fn upload_options(&self) -> UploadOptions {
        match &self.user {
            Some(user) => UploadOptions::default().user(user),
            None => UploadOptions::default(),
        }
    }

    /// `Stat` of `path` (`lstat` semantics), as [`World::user`].
    pub(crate) async fn stat(&self, path: &str) -> e2b_client::Result<EntryInfo> {
        self.envd.stat(path, &self.fs_options).await
    }

    /// `Stat` of `path`, `None` when it does not exist; other failures are
    /// errors of `op`.
    pub(crate) async fn stat_if_exists(&self, op: Op<'_>, path: &str) -> Result<Option<EntryInfo>> {
        match self.stat(path).await {
            Ok(entry) => Ok(Some(entry)),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(op.remote(&err)),
        }
    }

    /// Runs an internal command built by [`World::shell`] (as the
    /// world's user, no login shell, a fresh `HOME`: see [`ControlShell`])
    /// to its end. A non-zero exit is not an error here (callers give exit
    /// codes meaning); truncated output is. Dropping the future abandons the
    /// stream, not the command (see [`ControlShell::run`]).
    pub(crate) async fn control(&self, op: Op<'_>, command: &Command) -> Result<ControlOutput> {
        let output = self
            .shell
            .run(&self.envd, command, CONTROL_TIMEOUT, CONTROL_OUTPUT_LIMIT)
            .await
            .map_err(|err| op.remote(&err))?;
        if output.truncated {
            return Err(op.error(
                ErrorKind::Io,
                format_args!(
                    "an internal command ({}) printed more than {CONTROL_OUTPUT_LIMIT} bytes",
                    command.program()
                ),
            ));
        }
        Ok(output)
    }

    /// The runtime the current operation runs on, for work that must go on
    /// after the operation's future is dropped (a drop may happen outside
    /// any runtime context).
    pub(crate) fn handle() -> Handle {
        Handle::current()
    }
}

/// The error for an internal command that failed: its exit status and
/// what it printed on stderr.
pub(crate) fn command_failed(
    op: Op<'_>,
    what: &str,
    output: &ControlOutput,
) -> dsh_plugin_api::Error {
    let stderr = output.stderr_text();
    let kind = classify_stderr(&stderr);
    op.error(
        kind,
        format_args!(
            "{what} failed ({}){}{}",
            output.status.status,
            if stderr.is_empty() { "" } else { ": " },
            stderr
        ),
    )
}

/// The fs kind a command's error text names (coreutils print `strerror`).
fn classify_stderr(stderr: &str) -> ErrorKind {
    let text = stderr.to_ascii_lowercase();
    if text.contains("permission denied") || text.contains("operation not permitted") {
        ErrorKind::PermissionDenied
    } else if text.contains("not a directory") {
        ErrorKind::NotADirectory
    } else if text.contains("file exists") {
        ErrorKind::AlreadyExists
    } else if text.contains("no such file or directory") {
        ErrorKind::NotFound
    } else {
        ErrorKind::Io
    }
}

/// Splits NUL-terminated fields (`a\0b\0`; nothing is no field); `None`
/// unless the output is exactly that (every field terminated).
pub(crate) fn nul_fields(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let body = bytes.strip_suffix(b"\0")?;
    Some(body.split(|&byte| byte == 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_framing_is_strict() {
        assert_eq!(
            nul_fields(b"a\0b\nc\0\0").unwrap(),
            vec![&b"a"[..], b"b\nc", b""]
        );
        assert_eq!(nul_fields(b"x\0").unwrap(), vec![&b"x"[..]]);
        assert!(nul_fields(b"unterminated").is_none());
        assert!(nul_fields(b"").unwrap().is_empty());
    }

    #[test]
    fn command_errors_are_classified_from_stderr() {
        assert_eq!(
            classify_stderr("mkdir: cannot create directory 'x': Permission denied"),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            classify_stderr("realpath: x: Too many levels of symbolic links"),
            ErrorKind::Io
        );
        assert_eq!(
            classify_stderr("x: Not a directory"),
            ErrorKind::NotADirectory
        );
    }
}
