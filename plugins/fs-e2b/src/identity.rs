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
//! as root. Against the latter, nothing that opens, creates, renames,
//! removes or enumerates goes through envd's file operations: each is
//! performed by a process as the user — reads, staged writes and their
//! publishing ([`crate::as_user`]), the names of a listing ([`crate::list`]),
//! and `mkdir`, `remove` and `rename` (`mkdir -p`, `rm -rf`, `mv -T`) —
//! never checked first and then done as root, since the user may change
//! the path in between. Metadata (`Stat`) stays envd's: it reveals no
//! content, and a command per `stat` would double the cost of the
//! commonest call.

use dsh_plugin_api::Result;
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

    /// Whether envd was found to act as root; `false` until probed. For
    /// work that runs after an operation probed it (clean-up, publishing).
    pub(crate) fn acts_as_root(&self) -> bool {
        self.file_access.get() == Some(&EnvdFileAccess::AsRoot)
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
