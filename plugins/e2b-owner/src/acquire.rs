//! Getting the sandbox: create it (tagged as dsh's) or connect to the
//! configured one, with errors that say which config field is at fault.

use dsh_e2b_gateway::plugin_error;
use dsh_plugin_api::{Error, ErrorKind, Result};
use e2b_client::{Api, NewSandbox, Sandbox};

use crate::config::{Acquisition, OwnerConfig};

/// Where the sandbox came from, which decides what a failed setup may do
/// to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This owner created it.
    Created,
    /// It existed; `resumed` when it was paused and connect resumed it.
    Connected { resumed: bool },
}

/// A sandbox this owner holds, and where it came from.
#[derive(Debug)]
pub struct Acquired {
    pub sandbox: Sandbox,
    pub origin: Origin,
}

/// Creates or connects as `config` says.
///
/// Runs on the caller's runtime. Dropping the future while the API is
/// creating the sandbox can leave it running until its timeout (it is
/// tagged with the entry's `dsh-entry` metadata); a sandbox this returns is
/// the caller's to guard ([`KillOnDrop`]).
///
/// # Errors
/// `NotFound` for a template or sandbox that does not exist, `Config` for
/// one the API refuses, `PermissionDenied` for a rejected key,
/// `Unavailable` when the API cannot be reached; each names the config
/// field at fault where there is one.
pub async fn acquire(api: Api, config: &OwnerConfig) -> Result<Acquired> {
    match &config.acquisition {
        Acquisition::Create { template, metadata } => {
            let mut request = NewSandbox::new(template.clone()).timeout(config.timeout);
            for (key, value) in metadata {
                request = request.metadata(key.clone(), value.clone());
            }
            // Awaited first, mapped after: a closure borrowing the config
            // held across the await would make the future's `Send`
            // unprovable for every lifetime.
            let created = Sandbox::create(&api, &request).await;
            let sandbox = match created {
                Ok(sandbox) => sandbox,
                Err(err) => return Err(create_error(template, &err)),
            };
            tracing::info!(
                sandbox_id = %sandbox.id(),
                template = %template,
                envd_version = %sandbox.info().envd_version,
                "sandbox created"
            );
            Ok(Acquired {
                sandbox,
                origin: Origin::Created,
            })
        }
        Acquisition::Connect { sandbox_id } => {
            let connected = Sandbox::connect(&api, sandbox_id, config.timeout).await;
            let (sandbox, resumed) = match connected {
                Ok(connected) => connected,
                Err(err) => return Err(connect_error(sandbox_id, &err)),
            };
            tracing::info!(sandbox_id = %sandbox.id(), resumed, "connected to sandbox");
            Ok(Acquired {
                sandbox,
                origin: Origin::Connected { resumed },
            })
        }
    }
}

fn create_error(template: &str, err: &e2b_client::Error) -> Error {
    match err {
        e2b_client::Error::Http { status: 404, .. } => Error::not_found(format!(
            "config.template: template {template:?} does not exist: {err}"
        )),
        e2b_client::Error::Http { status: 400, .. } | e2b_client::Error::InvalidArgument { .. } => {
            Error::config(format!(
                "config.template: the API refused to create a sandbox from template {template:?}: {err}"
            ))
        }
        e2b_client::Error::Authentication { .. } => credentials_error(err),
        _ => plugin_error(err),
    }
}

fn connect_error(sandbox_id: &str, err: &e2b_client::Error) -> Error {
    if err.is_sandbox_gone() {
        return Error::not_found(format!(
            "config.sandboxId: sandbox {sandbox_id:?} does not exist: {err}"
        ));
    }
    match err {
        e2b_client::Error::InvalidArgument { .. } => {
            Error::config(format!("config.sandboxId: {err}"))
        }
        e2b_client::Error::Authentication { .. } => credentials_error(err),
        _ => plugin_error(err),
    }
}

/// A key the API rejects is the key's fault: `PermissionDenied`, naming
/// where keys come from.
fn credentials_error(err: &e2b_client::Error) -> Error {
    Error::new(
        ErrorKind::PermissionDenied,
        format!("{err} (check config.apiKey or E2B_API_KEY)"),
    )
}

/// Deletes a sandbox this owner created unless disarmed: an in-process
/// embedder that drops the plugin's create future after the sandbox exists
/// (the dlopen path always runs create to completion) does not leak it.
///
/// The deletion is spawned on the runtime current at drop; without one the
/// sandbox expires at its timeout.
#[derive(Debug)]
pub struct KillOnDrop {
    armed: Option<(Api, String)>,
}

impl KillOnDrop {
    /// Guards `sandbox` when this owner created it.
    pub fn new(acquired: &Acquired) -> KillOnDrop {
        KillOnDrop {
            armed: (acquired.origin == Origin::Created).then(|| {
                (
                    acquired.sandbox.api().clone(),
                    acquired.sandbox.id().to_owned(),
                )
            }),
        }
    }

    /// Keeps the sandbox.
    pub fn disarm(&mut self) {
        self.armed = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let Some((api, sandbox_id)) = self.armed.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                tracing::warn!(%sandbox_id, "create was abandoned; deleting its sandbox");
                handle.spawn(async move {
                    if let Err(err) = api.kill_sandbox(&sandbox_id).await
                        && !err.is_sandbox_gone()
                    {
                        tracing::warn!(%sandbox_id, error = %err, "deleting an abandoned sandbox failed");
                    }
                });
            }
            Err(_) => tracing::warn!(
                %sandbox_id,
                "create was abandoned outside a runtime; its sandbox expires at its timeout"
            ),
        }
    }
}
