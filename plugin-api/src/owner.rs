//! Owner services (docs/design.md §5.3): one remote world — a vendor's
//! sandbox — owned by one plugin and shared by the `fs` and `subprocess`
//! providers injected with it.
//!
//! An owner is the sole source of the world's identity and the one gateway
//! to the agent daemon running in it: adapters send plain HTTP requests with
//! path-only targets, and the owner adds routing and credentials, sends them
//! through its one connection pool and returns the response as is.
//!
//! **One trait, kinds by name.** Which vendor an owner holds — and so which
//! protocol its daemon speaks — is its [`OwnerKind`], a name
//! ([`OwnerKind::E2B`]: envd's Connect RPCs and `/files`). The [`Owner`]
//! trait itself is vendor-neutral: identity, HTTP to the daemon, liveness.
//! That shape is what any sandbox vendor's adapters need, and keeping typed
//! daemon calls out of it (for E2B they are built on both sides by the
//! `e2b-client` crate) means neither a new RPC nor a new vendor changes the
//! ABI: a second owner kind is one more [`OwnerKind`] constant in a minor
//! release, carried by the same FFI object. A per-vendor trait would have
//! needed a new FFI object type — an API bump — for every vendor, which is
//! what naming the kind was meant to avoid.

use async_trait::async_trait;

use crate::error::Result;
use crate::stream::ByteStream;

/// The entry of the owner's runtime root that holds durable commands'
/// state (`dsh-subprocess-e2b`, docs/design.md §5.2.1): the owner's sweep
/// of stale entries keeps it, since durable commands outlive owners.
pub const DURABLE_STATE: &str = "durable";

/// Which kind of world an owner holds: a vendor, named as in manifests
/// (`e2b`). The name also tells an owner's dependents which protocol the
/// daemon behind [`Owner::daemon`] speaks.
///
/// The set is this release's [`OwnerKind::KNOWN`]; there is no public
/// constructor, because a host refuses, at load, a plugin whose descriptor
/// names a kind the host does not know (a plugin built against a newer
/// `dsh-plugin-api`), rather than wire it into nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnerKind(&'static str);

impl OwnerKind {
    /// An E2B sandbox (cloud or `e2b-local`); its daemon is envd: Connect
    /// RPCs and `/files`, typed by the `e2b-client` crate.
    pub const E2B: OwnerKind = OwnerKind("e2b");

    /// Every owner kind this release knows.
    pub const KNOWN: &'static [OwnerKind] = &[OwnerKind::E2B];

    /// The name used in manifests and messages (`e2b`).
    pub const fn name(self) -> &'static str {
        self.0
    }

    /// The known kind named `name`.
    pub fn from_name(name: &str) -> Option<OwnerKind> {
        OwnerKind::KNOWN
            .iter()
            .copied()
            .find(|kind| kind.name() == name)
    }
}

impl std::fmt::Display for OwnerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Identity of the owned sandbox, fixed for the owner's lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxInfo {
    /// The vendor's id of the sandbox.
    pub sandbox_id: String,
    /// The template (image) it was created from.
    pub template_id: String,
    /// The daemon's semver (envd's for [`OwnerKind::E2B`], e.g. `0.6.13`).
    pub daemon_version: String,
    /// The world's cwd (absolute POSIX path), created before hand-out.
    pub cwd: String,
    /// The owner's private directory (`/var/lib/dsh-e2b` for the E2B
    /// owner): a real directory, mode 0700, owned by root, for adapter
    /// control state.
    pub runtime_root: String,
}

/// An HTTP request to the sandbox's daemon.
pub struct DaemonRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// Path and query only (for envd: `/process.Process/Start`,
    /// `/files?path=…`); the owner supplies scheme, host and routing.
    pub path_and_query: String,
    /// Request headers (e.g. `content-type`; for envd `connect-timeout-ms`,
    /// `authorization` for the envd user). Routing and credential headers
    /// are added by the owner and must not be set here.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body, streamed (a unary call sends one chunk).
    pub body: ByteStream,
}

impl std::fmt::Debug for DaemonRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonRequest")
            .field("method", &self.method)
            .field("path_and_query", &self.path_and_query)
            .finish_non_exhaustive()
    }
}

/// The daemon's response, streamed: status and headers arrive first, the
/// body is pulled chunk by chunk (so server streams, such as envd's Connect
/// streams, flow as they are produced). Dropping the body aborts the
/// request.
pub struct DaemonResponse {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: ByteStream,
}

impl std::fmt::Debug for DaemonResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonResponse")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// The owner of one sandbox, as its dependents see it; the same trait for
/// every [`OwnerKind`].
#[async_trait]
pub trait Owner: Send + Sync + 'static {
    /// The sandbox's identity (set up before the owner was handed out).
    fn info(&self) -> SandboxInfo;

    /// Sends one HTTP request to the sandbox's daemon through the owner's
    /// connection pool and returns the response once its head arrives.
    /// Transport failures that mean the sandbox is gone (the edge's 502,
    /// connection refused by a dead sandbox) surface as
    /// [`crate::ErrorKind::Unavailable`]; other HTTP statuses are returned
    /// as responses for the caller to classify. Dropping the future or the
    /// response body aborts the request.
    async fn daemon(&self, request: DaemonRequest) -> Result<DaemonResponse>;

    /// Asks the control plane whether the sandbox still runs: `Ok(false)`
    /// when it is gone or paused (the world can no longer change), an error
    /// when the control plane cannot be asked.
    async fn alive(&self) -> Result<bool>;
}
