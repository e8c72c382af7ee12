//! Tearing down every process group of one terminal session, with
//! `dsh-process-group`'s session ladder: members are found by scanning the
//! process table for the session id and signalled one by one through
//! pidfds, so a pid recycled since the scan is never signalled. Processes
//! that left the session with `setsid` are not members and are not
//! touched.

use std::io;
use std::time::Duration;

use dsh_process_group::{Outcome, ladder, table};

use crate::group::KILL_SETTLE;
use crate::leader::Leader;
use crate::pause::TokioPause;

/// Outcome of a teardown: proven empty, or what was still alive.
pub type Teardown = Result<(), String>;

/// SIGHUP and SIGCONT to every member (what a terminal hangup delivers;
/// interactive shells ignore SIGTERM but not SIGHUP), up to `grace` for the
/// session to empty, then SIGKILL to every member found until a scan comes
/// back empty or [`KILL_SETTLE`] passes ([`ladder::teardown_session`]).
/// Dropping the future stops the teardown where it is.
pub async fn teardown(leader: &Leader, grace: Duration) -> Teardown {
    let sid = leader.pid().as_raw_nonzero().get();
    match ladder::teardown_session(sid, grace, KILL_SETTLE, &mut TokioPause).await {
        Ok(Outcome::Empty) => Ok(()),
        Ok(Outcome::Busy { live, mut failures }) => {
            if !live.is_empty() {
                failures.push(format!("still alive after SIGKILL: {live:?}"));
            }
            Err(failures.join("; "))
        }
        Err(err) => Err(err.to_string()),
    }
}

/// Whether the session has no live member (used when its leader exits).
pub fn is_empty(leader: &Leader) -> io::Result<bool> {
    Ok(table::session_members(leader.pid().as_raw_nonzero().get())?.is_empty())
}
