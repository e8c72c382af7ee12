//! `world`: the `fs` seam's world-side operations answered inside the
//! sandbox for `dsh-fs-e2b` (docs/design.md §6.3) — one process per
//! operation instead of a round trip per directory and file.
//!
//! The engines are `dsh-fs-local`'s native ones (`dsh_fs_local::native`:
//! directory descriptors, `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`,
//! the kit's walk and search), run with the world user's identity, which
//! the supervisor takes on first (envd starts it as root). Entries are
//! described as envd describes them ([`Envd`]), so their metadata and
//! versions are what the provider's `lstat` and `read_text` answer.
//! Results leave as frames on stdout (`dsh_supervisor::world`), written
//! as they are produced — the first at once, then in batches of up to
//! 32 KiB — so a full pipe stops the walk until the host reads on, and a
//! host that drops the stream kills this process.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use dsh_fs_local::native::{Describe, LocalTree, kind_of, read_many};
use dsh_plugin_api::Error;
use dsh_plugin_api::fs::{Metadata, Version};
use dsh_provider_kit::world::{search_tree, walk_tree};
use dsh_supervisor::envd_entry::{EntryState, go_mode_string};
use dsh_supervisor::wire::{self, Identity};
use dsh_supervisor::world::{
    self as frames, WorldOp, WorldRequest, encode_error, encode_items, encode_search_event,
    encode_walk_event,
};
use futures::StreamExt;

use crate::sys;

/// Output is written once this much is buffered (and the first frame at
/// once, so the host sees a walk start).
const BATCH: usize = 32 * 1024;

/// Runs `request`; the exit status is 0 once an answer (or the error that
/// ended the operation) was written, 2 if even that failed.
pub fn main(request: WorldRequest) -> i32 {
    let mut out = Frames::default();
    if let Err(message) = take_identity(&request.identity) {
        out.push(frames::ERROR, &encode_error(&Error::io(message)));
        return out.finish();
    }
    let describe = Arc::new(Envd::load());
    let cwd = PathBuf::from(&request.cwd);
    let answered = futures::executor::block_on(async {
        match request.op {
            WorldOp::Walk { root, spec } => {
                let tree = LocalTree::open(describe, "walk", cwd.join(&root))?;
                let events = walk_tree(tree, &root, spec).await?;
                out.stream(events, encode_walk_event).await
            }
            WorldOp::Search { root, spec } => {
                let tree = LocalTree::open(describe, "search", cwd.join(&root))?;
                let events = search_tree(tree, &root, spec).await?;
                out.stream(events, encode_search_event).await
            }
            WorldOp::ReadMany { paths, limits } => {
                let items = read_many(&describe, &cwd, paths, limits)?;
                out.push(frames::ITEMS, &encode_items(&items));
                Ok(())
            }
        }
    });
    if let Err(err) = answered {
        out.push(frames::ERROR, &encode_error(&err));
    }
    out.finish()
}

/// Takes on the world user's identity for good: from root (as envd starts
/// the supervisor), or nothing to do when already that user.
fn take_identity(identity: &Identity) -> Result<(), String> {
    let euid = rustix::process::geteuid().as_raw();
    if euid == identity.uid {
        return Ok(());
    }
    if euid != 0 {
        return Err(format!(
            "world: the supervisor runs as uid {euid}, neither root nor the world's user ({})",
            identity.uid
        ));
    }
    sys::become_user(identity.uid, identity.gid, &identity.groups)
        .map_err(|err| format!("world: taking on the world user's identity: {err}"))
}

/// Frames on stdout, batched.
#[derive(Default)]
struct Frames {
    buf: Vec<u8>,
    written: bool,
    failed: bool,
}

impl Frames {
    fn push(&mut self, tag: u8, payload: &[u8]) {
        let mut header = [0u8; wire::HEADER];
        wire::frame_header(&mut header, tag, payload.len());
        self.buf.extend_from_slice(&header);
        self.buf.extend_from_slice(payload);
        if !self.written || self.buf.len() >= BATCH {
            self.flush();
        }
    }

    /// Every event of `events` in an [`frames::EVENT`] frame; the error
    /// that ends it is the operation's.
    async fn stream<E>(
        &mut self,
        mut events: std::pin::Pin<
            Box<dyn futures::Stream<Item = dsh_plugin_api::Result<E>> + Send>,
        >,
        encode: fn(&E) -> Vec<u8>,
    ) -> dsh_plugin_api::Result<()> {
        while let Some(event) = events.next().await {
            self.push(frames::EVENT, &encode(&event?));
        }
        Ok(())
    }

    fn flush(&mut self) {
        if self.failed || self.buf.is_empty() {
            return;
        }
        // A host that went away: nothing more to say to it.
        if sys::write_all_fd(rustix::stdio::stdout(), &self.buf).is_err() {
            self.failed = true;
            std::process::exit(2);
        }
        self.written = true;
        self.buf.clear();
    }

    fn finish(mut self) -> i32 {
        self.flush();
        if self.failed { 2 } else { 0 }
    }
}

/// Entries described as envd describes them (docs/e2b-protocol.md §6.2):
/// `lstat`-based; a symlink by its resolved target's type and `0o777`
/// bits; Go's mode string; owner and group names from `/etc/passwd` and
/// `/etc/group` (an unknown id as its number); the `user.e2b.*` extended
/// attributes.
struct Envd {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

impl Envd {
    fn load() -> Envd {
        let names = |file: &str| -> HashMap<u32, String> {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            text.lines()
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split(':').collect();
                    let id = fields.get(2)?.parse().ok()?;
                    Some((id, fields[0].to_owned()))
                })
                // The first entry of an id names it, as a lookup finds it.
                .rev()
                .collect()
        };
        Envd {
            users: names("/etc/passwd"),
            groups: names("/etc/group"),
        }
    }

    fn name(table: &HashMap<u32, String>, id: u32) -> String {
        table.get(&id).cloned().unwrap_or_else(|| id.to_string())
    }
}

/// envd's type code of a followed entry: 1 file, 2 directory, else 0.
fn type_code(meta: &std::fs::Metadata) -> i32 {
    if meta.is_file() {
        1
    } else if meta.is_dir() {
        2
    } else {
        0
    }
}

impl Describe for Envd {
    fn describe(&self, path: &Path, meta: &std::fs::Metadata, target: Option<String>) -> Metadata {
        let file_type = meta.file_type();
        let (code, mode, resolved) = if file_type.is_symlink() {
            // envd reports the fully resolved target, or the link itself
            // when it cannot resolve it.
            let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            match std::fs::metadata(&resolved) {
                Ok(followed) => (
                    type_code(&followed),
                    followed.mode() & 0o777,
                    Some(resolved),
                ),
                Err(_) => (0, 0, Some(resolved)),
            }
        } else {
            (type_code(meta), meta.mode() & 0o777, None)
        };
        let (seconds, nanos) = (meta.mtime(), meta.mtime_nsec());
        let modified = (seconds != 0 || nanos != 0).then_some((seconds, nanos as i32));
        let resolved = resolved.map(|path| path.to_string_lossy().into_owned());
        let version = EntryState {
            type_code: code,
            permissions: &go_mode_string(meta.mode()),
            mode,
            size: meta.size(),
            owner: &Envd::name(&self.users, meta.uid()),
            group: &Envd::name(&self.groups, meta.gid()),
            modified,
            symlink_target: resolved.as_deref(),
            metadata: &e2b_metadata(path),
        }
        .version();
        let since = Duration::new(seconds.unsigned_abs(), nanos.clamp(0, 999_999_999) as u32);
        Metadata {
            kind: kind_of(file_type),
            size: meta.size(),
            mode: meta.mode() & 0o7777,
            modified: if seconds >= 0 {
                UNIX_EPOCH + since
            } else {
                UNIX_EPOCH - Duration::from_secs(seconds.unsigned_abs())
                    + Duration::from_nanos(nanos.max(0) as u64)
            },
            symlink_target: target,
            version: Version(version),
        }
    }

    fn version(&self, path: &Path, meta: &std::fs::Metadata) -> Version {
        self.describe(path, meta, None).version
    }
}

/// The `user.e2b.*` extended attributes of `path` (followed, as envd reads
/// them), without the prefix; unreadable ones are left out.
fn e2b_metadata(path: &Path) -> BTreeMap<String, String> {
    const PREFIX: &[u8] = b"user.e2b.";
    let mut metadata = BTreeMap::new();
    let mut names = vec![0u8; 4096];
    let Ok(len) = rustix::fs::listxattr(path, &mut names[..]) else {
        return metadata;
    };
    for name in names[..len].split(|&byte| byte == 0) {
        let Some(key) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let mut value = vec![0u8; 4096];
        if let (Ok(key), Ok(len)) = (
            std::str::from_utf8(key),
            rustix::fs::getxattr(path, OsStr::from_bytes(name), &mut value[..]),
        ) && let Ok(value) = String::from_utf8(value[..len].to_vec())
        {
            metadata.insert(key.to_owned(), value);
        }
    }
    metadata
}
