//! The tools `dsh mcp` serves, in the order clients list them: one line per
//! tool naming its `dsh-consumers` method, how it treats the world, and what a
//! model reads about it. Argument and result schemas come from the request
//! and result types (their field docs are the descriptions a model sees).
//!
//! Names follow the common file and shell tools agents already know
//! (`read_file`, `write_file`, `edit_file` with `path`, `old_string`,
//! `new_string`; `run` with `command`): snake_case verbs, the object named
//! where a verb alone would be ambiguous (`list_dir`, `move_path`), a
//! `terminal_` prefix for the terminal family and `lsp_` for the language
//! tools.

use std::sync::Arc;

use dsh_consumers::Tools;

use crate::entry::{Effect, Entry, entry};

/// The entry of tool `$method` of group `$group` (`files`, `commands`,
/// `terminals`, `lsp`), served under the method's name; the group is also
/// what `dsh mcp --tools` selects by.
macro_rules! tool {
    ($group:ident . $method:ident, $effect:ident, $description:expr) => {
        entry(
            stringify!($group),
            stringify!($method),
            $description,
            Effect::$effect,
            |tools: Arc<Tools>, request| async move { tools.$group.$method(request).await },
        )
    };
}

mod code;

/// Every tool of the catalog.
pub(crate) fn entries() -> Vec<Entry> {
    let mut entries = vec![
        tool!(
            files.read_file,
            ReadOnly,
            "Read a UTF-8 text file: a window of lines (offset, limit) or bytes, with the file's \
             version (for write_file/edit_file if_version) and where to continue. Binary files \
             are refused with a hint."
        ),
        tool!(
            files.write_file,
            Destructive,
            "Write a whole file atomically (readers see the old or the new content, never a mix), \
             creating missing parent directories. create_new refuses an existing file; \
             if_version refuses a file changed since it was read."
        ),
        tool!(
            files.edit_file,
            Destructive,
            "Replace old_string with new_string in a text file: the match must be unique unless \
             expected_replacements says how many. Line endings and the final newline are kept. \
             Returns a unified diff; dry_run shows it without writing."
        ),
        tool!(
            files.list_dir,
            ReadOnly,
            "List a directory (depth levels, sizes), skipping what .gitignore ignores; bounded, \
             saying how many entries were not shown."
        ),
        tool!(
            files.stat,
            ReadOnly,
            "Metadata of a path: kind, size, permissions, modification time, version, symlink \
             target."
        ),
        tool!(
            files.find_files,
            ReadOnly,
            "Find paths under a directory matching a glob (e.g. **/*.rs), skipping what \
             .gitignore ignores; bounded."
        ),
        tool!(
            files.grep,
            ReadOnly,
            "Search file contents with a regular expression: matches as path:line: text, with \
             optional context, skipping binary and .gitignore'd files; bounded."
        ),
        tool!(
            files.move_path,
            Destructive,
            "Move or rename a file or directory, creating the destination's parents; an existing \
             file at the destination is replaced."
        ),
        tool!(
            files.remove_path,
            Destructive,
            "Remove a file, symlink or (with recursive) a directory tree."
        ),
        tool!(
            files.make_dir,
            Idempotent,
            "Create a directory and its missing parents; an existing directory is success."
        ),
        tool!(
            commands.run,
            Destructive,
            "Run a command (a bash string in command, or argv) with stdout and stderr merged. \
             Waits up to wait_ms (default 10 s) and returns the exit code and the output's head \
             and tail; one still running then goes on in the background (its id, output so far \
             and cursor). background: true returns an id at once; it ends with this server \
             unless durable: true (kept by the world, same id for a later server)."
        ),
        tool!(
            commands.read_output,
            ReadOnly,
            "Read a command's output from a cursor (the whole output is kept), optionally \
             waiting up to wait_ms (at most 50 s) for more output, for the exit, or for a \
             pattern; returns the next cursor and the status."
        ),
        tool!(
            commands.write_stdin,
            Additive,
            "Write text to a background command's stdin."
        ),
        tool!(
            commands.close_stdin,
            Additive,
            "Close a background command's stdin (end of input)."
        ),
        tool!(
            commands.kill,
            Destructive,
            "Stop a command: TERM to its whole process group, then KILL after a grace period, \
             until none of it is left."
        ),
        tool!(
            commands.list_commands,
            ReadOnly,
            "The commands started so far, and the world's durable commands from earlier \
             servers: id, command line, status, exit code, output size."
        ),
        tool!(
            terminals.terminal_open,
            Additive,
            "Open an interactive terminal (a PTY running a shell, or a given command) and return \
             its id."
        ),
        tool!(
            terminals.terminal_send,
            Additive,
            "Type into a terminal: text, and named keys (Enter, Tab, Escape, Backspace, arrows, \
             Ctrl-C, …)."
        ),
        tool!(
            terminals.terminal_read,
            ReadOnly,
            "Read a terminal: output since a cursor, and the screen as a person would see it \
             (rendered by a terminal emulator), optionally waiting for new output."
        ),
        tool!(
            terminals.terminal_resize,
            Idempotent,
            "Change a terminal's size (the program sees SIGWINCH)."
        ),
        tool!(
            terminals.terminal_signal,
            Destructive,
            "Send a signal (INT, TERM, KILL, …) to a terminal's foreground process group."
        ),
        tool!(
            terminals.terminal_close,
            Destructive,
            "Close a terminal: its whole session ends."
        ),
        tool!(
            terminals.list_terminals,
            ReadOnly,
            "The open terminals: id, command, size, whether the program exited."
        ),
        // The lsp_ queries change nothing the agent works with: a server they start keeps
        // only its own caches (clangd's index), as any reader's would.
        tool!(
            lsp.lsp_diagnostics,
            ReadOnly,
            "Compiler and type-checker problems of a file as it is now (after any write, edit \
             or command), or of every file of a directory: the language server's analysis of \
             exactly that version, waited for. \
             Servers (clangd, pyright, typescript-language-server, or configured ones) run in \
             the world, one per language and workspace, started on first use."
        ),
        tool!(
            lsp.lsp_definition,
            ReadOnly,
            "Where the symbol at a file position (line and column, 1-based) or named by symbol \
             is defined."
        ),
        tool!(
            lsp.lsp_references,
            ReadOnly,
            "Every reference to the symbol at a position (or named), across the workspace; \
             waits for the server's indexing, and says when it could not."
        ),
        tool!(
            lsp.lsp_hover,
            ReadOnly,
            "The language server's description (type, signature, docs) of the symbol at a \
             position (or named)."
        ),
        tool!(
            lsp.lsp_symbols,
            ReadOnly,
            "The symbols declared in a file (path), or the workspace's symbols matching a query."
        ),
        tool!(
            lsp.lsp_rename,
            Destructive,
            "Rename the symbol at a position (or named) across the workspace: the server's \
             edits, written only if no file changed since the server read it (else the \
             conflicts are named and nothing is written); apply: false only shows the edits."
        ),
    ];
    entries.extend(code::entries());
    entries
}
