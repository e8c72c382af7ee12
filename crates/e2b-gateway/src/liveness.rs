//! Whether the sandbox still exists, asked of the control plane: how the
//! owner tells "the sandbox is gone" from "the connection failed" when a
//! transport failure alone cannot say.

use std::time::Duration;

use async_trait::async_trait;
use e2b_client::{Api, SandboxState};

/// How long the owner waits for the control plane's answer when it
/// classifies a transport failure; past it the failure counts as
/// [`Presence::Unknown`] (so a gateway call never waits on a hung API for
/// long after envd already failed).
pub const LIVENESS_TIMEOUT: Duration = Duration::from_secs(5);

/// What the control plane says about the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// It runs.
    Running,
    /// It is gone (killed, expired, never existed) or paused: nothing in it
    /// can run or change. The reason is for messages.
    Gone(String),
    /// The control plane could not be asked; the reason is for messages.
    Unknown(String),
}

/// Asks whether one sandbox still exists.
///
/// Implementations run on the caller's tokio runtime; dropping the future
/// abandons the question.
#[async_trait]
pub trait Liveness: Send + Sync + 'static {
    /// The sandbox's presence now.
    async fn presence(&self) -> Presence;
}

/// [`Liveness`] from the control plane's `GET /sandboxes/{id}`.
#[derive(Debug, Clone)]
pub struct ControlPlaneLiveness {
    api: Api,
    sandbox_id: String,
}

impl ControlPlaneLiveness {
    /// Asks `api` about `sandbox_id`.
    pub fn new(api: Api, sandbox_id: impl Into<String>) -> Self {
        ControlPlaneLiveness {
            api,
            sandbox_id: sandbox_id.into(),
        }
    }
}

#[async_trait]
impl Liveness for ControlPlaneLiveness {
    async fn presence(&self) -> Presence {
        match self.api.sandbox_info(&self.sandbox_id).await {
            Ok(detail) => match detail.state {
                SandboxState::Running => Presence::Running,
                SandboxState::Paused => Presence::Gone(format!(
                    "the control plane reports sandbox {} paused",
                    self.sandbox_id
                )),
                SandboxState::Other(state) => Presence::Unknown(format!(
                    "the control plane reports sandbox {} in state {state:?}",
                    self.sandbox_id
                )),
            },
            Err(err) if err.is_sandbox_gone() => Presence::Gone(err.to_string()),
            Err(err) => Presence::Unknown(err.to_string()),
        }
    }
}

/// `liveness`'s answer within [`LIVENESS_TIMEOUT`].
pub(crate) async fn bounded_presence(liveness: &dyn Liveness) -> Presence {
    match tokio::time::timeout(LIVENESS_TIMEOUT, liveness.presence()).await {
        Ok(presence) => presence,
        Err(_) => Presence::Unknown(format!(
            "the control plane did not answer within {} s",
            LIVENESS_TIMEOUT.as_secs()
        )),
    }
}
