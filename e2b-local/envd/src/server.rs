//! The daemon's lifecycle: configuration checks, the listener loop serving HTTP/1.1 and h2c
//! (prior knowledge) on one Unix or TCP listener, and shutdown (connections dropped, processes
//! killed and reaped).

use std::convert::Infallible;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;

use crate::acting_user::FileAccess;
use crate::dispatch::App;
use crate::env_vars::{EnvVars, validate_env_var};
use crate::sandbox_log::{Level, SandboxLog};
use crate::state::{Daemon, Options, Settings};
use crate::{EnvdConfig, EnvdError};

/// Default for [`Envd::exit_retention`]: envd keeps exits 30 s.
pub const DEFAULT_EXIT_RETENTION: Duration = Duration::from_secs(30);
/// Default for [`Envd::max_message_size`]: 32 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 32 << 20;

/// Where the daemon accepts connections.
#[derive(Debug)]
pub enum EnvdListener {
    /// A Unix socket (what e2b-local's front proxies to).
    Unix(tokio::net::UnixListener),
    /// A TCP socket (e.g. loopback in tests, or port 49983).
    Tcp(tokio::net::TcpListener),
}

/// A configured daemon, for settings beyond [`EnvdConfig`]; [`serve`] is
/// `Envd::new(config).serve(listener, shutdown)`.
#[derive(Debug, Clone)]
pub struct Envd {
    config: EnvdConfig,
    options: Options,
    log: Option<Arc<std::fs::File>>,
}

/// Serves until `shutdown` resolves; HTTP/1.1 and h2c (prior knowledge) on the same listener.
///
/// See [`Envd::serve`] for the full contract.
pub async fn serve(
    config: EnvdConfig,
    listener: EnvdListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), EnvdError> {
    Envd::new(config).serve(listener, shutdown).await
}

impl Envd {
    /// A daemon for `config` with envd's defaults (30 s exit retention, 32 MiB message cap) and
    /// file operations performed with the requesting user's permissions
    /// ([`FileAccess::AsUser`]).
    pub fn new(config: EnvdConfig) -> Self {
        Self {
            config,
            options: Options {
                exit_retention: DEFAULT_EXIT_RETENTION,
                max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
                file_access: FileAccess::default(),
            },
            log: None,
        }
    }

    /// Appends what envd does (it started; processes started, ended, failed to start) to
    /// `file` as JSON lines, up to 8 MiB (the sandbox log the control plane serves).
    pub fn log_to(mut self, file: std::fs::File) -> Self {
        self.log = Some(Arc::new(file));
        self
    }

    /// Whose permissions file operations (the `filesystem.Filesystem` RPCs and `/files`) run
    /// with: the requesting user's ([`FileAccess::AsUser`], the default) or root's whatever the
    /// user ([`FileAccess::AsRoot`], as E2B's envd). What they create is chowned to the
    /// requesting user either way, and processes run as that user either way.
    pub fn file_access(mut self, access: FileAccess) -> Self {
        self.options.file_access = access;
        self
    }

    /// How long a process's exit stays available to `Connect` after it ended (default 30 s).
    pub fn exit_retention(mut self, retention: Duration) -> Self {
        self.options.exit_retention = retention;
        self
    }

    /// The largest Connect request message accepted, in bytes (default 32 MiB); larger ones
    /// are answered `resource_exhausted`. `/files` uploads are never capped.
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.options.max_message_size = bytes;
        self
    }

    /// Serves until `shutdown` resolves: [`Envd::start`] then [`StartedEnvd::serve`].
    pub async fn serve(
        self,
        listener: EnvdListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), EnvdError> {
        self.start(listener)?.serve(shutdown).await
    }

    /// Checks the configuration and records the start in the sandbox log; nothing is accepted
    /// yet. Once this returns, the log's "envd started" entry is written, so a caller that
    /// reports readiness after it never lets a client see a log without it. Does not need a
    /// runtime; `Err` only for an invalid configuration.
    pub fn start(self, listener: EnvdListener) -> Result<StartedEnvd, EnvdError> {
        let settings = settings_from(&self.config)?;
        let log = self.log.map(SandboxLog::to_file).unwrap_or_default();
        log.entry(
            Level::Info,
            "envd",
            "envd started",
            &[("version", crate::ENVD_VERSION.to_owned())],
        );
        Ok(StartedEnvd {
            daemon: Arc::new(Daemon::new(settings, self.options, log)),
            listener,
        })
    }
}

/// A daemon whose configuration was accepted and whose start is logged ([`Envd::start`]).
pub struct StartedEnvd {
    daemon: Arc<Daemon>,
    listener: EnvdListener,
}

impl std::fmt::Debug for StartedEnvd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartedEnvd")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl StartedEnvd {
    /// Serves until `shutdown` resolves, on the calling tokio runtime (which must have the time
    /// and I/O drivers enabled). HTTP/1.1 and h2c (prior knowledge) share the listener.
    ///
    /// Per-request errors are answered on the wire and never end the daemon. It returns `Err`
    /// only for a listener that can no longer accept. When `shutdown` resolves the daemon stops
    /// accepting, drops every connection (in-flight streams end abruptly), stops every polling
    /// watcher, SIGKILLs every process it started (the process only, as envd signals) and waits
    /// up to 5 s for them to be reaped before returning. Dropping the returned future without
    /// `shutdown` does the same minus the wait: connection tasks are aborted and processes
    /// killed, but not awaited.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), EnvdError> {
        let Self { daemon, listener } = self;
        let app = App::new(Arc::clone(&daemon));
        let name = match &listener {
            EnvdListener::Unix(unix) => unix
                .local_addr()
                .ok()
                .and_then(|addr| addr.as_pathname().map(Path::to_path_buf))
                .map_or_else(
                    || "unix socket".to_owned(),
                    |path| path.display().to_string(),
                ),
            EnvdListener::Tcp(tcp) => tcp
                .local_addr()
                .map_or_else(|_| "tcp socket".to_owned(), |addr| addr.to_string()),
        };
        let _cleanup = KillOnDrop(Arc::clone(&daemon));
        let mut connections = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let result = loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break Ok(()),
                accepted = accept(&listener) => accepted,
                // Reap finished connection tasks so the set does not grow.
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            match accepted {
                Ok(Accepted::Unix(stream)) => {
                    connections.spawn(serve_connection(stream, app.clone()));
                }
                Ok(Accepted::Tcp(stream)) => {
                    let _ = stream.set_nodelay(true);
                    connections.spawn(serve_connection(stream, app.clone()));
                }
                Err(err) if is_transient(&err) => {
                    tracing::warn!(%err, listener = %name, "accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(source) => {
                    break Err(EnvdError::Accept {
                        listener: name.clone(),
                        source,
                    });
                }
            }
        };
        connections.abort_all();
        while connections.join_next().await.is_some() {}
        daemon.watchers.clear();
        let processes = kill_all(&daemon);
        let reaped = async {
            for process in processes {
                while !process.has_ended() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(5), reaped)
            .await
            .is_err()
        {
            tracing::warn!("processes still running 5 s after SIGKILL at shutdown");
        }
        result
    }
}

/// Kills every live process; returns them so the caller can wait for their reaping.
fn kill_all(daemon: &Daemon) -> Vec<Arc<crate::process::ManagedProcess>> {
    let processes = daemon.processes.list();
    for process in &processes {
        process.stop_output();
        if let Err(err) = process.signal(rustix::process::Signal::KILL) {
            tracing::warn!(pid = process.pid, %err, "kill at shutdown failed");
        }
    }
    processes
}

/// Kills the daemon's processes if `serve` is dropped before finishing.
struct KillOnDrop(Arc<Daemon>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.watchers.clear();
        kill_all(&self.0);
    }
}

fn settings_from(config: &EnvdConfig) -> Result<Settings, EnvdError> {
    let invalid = |message: String| EnvdError::InvalidConfig(message);
    if config.default_user.contains(['\0', ':', '\n']) {
        return Err(invalid(format!(
            "default_user {:?} is not a valid user name",
            config.default_user
        )));
    }
    if let Some(workdir) = &config.default_workdir
        && !workdir.is_absolute()
    {
        return Err(invalid(format!(
            "default_workdir {} must be absolute",
            workdir.display()
        )));
    }
    if config.access_token.as_deref() == Some("") {
        return Err(invalid(
            "access_token is empty: use None for a sandbox without a token".to_owned(),
        ));
    }
    for (name, value) in &config.env_vars {
        validate_env_var(name, value).map_err(|err| invalid(format!("env_vars: {err}")))?;
    }
    let mut env_vars = EnvVars::default();
    env_vars.replace_user(&config.env_vars);
    env_vars.set_internal("E2B_SANDBOX", "true");
    env_vars.set_internal("E2B_SANDBOX_ID", &config.sandbox_id);
    env_vars.set_internal("E2B_TEMPLATE_ID", &config.template_id);
    Ok(Settings {
        env_vars,
        default_user: config.default_user.clone(),
        default_workdir: config.default_workdir.clone(),
        access_token: config.access_token.clone(),
        last_init_nanos: None,
    })
}

enum Accepted {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

async fn accept(listener: &EnvdListener) -> std::io::Result<Accepted> {
    match listener {
        EnvdListener::Unix(unix) => unix
            .accept()
            .await
            .map(|(stream, _)| Accepted::Unix(stream)),
        EnvdListener::Tcp(tcp) => tcp.accept().await.map(|(stream, _)| Accepted::Tcp(stream)),
    }
}

fn is_transient(err: &std::io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(
            libc::EMFILE
                | libc::ENFILE
                | libc::ENOBUFS
                | libc::ENOMEM
                | libc::ECONNABORTED
                | libc::ECONNRESET
                | libc::EINTR
                | libc::EAGAIN
                | libc::EPROTO
                | libc::EPERM
        )
    )
}

/// HTTP/2 receive window of each request body (an upload): how much a client may send before
/// the daemon has read it. hyper's default (1 MiB) stalls an upload once per MiB for a window
/// update, which halved upload throughput; 8 MiB keeps a loopback upload streaming. e2b-local's
/// front, which relays uploads here, receives with the same windows.
const RECEIVE_STREAM_WINDOW: u32 = 8 << 20;
/// HTTP/2 receive window of a whole connection: four uploads at full speed.
const RECEIVE_CONNECTION_WINDOW: u32 = 32 << 20;

/// Largest HTTP/2 frame the daemon accepts: E2B's envd and edge are Go servers, whose HTTP/2
/// default is 1 MiB. hyper's default, 16 KiB, cut an upload into 4,096 frames per 64 MiB, each
/// relayed by the front on its own.
const RECEIVE_MAX_FRAME_SIZE: u32 = 1 << 20;

/// A connection builder for HTTP/1.1 and h2c with the daemon's receive windows and frame size
/// (above), which e2b-local's front uses too.
pub fn connection_builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .initial_stream_window_size(RECEIVE_STREAM_WINDOW)
        .initial_connection_window_size(RECEIVE_CONNECTION_WINDOW)
        .max_frame_size(RECEIVE_MAX_FRAME_SIZE);
    builder
}

async fn serve_connection<S>(stream: S, app: App)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(app.handle(request).await) }
    });
    if let Err(err) = connection_builder()
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!(%err, "connection ended with an error");
    }
}
