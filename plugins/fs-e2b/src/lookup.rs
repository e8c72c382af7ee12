//! Looking entries up: `stat` (following symlinks) and `lstat` (the entry
//! itself, with a symlink's stored text) from envd's `lstat`-based `Stat`.
//!
//! envd describes a symlink with its fully resolved absolute target
//! (`symlink_target`, or the link's own path when it does not resolve), so
//! following one costs one more `Stat` of that target; the text stored in
//! the link, which envd does not report, is read with `readlink` in the
//! sandbox.

use dsh_plugin_api::fs::{FileKind, Metadata};
use dsh_plugin_api::{ErrorKind, Result};
use e2b_client::EntryInfo;

use crate::errors::Op;
use crate::meta::{kind_of, project};
use crate::world::{EnvdTransport, World, command_failed, nul_fields};

/// An entry reached through every symlink on its way: where it is and what
/// envd says of it (never a symlink).
#[derive(Debug, Clone)]
pub(crate) struct Followed {
    /// The path envd was asked about: the caller's path, or a link's
    /// resolved target.
    pub path: String,
    pub entry: EntryInfo,
}

impl<T: EnvdTransport> World<T> {
    /// What `entry` (envd's answer for `path`) leads to: itself unless it is
    /// a symlink, else the link's resolved target; `None` when the link does
    /// not resolve (dangling, a loop, or replaced meanwhile).
    pub(crate) async fn follow(
        &self,
        op: Op<'_>,
        path: &str,
        entry: EntryInfo,
    ) -> Result<Option<Followed>> {
        if kind_of(&entry) != FileKind::Symlink {
            return Ok(Some(Followed {
                path: path.to_owned(),
                entry,
            }));
        }
        let target = match entry.symlink_target {
            // envd names the link itself when it cannot resolve it.
            Some(target) if target != entry.path && target.starts_with('/') => target,
            _ => return Ok(None),
        };
        match self.stat(&target).await {
            Ok(resolved) if kind_of(&resolved) != FileKind::Symlink => Ok(Some(Followed {
                path: target,
                entry: resolved,
            })),
            Ok(_) => Ok(None),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(op.remote(&err)),
        }
    }

    /// `stat`: the entry `path` leads to, symlinks followed. A dangling link
    /// is `NotFound`.
    pub(crate) async fn stat_followed(&self, op: Op<'_>, path: &str) -> Result<Followed> {
        let entry = self.stat(path).await.map_err(|err| op.remote(&err))?;
        self.follow(op, path, entry).await?.ok_or_else(|| {
            op.error(
                ErrorKind::NotFound,
                "the symbolic link does not resolve (its target does not exist, or the links form a loop)",
            )
        })
    }

    /// `lstat`: the entry `path` names itself; a symlink with the text
    /// stored in it.
    pub(crate) async fn lstat(&self, op: Op<'_>, path: &str) -> Result<Metadata> {
        let entry = self.stat(path).await.map_err(|err| op.remote(&err))?;
        let text = if kind_of(&entry) == FileKind::Symlink {
            Some(self.link_text(op, path).await?)
        } else {
            None
        };
        Ok(project(&entry, text))
    }

    /// The text stored in the symlink `path` (`readlink`, NUL-framed); shown
    /// lossily if it is not UTF-8.
    pub(crate) async fn link_text(&self, op: Op<'_>, path: &str) -> Result<String> {
        let command = self.shell.exec("readlink", ["-v", "-z", "--", path]);
        let output = self.control(op, &command).await?;
        if !output.status.success() {
            // Not a link any more (replaced meanwhile) or gone.
            return Err(command_failed(op, "reading the symbolic link", &output));
        }
        match nul_fields(&output.stdout).as_deref() {
            Some([text]) => Ok(String::from_utf8_lossy(text).into_owned()),
            _ => Err(op.error(
                ErrorKind::Io,
                "readlink printed something other than one NUL-terminated target",
            )),
        }
    }
}
