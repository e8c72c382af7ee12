//! One language server running in the world: started through the `subprocess` seam (stdin and
//! stdout piped, stderr's tail kept for the error that explains a crash), initialized for one
//! workspace root, fed documents by full text with increasing versions, and asked for the
//! diagnostics of the version just sent — waited for, never read after a fixed sleep.
//!
//! **Runtime.** Everything runs on the caller's tokio runtime; a task follows the server's
//! notifications. **End.** [`LanguageServer::shutdown`] asks the server to shut down and exit,
//! then terminates its whole process group (the seam's ladder); dropping a `LanguageServer`
//! without it closes the server's stdin (a conforming server exits) and leaves the group to the
//! seam's own disposal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dsh_plugin_api::fs::{FsProvider, ReadManyLimits};
use dsh_plugin_api::subprocess::{OutputMode, Process, SpawnSpec, StdinMode, SubprocessProvider};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_provider_kit::uri::{file_path, file_uri};
use dsh_provider_kit::world;
use futures::StreamExt;
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Exit, Initialized,
};
use lsp_types::request::{
    DocumentSymbolRequest, GotoDefinition, HoverRequest, Initialize, References, Rename, Shutdown,
    WorkspaceSymbolRequest,
};
use lsp_types::{
    ClientCapabilities, Diagnostic, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DocumentChanges, DocumentSymbolResponse, GotoDefinitionResponse,
    HoverContents, InitializeParams, MarkedString, OneOf, PublishDiagnosticsClientCapabilities,
    PublishDiagnosticsParams, Range, ServerCapabilities, TextDocumentClientCapabilities,
    TextDocumentContentChangeEvent, TextDocumentIdentifier, TextDocumentItem,
    TextDocumentSyncClientCapabilities, Uri, VersionedTextDocumentIdentifier,
    WindowClientCapabilities, WorkspaceFolder,
};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::io::StreamReader;
use tokio_util::sync::CancellationToken;

use super::position::{Encoding, TextPosition, from_lsp, to_lsp};
use super::rpc::{Notification, RpcClient, RpcError};
use super::servers::MAX_DOCUMENT_BYTES;
use crate::commands::until_proven_gone;

/// How long a server has to answer `initialize` (a cold start may index first).
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `shutdown` waits for the server before ending its group.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How many files named by one answer are read in one `read_many`.
const READ_BATCH: usize = 128;
/// How long a question to a server may take (the request is cancelled after it).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The shortest wait for more of a document's diagnostics from a server that publishes them
/// without versions ([`LanguageServer::diagnostics`]).
pub const PARTS_WINDOW: Duration = Duration::from_millis(300);
/// How long a server must have said nothing to count as idle ([`LanguageServer::settle`]).
pub const QUIET: Duration = Duration::from_millis(500);
/// How long after its start a server is busy at least (it reads its project before it says so).
pub const WARM_UP: Duration = Duration::from_secs(1);
/// How long a progress token the server created counts as work before it begins it
/// ([`track_created`]).
const CREATED_WORK_GRACE: Duration = Duration::from_secs(10);
/// The stderr tail kept to explain a server that failed.
const STDERR_TAIL: usize = 16 << 10;

/// What to run, and for which workspace.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// The server's command line; `argv[0]` a name on the world's PATH or an absolute path.
    pub argv: Vec<String>,
    /// The workspace root: an absolute path in the world (the server's cwd too).
    pub root: String,
    /// The server's `initializationOptions`.
    pub initialization_options: Option<Value>,
}

/// What the server last published for one document.
#[derive(Debug, Clone, Default)]
struct Published {
    /// The document version the server said it analysed, if it says.
    version: Option<i32>,
    /// How many publishes there have been for the document (for servers that give no version).
    count: u64,
    diagnostics: Vec<Diagnostic>,
}

/// Work a server announced: a progress token it created (`window/workDoneProgress/create`) or
/// began (`$/progress` `begin`), not yet ended.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Work {
    /// The title it began with; "starting" while only created.
    title: String,
    /// Whether it began (a created token is work only for [`CREATED_WORK_GRACE`]).
    begun: bool,
}

/// A running, initialized language server.
pub struct LanguageServer {
    spec: ServerSpec,
    process: Arc<dyn Process>,
    rpc: RpcClient,
    capabilities: ServerCapabilities,
    /// By path: a server's URI is decoded, whichever characters it escapes.
    published: watch::Receiver<HashMap<String, Published>>,
    /// Work the server announced and has not ended (`$/progress`): token → what it is.
    progress: watch::Receiver<HashMap<String, Work>>,
    /// Set once the server's process has ended: how it ended.
    ended: watch::Receiver<Option<String>>,
    /// When the server last sent a notification (logs, diagnostics, progress).
    activity: watch::Receiver<Instant>,
    /// When its `initialize` was answered.
    started: Instant,
    /// When it was last given work (a document, changed files): it may take a moment to say
    /// it started on it.
    last_sent: Mutex<Instant>,
    /// Open documents by path.
    open: Mutex<HashMap<String, OpenDocument>>,
    /// How the server counts columns.
    encoding: Encoding,
    /// Reads files the server names that are not open (to turn its positions into columns).
    fs: Arc<dyn FsProvider>,
}

/// A document sent to the server.
#[derive(Debug)]
struct OpenDocument {
    version: i32,
    /// Publishes seen for it when this version was sent.
    seen: u64,
    text: String,
}

impl std::fmt::Debug for LanguageServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanguageServer")
            .field("argv", &self.spec.argv)
            .field("root", &self.spec.root)
            .field("pid", &self.process.pid())
            .finish_non_exhaustive()
    }
}

impl LanguageServer {
    /// Starts `spec`'s server in the world `subprocess` serves and completes the `initialize`
    /// handshake; `fs` (the same world's) reads the files the server names. A server that
    /// cannot be started, exits, or does not answer within a minute is an error naming it (with
    /// its stderr's last lines); its group is ended. So it is, at once, when `closing` is
    /// cancelled before the answer (a `Closed` error): the tools shutting down do not wait for
    /// a server that may never answer.
    pub async fn start(
        subprocess: &dyn SubprocessProvider,
        fs: Arc<dyn FsProvider>,
        spec: ServerSpec,
        closing: &CancellationToken,
    ) -> Result<Self> {
        let name = spec.argv.first().cloned().unwrap_or_default();
        let op = format!("start language server {name}");
        if spec.argv.is_empty() || !spec.root.starts_with('/') {
            return Err(Error::invalid_input(format!(
                "{op}: a server needs a command and an absolute workspace root"
            )));
        }
        // Built before the server starts: nothing to end if the spec makes no request.
        let initialize = initialize_params(&spec)?;
        let mut command = SpawnSpec::new(spec.argv.clone());
        command.cwd = Some(spec.root.clone());
        command.stdin = StdinMode::Pipe;
        command.stdout = OutputMode::Pipe;
        command.stderr = OutputMode::Collect { limit: STDERR_TAIL };
        let process = subprocess
            .spawn(command)
            .await
            .map_err(|e| e.context(&op))?;
        let (stdin, stdout) = (process.take_stdin(), process.take_stdout());
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            let _ = until_proven_gone(|| process.terminate(SHUTDOWN_GRACE)).await;
            return Err(Error::new(
                ErrorKind::Io,
                format!("{op}: its pipes were not given"),
            ));
        };
        let reader = StreamReader::new(stdout.map(|chunk| chunk.map_err(std::io::Error::other)));
        let (rpc, notifications) = RpcClient::start(reader, stdin);
        let (published_tx, published) = watch::channel(HashMap::new());
        let (progress_tx, progress) = watch::channel(HashMap::new());
        let (activity_tx, activity) = watch::channel(Instant::now());
        tokio::spawn(follow(
            notifications,
            published_tx,
            progress_tx,
            activity_tx,
        ));
        let (ended_tx, ended) = watch::channel(None);
        tokio::spawn({
            let process = process.clone();
            async move {
                let how = match process.wait().await {
                    Ok(status) => format!("{status:?}"),
                    Err(err) => err.to_string(),
                };
                let _ = ended_tx.send(Some(how));
            }
        });

        let answer =
            tokio::time::timeout(INITIALIZE_TIMEOUT, rpc.request::<Initialize>(initialize));
        let initialized = tokio::select! {
            answer = answer => answer,
            () = closing.cancelled() => {
                let _ = until_proven_gone(|| process.terminate(SHUTDOWN_GRACE)).await;
                return Err(Error::closed(format!(
                    "{op}: the language tools were shut down before it answered initialize"
                )));
            }
        };
        let result = match initialized {
            Ok(Ok(result)) => result,
            failed => {
                let why = match failed {
                    Ok(Err(err)) => err.to_string(),
                    _ => format!("no answer to initialize within {INITIALIZE_TIMEOUT:?}"),
                };
                let stderr = stderr_tail(process.as_ref()).await;
                let _ = until_proven_gone(|| process.terminate(SHUTDOWN_GRACE)).await;
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("{op}: {why}{stderr}"),
                ));
            }
        };
        if let Err(err) = rpc.notify::<Initialized>(lsp_types::InitializedParams {}) {
            let _ = until_proven_gone(|| process.terminate(SHUTDOWN_GRACE)).await;
            return Err(rpc_error(&op, err));
        }
        Ok(LanguageServer {
            spec,
            process,
            rpc,
            encoding: Encoding::of(result.capabilities.position_encoding.as_ref()),
            capabilities: result.capabilities,
            published,
            progress,
            ended,
            activity,
            started: Instant::now(),
            last_sent: Mutex::new(Instant::now()),
            open: Mutex::new(HashMap::new()),
            fs,
        })
    }

    /// The server's process id (its process group's too).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// What the server said it can do.
    pub fn capabilities(&self) -> &ServerCapabilities {
        &self.capabilities
    }

    /// How long ago the server answered `initialize`.
    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }

    /// How the server's process ended, or why the connection to it did (`None` while both
    /// last).
    pub fn ended(&self) -> Option<String> {
        self.ended.borrow().clone().or_else(|| self.rpc.closed())
    }

    /// Waits (up to `limit`) until the server has published its analysis of the version of
    /// `path` last sent (if `path` is open), then until it is idle: no work in progress it
    /// announced (`$/progress`: indexing, loading a project, analysing the files given — from the
    /// moment it creates the token, as its `begin` can come after the work's first results),
    /// nothing said — nor given to it — for [`QUIET`], and at least [`WARM_UP`] since it
    /// started: servers that report no progress (pyright discovering its files) are busy while
    /// they talk, and one just sent a document may not have said yet that it is loading its
    /// project. `None` once idle, else what it is still doing.
    pub async fn settle(&self, path: &str, limit: Duration) -> Option<Vec<String>> {
        let deadline = tokio::time::Instant::now() + limit;
        // A server has loaded what it needs for a document once it published its analysis.
        let pending = self
            .open
            .lock()
            .expect("open documents lock")
            .get(path)
            .map(|d| (d.version, d.seen));
        if let Some((version, seen)) = pending {
            let mut published = self.published.clone();
            let analysed = |all: &HashMap<String, Published>| current(all, path, version, seen);
            let waited = tokio::time::timeout_at(deadline, published.wait_for(analysed)).await;
            if waited.is_err() {
                return Some(vec![format!("{path} not analysed yet")]);
            }
        }
        let mut progress = self.progress.clone();
        loop {
            if tokio::time::timeout_at(deadline, progress.wait_for(HashMap::is_empty))
                .await
                .is_err()
            {
                return Some(
                    self.progress
                        .borrow()
                        .values()
                        .map(|work| work.title.clone())
                        .collect(),
                );
            }
            let last = (*self.activity.borrow()).max(*self.last_sent.lock().expect("sent lock"));
            let idle_at = (last + QUIET).max(self.started + WARM_UP);
            let now = Instant::now();
            if now >= idle_at {
                return None;
            }
            let idle_at = tokio::time::Instant::now() + (idle_at - now);
            if idle_at > deadline {
                return Some(vec!["still talking".to_owned()]);
            }
            tokio::time::sleep_until(idle_at).await;
        }
    }

    /// Sends `text` as the whole content of document `path` (opened on first use, as
    /// `language_id`); returns the version it now has.
    pub fn update(&self, path: &str, language_id: &str, text: String) -> Result<i32> {
        let op = format!("send document {path} to the language server");
        let uri = uri_of(path)?;
        let seen = self.published.borrow().get(path).map_or(0, |p| p.count);
        let mut open = self.open.lock().expect("open documents lock");
        let version = match open.get(path) {
            None => {
                self.rpc
                    .notify::<DidOpenTextDocument>(DidOpenTextDocumentParams {
                        text_document: TextDocumentItem {
                            uri,
                            language_id: language_id.to_owned(),
                            version: 1,
                            text: text.clone(),
                        },
                    })
                    .map_err(|e| rpc_error(&op, e))?;
                1
            }
            Some(document) => {
                let version = document.version + 1;
                self.rpc
                    .notify::<DidChangeTextDocument>(DidChangeTextDocumentParams {
                        text_document: VersionedTextDocumentIdentifier { uri, version },
                        content_changes: vec![TextDocumentContentChangeEvent {
                            range: None,
                            range_length: None,
                            text: text.clone(),
                        }],
                    })
                    .map_err(|e| rpc_error(&op, e))?;
                version
            }
        };
        *self.last_sent.lock().expect("sent lock") = Instant::now();
        open.insert(
            path.to_owned(),
            OpenDocument {
                version,
                seen,
                text,
            },
        );
        Ok(version)
    }

    /// Tells the server that files it has not open were created, changed or deleted (paths
    /// absolute).
    pub fn files_changed(&self, changes: Vec<(String, lsp_types::FileChangeType)>) -> Result<()> {
        let mut events = Vec::with_capacity(changes.len());
        for (path, kind) in changes {
            events.push(lsp_types::FileEvent {
                uri: uri_of(&path)?,
                typ: kind,
            });
        }
        *self.last_sent.lock().expect("sent lock") = Instant::now();
        self.rpc
            .notify::<lsp_types::notification::DidChangeWatchedFiles>(
                lsp_types::DidChangeWatchedFilesParams { changes: events },
            )
            .map_err(|e| rpc_error("report changed files to the language server", e))
    }

    /// The text last sent for open document `path`, if it is open.
    pub fn sent_text(&self, path: &str) -> Option<String> {
        self.open_text("", path).ok()
    }

    /// Closes document `path` if it is open.
    pub fn close(&self, path: &str) -> Result<()> {
        let uri = uri_of(path)?;
        if self
            .open
            .lock()
            .expect("open documents lock")
            .remove(path)
            .is_some()
        {
            self.rpc
                .notify::<DidCloseTextDocument>(DidCloseTextDocumentParams {
                    text_document: TextDocumentIdentifier { uri },
                })
                .map_err(|e| rpc_error(&format!("close document {path}"), e))?;
        }
        Ok(())
    }

    /// The diagnostics the server publishes for the version of `path` last sent: waits (up to
    /// `timeout`) for a publish of that version — or, from a server that gives no versions
    /// (typescript-language-server), the first publish after it was sent and then the ones
    /// that follow it closely ([`PARTS_WINDOW`]), as such servers publish a document in parts.
    /// `Timeout` if none comes; `NotFound` if `path` was never sent.
    pub async fn diagnostics(&self, path: &str, timeout: Duration) -> Result<Vec<Diagnostic>> {
        let op = format!("diagnostics of {path}");
        let (version, seen) = self
            .open
            .lock()
            .expect("open documents lock")
            .get(path)
            .map(|d| (d.version, d.seen))
            .ok_or_else(|| Error::not_found(format!("{op}: the document was never sent")))?;
        let mut published = self.published.clone();
        let analysed = |all: &HashMap<String, Published>| current(all, path, version, seen);
        let asked = Instant::now();
        // The watch's guard is released before anything else is awaited.
        let waited = tokio::time::timeout(timeout, published.wait_for(analysed))
            .await
            .map(|seen| {
                seen.map(|all| {
                    let p = all.get(path).cloned().unwrap_or_default();
                    (p.version.is_some(), p.count)
                })
            });
        match waited {
            Ok(Ok((true, _))) => Ok(self.published(path)),
            Ok(Ok((false, mut count))) => {
                // A server that gives no versions may publish a document in parts (syntax, then
                // types): later publishes are awaited while they keep coming, each within a
                // window as long as the first took (at least [`PARTS_WINDOW`]).
                let window = asked.elapsed().max(PARTS_WINDOW);
                loop {
                    let more = tokio::time::timeout(
                        window,
                        published.wait_for(|all| all.get(path).is_some_and(|p| p.count > count)),
                    )
                    .await;
                    match more {
                        Ok(Ok(all)) => {
                            count = all.get(path).map_or(count, |p| p.count);
                        }
                        _ => return Ok(self.published(path)),
                    }
                }
            }
            Ok(Err(_)) => Err(Error::closed(format!(
                "{op}: the language server ended{}",
                stderr_tail(self.process.as_ref()).await
            ))),
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "{op}: the language server published none for version {version} within {timeout:?}"
                ),
            )),
        }
    }

    /// Where the symbol at `at` in open document `path` is defined.
    pub async fn definition(&self, path: &str, at: TextPosition) -> Result<Vec<Location>> {
        let op = format!("definition at {path}:{}:{}", at.line, at.column);
        self.require(&op, self.capabilities.definition_provider.is_some())?;
        let params = lsp_types::GotoDefinitionParams {
            text_document_position_params: self.position(&op, path, at)?,
            work_done_progress_params: Default::default(),
            partial_result_params: Default::default(),
        };
        let answer = self.ask::<GotoDefinition>(&op, params).await?;
        let targets: Vec<(Uri, Range)> = match answer {
            None => Vec::new(),
            Some(GotoDefinitionResponse::Scalar(l)) => vec![(l.uri, l.range)],
            Some(GotoDefinitionResponse::Array(ls)) => {
                ls.into_iter().map(|l| (l.uri, l.range)).collect()
            }
            Some(GotoDefinitionResponse::Link(links)) => links
                .into_iter()
                .map(|l| (l.target_uri, l.target_selection_range))
                .collect(),
        };
        self.locations(&op, targets).await
    }

    /// Every reference to the symbol at `at` in open document `path` (with its declaration
    /// when `include_declaration`).
    pub async fn references(
        &self,
        path: &str,
        at: TextPosition,
        include_declaration: bool,
    ) -> Result<Vec<Location>> {
        let op = format!("references at {path}:{}:{}", at.line, at.column);
        self.require(&op, self.capabilities.references_provider.is_some())?;
        let params = lsp_types::ReferenceParams {
            text_document_position: self.position(&op, path, at)?,
            context: lsp_types::ReferenceContext {
                include_declaration,
            },
            work_done_progress_params: Default::default(),
            partial_result_params: Default::default(),
        };
        let answer = self.ask::<References>(&op, params).await?;
        let targets = answer
            .unwrap_or_default()
            .into_iter()
            .map(|l| (l.uri, l.range))
            .collect();
        self.locations(&op, targets).await
    }

    /// What the server says of the symbol at `at` in open document `path`, as text (markdown
    /// when the server writes markdown); `None` when it says nothing.
    pub async fn hover(&self, path: &str, at: TextPosition) -> Result<Option<String>> {
        let op = format!("hover at {path}:{}:{}", at.line, at.column);
        self.require(&op, self.capabilities.hover_provider.is_some())?;
        let params = lsp_types::HoverParams {
            text_document_position_params: self.position(&op, path, at)?,
            work_done_progress_params: Default::default(),
        };
        let answer = self.ask::<HoverRequest>(&op, params).await?;
        let marked = |m: MarkedString| match m {
            MarkedString::String(text) => text,
            MarkedString::LanguageString(code) => {
                format!("```{}\n{}\n```", code.language, code.value)
            }
        };
        Ok(answer.map(|hover| match hover.contents {
            HoverContents::Scalar(m) => marked(m),
            HoverContents::Array(ms) => ms.into_iter().map(marked).collect::<Vec<_>>().join("\n\n"),
            HoverContents::Markup(markup) => markup.value,
        }))
    }

    /// The edits that rename the symbol at `at` in open document `path` to `new_name`, per file,
    /// each with the text its positions refer to (what was sent for an open document, else the
    /// file as read): not applied — the caller applies them through the `fs` seam, to that text
    /// only.
    pub async fn rename(
        &self,
        path: &str,
        at: TextPosition,
        new_name: &str,
    ) -> Result<Vec<(FileEdits, String)>> {
        let op = format!("rename at {path}:{}:{} to {new_name:?}", at.line, at.column);
        self.require(&op, self.capabilities.rename_provider.is_some())?;
        let params = lsp_types::RenameParams {
            text_document_position: self.position(&op, path, at)?,
            new_name: new_name.to_owned(),
            work_done_progress_params: Default::default(),
        };
        let answer = self.ask::<Rename>(&op, params).await?.unwrap_or_default();
        // `documentChanges` when the server gives them, else `changes`: a server may give both,
        // the same edits twice.
        let by_file: Vec<(Uri, Vec<lsp_types::TextEdit>)> = match answer.document_changes {
            None => answer.changes.unwrap_or_default().into_iter().collect(),
            Some(DocumentChanges::Edits(edits)) => edits
                .into_iter()
                .map(|e| {
                    let edits = e
                        .edits
                        .into_iter()
                        .map(|edit| match edit {
                            OneOf::Left(edit) => edit,
                            OneOf::Right(annotated) => annotated.text_edit,
                        })
                        .collect();
                    (e.text_document.uri, edits)
                })
                .collect(),
            Some(DocumentChanges::Operations(_)) => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("{op}: the server wants files created, renamed or deleted too"),
                ));
            }
        };
        let mut files = Vec::new();
        for (uri, edits) in by_file {
            let path = path_of(&uri)?;
            let text = self.text_of(&op, &path).await?;
            let mut edits: Vec<TextEdit> = edits
                .into_iter()
                .map(|edit| TextEdit {
                    start: from_lsp(&text, edit.range.start, self.encoding),
                    end: from_lsp(&text, edit.range.end, self.encoding),
                    new_text: edit.new_text,
                })
                .collect();
            edits.sort_by_key(|e| (e.start.line, e.start.column));
            files.push((FileEdits { path, edits }, text));
        }
        files.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        Ok(files)
    }

    /// Where the symbol named `name` is declared in open document `path` (its name's start), for
    /// callers that name a symbol rather than a position: `Container::name` picks one inside a
    /// container. `NotFound` (listing the document's symbols) when there is none, `Conflict`
    /// when several match.
    pub async fn position_of(&self, path: &str, name: &str) -> Result<TextPosition> {
        let op = format!("find symbol {name:?} in {path}");
        let (container, name) = match name.rsplit_once("::") {
            Some((container, name)) => (Some(container), name),
            None => (None, name),
        };
        let symbols = self
            .document_symbols(path)
            .await
            .map_err(|e| e.context(&op))?;
        let found: Vec<&Symbol> = symbols
            .iter()
            .filter(|s| {
                s.name == name && container.is_none_or(|c| s.container.as_deref() == Some(c))
            })
            .collect();
        match found.as_slice() {
            [one] => Ok(one.location.start),
            [] => Err(Error::not_found(format!(
                "{op}: no such symbol (the document has: {})",
                symbols
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            several => Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "{op}: {} symbols have that name (at lines {}); name one as Container::name or \
                     give a position",
                    several.len(),
                    several
                        .iter()
                        .map(|s| s.location.start.line.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    /// The symbols of open document `path`, outermost first, each with its container's name.
    pub async fn document_symbols(&self, path: &str) -> Result<Vec<Symbol>> {
        let op = format!("symbols of {path}");
        self.require(&op, self.capabilities.document_symbol_provider.is_some())?;
        let text = self.open_text(&op, path)?;
        let params = lsp_types::DocumentSymbolParams {
            text_document: TextDocumentIdentifier { uri: uri_of(path)? },
            work_done_progress_params: Default::default(),
            partial_result_params: Default::default(),
        };
        let answer = self.ask::<DocumentSymbolRequest>(&op, params).await?;
        let mut symbols = Vec::new();
        match answer {
            None => {}
            Some(DocumentSymbolResponse::Nested(nested)) => {
                let mut stack: Vec<(lsp_types::DocumentSymbol, Option<String>)> =
                    nested.into_iter().rev().map(|s| (s, None)).collect();
                while let Some((mut symbol, container)) = stack.pop() {
                    for child in symbol.children.take().unwrap_or_default().into_iter().rev() {
                        stack.push((child, Some(symbol.name.clone())));
                    }
                    symbols.push(Symbol {
                        kind: kind_name(symbol.kind),
                        location: Location {
                            path: path.to_owned(),
                            start: from_lsp(&text, symbol.selection_range.start, self.encoding),
                            end: from_lsp(&text, symbol.selection_range.end, self.encoding),
                        },
                        name: symbol.name,
                        container,
                    });
                }
            }
            #[allow(
                deprecated,
                reason = "`SymbolInformation::deprecated` is part of its shape"
            )]
            Some(DocumentSymbolResponse::Flat(flat)) => {
                // A flat symbol's range is its whole declaration: its name is found in it, and
                // a container the server leaves unnamed is the innermost declaration around it.
                let declared: Vec<(TextPosition, TextPosition)> = flat
                    .iter()
                    .map(|symbol| {
                        (
                            from_lsp(&text, symbol.location.range.start, self.encoding),
                            from_lsp(&text, symbol.location.range.end, self.encoding),
                        )
                    })
                    .collect();
                let key = |p: TextPosition| (p.line, p.column);
                let inside = |inner: &(TextPosition, TextPosition),
                              outer: &(TextPosition, TextPosition)| {
                    key(outer.0) <= key(inner.0) && key(inner.1) <= key(outer.1) && inner != outer
                };
                for (index, symbol) in flat.iter().enumerate() {
                    let (start, end) = name_within(&text, declared[index], &symbol.name);
                    let container = symbol
                        .container_name
                        .clone()
                        .filter(|c| !c.is_empty())
                        .or_else(|| {
                            (0..flat.len())
                                .filter(|&other| inside(&declared[index], &declared[other]))
                                .min_by_key(|&other| {
                                    (
                                        declared[other]
                                            .1
                                            .line
                                            .saturating_sub(declared[other].0.line),
                                        declared[other].1.column,
                                    )
                                })
                                .map(|other| flat[other].name.clone())
                        });
                    symbols.push(Symbol {
                        kind: kind_name(symbol.kind),
                        location: Location {
                            path: path.to_owned(),
                            start,
                            end,
                        },
                        name: symbol.name.clone(),
                        container,
                    });
                }
            }
        }
        Ok(symbols)
    }

    /// The symbols of the whole workspace whose names match `query` (the server's fuzzy match;
    /// empty: all it will list).
    pub async fn workspace_symbols(&self, query: &str) -> Result<Vec<Symbol>> {
        let op = format!("workspace symbols matching {query:?}");
        self.require(&op, self.capabilities.workspace_symbol_provider.is_some())?;
        let params = lsp_types::WorkspaceSymbolParams {
            query: query.to_owned(),
            work_done_progress_params: Default::default(),
            partial_result_params: Default::default(),
        };
        let answer = self.ask::<WorkspaceSymbolRequest>(&op, params).await?;
        // (symbol, where its declaration is; a range only if the server gives one).
        let found: Vec<(lsp_types::WorkspaceSymbol, Uri, Option<Range>)> = match answer {
            None => Vec::new(),
            #[allow(
                deprecated,
                reason = "`SymbolInformation::deprecated` is part of its shape"
            )]
            Some(lsp_types::WorkspaceSymbolResponse::Flat(flat)) => flat
                .into_iter()
                .map(|s| {
                    let (uri, range) = (s.location.uri.clone(), s.location.range);
                    let symbol = lsp_types::WorkspaceSymbol {
                        name: s.name,
                        kind: s.kind,
                        tags: s.tags,
                        container_name: s.container_name,
                        location: OneOf::Left(s.location),
                        data: None,
                    };
                    (symbol, uri, Some(range))
                })
                .collect(),
            Some(lsp_types::WorkspaceSymbolResponse::Nested(nested)) => nested
                .into_iter()
                .map(|s| {
                    let (uri, range) = match &s.location {
                        OneOf::Left(location) => (location.uri.clone(), Some(location.range)),
                        OneOf::Right(location) => (location.uri.clone(), None),
                    };
                    (s, uri, range)
                })
                .collect(),
        };
        let found: Vec<_> = found
            .into_iter()
            .map(|(symbol, uri, range)| Ok((symbol, path_of(&uri)?, range)))
            .collect::<Result<_>>()?;
        let paths: Vec<String> = found.iter().map(|(_, path, _)| path.clone()).collect();
        let texts = self.texts_of(&op, &paths).await?;
        let mut symbols = Vec::with_capacity(found.len());
        for (symbol, path, range) in found {
            let text = texts[&path].as_str();
            let range = range.unwrap_or_default();
            let declared = (
                from_lsp(text, range.start, self.encoding),
                from_lsp(text, range.end, self.encoding),
            );
            let (start, end) = name_within(text, declared, &symbol.name);
            symbols.push(Symbol {
                kind: kind_name(symbol.kind),
                container: symbol.container_name.filter(|c| !c.is_empty()),
                name: symbol.name,
                location: Location { path, start, end },
            });
        }
        symbols.sort_by(|a, b| {
            (&a.location.path, a.location.start.line)
                .cmp(&(&b.location.path, b.location.start.line))
        });
        Ok(symbols)
    }

    /// Request `R`, its error naming `op`.
    async fn ask<R: lsp_types::request::Request>(
        &self,
        op: &str,
        params: R::Params,
    ) -> Result<R::Result> {
        // A wedged server must not hold a question forever.
        match tokio::time::timeout(REQUEST_TIMEOUT, self.rpc.request::<R>(params)).await {
            Ok(answer) => answer.map_err(|e| rpc_error(op, e)),
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "{op}: {} did not answer within {REQUEST_TIMEOUT:?}",
                    self.spec.argv[0]
                ),
            )),
        }
    }

    fn require(&self, op: &str, supported: bool) -> Result<()> {
        if supported {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Unsupported,
                format!("{op}: {} does not offer it", self.spec.argv[0]),
            ))
        }
    }

    /// The server's position `at` in open document `path` as a 1-based line and character
    /// column (`at` taken as is, 1-based, if `path` is not open).
    pub fn text_position(&self, path: &str, at: lsp_types::Position) -> TextPosition {
        match self.open_text("", path) {
            Ok(text) => from_lsp(&text, at, self.encoding),
            Err(_) => TextPosition {
                line: at.line.saturating_add(1),
                column: at.character.saturating_add(1),
            },
        }
    }

    /// The text last sent for `path` (`NotFound` if it was never sent).
    fn open_text(&self, op: &str, path: &str) -> Result<String> {
        self.open
            .lock()
            .expect("open documents lock")
            .get(path)
            .map(|d| d.text.clone())
            .ok_or_else(|| {
                Error::not_found(format!(
                    "{op}: {path} was never sent to the language server"
                ))
            })
    }

    /// `at` in open document `path`, as the server counts it.
    fn position(
        &self,
        op: &str,
        path: &str,
        at: TextPosition,
    ) -> Result<lsp_types::TextDocumentPositionParams> {
        let text = self.open_text(op, path)?;
        Ok(lsp_types::TextDocumentPositionParams {
            text_document: TextDocumentIdentifier { uri: uri_of(path)? },
            position: to_lsp(&text, at, self.encoding).map_err(|e| e.context(op))?,
        })
    }

    /// `path`'s text: as last sent if open, else as the world has it.
    async fn text_of(&self, op: &str, path: &str) -> Result<String> {
        if let Ok(text) = self.open_text(op, path) {
            return Ok(text);
        }
        let file = self.fs.read_text(path).await.map_err(|e| e.context(op))?;
        Ok(file.text.to_string())
    }

    /// The texts of `paths` (an answer may name one file many times): each open document's as
    /// last sent, the others as the world has them — read through the seam's `read_many`,
    /// [`READ_BATCH`] files a call (one round trip each where the provider has it natively, so
    /// references across 500 files in a remote world are a few round trips, not 500).
    async fn texts_of(&self, op: &str, paths: &[String]) -> Result<HashMap<String, String>> {
        let mut texts = HashMap::new();
        let mut unread = Vec::new();
        for path in paths {
            if texts.contains_key(path) {
                continue;
            }
            // Unread ones hold an empty text until their batch fills it in.
            let text = self.open_text(op, path).unwrap_or_else(|_| {
                unread.push(path.clone());
                String::new()
            });
            texts.insert(path.clone(), text);
        }
        for batch in unread.chunks(READ_BATCH) {
            let limits = ReadManyLimits {
                max_file_bytes: MAX_DOCUMENT_BYTES,
                max_total_bytes: MAX_DOCUMENT_BYTES * READ_BATCH as u64,
                beneath: None,
            };
            for item in world::read_many(&self.fs, batch.to_vec(), limits).await? {
                let file = item.result.map_err(|e| e.context(op))?;
                texts.insert(item.path, file.text.to_string());
            }
        }
        Ok(texts)
    }

    async fn locations(&self, op: &str, targets: Vec<(Uri, Range)>) -> Result<Vec<Location>> {
        let targets: Vec<(String, Range)> = targets
            .into_iter()
            .map(|(uri, range)| Ok((path_of(&uri)?, range)))
            .collect::<Result<_>>()?;
        let paths: Vec<String> = targets.iter().map(|(path, _)| path.clone()).collect();
        let texts = self.texts_of(op, &paths).await?;
        Ok(targets
            .into_iter()
            .map(|(path, range)| {
                let text = texts[&path].as_str();
                Location {
                    start: from_lsp(text, range.start, self.encoding),
                    end: from_lsp(text, range.end, self.encoding),
                    path,
                }
            })
            .collect())
    }

    /// Shuts the server down (`shutdown`, `exit`, up to 5 s to end by itself), then ends its
    /// whole process group. Succeeds once the group is proven empty; calls still waiting on the
    /// server then fail as closed.
    pub async fn shutdown(&self) -> Result<()> {
        let polite = async {
            if self.rpc.request::<Shutdown>(()).await.is_ok() {
                let _ = self.rpc.notify::<Exit>(());
            }
            let _ = self.process.wait().await;
        };
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, polite).await;
        until_proven_gone(|| self.process.terminate(SHUTDOWN_GRACE))
            .await
            .map_err(|e| e.context(format!("stop language server {}", self.spec.argv[0])))
    }
}

/// Keeps the latest diagnostics of each document, the work in progress and when the server last
/// said anything, until the server's notifications end.
async fn follow(
    mut notifications: tokio::sync::mpsc::UnboundedReceiver<Notification>,
    published: watch::Sender<HashMap<String, Published>>,
    progress: watch::Sender<HashMap<String, Work>>,
    activity: watch::Sender<Instant>,
) {
    while let Some(notification) = notifications.recv().await {
        activity.send_replace(Instant::now());
        if notification.method == "$/progress" {
            track_progress(&progress, &notification.params);
            continue;
        }
        if notification.method == "window/workDoneProgress/create" {
            track_created(&progress, &notification.params);
            continue;
        }
        if notification.method != "textDocument/publishDiagnostics" {
            continue;
        }
        let Ok(params) = serde_json::from_value::<PublishDiagnosticsParams>(notification.params)
        else {
            tracing::warn!("a language server published diagnostics that do not parse");
            continue;
        };
        let path = match path_of(&params.uri) {
            Ok(path) => path,
            Err(err) => {
                tracing::warn!("a language server published diagnostics for no path: {err}");
                continue;
            }
        };
        published.send_modify(|all| {
            let entry = all.entry(path).or_default();
            entry.version = params.version;
            entry.count += 1;
            entry.diagnostics = params.diagnostics;
        });
    }
}

impl LanguageServer {
    /// The diagnostics last published for document `path` (none if none were).
    pub fn published(&self, path: &str) -> Vec<Diagnostic> {
        self.published
            .borrow()
            .get(path)
            .map(|p| p.diagnostics.clone())
            .unwrap_or_default()
    }
}

/// Whether `all` holds the publish for version `version` of document `path` — or, from a server
/// that gives no versions, a publish after the `seen`th.
fn current(all: &HashMap<String, Published>, path: &str, version: i32, seen: u64) -> bool {
    // A later version counts: a server analysing a newer text publishes only for it.
    all.get(path).is_some_and(|p| match p.version {
        Some(v) => v >= version,
        None => p.count > seen,
    })
}

/// A progress token's value as a key (the protocol allows a string or an integer).
fn token_of(params: &Value) -> Option<String> {
    match params.get("token") {
        Some(Value::String(token)) => Some(token.clone()),
        Some(Value::Number(token)) => Some(token.to_string()),
        _ => None,
    }
}

/// Applies one `window/workDoneProgress/create` request: the token is work from now on. A
/// server asks for the token when work starts but may send its `begin` only once the token is
/// granted — pyright, given several files, publishes some before it begins, while it still has
/// others to analyse — so waiting for `begin` alone can take a pause for the end. A token not
/// begun within [`CREATED_WORK_GRACE`] is forgotten (a server that never uses it does not keep
/// every later wait busy).
fn track_created(progress: &watch::Sender<HashMap<String, Work>>, params: &Value) {
    let Some(token) = token_of(params) else {
        return;
    };
    let created = Work {
        title: "starting".to_owned(),
        begun: false,
    };
    progress.send_modify(|active| {
        active.insert(token.clone(), created);
    });
    let progress = progress.clone();
    tokio::spawn(async move {
        tokio::time::sleep(CREATED_WORK_GRACE).await;
        progress.send_if_modified(|active| {
            active.get(&token).is_some_and(|work| !work.begun) && active.remove(&token).is_some()
        });
    });
}

/// Applies one `$/progress` notification: a work-done `begin` adds its token (or marks the one
/// created begun), `end` removes it (other progress — partial results — is not work).
fn track_progress(progress: &watch::Sender<HashMap<String, Work>>, params: &Value) {
    let Some(token) = token_of(params) else {
        return;
    };
    let value = params.get("value");
    match value.and_then(|v| v.get("kind")).and_then(Value::as_str) {
        Some("begin") => {
            let title = value
                .and_then(|v| v.get("title"))
                .and_then(Value::as_str)
                .filter(|title| !title.is_empty())
                .unwrap_or("working")
                .to_owned();
            progress.send_modify(|active| {
                active.insert(token, Work { title, begun: true });
            });
        }
        Some("end") => {
            progress.send_if_modified(|active| active.remove(&token).is_some());
        }
        _ => {}
    }
}

fn initialize_params(spec: &ServerSpec) -> Result<InitializeParams> {
    let root = uri_of(&spec.root)?;
    let name = spec
        .root
        .rsplit('/')
        .find(|part| !part.is_empty())
        .unwrap_or("/")
        .to_owned();
    #[allow(
        deprecated,
        reason = "`root_uri`: servers that predate workspace folders read it"
    )]
    Ok(InitializeParams {
        process_id: None,
        root_uri: Some(root.clone()),
        workspace_folders: Some(vec![WorkspaceFolder { uri: root, name }]),
        initialization_options: spec.initialization_options.clone(),
        capabilities: ClientCapabilities {
            text_document: Some(TextDocumentClientCapabilities {
                synchronization: Some(TextDocumentSyncClientCapabilities {
                    dynamic_registration: Some(false),
                    will_save: Some(false),
                    will_save_wait_until: Some(false),
                    did_save: Some(false),
                }),
                publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                    version_support: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            window: Some(WindowClientCapabilities {
                work_done_progress: Some(true),
                ..Default::default()
            }),
            // The client reports changes to the workspace's files (`servers.rs` rescans them
            // before each question); servers that want them register for them.
            workspace: Some(lsp_types::WorkspaceClientCapabilities {
                did_change_watched_files: Some(
                    lsp_types::DidChangeWatchedFilesClientCapabilities {
                        dynamic_registration: Some(true),
                        relative_pattern_support: Some(false),
                    },
                ),
                workspace_folders: Some(true),
                symbol: Some(lsp_types::WorkspaceSymbolClientCapabilities::default()),
                ..Default::default()
            }),
            // Columns are converted either way (`position.rs`); UTF-8 spares the server work.
            general: Some(lsp_types::GeneralClientCapabilities {
                position_encodings: Some(vec![
                    lsp_types::PositionEncodingKind::UTF8,
                    lsp_types::PositionEncodingKind::UTF16,
                ]),
                ..Default::default()
            }),
            ..Default::default()
        },
        client_info: Some(lsp_types::ClientInfo {
            name: "dsh".to_owned(),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        }),
        ..Default::default()
    })
}

/// The `file://` URI of absolute path `path` (`dsh_provider_kit::uri`: the one codec).
pub fn uri_of(path: &str) -> Result<Uri> {
    if !path.starts_with('/') {
        return Err(Error::invalid_input(format!(
            "{path:?} is not an absolute path"
        )));
    }
    file_uri(path.as_bytes())
        .parse()
        .map_err(|e| Error::invalid_input(format!("{path:?} makes no URI: {e}")))
}

fn rpc_error(op: &str, err: RpcError) -> Error {
    let kind = match err {
        RpcError::Closed { .. } => ErrorKind::Closed,
        RpcError::Server { .. } | RpcError::Malformed { .. } => ErrorKind::Remote,
    };
    Error::new(kind, format!("{op}: {err}"))
}

/// `": <the last lines the server wrote to stderr>"`, or nothing. Waits (briefly) for a server
/// that is ending to end, so that what it wrote last has been collected.
async fn stderr_tail(process: &dyn Process) -> String {
    let _ = tokio::time::timeout(Duration::from_secs(2), process.wait()).await;
    let snapshot = process
        .read_output(
            dsh_plugin_api::subprocess::OutputStream::Stderr,
            0,
            STDERR_TAIL,
        )
        .await;
    match snapshot {
        Ok(snapshot) if !snapshot.bytes.is_empty() => {
            let text = String::from_utf8_lossy(&snapshot.bytes);
            let lines: Vec<&str> = text.lines().rev().take(5).collect();
            format!(
                " (its stderr ends: {})",
                lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )
        }
        _ => String::new(),
    }
}

/// A range in a file: 1-based lines, 1-based columns in characters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Location {
    pub path: String,
    pub start: TextPosition,
    pub end: TextPosition,
}

/// One replacement of `start..end` by `new_text`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct TextEdit {
    pub start: TextPosition,
    pub end: TextPosition,
    pub new_text: String,
}

/// The edits of one file, in order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct FileEdits {
    pub path: String,
    pub edits: Vec<TextEdit>,
}

/// A symbol the server names, where (its name's range), and in what.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Symbol {
    pub name: String,
    /// LSP's kind, in lower case (`function`, `class`, `variable`, …).
    pub kind: String,
    pub location: Location,
    pub container: Option<String>,
}

/// Where `name` first stands as a whole word within `range` of `text` (columns in characters);
/// `range` itself when it does not.
fn name_within(
    text: &str,
    range: (TextPosition, TextPosition),
    name: &str,
) -> (TextPosition, TextPosition) {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    if name.is_empty() {
        return range;
    }
    for (index, line) in text.split('\n').enumerate() {
        let number = index as u32 + 1;
        if number < range.0.line || number > range.1.line {
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let first = if number == range.0.line {
            range.0.column as usize - 1
        } else {
            0
        };
        let last = if number == range.1.line {
            (range.1.column as usize - 1).min(chars.len())
        } else {
            chars.len()
        };
        let wanted: Vec<char> = name.chars().collect();
        for at in first..last.saturating_sub(wanted.len() - 1).max(first) {
            let fits = chars.get(at..at + wanted.len()) == Some(&wanted[..])
                && (at == 0 || !word(chars[at - 1]))
                && chars.get(at + wanted.len()).is_none_or(|c| !word(*c));
            if fits {
                let column = at as u32 + 1;
                return (
                    TextPosition {
                        line: number,
                        column,
                    },
                    TextPosition {
                        line: number,
                        column: column + wanted.len() as u32,
                    },
                );
            }
        }
    }
    range
}

fn kind_name(kind: lsp_types::SymbolKind) -> String {
    format!("{kind:?}").to_lowercase()
}

/// The absolute path a server's `file:` URI names, however the server escaped it
/// (`dsh_provider_kit::uri`): documents are matched by path, never by the URI's spelling.
pub fn path_of(uri: &Uri) -> Result<String> {
    let text = uri.as_str();
    let path = file_path(text)
        .map_err(|e| Error::new(ErrorKind::Remote, format!("the language server named {e}")))?;
    String::from_utf8(path).map_err(|_| {
        Error::new(
            ErrorKind::Remote,
            format!("the language server named {text}, not a UTF-8 path"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A token is work from its creation (pyright begins it only after publishing some files'
    /// analysis), until it ends; one never begun stops counting after the grace.
    #[tokio::test(start_paused = true)]
    async fn a_created_progress_token_is_work_until_it_ends_or_is_never_begun() {
        let (progress, active) = watch::channel(HashMap::<String, Work>::new());
        let titles = || {
            let mut titles: Vec<String> = active
                .borrow()
                .values()
                .map(|work| work.title.clone())
                .collect();
            titles.sort();
            titles
        };
        track_created(&progress, &json!({"token": "analysis"}));
        track_created(&progress, &json!({"token": 7}));
        assert_eq!(titles(), ["starting", "starting"]);
        track_progress(
            &progress,
            &json!({"token": "analysis", "value": {"kind": "begin", "title": ""}}),
        );
        tokio::time::sleep(CREATED_WORK_GRACE + Duration::from_millis(1)).await;
        assert_eq!(titles(), ["working"], "the token never begun is forgotten");
        track_progress(
            &progress,
            &json!({"token": "analysis", "value": {"kind": "report", "message": "1 file"}}),
        );
        assert_eq!(titles(), ["working"]);
        track_progress(
            &progress,
            &json!({"token": "analysis", "value": {"kind": "end"}}),
        );
        assert!(active.borrow().is_empty());
    }

    #[test]
    fn paths_become_file_uris_and_back() {
        assert_eq!(
            uri_of("/src/a b/ü.c").unwrap().as_str(),
            "file:///src/a%20b/%C3%BC.c"
        );
        assert!(uri_of("relative.c").is_err());
        let uri = uri_of("/src/a:b/ü.c").unwrap();
        assert_eq!(path_of(&uri).unwrap(), "/src/a:b/ü.c");
        let escaped: Uri = "file:///src/a%3Ab/%C3%BC.c".parse().unwrap();
        assert_eq!(path_of(&escaped).unwrap(), "/src/a:b/ü.c");
        let err = path_of(&"file:///src/%FF".parse().unwrap()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Remote);
        assert!(err.to_string().contains("not a UTF-8 path"), "{err}");
    }

    #[test]
    fn a_flat_symbols_name_is_found_in_its_declaration() {
        let at = |line, column| TextPosition { line, column };
        let text = "int x;\nint main_loop(); int main() {\n  return 0;\n}\n";
        assert_eq!(
            name_within(text, (at(2, 18), at(4, 2)), "main"),
            (at(2, 22), at(2, 26)),
            "the whole word, not main_loop"
        );
        assert_eq!(
            name_within(text, (at(3, 1), at(3, 5)), "main"),
            (at(3, 1), at(3, 5)),
            "not in the range: the range"
        );
    }
}
