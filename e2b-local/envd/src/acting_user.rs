//! File operations performed with the acting user's permissions: the user a request names
//! (`username=` on `/files`, the Basic-auth user of an RPC, else the default user) must not read
//! root-only files or write where that user cannot.
//!
//! Linux credentials belong to a thread, not to the process (the raw `setres[ug]id` and
//! `setgroups` system calls change the calling thread only; glibc's wrappers would broadcast to
//! every thread). So a non-root user's work runs on a dedicated thread that takes on the user's
//! effective uid, gid and supplementary groups — which also drops the thread's effective
//! capabilities (`CAP_DAC_OVERRIDE`, `CAP_CHOWN`, …) — and ends with the work: no thread whose
//! credentials were changed is ever reused, so tokio's blocking pool keeps root's. Root's work
//! runs on the blocking pool as before.
//!
//! That is a deliberate departure from E2B's envd (docs/design.md §7), which runs as root and
//! performs every file operation as root whatever user the request names (it only chowns what it
//! creates to that user). [`FileAccess::AsRoot`] restores that behaviour: every user's work then
//! runs on the blocking pool, as root's does. This module is the one place that choice is made.

use std::io;

use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};

use crate::users::{User, UserDb};

/// Whose permissions file operations (Stat, ListDir, MakeDir, Move, Remove, the watch path check,
/// `/files` download and upload) run with. Ownership of what they create goes to the requesting
/// user either way, and processes always run as that user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileAccess {
    /// The requesting user's (e2b-local's default, a departure from E2B's envd): a user's
    /// request cannot read root-only files nor write where that user may not.
    #[default]
    AsUser,
    /// Root's, whatever user the request names, as E2B's envd does.
    AsRoot,
}

/// Runs `work` with the filesystem permissions `access` gives `user`'s request and returns its
/// result.
///
/// Runs on tokio's blocking pool for root or under [`FileAccess::AsRoot`], on a fresh thread
/// with the user's effective ids and groups otherwise (see the module docs). An `Err` is the
/// failure to take on the identity (the user's groups could not be read, the thread could not be
/// started or changed ids) or a panic of `work`; `work` does not run then. Dropping the future
/// does not stop `work`: it runs to its end and its result is dropped.
pub(crate) async fn as_user<T: Send + 'static>(
    users: &UserDb,
    access: FileAccess,
    user: &User,
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    if user.uid == 0 || access == FileAccess::AsRoot {
        return tokio::task::spawn_blocking(work)
            .await
            .map_err(|err| io::Error::other(format!("filesystem task failed: {err}")));
    }
    let groups = users
        .groups(user)
        .map_err(|err| io::Error::other(format!("groups of user {}: {err}", user.name)))?;
    let (uid, gid, name) = (user.uid, user.gid, user.name.clone());
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("envd-as-user".to_owned())
        .spawn(move || {
            let outcome = become_user(uid, gid, &groups)
                .map_err(|err| io::Error::new(err.kind(), format!("acting as user {name}: {err}")))
                .map(|()| work());
            // The receiver is gone when the request was dropped: nothing to tell.
            let _ = sender.send(outcome);
        })?;
    receiver
        .await
        .map_err(|_| io::Error::other("filesystem task failed: it panicked"))?
}

/// Gives the calling thread the effective `gid`, supplementary `groups` and effective `uid` (in
/// that order: after the uid change the thread may no longer change its groups). The real and
/// saved ids stay root's; the thread is never reused, so this needs no undoing.
fn become_user(uid: u32, gid: u32, groups: &[u32]) -> io::Result<()> {
    let groups: Vec<Gid> = groups.iter().map(|&gid| Gid::from_raw(gid)).collect();
    set_thread_groups(&groups)?;
    set_thread_res_gid(None, Some(Gid::from_raw(gid)), None)?;
    set_thread_res_uid(None, Some(Uid::from_raw(uid)), None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs root, as the daemon does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_users_work_has_its_identity_and_leaves_root_elsewhere() {
        let nobody = User {
            name: "nobody".to_owned(),
            uid: 65534,
            gid: 65534,
            home: "/nonexistent".into(),
        };
        let ids = || {
            (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            )
        };
        let seen = as_user(&UserDb::default(), FileAccess::AsUser, &nobody, ids)
            .await
            .unwrap();
        assert_eq!(seen, (65534, 65534));
        // No other thread changed identity: the blocking pool and this one
        // are still root's.
        let pool = tokio::task::spawn_blocking(ids).await.unwrap();
        assert_eq!(pool, (0, 0));
        assert_eq!(ids(), (0, 0));
        // As E2B's envd: the user's work keeps root's identity.
        let seen = as_user(&UserDb::default(), FileAccess::AsRoot, &nobody, ids)
            .await
            .unwrap();
        assert_eq!(seen, (0, 0));
    }
}
