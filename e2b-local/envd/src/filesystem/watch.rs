//! Directory watches as clients see them (docs/e2b-protocol.md §6.3): path validation, splitting
//! one change into one `FilesystemEvent` per operation (CREATE, RENAME, CHMOD, WRITE, REMOVE),
//! names relative to the watched directory, best-effort entries, and the `WatchDir` stream.

use std::path::{Path, PathBuf};
use std::time::Duration;

use buffa::{EnumValue, MessageField};
use connectrpc::ConnectError;
use envd_proto::filesystem::watch_dir_response::Event as WatchEvent;
use envd_proto::filesystem::{EventType, FilesystemEvent, WatchDirResponse};
use futures::Stream;
use tokio::time::Instant;

use super::inotify::{Change, DirWatcher};
use crate::entry::entry_info;
use crate::paths::clean;
use crate::users::UserDb;

/// Filesystems envd refuses to watch unless asked (inotify misses remote changes there).
const NFS_SUPER_MAGIC: i64 = 0x6969;
const CIFS_MAGIC: i64 = 0xFF53_4D42;
const SMB_SUPER_MAGIC: i64 = 0x517B;
const SMB2_MAGIC: i64 = 0xFE53_4D42;
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Checks that `path` can be watched: it must exist (`not_found`), be a directory
/// (`invalid_argument`) the acting user may list (`permission_denied`: the watch itself is added
/// by the daemon, as root, and its events would name the entries) and, unless
/// `allow_network_mounts`, not live on NFS/CIFS/SMB/FUSE. Runs with the acting user's
/// identity ([`crate::acting_user`]). Returns the cleaned path used as the base of event names.
pub(crate) fn check_watch_path(
    path: &Path,
    allow_network_mounts: bool,
) -> Result<PathBuf, ConnectError> {
    let meta = std::fs::metadata(path).map_err(|err| {
        if err.kind() == std::io::ErrorKind::NotFound {
            ConnectError::not_found(format!("path {} not found: {err}", path.display()))
        } else {
            ConnectError::internal(format!("error statting path {}: {err}", path.display()))
        }
    })?;
    if !meta.is_dir() {
        return Err(ConnectError::invalid_argument(format!(
            "path {} not a directory",
            path.display()
        )));
    }
    // Opening the directory checks read permission with the thread's effective ids (the
    // acting user's), as listing it would.
    if let Err(err) = std::fs::read_dir(path) {
        let message = format!("cannot watch {}: {err}", path.display());
        return Err(if err.kind() == std::io::ErrorKind::PermissionDenied {
            ConnectError::permission_denied(message)
        } else {
            ConnectError::internal(message)
        });
    }
    if !allow_network_mounts {
        let stat = rustix::fs::statfs(path).map_err(|err| {
            ConnectError::internal(format!(
                "error checking mount status: failed to statfs {}: {err}",
                path.display()
            ))
        })?;
        #[allow(
            clippy::unnecessary_cast,
            reason = "f_type's integer type differs by target"
        )]
        let kind = stat.f_type as i64;
        if [
            NFS_SUPER_MAGIC,
            CIFS_MAGIC,
            SMB_SUPER_MAGIC,
            SMB2_MAGIC,
            FUSE_SUPER_MAGIC,
        ]
        .contains(&kind)
        {
            return Err(ConnectError::invalid_argument(format!(
                "cannot watch path on network filesystem: {}",
                path.display()
            )));
        }
    }
    Ok(PathBuf::from(clean(&path.to_string_lossy())))
}

/// Starts an inotify watch on a checked directory.
pub(crate) fn start_watcher(root: &Path, recursive: bool) -> Result<DirWatcher, ConnectError> {
    DirWatcher::new(root, recursive).map_err(|err| {
        ConnectError::internal(format!(
            "error adding path {} to watcher: {err}",
            root.display()
        ))
    })
}

/// The client-visible events of one change: one per operation, in envd's order.
pub(crate) fn to_events(
    root: &Path,
    change: &Change,
    include_entry: bool,
    users: &UserDb,
) -> Vec<FilesystemEvent> {
    let name = match change.path.strip_prefix(root) {
        Ok(rest) if rest.as_os_str().is_empty() => ".".to_owned(),
        Ok(rest) => rest.to_string_lossy().into_owned(),
        Err(_) => change.path.to_string_lossy().into_owned(),
    };
    let ops = change.ops;
    let names = (include_entry && (ops.create || ops.write || ops.chmod)).then(|| users.names());
    let kinds = [
        (ops.create, EventType::EVENT_TYPE_CREATE),
        (ops.rename, EventType::EVENT_TYPE_RENAME),
        (ops.chmod, EventType::EVENT_TYPE_CHMOD),
        (ops.write, EventType::EVENT_TYPE_WRITE),
        (ops.remove, EventType::EVENT_TYPE_REMOVE),
    ];
    kinds
        .into_iter()
        .filter(|(present, _)| *present)
        .map(|(_, kind)| {
            // Only events whose entry should still exist carry one: a REMOVE or RENAME path may
            // already hold an unrelated new file.
            let carries_entry = matches!(
                kind,
                EventType::EVENT_TYPE_CREATE
                    | EventType::EVENT_TYPE_WRITE
                    | EventType::EVENT_TYPE_CHMOD
            );
            let entry = match &names {
                Some(names) if carries_entry => entry_info(&change.path, names)
                    .ok()
                    .map_or(MessageField::none(), MessageField::some),
                _ => MessageField::none(),
            };
            FilesystemEvent {
                name: name.clone(),
                r#type: EnumValue::Known(kind),
                entry,
                ..Default::default()
            }
        })
        .collect()
}

fn response(event: WatchEvent) -> WatchDirResponse {
    WatchDirResponse {
        event: Some(event),
        ..Default::default()
    }
}

enum State {
    Start(DirWatcher),
    Watching {
        watcher: DirWatcher,
        queued: std::collections::VecDeque<FilesystemEvent>,
        next_keepalive: Instant,
    },
    Done,
}

/// The `WatchDir` stream: `start`, then events and keepalives until the client leaves, the
/// request deadline passes (`deadline_exceeded`) or the watch fails (`internal`).
pub(crate) fn watch_stream(
    watcher: DirWatcher,
    root: PathBuf,
    include_entry: bool,
    users: UserDb,
    keepalive: Duration,
    deadline: Option<Instant>,
) -> impl Stream<Item = Result<WatchDirResponse, ConnectError>> + Send + 'static {
    futures::stream::unfold(State::Start(watcher), move |state| {
        let root = root.clone();
        let users = users.clone();
        async move {
            match state {
                State::Start(watcher) => Some((
                    Ok(response(WatchEvent::Start(Box::default()))),
                    State::Watching {
                        watcher,
                        queued: Default::default(),
                        next_keepalive: Instant::now() + keepalive,
                    },
                )),
                State::Watching {
                    mut watcher,
                    mut queued,
                    mut next_keepalive,
                } => loop {
                    if let Some(event) = queued.pop_front() {
                        next_keepalive = Instant::now() + keepalive;
                        break Some((
                            Ok(response(WatchEvent::Filesystem(Box::new(event)))),
                            State::Watching {
                                watcher,
                                queued,
                                next_keepalive,
                            },
                        ));
                    }
                    tokio::select! {
                        biased;
                        () = crate::stream_timing::expired(deadline) => break Some((
                            Err(ConnectError::deadline_exceeded("context deadline exceeded")),
                            State::Done,
                        )),
                        change = watcher.next() => match change {
                            Ok(change) => {
                                queued.extend(to_events(&root, &change, include_entry, &users));
                            }
                            Err(err) => break Some((
                                Err(ConnectError::internal(format!("watcher error: {err}"))),
                                State::Done,
                            )),
                        },
                        () = tokio::time::sleep_until(next_keepalive) => {
                            next_keepalive = Instant::now() + keepalive;
                            break Some((
                                Ok(response(WatchEvent::Keepalive(Box::default()))),
                                State::Watching { watcher, queued, next_keepalive },
                            ));
                        }
                    }
                },
                State::Done => None,
            }
        }
    })
}
