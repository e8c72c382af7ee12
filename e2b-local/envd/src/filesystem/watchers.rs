//! Polling watchers (`CreateWatcher` / `GetWatcherEvents` / `RemoveWatcher`,
//! docs/e2b-protocol.md §6.3): each runs an inotify watch in a background task that buffers events
//! until they are drained. A watch failure is reported by the next drain.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use connectrpc::ConnectError;
use envd_proto::filesystem::FilesystemEvent;
use tokio::task::JoinHandle;

use super::inotify::DirWatcher;
use super::watch::to_events;
use crate::ids::watcher_id;
use crate::users::UserDb;

#[derive(Default)]
struct Buffer {
    events: Vec<FilesystemEvent>,
    error: Option<String>,
}

struct PollingWatcher {
    buffer: Arc<Mutex<Buffer>>,
    task: JoinHandle<()>,
}

impl Drop for PollingWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every polling watcher of the daemon, by id.
#[derive(Default)]
pub(crate) struct WatcherRegistry {
    watchers: Mutex<HashMap<String, PollingWatcher>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl WatcherRegistry {
    /// Starts buffering the events of `watcher` (rooted at `root`) and returns the new id.
    pub(crate) fn create(
        &self,
        mut watcher: DirWatcher,
        root: PathBuf,
        include_entry: bool,
        users: UserDb,
    ) -> String {
        let buffer = Arc::new(Mutex::new(Buffer::default()));
        let task = tokio::spawn({
            let buffer = Arc::clone(&buffer);
            async move {
                loop {
                    match watcher.next().await {
                        Ok(change) => {
                            let events = to_events(&root, &change, include_entry, &users);
                            lock(&buffer).events.extend(events);
                        }
                        Err(err) => {
                            lock(&buffer).error = Some(format!("watcher error: {err}"));
                            return;
                        }
                    }
                }
            }
        });
        let mut watchers = lock(&self.watchers);
        let mut id = watcher_id();
        while watchers.contains_key(&id) {
            id = watcher_id();
        }
        watchers.insert(id.clone(), PollingWatcher { buffer, task });
        id
    }

    /// Takes every buffered event of watcher `id` (or its error).
    pub(crate) fn drain(&self, id: &str) -> Result<Vec<FilesystemEvent>, ConnectError> {
        let watchers = lock(&self.watchers);
        let watcher = watchers
            .get(id)
            .ok_or_else(|| ConnectError::not_found(format!("watcher with id {id} not found")))?;
        let mut buffer = lock(&watcher.buffer);
        if let Some(error) = &buffer.error {
            return Err(ConnectError::internal(error.clone()));
        }
        Ok(std::mem::take(&mut buffer.events))
    }

    /// Stops and forgets watcher `id`.
    pub(crate) fn remove(&self, id: &str) -> Result<(), ConnectError> {
        lock(&self.watchers)
            .remove(id)
            .map(drop)
            .ok_or_else(|| ConnectError::not_found(format!("watcher with id {id} not found")))
    }

    /// Stops every watcher (daemon shutdown).
    pub(crate) fn clear(&self) {
        lock(&self.watchers).clear();
    }
}
