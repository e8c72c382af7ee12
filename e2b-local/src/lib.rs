//! `e2b-local`: an offline, E2B-compatible sandbox server.
//!
//! The official E2B SDKs work against it unchanged when pointed at it with `E2B_API_URL`,
//! `E2B_SANDBOX_URL` and `E2B_API_KEY`. It serves:
//!
//! - the **control plane** ([`api`]): create (v1/v2), connect/resume, pause, timeout, info,
//!   list, metrics, kill — E2B's REST API with JSON errors carrying a numeric `code`;
//! - the **envd front** ([`front`]): one port for every sandbox's envd, routed by
//!   `E2b-Sandbox-Id`, by `Host: 49983-<id>.<domain>`, or by a signed `/files` URL;
//! - **sandbox worlds** ([`world`]): each its own mount and PID namespace over a copy-on-write
//!   overlay of the host root, with its own `/proc`, `/dev`, devpts, `/tmp`, `/home/user` and a
//!   `user` account, held in a freezer cgroup, running `e2b-local-envd` inside.
//!
//! [`harness::LocalServer`] starts the built binary for other crates' tests.
//!
//! Isolation is for correctness, not security: sandbox processes run as real root or as uid 1000
//! in the host's user namespace and share its network.

pub mod api;
pub mod fleet;
pub mod front;
pub mod harness;
pub mod host;
pub mod ids;
pub mod preflight;
pub mod registry;
pub mod server;
pub mod signature;
pub mod snapshots;
pub mod template_build;
pub mod templates;
pub mod timefmt;
pub mod volume_content;
pub mod volumes;
pub mod world;
