//! [`Sandbox`]: one sandbox's control-plane calls and its envd client
//! together.

use std::time::{Duration, SystemTime};

use crate::api::{Api, NewSandbox, SandboxDetail, SandboxInfo, SandboxMetric};
use crate::envd::{Envd, EnvdOptions};
use crate::error::{Context, Error, Result};
use crate::signing::FileOperation;
use crate::transport::SandboxTransport;

/// The sandbox id debug mode uses (no API call creates it).
pub const DEBUG_SANDBOX_ID: &str = "debug_sandbox_id";

/// envd versions below this predate the protocol this client speaks.
const MIN_ENVD_VERSION: semver::Version = semver::Version::new(0, 1, 0);

/// A handle to one sandbox: its identity, an [`Envd`] client for it, and
/// its lifecycle calls. Cheap to clone. Dropping it does nothing to the
/// sandbox (kill or pause it explicitly).
///
/// In debug mode (`E2B_DEBUG=true`) it behaves as the JS SDK: `create`
/// makes no API call (id `debug_sandbox_id`, envd `99.99.99`, envd on
/// `localhost:49983`), and `kill`, `set_timeout` and `metrics` are no-ops.
#[derive(Debug, Clone)]
pub struct Sandbox {
    api: Api,
    info: SandboxInfo,
    envd: Envd<SandboxTransport>,
}

impl Sandbox {
    /// Creates a sandbox and returns its handle.
    ///
    /// Dropping the future after the API answered can leave the sandbox
    /// running; it then expires at its timeout.
    ///
    /// # Errors
    /// As [`Api::create_sandbox`]; [`Error::Protocol`] when its envd is older
    /// than 0.1.0 (the sandbox is killed first).
    pub async fn create(api: &Api, request: &NewSandbox) -> Result<Sandbox> {
        if api.config().debug() {
            let info = SandboxInfo {
                template_id: request.template().to_owned(),
                sandbox_id: DEBUG_SANDBOX_ID.to_owned(),
                alias: None,
                client_id: String::new(),
                envd_version: semver::Version::new(99, 99, 99),
                envd_access_token: None,
                traffic_access_token: None,
                domain: None,
            };
            return Sandbox::from_info(api, info);
        }
        let info = api.create_sandbox(request).await?;
        if info.envd_version < MIN_ENVD_VERSION {
            let context = Context::new("create sandbox from template", request.template());
            let killed = api.kill_sandbox(&info.sandbox_id).await;
            return Err(Error::protocol(
                context,
                format!(
                    "envd {} in sandbox {} is older than {MIN_ENVD_VERSION}; rebuild the template{}",
                    info.envd_version,
                    info.sandbox_id,
                    match killed {
                        Ok(()) => " (the sandbox was killed)".to_owned(),
                        Err(err) => format!(" (killing the sandbox failed: {err})"),
                    }
                ),
            ));
        }
        Sandbox::from_info(api, info)
    }

    /// Connects to an existing sandbox, resuming it when paused, and
    /// extends its lifetime to at least `timeout`. Returns the handle and
    /// whether it was resumed.
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it does not exist.
    pub async fn connect(
        api: &Api,
        sandbox_id: &str,
        timeout: Duration,
    ) -> Result<(Sandbox, bool)> {
        let connected = api.connect_sandbox(sandbox_id, timeout).await?;
        Ok((Sandbox::from_info(api, connected.info)?, connected.resumed))
    }

    /// A handle for a sandbox already described by `info` (no API call).
    ///
    /// # Errors
    /// As [`SandboxTransport::new`].
    pub fn from_info(api: &Api, info: SandboxInfo) -> Result<Sandbox> {
        let transport = api.sandbox_transport(&info)?;
        let config = api.config();
        let mut options = EnvdOptions::new(info.sandbox_id.clone());
        options.wire_format = config.wire_format();
        options.request_timeout = config.request_timeout();
        options.default_user = EnvdOptions::default_user_for(Some(&info.envd_version));
        Ok(Sandbox {
            api: api.clone(),
            envd: Envd::new(transport, options),
            info,
        })
    }

    /// The sandbox id.
    pub fn id(&self) -> &str {
        &self.info.sandbox_id
    }

    /// What create or connect returned.
    pub fn info(&self) -> &SandboxInfo {
        &self.info
    }

    /// The envd client.
    pub fn envd(&self) -> &Envd<SandboxTransport> {
        &self.envd
    }

    /// The envd transport (routing and credentials), e.g. to relay it.
    pub fn transport(&self) -> &SandboxTransport {
        self.envd.transport()
    }

    /// The control-plane client.
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// Kills the sandbox (a no-op in debug mode).
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it is already gone.
    pub async fn kill(&self) -> Result<()> {
        if self.api.config().debug() {
            return Ok(());
        }
        self.api.kill_sandbox(self.id()).await
    }

    /// Pauses the sandbox.
    ///
    /// # Errors
    /// [`Error::Conflict`] when already paused.
    pub async fn pause(&self) -> Result<()> {
        self.api.pause_sandbox(self.id()).await
    }

    /// Sets the remaining lifetime to `timeout` (a no-op in debug mode).
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it is gone.
    pub async fn set_timeout(&self, timeout: Duration) -> Result<()> {
        if self.api.config().debug() {
            return Ok(());
        }
        self.api.set_sandbox_timeout(self.id(), timeout).await
    }

    /// The sandbox's current details.
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it is gone.
    pub async fn detail(&self) -> Result<SandboxDetail> {
        self.api.sandbox_info(self.id()).await
    }

    /// Resource-usage samples (empty in debug mode).
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it is gone.
    pub async fn metrics(&self) -> Result<Vec<SandboxMetric>> {
        if self.api.config().debug() {
            return Ok(Vec::new());
        }
        self.api.sandbox_metrics(self.id()).await
    }

    /// Whether envd answers (`GET /health`; false on the proxy's 502).
    ///
    /// # Errors
    /// Transport failures and unexpected statuses.
    pub async fn is_running(&self) -> Result<bool> {
        self.envd.health().await
    }

    /// A `/files` URL for a plain HTTP client, signed when the sandbox is
    /// secured; see [`SandboxTransport::file_url`].
    ///
    /// # Errors
    /// As [`SandboxTransport::file_url`].
    pub fn file_url(
        &self,
        path: &str,
        operation: FileOperation,
        user: Option<&str>,
        expires_at: Option<SystemTime>,
    ) -> Result<String> {
        self.transport().file_url(path, operation, user, expires_at)
    }
}
