//! The language servers of one world: one per (language, workspace root), started on first use
//! and kept, restarted with backoff when one has ended, and fed every document they have open
//! as the world has it now — before each question is asked — so that no answer comes from a
//! stale text, whoever changed the file (the file tools, a shell command, another process).
//!
//! **Sync.** Each question first rescans the workspace (one `list` per directory, bounded) and
//! reports changes to files the server has not open; then reads the document it is about
//! through the `fs` seam and sends it when its version differs from the one last sent; then
//! checks every other open document (`stat`: its version) and re-sends it if changed, or closes
//! it if gone or unreadable. At most 64 (`MAX_OPEN_DOCUMENTS`) stay open: the least recently asked
//! are closed. Syncs of one server are serialised.
//!
//! **Runtime.** Every method runs on the caller's tokio runtime; dropping a call's future
//! cancels its request (the server is told) and leaves the server running for the next one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_plugin_api::fs::{FileKind, FsProvider, Version, WalkEvent, WalkSpec};
use dsh_plugin_api::subprocess::SubprocessProvider;
use dsh_plugin_api::{Error, ErrorKind, Result};
use futures::StreamExt;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::config::{LanguageConfig, LspConfig};
use super::server::{LanguageServer, ServerSpec};

/// The first wait before a server that ended or failed to start is started again; doubled
/// after each failure in a row, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The most files of a workspace followed for changes ([`Servers::rescan`]); beyond it, the
/// rest are not reported (the scan says so once in the log).
const MAX_WATCHED_FILES: usize = 5000;
/// The most entries one rescan visits (files of other languages and directories included).
const MAX_WATCHED_ENTRIES: u64 = 50_000;
/// The deepest one rescan descends.
const MAX_WATCHED_DEPTH: u32 = 64;
/// Directories never descended into: dependencies, caches, version control.
const SKIPPED_DIRS: [&str; 3] = ["node_modules", "__pycache__", "target"];

/// A server, the versions of the documents it was sent, and of the workspace's files.
pub struct Running {
    pub server: LanguageServer,
    pub language: String,
    pub root: String,
    /// Path → what was sent. Changed only under `syncing`.
    sent: std::sync::Mutex<HashMap<String, Sent>>,
    /// Serialises syncs: two questions racing to send one document could leave the server an
    /// older text than the one recorded as sent.
    syncing: tokio::sync::Mutex<u64>,
    /// The workspace's files of the language, as last scanned.
    files: tokio::sync::Mutex<HashMap<String, Scanned>>,
    /// The file extensions of its language.
    extensions: Vec<String>,
}

/// A file as a workspace scan saw it.
#[derive(Debug, Clone)]
struct Scanned {
    version: Version,
    size: u64,
}

/// A document as last sent.
struct Sent {
    /// The seam's version of the text sent.
    version: Version,
    language_id: String,
    /// When it was last asked about (a sync counter), to close the least recently asked.
    used: u64,
}

/// The largest document sent to a server (a generated or minified file beyond it would only
/// stall the server).
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 16 << 20;
/// The most documents a server keeps open; the least recently asked are closed beyond it.
const MAX_OPEN_DOCUMENTS: usize = 64;
/// A server that ran this long before it ended starts a fresh backoff.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// (language name, workspace root).
type SlotKey = (String, String);

/// One (language, root)'s server, or why there is none right now.
#[derive(Default)]
struct Slot {
    running: Option<Arc<Running>>,
    /// Failures (ends and failed starts) in a row.
    failures: u32,
    /// No start before this.
    not_before: Option<Instant>,
    /// How the last one ended, told to the next caller.
    ended: Option<String>,
}

/// What a caller gets: the server, and a notice when it was (re)started for this call.
pub struct Acquired {
    pub running: Arc<Running>,
    pub notice: Option<String>,
}

/// Every language server of one world.
pub struct Servers {
    fs: Arc<dyn FsProvider>,
    subprocess: Arc<dyn SubprocessProvider>,
    config: LspConfig,
    /// (language, root) → its slot. The map's lock is held only to find a slot; a slot's own
    /// lock while its server is started, so one language's start never waits for another's.
    slots: std::sync::Mutex<HashMap<SlotKey, Arc<Mutex<Slot>>>>,
    /// Cancelled by [`Servers::shutdown`]: a start in progress (which holds its slot's lock)
    /// ends at once instead of waiting out a server that does not answer.
    closing: CancellationToken,
}

impl Servers {
    pub fn new(
        fs: Arc<dyn FsProvider>,
        subprocess: Arc<dyn SubprocessProvider>,
        config: LspConfig,
    ) -> Servers {
        Servers {
            fs,
            subprocess,
            config,
            slots: std::sync::Mutex::new(HashMap::new()),
            closing: CancellationToken::new(),
        }
    }

    pub fn fs(&self) -> &Arc<dyn FsProvider> {
        &self.fs
    }

    /// `path` made absolute and canonical in the world, its language and `languageId`.
    pub async fn locate(&self, op: &str, path: &str) -> Result<(String, &LanguageConfig, String)> {
        let absolute = self.canonical(op, path).await?;
        self.language_for(op, path, absolute)
    }

    /// `path` as a document a server can be given: [`Servers::locate`]'s answer for a regular
    /// file. What it leads to is judged (a symlink to `/dev/zero` is a device, whatever its
    /// name); a missing file of a configured language is `NotFound` before any server is
    /// started for it.
    pub async fn document(
        &self,
        op: &str,
        path: &str,
    ) -> Result<(String, &LanguageConfig, String)> {
        let absolute = self.canonical(op, path).await?;
        let what = match self.fs.stat(&absolute).await {
            Ok(metadata) => match metadata.kind {
                FileKind::File => return self.language_for(op, path, absolute),
                FileKind::Directory => "a directory",
                // `stat` follows symlinks: the target is what is judged.
                FileKind::Symlink | FileKind::Other => "a device, FIFO or socket",
            },
            Err(err) => {
                self.language_for(op, path, absolute)?;
                return Err(err.context(op));
            }
        };
        Err(Error::invalid_input(format!(
            "{op}: {absolute} is not a regular file but {what}; language servers are given \
             regular files"
        )))
    }

    async fn canonical(&self, op: &str, path: &str) -> Result<String> {
        let resolved = self
            .fs
            .resolve(path, None)
            .await
            .map_err(|e| e.context(op))?;
        Ok(resolved.path)
    }

    /// The language of `absolute` (`path` as the caller gave it, for the message).
    fn language_for(
        &self,
        op: &str,
        path: &str,
        absolute: String,
    ) -> Result<(String, &LanguageConfig, String)> {
        let (language, language_id) = self.config.language_of(&absolute).ok_or_else(|| {
            Error::invalid_input(format!(
                "{op}: no language server is configured for {path} (known extensions: {})",
                self.config
                    .languages
                    .iter()
                    .flat_map(|l| l.extensions.iter().map(|e| e.extension.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        Ok((absolute, language, language_id.to_owned()))
    }

    /// The language named `name`.
    pub fn language(&self, op: &str, name: &str) -> Result<&LanguageConfig> {
        self.config
            .languages
            .iter()
            .find(|l| l.name == name)
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "{op}: no language {name:?} (configured: {})",
                    self.config
                        .languages
                        .iter()
                        .map(|l| l.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    /// The workspace root of absolute `path`: the nearest directory at or above it holding one
    /// of `language`'s root markers, else `path` itself if it is a directory, else its parent.
    pub async fn root_of(&self, path: &str, language: &LanguageConfig) -> String {
        let is_dir = self
            .fs
            .stat(path)
            .await
            .is_ok_and(|m| m.kind == dsh_plugin_api::fs::FileKind::Directory);
        let start = if is_dir {
            path.to_owned()
        } else {
            parent(path).to_owned()
        };
        let mut dir = start.clone();
        loop {
            for marker in &language.root_markers {
                let candidate = format!("{}/{marker}", dir.trim_end_matches('/'));
                if self.fs.lstat(&candidate).await.is_ok() {
                    return dir;
                }
            }
            if dir == "/" {
                return start;
            }
            dir = parent(&dir).to_owned();
        }
    }

    /// The running server of `language` for `root`: started if there is none, restarted if it
    /// ended (after its backoff: `Unavailable` saying when, during it). The start runs on a task
    /// of its own: a caller that leaves (a dropped future, a deadline) does not abandon a
    /// half-started server — it is kept, in its slot, for the next question; only
    /// [`Servers::shutdown`] ends it (`Closed`).
    pub async fn acquire(&self, language: &LanguageConfig, root: &str) -> Result<Acquired> {
        let slot = self
            .slots
            .lock()
            .expect("slots lock")
            .entry((language.name.clone(), root.to_owned()))
            .or_default()
            .clone();
        let (fs, subprocess) = (self.fs.clone(), self.subprocess.clone());
        let (language, root) = (language.clone(), root.to_owned());
        let closing = self.closing.clone();
        tokio::spawn(async move {
            let mut slot = slot.lock().await;
            acquire_in(&mut slot, fs, subprocess, &language, &root, &closing).await
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Panicked, format!("start a language server: {e}")))?
    }

    /// The files under `dir` some configured server takes, sorted, at most `limit`; and
    /// whether there were more.
    pub async fn files_under(&self, dir: &str, limit: usize) -> (Vec<String>, bool) {
        let extensions: Vec<String> = self
            .config
            .languages
            .iter()
            .flat_map(|l| l.extensions.iter().map(|e| e.extension.clone()))
            .collect();
        let found = walk(&self.fs, dir, &extensions, limit + 1).await;
        let mut files: Vec<String> = found.into_keys().collect();
        files.sort();
        let truncated = files.len() > limit;
        files.truncate(limit);
        (files, truncated)
    }

    /// Rescans `running`'s workspace and tells its server which files it has not open were
    /// created, changed or deleted since the last scan (`workspace/didChangeWatchedFiles`).
    /// Whether any were.
    async fn rescan(&self, running: &Running) -> Result<bool> {
        use lsp_types::FileChangeType;
        let mut known = running.files.lock().await;
        let now = walk(
            &self.fs,
            &running.root,
            &running.extensions,
            MAX_WATCHED_FILES,
        )
        .await;
        let open: std::collections::HashSet<String> = running
            .sent
            .lock()
            .expect("sent lock")
            .keys()
            .cloned()
            .collect();
        let mut changes = Vec::new();
        for (path, version) in &now {
            match known.get(path) {
                None => changes.push((path.clone(), FileChangeType::CREATED)),
                Some(old) if old.version != version.version => {
                    changes.push((path.clone(), FileChangeType::CHANGED))
                }
                Some(_) => {}
            }
        }
        for path in known.keys() {
            if !now.contains_key(path) {
                changes.push((path.clone(), FileChangeType::DELETED));
            }
        }
        *known = now;
        changes.retain(|(path, _)| !open.contains(path));
        if changes.is_empty() {
            return Ok(false);
        }
        running.server.files_changed(changes)?;
        Ok(true)
    }

    /// Brings the server up to date with the world before a question about `path` (absolute):
    /// the workspace's files it has not open rescanned and their changes reported; `path` sent
    /// as the world has it now if that differs from what the server has — or, when other files
    /// changed, sent again anyway, so that its analysis (and diagnostics) are redone against
    /// them; every other open document re-sent or closed if it changed or went. Returns the
    /// version of `path` the server now has.
    pub async fn sync(&self, running: &Running, path: &str, language_id: &str) -> Result<Version> {
        let op = format!("send {path} to the language server");
        let mut used = running.syncing.lock().await;
        *used += 1;
        let others_changed = self.rescan(running).await.map_err(|e| e.context(&op))?;
        if others_changed {
            running.sent.lock().expect("sent lock").remove(path);
        }
        // The scan just made knows most files' versions and sizes: a document the server has
        // at that version is not read again.
        let scanned = running.files.lock().await.get(path).cloned();
        let current = match scanned {
            Some(scanned) => scanned,
            None => {
                let metadata = self.fs.stat(path).await.map_err(|e| e.context(&op))?;
                Scanned {
                    version: metadata.version,
                    size: metadata.size,
                }
            }
        };
        if current.size > MAX_DOCUMENT_BYTES {
            return Err(Error::invalid_input(format!(
                "{op}: it is {} bytes; documents over {MAX_DOCUMENT_BYTES} bytes are not given \
                 to language servers",
                current.size
            )));
        }
        let others: Vec<(String, Version, String)> = {
            let sent = running.sent.lock().expect("sent lock");
            sent.iter()
                .filter(|(p, _)| p.as_str() != path)
                .map(|(p, s)| (p.clone(), s.version.clone(), s.language_id.clone()))
                .collect()
        };
        let unchanged = running
            .sent
            .lock()
            .expect("sent lock")
            .get_mut(path)
            .filter(|sent| sent.version == current.version)
            .map(|sent| sent.used = *used)
            .is_some();
        let version = if unchanged {
            current.version
        } else {
            let file = self.fs.read_text(path).await.map_err(|e| e.context(&op))?;
            send_if_changed(
                running,
                path,
                language_id,
                file.version.clone(),
                file.text.into_string(),
                *used,
            )?;
            file.version
        };
        for (other, version, id) in others {
            let scanned = running
                .files
                .lock()
                .await
                .get(&other)
                .map(|s| s.version.clone());
            let now = match scanned {
                Some(now) => Ok(now),
                None => self.fs.stat(&other).await.map(|m| m.version),
            };
            let outcome = match now {
                Ok(now) if now == version => Ok(()),
                Ok(_) => match self.fs.read_text(&other).await {
                    Ok(file) => {
                        let used = running
                            .sent
                            .lock()
                            .expect("sent lock")
                            .get(&other)
                            .map_or(0, |s| s.used);
                        send_if_changed(
                            running,
                            &other,
                            &id,
                            file.version,
                            file.text.into_string(),
                            used,
                        )
                    }
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            };
            // A document that went, or cannot be read any more (now binary, not UTF-8, not
            // permitted), is closed: it must not fail questions about other files.
            if let Err(err) = outcome {
                if err.kind() != ErrorKind::NotFound {
                    tracing::debug!("{op}: closing {other}: {err}");
                }
                close(running, &other)?;
            }
        }
        // The least recently asked beyond the bound are closed.
        let excess: Vec<String> = {
            let sent = running.sent.lock().expect("sent lock");
            let mut by_use: Vec<(&String, u64)> = sent.iter().map(|(p, s)| (p, s.used)).collect();
            by_use.sort_by_key(|(_, used)| *used);
            by_use
                .iter()
                .take(sent.len().saturating_sub(MAX_OPEN_DOCUMENTS))
                .map(|(p, _)| (*p).clone())
                .collect()
        };
        for path in excess {
            close(running, &path)?;
        }
        Ok(version)
    }

    /// The running servers' process ids (for tests and `ps`-like views).
    pub async fn pids(&self) -> Vec<u32> {
        let slots: Vec<Arc<Mutex<Slot>>> = self
            .slots
            .lock()
            .expect("slots lock")
            .values()
            .cloned()
            .collect();
        let mut pids = Vec::new();
        for slot in slots {
            if let Some(running) = &slot.lock().await.running {
                pids.push(running.server.pid());
            }
        }
        pids
    }

    /// Shuts every server down, each process group proven gone (also a server a call still
    /// holds: that call then fails as closed, and one still starting); the failures. No server
    /// is started after it: questions fail as closed.
    pub async fn shutdown(&self) -> Vec<Error> {
        self.closing.cancel();
        let slots: Vec<Arc<Mutex<Slot>>> = self
            .slots
            .lock()
            .expect("slots lock")
            .drain()
            .map(|(_, slot)| slot)
            .collect();
        let mut failures = Vec::new();
        for slot in slots {
            let running = slot.lock().await.running.take();
            if let Some(running) = running
                && let Err(err) = running.server.shutdown().await
            {
                failures.push(err);
            }
        }
        failures
    }
}

/// Sends `text` as `path` unless the server has that version; records it, used at `used`.
fn send_if_changed(
    running: &Running,
    path: &str,
    language_id: &str,
    version: Version,
    text: String,
    used: u64,
) -> Result<()> {
    // Under the lock: what is recorded is what was sent last.
    let mut sent = running.sent.lock().expect("sent lock");
    if sent.get(path).is_none_or(|s| s.version != version) {
        running.server.update(path, language_id, text)?;
    }
    sent.insert(
        path.to_owned(),
        Sent {
            version,
            language_id: language_id.to_owned(),
            used,
        },
    );
    Ok(())
}

/// Closes `path` on the server and forgets it was sent.
fn close(running: &Running, path: &str) -> Result<()> {
    running.sent.lock().expect("sent lock").remove(path);
    running.server.close(path)
}

/// [`Servers::acquire`]'s work, under the slot's lock.
async fn acquire_in(
    slot: &mut Slot,
    fs: Arc<dyn FsProvider>,
    subprocess: Arc<dyn SubprocessProvider>,
    language: &LanguageConfig,
    root: &str,
    closing: &CancellationToken,
) -> Result<Acquired> {
    let op = format!("language server {} for {root}", language.command[0]);
    let shut_down = || Error::closed(format!("{op}: the language tools were shut down"));
    if closing.is_cancelled() {
        return Err(shut_down());
    }
    if let Some(running) = &slot.running {
        match running.server.ended() {
            None => {
                return Ok(Acquired {
                    running: running.clone(),
                    notice: None,
                });
            }
            Some(how) => {
                let ended = slot.running.take().expect("checked above");
                // Whatever it left (children in its group) goes with it.
                if let Err(err) = ended.server.shutdown().await {
                    tracing::warn!("{op}: {err}");
                }
                if ended.server.age() >= STABLE_AFTER {
                    slot.failures = 0;
                }
                slot.failures += 1;
                slot.not_before = Some(Instant::now() + backoff(slot.failures - 1));
                slot.ended = Some(format!("it had ended ({how})"));
            }
        }
    }
    if let Some(not_before) = slot.not_before {
        let now = Instant::now();
        if now < not_before && slot.failures > 1 {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "{op}: {}; it failed {} times in a row and is started again in {} ms",
                    slot.ended.as_deref().unwrap_or("it failed"),
                    slot.failures,
                    (not_before - now).as_millis()
                ),
            ));
        }
        tokio::select! {
            () = tokio::time::sleep_until(not_before.into()) => {}
            () = closing.cancelled() => return Err(shut_down()),
        }
    }
    let spec = ServerSpec {
        argv: language.command.clone(),
        root: root.to_owned(),
        initialization_options: language.initialization_options.clone(),
    };
    match LanguageServer::start(subprocess.as_ref(), fs.clone(), spec, closing).await {
        Ok(server) => {
            let notice = slot
                .ended
                .take()
                .map(|why| format!("{op} was restarted: {why}"));
            // The failures in a row count on until the server proves stable (STABLE_AFTER).
            slot.not_before = None;
            let extensions: Vec<String> = language
                .extensions
                .iter()
                .map(|e| e.extension.clone())
                .collect();
            // The baseline the next rescans compare with.
            let files = walk(&fs, root, &extensions, MAX_WATCHED_FILES).await;
            let running = Arc::new(Running {
                server,
                language: language.name.clone(),
                root: root.to_owned(),
                sent: std::sync::Mutex::new(HashMap::new()),
                syncing: Mutex::new(0),
                files: Mutex::new(files),
                extensions,
            });
            slot.running = Some(running.clone());
            Ok(Acquired { running, notice })
        }
        Err(err) => {
            slot.failures += 1;
            slot.not_before = Some(Instant::now() + backoff(slot.failures - 1));
            slot.ended = Some(format!("it could not be started ({err})"));
            Err(err)
        }
    }
}

/// The files of `extensions` under `root` and their versions: one `walk` through the seam
/// (native where the provider has one), breadth-first, bounded (`limit` files,
/// [`MAX_WATCHED_ENTRIES`] entries visited), not into dot directories, [`SKIPPED_DIRS`] or
/// symlinks. Unreadable directories are skipped; a walk that cannot start finds nothing.
async fn walk(
    fs: &Arc<dyn FsProvider>,
    root: &str,
    extensions: &[String],
    limit: usize,
) -> HashMap<String, Scanned> {
    let mut files = HashMap::new();
    let globs = std::iter::once("!.*".to_owned())
        .chain(SKIPPED_DIRS.iter().map(|skipped| format!("!{skipped}")))
        .collect();
    let spec = WalkSpec {
        max_depth: MAX_WATCHED_DEPTH,
        max_entries: MAX_WATCHED_ENTRIES,
        globs,
        gitignore: false,
        beneath: false,
    };
    let Ok(mut events) = dsh_provider_kit::world::walk(fs, root, spec).await else {
        return files;
    };
    while let Some(Ok(event)) = events.next().await {
        let entry = match event {
            WalkEvent::Entry(entry) => entry,
            WalkEvent::End(summary) => {
                if !summary.complete || files.len() >= limit {
                    tracing::debug!("workspace {root}: only part of it is walked");
                }
                break;
            }
        };
        if entry.metadata.kind == FileKind::File
            && files.len() < limit
            && entry
                .relative
                .rsplit_once('.')
                .is_some_and(|(_, e)| !e.contains('/') && extensions.iter().any(|x| x == e))
        {
            files.insert(
                entry.path,
                Scanned {
                    version: entry.metadata.version,
                    size: entry.metadata.size,
                },
            );
        }
    }
    files
}

fn backoff(failures_before: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << failures_before.min(10))
        .min(MAX_BACKOFF)
}

/// The directory holding absolute `path` (`/` for `/x` and `/`).
fn parent(path: &str) -> &str {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) | None => "/",
        Some((parent, _)) => parent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_and_backoff() {
        assert_eq!(parent("/a/b/c.py"), "/a/b");
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/"), "/");
        assert_eq!(backoff(0), FIRST_BACKOFF);
        assert_eq!(backoff(1), FIRST_BACKOFF * 2);
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
