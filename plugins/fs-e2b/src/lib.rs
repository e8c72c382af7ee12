//! `dsh-fs-e2b`: the `fs` seam ([`dsh_plugin_api::fs::FsProvider`]) over
//! one E2B sandbox, the one the injected `e2b` owner holds.
//!
//! [`FsE2b`] implements every row of the seam contract (docs/design.md §5.1)
//! with the sandbox as the world, behaving as `dsh-fs-local` does on the host
//! (the conformance kit runs the same cases on both):
//!
//! - **identity** — POSIX resolution against the caller's cwd or the
//!   sandbox cwd; canonical paths with GNU `realpath -m` semantics computed
//!   in the sandbox (NUL-framed, so newline and multibyte names survive;
//!   symlink loops reported); percent-encoded
//!   `file:` URIs; containment decided on canonical paths;
//! - **metadata** — `stat` / `lstat` / `list` from envd's `Stat` and
//!   `ListDir` (file type and full mode, special bits included, read from
//!   the entry's mode string; a symlink's stored text from `readlink`);
//!   versions hash that metadata plus a per-write extended attribute;
//! - **reads** — streamed `/files` downloads with bounded host memory,
//!   strict UTF-8 decoded across chunk boundaries, the 8192-byte NUL
//!   sample, empty files as empty streams;
//! - **mutations** — atomic writes through a random sibling staging
//!   directory made 0700 at creation, the replaced file's mode and owner
//!   kept, envd's `Move` as the commit point and source of the committed
//!   version; literal edits (LF-normalised matching, dominant CRLF kept)
//!   serialised per canonical target; create/version guards; `mkdir -p`,
//!   recursive remove, rename with parent creation;
//! - **one identity** — the world's user's permissions even against an
//!   envd that acts as root (E2B's own): probed once, then every read,
//!   write, staging step, listing and tree mutation performed by a process
//!   running as the user (never a check followed by root's act on a path
//!   the user may change meanwhile), only metadata from envd's `Stat`;
//! - **world-side operations** — `walk`, `search` and `read_many` (and
//!   their `beneath` confinement) answered in the sandbox by one
//!   `dsh-supervisor world` process each, running `dsh-fs-local`'s native
//!   engines as the world's user and streaming frames back; installed once
//!   per provider, on first need (the composition over the primitives
//!   otherwise);
//! - **faults** — envd's answers mapped onto the fs vocabulary; a gone
//!   sandbox is `Unavailable`, promptly; cancellation honoured before a
//!   commit and never during its rename.
//!
//! [`FsE2bPlugin`] is the plugin (`dsh-fs-e2b`: provides `fs`, injects
//! `e2b`, no config), exported for the host as `libdsh_fs_e2b.so`. `FsE2b`
//! is generic over the envd transport, so it also runs directly on an
//! [`e2b_client::Sandbox`]'s transport.

#![forbid(unsafe_code)]

mod as_user;
mod canonical;
mod chunks;
mod direct;
mod edit;
mod errors;
mod identity;
mod list;
mod locks;
mod lookup;
mod meta;
mod native;
mod plugin;
mod provider;
mod read;
mod staging;
mod tree;
mod version;
mod world;
mod write;

pub use chunks::CHUNK_LEN;
pub use plugin::{FsE2bConfig, FsE2bPlugin};
pub use provider::FsE2b;
pub use staging::STAGING_PREFIX;
pub use version::WRITE_TOKEN_KEY;
pub use world::EnvdTransport;

dsh_plugin_api::export_plugin!(FsE2bPlugin);
