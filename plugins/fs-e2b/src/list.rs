//! `list`: one level of a directory from envd's `ListDir`, symlink entries
//! completed with their stored text and their resolved target.

use std::collections::HashMap;

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::Result;
use dsh_plugin_api::fs::{DirEntry, FileKind};
use e2b_client::EntryInfo;
use futures::{StreamExt, TryStreamExt};

use crate::errors::Op;
use crate::identity::UserAccess;
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
    pub(crate) async fn list(&self, op: Op<'_>, dir: &str) -> Result<Vec<DirEntry>> {
        let (entries, listable) = futures::future::join(
            self.envd.list_dir(dir, 1, &self.fs_options),
            self.require_user_access(op, UserAccess::List, dir),
        )
        .await;
        // envd's own refusal (missing, not a directory) comes first.
        let mut entries = entries.map_err(|err| op.remote(&err))?;
        listable?;
        entries.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        let links: Vec<EntryInfo> = entries
            .iter()
            .filter(|entry| kind_of(entry) == FileKind::Symlink)
            .cloned()
            .collect();
        let (texts, resolved) = if links.is_empty() {
            (HashMap::new(), HashMap::new())
        } else {
            futures::try_join!(self.link_texts(op, dir), self.resolve_links(op, links))?
        };
        let mut listed = Vec::with_capacity(entries.len());
        for entry in entries {
            let path = child(dir, &entry.name);
            let (text, target) = if kind_of(&entry) == FileKind::Symlink {
                let Some(text) = texts.get(entry.name.as_bytes()) else {
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

    /// The stored text of every symlink directly in `dir`, by name.
    async fn link_texts(&self, op: Op<'_>, dir: &str) -> Result<HashMap<Vec<u8>, String>> {
        let command = self.shell.exec(
            "find",
            [
                "-H",
                dir,
                "-mindepth",
                "1",
                "-maxdepth",
                "1",
                "-type",
                "l",
                "-printf",
                "%f\\0%l\\0",
            ],
        );
        let output = self.control(op, &command).await?;
        if !output.status.success() {
            return Err(command_failed(
                op,
                "reading the directory's symbolic links",
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
