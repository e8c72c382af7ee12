//! The in-world helper and the host side of durable commands, shared by
//! both subprocess providers.
//!
//! - [`HELPER`]: the `dsh-supervisor` program, built static by this crate's
//!   build script and embedded. `dsh-subprocess-e2b` installs it in each
//!   sandbox; `dsh-subprocess-local` installs it on the host to supervise
//!   durable commands (docs/design.md §5.2.1, §6.3); a sandbox template may
//!   hold it at [`template_path`] instead.
//! - [`answers`]: the helper's `durable-*` answers in the seam's types.
//! - [`FollowedProcess`]: a durable command's handle, built from the
//!   provider's own handle on a `durable-follow` helper.

#![forbid(unsafe_code)]

pub mod answers;
pub mod control;
mod embedded;
mod followed;

pub use embedded::{HELPER, HELPER_DIGEST, TEMPLATE_ENTRY, template_path, template_path_in};
pub use followed::{
    DurableControl, FollowedProcess, attach, follower_spec, holds, new_id, started,
};

/// The E2B owner's private directory in the sandbox (docs/design.md §6.4):
/// root's, mode 0700, under `/var/lib`, whose every ancestor is root's and
/// writable by root only, so the sandbox user can neither read it, rename it
/// away nor replace a component of its path. Uploaded helpers and durable
/// commands' state live there. `dsh-e2b-owner` prepares it in every
/// sandbox; `dsh template`'s recipe creates it in the template, so that
/// an owner finds it ready and runs no script for it.
pub const RUNTIME_ROOT: &str = "/var/lib/dsh-e2b";
