//! The world-side operations (`walk`, `search`, `read_many`,
//! docs/design.md §5.1) answered inside the sandbox: one `dsh-supervisor
//! world` process per operation, running `dsh-fs-local`'s native engines
//! with the world user's identity, its answer streamed back as frames on
//! its stdout through envd's process API (docs/design.md §6.3).
//!
//! The supervisor is installed once per provider, on the first world-side
//! operation: its upload (as root, into `<runtime root>/fs-e2b-<instance>/`)
//! and the install script start together, the script waiting on its stdin
//! for the word that the upload is complete — here the world user's name,
//! which a command as that user learns meanwhile when envd's default user
//! is meant; the supervisor's `probe` then checks its own SHA-256 and
//! reports the user's uid, gid and groups. When it cannot be installed the
//! reason is logged once and every later call is answered `Unsupported`,
//! so callers run the composition over the seam's primitives
//! (`dsh_provider_kit::world`).
//!
//! Dropping a stream part-way kills its process (envd `SendSignal`,
//! SIGKILL, from a task tracked like every detached piece of work).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use dsh_e2b_gateway::{CONTROL_USER, ControlShell};
use dsh_plugin_api::fs::{
    ReadManyItem, ReadManyLimits, SearchEvent, SearchSpec, SearchStream, WalkEvent, WalkSpec,
    WalkStream,
};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_supervisor::wire::{self, Identity};
use dsh_supervisor::world::{self as frames, WorldOp, WorldRequest};
use dsh_supervisor_client::{HELPER, HELPER_DIGEST};
use e2b_client::{CallOptions, ProcessEvent, ProcessStream, Signal, UploadOptions};
use futures::StreamExt;

use crate::errors::{Op, OwnedOp};
use crate::world::{EnvdTransport, World};

/// Bound on the upload and the install script.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one world-side operation may run before envd kills it.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(600);
/// Most of the supervisor's stderr kept for an error message.
const STDERR_LIMIT: usize = 8 * 1024;

/// Waits for the world user's name on stdin (none: the upload failed),
/// installs the uploaded supervisor, then runs its `probe` (SHA-256 check,
/// the upload removed, the user's account printed). `$1` upload, `$2` final
/// path, `$3` SHA-256. A copy (`install`), not a rename: see
/// `dsh-subprocess-e2b`'s setup for why ("Text file busy").
const INSTALL_AND_PROBE: &str = r#"
read -r user || { printf 'dsh: the helper was not uploaded\n' >&2; exit 4; }
install -m 0700 -- "$1" "$2" || exit 3
exec "$2" probe "$user" "$1" "$3"
"#;

/// The installed supervisor and who the world's user is.
#[derive(Debug, Clone)]
pub(crate) struct Native {
    /// Its directory, removed on disposal.
    dir: String,
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
                match self.install().await {
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
        let Some(Some(native)) = self.native.get() else {
            return Ok(());
        };
        match self.remove_as_root(&native.dir).await {
            Err(err) if !err.is_sandbox_gone() => Err(Op::new("dispose", &native.dir).remote(&err)),
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
        let upload = format!("{dir}/dsh-supervisor.part");
        let helper = format!("{dir}/dsh-supervisor");
        let uploaded = async {
            self.envd
                .upload(
                    &upload,
                    futures::stream::once(async {
                        Ok::<_, std::io::Error>(Bytes::from_static(HELPER))
                    }),
                    &UploadOptions::default()
                        .user(CONTROL_USER)
                        .content_length(HELPER.len() as u64)
                        .timeout(SETUP_TIMEOUT),
                )
                .await
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
        let feed = async {
            let (uploaded, user) = tokio::join!(uploaded, user);
            uploaded?;
            user.map(|user: String| Bytes::from(format!("{user}\n")))
        };
        let script = root
            .script(
                INSTALL_AND_PROBE,
                [upload.as_str(), helper.as_str(), HELPER_DIGEST],
            )
            .stdin(true);
        let output = root
            .run_fed(&self.envd, &script, feed, SETUP_TIMEOUT, 1 << 20)
            .await
            .map_err(|err| Error::io(format!("install the sandbox helper: {err}")))?;
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
            dir,
            helper,
            identity,
            root,
        })
    }

    /// Starts `op` in the sandbox; `Unsupported` when the supervisor is not
    /// there (or the request is too large for its environment), so callers
    /// compose the operation instead.
    async fn start_native(
        self: &Arc<Self>,
        name: Op<'_>,
        cwd: &str,
        op: WorldOp,
    ) -> Result<Answer<T>> {
        let unsupported = |why: &str| Err(Error::new(ErrorKind::Unsupported, why.to_owned()));
        let Some(native) = self.native().await else {
            return unsupported("the sandbox helper is not installed");
        };
        let request = WorldRequest {
            identity: native.identity.clone(),
            cwd: cwd.to_owned(),
            op,
        };
        let encoded = wire::base64_encode(&request.encode());
        if encoded.len() > wire::MAX_REQUEST_ENV {
            return unsupported("the request is too large for the sandbox helper");
        }
        let command = native
            .root
            .exec(&native.helper, ["world"])
            .env(wire::REQUEST_ENV, encoded);
        let stream = self
            .envd
            .start(&command, &native.root.options().timeout(OPERATION_TIMEOUT))
            .await
            .map_err(|err| name.remote(&err))?;
        Ok(Answer {
            op: name.to_owned(),
            world: self.clone(),
            pid: stream.pid(),
            stream: Some(stream),
            buf: BytesMut::new(),
            stderr: Vec::new(),
        })
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
        let mut answer = self.start_native(name, cwd, op).await?;
        let first = answer.event(decode, is_end).await?;
        let rest = futures::stream::unfold(Some(answer), move |answer| async move {
            let mut answer = answer?;
            match answer.event(decode, is_end).await {
                Ok(Some(event)) => Some((Ok(event), Some(answer))),
                Ok(None) => None,
                Err(err) => Some((Err(err), None)),
            }
        });
        Ok(futures::stream::iter(first.map(Ok)).chain(rest).boxed())
    }

    /// `read_many` in the sandbox.
    pub(crate) async fn read_many_native(
        self: &Arc<Self>,
        cwd: &str,
        paths: Vec<String>,
        limits: ReadManyLimits,
    ) -> Result<Vec<ReadManyItem>> {
        let mut answer = self
            .start_native(
                Op::new("read_many", cwd),
                cwd,
                WorldOp::ReadMany { paths, limits },
            )
            .await?;
        match answer.frame().await? {
            Some((frames::ITEMS, payload)) => {
                answer.finished();
                frames::decode_items(&payload).map_err(|err| answer.garbled(&err.0))
            }
            _ => Err(answer.garbled("no items")),
        }
    }
}

/// One running `dsh-supervisor world`: its frames as they arrive. Dropped
/// before its answer ended, it kills the process.
struct Answer<T: EnvdTransport> {
    op: OwnedOp,
    world: Arc<World<T>>,
    pid: u32,
    /// `None` once the answer ended.
    stream: Option<ProcessStream>,
    buf: BytesMut,
    stderr: Vec<u8>,
}

impl<T: EnvdTransport> Answer<T> {
    /// The next event, `None` after the last; an [`frames::ERROR`] frame is
    /// the error it carries.
    async fn event<E>(
        &mut self,
        decode: fn(&[u8]) -> std::result::Result<E, wire::DecodeError>,
        is_end: fn(&E) -> bool,
    ) -> Result<Option<E>> {
        if self.stream.is_none() {
            return Ok(None);
        }
        match self.frame().await? {
            Some((frames::EVENT, payload)) => {
                let event = decode(&payload).map_err(|err| self.garbled(&err.0))?;
                if is_end(&event) {
                    self.finished();
                }
                Ok(Some(event))
            }
            _ => Err(self.garbled("no end")),
        }
    }

    /// The next frame; an [`frames::ERROR`] frame is returned as its error,
    /// the process's end before a frame as `None`.
    async fn frame(&mut self) -> Result<Option<(u8, Bytes)>> {
        loop {
            if self.buf.len() >= wire::HEADER {
                let len = u32::from_le_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]])
                    as usize;
                if self.buf.len() >= wire::HEADER + len {
                    let tag = self.buf[0];
                    self.buf.advance(wire::HEADER);
                    let payload = self.buf.split_to(len).freeze();
                    if tag == frames::ERROR {
                        self.finished();
                        let err = frames::decode_error(&payload)
                            .unwrap_or_else(|err| self.garbled(&err.0));
                        return Err(err);
                    }
                    return Ok(Some((tag, payload)));
                }
            }
            let Some(stream) = self.stream.as_mut() else {
                return Ok(None);
            };
            match stream.next().await {
                Some(Ok(ProcessEvent::Stdout(bytes))) => self.buf.extend_from_slice(&bytes),
                Some(Ok(ProcessEvent::Stderr(bytes))) => {
                    let room = STDERR_LIMIT.saturating_sub(self.stderr.len());
                    self.stderr
                        .extend_from_slice(&bytes[..bytes.len().min(room)]);
                }
                Some(Ok(ProcessEvent::Pty(_))) => {}
                Some(Ok(ProcessEvent::End(_))) | None => {
                    self.stream = None;
                    return Ok(None);
                }
                Some(Err(err)) => return Err(self.op.op().remote(&err)),
            }
        }
    }

    /// The answer is complete: nothing is left to kill.
    fn finished(&mut self) {
        self.stream = None;
    }

    /// The error of an answer that is not what the wire says.
    fn garbled(&self, what: &str) -> Error {
        let stderr = String::from_utf8_lossy(&self.stderr);
        self.op.op().error(
            ErrorKind::Io,
            format_args!(
                "the sandbox helper's answer is broken ({what}){}{}",
                if stderr.trim().is_empty() { "" } else { ": " },
                stderr.trim()
            ),
        )
    }
}

impl<T: EnvdTransport> Drop for Answer<T> {
    fn drop(&mut self) {
        if self.stream.take().is_none() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let world = self.world.clone();
        let pid = self.pid;
        let kill = async move {
            // Gone already is as good.
            let _ = world
                .envd
                .send_signal(pid, Signal::Kill, &CallOptions::default())
                .await;
        };
        handle.spawn(self.world.tasks.track_future(kill));
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
