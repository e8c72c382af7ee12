//! The language tools an agent calls: diagnostics, definition, references, hover, symbols and
//! rename, each one method over [`Servers`] (which starts, keeps, restarts and syncs the
//! servers). Positions are 1-based lines and columns in characters, or a symbol's name.
//! Answers are never read from a server still indexing without saying so: a question waits
//! (bounded) for the server's reported work to end, and a result given while it has not says
//! `indexing`.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::subprocess::SubprocessProvider;
use dsh_plugin_api::{Error, ErrorKind, Result};
use futures::{StreamExt, TryStreamExt};
use lsp_types::DiagnosticSeverity;

use super::config::LspConfig;
use super::position::TextPosition;
use super::server::{FileEdits, Location, Symbol};
use super::servers::{Acquired, Running, Servers};
use crate::Outcome;
use crate::files::commit::{FileChange, commit};

/// How long diagnostics are waited for by default (no tool blocks an agent longer than 30 s
/// unless asked to).
const DIAGNOSTICS_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest diagnostics wait a caller may ask for.
const MAX_TIMEOUT_SECS: u64 = 600;
/// The most files one `lsp_diagnostics` of a directory analyses.
const MAX_DIAGNOSED_FILES: usize = 200;
/// How many files of a directory are analysed at once.
const DIAGNOSED_AT_ONCE: usize = 4;
/// How long a question waits for a server's indexing to end before asking anyway, at most two
/// thirds of the question's whole wait: a server still indexing is asked, and its answer
/// marked possibly incomplete, rather than the call ending without one.
const INDEXING_WAIT: Duration = Duration::from_secs(20);
/// The longest a question (definition, references, hover, symbols, rename's edits) waits by
/// default, the server's start and indexing included: no tool blocks an agent longer than
/// 30 s unless told to ([`Lsp::set_question_wait`]). What was under way goes on (a server's
/// start is not tied to the call), so the next call finds it further along.
pub const QUESTION_WAIT: Duration = Duration::from_secs(30);
/// The longest question wait [`Lsp::set_question_wait`] takes.
const MAX_QUESTION_WAIT: Duration = Duration::from_secs(600);
/// Between two tries of a workspace search a young server answered with nothing.
const EMPTY_RETRY: Duration = Duration::from_millis(250);
/// Until what age a server's empty workspace search is asked again; until [`INDEXING_WAIT`]
/// it is reported as possibly incomplete.
const EMPTY_PATIENCE: Duration = Duration::from_secs(10);

/// One file's diagnostics as its server published them, with what turns them into items.
struct FileAnalysis {
    running: Arc<Running>,
    path: String,
    /// The file's version sent and analysed.
    version: String,
    notice: Option<String>,
    found: Vec<lsp_types::Diagnostic>,
}

impl FileAnalysis {
    fn items(&self) -> Vec<DiagnosticItem> {
        let server = &self.running.server;
        let at = |p: lsp_types::Position| server.text_position(&self.path, p);
        self.found
            .iter()
            .cloned()
            .map(|d| DiagnosticItem {
                path: self.path.clone(),
                start: at(d.range.start),
                end: at(d.range.end),
                severity: severity_name(d.severity).to_owned(),
                message: d.message,
                source: d.source,
                code: d.code.map(|c| match c {
                    lsp_types::NumberOrString::Number(n) => n.to_string(),
                    lsp_types::NumberOrString::String(s) => s,
                }),
            })
            .collect()
    }
}

/// The language tools of one world.
pub struct Lsp {
    servers: Servers,
    /// [`QUESTION_WAIT`] unless set, in milliseconds.
    question_wait_ms: AtomicU64,
}

/// What a result says beside its answer.
#[derive(Debug, Clone, Default, serde::Serialize, schemars::JsonSchema)]
pub struct Notes {
    /// Set when the server was still working (indexing) after the wait: the answer may be
    /// incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexing: Option<String>,
    /// Set when the server was (re)started for this call, saying why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// Arguments of `lsp_diagnostics`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagnosticsRequest {
    /// The file — or a directory: every file in it a server takes (at most 200) — absolute, or
    /// relative to the world's working directory.
    pub path: String,
    /// How long to wait for each file's analysis, the server's start included, in seconds
    /// (default 30, at most 600).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// One problem the server reports.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct DiagnosticItem {
    /// The file, absolute.
    pub path: String,
    pub start: TextPosition,
    pub end: TextPosition,
    /// `error`, `warning`, `information` or `hint`.
    pub severity: String,
    pub message: String,
    /// What reported it (`clang`, `Pyright`, `typescript`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// What `lsp_diagnostics` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct DiagnosticsResult {
    /// The file or directory, absolute.
    pub path: String,
    /// For a file: the version (as `read_file` and `write_file` report it) these diagnostics
    /// are of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How many files were analysed.
    pub files: usize,
    /// For a directory: whether it holds more files than were analysed (at most 200).
    pub truncated: bool,
    pub diagnostics: Vec<DiagnosticItem>,
    pub errors: usize,
    pub warnings: usize,
    #[serde(flatten)]
    pub notes: Notes,
}

/// A place in a file, by position or by a symbol's name.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PositionRequest {
    /// The file: absolute, or relative to the world's working directory.
    pub path: String,
    /// 1-based line (with `column`).
    #[serde(default)]
    pub line: Option<u32>,
    /// 1-based column in characters (with `line`).
    #[serde(default)]
    pub column: Option<u32>,
    /// Instead of a position: the name of a symbol declared in the file (`Container::name`
    /// when several share the name).
    #[serde(default)]
    pub symbol: Option<String>,
}

/// Arguments of `lsp_references`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReferencesRequest {
    #[serde(flatten)]
    pub at: PositionRequest,
    /// Include the declaration itself (default true).
    #[serde(default)]
    pub include_declaration: Option<bool>,
}

/// What `lsp_definition` and `lsp_references` return.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct LocationsResult {
    pub locations: Vec<Location>,
    #[serde(flatten)]
    pub notes: Notes,
}

/// What `lsp_hover` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct HoverResult {
    /// What the server says of the symbol (markdown when it writes markdown); absent when it
    /// says nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(flatten)]
    pub notes: Notes,
}

/// Arguments of `lsp_symbols`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SymbolsRequest {
    /// Without `query`: the file whose symbols to list. With `query`: a file or directory of
    /// the workspace to search (its language's server, its root); default the working
    /// directory.
    #[serde(default)]
    pub path: Option<String>,
    /// Search the whole workspace for symbols matching this (the server's fuzzy match).
    #[serde(default)]
    pub query: Option<String>,
    /// The language to search with `query` when `path` does not say (`c`, `python`,
    /// `typescript`, or a configured one).
    #[serde(default)]
    pub language: Option<String>,
}

/// What `lsp_symbols` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SymbolsResult {
    pub symbols: Vec<Symbol>,
    #[serde(flatten)]
    pub notes: Notes,
}

/// Arguments of `lsp_rename`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameRequest {
    #[serde(flatten)]
    pub at: PositionRequest,
    /// The new name.
    pub new_name: String,
    /// Apply the edits (default true); false only returns them.
    #[serde(default)]
    pub apply: Option<bool>,
}

/// One file's part of a rename.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct RenamedFile {
    #[serde(flatten)]
    pub edits: FileEdits,
    /// The file's version after the rename was written (absent when not applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// What `lsp_rename` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct RenameResult {
    pub files: Vec<RenamedFile>,
    /// Whether every file was written.
    pub applied: bool,
    /// Files that changed after the server computed the edits: found before writing, nothing
    /// is written; found while writing (changed in between), the files written before it are
    /// put back. Call again.
    pub conflicts: Vec<String>,
    #[serde(flatten)]
    pub notes: Notes,
}

impl Lsp {
    /// The language tools of the world `fs` and `subprocess` serve, with `config`'s servers.
    pub fn new(
        fs: Arc<dyn FsProvider>,
        subprocess: Arc<dyn SubprocessProvider>,
        config: LspConfig,
    ) -> Lsp {
        Lsp {
            servers: Servers::new(fs, subprocess, config),
            question_wait_ms: AtomicU64::new(millis(QUESTION_WAIT)),
        }
    }

    /// How long a question waits in all (default [`QUESTION_WAIT`]), clamped into
    /// 1 ms ..= 600 s. Questions already asked keep theirs.
    pub fn set_question_wait(&self, wait: Duration) {
        self.question_wait_ms.store(
            millis(wait).clamp(1, millis(MAX_QUESTION_WAIT)),
            Ordering::Relaxed,
        );
    }

    fn question_wait(&self) -> Duration {
        Duration::from_millis(self.question_wait_ms.load(Ordering::Relaxed))
    }

    /// `question` bounded by the question wait; past it a `Timeout` naming `op` that says what
    /// goes on. Dropping the question drops only its waits: a server's start runs on a task of
    /// its own ([`Servers::acquire`]), and a request dropped in flight is cancelled
    /// (`$/cancelRequest`).
    async fn bounded<T>(&self, op: &str, question: impl Future<Output = Result<T>>) -> Result<T> {
        let wait = self.question_wait();
        tokio::time::timeout(wait, question)
            .await
            .unwrap_or_else(|_| {
                Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "{op}: no answer within {:.1} s; the language server goes on starting or \
                         indexing, so the same question asked again finds it further along",
                        wait.as_secs_f64()
                    ),
                ))
            })
    }

    /// The server for `path`, with `path` sent as the world has it; (server, absolute path,
    /// version sent). A server not ready within `limit` (still starting: `initialize` not
    /// answered, or in its backoff) is a `Timeout`; its start goes on, for the next question.
    async fn open(
        &self,
        op: &str,
        path: &str,
        limit: Option<Duration>,
    ) -> Result<(Acquired, String, String)> {
        let (absolute, language, language_id) = self.servers.document(op, path).await?;
        let root = self.servers.root_of(&absolute, language).await;
        let acquiring = self.servers.acquire(language, &root);
        let acquired = match limit {
            None => acquiring.await,
            Some(limit) => tokio::time::timeout(limit, acquiring)
                .await
                .unwrap_or_else(|_| {
                    Err(Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "language server {} for {root} was not ready within {} s (it has \
                             not answered initialize; its start goes on, for the next call)",
                            language.command[0],
                            limit.as_secs_f64()
                        ),
                    ))
                }),
        }
        .map_err(|e| e.context(op))?;
        let version = self
            .servers
            .sync(&acquired.running, &absolute, &language_id)
            .await
            .map_err(|e| e.context(op))?;
        Ok((acquired, absolute, version.0))
    }

    /// The diagnostics of `path` as the world has it now: the server's analysis of exactly that
    /// version, waited for.
    pub async fn lsp_diagnostics(&self, request: DiagnosticsRequest) -> Result<DiagnosticsResult> {
        let op = format!("lsp_diagnostics {}", request.path);
        let timeout = match request.timeout_secs {
            None => DIAGNOSTICS_TIMEOUT,
            Some(secs) if (1..=MAX_TIMEOUT_SECS).contains(&secs) => Duration::from_secs(secs),
            Some(secs) => {
                return Err(Error::invalid_input(format!(
                    "{op}: timeout_secs {secs} is not 1 to {MAX_TIMEOUT_SECS}"
                )));
            }
        };
        let place = self
            .servers
            .fs()
            .resolve(&request.path, None)
            .await
            .map_err(|e| e.context(&op))?
            .path;
        let is_dir = self
            .servers
            .fs()
            .stat(&place)
            .await
            .is_ok_and(|m| m.kind == dsh_plugin_api::fs::FileKind::Directory);
        if !is_dir {
            let analysis = self.file_diagnostics(&op, &request.path, timeout).await?;
            let diagnostics = analysis.items();
            return Ok(DiagnosticsResult::of(
                place,
                Some(analysis.version),
                1,
                false,
                diagnostics,
                analysis.notice,
            ));
        }
        let started = Instant::now();
        let (files, truncated) = self.servers.files_under(&place, MAX_DIAGNOSED_FILES).await;
        let calls: Vec<_> = files
            .iter()
            .map(|file| self.file_diagnostics(&op, file, timeout))
            .collect();
        // The first failure ends the call: the files after it are not waited for.
        let mut per_file: Vec<FileAnalysis> = futures::stream::iter(calls)
            .buffered(DIAGNOSED_AT_ONCE)
            .try_collect()
            .await?;
        // A server given several documents at once may publish a document's version first
        // empty and then in full (pyright does, about 0.2 s apart): once every file has its
        // first publish, each server is let settle (bounded by what is left of the timeout)
        // and every file's latest publish is taken.
        let mut settled: Vec<Arc<Running>> = Vec::new();
        for analysis in &per_file {
            if !settled
                .iter()
                .any(|done| Arc::ptr_eq(done, &analysis.running))
            {
                settled.push(Arc::clone(&analysis.running));
                let left = timeout.saturating_sub(started.elapsed());
                let _ = analysis.running.server.settle(&analysis.path, left).await;
            }
        }
        for analysis in &mut per_file {
            analysis.found = analysis.running.server.published(&analysis.path);
        }
        let mut diagnostics = Vec::new();
        let mut notices = Vec::new();
        for analysis in per_file {
            diagnostics.extend(analysis.items());
            notices.extend(analysis.notice);
        }
        let notice = (!notices.is_empty()).then(|| notices.join("; "));
        Ok(DiagnosticsResult::of(
            place,
            None,
            files.len(),
            truncated,
            diagnostics,
            notice,
        ))
    }

    /// The diagnostics of file `path` as the world has it now, its version, and a restart notice;
    /// within `timeout` in all, the server's start included.
    async fn file_diagnostics(
        &self,
        op: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<FileAnalysis> {
        let started = Instant::now();
        let (acquired, path, version) = self.open(op, path, Some(timeout)).await?;
        let found = acquired
            .running
            .server
            .diagnostics(&path, timeout.saturating_sub(started.elapsed()))
            .await
            .map_err(|e| e.context(op))?;
        Ok(FileAnalysis {
            running: acquired.running,
            path,
            version,
            notice: acquired.notice,
            found,
        })
    }

    /// The position `request` names in the open document `path`.
    async fn position(
        &self,
        op: &str,
        acquired: &Acquired,
        path: &str,
        request: &PositionRequest,
    ) -> Result<TextPosition> {
        match (&request.symbol, request.line, request.column) {
            (Some(symbol), None, None) => acquired
                .running
                .server
                .position_of(path, symbol)
                .await
                .map_err(|e| e.context(op)),
            (None, Some(line), Some(column)) => Ok(TextPosition { line, column }),
            _ => Err(Error::invalid_input(format!(
                "{op}: give line and column, or symbol"
            ))),
        }
    }

    /// Waits for the server to have analysed `path` and ended its indexing (bounded); what it
    /// is still doing if not.
    async fn settled(&self, acquired: &Acquired, path: &str) -> Option<String> {
        let wait = INDEXING_WAIT.min(self.question_wait() * 2 / 3);
        acquired
            .running
            .server
            .settle(path, wait)
            .await
            .map(|titles| {
                format!(
                    "the server was still working ({}) after {:.1} s: the answer may be incomplete",
                    titles.join(", "),
                    wait.as_secs_f64()
                )
            })
    }

    /// What a question about a position needs: the server for `request`'s file with the file
    /// sent, settled (bounded), and the position asked about; the absolute path; the notes.
    async fn asked(
        &self,
        op: &str,
        request: &PositionRequest,
    ) -> Result<(Arc<super::servers::Running>, String, TextPosition, Notes)> {
        let (acquired, path, _) = self.open(op, &request.path, None).await?;
        let indexing = self.settled(&acquired, &path).await;
        let at = self.position(op, &acquired, &path, request).await?;
        let notes = Notes {
            indexing,
            notice: acquired.notice,
        };
        Ok((acquired.running, path, at, notes))
    }

    /// Where the symbol at a position (or named) is defined.
    pub async fn lsp_definition(&self, request: PositionRequest) -> Result<LocationsResult> {
        let op = format!("lsp_definition {}", request.path);
        self.bounded(&op, async {
            let (server, path, at, notes) = self.asked(&op, &request).await?;
            let locations = server.server.definition(&path, at).await?;
            Ok(LocationsResult { locations, notes })
        })
        .await
    }

    /// Every reference to the symbol at a position (or named), across the workspace.
    pub async fn lsp_references(&self, request: ReferencesRequest) -> Result<LocationsResult> {
        let op = format!("lsp_references {}", request.at.path);
        self.bounded(&op, async {
            let (server, path, at, notes) = self.asked(&op, &request.at).await?;
            let locations = server
                .server
                .references(&path, at, request.include_declaration.unwrap_or(true))
                .await?;
            Ok(LocationsResult { locations, notes })
        })
        .await
    }

    /// What the server says of the symbol at a position (or named).
    pub async fn lsp_hover(&self, request: PositionRequest) -> Result<HoverResult> {
        let op = format!("lsp_hover {}", request.path);
        self.bounded(&op, async {
            let (server, path, at, notes) = self.asked(&op, &request).await?;
            let text = server.server.hover(&path, at).await?;
            Ok(HoverResult { text, notes })
        })
        .await
    }

    /// A file's symbols, or the workspace's symbols matching a query.
    pub async fn lsp_symbols(&self, request: SymbolsRequest) -> Result<SymbolsResult> {
        self.bounded("lsp_symbols", self.symbols(request)).await
    }

    async fn symbols(&self, request: SymbolsRequest) -> Result<SymbolsResult> {
        let op = "lsp_symbols";
        match (&request.query, &request.path) {
            (None, None) => Err(Error::invalid_input(format!(
                "{op}: give a path (its symbols) or a query (the workspace's)"
            ))),
            (None, Some(path)) => {
                let (acquired, path, _) = self.open(op, path, None).await?;
                let indexing = self.settled(&acquired, &path).await;
                let symbols = acquired.running.server.document_symbols(&path).await?;
                Ok(SymbolsResult {
                    symbols,
                    notes: Notes {
                        indexing,
                        notice: acquired.notice,
                    },
                })
            }
            (Some(query), path) => {
                let place = self
                    .servers
                    .fs()
                    .resolve(path.as_deref().unwrap_or("."), None)
                    .await
                    .map_err(|e| e.context(op))?
                    .path;
                let is_file = self
                    .servers
                    .fs()
                    .stat(&place)
                    .await
                    .is_ok_and(|m| m.kind == dsh_plugin_api::fs::FileKind::File);
                let located = self.servers.locate(op, &place).await;
                let (acquired, settle_on) = match (&request.language, located) {
                    // A file of the language: opened, as servers index from their open files.
                    (None, Ok(_)) if is_file => {
                        let (acquired, place, _) = self.open(op, &place, None).await?;
                        (acquired, place)
                    }
                    (language, located) => {
                        let language = match (language, located) {
                            (Some(name), _) => self.servers.language(op, name)?,
                            (None, Ok((_, language, _))) => language,
                            (None, Err(_)) => {
                                return Err(Error::invalid_input(format!(
                                    "{op}: say which language to search (language), or give a \
                                     file of it as path"
                                )));
                            }
                        };
                        let root = self.servers.root_of(&place, language).await;
                        let acquired = self
                            .servers
                            .acquire(language, &root)
                            .await
                            .map_err(|e| e.context(op))?;
                        (acquired, place)
                    }
                };
                let mut indexing = self.settled(&acquired, &settle_on).await;
                let server = &acquired.running.server;
                let mut symbols = server.workspace_symbols(query).await?;
                // A young server that finds nothing may not have found its files yet (pyright
                // reports no progress while it discovers them): asked again until it finds
                // something or is old enough to be believed.
                while symbols.is_empty() && server.age() < EMPTY_PATIENCE {
                    tokio::time::sleep(EMPTY_RETRY).await;
                    symbols = server.workspace_symbols(query).await?;
                }
                if symbols.is_empty() && indexing.is_none() && server.age() < INDEXING_WAIT {
                    indexing = Some(format!(
                        "the server started {} s ago and found nothing yet: it may still be \
                         reading the workspace",
                        server.age().as_secs()
                    ));
                }
                Ok(SymbolsResult {
                    symbols,
                    notes: Notes {
                        indexing,
                        notice: acquired.notice,
                    },
                })
            }
        }
    }

    /// Renames the symbol at a position (or named) across the workspace: the server's edits,
    /// written through the `fs` seam — only if every file is still the text the edits were
    /// computed against (else nothing is written and the conflicts are named), each written
    /// guarded by the version read, all or nothing: should a write fail, the files written
    /// before it are put back (`files::commit`); a file that changed meanwhile is then a
    /// conflict, any other failure the call's error, saying what was put back.
    pub async fn lsp_rename(&self, request: RenameRequest) -> Result<RenameResult> {
        let op = format!("lsp_rename {} to {:?}", request.at.path, request.new_name);
        if request.new_name.is_empty() {
            return Err(Error::invalid_input(format!("{op}: new_name is empty")));
        }
        // Bounded up to the edits computed, never while they are written.
        let (planned, notes) = self
            .bounded(&op, async {
                let (server, path, at, notes) = self.asked(&op, &request.at).await?;
                let planned = server.server.rename(&path, at, &request.new_name).await?;
                Ok((planned, notes))
            })
            .await?;
        let fs = self.servers.fs();
        // Every file read first: each must still be the text the edits were computed against
        // (else it changed meanwhile: a conflict, and nothing is written at all).
        let mut changes = Vec::with_capacity(planned.len());
        let mut conflicts = Vec::new();
        for (file, computed_on) in &planned {
            let current = fs.read_text(&file.path).await.map_err(|e| e.context(&op))?;
            if current.text.as_str() != computed_on {
                conflicts.push(file.path.clone());
                continue;
            }
            let text = apply_edits(computed_on, &file.edits)
                .map_err(|e| Error::new(ErrorKind::Remote, format!("{op}: {}: {e}", file.path)))?;
            changes.push(FileChange {
                path: file.path.clone(),
                base: current.version,
                original: computed_on.clone(),
                text,
            });
        }
        let apply = request.apply.unwrap_or(true) && conflicts.is_empty();
        let mut versions = Vec::new();
        if apply {
            // All or nothing: a file changed between the read above and its write is a
            // conflict too, and the files written before it are put back.
            match commit(fs.clone(), changes).await.1 {
                Ok(written) => versions = written,
                Err(failed)
                    if failed.error.kind() == ErrorKind::Conflict && failed.all_restored() =>
                {
                    conflicts.push(planned[failed.index].0.path.clone());
                }
                Err(failed) => return Err(failed.explain(|err| err.context(&op))),
            }
        }
        let mut versions = versions.into_iter();
        let files = planned
            .into_iter()
            .map(|(file, _)| RenamedFile {
                edits: file,
                version: versions.next().map(|version| version.0),
            })
            .collect();
        Ok(RenameResult {
            applied: apply && conflicts.is_empty(),
            files,
            conflicts,
            // Renames are not settled-or-incomplete answers: the edits are all the server gave.
            notes: Notes {
                indexing: None,
                notice: notes.notice,
            },
        })
    }

    /// The running servers' process ids.
    pub async fn server_pids(&self) -> Vec<u32> {
        self.servers.pids().await
    }

    /// Shuts every server down (each process group proven gone, a start in progress ended at
    /// once); the failures. Later questions fail as closed.
    pub async fn shutdown(&self) -> Vec<Error> {
        self.servers.shutdown().await
    }
}

/// `text` with `edits` (sorted, not overlapping; 1-based lines, character columns) applied.
fn apply_edits(
    text: &str,
    edits: &[super::server::TextEdit],
) -> std::result::Result<String, String> {
    // Character offset → byte offset, per line.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(at, _)| at + 1))
        .collect();
    let offset = |p: TextPosition| -> std::result::Result<usize, String> {
        let index = (p.line as usize).saturating_sub(1);
        // The position just past a last line without a newline is the end of the text.
        if index == line_starts.len() && p.column <= 1 {
            return Ok(text.len());
        }
        let start = *line_starts
            .get(index)
            .ok_or_else(|| format!("line {} is past the end", p.line))?;
        let line = &text[start..];
        let line = &line[..line.find('\n').unwrap_or(line.len())];
        let column = (p.column as usize).saturating_sub(1);
        Ok(start
            + line
                .char_indices()
                .nth(column)
                .map_or(line.len(), |(at, _)| at))
    };
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for edit in edits {
        let (start, end) = (offset(edit.start)?, offset(edit.end)?);
        if start < done || end < start {
            return Err("the edits overlap".to_owned());
        }
        out.push_str(&text[done..start]);
        out.push_str(&edit.new_text);
        done = end;
    }
    out.push_str(&text[done..]);
    Ok(out)
}

fn severity_name(severity: Option<DiagnosticSeverity>) -> &'static str {
    match severity {
        Some(DiagnosticSeverity::WARNING) => "warning",
        Some(DiagnosticSeverity::INFORMATION) => "information",
        Some(DiagnosticSeverity::HINT) => "hint",
        _ => "error",
    }
}

fn location_line(location: &Location) -> String {
    format!(
        "{}:{}:{}",
        location.path, location.start.line, location.start.column
    )
}

fn with_notes(mut text: String, notes: &Notes) -> String {
    for note in [&notes.indexing, &notes.notice].into_iter().flatten() {
        text.push_str(&format!("\n({note})"));
    }
    text
}

impl DiagnosticsResult {
    fn of(
        path: String,
        version: Option<String>,
        files: usize,
        truncated: bool,
        diagnostics: Vec<DiagnosticItem>,
        notice: Option<String>,
    ) -> DiagnosticsResult {
        DiagnosticsResult {
            errors: diagnostics.iter().filter(|d| d.severity == "error").count(),
            warnings: diagnostics
                .iter()
                .filter(|d| d.severity == "warning")
                .count(),
            path,
            version,
            files,
            truncated,
            diagnostics,
            notes: Notes {
                indexing: None,
                notice,
            },
        }
    }
}

impl Outcome for DiagnosticsResult {
    fn text(&self) -> String {
        let what = match &self.version {
            Some(version) => format!("{} (version {version})", self.path),
            None => format!(
                "{} ({} files{})",
                self.path,
                self.files,
                if self.truncated {
                    ", more not analysed"
                } else {
                    ""
                }
            ),
        };
        let mut text = format!("{what}: {} errors, {} warnings", self.errors, self.warnings);
        for d in &self.diagnostics {
            text.push_str(&format!(
                "\n{}:{}:{}: {}: {}",
                d.path, d.start.line, d.start.column, d.severity, d.message
            ));
        }
        with_notes(text, &self.notes)
    }
}

impl Outcome for LocationsResult {
    fn text(&self) -> String {
        let text = if self.locations.is_empty() {
            "no locations".to_owned()
        } else {
            self.locations
                .iter()
                .map(location_line)
                .collect::<Vec<_>>()
                .join("\n")
        };
        with_notes(text, &self.notes)
    }
}

impl Outcome for HoverResult {
    fn text(&self) -> String {
        let text = self
            .text
            .clone()
            .unwrap_or_else(|| "the server says nothing there".to_owned());
        with_notes(text, &self.notes)
    }
}

impl Outcome for SymbolsResult {
    fn text(&self) -> String {
        let text = if self.symbols.is_empty() {
            "no symbols".to_owned()
        } else {
            self.symbols
                .iter()
                .map(|s| {
                    let name = match &s.container {
                        Some(container) => format!("{container}::{}", s.name),
                        None => s.name.clone(),
                    };
                    format!("{} {name} {}", s.kind, location_line(&s.location))
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        with_notes(text, &self.notes)
    }
}

impl Outcome for RenameResult {
    fn text(&self) -> String {
        let edits: usize = self.files.iter().map(|f| f.edits.edits.len()).sum();
        let mut text = format!(
            "{} edits in {} files{}",
            edits,
            self.files.len(),
            if self.applied {
                ", applied"
            } else {
                ", not applied"
            }
        );
        for file in &self.files {
            text.push_str(&format!(
                "\n{}: {} edits",
                file.edits.path,
                file.edits.edits.len()
            ));
        }
        if !self.conflicts.is_empty() {
            text.push_str(&format!(
                "\nchanged since the server read them: {}",
                self.conflicts.join(", ")
            ));
        }
        with_notes(text, &self.notes)
    }
}

/// `duration` in whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::server::TextEdit;
    use super::*;

    #[test]
    fn edits_apply_by_character_columns() {
        let at = |line, column| TextPosition { line, column };
        let edit = |start, end, new: &str| TextEdit {
            start,
            end,
            new_text: new.to_owned(),
        };
        let text = "let é = 1;\nprint(é, é)\n";
        let renamed = apply_edits(
            text,
            &[
                edit(at(1, 5), at(1, 6), "café"),
                edit(at(2, 7), at(2, 8), "café"),
                edit(at(2, 10), at(2, 11), "café"),
            ],
        )
        .unwrap();
        assert_eq!(renamed, "let café = 1;\nprint(café, café)\n");
        assert!(apply_edits(text, &[edit(at(9, 1), at(9, 2), "x")]).is_err());
        // Just past a last line without a newline: the end of the text.
        assert_eq!(
            apply_edits("a\nb", &[edit(at(2, 2), at(3, 1), "c")]).unwrap(),
            "a\nbc"
        );
        assert!(
            apply_edits(
                text,
                &[edit(at(1, 5), at(1, 8), "a"), edit(at(1, 6), at(1, 7), "b")]
            )
            .is_err()
        );
    }
}
