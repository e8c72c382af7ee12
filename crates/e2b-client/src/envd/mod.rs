//! [`Envd`]: the typed client of one sandbox's envd daemon, generic over the
//! transport.
//!
//! `Envd` builds path-only requests (`/process.Process/Start`,
//! `/files?path=…`) and hands them to its transport, which knows where the
//! sandbox is and which credentials it needs ([`crate::SandboxTransport`],
//! or in dsh a transport relayed across the plugin boundary). `Envd` holds
//! no credentials and no connection pool, and classifies every failure from
//! the HTTP response alone.

mod edge;
mod files;
mod filesystem;
mod gzip;
mod multipart;
mod options;
mod process;
mod stdin;
mod stream;

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use connectrpc::ConnectError;
use connectrpc::client::{ClientConfig, ClientTransport, UnaryResponse};
use envd_proto::filesystem::FilesystemClient;
use envd_proto::process::ProcessClient;
use http::HeaderValue;
use http_body::Body;

use crate::classify::{self, Stage};
use crate::config::WireFormat;
use crate::error::{Context, Error, Result};
use options::Bound;

pub use files::{ByteRange, Download, DownloadOptions, UploadOptions, UploadPart, WriteInfo};
pub use filesystem::{EntryInfo, FileType, FsEvent, FsEventKind, WatchOptions, WatchStream};
pub use options::{CallOptions, DEFAULT_KEEPALIVE_INTERVAL, StreamOptions};
pub use process::{
    Command, ExitStatus, ProcessEvent, ProcessInfo, ProcessInput, ProcessStream, PtySize, Selector,
    Signal,
};
pub use stdin::{InputRoute, InputRouteCell, StdinError, StdinRequest, StdinWriter};

/// Settings of an [`Envd`] that are not per call.
#[derive(Debug, Clone)]
pub struct EnvdOptions {
    /// The sandbox id, used in error messages only (routing is the
    /// transport's business).
    pub sandbox_id: String,
    /// Connect encoding (default binary protobuf).
    pub wire_format: WireFormat,
    /// Default bound of unary calls and stream handshakes.
    pub request_timeout: Option<Duration>,
    /// The user for calls that act as one when the call names none. `None`
    /// lets envd pick its default user (envd ≥ 0.4.0); set it to `"user"`
    /// for older envd, as the SDKs do ([`EnvdOptions::default_user_for`]).
    pub default_user: Option<String>,
}

/// The first envd version with a default user of its own.
const DEFAULT_USER_ENVD_VERSION: semver::Version = semver::Version::new(0, 4, 0);

/// The user older envd is given, as the SDKs do.
const LEGACY_DEFAULT_USER: &str = "user";

impl EnvdOptions {
    /// Options for `sandbox_id` with the defaults: protobuf, 60 s request
    /// timeout, envd's default user.
    pub fn new(sandbox_id: impl Into<String>) -> Self {
        EnvdOptions {
            sandbox_id: sandbox_id.into(),
            wire_format: WireFormat::Proto,
            request_timeout: Some(crate::config::DEFAULT_REQUEST_TIMEOUT),
            default_user: None,
        }
    }

    /// The [`EnvdOptions::default_user`] an envd of `version` needs: `None`
    /// (envd's own) from 0.4.0 on; `"user"` below, since such envd has no
    /// default user and calls that act as one must name one. An unknown
    /// version (`None`: absent or unparseable) is treated as old, which
    /// works with every envd.
    pub fn default_user_for(version: Option<&semver::Version>) -> Option<String> {
        match version {
            Some(version) if *version >= DEFAULT_USER_ENVD_VERSION => None,
            _ => Some(LEGACY_DEFAULT_USER.to_owned()),
        }
    }
}

/// The envd client of one sandbox; cheap to clone.
///
/// `T` is any connectrpc transport that accepts path-only request URIs and
/// knows where the sandbox is; its response body must be `Unpin` (hyper's
/// `Incoming` is) and its body error `Display`.
///
/// Every method runs on the tokio runtime that polls it and sends through
/// the transport `T`. Dropping a method's future aborts its request (an
/// in-flight envd operation may still complete inside the sandbox, e.g. a
/// `Move`). Streams returned by `start`, `connect_process`, `watch_dir` and
/// `download` abort their request when dropped; a dropped process stream
/// does not kill the process.
pub struct Envd<T> {
    transport: edge::EdgeGuard<T>,
    process: ProcessClient<edge::EdgeGuard<T>>,
    filesystem: FilesystemClient<edge::EdgeGuard<T>>,
    sandbox_id: Arc<str>,
    request_timeout: Option<Duration>,
    default_user: Option<Arc<str>>,
    wire_format: WireFormat,
}

impl<T: Clone> Clone for Envd<T> {
    fn clone(&self) -> Self {
        Envd {
            transport: self.transport.clone(),
            process: self.process.clone(),
            filesystem: self.filesystem.clone(),
            sandbox_id: Arc::clone(&self.sandbox_id),
            request_timeout: self.request_timeout,
            default_user: self.default_user.clone(),
            wire_format: self.wire_format,
        }
    }
}

impl<T> std::fmt::Debug for Envd<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envd")
            .field("sandbox_id", &self.sandbox_id)
            .field("wire_format", &self.wire_format)
            .field("request_timeout", &self.request_timeout)
            .field("default_user", &self.default_user)
            .finish_non_exhaustive()
    }
}

impl<T> Envd<T>
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: Display,
{
    /// An envd client sending through `transport`.
    pub fn new(transport: T, options: EnvdOptions) -> Self {
        // Requests carry path-only URIs; the transport puts them on the
        // sandbox's envd URL.
        let mut config = ClientConfig::new(http::Uri::from_static("/"));
        config = match options.wire_format {
            WireFormat::Proto => config.proto(),
            WireFormat::Json => config.json(),
        };
        let guarded = edge::EdgeGuard::new(transport);
        Envd {
            process: ProcessClient::new(guarded.clone(), config.clone()),
            filesystem: FilesystemClient::new(guarded.clone(), config),
            transport: guarded,
            sandbox_id: Arc::from(options.sandbox_id),
            request_timeout: options.request_timeout,
            default_user: options.default_user.map(Arc::from),
            wire_format: options.wire_format,
        }
    }

    /// The transport this client sends through.
    pub fn transport(&self) -> &T {
        self.transport.inner()
    }

    /// The sandbox id used in error messages.
    pub fn sandbox_id(&self) -> &str {
        &self.sandbox_id
    }

    /// The Connect encoding in use.
    pub fn wire_format(&self) -> WireFormat {
        self.wire_format
    }

    /// The default bound of unary calls and stream handshakes.
    pub fn request_timeout(&self) -> Option<Duration> {
        self.request_timeout
    }

    /// The connectrpc options of one RPC: Basic auth for `user` (only for
    /// RPCs that act as a user), `Connect-Timeout-Ms`, and
    /// `Keepalive-Ping-Interval` for streams.
    fn rpc_options(
        &self,
        context: &Context,
        user: Access<'_>,
        timeout: Option<Duration>,
        keepalive: Option<Duration>,
    ) -> Result<connectrpc::client::CallOptions> {
        let mut options = connectrpc::client::CallOptions::default();
        if let Some(user) = self.effective_user(context, user)? {
            options = options.with_headers([(http::header::AUTHORIZATION, basic_auth(user))]);
        }
        if let Some(timeout) = timeout {
            options = options.with_timeout(timeout);
        }
        if let Some(interval) = keepalive {
            // Whole seconds, rounded up, at least one: envd parses an integer.
            let secs =
                u64::try_from(interval.as_millis().div_ceil(1000).max(1)).unwrap_or(u64::MAX);
            options = options.with_headers([(
                http::HeaderName::from_static("keepalive-ping-interval"),
                HeaderValue::from(secs),
            )]);
        }
        Ok(options)
    }

    /// The user a call acts as, validated; rejects a user on calls that do
    /// not act as one.
    fn effective_user<'a>(
        &'a self,
        context: &Context,
        access: Access<'a>,
    ) -> Result<Option<&'a str>> {
        let user = match access {
            Access::AsUser(Some(user)) => Some(user),
            Access::AsUser(None) => self.default_user.as_deref(),
            Access::Anonymous(None) => None,
            Access::Anonymous(Some(user)) => {
                return Err(Error::invalid_argument(
                    context.clone(),
                    format!("this call does not act as a user; remove user {user:?}"),
                ));
            }
        };
        if let Some(user) = user {
            validate_user(context, user)?;
        }
        Ok(user)
    }

    /// Classifies a Connect failure of this sandbox.
    fn rpc_error(&self, context: Context, err: &ConnectError, stage: Stage) -> Error {
        classify::from_connect(context, &self.sandbox_id, err, stage)
    }

    /// Options of a unary RPC: the call's bound defaults to the request
    /// timeout.
    fn unary_options(
        &self,
        context: &Context,
        access: Access<'_>,
        timeout: Bound,
    ) -> Result<connectrpc::client::CallOptions> {
        self.rpc_options(context, access, timeout.resolve(self.request_timeout), None)
    }

    /// Options of a unary RPC that acts as `options.user` (or the default
    /// user).
    fn user_call(
        &self,
        context: &Context,
        options: &CallOptions,
    ) -> Result<connectrpc::client::CallOptions> {
        self.unary_options(
            context,
            Access::AsUser(options.user.as_deref()),
            options.timeout,
        )
    }

    /// Options of a unary RPC that does not act as a user (a given user is
    /// an error).
    fn anonymous_call(
        &self,
        context: &Context,
        options: &CallOptions,
    ) -> Result<connectrpc::client::CallOptions> {
        self.unary_options(
            context,
            Access::Anonymous(options.user.as_deref()),
            options.timeout,
        )
    }

    /// The owned response of one awaited unary RPC, or its failure
    /// classified against `context`. It takes the call's result rather than
    /// its future so that callers' futures stay provably `Send` (a generic
    /// future parameter here hides that from the compiler).
    fn unary<V>(
        &self,
        context: &Context,
        result: std::result::Result<UnaryResponse<buffa::view::OwnedView<V>>, ConnectError>,
    ) -> Result<V::Owned>
    where
        V: buffa::MessageView<'static>,
    {
        result
            .map(UnaryResponse::into_owned)
            .map_err(|e| self.rpc_error(context.clone(), &e, Stage::Call))
    }
}

/// Whether an RPC acts as a user, with the user the caller gave.
#[derive(Debug, Clone, Copy)]
enum Access<'a> {
    /// Sends Basic auth for the given (or default) user.
    AsUser(Option<&'a str>),
    /// Never sends a user; a given one is an error.
    Anonymous(Option<&'a str>),
}

/// `Authorization: Basic base64("<user>:")` (empty password).
fn basic_auth(user: &str) -> HeaderValue {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:"));
    HeaderValue::from_str(&format!("Basic {encoded}")).expect("base64 is header-safe")
}

/// A user name must survive Basic auth (no `:`) and the query string.
fn validate_user(context: &Context, user: &str) -> Result<()> {
    if user.is_empty() {
        return Err(Error::invalid_argument(
            context.clone(),
            "the user name is empty",
        ));
    }
    if user.contains(':') || user.chars().any(char::is_control) {
        return Err(Error::invalid_argument(
            context.clone(),
            format!("user name {user:?} contains ':' or a control character"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envd_below_0_4_0_gets_the_legacy_default_user() {
        let user = |version: &str| {
            EnvdOptions::default_user_for(semver::Version::parse(version).ok().as_ref())
        };
        assert_eq!(user("0.6.13"), None);
        assert_eq!(user("0.4.0"), None);
        assert_eq!(user("0.3.9").as_deref(), Some("user"));
        assert_eq!(user("not-semver").as_deref(), Some("user"));
    }

    #[test]
    fn basic_auth_has_an_empty_password() {
        assert_eq!(basic_auth("root"), "Basic cm9vdDo=");
        assert_eq!(basic_auth("user"), "Basic dXNlcjo=");
    }

    #[test]
    fn bad_user_names_are_rejected() {
        let context = Context::new("stat", "/x");
        for bad in ["", "a:b", "a\nb"] {
            let err = validate_user(&context, bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { .. }), "{bad:?}");
            assert!(
                err.to_string().starts_with("stat /x: invalid argument"),
                "{err}"
            );
        }
        validate_user(&context, "user").unwrap();
    }
}
