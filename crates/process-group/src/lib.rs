//! `dsh-process-group`: process groups and sessions as Linux's `/proc`
//! shows them, shared by every `subprocess` provider that owns groups —
//! `dsh-subprocess-local` on the host (async, on tokio) and `dsh-supervisor`
//! inside an E2B sandbox (synchronous, single-threaded).
//!
//! - [`table`]: the process table — who is in a group or a session, read
//!   from `/proc/<pid>/stat` — and **the one quiescence rule**
//!   ([`Stat::is_live`]).
//! - [`signal`]: signals to a whole group, or to one scanned member without
//!   ever hitting a recycled pid.
//! - [`ladder`]: the TERM → grace → KILL ladder for a group and the
//!   HUP → grace → KILL teardown of a session, each succeeding only once a
//!   bounded probe proves the group or session empty.
//! - [`pause`]: how a ladder waits — a blocking sleep ([`pause::Blocking`])
//!   or any async timer (a [`Pause`] of the caller's runtime); the ladder
//!   itself is the same code for both.
//!
//! # The quiescence rule
//!
//! A process is *live* — it can still run code and hold pipes — unless it
//! is a true zombie: its state is `Z` (or `X`) **and** no thread of it is
//! left. A thread group whose leader thread ended (`pthread_exit` in
//! `main`) shows the leader's state `Z` while its other threads keep
//! running; `/proc` then reports more than one thread, and the process is
//! live. A group or session is *empty* (quiescent) when it has no live
//! member: every member is a true zombie or absent. Zombies only wait for
//! their parent to read a status; nothing of them runs.

pub mod ladder;
pub mod pause;
pub mod signal;
pub mod table;

pub use ladder::Outcome;
pub use pause::Pause;
pub use table::Stat;

#[cfg(test)]
mod testing;
