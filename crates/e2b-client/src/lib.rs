//! Rust client for E2B sandboxes: the control-plane REST API and a
//! sandbox's envd daemon (Connect RPC `process`/`filesystem` services and
//! the `/files` routes), written from `docs/e2b-protocol.md`.
//!
//! # Shape
//!
//! - [`HttpStack`]: the one HTTP client (hyper_util's pooled client with
//!   fixed HTTP/2 windows): rustls with ALPN (HTTP/2 over TLS), HTTP/1.1 or
//!   h2c for plain `http://`. TLS trusts what the SDKs trust
//!   ([`default_tls_config`]: the system's store, `SSL_CERT_FILE` /
//!   `SSL_CERT_DIR`), plus a CA file a caller names
//!   ([`tls_config_with_ca_file`]); the default store is read on the
//!   first `https://` request, so a stack that speaks only plain `http://`
//!   never reads it.
//! - [`Api`]: create, connect, kill, pause, timeout, info, list, metrics.
//! - [`SandboxTransport`]: a `connectrpc` transport for one sandbox's envd.
//!   It takes path-only requests, puts them on the sandbox's envd URL and
//!   adds the routing and auth headers; it is the only holder of
//!   credentials and routing.
//! - [`Envd<T>`]: the typed envd client over any transport `T` (a
//!   `SandboxTransport`, or one relayed across a plugin boundary). It holds
//!   no credentials and classifies failures from the HTTP response alone.
//! - [`Sandbox`]: create/connect → identity + `Envd<SandboxTransport>` +
//!   lifecycle calls.
//!
//! Binary protobuf is the default wire format (raw bytes, no base64); JSON
//! is selectable ([`WireFormat`]). Streams pass bytes on as they arrive and
//! never retain them; dropping a stream or a future aborts its request.
//! Everything runs on the tokio runtime that polls it.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> e2b_client::Result<()> {
//! use e2b_client::{Api, Command, NewSandbox, ProcessEvent, Sandbox, StreamOptions};
//! use futures::StreamExt;
//!
//! let api = Api::from_env()?; // E2B_API_KEY, E2B_DOMAIN, E2B_API_URL, ...
//! let sandbox = Sandbox::create(&api, &NewSandbox::new("base")).await?;
//! let mut process = sandbox
//!     .envd()
//!     .start(&Command::shell("echo hi"), &StreamOptions::default())
//!     .await?;
//! while let Some(event) = process.next().await {
//!     if let ProcessEvent::Stdout(bytes) = event? {
//!         print!("{}", String::from_utf8_lossy(&bytes));
//!     }
//! }
//! sandbox.kill().await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod api;
mod body;
mod classify;
mod config;
mod envd;
mod error;
mod http_stack;
mod routing;
mod sandbox;
mod secret;
mod signing;
mod tls;
mod transport;
mod urlenc;

pub use api::{
    Api, AutoResume, Connected, DEFAULT_SANDBOX_TIMEOUT, Lifecycle, ListQuery, NetworkConfig,
    NewSandbox, SandboxDetail, SandboxInfo, SandboxMetric, SandboxPage, SandboxPager, SandboxState,
    VolumeMount,
};
pub use body::BoxError;
pub use config::{
    ConnectionConfig, ConnectionOptions, DEBUG_API_URL, DEFAULT_DOMAIN, DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_USER_AGENT, WireFormat,
};
pub use envd::{
    ByteRange, CallOptions, Command, DEFAULT_KEEPALIVE_INTERVAL, Download, DownloadOptions,
    EntryInfo, Envd, EnvdOptions, ExitStatus, FileType, FsEvent, FsEventKind, InputRoute,
    InputRouteCell, ProcessEvent, ProcessInfo, ProcessInput, ProcessStream, PtySize, Selector,
    Signal, StdinError, StdinRequest, StdinWriter, StreamOptions, UploadOptions, UploadPart,
    WatchOptions, WatchStream, WriteInfo,
};
pub use error::{Context, Error, Result};
pub use http_stack::{HttpStack, PlainHttp};
pub use routing::{ENVD_PORT, SHARED_HOST_DOMAINS, envd_base_url, envd_direct_url, sandbox_host};
pub use sandbox::{DEBUG_SANDBOX_ID, Sandbox};
pub use secret::Secret;
pub use signing::FileOperation;
pub use tls::{default_tls_config, tls_config_with_ca_file};
pub use transport::{
    ACCESS_TOKEN_HEADER, SANDBOX_ID_HEADER, SANDBOX_PORT_HEADER, SandboxRoute, SandboxTransport,
};

/// Re-exported so callers can name the transport trait and Connect codes
/// without depending on connectrpc directly.
pub use connectrpc::ErrorCode;
pub use connectrpc::client::ClientTransport;
