//! The `e2b` owner service (docs/design.md §5.3): one E2B sandbox, shared.
//!
//! Provided only by `dsh-e2b` and injected into the E2B `fs` and
//! `subprocess` providers. It is the sole source of sandbox identity and the
//! one gateway to the sandbox's envd: adapters send plain HTTP requests
//! (Connect RPCs, `/files`) with path-only targets, and the owner adds
//! routing and credentials, sends them through its one connection pool and
//! returns the response as is. The surface is deliberately generic — typed
//! envd calls are built on both sides by the `e2b-client` crate — so the ABI
//! does not grow with every RPC.

use async_trait::async_trait;

/// The entry of the owner's runtime root that holds durable commands'
/// state (`dsh-subprocess-e2b`, docs/design.md §5.2.1): the owner's sweep
/// of stale entries keeps it, since durable commands outlive owners.
pub const DURABLE_STATE: &str = "durable";

use crate::error::Result;
use crate::stream::ByteStream;

/// Identity of the owned sandbox, fixed for the owner's lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxInfo {
    pub sandbox_id: String,
    pub template_id: String,
    /// envd's semver, e.g. `0.6.13`.
    pub envd_version: String,
    /// The world's cwd (absolute POSIX path), created before hand-out.
    pub cwd: String,
    /// The owner's private directory (`/var/lib/dsh-e2b`): a real directory,
    /// mode 0700, owned by root, for adapter control state.
    pub runtime_root: String,
}

/// An HTTP request to the sandbox's envd.
pub struct EnvdRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// Path and query only (`/process.Process/Start`, `/files?path=…`); the
    /// owner supplies scheme, host and routing.
    pub path_and_query: String,
    /// Request headers (e.g. `content-type`, `connect-timeout-ms`,
    /// `authorization` for the envd user). Routing and credential headers
    /// are added by the owner and must not be set here.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body, streamed (a unary call sends one chunk).
    pub body: ByteStream,
}

impl std::fmt::Debug for EnvdRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvdRequest")
            .field("method", &self.method)
            .field("path_and_query", &self.path_and_query)
            .finish_non_exhaustive()
    }
}

/// envd's response, streamed: status and headers arrive first, the body is
/// pulled chunk by chunk (so Connect server streams flow as they are
/// produced). Dropping the body aborts the request.
pub struct EnvdResponse {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: ByteStream,
}

impl std::fmt::Debug for EnvdResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvdResponse")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// The owner of one sandbox, as its dependents see it.
#[async_trait]
pub trait E2bOwner: Send + Sync + 'static {
    /// The sandbox's identity (set up before the owner was handed out).
    fn info(&self) -> SandboxInfo;

    /// Sends one HTTP request to the sandbox's envd through the owner's
    /// connection pool and returns the response once its head arrives.
    /// Transport failures that mean the sandbox is gone (the edge's 502,
    /// connection refused by a dead sandbox) surface as
    /// [`crate::ErrorKind::Unavailable`]; other HTTP statuses are returned
    /// as responses for the caller to classify. Dropping the future or the
    /// response body aborts the request.
    async fn envd(&self, request: EnvdRequest) -> Result<EnvdResponse>;

    /// Asks the control plane whether the sandbox still runs: `Ok(false)`
    /// when it is gone or paused (the world can no longer change), an error
    /// when the control plane cannot be asked.
    async fn alive(&self) -> Result<bool>;
}
