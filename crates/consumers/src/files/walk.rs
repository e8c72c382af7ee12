//! The tools' walks: the seam's `walk` (native where the provider has one,
//! else `dsh_provider_kit::world`'s composition over `list`), `.gitignore`
//! aware, breadth-first (the root's entries by name, then each
//! subdirectory's in the order met), symlinks reported and never followed,
//! bounded in depth and in entries visited.

use std::sync::Arc;

use dsh_plugin_api::Result;
use dsh_plugin_api::fs::{FsProvider, WalkEntry, WalkEvent, WalkSpec, WalkStream, WalkSummary};
use dsh_provider_kit::world;
use futures::StreamExt;

use super::errors::from_seam;

/// The deepest a `find_files` or `grep` walk descends below its root.
pub const WALK_MAX_DEPTH: u32 = 64;

/// The most entries a `find_files` or `grep` walk visits (50,000); the
/// result then says it is incomplete.
pub const WALK_MAX_VISITED: u64 = 50_000;

/// A walk in progress. Dropping it ends it.
pub(super) struct Walk {
    tool: &'static str,
    root: String,
    events: WalkStream,
    summary: Option<WalkSummary>,
}

impl Walk {
    /// Starts a walk of `root` (as the caller gave it) that lists
    /// directories down to `max_depth` (1: the root's entries only),
    /// visits at most `max_visited` entries and yields those `globs`
    /// admit. Errors opening the root are the tool's (`NotFound`,
    /// `NotADirectory`, …), named after `tool`.
    pub(super) async fn open(
        fs: &Arc<dyn FsProvider>,
        tool: &'static str,
        root: &str,
        max_depth: u32,
        max_visited: u64,
        globs: Vec<String>,
    ) -> Result<Walk> {
        let spec = WalkSpec {
            max_depth,
            max_entries: max_visited,
            globs,
            gitignore: true,
            beneath: false,
        };
        let events = world::walk(fs, root, spec)
            .await
            .map_err(|err| from_seam(tool, root, err))?;
        Ok(Walk {
            tool,
            root: root.to_owned(),
            events,
            summary: None,
        })
    }

    /// The next entry, or `None` when the walk is over (see
    /// [`Walk::summary`]).
    pub(super) async fn next(&mut self) -> Result<Option<WalkEntry>> {
        if self.summary.is_some() {
            return Ok(None);
        }
        match self.events.next().await {
            Some(Ok(WalkEvent::Entry(entry))) => Ok(Some(entry)),
            Some(Ok(WalkEvent::End(summary))) => {
                self.summary = Some(summary);
                Ok(None)
            }
            Some(Err(err)) => Err(from_seam(self.tool, &self.root, err)),
            None => Err(from_seam(
                self.tool,
                &self.root,
                dsh_plugin_api::Error::io("walk: the stream ended without its summary"),
            )),
        }
    }

    /// How the walk ended (defaults before it did).
    pub(super) fn summary(&self) -> WalkSummary {
        self.summary.unwrap_or_default()
    }
}
