//! What a case works with: the world's providers, its own directory in the
//! scratch area, bounded provider calls, fixture helpers, and an owner list
//! of everything it started so the runner can stop it whatever the outcome.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{
    ExitStatus, OutputMode, Process, SpawnSpec, StdinMode, SubprocessProvider, Terminal,
    TerminalSpec,
};
use dsh_plugin_api::{Error, ErrorKind, Result};
use futures::StreamExt;

use crate::check::{self, Failure, ensure, show};

/// Grace the runner gives leftover processes when it terminates them.
const CLEANUP_GRACE: Duration = Duration::from_millis(100);

/// Something a case started that the runner must stop afterwards.
enum Owned {
    Process(Arc<dyn Process>),
    Terminal(Arc<dyn Terminal>),
}

/// One case's view of the world.
pub(crate) struct Cx {
    fs: Option<Arc<dyn FsProvider>>,
    subprocess: Option<Arc<dyn SubprocessProvider>>,
    /// Whether fixtures may be written through `fs`.
    fs_writable: bool,
    /// The case's own directory: canonical, absolute, existing when the
    /// world allows creating it.
    pub(crate) dir: String,
    /// Bound on one provider call.
    pub(crate) limit: Duration,
    owned: Mutex<Vec<Owned>>,
}

/// A finished helper command.
#[derive(Debug)]
pub(crate) struct Ran {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

impl Cx {
    pub(crate) fn new(
        fs: Option<Arc<dyn FsProvider>>,
        subprocess: Option<Arc<dyn SubprocessProvider>>,
        fs_writable: bool,
        dir: String,
        limit: Duration,
    ) -> Cx {
        Cx {
            fs,
            subprocess,
            fs_writable,
            dir,
            limit,
            owned: Mutex::new(Vec::new()),
        }
    }

    /// The `fs` provider. Only called by cases that declare `Need::Fs` (or
    /// `FsWrite`), which the runner checked.
    pub(crate) fn fs(&self) -> &dyn FsProvider {
        self.fs
            .as_deref()
            .expect("a case using fs declares Need::Fs")
    }

    /// The `subprocess` provider (cases declaring `Subprocess`, `Terminal`
    /// or `Shell`).
    pub(crate) fn sp(&self) -> &dyn SubprocessProvider {
        self.subprocess
            .as_deref()
            .expect("a case using subprocess declares Need::Subprocess or Need::Shell")
    }

    pub(crate) fn has_fs(&self) -> bool {
        self.fs.is_some()
    }

    /// `rel` inside the case directory.
    pub(crate) fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.dir)
    }

    /// A provider call that must succeed, bounded by the call limit.
    pub(crate) async fn ok<T>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T>>,
    ) -> std::result::Result<T, Failure> {
        check::expect_ok(self.limit, what, fut).await
    }

    /// A provider call that must fail with `kind`.
    pub(crate) async fn err<T>(
        &self,
        what: &str,
        kind: ErrorKind,
        fut: impl Future<Output = Result<T>>,
    ) -> std::result::Result<Error, Failure> {
        check::expect_err(self.limit, what, kind, fut).await
    }

    /// A provider call that must fail with one of `kinds`.
    pub(crate) async fn err_of<T>(
        &self,
        what: &str,
        kinds: &[ErrorKind],
        fut: impl Future<Output = Result<T>>,
    ) -> std::result::Result<Error, Failure> {
        check::expect_err_of(self.limit, what, kinds, fut).await
    }

    /// Any future, bounded by the call limit.
    pub(crate) async fn within<T>(
        &self,
        what: &str,
        fut: impl Future<Output = T>,
    ) -> std::result::Result<T, Failure> {
        check::within(self.limit, what, fut).await
    }

    // ---- fixtures -------------------------------------------------------

    /// Creates (or replaces) the file `rel` in the case directory with
    /// `content`, through `fs` when it is writable, else through a command.
    /// Returns the absolute path.
    pub(crate) async fn put(
        &self,
        rel: &str,
        content: &[u8],
    ) -> std::result::Result<String, Failure> {
        let path = self.path(rel);
        if self.fs_writable {
            self.ok(
                &format!("fixture: write {path}"),
                self.fs()
                    .write(&path, content.to_vec(), WriteGuard::Overwrite),
            )
            .await?;
        } else {
            self.sh_ok_with_stdin(
                &format!("fixture: write {path}"),
                r#"mkdir -p -- "$(dirname -- "$1")" && cat > "$1""#,
                &[&path],
                content,
            )
            .await?;
        }
        Ok(path)
    }

    /// Creates the directory `rel` (and parents) in the case directory.
    pub(crate) async fn mkdirs(&self, rel: &str) -> std::result::Result<String, Failure> {
        let path = self.path(rel);
        if self.fs_writable {
            self.ok(&format!("fixture: mkdir {path}"), self.fs().mkdir(&path))
                .await?;
        } else {
            self.sh_ok(
                &format!("fixture: mkdir {path}"),
                r#"mkdir -p -- "$1""#,
                &[&path],
            )
            .await?;
        }
        Ok(path)
    }

    /// Creates the symlink `rel` → `target` (stored exactly as given).
    /// Needs `Shell`: the fs seam has no symlink operation.
    pub(crate) async fn symlink(
        &self,
        target: &str,
        rel: &str,
    ) -> std::result::Result<String, Failure> {
        let path = self.path(rel);
        self.sh_ok(
            &format!("fixture: ln -s {target} {path}"),
            r#"mkdir -p -- "$(dirname -- "$2")" && ln -s -- "$1" "$2""#,
            &[target, &path],
        )
        .await?;
        Ok(path)
    }

    /// Sets the permission bits of the absolute `path` (needs `Shell`).
    pub(crate) async fn chmod(&self, path: &str, mode: u32) -> std::result::Result<(), Failure> {
        let mode = format!("{mode:o}");
        self.sh_ok(
            &format!("fixture: chmod {mode} {path}"),
            r#"chmod "$1" "$2""#,
            &[&mode, path],
        )
        .await?;
        Ok(())
    }

    /// Reads a whole file of the world: through `fs` when present (raw
    /// bytes), else with `cat`.
    pub(crate) async fn read_all(&self, path: &str) -> std::result::Result<Vec<u8>, Failure> {
        if self.has_fs() {
            let what = format!("read_bytes {path}");
            let stream = self.ok(&what, self.fs().read_bytes(path)).await?;
            self.ok(&what, drain(stream.chunks)).await
        } else {
            self.sh_ok(&format!("cat {path}"), r#"cat -- "$1""#, &[path])
                .await
        }
    }

    // ---- processes ------------------------------------------------------

    /// Spawns `spec` and keeps the handle so the runner terminates the group
    /// after the case, whatever its outcome.
    pub(crate) async fn spawn(
        &self,
        what: &str,
        spec: SpawnSpec,
    ) -> std::result::Result<Arc<dyn Process>, Failure> {
        let process = self.ok(what, self.sp().spawn(spec)).await?;
        self.own(Owned::Process(process.clone()));
        Ok(process)
    }

    /// Spawns a terminal and keeps the handle for cleanup.
    pub(crate) async fn spawn_terminal(
        &self,
        what: &str,
        spec: TerminalSpec,
    ) -> std::result::Result<Arc<dyn Terminal>, Failure> {
        let terminal = self.ok(what, self.sp().spawn_terminal(spec)).await?;
        self.own(Owned::Terminal(terminal.clone()));
        Ok(terminal)
    }

    fn own(&self, owned: Owned) {
        self.owned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(owned);
    }

    fn disown(&self, process: &Arc<dyn Process>) {
        self.owned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain(|owned| !matches!(owned, Owned::Process(p) if Arc::ptr_eq(p, process)));
    }

    /// Runs `spec` to completion with both outputs piped, feeding `stdin`
    /// (when given) and collecting everything, bounded by the call limit.
    pub(crate) async fn run(
        &self,
        what: &str,
        mut spec: SpawnSpec,
        stdin: Option<&[u8]>,
    ) -> std::result::Result<Ran, Failure> {
        spec.stdout = OutputMode::Pipe;
        spec.stderr = OutputMode::Pipe;
        spec.stdin = if stdin.is_some() {
            StdinMode::Pipe
        } else {
            StdinMode::Null
        };
        let process = self.spawn(what, spec).await?;
        let writer = process.take_stdin();
        let stdout = process.take_stdout();
        let stderr = process.take_stderr();
        let feed = async {
            match (writer, stdin) {
                (Some(mut writer), Some(bytes)) => {
                    if !bytes.is_empty() {
                        writer.write(bytes.to_vec()).await?;
                    }
                    writer.close().await
                }
                (None, Some(_)) => Err(Error::invalid_input(
                    "take_stdin returned None for a StdinMode::Pipe spawn",
                )),
                _ => Ok(()),
            }
        };
        let read = |stream: Option<ByteStream>, name: &'static str| async move {
            match stream {
                Some(stream) => drain(stream).await,
                None => Err(Error::invalid_input(format!(
                    "take_{name} returned None for an OutputMode::Pipe spawn"
                ))),
            }
        };
        let (fed, out, err) = self
            .within(
                what,
                futures::future::join3(feed, read(stdout, "stdout"), read(stderr, "stderr")),
            )
            .await?;
        let status = self.ok(&format!("{what}: wait"), process.wait()).await?;
        // Finished with its output closed: nothing of it is left to stop, so
        // the runner need not spend a terminate probe on it.
        self.disown(&process);
        fed.map_err(|e| Failure::new(format!("{what}: writing stdin: {e}")))?;
        let stdout = out.map_err(|e| Failure::new(format!("{what}: reading stdout: {e}")))?;
        let stderr = err.map_err(|e| Failure::new(format!("{what}: reading stderr: {e}")))?;
        Ok(Ran {
            status,
            stdout,
            stderr,
        })
    }

    /// `sh -c script sh args…` in the case directory, to completion.
    pub(crate) async fn sh(
        &self,
        what: &str,
        script: &str,
        args: &[&str],
    ) -> std::result::Result<Ran, Failure> {
        self.run(what, sh_spec(script, args, Some(&self.dir)), None)
            .await
    }

    /// Like [`Cx::sh`] but the script must exit 0; returns its stdout.
    pub(crate) async fn sh_ok(
        &self,
        what: &str,
        script: &str,
        args: &[&str],
    ) -> std::result::Result<Vec<u8>, Failure> {
        self.sh_ok_with_stdin(what, script, args, b"").await
    }

    /// Like [`Cx::sh_ok`], feeding `stdin` to the script.
    pub(crate) async fn sh_ok_with_stdin(
        &self,
        what: &str,
        script: &str,
        args: &[&str],
        stdin: &[u8],
    ) -> std::result::Result<Vec<u8>, Failure> {
        let ran = self
            .run(what, sh_spec(script, args, Some(&self.dir)), Some(stdin))
            .await?;
        ensure!(
            ran.status.success(),
            "{what}: helper command failed with {:?}; stderr {}",
            ran.status,
            show(&ran.stderr)
        );
        Ok(ran.stdout)
    }

    /// Stops everything the case started: terminates every owned process
    /// group and terminal session, each bounded by the call limit. Returns
    /// what could not be stopped.
    pub(crate) async fn release(&self) -> std::result::Result<(), String> {
        let owned = std::mem::take(
            &mut *self
                .owned
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let mut errors = Vec::new();
        for item in owned {
            let (what, result) = match item {
                Owned::Process(process) => {
                    let what = format!("terminate process {}", process.pid());
                    let result =
                        tokio::time::timeout(self.limit, process.terminate(CLEANUP_GRACE)).await;
                    (what, result)
                }
                Owned::Terminal(terminal) => {
                    let what = format!("terminate terminal {}", terminal.pid());
                    let result = tokio::time::timeout(self.limit, terminal.terminate()).await;
                    (what, result)
                }
            };
            match result {
                Ok(Ok(())) => {}
                Ok(Err(err)) => errors.push(format!("{what}: {err}")),
                Err(_) => errors.push(format!(
                    "{what}: no answer within {} ms",
                    self.limit.as_millis()
                )),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// A spec for `sh -c script sh args…` in `cwd`.
pub(crate) fn sh_spec(script: &str, args: &[&str], cwd: Option<&str>) -> SpawnSpec {
    let mut argv = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        script.to_owned(),
        "sh".to_owned(),
    ];
    argv.extend(args.iter().map(|arg| (*arg).to_owned()));
    let mut spec = SpawnSpec::new(argv);
    spec.cwd = cwd.map(str::to_owned);
    spec
}

/// Reads a byte stream to its end; chunks must never be empty.
pub(crate) async fn drain(mut stream: ByteStream) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if chunk.is_empty() {
            return Err(Error::invalid_input(
                "the stream yielded an empty chunk (chunks are never empty)",
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
