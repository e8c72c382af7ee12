//! The envd gateway between the `dsh-e2b-owner` plugin and its adapters.
//!
//! The `e2b` owner service (`dsh_plugin_api::owner::Owner`) is a small,
//! generic FFI surface: adapters hand the owner plain HTTP requests for the
//! sandbox's envd ([`DaemonRequest`](dsh_plugin_api::owner::DaemonRequest)), the
//! owner adds routing and credentials and sends them through its one
//! connection pool. This crate types that surface on both sides with
//! `e2b-client`, so an adapter uses the same typed client
//! ([`e2b_client::Envd`]) whether it talks to envd directly (tests) or
//! through the owner (dsh):
//!
//! - **owner side** — [`EnvdGateway`] serves a `DaemonRequest` through the
//!   sandbox's [`e2b_client::SandboxTransport`], streaming both bodies, and
//!   reports a gone sandbox as `ErrorKind::Unavailable`;
//! - **adapter side** — [`OwnerTransport`] is a `connectrpc`
//!   `ClientTransport` over an injected owner, and [`envd_client`] gives the
//!   `Envd<OwnerTransport>` of the owner's sandbox. What the owner reports
//!   for a gone sandbox comes out of `Envd` as
//!   [`e2b_client::Error::SandboxNotFound`] (`is_sandbox_gone()`): the
//!   classification stays in `e2b-client`.
//!
//! Plus what both sides share: [`ControlShell`] (internal commands as root,
//! no login shell, a fresh random `HOME`), [`install_helper`] (the sandbox
//! helper from the template or uploaded, then probed), [`plugin_error`] (an
//! `e2b_client` error in the plugin vocabulary) and [`Liveness`] (asking
//! the control plane whether the sandbox still exists).
//!
//! ```no_run
//! # async fn demo(owner: std::sync::Arc<dyn dsh_plugin_api::owner::Owner>) {
//! use e2b_client::CallOptions;
//!
//! let envd = dsh_e2b_gateway::envd_client(owner.clone());
//! match envd.stat(&owner.info().cwd, &CallOptions::default()).await {
//!     Ok(entry) => println!("{} is {:?}", entry.path, entry.file_type),
//!     Err(err) if err.is_sandbox_gone() => println!("the world is gone"),
//!     Err(err) => println!("{}", dsh_e2b_gateway::plugin_error(&err)),
//! }
//! # }
//! ```

#![forbid(unsafe_code)]

mod bodies;
mod control;
mod errors;
mod gone;
mod headers;
mod helper;
mod liveness;
mod owner;
mod owner_transport;
mod serve;

pub use bodies::{RelayedBody, RelayedBodyError};
pub use control::{
    CONTROL_SHELL, CONTROL_USER, ControlOutput, ControlShell, EnvdReadable, GUARD_FAILED_EXIT,
    RUNTIME_ROOT_ENV,
};
pub use errors::plugin_error;
pub use helper::{
    BASE_TEMPLATE, InstallPaths, Installed, install as install_helper, root_only, template_copy_of,
};
pub use liveness::{ControlPlaneLiveness, LIVENESS_TIMEOUT, Liveness, Presence};
pub use owner::GatewayOwner;
pub use owner_transport::{OwnerTransport, envd_client, envd_options};
pub use serve::EnvdGateway;

/// The typed envd client adapters use through the owner.
pub type OwnerEnvd = e2b_client::Envd<OwnerTransport>;
