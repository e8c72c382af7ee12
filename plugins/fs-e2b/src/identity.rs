//! The world's one identity against an envd that may not keep it
//! (docs/design.md §5.1 identity).
//!
//! Every envd call names the world's user, but what envd does with that
//! name differs: E2B's own envd runs as root and performs file operations
//! with root's permissions whatever user a request names (it only chowns
//! what it creates; docs/e2b-protocol.md §9.1), while e2b-local's performs
//! them with the named user's permissions. Which one a sandbox runs is
//! asked once, on first need, of envd itself: listing the owner's runtime
//! root (root's alone, mode 0700, docs/design.md §6.4) as the world's user
//! is refused by an envd that acts as the user and served by one that acts
//! as root. Against the latter, operations that envd would perform beyond
//! the user's rights are checked or performed by internal commands as the
//! user: a read asks `test -r`, a listing `test -r -a -x`, and `mkdir`,
//! `remove` and `rename` run `mkdir -p`, `rm -rf` and `mv -T` as the user.
//! Metadata (`Stat`) stays envd's: it reveals no content, and a command per
//! `stat` would double the cost of the commonest call.

use dsh_plugin_api::{ErrorKind, Result};
use e2b_client::Error as EnvdError;

use crate::errors::Op;
use crate::world::{EnvdTransport, World, command_failed};

/// How envd performs file operations for the world's user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvdFileAccess {
    /// With that user's permissions (e2b-local): envd's answer is the
    /// user's.
    AsUser,
    /// With root's (E2B's envd): the provider must keep the user's limits.
    AsRoot,
}

/// What the world's user must be allowed to do with a path.
#[derive(Debug, Clone, Copy)]
pub(crate) enum UserAccess {
    /// Open a file for reading.
    Read,
    /// List a directory's entries with their metadata.
    List,
}

impl<T: EnvdTransport> World<T> {
    /// How envd acts for the world's user: probed once per provider (one
    /// `ListDir`), then remembered. A probe that fails for another reason
    /// (the sandbox is gone) is that operation's error and is tried again
    /// next time.
    pub(crate) async fn envd_file_access(&self, op: Op<'_>) -> Result<EnvdFileAccess> {
        let probe = async {
            match self
                .envd
                .list_dir(&self.runtime_root, 1, &self.fs_options)
                .await
            {
                Ok(_) => Ok(EnvdFileAccess::AsRoot),
                Err(EnvdError::PermissionDenied { .. }) => Ok(EnvdFileAccess::AsUser),
                Err(err) => Err(op.remote(&err)),
            }
        };
        self.file_access.get_or_try_init(|| probe).await.copied()
    }

    /// `PermissionDenied` unless the world's user may `access` `path`;
    /// nothing to ask when envd itself acts as that user. Follows symlinks,
    /// as opening or listing does.
    pub(crate) async fn require_user_access(
        &self,
        op: Op<'_>,
        access: UserAccess,
        path: &str,
    ) -> Result<()> {
        if self.envd_file_access(op).await? == EnvdFileAccess::AsUser {
            return Ok(());
        }
        let (args, may_not) = match access {
            UserAccess::Read => (vec!["-r", path], "read it"),
            UserAccess::List => (vec!["-r", path, "-a", "-x", path], "list it"),
        };
        let command = self.shell.exec("test", args);
        let output = self.control(op, &command).await?;
        if output.status.success() {
            Ok(())
        } else {
            Err(op.error(
                ErrorKind::PermissionDenied,
                format_args!("{path}: permission denied (the sandbox user may not {may_not})"),
            ))
        }
    }

    /// Runs `program ARGS…` as the world's user for a mutation envd would
    /// perform as root; a failure is classified from its stderr
    /// (`PermissionDenied`, `NotFound`, …) and names `what`.
    pub(crate) async fn mutate_as_user(
        &self,
        op: Op<'_>,
        what: &str,
        program: &str,
        args: &[&str],
    ) -> Result<()> {
        let command = self.shell.exec(program, args.iter().copied());
        let output = self.control(op, &command).await?;
        if output.status.success() {
            Ok(())
        } else {
            Err(command_failed(op, what, &output))
        }
    }
}
