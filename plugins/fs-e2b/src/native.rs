//! The world-side operations (`walk`, `search`, `read_many`,
//! docs/design.md §5.1) answered inside the sandbox, small texts read,
//! edited and rewritten there while it runs ([`World::read_text_native`],
//! [`World::edit_native`], [`World::write_native`]), and the hold that keeps a large replaced file's
//! freeing out of a write's time ([`Hold`]): one resident
//! `dsh-supervisor world` process per provider, running `dsh-fs-local`'s
//! native engines with the world user's identity (docs/design.md §6.3).
//!
//! The supervisor is installed once per provider, on the first world-side
//! operation: its upload (as root, into `<runtime root>/fs-e2b-<instance>/`)
//! and the install script start together, the script waiting on its stdin
//! for the word that the upload is complete — here the world user's name,
//! which a command as that user learns meanwhile when envd's default user
//! is meant; the supervisor's `probe` then checks its own digest and
//! reports the user's uid, gid and groups. When it cannot be installed the
//! reason is logged once and every later call is answered `Unsupported`,
//! so callers run the composition over the seam's primitives
//! (`dsh_provider_kit::world`).
//!
//! The process ([`Resident`]) is started on first need and serves every
//! operation of the provider: a request is a frame written to its stdin
//! (one writer task batches what is queued onto one long-lived envd
//! `StreamInput`, [`e2b_client::StdinWriter`] — `SendInput` per batch on
//! an envd without it — and writes a ping when idle: the process's lease,
//! see `dsh_supervisor::world`), the answers are frames on its stdout,
//! which a reader task hands to the operation whose id they carry. Dropping
//! a stream part-way sends a cancel for its id. If the process ends, or its
//! input stream is cut (frames on it may be lost), every operation in
//! flight gets an error saying so, the process is killed and the next call
//! starts another. Disposal closes its stdin, which ends it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use dsh_e2b_gateway::{CONTROL_USER, ControlShell, InstallPaths, install_helper};
use dsh_plugin_api::fs::{
    Edit, EditOutcome, ReadManyItem, ReadManyLimits, SearchEvent, SearchSpec, SearchStream,
    TextFile, Version, WalkEvent, WalkSpec, WalkStream, WriteGuard,
};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_supervisor::wire::{self, Identity};
use dsh_supervisor::world::{self as frames, ReplaceAnswer, Replacing, WorldOp, WorldRequest};
use e2b_client::{CallOptions, Envd, InputRoute, ProcessEvent, ProcessStream, Signal, StdinWriter};
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::errors::{Op, OwnedOp};
use crate::locks;
use crate::version::{WRITE_TOKEN_KEY, new_write_token};
use crate::world::{EnvdTransport, World};

/// How long a write waits for the helper to hold the file it replaces
/// before it renames without (the hold saves it milliseconds).
const HOLD_TIMEOUT: Duration = Duration::from_millis(500);
/// The largest file [`World::read_text_native`] reads,
/// [`World::edit_native`] edits and [`World::write_native`] replaces (and
/// writes) through the helper: one frame, and about what the envd way
/// downloads in one round trip.
const NATIVE_FILE_MAX: u64 = 1 << 20;
/// Bound on the upload and the install script.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Most of the supervisor's stderr kept for an error message.
const STDERR_LIMIT: usize = 8 * 1024;
/// How long disposal waits for the process's stdin to be closed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a failed stdin write waits for the reader to see the process's
/// end: envd refuses input to a process that has just ended before its end
/// event arrives, and the end (`signal: killed`) is the reason worth telling.
const END_GRACE: Duration = Duration::from_secs(1);

/// The installed supervisor and who the world's user is.
#[derive(Debug, Clone)]
pub(crate) struct Native {
    /// Its directory, removed on disposal; `None` for the template's copy.
    dir: Option<String>,
    helper: String,
    identity: Identity,
    /// Root's shell: the supervisor starts as root and takes on
    /// `identity` itself.
    root: ControlShell,
}

impl<T: EnvdTransport> World<T> {
    /// The supervisor of this provider, installed on first need; `None`
    /// (the reason logged once) when it cannot be.
    async fn native(&self) -> Option<&Native> {
        self.native
            .get_or_init(|| async {
                // Boxed: the install's future is large, and every
                // world-side operation's future would carry it inline.
                match Box::pin(self.install()).await {
                    Ok(native) => Some(native),
                    Err(err) => {
                        tracing::warn!(
                            sandbox = %self.sandbox_id,
                            "fs-e2b: world-side operations fall back to the composition over \
                             envd calls: {err}"
                        );
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// Removes the installed supervisor's directory (at disposal): one
    /// envd `Remove` as root; a sandbox already gone is as good.
    pub(crate) async fn remove_native(&self) -> Result<()> {
        if let Some(resident) = self.resident.lock().await.take() {
            resident.close().await;
        }
        let Some(Some(Native { dir: Some(dir), .. })) = self.native.get() else {
            return Ok(());
        };
        match self.remove_as_root(dir).await {
            Err(err) if !err.is_sandbox_gone() => Err(Op::new("dispose", dir).remote(&err)),
            _ => Ok(()),
        }
    }

    async fn remove_as_root(&self, dir: &str) -> e2b_client::Result<()> {
        self.envd
            .remove(dir, &CallOptions::default().user(CONTROL_USER))
            .await
    }

    /// [`World::install_in`] a fresh directory, which is removed again when
    /// the install fails.
    async fn install(&self) -> Result<Native> {
        let dir = format!(
            "{}/fs-e2b-{:016x}",
            self.runtime_root,
            rand::random::<u64>()
        );
        let installed = self.install_in(dir.clone()).await;
        if installed.is_err() {
            let _ = self.remove_as_root(&dir).await;
        }
        installed
    }

    async fn install_in(&self, dir: String) -> Result<Native> {
        let root = ControlShell::new(&self.runtime_root);
        let paths = InstallPaths {
            upload: format!("{dir}/dsh-supervisor.part"),
            installed: format!("{dir}/dsh-supervisor"),
        };
        let user = async {
            if let Some(user) = &self.user {
                return Ok(user.clone());
            }
            let output = self
                .shell
                .run(
                    &self.envd,
                    &self.shell.exec("id", ["-un"]),
                    SETUP_TIMEOUT,
                    4096,
                )
                .await?;
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        };
        let installed = install_helper(
            &self.envd,
            &root,
            &paths,
            user,
            None,
            SETUP_TIMEOUT,
            1 << 20,
        )
        .await
        .map_err(|err| Error::io(format!("install the sandbox helper: {err}")))?;
        let output = installed.output;
        if !output.status.success() {
            return Err(Error::io(format!(
                "install the sandbox helper: the install script failed ({}): {}",
                output.status.status,
                output.stderr_text()
            )));
        }
        let identity = parse_probe(&output.stdout)
            .map_err(|message| Error::io(format!("install the sandbox helper: {message}")))?;
        Ok(Native {
            dir: (!installed.preinstalled).then_some(dir),
            helper: installed.helper,
            identity,
            root,
        })
    }

    /// The running supervisor, started when there is none (or the last
    /// one ended); `Unsupported` when it is not installed, so callers
    /// compose the operation instead.
    async fn resident(&self, name: Op<'_>) -> Result<Arc<Resident>> {
        let Some(native) = self.native().await else {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the sandbox helper is not installed",
            ));
        };
        let mut slot = self.resident.lock().await;
        if let Some(resident) = slot.as_ref()
            && resident.shared.running()
            && !resident.input.is_closed()
        {
            return Ok(resident.clone());
        }
        let start = frames::WorldStart {
            identity: native.identity.clone(),
            lease: frames::LEASE,
        };
        let start = wire::base64_encode(&start.encode());
        let command = native
            .root
            .exec(&native.helper, ["world"])
            .env(wire::REQUEST_ENV, start)
            .stdin(true);
        // No timeout: it lives as long as the provider (or its lease).
        let stream = self
            .envd
            .start(&command, &native.root.options())
            .await
            .map_err(|err| name.remote(&err))?;
        let pid = stream.pid();
        let route = match self.input_route.get(&self.envd, pid).await {
            Ok(route) => route,
            Err(err) => {
                let _ = self
                    .envd
                    .send_signal(pid, Signal::Kill, &CallOptions::default())
                    .await;
                return Err(name.remote(&err));
            }
        };
        let resident = Resident::spawn(self.envd.clone(), stream, route);
        *slot = Some(resident.clone());
        Ok(resident)
    }

    /// Starts `op` in the sandbox.
    async fn start_native(&self, name: Op<'_>, cwd: &str, op: WorldOp) -> Result<Call> {
        let request = WorldRequest {
            cwd: cwd.to_owned(),
            op,
        }
        .encode();
        if request.len() + 8 > frames::MAX_INPUT_FRAME {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the request is too large for the sandbox helper",
            ));
        }
        // Boxed: the install and start futures are large, and a debug
        // build's caller may be on a small stack.
        let resident = Box::pin(self.resident(name)).await?;
        let (sender, answers) = mpsc::unbounded_channel();
        let id = resident.next_id.fetch_add(1, Ordering::Relaxed);
        match lock(&resident.shared.ops).as_mut() {
            Some(ops) => ops.insert(id, sender),
            None => {
                return Err(name.error(
                    ErrorKind::Io,
                    format_args!("the sandbox helper ended: {}", resident.shared.end_reason()),
                ));
            }
        };
        let call = Call {
            op: name.to_owned(),
            resident,
            id,
            answers,
            consumed: 0,
            done: false,
        };
        call.resident
            .send(frames::frame(frames::REQUEST, id, &request));
        Ok(call)
    }

    /// `walk` in the sandbox.
    pub(crate) async fn walk_native(
        self: &Arc<Self>,
        cwd: &str,
        root: &str,
        spec: WalkSpec,
    ) -> Result<WalkStream> {
        let op = WorldOp::Walk {
            root: root.to_owned(),
            spec,
        };
        let is_end = |event: &WalkEvent| matches!(event, WalkEvent::End(_));
        self.events(
            Op::new("walk", root),
            cwd,
            op,
            frames::decode_walk_event,
            is_end,
        )
        .await
    }

    /// `search` in the sandbox.
    pub(crate) async fn search_native(
        self: &Arc<Self>,
        cwd: &str,
        root: &str,
        spec: SearchSpec,
    ) -> Result<SearchStream> {
        let op = WorldOp::Search {
            root: root.to_owned(),
            spec,
        };
        let is_end = |event: &SearchEvent| matches!(event, SearchEvent::End(_));
        self.events(
            Op::new("search", root),
            cwd,
            op,
            frames::decode_search_event,
            is_end,
        )
        .await
    }

    /// The events of a walk or search `op` as a stream: the first is read
    /// before the stream is returned, so an error opening the root is the
    /// call's.
    async fn events<E: Send + 'static>(
        self: &Arc<Self>,
        name: Op<'_>,
        cwd: &str,
        op: WorldOp,
        decode: fn(&[u8]) -> std::result::Result<E, wire::DecodeError>,
        is_end: fn(&E) -> bool,
    ) -> Result<futures::stream::BoxStream<'static, Result<E>>> {
        let mut call = self.start_native(name, cwd, op).await?;
        let first = call.event(decode, is_end).await?;
        let rest = futures::stream::unfold(Some(call), move |call| async move {
            let mut call = call?;
            match call.event(decode, is_end).await {
                Ok(Some(event)) => Some((Ok(event), Some(call))),
                Ok(None) => None,
                Err(err) => Some((Err(err), None)),
            }
        });
        Ok(futures::stream::iter(first.map(Ok)).chain(rest).boxed())
    }

    /// `read_many` in the sandbox.
    pub(crate) async fn read_many_native(
        &self,
        cwd: &str,
        paths: Vec<String>,
        limits: ReadManyLimits,
    ) -> Result<Vec<ReadManyItem>> {
        let mut call = self
            .start_native(
                Op::new("read_many", cwd),
                cwd,
                WorldOp::ReadMany { paths, limits },
            )
            .await?;
        match call.frame().await? {
            (frames::ITEMS, payload) => {
                call.done = true;
                frames::decode_items(&payload).map_err(|err| call.garbled(&err.0))
            }
            (tag, _) => Err(call.garbled(&format!("frame {tag} where the items belong"))),
        }
    }

    /// Whether the helper's process is running now (not waiting for it to
    /// start, nor for an operation starting it).
    fn resident_running(&self) -> bool {
        self.resident.try_lock().is_ok_and(|slot| {
            slot.as_ref()
                .is_some_and(|resident| resident.shared.running() && !resident.input.is_closed())
        })
    }

    /// The text of the file at the absolute `path` through the helper's
    /// running process, in one round trip where envd takes two (`Stat`,
    /// then the download): its `read_many`, which takes the version from
    /// the `fstat` of the descriptor it then reads, as the `Stat` before a
    /// download gives it (docs/design.md §6.3). `None` when the process is
    /// not running (nothing waits for it), and for anything but a text
    /// file of at most [`NATIVE_FILE_MAX`] bytes the world's user may read:
    /// the envd way answers those, errors included, as it always has.
    pub(crate) async fn read_text_native(&self, path: &str) -> Option<TextFile> {
        if !self.resident_running() {
            return None;
        }
        let limits = ReadManyLimits {
            max_file_bytes: NATIVE_FILE_MAX,
            max_total_bytes: NATIVE_FILE_MAX,
            beneath: None,
        };
        match self
            .read_many_native("/", vec![path.to_owned()], limits)
            .await
        {
            Ok(mut items) if items.len() == 1 => items.pop()?.result.ok(),
            Ok(items) => {
                tracing::debug!(
                    path,
                    items = items.len(),
                    "the helper answered a read oddly"
                );
                None
            }
            Err(err) => {
                tracing::debug!(path, %err, "the helper could not read");
                None
            }
        }
        .inspect(|_| {
            self.native_reads.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// `edit` of the absolute `path` done by the helper's running process
    /// where the file is (`WorldOp::Edit`: read, apply, replace, as the
    /// world's user), in one round trip where the envd way takes four or
    /// more (docs/design.md §6.3). `Ok(None)` — nothing changed, the envd
    /// way edits it — as [`World::replace_native`] says, and for any file
    /// that is not plain text. Edits that do not apply are `InvalidInput`,
    /// as the envd way reports them.
    pub(crate) async fn edit_native(
        &self,
        op: Op<'_>,
        path: &str,
        edits: &[Edit],
        guard: &WriteGuard,
    ) -> Result<Option<EditOutcome>> {
        let edits = edits.to_vec();
        let replaced = self
            .replace_native(op, path, guard, |target| WorldOp::Edit { target, edits })
            .await?;
        Ok(replaced.map(|(version, replacements)| {
            self.native_edits.fetch_add(1, Ordering::Relaxed);
            EditOutcome {
                version,
                replacements: usize::try_from(replacements).unwrap_or(usize::MAX),
            }
        }))
    }

    /// `write` of `content` (at most [`NATIVE_FILE_MAX`] bytes) over the
    /// existing file at the absolute `path`, done by the helper's running
    /// process where the file is (`WorldOp::Write`), in one round trip
    /// where the direct way takes two (`Stat` beside the upload, `Move`).
    /// `Ok(None)` — nothing changed, the envd way writes it — as
    /// [`World::replace_native`] says, for larger content, and when there
    /// is no file to replace.
    pub(crate) async fn write_native(
        &self,
        op: Op<'_>,
        path: &str,
        content: &Bytes,
        guard: &WriteGuard,
    ) -> Result<Option<Version>> {
        if content.len() as u64 > NATIVE_FILE_MAX {
            return Ok(None);
        }
        let content = content.clone();
        let replaced = self
            .replace_native(op, path, guard, |target| WorldOp::Write { target, content })
            .await?;
        Ok(replaced.map(|(version, _)| {
            self.native_writes.fetch_add(1, Ordering::Relaxed);
            version
        }))
    }

    /// Asks the helper's running process for the edit or write `request`
    /// makes of the file at the absolute `path` as it must be (the guard's
    /// version, the write token's attribute); its new version and
    /// replacements. `Ok(None)` — nothing changed — when
    /// the process is not running (nothing waits for it), for a `CreateNew`
    /// guard, and for any file the helper declines (`dsh-supervisor`'s
    /// `world_replace`: anything of more than [`NATIVE_FILE_MAX`] bytes, or
    /// that it cannot replace exactly as the envd way would). An answer
    /// lost after the request went out is an error, never retried the envd
    /// way: the file may have been replaced, and an edit applied again
    /// could change it twice.
    ///
    /// Cancellation: dropping the future after the request went out does
    /// not stop the operation in the sandbox.
    async fn replace_native(
        &self,
        op: Op<'_>,
        path: &str,
        guard: &WriteGuard,
        request: impl FnOnce(Replacing) -> WorldOp,
    ) -> Result<Option<(Version, u64)>> {
        let version = match guard {
            WriteGuard::Overwrite => None,
            WriteGuard::IfVersion(version) => Some(version.clone()),
            WriteGuard::CreateNew => return Ok(None),
        };
        if !self.resident_running() {
            return Ok(None);
        }
        // Locked on the path as given, as the direct way locks.
        let _lock = locks::lock(&self.sandbox_id, path).await;
        let target = Replacing {
            path: path.to_owned(),
            version,
            max_bytes: NATIVE_FILE_MAX,
            attribute: (format!("user.e2b.{WRITE_TOKEN_KEY}"), new_write_token()),
        };
        // An error here is before anything was sent.
        let mut call = match self.start_native(op, "/", request(target)).await {
            Ok(call) => call,
            Err(err) => {
                tracing::debug!(%err, "the helper could not take the operation");
                return Ok(None);
            }
        };
        let answer = match call.frame().await? {
            (frames::REPLACED, payload) => {
                call.done = true;
                frames::decode_replace_answer(&payload).map_err(|err| call.garbled(&err.0))?
            }
            (tag, _) => return Err(call.garbled(&format!("frame {tag} where its answer belongs"))),
        };
        match answer {
            ReplaceAnswer::Replaced {
                version,
                replacements,
            } => Ok(Some((version, replacements))),
            ReplaceAnswer::Refused { failure } => Err(op.error(ErrorKind::InvalidInput, failure)),
            ReplaceAnswer::Declined { reason } => {
                tracing::debug!(reason, "the helper declined the operation");
                Ok(None)
            }
        }
    }

    /// Holds the file at the absolute `path` (its final component not
    /// followed) in the sandbox helper's running process. Not running yet,
    /// the helper is installed and started by a task for the writes to
    /// come — a write does not wait for it — and this one gets
    /// `Unsupported`; so it does when the file cannot be opened, or the
    /// helper does not answer within [`HOLD_TIMEOUT`].
    pub(crate) async fn hold_native(self: &Arc<Self>, path: &str) -> Result<Hold> {
        let op = Op::new("hold", path);
        if !self.resident_running() {
            let world = Arc::clone(self);
            self.tasks.spawn_on(
                async move {
                    let name = Op::new("hold", "the sandbox helper");
                    let _ = Box::pin(world.resident(name)).await;
                },
                &World::<T>::handle(),
            );
            return Err(op.error(
                ErrorKind::Unsupported,
                "the sandbox helper is not running yet (it is started for the writes to come)",
            ));
        }
        let hold = WorldOp::Hold {
            path: path.to_owned(),
        };
        let mut call = self.start_native(op, "/", hold).await?;
        match tokio::time::timeout(HOLD_TIMEOUT, call.frame()).await {
            Ok(Ok((frames::HELD, _))) => {
                self.holds.fetch_add(1, Ordering::Relaxed);
                Ok(Hold { _call: call })
            }
            Ok(Ok((tag, _))) => Err(call.garbled(&format!("frame {tag} where the hold belongs"))),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(op.error(
                ErrorKind::Timeout,
                format_args!(
                    "the sandbox helper did not hold it within {} ms",
                    HOLD_TIMEOUT.as_millis()
                ),
            )),
        }
    }
}

/// A file kept referenced by the sandbox helper ([`WorldOp::Hold`]):
/// replacing it meanwhile does not free it in the caller's time. Dropping
/// the hold lets go (a cancel to the helper, which then frees the file on
/// its own thread).
pub(crate) struct Hold {
    _call: Call,
}

/// What the reader hands an operation: a frame (tag, body after the id),
/// or why the process ended.
type Delivery = std::result::Result<(u8, Bytes), String>;

/// What the writer task is asked.
enum Input {
    /// Frames to write to the process's stdin.
    Frames(Vec<u8>),
    /// Close its stdin (the process ends), then acknowledge.
    Close(oneshot::Sender<()>),
}

/// A running `dsh-supervisor world` serving this provider's world-side
/// operations.
pub(crate) struct Resident {
    next_id: AtomicU64,
    /// To the writer task; when the last sender is dropped it closes stdin.
    input: mpsc::UnboundedSender<Input>,
    shared: Arc<Shared>,
}

/// What the process's reader and writer tasks share with its callers.
struct Shared {
    pid: u32,
    /// The operations awaiting frames, by id; `None` once the process
    /// ended.
    ops: Mutex<Option<HashMap<u64, mpsc::UnboundedSender<Delivery>>>>,
    /// Why it ended, once it did.
    ended: Mutex<Option<String>>,
    /// Turns `true` when it ended.
    ended_signal: watch::Sender<bool>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn running(&self) -> bool {
        lock(&self.ops).is_some()
    }

    fn end_reason(&self) -> String {
        lock(&self.ended)
            .clone()
            .unwrap_or_else(|| "no reason known".into())
    }

    /// The process is over (the first reason stays): every operation in
    /// flight is told why, later ones are refused.
    fn end(&self, reason: String) {
        let reason = lock(&self.ended).get_or_insert(reason).clone();
        for (_, op) in lock(&self.ops).take().into_iter().flatten() {
            let _ = op.send(Err(reason.clone()));
        }
        self.ended_signal.send_replace(true);
    }

    fn deliver(&self, id: u64, tag: u8, body: Bytes) {
        // An operation no longer listening was cancelled: its late frames
        // are dropped.
        if let Some(op) = lock(&self.ops).as_ref().and_then(|ops| ops.get(&id)) {
            let _ = op.send(Ok((tag, body)));
        }
    }
}

impl Resident {
    /// Its reader and writer tasks (and its stdin's stream, by `route`),
    /// on the current runtime. They are not the provider's tracked tasks:
    /// they last as long as the process.
    fn spawn<T: EnvdTransport>(
        envd: Envd<T>,
        stream: ProcessStream,
        route: InputRoute,
    ) -> Arc<Resident> {
        let pid = stream.pid();
        let shared = Arc::new(Shared {
            pid,
            ops: Mutex::new(Some(HashMap::new())),
            ended: Mutex::new(None),
            ended_signal: watch::Sender::new(false),
        });
        let (input, queue) = mpsc::unbounded_channel();
        let (writer, request) = StdinWriter::new(envd.clone(), pid, route);
        if let Some(request) = request {
            let (shared, envd) = (shared.clone(), envd.clone());
            tokio::spawn(async move {
                // A cut stream may have lost frames: the operations in
                // flight are told now, not at the next write.
                if let Err(err) = request.await {
                    fail(
                        &shared,
                        &envd,
                        format!("writing to its stdin failed: {err}"),
                    )
                    .await;
                }
            });
        }
        tokio::spawn(read(stream, shared.clone(), envd));
        tokio::spawn(write(queue, shared.clone(), writer));
        Arc::new(Resident {
            next_id: AtomicU64::new(1),
            input,
            shared,
        })
    }

    fn send(&self, frame: Vec<u8>) {
        if self.input.send(Input::Frames(frame)).is_err() {
            // The writer is gone: it ended the process, or its runtime
            // ended (then the process ends with its lease).
            self.shared
                .end("its writer task is gone (its runtime ended)".into());
        }
    }

    /// Closes the process's stdin, which ends it (killed if that fails);
    /// waits at most [`CLOSE_TIMEOUT`].
    async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.input.send(Input::Close(done)).is_ok() {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, closed).await;
        }
    }
}

/// The reader task: the process's stdout, frame by frame, to the operations
/// by id, until it ends.
async fn read<T: EnvdTransport>(mut stream: ProcessStream, shared: Arc<Shared>, envd: Envd<T>) {
    let mut buf = BytesMut::new();
    let mut stderr = Vec::new();
    // Whether the process may still run.
    let (reason, running) = 'read: loop {
        match stream.next().await {
            Some(Ok(ProcessEvent::Stdout(bytes))) => {
                buf.extend_from_slice(&bytes);
                while buf.len() >= wire::HEADER {
                    let len = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
                    if buf.len() < wire::HEADER + len {
                        break;
                    }
                    let tag = buf[0];
                    buf.advance(wire::HEADER);
                    let mut body = buf.split_to(len).freeze();
                    if body.len() < 8 {
                        break 'read (
                            "its answer is broken (a frame without an id)".to_owned(),
                            true,
                        );
                    }
                    let id = body.get_u64_le();
                    shared.deliver(id, tag, body);
                }
            }
            Some(Ok(ProcessEvent::Stderr(bytes))) => {
                let room = STDERR_LIMIT.saturating_sub(stderr.len());
                stderr.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Some(Ok(ProcessEvent::Pty(_))) => {}
            Some(Ok(ProcessEvent::End(status))) => {
                break (format!("it ended ({})", status.status), false);
            }
            None => break ("its output stream ended".to_owned(), true),
            Some(Err(err)) => break (format!("its output stream failed: {err}"), true),
        }
    };
    let stderr = String::from_utf8_lossy(&stderr);
    let stderr = stderr.trim();
    shared.end(if stderr.is_empty() {
        reason
    } else {
        format!("{reason}: {stderr}")
    });
    if running {
        // It must not run on unheard (gone already is as good).
        let _ = envd
            .send_signal(shared.pid, Signal::Kill, &CallOptions::default())
            .await;
    }
}

/// Ends a running process whose stdin failed: every operation in flight
/// told `reason`, the process killed (its pid is not addressed once ended).
/// Should the reader see the process end within [`END_GRACE`], its reason
/// is the one told.
async fn fail<T: EnvdTransport>(shared: &Shared, envd: &Envd<T>, reason: String) {
    let mut ended = shared.ended_signal.subscribe();
    let _ = tokio::time::timeout(END_GRACE, ended.wait_for(|ended| *ended)).await;
    if shared.running() {
        shared.end(reason);
        let _ = envd
            .send_signal(shared.pid, Signal::Kill, &CallOptions::default())
            .await;
    }
}

/// The writer task: queued frames to the process's stdin, together in one
/// write; a [`frames::PING`] after [`frames::HEARTBEAT`] of quiet; stdin
/// closed when asked or when the [`Resident`] is gone.
async fn write<T: EnvdTransport>(
    mut queue: mpsc::UnboundedReceiver<Input>,
    shared: Arc<Shared>,
    mut writer: StdinWriter<T>,
) {
    let ping = || {
        let mut header = vec![0u8; wire::HEADER];
        wire::frame_header(&mut header, frames::PING, 0);
        header
    };
    let closed = loop {
        let first = match tokio::time::timeout(frames::HEARTBEAT, queue.recv()).await {
            Err(_) => Input::Frames(ping()),
            Ok(None) => break None,
            Ok(Some(input)) => input,
        };
        let (mut batch, mut close) = (Vec::new(), None);
        let mut next = Some(first);
        while let Some(input) = next {
            match input {
                Input::Frames(frames) => batch.extend_from_slice(&frames),
                Input::Close(done) => {
                    close = Some(done);
                    break;
                }
            }
            next = queue.try_recv().ok();
        }
        if !batch.is_empty()
            && let Err(err) = writer.write(Bytes::from(batch)).await
        {
            let envd = writer.envd().clone();
            fail(
                &shared,
                &envd,
                format!("writing to its stdin failed: {err}"),
            )
            .await;
            return;
        }
        if close.is_some() {
            break close;
        }
    };
    // An ended process's pid is not to be addressed again.
    if shared.running()
        && let Err(err) = writer.close().await
    {
        // An envd without `CloseStdin`, or frames not delivered.
        let envd = writer.envd().clone();
        fail(&shared, &envd, format!("closing its stdin failed: {err}")).await;
    }
    if let Some(done) = closed {
        let _ = done.send(());
    }
}

/// One operation in flight: its frames as they arrive. Dropped before its
/// answer ended, it cancels the operation.
struct Call {
    op: OwnedOp,
    resident: Arc<Resident>,
    id: u64,
    answers: mpsc::UnboundedReceiver<Delivery>,
    /// Frame bytes taken and not yet credited back.
    consumed: u64,
    /// The answer ended (nothing to cancel).
    done: bool,
}

impl Call {
    /// The next event, `None` after the last; an [`frames::ERROR`] frame is
    /// the error it carries.
    async fn event<E>(
        &mut self,
        decode: fn(&[u8]) -> std::result::Result<E, wire::DecodeError>,
        is_end: fn(&E) -> bool,
    ) -> Result<Option<E>> {
        if self.done {
            return Ok(None);
        }
        match self.frame().await? {
            (frames::EVENT, payload) => {
                let event = decode(&payload).map_err(|err| self.garbled(&err.0))?;
                if is_end(&event) {
                    self.done = true;
                }
                Ok(Some(event))
            }
            (tag, _) => Err(self.garbled(&format!("frame {tag} where an event belongs"))),
        }
    }

    /// The next frame; an [`frames::ERROR`] frame is returned as its error,
    /// the process's end as an error saying so.
    async fn frame(&mut self) -> Result<(u8, Bytes)> {
        let delivery = self.answers.recv().await;
        let (tag, body) = match delivery {
            Some(Ok(frame)) => frame,
            Some(Err(reason)) => return Err(self.ended(&reason)),
            None => return Err(self.ended("no reason known")),
        };
        self.consumed += (wire::HEADER + 8 + body.len()) as u64;
        // Credit back a quarter of the window at a time: a supervisor held
        // back has more than the window unacknowledged, so once its frames
        // are taken the credit is on its way.
        if self.consumed >= frames::WINDOW / 4 {
            self.resident.send(frames::frame(
                frames::CREDIT,
                self.id,
                &self.consumed.to_le_bytes(),
            ));
            self.consumed = 0;
        }
        if tag == frames::ERROR {
            self.done = true;
            return Err(frames::decode_error(&body).unwrap_or_else(|err| self.garbled(&err.0)));
        }
        Ok((tag, body))
    }

    /// The error of an operation whose process ended under it.
    fn ended(&mut self, reason: &str) -> Error {
        self.done = true;
        self.op.op().error(
            ErrorKind::Io,
            format_args!(
                "the sandbox helper (pid {}) ended while the operation was in flight: {reason}",
                self.resident.shared.pid
            ),
        )
    }

    /// The error of an answer that is not what the wire says.
    fn garbled(&self, what: &str) -> Error {
        self.op.op().error(
            ErrorKind::Io,
            format_args!("the sandbox helper's answer is broken ({what})"),
        )
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if let Some(ops) = lock(&self.resident.shared.ops).as_mut() {
            ops.remove(&self.id);
        }
        if !self.done {
            self.resident
                .send(frames::frame(frames::CANCEL, self.id, &[]));
        }
    }
}

/// The world user's identity from the supervisor's probe output (version,
/// uid, gid, groups, NUL-terminated; the rest is not needed here).
fn parse_probe(stdout: &[u8]) -> std::result::Result<Identity, String> {
    let mut fields = stdout.split(|&byte| byte == 0);
    let mut next = |what: &str| {
        fields
            .next()
            .and_then(|field| std::str::from_utf8(field).ok())
            .map(str::trim)
            .ok_or_else(|| format!("the probe output ends before {what}"))
    };
    let expected = format!("dsh-supervisor {}", wire::VERSION);
    let version = next("the helper version")?;
    if version != expected {
        return Err(format!(
            "the installed helper says {version:?}, expected {expected:?}"
        ));
    }
    let number = |text: &str| {
        text.parse::<u32>()
            .map_err(|_| format!("{text:?} in the probe output is not a number"))
    };
    let uid = number(next("the uid")?)?;
    let gid = number(next("the gid")?)?;
    let groups = next("the groups")?
        .split_whitespace()
        .map(number)
        .collect::<std::result::Result<Vec<u32>, String>>()?;
    Ok(Identity { uid, gid, groups })
}
