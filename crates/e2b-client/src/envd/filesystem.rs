//! The `filesystem.Filesystem` service: metadata, directories, moves and
//! watches (docs/e2b-protocol.md §6).

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use connectrpc::StreamMessage;
use connectrpc::client::ClientTransport;
use envd_proto::filesystem as pb;
use futures::{Stream, StreamExt};
use http_body::Body;

use super::options::{CallOptions, StreamOptions};
use super::stream::{self, RawStream, StreamItem};
use super::{Access, Envd};
use crate::classify::Stage;
use crate::error::{Context, Error, Result};

/// What kind of entry envd reports. envd describes a symlink by its
/// target's type and a dangling one as [`FileType::Unspecified`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symlink (newer envd only).
    Symlink,
    /// No type (e.g. a dangling symlink, a socket).
    Unspecified,
    /// A type number this client does not know.
    Other(i32),
}

impl FileType {
    fn from_proto(value: &buffa::EnumValue<pb::FileType>) -> Self {
        match value.as_known() {
            Some(pb::FileType::FILE_TYPE_FILE) => FileType::File,
            Some(pb::FileType::FILE_TYPE_DIRECTORY) => FileType::Directory,
            Some(pb::FileType::FILE_TYPE_SYMLINK) => FileType::Symlink,
            Some(pb::FileType::FILE_TYPE_UNSPECIFIED) => FileType::Unspecified,
            None => FileType::Other(value.to_i32()),
        }
    }
}

/// Metadata of one filesystem entry, as envd reports it (`lstat`-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// Base name.
    pub name: String,
    /// Kind of entry.
    pub file_type: FileType,
    /// Absolute path as requested (symlinks in it not resolved).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits only (e.g. `0o644`); for a symlink, its target's.
    pub mode: u32,
    /// Go's mode string, e.g. `-rw-r--r--`.
    pub permissions: String,
    /// Owner name (or uid).
    pub owner: String,
    /// Group name (or gid).
    pub group: String,
    /// Modification time.
    pub modified: Option<jiff::Timestamp>,
    /// Resolved absolute target, for symlinks only.
    pub symlink_target: Option<String>,
    /// `user.e2b.*` extended attributes, prefix stripped (envd ≥ 0.6.2).
    pub metadata: BTreeMap<String, String>,
}

impl EntryInfo {
    pub(crate) fn from_proto(entry: pb::EntryInfo) -> Result<Self, String> {
        let size = u64::try_from(entry.size)
            .map_err(|_| format!("entry {:?} has a negative size {}", entry.path, entry.size))?;
        let modified = match entry.modified_time.as_option() {
            Some(time) => Some(jiff::Timestamp::new(time.seconds, time.nanos).map_err(|e| {
                format!(
                    "entry {:?} has an invalid modification time: {e}",
                    entry.path
                )
            })?),
            None => None,
        };
        Ok(EntryInfo {
            file_type: FileType::from_proto(&entry.r#type),
            name: entry.name,
            path: entry.path,
            size,
            mode: entry.mode,
            permissions: entry.permissions,
            owner: entry.owner,
            group: entry.group,
            modified,
            symlink_target: entry.symlink_target,
            metadata: entry.metadata.into_iter().collect(),
        })
    }
}

/// What happened to a watched entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FsEventKind {
    /// Created.
    Create,
    /// Written.
    Write,
    /// Removed.
    Remove,
    /// Renamed (away or in).
    Rename,
    /// Permissions changed.
    Chmod,
    /// A kind number this client does not know (or unspecified).
    Other(i32),
}

impl FsEventKind {
    fn from_proto(value: &buffa::EnumValue<pb::EventType>) -> Self {
        match value.as_known() {
            Some(pb::EventType::EVENT_TYPE_CREATE) => FsEventKind::Create,
            Some(pb::EventType::EVENT_TYPE_WRITE) => FsEventKind::Write,
            Some(pb::EventType::EVENT_TYPE_REMOVE) => FsEventKind::Remove,
            Some(pb::EventType::EVENT_TYPE_RENAME) => FsEventKind::Rename,
            Some(pb::EventType::EVENT_TYPE_CHMOD) => FsEventKind::Chmod,
            _ => FsEventKind::Other(value.to_i32()),
        }
    }
}

/// One filesystem event under a watched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsEvent {
    /// Path relative to the watched directory (e.g. `nested/f.txt`).
    pub name: String,
    /// What happened.
    pub kind: FsEventKind,
    /// The entry's metadata, when asked for and available.
    pub entry: Option<EntryInfo>,
}

impl FsEvent {
    fn from_proto(event: pb::FilesystemEvent) -> Result<Self, String> {
        Ok(FsEvent {
            kind: FsEventKind::from_proto(&event.r#type),
            entry: event
                .entry
                .into_option()
                .map(EntryInfo::from_proto)
                .transpose()?,
            name: event.name,
        })
    }
}

/// What a watch covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// Watch the whole subtree, including directories created later
    /// (envd ≥ 0.1.4).
    pub recursive: bool,
    /// Attach the entry's metadata to create, write and chmod events
    /// (envd ≥ 0.6.3).
    pub include_entry: bool,
    /// Allow watching network or FUSE mounts.
    pub allow_network_mounts: bool,
}

#[derive(Debug)]
enum RawWatch {
    Start,
    Ignored,
    Event(Box<FsEvent>),
}

impl StreamItem for RawWatch {
    fn is_keepalive(&self) -> bool {
        matches!(self, RawWatch::Ignored)
    }
}

fn convert_watch(message: &StreamMessage<pb::WatchDirResponse>) -> Result<RawWatch, String> {
    use envd_proto::filesystem::__buffa::oneof::watch_dir_response::Event;
    Ok(match message.to_owned_message().event {
        Some(Event::Start(_)) => RawWatch::Start,
        Some(Event::Keepalive(_)) | None => RawWatch::Ignored,
        Some(Event::Filesystem(event)) => RawWatch::Event(Box::new(FsEvent::from_proto(*event)?)),
    })
}

/// Events under a watched directory, after the watch started. Keepalives
/// are consumed. The stream ends when envd ends it (e.g. its timeout) and
/// yields any error once before ending. Dropping it aborts the request,
/// which stops the watch in envd.
pub struct WatchStream {
    raw: RawStream<RawWatch>,
    context: Context,
    sandbox_id: Arc<str>,
    finished: bool,
}

impl fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchStream")
            .field("context", &self.context)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl Stream for WatchStream {
    type Item = Result<FsEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        loop {
            return match this.raw.poll_next_unpin(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(Ok(RawWatch::Ignored))) => continue,
                Poll::Ready(Some(Ok(RawWatch::Start))) => {
                    this.finished = true;
                    Poll::Ready(Some(Err(Error::protocol(
                        this.context.clone(),
                        "a second start event",
                    ))))
                }
                Poll::Ready(Some(Ok(RawWatch::Event(event)))) => Poll::Ready(Some(Ok(*event))),
                Poll::Ready(Some(Err(fault))) => {
                    this.finished = true;
                    Poll::Ready(Some(Err(fault.into_error(
                        this.context.clone(),
                        &this.sandbox_id,
                        Stage::Call,
                    ))))
                }
                Poll::Ready(None) => {
                    this.finished = true;
                    Poll::Ready(None)
                }
            };
        }
    }
}

/// Fails on an absent `entry` in a response that must carry one.
fn required_entry(
    context: Context,
    entry: buffa::MessageField<pb::EntryInfo, buffa::Inline<pb::EntryInfo>>,
) -> Result<EntryInfo> {
    let entry = entry
        .into_option()
        .ok_or_else(|| Error::protocol(context.clone(), "the response carries no entry"))?;
    EntryInfo::from_proto(entry).map_err(|message| Error::protocol(context, message))
}

impl<T> Envd<T>
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: fmt::Display,
{
    /// Metadata of `path` (`lstat`: a symlink is described, not followed).
    /// Relative paths resolve against the user's home; `~` expands.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `path` does not exist.
    pub async fn stat(&self, path: &str, options: &CallOptions) -> Result<EntryInfo> {
        let context = Context::new("stat", path);
        let call = self.user_call(&context, options)?;
        let request = pb::StatRequest {
            path: path.to_owned(),
            ..Default::default()
        };
        let response = self.unary(
            &context,
            self.filesystem.stat_with_options(request, call).await,
        )?;
        required_entry(context, response.entry)
    }

    /// Creates `path` and its missing parents (mode 0755, owned by the
    /// user), like `mkdir -p`.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when `path` is already a directory;
    /// [`Error::InvalidArgument`] when it is a file.
    pub async fn make_dir(&self, path: &str, options: &CallOptions) -> Result<EntryInfo> {
        let context = Context::new("make directory", path);
        let call = self.user_call(&context, options)?;
        let request = pb::MakeDirRequest {
            path: path.to_owned(),
            ..Default::default()
        };
        let response = self.unary(
            &context,
            self.filesystem.make_dir_with_options(request, call).await,
        )?;
        required_entry(context, response.entry)
    }

    /// Renames `source` to `destination`, creating the destination's
    /// parents; returns the destination's metadata.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `source` does not exist.
    pub async fn rename(
        &self,
        source: &str,
        destination: &str,
        options: &CallOptions,
    ) -> Result<EntryInfo> {
        let context = Context::new("rename", format!("{source} to {destination}"));
        let call = self.user_call(&context, options)?;
        let request = pb::MoveRequest {
            source: source.to_owned(),
            destination: destination.to_owned(),
            ..Default::default()
        };
        let response = self.unary(
            &context,
            self.filesystem.move_with_options(request, call).await,
        )?;
        required_entry(context, response.entry)
    }

    /// The entries under directory `path` down to `depth` levels (1 = its
    /// children), in lexical pre-order; symlinked directories are not
    /// descended into.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `depth` 0 (nothing is sent) or a path
    /// that is not a directory; [`Error::NotFound`] when it does not exist.
    pub async fn list_dir(
        &self,
        path: &str,
        depth: u32,
        options: &CallOptions,
    ) -> Result<Vec<EntryInfo>> {
        let context = Context::new("list directory", path);
        if depth == 0 {
            return Err(Error::invalid_argument(context, "depth must be at least 1"));
        }
        let call = self.user_call(&context, options)?;
        let request = pb::ListDirRequest {
            path: path.to_owned(),
            depth,
            ..Default::default()
        };
        let response = self.unary(
            &context,
            self.filesystem.list_dir_with_options(request, call).await,
        )?;
        response
            .entries
            .into_iter()
            .map(|entry| {
                EntryInfo::from_proto(entry).map_err(|m| Error::protocol(context.clone(), m))
            })
            .collect()
    }

    /// Removes `path` recursively; removing a missing path succeeds.
    ///
    /// # Errors
    /// `internal` (as [`Error::Rpc`]) when removal fails.
    pub async fn remove(&self, path: &str, options: &CallOptions) -> Result<()> {
        let context = Context::new("remove", path);
        let call = self.user_call(&context, options)?;
        let request = pb::RemoveRequest {
            path: path.to_owned(),
            ..Default::default()
        };
        self.unary(
            &context,
            self.filesystem.remove_with_options(request, call).await,
        )?;
        Ok(())
    }

    /// Watches directory `path` and waits for the watch to start (bounded
    /// by the handshake timeout); events that happen after this returns are
    /// delivered.
    ///
    /// # Errors
    /// [`Error::NotFound`] / [`Error::InvalidArgument`] for a missing path
    /// or a non-directory; [`Error::SandboxNotFound`] when the sandbox is
    /// not running.
    pub async fn watch_dir(
        &self,
        path: &str,
        watch: WatchOptions,
        options: &StreamOptions,
    ) -> Result<WatchStream> {
        let context = Context::new("watch directory", path);
        let call = self.rpc_options(
            &context,
            Access::AsUser(options.user.as_deref()),
            options.timeout,
            options.keepalive_interval,
        )?;
        let request = pb::WatchDirRequest {
            path: path.to_owned(),
            recursive: watch.recursive,
            include_entry: watch.include_entry,
            allow_network_mounts: watch.allow_network_mounts,
            ..Default::default()
        };
        let (first, raw) = stream::handshake(
            &context,
            &self.sandbox_id,
            options.handshake_timeout.resolve(self.request_timeout),
            async {
                let server = self
                    .filesystem
                    .watch_dir_with_options(request, call)
                    .await?;
                Ok(stream::raw_stream(server, convert_watch))
            },
        )
        .await?;
        match first {
            RawWatch::Start => Ok(WatchStream {
                raw,
                context,
                sandbox_id: Arc::clone(&self.sandbox_id),
                finished: false,
            }),
            other => Err(Error::protocol(
                context,
                format!("expected a start event first, got {other:?}"),
            )),
        }
    }

    /// Creates a polling watcher on directory `path`; returns its id.
    ///
    /// # Errors
    /// As [`Envd::watch_dir`].
    pub async fn create_watcher(
        &self,
        path: &str,
        watch: WatchOptions,
        options: &CallOptions,
    ) -> Result<String> {
        let context = Context::new("create watcher", path);
        let call = self.user_call(&context, options)?;
        let request = pb::CreateWatcherRequest {
            path: path.to_owned(),
            recursive: watch.recursive,
            include_entry: watch.include_entry,
            allow_network_mounts: watch.allow_network_mounts,
            ..Default::default()
        };
        let response = self.unary(
            &context,
            self.filesystem
                .create_watcher_with_options(request, call)
                .await,
        )?;
        if response.watcher_id.is_empty() {
            return Err(Error::protocol(
                context,
                "envd returned an empty watcher id",
            ));
        }
        Ok(response.watcher_id)
    }

    /// Drains the events a polling watcher has buffered.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown watcher; a watcher's own failure
    /// is reported here.
    pub async fn watcher_events(
        &self,
        watcher_id: &str,
        options: &CallOptions,
    ) -> Result<Vec<FsEvent>> {
        let context = Context::new("get watcher events", watcher_id);
        let call = self.anonymous_call(&context, options)?;
        let request = pb::GetWatcherEventsRequest {
            watcher_id: watcher_id.to_owned(),
            ..Default::default()
        };
        let response = self.unary(
            &context,
            self.filesystem
                .get_watcher_events_with_options(request, call)
                .await,
        )?;
        response
            .events
            .into_iter()
            .map(|event| {
                FsEvent::from_proto(event).map_err(|m| Error::protocol(context.clone(), m))
            })
            .collect()
    }

    /// Removes a polling watcher.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown watcher.
    pub async fn remove_watcher(&self, watcher_id: &str, options: &CallOptions) -> Result<()> {
        let context = Context::new("remove watcher", watcher_id);
        let call = self.anonymous_call(&context, options)?;
        let request = pb::RemoveWatcherRequest {
            watcher_id: watcher_id.to_owned(),
            ..Default::default()
        };
        self.unary(
            &context,
            self.filesystem
                .remove_watcher_with_options(request, call)
                .await,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_convert_with_types_times_and_metadata() {
        let entry = pb::EntryInfo {
            name: "a.txt".into(),
            r#type: pb::FileType::FILE_TYPE_FILE.into(),
            path: "/home/user/a.txt".into(),
            size: 5,
            mode: 0o644,
            permissions: "-rw-r--r--".into(),
            owner: "user".into(),
            group: "user".into(),
            modified_time: buffa::MessageField::some(buffa_types::google::protobuf::Timestamp {
                seconds: 1_700_000_000,
                nanos: 5,
                ..Default::default()
            }),
            metadata: [("k".to_owned(), "v".to_owned())].into_iter().collect(),
            ..Default::default()
        };
        let info = EntryInfo::from_proto(entry).unwrap();
        assert_eq!(info.file_type, FileType::File);
        assert_eq!(info.size, 5);
        assert_eq!(info.mode, 0o644);
        assert_eq!(info.modified.unwrap().as_second(), 1_700_000_000);
        assert_eq!(info.metadata.get("k").map(String::as_str), Some("v"));
        assert_eq!(
            FileType::from_proto(&buffa::EnumValue::from(9)),
            FileType::Other(9)
        );
    }

    #[test]
    fn negative_sizes_and_bad_times_are_protocol_errors() {
        let negative = pb::EntryInfo {
            path: "/x".into(),
            size: -1,
            ..Default::default()
        };
        assert!(
            EntryInfo::from_proto(negative)
                .unwrap_err()
                .contains("negative size")
        );
        let bad_time = pb::EntryInfo {
            path: "/x".into(),
            modified_time: buffa::MessageField::some(buffa_types::google::protobuf::Timestamp {
                seconds: i64::MAX,
                nanos: 0,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(
            EntryInfo::from_proto(bad_time)
                .unwrap_err()
                .contains("modification time")
        );
    }

    #[test]
    fn event_kinds_convert() {
        let event = pb::FilesystemEvent {
            name: "nested/f.txt".into(),
            r#type: pb::EventType::EVENT_TYPE_WRITE.into(),
            ..Default::default()
        };
        let event = FsEvent::from_proto(event).unwrap();
        assert_eq!(event.kind, FsEventKind::Write);
        assert_eq!(event.name, "nested/f.txt");
        assert!(event.entry.is_none());
    }
}
