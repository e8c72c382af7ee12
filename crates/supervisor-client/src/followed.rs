//! [`FollowedProcess`]: a durable command's handle, made of the provider's
//! own handle on a `durable-follow` helper (which relays the command's
//! retained output from an offset and exits as the command did) and the
//! provider's control of the command itself.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::durable::{AttachSpec, Attached, DurableCommand, DurableState};
use dsh_plugin_api::stream::{ByteStream, ByteWriter};
use dsh_plugin_api::subprocess::{
    ExitStatus, OutputMode, OutputSnapshot, OutputStream, Process, SpawnSpec, SpillSpec,
};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_supervisor::wire::Stage;

use crate::answers::Start;
use tokio::sync::OnceCell;

/// How long `terminate` lets the follower finish relaying on its own
/// after the command's group was proven empty, beyond the grace.
const FOLLOWER_SETTLE: Duration = Duration::from_secs(2);

/// What a provider does to a durable command itself (not to a follower).
#[async_trait]
pub trait DurableControl: Send + Sync + 'static {
    /// The command's record as the world has it now.
    async fn info(&self, id: &str) -> Result<DurableCommand>;

    /// The terminate ladder on the command's process group: SIGTERM,
    /// `grace`, SIGKILL, success once the group is proven empty (an ended
    /// command's is); never signals a pid that now belongs to another
    /// process. `Busy` if not proven empty.
    async fn terminate(&self, id: &str, grace: Duration) -> Result<()>;
}

/// A new command's id: 128 random bits as 32 lowercase hex digits, chosen
/// by the host so that the follower can start beside `durable-start`.
pub fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The spec of a follower of command `id` in state directory `dir`
/// (`helper durable-follow DIR ID STDOUT_FROM STDERR_FROM [hold] [wait] [wide]`,
/// in `/`), which the provider starts like any command of its own.
/// `starting`: the command's `durable-start` runs at the same time, so the
/// follower waits for the command to appear.
pub fn follower_spec(
    helper: &str,
    dir: &str,
    id: &str,
    from: [u64; 2],
    modes: [OutputMode; 2],
    spill: Option<SpillSpec>,
    starting: bool,
) -> SpawnSpec {
    let mut spec = SpawnSpec::new([
        helper.to_owned(),
        "durable-follow".to_owned(),
        dir.to_owned(),
        id.to_owned(),
        from[0].to_string(),
        from[1].to_string(),
    ]);
    if holds(modes) {
        spec.argv.push("hold".to_owned());
    }
    if starting {
        spec.argv.push("wait".to_owned());
    }
    // The provider's own pipes (or /dev/null), never the host's stdio.
    if !modes.contains(&OutputMode::Inherit) {
        spec.argv.push("wide".to_owned());
    }
    spec.cwd = Some("/".to_owned());
    [spec.stdout, spec.stderr] = modes;
    spec.spill = spill;
    spec
}

/// `attach` for any provider: checks `spec`, reads command `spec.id` from
/// `control` (`NotFound` for an id the world does not know), has `follow`
/// start a follower where each stream resumes (clamped into what is
/// retained) with the spec's output modes, and wraps it.
pub async fn attach<C, F, Fut>(control: Arc<C>, spec: AttachSpec, follow: F) -> Result<Attached>
where
    C: DurableControl,
    F: FnOnce([u64; 2], [OutputMode; 2]) -> Fut,
    Fut: Future<Output = Result<Arc<dyn Process>>>,
{
    spec.validate()?;
    let command = control.info(&spec.id).await?;
    let from = resume_offsets(&command, spec.from);
    let follower = follow(from, [spec.stdout, spec.stderr]).await?;
    Ok(attached(spec.id, command.pid, from, follower, control))
}

/// The handle on command `id` (pid `pid`) made of its `follower`, which
/// resumed at `from`.
fn attached(
    id: String,
    pid: u32,
    from: [u64; 2],
    follower: Arc<dyn Process>,
    control: Arc<dyn DurableControl>,
) -> Attached {
    Attached {
        id: id.clone(),
        process: Arc::new(FollowedProcess::new(id, pid, from, follower, control)),
        from,
    }
}

/// How long a follower started for a command that did not start gets to
/// end on SIGTERM.
const ABANDONED_GRACE: Duration = Duration::from_millis(100);

/// The outcome of a start: `durable-start`'s `answer` for command `id`,
/// joined with the `follower` started beside it (`starting`). Both
/// succeeded: the handle from offset 0. Otherwise the follower, if it
/// started, is ended and the error returned — a start that `failed` as
/// `start_failure` maps it; a command that runs but could not be followed
/// stays listed (its error says so).
pub async fn started(
    id: String,
    answer: Result<String>,
    follower: Result<Arc<dyn Process>>,
    control: Arc<dyn DurableControl>,
    start_failure: impl FnOnce(Stage, i32, &str) -> Error,
) -> Result<Attached> {
    let error = match answer.and_then(|line| crate::answers::start(&line)) {
        Ok(Start::Started { id: started, pid }) if started == id => {
            return match follower {
                Ok(follower) => Ok(attached(id, pid, [0, 0], follower, control)),
                Err(err) => Err(err.context(format!(
                    "spawn_durable: durable command {id} runs, but following it failed"
                ))),
            };
        }
        Ok(Start::Started { id: started, .. }) => Error::io(format!(
            "spawn_durable: the helper started durable command {started}, not {id}"
        )),
        Ok(Start::Failed {
            stage,
            errno,
            detail,
        }) => start_failure(stage, errno, &detail),
        Err(err) => err,
    };
    if let Ok(follower) = follower {
        // It waits for a command that will not come.
        let _ = follower.terminate(ABANDONED_GRACE).await;
    }
    Err(error)
}

/// Whether a follower with these output modes holds retention: a lossless
/// mode does (a slow reader paces the command, as a pipe would); a collect
/// tail or nothing never slows it.
pub fn holds(modes: [OutputMode; 2]) -> bool {
    modes
        .iter()
        .any(|mode| matches!(mode, OutputMode::Pipe | OutputMode::Inherit))
}

/// Where an attach from `from` resumes each stream of `command`: clamped
/// into what is retained, from the first retained byte to the end so far.
fn resume_offsets(command: &DurableCommand, from: u64) -> [u64; 2] {
    [0, 1].map(|i| {
        let first = command.retained_from[i];
        from.clamp(first, command.totals[i].max(first))
    })
}

/// A durable command's [`Process`] (see [`dsh_plugin_api::durable::Attached`]).
pub struct FollowedProcess {
    id: String,
    pid: u32,
    /// Where each stream resumed.
    from: [u64; 2],
    follower: Arc<dyn Process>,
    control: Arc<dyn DurableControl>,
    status: OnceCell<ExitStatus>,
}

impl FollowedProcess {
    /// The handle on command `id` (pid `pid`) whose follower resumed its
    /// streams at `from` (stdout, stderr).
    pub fn new(
        id: String,
        pid: u32,
        from: [u64; 2],
        follower: Arc<dyn Process>,
        control: Arc<dyn DurableControl>,
    ) -> FollowedProcess {
        FollowedProcess {
            id,
            pid,
            from,
            follower,
            control,
            status: OnceCell::new(),
        }
    }

    /// The command's status once its follower ended. The follower mirrors
    /// an exit code exactly, but a signal (a timeout's, a terminate's, or
    /// one that stopped the follower itself) and code 125 (the follower's
    /// own failure: the command was lost) are read from the record.
    async fn ended(&self) -> Result<ExitStatus> {
        const FOLLOWER_FAILED: i32 = 125;
        let status = self.follower.wait().await?;
        if status.signal.is_none() && status.code != Some(FOLLOWER_FAILED) {
            return Ok(status);
        }
        match self.control.info(&self.id).await?.state {
            DurableState::Ended(status) => Ok(status),
            DurableState::Lost => Err(Error::unavailable(format!(
                "wait: durable command {} was lost: its supervisor ended without recording how the command ended",
                self.id
            ))
            .with_subject(self.id.clone())),
            DurableState::Running => Err(Error::closed(format!(
                "wait: the attachment to durable command {} ended ({}) while the command still runs; attach again",
                self.id, describe(status)
            ))
            .with_subject(self.id.clone())),
        }
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code, status.signal) {
        (_, Some(signal)) => format!("the follower got {signal}"),
        (Some(code), None) => format!("the follower exited with {code}"),
        (None, None) => "the follower ended".to_owned(),
    }
}

fn index(stream: OutputStream) -> usize {
    match stream {
        OutputStream::Stdout => 0,
        OutputStream::Stderr => 1,
    }
}

#[async_trait]
impl Process for FollowedProcess {
    fn pid(&self) -> u32 {
        self.pid
    }

    /// Durable commands read stdin from `/dev/null`.
    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>> {
        None
    }

    fn take_stdout(&self) -> Option<ByteStream> {
        self.follower.take_stdout()
    }

    fn take_stderr(&self) -> Option<ByteStream> {
        self.follower.take_stderr()
    }

    async fn wait(&self) -> Result<ExitStatus> {
        self.status.get_or_try_init(|| self.ended()).await.copied()
    }

    /// The follower's view shifted to the command's own offsets: bytes
    /// before the resume point were never this handle's, so a handle that
    /// resumed past 0 reports `truncated`.
    async fn read_output(
        &self,
        stream: OutputStream,
        offset: u64,
        max_len: usize,
    ) -> Result<OutputSnapshot> {
        let from = self.from[index(stream)];
        let mut snapshot = self
            .follower
            .read_output(stream, offset.saturating_sub(from), max_len)
            .await?;
        snapshot.total += from;
        snapshot.offset += from;
        snapshot.truncated |= from > 0;
        Ok(snapshot)
    }

    /// Ends the command's whole group, then lets the follower relay the
    /// rest and exit as the command did (bounded), then ends the follower.
    /// A forgotten command (its record gone, which needs its supervisor
    /// gone) has nothing left to signal.
    async fn terminate(&self, grace: Duration) -> Result<()> {
        match self.control.terminate(&self.id, grace).await {
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            other => other?,
        }
        let _ = tokio::time::timeout(grace + FOLLOWER_SETTLE, self.follower.wait()).await;
        self.follower.terminate(grace).await
    }
}
