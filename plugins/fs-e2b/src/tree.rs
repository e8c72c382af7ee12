//! Directory-tree mutations through envd, as users of the E2B SDK expect:
//! `mkdir -p` (`MakeDir`), recursive remove (`Remove`), rename with parent
//! creation (`Move`) — or, against an envd that would perform them as root,
//! the same through commands as the world's user (see [`crate::identity`]).

use dsh_plugin_api::fs::FileKind;
use dsh_plugin_api::{ErrorKind, Result};

use crate::errors::Op;
use crate::identity::EnvdFileAccess;
use crate::locks;
use crate::meta::kind_of;
use crate::world::{EnvdTransport, World};
use dsh_provider_kit::paths::{child, entry, is_within};

impl<T: EnvdTransport> World<T> {
    /// `mkdir`: creates `path` and its missing parents (mode 0755, owned by
    /// the envd user). An existing directory is success; an existing
    /// non-directory at `path` is `AlreadyExists`, one among its parents
    /// `NotADirectory`.
    pub(crate) async fn mkdir(&self, op: Op<'_>, path: &str) -> Result<()> {
        if self.envd_file_access(op).await? == EnvdFileAccess::AsRoot {
            return self
                .mutate_as_user(op, "mkdir", "mkdir", &["-p", "--", path])
                .await;
        }
        match self.envd.make_dir(path, &self.fs_options).await {
            Ok(_) | Err(e2b_client::Error::AlreadyExists { .. }) => Ok(()),
            Err(err) => Err(op.remote(&err)),
        }
    }

    /// `remove`: the entry `path` names (a symlink itself, never its
    /// target), recursively for a directory; `Ok(false)` when nothing was
    /// there. Holds the entry's lock, so it does not interleave with a
    /// write or edit of the same file through this process.
    pub(crate) async fn remove(&self, op: Op<'_>, path: &str) -> Result<bool> {
        let (parent, name) = entry(&op, path)?;
        let target = child(&self.canonical(op, &parent).await?, &name);
        let _lock = locks::lock(&self.sandbox_id, &target).await;
        if self.stat_if_exists(op, &target).await?.is_none() {
            return Ok(false);
        }
        if self.envd_file_access(op).await? == EnvdFileAccess::AsRoot {
            let args = ["-rf", "--", target.as_str()];
            self.mutate_as_user(op, "rm", "rm", &args).await?;
            return Ok(true);
        }
        self.envd
            .remove(&target, &self.fs_options)
            .await
            .map_err(|err| op.remote(&err))?;
        Ok(true)
    }

    /// `rename`: moves the entry `from` names (a symlink itself) to `to`,
    /// creating `to`'s missing parents; replaces an existing file at `to` as
    /// rename(2) does. Refused before anything changes: a missing source
    /// (`NotFound`) and a directory moved into itself (`InvalidInput`).
    pub(crate) async fn rename(&self, op: Op<'_>, from: &str, to: &str) -> Result<()> {
        let (from_parent, from_name) = entry(&op, from)?;
        let (to_parent, to_name) = entry(&Op::new(op.name, to), to)?;
        let parents = self.canonicalize(op, &[&from_parent, &to_parent]).await?;
        let source = child(&parents[0], &from_name);
        let dest = child(&parents[1], &to_name);
        let _locks = locks::lock_pair(&self.sandbox_id, &source, &dest).await;
        let Some(meta) = self.stat_if_exists(op, &source).await? else {
            return Err(op.error(ErrorKind::NotFound, "the source does not exist"));
        };
        if kind_of(&meta) == FileKind::Directory && dest != source && is_within(&source, &dest) {
            return Err(op.error(
                ErrorKind::InvalidInput,
                format_args!("cannot move directory {source} into itself ({dest})"),
            ));
        }
        if self.envd_file_access(op).await? == EnvdFileAccess::AsRoot {
            let parent = ["-p", "--", parents[1].as_str()];
            self.mutate_as_user(op, "creating the destination's parents", "mkdir", &parent)
                .await?;
            // `-T`: rename(2) onto `dest` itself, never into a directory there.
            let args = ["-f", "-T", "--", source.as_str(), dest.as_str()];
            return self.mutate_as_user(op, "mv", "mv", &args).await;
        }
        self.envd
            .rename(&source, &dest, &self.fs_options)
            .await
            .map_err(|err| op.remote(&err))?;
        Ok(())
    }
}
