//! The command line (clap).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// dsh — one execution world (files, commands, terminals) for coding
/// agents, composed from plugins by a manifest.
///
/// Without --config, the embedded local composition runs (fs and
/// subprocess on this machine). Plugin libraries are found through an
/// entry's `path`, then $DSH_PLUGIN_PATH, then the directory of dsh itself.
///
/// Exit codes: 0 success; 1 a failed operation; 2 a usage, manifest or
/// configuration error; `exec` and `sh` exit with the child's code, 128+N
/// when it died of signal N; 127/126 when `exec`'s program is missing / not
/// executable; 128+N when dsh itself stops on SIGINT/SIGTERM; 141 (128 +
/// SIGPIPE), quietly, when the reader of dsh's output went away.
#[derive(Debug, Parser)]
#[command(name = "dsh", version, about, long_about)]
pub struct Cli {
    /// Manifest to run (TOML or YAML, by extension) instead of the embedded
    /// local composition.
    #[arg(long, short = 'c', global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Machine-readable JSON output where a command prints results.
    #[arg(long, global = true)]
    pub json: bool,

    /// Language servers for `dsh lsp` and `dsh mcp` (YAML or TOML: a
    /// `languages` list replacing or adding to the defaults — clangd,
    /// pyright, typescript-language-server).
    #[arg(long, global = true, value_name = "FILE")]
    pub lsp_config: Option<PathBuf>,

    /// Log level or filter (`error`, `warn`, `info`, `debug`, `trace`, or an
    /// env-filter like `dsh_host=debug`); default from RUST_LOG, else warn.
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the composition's plugins in load order: id, name, version,
    /// services provided and injected. Creates nothing.
    Plugins,
    /// Validate the manifest and every plugin library; create nothing.
    Check,
    /// Run a command in the world, streaming its output; exit with its code.
    Exec(ExecArgs),
    /// An interactive shell on a terminal in the world (raw mode, resize).
    #[command(alias = "terminal")]
    Sh(ShArgs),
    /// Files of the world.
    #[command(subcommand)]
    Fs(FsCommand),
    /// Run the conformance kit against the composition's fs and subprocess.
    Conformance(ConformanceArgs),
    /// Language intelligence from language servers run in the world
    /// (started per language and workspace, ended when dsh exits).
    /// Positions are FILE:LINE:COL, 1-based, or FILE with --symbol NAME.
    #[command(subcommand)]
    Lsp(LspCommand),
    /// Serve the world as MCP tools (files, commands, terminals) to an agent:
    /// over stdio (the default: the agent starts `dsh mcp`), or streamable
    /// HTTP with `--http`. The composition lives exactly as long as the
    /// server: until stdin closes, SIGINT or SIGTERM.
    Mcp(McpArgs),
    /// Programs (Python, JavaScript, TypeScript) run in the world that call
    /// its tools as functions: `dsh.grep(…)`, `dsh.read_file(…)`, `dsh.run(…)`.
    #[command(subcommand)]
    Code(CodeCommand),
    /// Write an E2B template build context (DIR/dsh-supervisor and
    /// DIR/build.mjs, a `Template()` builder program) whose sandboxes hold
    /// dsh's sandbox helper, so the E2B providers start without uploading
    /// it. Needs no composition.
    Template(TemplateArgs),
    /// List the world's durable commands (`exec --detach`): id, pid, state,
    /// bytes of output, argv.
    Ps,
    /// Stream a durable command's output from a byte offset until it ends;
    /// exit with its code. Ctrl-C detaches (the command keeps running).
    Attach(AttachArgs),
    /// Terminate a durable command's whole process group (SIGTERM, grace,
    /// SIGKILL); prints how it ended.
    Kill(KillArgs),
    /// Remove everything retained of an ended durable command.
    Forget(ForgetArgs),
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The id `exec --detach` printed.
    pub id: String,
    /// The byte offset both streams resume at (default 0: everything
    /// retained).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub from: u64,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    pub id: String,
    /// Milliseconds between SIGTERM and SIGKILL.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub grace_ms: u64,
}

#[derive(Debug, Args)]
pub struct ForgetArgs {
    pub id: String,
}

#[derive(Debug, Args)]
pub struct TemplateArgs {
    /// The build context's directory (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The template it builds on.
    #[arg(long, value_name = "TEMPLATE", default_value = "base")]
    pub from: String,
}

#[derive(Debug, Subcommand)]
pub enum CodeCommand {
    /// Run programs (FILE, or - for stdin): their output, then the value
    /// they return as JSON; exit 1 if one raised (traceback on stderr) or
    /// timed out. Several files run in one session, in order.
    Run {
        #[arg(required = true, value_name = "FILE|-")]
        files: Vec<String>,
        /// The language (default: from the file's extension).
        #[arg(long, value_enum)]
        lang: Option<CodeLang>,
        /// Run in one session (state kept from program to program) even for
        /// one file.
        #[arg(long)]
        session: bool,
        /// Each program's wall-clock limit in milliseconds.
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
    },
    /// Print the declaration of the `dsh` functions for a language (a
    /// TypeScript declaration, or a Python stub).
    Types {
        #[arg(long, value_enum)]
        lang: CodeLang,
    },
}

/// A program's language.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CodeLang {
    Python,
    Javascript,
    Typescript,
}

impl From<CodeLang> for dsh_consumers::code::Language {
    fn from(lang: CodeLang) -> Self {
        match lang {
            CodeLang::Python => dsh_consumers::code::Language::Python,
            CodeLang::Javascript => dsh_consumers::code::Language::Javascript,
            CodeLang::Typescript => dsh_consumers::code::Language::Typescript,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum LspCommand {
    /// The problems of a file as it is now, or of every file of a
    /// directory (at most 200); exit 1 when there are errors, 2 for a file
    /// no server can be given (no configured language, not UTF-8, not a
    /// regular file).
    Diagnostics {
        #[arg(value_name = "FILE|DIR")]
        file: String,
        /// Seconds to wait for each file's analysis, the server's start
        /// included (default 30).
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
    },
    /// Where the symbol at FILE:LINE:COL is defined.
    Definition(LspAt),
    /// Every reference to the symbol at FILE:LINE:COL.
    References {
        #[command(flatten)]
        at: LspAt,
        /// Leave the declaration out.
        #[arg(long)]
        no_declaration: bool,
    },
    /// What the server says of the symbol at FILE:LINE:COL.
    Hover(LspAt),
    /// The workspace's symbols matching QUERY, or with --file a file's
    /// symbols.
    Symbols {
        query: Option<String>,
        /// Without QUERY: list this file's symbols; with it: search the
        /// workspace of this file or directory.
        #[arg(long, value_name = "PATH")]
        file: Option<String>,
        /// The language to search (c, python, typescript, …) when --file
        /// does not say.
        #[arg(long)]
        language: Option<String>,
    },
    /// Rename the symbol at FILE:LINE:COL to NEW across the workspace.
    Rename {
        #[command(flatten)]
        at: LspAt,
        new_name: String,
        /// Show the edits without writing them.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Args)]
pub struct LspAt {
    /// FILE:LINE:COL (1-based), or FILE with --symbol.
    pub at: String,
    /// A symbol declared in FILE (`Container::name` when several share
    /// the name) instead of a position.
    #[arg(long, value_name = "NAME")]
    pub symbol: Option<String>,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (e.g.
    /// 127.0.0.1:8787; port 0 picks one, printed on stderr). Every request
    /// must carry the bearer token, on every address (loopback too: every
    /// local account can reach it).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// The bearer token HTTP clients must send (`Authorization: Bearer
    /// TOKEN`). Without it or --token-file: the DSH_MCP_TOKEN environment
    /// variable, else a random token printed on stderr.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Read the bearer token from FILE (its first line), e.g. one only you
    /// can read: a token on the command line is visible to every local
    /// account in `ps`.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<std::path::PathBuf>,
    /// Serve only these tool groups (comma-separated: files, commands,
    /// terminals, lsp, …); default: all. Fewer tools cost the model less
    /// context on every turn.
    #[arg(long, value_name = "GROUPS", value_delimiter = ',')]
    pub tools: Vec<String>,
    /// List each tool's output schema too (off: the structured results are
    /// returned either way, and the schemas double the listing).
    #[arg(long)]
    pub output_schemas: bool,
    /// How long a foreground `run` waits for its command before handing
    /// it over to the background (still running, with its output so far),
    /// when the call gives no `wait_ms`: 1 to 600000 ms, default 10000.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub run_wait_ms: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Working directory in the world (default: the world's cwd).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Start a durable command and print its id: it keeps running after
    /// dsh exits, its output retained in the world (`dsh attach ID`).
    #[arg(long)]
    pub detach: bool,
    /// With --detach: bytes of each output stream kept at least (default
    /// 16 MiB).
    #[arg(long, value_name = "BYTES", requires = "detach")]
    pub retain: Option<u64>,
    /// Extra environment entry NAME=VALUE (repeatable).
    #[arg(long = "env", short = 'e', value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// The program and its arguments (`--` before them is optional; it
    /// keeps dsh from reading the program's options as its own).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGV"
    )]
    pub argv: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ShArgs {
    /// Working directory in the world (default: the world's cwd).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// The program to run on the terminal (default: bash, else sh), after
    /// an optional `--`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGV"
    )]
    pub argv: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum FsCommand {
    /// Metadata of a path (follows symlinks; --no-follow for the link).
    Stat {
        path: String,
        /// Report a symlink itself (lstat).
        #[arg(long)]
        no_follow: bool,
    },
    /// One level of a directory (default: the world's cwd).
    Ls { path: Option<String> },
    /// Write a file's bytes to stdout.
    Cat { path: String },
    /// Atomically write a file from CONTENT, or from stdin without it.
    Write {
        path: String,
        content: Option<String>,
        #[command(flatten)]
        guard: GuardArgs,
    },
    /// Replace literal text OLD with NEW (exactly one match unless --all).
    Edit {
        path: String,
        old: String,
        new: String,
        /// Replace every occurrence.
        #[arg(long)]
        all: bool,
        /// Show the unified diff of the (unique) replacement; write nothing.
        #[arg(long, conflicts_with = "all")]
        dry_run: bool,
        #[command(flatten)]
        guard: GuardArgs,
    },
    /// Several literal replacements in one or more files as one patch, all
    /// or nothing: a JSON array of {path, old_string, new_string,
    /// expected_replacements?, if_version?} (edit_file's edits), from EDITS
    /// or, without it, from stdin. Prints the unified diff.
    Edits {
        edits: Option<String>,
        /// Show the unified diff; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Search file contents with a regular expression (file:line: text),
    /// skipping binary files and what .gitignore ignores; bounded.
    Grep {
        pattern: String,
        /// File or directory to search (default: the world's cwd).
        path: Option<String>,
        /// Only files whose path matches this glob (e.g. `*.rs`).
        #[arg(long)]
        glob: Option<String>,
        /// Match case-insensitively.
        #[arg(long, short = 'i')]
        ignore_case: bool,
        /// Lines of context around each match.
        #[arg(long, short = 'C', value_name = "LINES")]
        context: Option<u64>,
        /// The most matches shown.
        #[arg(long, value_name = "N")]
        max: Option<u64>,
    },
    /// Paths under a directory matching a glob (e.g. `**/*.rs`), skipping
    /// what .gitignore ignores; bounded.
    Find {
        pattern: String,
        /// Directory to search (default: the world's cwd).
        path: Option<String>,
        /// The most paths shown.
        #[arg(long, value_name = "N")]
        max: Option<u64>,
    },
    /// Remove a path recursively.
    Rm {
        path: String,
        /// A missing path is not an error.
        #[arg(long, short = 'f')]
        force: bool,
    },
    /// Create a directory and its missing parents.
    Mkdir { path: String },
    /// Rename FROM to TO (creating TO's parents).
    Mv { from: String, to: String },
}

#[derive(Debug, Args)]
pub struct GuardArgs {
    /// Fail if the file already exists.
    #[arg(long, conflicts_with = "if_version")]
    pub create_new: bool,
    /// Fail unless the file is still at this version (from `stat`).
    #[arg(long, value_name = "VERSION")]
    pub if_version: Option<String>,
}

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// Run only cases whose name contains one of these comma-separated
    /// substrings.
    #[arg(long, value_name = "SUBSTRINGS")]
    pub filter: Option<String>,
    /// Directory in the world under which the kit makes its scratch area.
    #[arg(long, value_name = "DIR", default_value = "/tmp")]
    pub scratch_root: String,
    /// The fs provider is read-only: skip the mutation cases.
    #[arg(long)]
    pub read_only_fs: bool,
    /// The subprocess provider has no terminals: skip the terminal cases.
    #[arg(long)]
    pub no_terminals: bool,
    /// The fs provider confines paths to DIR (which must hold the scratch
    /// root): check that it refuses paths outside instead of reaching `/`.
    #[arg(long, value_name = "DIR")]
    pub fs_confined_to: Option<String>,
    /// Per-case time limit in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub case_timeout: Option<u64>,
}
