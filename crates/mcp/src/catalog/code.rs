//! The code tools: programs run in the world that call the other tools as
//! functions (`dsh-consumers`' code runtime, docs/design.md §11, the code runtime). One
//! `code_run` can stand for many tool calls: the program greps, reads and
//! summarises in the world and returns one value.

use std::sync::Arc;

use dsh_consumers::Tools;

use crate::entry::{Effect, Entry, entry, operations};

/// The code group's entries, in the order clients list them.
pub(super) fn entries() -> Vec<Entry> {
    vec![
        tool!(
            code.code_run,
            Destructive,
            "Run a python, javascript or typescript program in the world that calls the tools \
             as functions (JS/TS `await dsh.grep({pattern: 'x'})`, Python \
             `dsh.read_file(path='a')`, `dsh.aio.*` to gather): one call instead of many. \
             Returns its value (Python: the last expression; JS/TS: what it returns; JSON), its \
             output's head and tail and any traceback.",
            code = "",
            language = "Required without session.",
            session = "From code_session open: state persists between runs.",
            timeout_ms = "Default 30000, at most 600000; then the program (and session) is killed.",
        ),
        operations!(
            code,
            "code_session",
            Destructive,
            "Open a session (language) whose state persists between code_run calls, returning \
             its id and the dsh functions' declarations; close one (all it started ends); or \
             list them.",
            [
                open => code_session_open,
                close => code_session_close,
                list => code_sessions,
            ],
            language = "",
            session = "",
        ),
    ]
}
