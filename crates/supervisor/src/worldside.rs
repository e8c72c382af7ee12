//! `world`: the `fs` seam's world-side operations answered inside the
//! sandbox for `dsh-fs-e2b` (docs/design.md §6.3) — one resident process
//! per provider, operations requested on its stdin and answered on its
//! stdout (`dsh_supervisor::world`), several at once.
//!
//! The engines are `dsh-fs-local`'s native ones (`dsh_fs_local::native`:
//! directory descriptors, `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`,
//! the kit's walk and search), run with the world user's identity, which
//! the supervisor takes on first (envd starts it as root) and keeps. Each
//! operation runs on a thread of its own. Entries are described as envd
//! describes them ([`Envd`]), so their metadata and versions are what the
//! provider's `lstat` and `read_text` answer. An operation's frames are
//! written as they are produced — the first at once, then in batches of up
//! to 32 KiB — and at most [`frames::WINDOW`] bytes ahead of the host's
//! credits, so a host that stops reading one operation stops that one only.
//! A cancelled operation stops at its next event; a hold
//! ([`WorldOp::Hold`]) closes its file when cancelled; an edit or a write
//! ([`WorldOp::Edit`], [`WorldOp::Write`], `crate::world_replace`) runs to
//! its end. The process ends on
//! stdin's end, when nothing arrived for its lease, or when stdout is gone.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use dsh_fs_local::native::{Describe, Listed, LocalTree, kind_of, read_many};
use dsh_plugin_api::Error;
use dsh_plugin_api::fs::{Metadata, Version};
use dsh_provider_kit::world::{search_tree, walk_tree};
use dsh_supervisor::envd_entry::{EntryState, go_mode_string};
use dsh_supervisor::wire::{self, Identity};
use dsh_supervisor::world::{
    self as frames, WorldOp, WorldRequest, WorldStart, encode_error, encode_items,
    encode_replace_answer, encode_search_event, encode_walk_event,
};
use futures::StreamExt;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags};

use crate::{sys, world_replace, xattr_names};

/// Output is written once this much is buffered (and the first frame at
/// once, so the host sees a walk start).
const BATCH: usize = 32 * 1024;

/// Serves operations until stdin ends (0), nothing arrives for the lease
/// (0), or the input is broken (2).
pub fn main(start: WorldStart) -> i32 {
    if let Err(message) = take_identity(&start.identity) {
        eprintln!("dsh-supervisor: {message}");
        return 2;
    }
    let flows: Flows = Arc::default();
    let stdout: Stdout = Arc::default();
    let stdin = rustix::stdio::stdin();
    let lease = Timespec::try_from(start.lease).unwrap_or(Timespec {
        tv_sec: i64::MAX,
        tv_nsec: 0,
    });
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
        match rustix::io::retry_on_intr(|| rustix::event::poll(&mut fds, Some(&lease))) {
            Ok(0) => {
                eprintln!(
                    "dsh-supervisor: world: nothing from the host for {} ms; ending",
                    start.lease.as_millis()
                );
                return 0;
            }
            Ok(_) => {}
            Err(err) => {
                eprintln!("dsh-supervisor: world: poll stdin: {err}");
                return 2;
            }
        }
        let read = match sys::read_fd(stdin, &mut chunk) {
            Ok(0) => return 0,
            Ok(read) => read,
            Err(err) => {
                eprintln!("dsh-supervisor: world: read stdin: {err}");
                return 2;
            }
        };
        buf.extend_from_slice(&chunk[..read]);
        let used = match frames::complete_frames(&buf, frames::MAX_INPUT_FRAME) {
            Ok((input, used)) => {
                for frame in input {
                    if let Err(message) = dispatch(frame.tag, frame.payload, &flows, &stdout) {
                        eprintln!("dsh-supervisor: world: {message}");
                        return 2;
                    }
                }
                used
            }
            Err(err) => {
                eprintln!("dsh-supervisor: world: {}", err.0);
                return 2;
            }
        };
        buf.drain(..used);
    }
}

/// One frame from the host.
fn dispatch(tag: u8, payload: &[u8], flows: &Flows, stdout: &Stdout) -> Result<(), String> {
    if tag == frames::PING {
        return Ok(());
    }
    let (id, body) = frames::split_id(payload).map_err(|err| err.0)?;
    match tag {
        frames::REQUEST => {
            let flow = Arc::new(Flow::default());
            lock(flows).insert(id, flow.clone());
            let out = Frames {
                id,
                flow,
                stdout: stdout.clone(),
                buf: Vec::new(),
                written: false,
                sent: 0,
            };
            let request = WorldRequest::decode(body);
            let flows = flows.clone();
            std::thread::Builder::new()
                .name(format!("world-{id}"))
                .spawn(move || {
                    serve(request, out);
                    lock(&flows).remove(&id);
                })
                .map_err(|err| format!("start a thread for operation {id}: {err}"))?;
        }
        frames::CANCEL => {
            if let Some(flow) = lock(flows).get(&id) {
                flow.update(|state| state.cancelled = true);
            }
        }
        frames::CREDIT => {
            let mut r = wire::Reader::new(body);
            let credit = r.u64("credit").map_err(|err| err.0)?;
            if let Some(flow) = lock(flows).get(&id) {
                flow.update(|state| state.acked = state.acked.saturating_add(credit));
            }
        }
        other => return Err(format!("unknown frame {other}")),
    }
    Ok(())
}

/// Runs one operation, writing its answer (or the error that ended it)
/// unless it is cancelled first.
fn serve(request: Result<WorldRequest, wire::DecodeError>, mut out: Frames) {
    let request = match request {
        Ok(request) => request,
        Err(err) => {
            out.push(
                frames::ERROR,
                &encode_error(&Error::io(format!("world: a broken request: {}", err.0))),
            );
            out.finish();
            return;
        }
    };
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
            WorldOp::Hold { path } => {
                let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let held = rustix::fs::open(cwd.join(&path), flags, Mode::empty())
                    .map_err(|err| Error::from_io(&format!("hold {path}"), &err.into()))?;
                if out.push(frames::HELD, &[]) {
                    out.until_cancelled();
                }
                // The last reference to a file replaced meanwhile: its
                // pages and blocks are freed here, in this thread's time.
                drop(held);
                Ok(())
            }
            WorldOp::Edit { target, edits } => {
                let answer = world_replace::edit(describe.as_ref(), &cwd, &target, &edits)?;
                out.push(frames::REPLACED, &encode_replace_answer(&answer));
                Ok(())
            }
            WorldOp::Write { target, content } => {
                let answer = world_replace::write(describe.as_ref(), &cwd, &target, &content)?;
                out.push(frames::REPLACED, &encode_replace_answer(&answer));
                Ok(())
            }
        }
    });
    if let Err(err) = answered {
        out.push(frames::ERROR, &encode_error(&err));
    }
    out.finish();
}

/// Takes on the world user's identity for good, for every thread: from
/// root (as envd starts the supervisor), or nothing to do when already
/// that user.
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

/// The operations running, by id.
type Flows = Arc<Mutex<HashMap<u64, Arc<Flow>>>>;

/// stdout, one writer at a time (each write is whole frames).
type Stdout = Arc<Mutex<()>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the host said of one operation.
#[derive(Default)]
struct Flow {
    state: Mutex<FlowState>,
    changed: Condvar,
}

#[derive(Default)]
struct FlowState {
    /// Frame bytes the host consumed ([`frames::CREDIT`]).
    acked: u64,
    cancelled: bool,
}

impl Flow {
    fn update(&self, change: impl FnOnce(&mut FlowState)) {
        change(&mut lock(&self.state));
        self.changed.notify_all();
    }
}

/// One operation's frames on stdout, batched and within its window.
struct Frames {
    id: u64,
    flow: Arc<Flow>,
    stdout: Stdout,
    buf: Vec<u8>,
    written: bool,
    /// Frame bytes produced so far (written or buffered).
    sent: u64,
}

impl Frames {
    /// Adds a frame; `false` when the operation is cancelled (nothing more
    /// is written of it).
    fn push(&mut self, tag: u8, body: &[u8]) -> bool {
        let frame = frames::frame(tag, self.id, body);
        let len = frame.len() as u64;
        let mut state = lock(&self.flow.state);
        if !state.cancelled && self.out_of_credit(&state) {
            // What is buffered must reach the host for it to give more.
            drop(state);
            self.flush();
            state = lock(&self.flow.state);
            while !state.cancelled && self.out_of_credit(&state) {
                state = self
                    .flow
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
        if state.cancelled {
            return false;
        }
        drop(state);
        self.buf.extend_from_slice(&frame);
        self.sent += len;
        if !self.written || self.buf.len() >= BATCH {
            self.flush();
        }
        true
    }

    /// Whether more than the window is unacknowledged (so at most the
    /// window and one frame are: the host credits whatever it consumed
    /// once it caught up, so a wait always ends).
    fn out_of_credit(&self, state: &FlowState) -> bool {
        self.sent > state.acked + frames::WINDOW
    }

    /// Every event of `events` in an [`frames::EVENT`] frame, until the
    /// operation is cancelled; the error that ends it is the operation's.
    async fn stream<E>(
        &mut self,
        mut events: std::pin::Pin<
            Box<dyn futures::Stream<Item = dsh_plugin_api::Result<E>> + Send>,
        >,
        encode: fn(&E) -> Vec<u8>,
    ) -> dsh_plugin_api::Result<()> {
        while let Some(event) = events.next().await {
            if !self.push(frames::EVENT, &encode(&event?)) {
                break;
            }
        }
        Ok(())
    }

    /// Waits until the host cancels the operation.
    fn until_cancelled(&self) {
        let mut state = lock(&self.flow.state);
        while !state.cancelled {
            state = self
                .flow
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let _whole = lock(&self.stdout);
        // A host that went away: nothing more to say to it.
        if sys::write_all_fd(rustix::stdio::stdout(), &self.buf).is_err() {
            std::process::exit(2);
        }
        self.written = true;
        self.buf.clear();
    }

    fn finish(mut self) {
        self.flush();
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
    fn describe(
        &self,
        entry: &Listed<'_>,
        meta: &std::fs::Metadata,
        target: Option<String>,
    ) -> Metadata {
        let names = xattr_names::names(entry.path, Some((entry.dir, entry.name)), meta);
        self.metadata(entry.path, meta, target, names.as_deref())
    }

    fn version(&self, path: &Path, meta: &std::fs::Metadata) -> Version {
        let names = xattr_names::names(path, None, meta);
        self.metadata(path, meta, None, names.as_deref()).version
    }
}

impl Envd {
    /// The metadata of `path`, whose `lstat` is `meta` and extended
    /// attribute names `xattrs` ([`xattr_names::names`]).
    fn metadata(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
        target: Option<String>,
        xattrs: Option<&[u8]>,
    ) -> Metadata {
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
            metadata: &e2b_metadata(path, xattrs),
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
}

/// The `user.e2b.*` extended attributes among `path`'s `names` (values read
/// through `path`, followed), without the prefix; unreadable ones are left
/// out.
fn e2b_metadata(path: &Path, names: Option<&[u8]>) -> BTreeMap<String, String> {
    const PREFIX: &[u8] = b"user.e2b.";
    let mut metadata = BTreeMap::new();
    let Some(names) = names else {
        return metadata;
    };
    for name in names.split(|&byte| byte == 0) {
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
