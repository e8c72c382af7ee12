//! `dsh-consumers`: the agent's operations on one execution world, provider-neutral
//! (docs/design.md §11).
//!
//! Everything here reaches the world only through the two seams —
//! `Arc<dyn FsProvider>` and `Arc<dyn SubprocessProvider>` — and knows nothing
//! of the plugins serving them, so every provider (ours or a third party's)
//! gets every tool. The MCP server (`dsh mcp`) and the CLI are thin shells
//! over it: each tool is one method taking a request type and returning a
//! result type, both plain serde types with JSON schemas.
//!
//! - [`files::Files`]: read (line range or byte window, with the version),
//!   write (atomic, guarded), edit (literal, unique or counted, dry run,
//!   unified diff), list, stat, move, remove, mkdir, find (glob) and grep
//!   (regex), bounded and `.gitignore`-aware.
//! - [`commands::Commands`]: run (argv or a `bash -c` string, timeout over
//!   the whole process group), output bounded as head + tail with the whole
//!   kept in the world and readable by cursor, background handles with
//!   stdin, kill and list. A background command without stdin is
//!   *durable* when the provider supports it: it outlives the tools, and
//!   later tools over the same world list it, read it by cursor under the
//!   same id and kill it.
//! - [`terminals::Terminals`]: PTY sessions driven by text and named keys,
//!   read by cursor and as a rendered screen.
//! - [`lsp::Lsp`]: language servers run in the world — diagnostics of the
//!   file as it is now, definition, references, hover, symbols, rename —
//!   started per language and workspace, restarted when they end.
//! - [`code::Code`]: programs (Python, JavaScript, TypeScript) run in the
//!   world that call these tools as functions (`dsh.grep(…)`), one-shot or
//!   in sessions that keep their state, plus host bindings an embedder
//!   registers.
//! - [`world::facts`]: the world's working directory, user and OS, asked of
//!   the world (what `dsh mcp` tells a model before its first call).
//!
//! **Errors** are the seams' own [`dsh_plugin_api::Error`]: a kind and a
//! message naming the operation (the tool's name) and its subject, the text a
//! model reads. No operation panics on bad input.
//!
//! **Runtime and cancellation.** Every method runs on the caller's tokio
//! runtime and may be called concurrently. Dropping a method's future
//! cancels the call: what it started in the world stops with it (a
//! foreground `run` terminates its process group), except what outlives a
//! call by design (a background command, an open terminal), which
//! [`Tools::shutdown`] ends — or, for a durable command, detaches from.

#![forbid(unsafe_code)]

pub mod code;
pub mod commands;
pub mod files;
pub mod lsp;
pub mod terminals;
pub mod world;

use std::sync::Arc;

use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::subprocess::SubprocessProvider;

/// A tool's result as a model reads it: the structured result is the value
/// itself (its JSON), and [`Outcome::text`] a short rendering of it.
pub trait Outcome: serde::Serialize + schemars::JsonSchema {
    /// A few lines that say what happened (the content itself for reads).
    fn text(&self) -> String;

    /// An image the result carries besides its text, as its MIME type and
    /// its bytes in base64 (`read_file` of an image); none by default.
    fn image(&self) -> Option<(&str, &str)> {
        None
    }
}

/// Every tool over one world.
pub struct Tools {
    pub files: Arc<files::Files>,
    pub commands: Arc<commands::Commands>,
    pub terminals: terminals::Terminals,
    pub lsp: Arc<lsp::Lsp>,
    /// Programs that call the tools above as functions.
    pub code: code::Code,
}

impl Tools {
    /// The tools of the world that `fs` and `subprocess` serve, with the default language
    /// servers.
    pub fn new(fs: Arc<dyn FsProvider>, subprocess: Arc<dyn SubprocessProvider>) -> Tools {
        Tools::with_lsp_config(fs, subprocess, lsp::LspConfig::default())
    }

    /// The tools of the world that `fs` and `subprocess` serve, with `lsp`'s language servers.
    pub fn with_lsp_config(
        fs: Arc<dyn FsProvider>,
        subprocess: Arc<dyn SubprocessProvider>,
        lsp: lsp::LspConfig,
    ) -> Tools {
        let files = Arc::new(files::Files::new(Arc::clone(&fs)));
        let commands = Arc::new(commands::Commands::new(
            Arc::clone(&subprocess),
            Arc::clone(&fs),
        ));
        let lsp = Arc::new(lsp::Lsp::new(Arc::clone(&fs), Arc::clone(&subprocess), lsp));
        let code = code::Code::new(fs, Arc::clone(&subprocess), &files, &commands, &lsp);
        Tools {
            files,
            commands,
            terminals: terminals::Terminals::new(subprocess),
            lsp,
            code,
        }
    }

    /// Ends what outlives single calls — every ordinary background command,
    /// every open terminal, every language server and every code session, each process group
    /// proven gone — so that
    /// nothing the tools started survives the caller, except durable
    /// commands: those are meant to outlive this caller (a restarted
    /// server reads them on by cursor), so the tools only detach from them;
    /// a durable command `kill` ended has its retained state removed from
    /// the world. Returns the failures (what may be left), empty when
    /// everything ended.
    pub async fn shutdown(&self) -> Vec<dsh_plugin_api::Error> {
        // Code sessions first: their programs may be calling the other tools.
        let code = self.code.shutdown().await;
        let (commands, terminals, lsp) = futures::future::join3(
            self.commands.shutdown(),
            self.terminals.shutdown(),
            self.lsp.shutdown(),
        )
        .await;
        code.into_iter()
            .chain(commands)
            .chain(terminals)
            .chain(lsp)
            .collect()
    }
}
