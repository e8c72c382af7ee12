//! `list`: one level of a directory from envd's `ListDir`, symlink entries
//! completed with their stored text and their resolved target; against an
//! envd acting as root, only the names the world's user's own `find` saw.

use std::collections::HashMap;

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::Result;
use dsh_plugin_api::fs::{DirEntry, FileKind};
use e2b_client::EntryInfo;
use futures::{StreamExt, TryStreamExt};

use crate::errors::Op;
use crate::identity::EnvdFileAccess;
use crate::meta::{kind_of, project};
use crate::world::{EnvdTransport, World, command_failed, nul_fields};
use dsh_provider_kit::paths::child;

/// How many symlink targets are looked up at once.
const LOOKUPS_IN_FLIGHT: usize = 16;

impl<T: EnvdTransport> World<T> {
    /// Lists `dir` (a symlink to a directory is followed): entries sorted
    /// by their name's bytes, each path `dir` joined with the name. A
    /// symlink entry carries the link itself (with its stored text) and,
    /// as `resolved`, its target's metadata — `None` when it does not
    /// resolve. One `ListDir`; with symlinks present, one command reading
    /// every link's text and one `Stat` per link target, concurrently. An
    /// entry removed while listing is skipped.
    ///
    /// Against an envd acting as root, which would list whatever the path
    /// leads to when it gets there, the names come from the world's user's
    /// own `find` instead (run alongside the `ListDir`, with every link's
    /// text): only entries that `find` saw are listed, with envd's metadata
    /// of them (metadata being envd's, as for `stat`), so a user who may
    /// not list `dir` gets `PermissionDenied` however the path changes.
    pub(crate) async fn list(&self, op: Op<'_>, dir: &str) -> Result<Vec<DirEntry>> {
        let as_root = self.envd_file_access(op).await? == EnvdFileAccess::AsRoot;
        let (mut entries, seen) = if as_root {
            let (entries, seen) = futures::future::join(
                self.envd.list_dir(dir, 1, &self.fs_options),
                self.names_and_links(op, dir, false),
            )
            .await;
            // envd's own refusal (missing, not a directory) comes first.
            (entries.map_err(|err| op.remote(&err))?, Some(seen?))
        } else {
            let entries = self.envd.list_dir(dir, 1, &self.fs_options).await;
            (entries.map_err(|err| op.remote(&err))?, None)
        };
        if let Some(seen) = &seen {
            entries.retain(|entry| seen.contains_key(entry.name.as_bytes()));
        }
        entries.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        let links: Vec<EntryInfo> = entries
            .iter()
            .filter(|entry| kind_of(entry) == FileKind::Symlink)
            .cloned()
            .collect();
        let (texts, resolved) = if links.is_empty() {
            (HashMap::new(), HashMap::new())
        } else if let Some(seen) = seen {
            (seen, self.resolve_links(op, links).await?)
        } else {
            futures::try_join!(
                self.names_and_links(op, dir, true),
                self.resolve_links(op, links)
            )?
        };
        let mut listed = Vec::with_capacity(entries.len());
        for entry in entries {
            let path = child(dir, &entry.name);
            let (text, target) = if kind_of(&entry) == FileKind::Symlink {
                let Some(text) = texts
                    .get(entry.name.as_bytes())
                    .filter(|text| !text.is_empty())
                else {
                    // Replaced or removed between the listing and the
                    // command that read the links.
                    continue;
                };
                let target = resolved
                    .get(&entry.name)
                    .and_then(|target| target.as_ref())
                    .map(|target| project(target, None));
                (Some(text.clone()), target)
            } else {
                (None, None)
            };
            listed.push(DirEntry {
                metadata: project(&entry, text),
                name: entry.name,
                path,
                resolved: target,
            });
        }
        Ok(listed)
    }

    /// The entries directly in `dir` as the world's user's `find` sees them
    /// (only its symlinks with `links_only`), by name, each with its stored
    /// link text (empty for what is not a symlink: a link's text never is).
    /// A directory the user may not read or search is `PermissionDenied`.
    async fn names_and_links(
        &self,
        op: Op<'_>,
        dir: &str,
        links_only: bool,
    ) -> Result<HashMap<Vec<u8>, String>> {
        let mut args = vec!["-H", dir, "-mindepth", "1", "-maxdepth", "1"];
        if links_only {
            args.extend(["-type", "l"]);
        }
        args.extend(["-printf", "%f\\0%l\\0"]);
        let command = self.shell.exec("find", args);
        let output = self.control(op, &command).await?;
        if !output.status.success() {
            return Err(command_failed(
                op,
                "listing the directory as the sandbox user",
                &output,
            ));
        }
        let fields = nul_fields(&output.stdout)
            .filter(|fields| fields.len() % 2 == 0)
            .ok_or_else(|| {
                op.error(
                    ErrorKind::Io,
                    "find printed something other than NUL-terminated name and target pairs",
                )
            })?;
        Ok(fields
            .chunks_exact(2)
            .map(|pair| {
                (
                    pair[0].to_vec(),
                    String::from_utf8_lossy(pair[1]).into_owned(),
                )
            })
            .collect())
    }

    /// What each link resolves to, by entry name (`None`: it does not).
    async fn resolve_links(
        &self,
        op: Op<'_>,
        links: Vec<EntryInfo>,
    ) -> Result<HashMap<String, Option<EntryInfo>>> {
        futures::stream::iter(links)
            .map(|link| async move {
                let name = link.name.clone();
                let path = link.path.clone();
                let followed = self.follow(op, &path, link).await?;
                Ok::<_, dsh_plugin_api::Error>((name, followed.map(|followed| followed.entry)))
            })
            .buffer_unordered(LOOKUPS_IN_FLIGHT)
            .try_collect()
            .await
    }
}
