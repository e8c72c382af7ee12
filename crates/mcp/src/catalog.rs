//! The tools `dsh mcp` serves, in the order clients list them: one line per
//! tool naming its `dsh-consumers` method (or, for a tool of several
//! operations, one per operation), how it treats the world, and what a
//! model reads about it — the tool's description and its fields' texts.
//! Argument types and bounds, and the result schemas, come from the request
//! and result types, whose docs state the whole contract.
//!
//! The listing is lean, since a client puts it in the model's context on
//! every turn (docs/design.md §11): a tool per thing an agent does, with
//! related operations behind one `op` field where one tool serves as well
//! (`lsp`, `terminal_control`, `code_session`); descriptions say what the
//! tool does, its bounds and the one thing to know; nothing the server's
//! instructions say (relative paths are the world's) is repeated per field.
//!
//! Names follow the common file and shell tools agents already know
//! (`read_file`, `write_file`, `edit_file` with `path`, `old_string`,
//! `new_string`; `run` with `command`): snake_case verbs, the object named
//! where a verb alone would be ambiguous (`list_dir`, `move_path`), a
//! `terminal_` prefix for the terminal family and `lsp` for the language
//! tools.

use std::sync::Arc;

use dsh_consumers::Tools;

use crate::entry::{Effect, Entry, entry, operations};

/// The entry of tool `$method` of group `$group` (`files`, `commands`,
/// `terminals`, `lsp`, `code`), served under the method's name, with its
/// fields' texts; the group is also what `dsh mcp --tools` selects by.
macro_rules! tool {
    ($group:ident . $method:ident, $effect:ident, $description:expr
        $(, $field:ident = $text:expr)* $(,)?) => {
        entry(
            stringify!($group),
            stringify!($method),
            $description,
            Effect::$effect,
            &[$((stringify!($field), $text)),*],
            |tools: Arc<Tools>, request| async move { tools.$group.$method(request).await },
        )
    };
}

/// The entry of tool `$name` of group `$group` whose `op` field picks one of
/// the group's methods (`op => method`), with the fields' texts.
macro_rules! operations {
    ($group:ident, $name:literal, $effect:ident, $description:expr,
        [$($op:ident => $method:ident),+ $(,)?]
        $(, $field:ident = $text:expr)* $(,)?) => {
        operations(
            stringify!($group),
            $name,
            $description,
            Effect::$effect,
            &[$((stringify!($field), $text)),*],
            vec![$((
                stringify!($op),
                entry(
                    stringify!($group),
                    concat!($name, " ", stringify!($op)),
                    "",
                    Effect::$effect,
                    &[],
                    |tools: Arc<Tools>, request| async move {
                        tools.$group.$method(request).await
                    },
                ),
            )),+],
        )
    };
}

mod code;
mod stdin;

// Texts several tools' fields share.
const IF_VERSION: &str = "Refuse (Conflict) if changed since this version.";
const ARGV: &str = "Program and arguments, no shell.";
const ENV: &str = "Added to the world's environment.";
const CURSOR: &str = "Default: where the last read ended.";
const COLUMN: &str = "1-based, in characters; lines are 1-based too.";
const SYMBOL: &str = "Instead of line/column: a name in the file (Container::name).";

/// Every tool of the catalog.
pub(crate) fn entries() -> Vec<Entry> {
    let mut entries = vec![
        tool!(
            files.read_file,
            ReadOnly,
            "Read a UTF-8 text file by lines (or bytes), with its version (for if_version) and \
             where to continue; an image (PNG, JPEG, GIF, WebP; ≤ 3 MiB) as an image, other binary \
             refused.",
            path = "",
            offset = "First line, 1-based.",
            limit = "Default 2000 lines.",
            byte_offset = "Read bytes from here (the rest of a cut line).",
            max_bytes = "Default 51200, at most 262144.",
            line_numbers = "As cat -n.",
        ),
        tool!(
            files.write_file,
            Destructive,
            "Write a whole file atomically, creating missing parent directories.",
            path = "",
            content = "At most 16 MiB.",
            create_new = "Refuse an existing file.",
            if_version = IF_VERSION,
        ),
        tool!(
            files.edit_file,
            Destructive,
            "Replace old_string (literal; LF matches CRLF) with new_string, keeping line \
             endings; it must match once unless expected_replacements. Or edits, in one or more \
             files: each matched in its file as it is, none overlapping; all are written or none. \
             Returns a unified diff.",
            path = "",
            old_string = "",
            new_string = "",
            expected_replacements = "Replace all; there must be this many.",
            if_version = IF_VERSION,
            edits = "An edit without path is in path, under if_version.",
            dry_run = "Only return the diff.",
        ),
        tool!(
            files.list_dir,
            ReadOnly,
            "List a directory (default .), skipping .gitignore'd entries; bounded.",
            path = "",
            depth = "1 to 5 (default 1).",
            max_entries = "Default 500, at most 5000.",
        ),
        tool!(
            files.stat,
            ReadOnly,
            "Kind, size, mode, mtime, version and symlink target of a path.",
            path = "",
        ),
        tool!(
            files.find_files,
            ReadOnly,
            "Paths under path (default .) matching a glob, skipping .gitignore'd ones; bounded.",
            path = "",
            pattern = "*, ?, ** (any depth), {a,b}, [ab]; without / it matches names at any depth.",
            max_results = "Default 200, at most 2000.",
        ),
        tool!(
            files.grep,
            ReadOnly,
            "Regex search of file contents (ripgrep syntax, per line): path:line: text, or by mode \
             files (with counts). Recursive, skipping binary, symlinked and .gitignore'd files; bounded.",
            path = "A file or directory (default .).",
            pattern = "",
            glob = "Only files it matches.",
            context = "Lines around each match, at most 10.",
            max_matches = "Default 100, at most 1000.",
            case_insensitive = "",
            mode = "",
            file_type = "rust, py, js, … (ripgrep's).",
        ),
        tool!(
            files.move_path,
            Destructive,
            "Move or rename a file or directory, creating parents; a file at to is replaced.",
            from = "",
            to = "",
        ),
        tool!(
            files.remove_path,
            Destructive,
            "Remove a file, symlink (not its target) or, with recursive, a directory tree.",
            path = "",
            recursive = "",
        ),
        tool!(
            files.make_dir,
            Idempotent,
            "Create a directory and its parents; an existing one is success.",
            path = "",
        ),
        tool!(
            commands.run,
            Destructive,
            "Run a command, stdout and stderr merged. Waits up to wait_ms (default 10 s) and \
             returns the exit code and the output's head and tail; one still running then goes \
             on in the background (its id and cursor for read_output). background: true returns \
             the id at once; it ends with this server unless durable.",
            command = "A bash command line; or argv.",
            argv = ARGV,
            cwd = "",
            env = ENV,
            stdin = "Text for stdin, then closed (at most 1 MiB).",
            timeout_ms = "Then TERM, then KILL, its process group; at most 600000 (background \
                          86400000).",
            wait_ms = "Foreground: wait before handing over (at most 600000).",
            background = "",
            keep_stdin = "Background: keep stdin open for write_stdin.",
            durable = "Background: outlives this server (no stdin); a later one reads or kills \
                       it by id.",
        ),
        tool!(
            commands.read_output,
            ReadOnly,
            "Read a command's output from a cursor (all is kept), optionally waiting for output, \
             its exit or a pattern; returns the next cursor and the status.",
            id = "",
            cursor = CURSOR,
            max_bytes = "Default 32768, at most 1048576.",
            until = "Default: pattern if given, else output with wait_ms.",
            pattern = "Regex (^ $ at line ends) to wait for; a match fits in 4096 bytes.",
            wait_ms = "Default 0, or 30000 with until or pattern; at most 50000.",
        ),
        stdin::tool(),
        tool!(
            commands.kill,
            Destructive,
            "Stop a command: TERM to its process group, KILL after the grace, until none is left.",
            id = "",
            grace_ms = "Default 2000, at most 30000.",
        ),
        tool!(
            commands.list_commands,
            ReadOnly,
            "This session's commands and the world's durable ones: id, command, status, exit \
             code, output size."
        ),
        tool!(
            terminals.terminal_open,
            Additive,
            "Open a terminal (a PTY running a login shell, or command or argv); returns its id.",
            command = "A bash command line, e.g. python3.",
            argv = ARGV,
            cwd = "",
            env = ENV,
            cols = "Default 80, at most 500.",
            rows = "Default 24, at most 200.",
        ),
        tool!(
            terminals.terminal_send,
            Additive,
            "Type into a terminal: text, then named keys (Enter, Tab, Escape, Backspace, Up, \
             Down, Left, Right, F1-F12, Ctrl-A-Ctrl-Z, \
             Alt-x, …).",
            id = "",
            text = "Typed as is; end a command line with the Enter key.",
            keys = "At most 256.",
        ),
        tool!(
            terminals.terminal_read,
            ReadOnly,
            "Read a terminal: output since a cursor and the screen as a person sees it, \
             optionally waiting until output comes and pauses 200 ms, or the program exits.",
            id = "",
            cursor = CURSOR,
            max_bytes = "Default 16384, at most 262144.",
            wait_ms = "At most 50000.",
            screen = "Default true.",
        ),
        operations!(
            terminals,
            "terminal_control",
            Destructive,
            "Resize a terminal (the program sees SIGWINCH), send a signal to its foreground \
             process group, or close it (its whole session ends).",
            [
                resize => terminal_resize,
                signal => terminal_signal,
                close => terminal_close,
            ],
            id = "",
            cols = "resize: 1 to 500.",
            rows = "resize: 1 to 200.",
            signal = "INT, TERM, KILL, HUP, QUIT, TSTP, CONT, STOP, USR1, USR2, WINCH or a number.",
        ),
        tool!(
            terminals.list_terminals,
            ReadOnly,
            "The open terminals: id, command, size, whether the program exited."
        ),
        // The queries change nothing the agent works with: a server they start keeps only its
        // own caches (clangd's index), as any reader's would.
        operations!(
            lsp,
            "lsp",
            ReadOnly,
            "Language-server queries on the files as they are now: definition, references, \
             hover (of the symbol at line and column, or named), symbols (of a file, or the \
             workspace's matching query), diagnostics (of a file or a directory, waited for). \
             A server starts on first use.",
            [
                definition => lsp_definition,
                references => lsp_references,
                hover => lsp_hover,
                symbols => lsp_symbols,
                diagnostics => lsp_diagnostics,
            ],
            path = "The file; diagnostics: or a directory (200 files); symbols with query: \
                    where to search.",
            line = "",
            column = COLUMN,
            symbol = SYMBOL,
            include_declaration = "Default true.",
            query = "Search the workspace's symbols.",
            language = "With query, when path does not say (c, python, typescript, …).",
            timeout_secs = "Per file, server start included (default 60, at most 600).",
        ),
        tool!(
            lsp.lsp_rename,
            Destructive,
            "Rename the symbol at a position (or named) across the workspace; the edits are \
             written only if no file changed since the server read it (else the conflicts are \
             named).",
            path = "",
            line = "",
            column = COLUMN,
            symbol = SYMBOL,
            new_name = "",
            apply = "false: only return the edits.",
        ),
    ];
    entries.extend(code::entries());
    entries
}
