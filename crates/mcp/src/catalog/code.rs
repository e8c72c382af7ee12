//! The code tools: programs run in the world that call the other tools as
//! functions (`dsh-consumers`' code runtime, docs/design.md §11, the code runtime). One
//! `code_run` can stand for many tool calls: the program greps, reads and
//! summarises in the world and returns one value.

use std::sync::Arc;

use dsh_consumers::Tools;

use crate::entry::{Effect, Entry, entry};

/// The code group's entries, in the order clients list them.
pub(super) fn entries() -> Vec<Entry> {
    vec![
        tool!(
            code.code_run,
            Destructive,
            "Run a program (python, javascript or typescript) in the world that calls this \
             server's tools as functions with the same arguments — JS/TS `await \
             dsh.grep({pattern: 'x'})`, Python `dsh.read_file(path='a')` (`dsh.aio.*` for \
             asyncio.gather) — and loops and filters there: one call instead of many. Returns \
             the program's value (Python: its last expression; JS/TS: what it returns), its \
             stdout/stderr (head and tail) and any exception with its traceback. With session \
             (code_session_open) state persists between runs."
        ),
        tool!(
            code.code_session_open,
            Additive,
            "Open a code session (python, javascript or typescript) whose variables, imports \
             and functions persist between code_run calls; returns its id and the declaration \
             of every dsh function."
        ),
        tool!(
            code.code_session_close,
            Destructive,
            "Close a code session: its interpreter and everything its programs started end."
        ),
        tool!(
            code.code_sessions,
            ReadOnly,
            "The open code sessions: id, language, runs, whether one is running."
        ),
    ]
}
