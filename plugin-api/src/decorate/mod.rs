//! Decorators without forwarding boilerplate.
//!
//! A decorator is a plugin that injects a service and provides the same
//! one, changing some of what passes through (an audit log, a deny list, a
//! read-only view). Writing it against the seam trait means forwarding every
//! method it does not change — and, to see a command end, wrapping
//! [`Process`](crate::subprocess::Process) and
//! [`Terminal`](crate::subprocess::Terminal) as well and watching the
//! processes nobody waits on. Instead, per seam, a hooks trait names the
//! points a decorator acts at, each with a default that changes nothing,
//! and a decorated provider applies them around the wrapped one:
//! [`SubprocessHooks`] with [`DecoratedSubprocess`], [`FsHooks`] with
//! [`DecoratedFs`].

mod fs;
mod subprocess;

pub use fs::{DecoratedFs, FsCall, FsHooks};
pub use subprocess::{DecoratedSubprocess, Started, SubprocessHooks};
