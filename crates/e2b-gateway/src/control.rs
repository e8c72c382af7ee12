//! [`ControlShell`]: how the owner and the adapters run their internal
//! commands in the sandbox.
//!
//! Internal commands run as `root` (envd starts a command as any user on
//! request), so the state they write under the runtime root
//! (`/var/lib/dsh-e2b`, root-owned, mode 0700) cannot be read or forged by
//! the sandbox user. They never start a login shell, and each gets a fresh
//! random `HOME` inside the runtime root that does not exist: no profile,
//! rc or dot file under the sandbox user's control can run before (or
//! instead of) the control command. `BASH_ENV` and `ENV` are emptied so a
//! sandbox-wide setting cannot smuggle a startup file in either.
//!
//! Commands a provider runs *for the world's user* — the `fs` seam's path
//! resolution, staging and mode changes, which must have exactly that
//! user's permissions (docs/design.md §5.1) — come from
//! [`ControlShell::acting_for`]: the same clean environment, run as that
//! user, without the runtime-root guard (they never touch the runtime root,
//! and `-O` holds only for root).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use connectrpc::client::ClientTransport;
use dsh_plugin_api::owner::SandboxInfo;
use e2b_client::{CallOptions, Command, Envd, ExitStatus, ProcessEvent, StreamOptions};
use futures::StreamExt;
use http_body::Body;

/// A `connectrpc` client transport whose response bodies `e2b_client::Envd`
/// can read: what every envd caller here needs of its transport (the
/// owner's own, or `OwnerTransport` in the adapters).
pub trait EnvdReadable:
    ClientTransport<ResponseBody: Unpin + Body<Error: std::fmt::Display>>
{
}

impl<T> EnvdReadable for T
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: std::fmt::Display,
{
}

/// The user control commands run as.
pub const CONTROL_USER: &str = "root";

/// The shell of [`ControlShell::script`].
pub const CONTROL_SHELL: &str = "/bin/bash";

/// The exit status of a [`ControlShell::script`] whose runtime-root guard
/// failed (the runtime root is no longer a real, root-owned directory);
/// the script itself did not run.
pub const GUARD_FAILED_EXIT: i32 = 121;

pub use dsh_supervisor::ambient::RUNTIME_ROOT_ENV;

/// Runs before every script: the runtime root must still be a directory,
/// not a symlink, owned by root (`-O`: owned by the effective user, root).
/// Builtins only, so it costs no process.
const GUARD: &str = r#"[[ -d $DSH_RUNTIME_ROOT && ! -L $DSH_RUNTIME_ROOT && -O $DSH_RUNTIME_ROOT ]] || { printf 'dsh: runtime root %s is not a root-owned directory\n' "$DSH_RUNTIME_ROOT" >&2; exit 121; }"#;

/// Builds internal commands for one sandbox; cheap to clone.
#[derive(Debug, Clone)]
pub struct ControlShell {
    runtime_root: Arc<str>,
    /// Who runs the commands: `Some(name)`, or `None` for envd's default
    /// user.
    user: Option<Arc<str>>,
    /// Whether scripts start with the runtime-root guard (root's only).
    guarded: bool,
}

/// What a control command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlOutput {
    /// How it ended.
    pub status: ExitStatus,
    /// The first bytes of its stdout (up to the limit given to `run`).
    pub stdout: Vec<u8>,
    /// The first bytes of its stderr (up to the limit).
    pub stderr: Vec<u8>,
    /// Whether output beyond the limit was dropped.
    pub truncated: bool,
}

impl ControlOutput {
    /// Stderr as text (lossy, trimmed), for messages.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_owned()
    }
}

impl ControlShell {
    /// Control commands keeping their state under `runtime_root` (an
    /// absolute path).
    pub fn new(runtime_root: impl Into<String>) -> Self {
        ControlShell {
            runtime_root: Arc::from(runtime_root.into()),
            user: Some(Arc::from(CONTROL_USER)),
            guarded: true,
        }
    }

    /// Commands with this shell's clean environment that run as `user`
    /// (`None`: envd's default user) instead of root, for work done on the
    /// world user's behalf with exactly that user's permissions. Their
    /// scripts have no runtime-root guard.
    pub fn acting_for(&self, user: Option<&str>) -> Self {
        ControlShell {
            runtime_root: Arc::clone(&self.runtime_root),
            user: user.map(Arc::from),
            guarded: false,
        }
    }

    /// Control commands for the owner's sandbox (its runtime root).
    pub fn for_sandbox(info: &SandboxInfo) -> Self {
        ControlShell::new(info.runtime_root.clone())
    }

    /// The runtime root.
    pub fn runtime_root(&self) -> &str {
        &self.runtime_root
    }

    /// A new `HOME`: `<runtime root>/home-<128 random bits>`, which nobody
    /// created (and the sandbox user cannot create: the runtime root is
    /// root's, mode 0700).
    pub fn fresh_home(&self) -> String {
        format!("{}/home-{:032x}", self.runtime_root, rand::random::<u128>())
    }

    /// `program` with `args`, executed directly (no shell), stdin
    /// `/dev/null`, with the control environment.
    pub fn exec<I, S>(&self, program: &str, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.environment(Command::new(program).args(args))
    }

    /// `script` run by `/bin/bash --noprofile --norc -c`, after the
    /// runtime-root guard ([`GUARD_FAILED_EXIT`]; root's shell only, see
    /// [`ControlShell::acting_for`]), with `args` as `$1…`
    /// (`$0` is `dsh-control`) — pass paths as arguments, never splice them
    /// into the script. Stdin is `/dev/null`.
    pub fn script<I, S>(&self, script: &str, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let guarded = if self.guarded {
            format!("{GUARD}\n{script}")
        } else {
            script.to_owned()
        };
        self.environment(
            Command::new(CONTROL_SHELL)
                .args(["--noprofile", "--norc", "-c"])
                .arg(guarded)
                .arg("dsh-control")
                .args(args),
        )
    }

    /// Stream options for this shell's commands: as [`CONTROL_USER`], or
    /// as the user of [`ControlShell::acting_for`].
    pub fn options(&self) -> StreamOptions {
        match &self.user {
            Some(user) => StreamOptions::default().user(&**user),
            None => StreamOptions::default(),
        }
    }

    /// Runs `command` as this shell's user ([`ControlShell::options`]) to its end, within `timeout`
    /// (envd kills it when the time is up), keeping at most `output_limit`
    /// bytes of each of stdout and stderr.
    ///
    /// Runs on the caller's runtime; dropping the future aborts the stream
    /// but not the command (envd does not kill on disconnect; `timeout`
    /// still bounds it).
    ///
    /// # Errors
    /// Whatever starting or streaming the command fails with (a non-zero
    /// exit is not an error: see [`ControlOutput::status`]).
    pub async fn run<T: EnvdReadable>(
        &self,
        envd: &Envd<T>,
        command: &Command,
        timeout: Duration,
        output_limit: usize,
    ) -> e2b_client::Result<ControlOutput> {
        let stream = envd
            .start(command, &self.options().timeout(timeout))
            .await?;
        collect(stream, output_limit).await
    }

    /// [`ControlShell::run`] with a stdin fed by `feed`: the command starts
    /// while `feed` runs (so its start overlaps whatever `feed` waits for),
    /// then what `feed` yields is sent to the command's stdin (which
    /// `command` must have enabled: `Command::stdin(true)`), which stays
    /// open. If `feed` fails, stdin is closed with nothing sent, and
    /// `feed`'s error is returned once the command has ended: a command fed
    /// this way reads what it waits for and treats end of input as "do not
    /// go on". Output the command writes before `feed` ends is buffered
    /// (by envd and the connection) until then.
    ///
    /// Runs on the caller's runtime; dropping the future aborts `feed` and
    /// the stream; the command ends on its own or at `timeout`.
    ///
    /// # Errors
    /// As [`ControlShell::run`]; `feed`'s error; sending the input when the
    /// command succeeded regardless.
    pub async fn run_fed<T: EnvdReadable, F>(
        &self,
        envd: &Envd<T>,
        command: &Command,
        feed: F,
        timeout: Duration,
        output_limit: usize,
    ) -> e2b_client::Result<ControlOutput>
    where
        F: Future<Output = e2b_client::Result<Bytes>>,
    {
        let start = self.options().timeout(timeout);
        let (stream, fed) = tokio::join!(envd.start(command, &start), feed);
        let stream = stream?;
        let pid = stream.pid();
        let options = CallOptions::default().timeout(timeout);
        let stdin = async {
            match &fed {
                Ok(input) => envd.send_stdin(pid, input.clone(), &options).await,
                Err(_) => envd.close_stdin(pid, &options).await,
            }
        };
        let (sent, output) = tokio::join!(stdin, collect(stream, output_limit));
        fed?;
        let output = output?;
        if output.status.success() {
            sent?;
        }
        Ok(output)
    }

    fn environment(&self, command: Command) -> Command {
        command
            .env("HOME", self.fresh_home())
            .env("BASH_ENV", "")
            .env("ENV", "")
            .env(RUNTIME_ROOT_ENV, &*self.runtime_root)
            .stdin(false)
    }
}

/// Reads `stream` to its end, keeping at most `output_limit` bytes of each
/// of stdout and stderr.
async fn collect(
    mut stream: e2b_client::ProcessStream,
    output_limit: usize,
) -> e2b_client::Result<ControlOutput> {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut truncated = false;
    let mut status = None;
    while let Some(event) = stream.next().await {
        match event? {
            ProcessEvent::Stdout(bytes) | ProcessEvent::Pty(bytes) => {
                truncated |= keep_head(&mut stdout, &bytes, output_limit);
            }
            ProcessEvent::Stderr(bytes) => {
                truncated |= keep_head(&mut stderr, &bytes, output_limit);
            }
            ProcessEvent::End(end) => status = Some(end),
        }
    }
    let status = status.expect("a process stream ends after its end event or with an error");
    Ok(ControlOutput {
        status,
        stdout,
        stderr,
        truncated,
    })
}

/// Appends what fits of `bytes` under `limit`; true when some did not fit.
/// (A plain function: a closure here, held across the stream's awaits,
/// would make `run`'s future not provably `Send`.)
fn keep_head(into: &mut Vec<u8>, bytes: &Bytes, limit: usize) -> bool {
    let room = limit.saturating_sub(into.len());
    into.extend_from_slice(&bytes[..bytes.len().min(room)]);
    bytes.len() > room
}

/// `run`'s future must be `Send` (plugins spawn it): checked when this
/// compiles, never called.
const _: fn(
    &'static ControlShell,
    &'static e2b_client::Envd<e2b_client::SandboxTransport>,
    &'static Command,
) = |shell, envd, command| {
    fn is_send<T: Send>(_: T) {}
    is_send(shell.run(envd, command, Duration::ZERO, 0));
    is_send(shell.run_fed(envd, command, async { Ok(Bytes::new()) }, Duration::ZERO, 0));
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_gets_a_fresh_home_inside_the_runtime_root() {
        let shell = ControlShell::new("/w/.dsh-e2b");
        let a = shell.fresh_home();
        let b = shell.fresh_home();
        assert_ne!(a, b);
        assert!(a.starts_with("/w/.dsh-e2b/home-"), "{a}");
        assert_eq!(a.len(), "/w/.dsh-e2b/home-".len() + 32);
    }

    #[test]
    fn the_guard_names_its_exit_status() {
        assert!(GUARD.contains(&format!("exit {GUARD_FAILED_EXIT}")));
    }

    #[test]
    fn scripts_take_paths_as_arguments_behind_the_guard() {
        let shell = ControlShell::new("/w/.dsh-e2b");
        let command = shell.script("mkdir -- \"$1\"", ["/w/a b"]);
        assert_eq!(command.program(), CONTROL_SHELL);
        // `Command` exposes its parts only through Debug.
        let debug = format!("{command:?}");
        for part in [
            r#"args: ["--noprofile", "--norc", "-c", "#,
            r#"\nmkdir -- \"$1\"", "dsh-control", "/w/a b"]"#,
            r#""BASH_ENV": """#,
            r#""ENV": """#,
            r#""DSH_RUNTIME_ROOT": "/w/.dsh-e2b""#,
            r#""HOME": "/w/.dsh-e2b/home-"#,
            "stdin: Some(false)",
        ] {
            assert!(debug.contains(part), "{part} missing from {debug}");
        }
    }

    #[test]
    fn shells_acting_for_the_user_run_as_that_user_without_the_guard() {
        let root = ControlShell::new("/w/.dsh-e2b");
        assert_eq!(root.options(), StreamOptions::default().user(CONTROL_USER));
        let user = root.acting_for(Some("user"));
        assert_eq!(user.options(), StreamOptions::default().user("user"));
        let default = root.acting_for(None);
        assert_eq!(default.options(), StreamOptions::default());
        let script = format!("{:?}", user.script("true", Vec::<String>::new()));
        assert!(!script.contains("DSH_RUNTIME_ROOT &&"), "{script}");
        assert!(script.contains(r#""HOME": "/w/.dsh-e2b/home-"#), "{script}");
        let guarded = format!("{:?}", root.script("true", Vec::<String>::new()));
        assert!(guarded.contains("DSH_RUNTIME_ROOT &&"), "{guarded}");
    }

    #[test]
    fn exec_runs_the_program_directly_with_the_control_environment() {
        let shell = ControlShell::new("/w/.dsh-e2b");
        let command = shell.exec("/bin/mkdir", ["-m", "0700", "--", "/w/.dsh-e2b"]);
        assert_eq!(command.program(), "/bin/mkdir");
        let debug = format!("{command:?}");
        assert!(
            debug.contains(r#"args: ["-m", "0700", "--", "/w/.dsh-e2b"]"#),
            "{debug}"
        );
        assert!(debug.contains(r#""HOME": "/w/.dsh-e2b/home-"#), "{debug}");
    }
}
