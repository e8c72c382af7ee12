//! Deliberately broken providers: wrappers around the local ones that each
//! break exactly one contract, subtly, the way a real provider might. The
//! kit must fail the cases that check that contract.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_fs_local::FsLocal;
use dsh_plugin_api::fs::{
    BINARY_SAMPLE_LEN, DirEntry, Edit, EditOutcome, FsProvider, Metadata, ReadManyItem,
    ReadManyLimits, ReadStream, Resolved, SearchMode, SearchSpec, SearchStream, TextFile, Version,
    WalkSpec, WalkStream, WriteGuard,
};
use dsh_plugin_api::stream::{ByteStream, ByteWriter, TextStream};
use dsh_plugin_api::subprocess::{
    ExitStatus, OutputSnapshot, OutputStream, Process, SpawnSpec, SubprocessProvider, Terminal,
    TerminalSpec,
};
use dsh_plugin_api::{Bytes, Text};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_subprocess_local::LocalSubprocess;
use futures::StreamExt;

/// One broken `fs` contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsFlaw {
    /// `write` truncates the target and writes it in two halves in place.
    NonAtomicWrite,
    /// Reads decode with replacement characters instead of failing.
    LossyUtf8,
    /// Versions are derived from the size only (so same-size writes collide).
    SizeVersion,
    /// `edit` is read–modify–write without per-target serialisation.
    UnserialisedEdit,
    /// `contains` is a string-prefix test on lexically normalised paths.
    NaiveContains,
    /// `walk` forgets `.gitignore`.
    WalkIgnoresGitignore,
    /// `search` returns no context lines.
    SearchDropsContext,
    /// `read_many` with `beneath` checks nothing and reads by path, as a
    /// naive provider would (following symlinks out of the root).
    ReadManyUnconfined,
}

/// `fs-local` with one flaw.
pub struct BrokenFs {
    pub inner: Arc<FsLocal>,
    pub flaw: FsFlaw,
}

impl BrokenFs {
    fn size_version(meta: &Metadata) -> Version {
        Version(format!("size-{}", meta.size))
    }

    fn weak(&self, meta: Metadata) -> Metadata {
        if self.flaw == FsFlaw::SizeVersion {
            Metadata {
                version: BrokenFs::size_version(&meta),
                ..meta
            }
        } else {
            meta
        }
    }

    /// Translates a guard on a weak version into one on the real version,
    /// as a provider with weak versions would check it.
    async fn real_guard(&self, path: &str, guard: WriteGuard) -> Result<WriteGuard> {
        match guard {
            WriteGuard::IfVersion(weak) if self.flaw == FsFlaw::SizeVersion => {
                let meta = self.inner.stat(path).await?;
                if BrokenFs::size_version(&meta) == weak {
                    Ok(WriteGuard::IfVersion(meta.version))
                } else {
                    Err(Error::new(ErrorKind::Conflict, "write: stale version").with_subject(path))
                }
            }
            other => Ok(other),
        }
    }

    async fn version_after(&self, path: &str, real: Version) -> Result<Version> {
        if self.flaw == FsFlaw::SizeVersion {
            Ok(BrokenFs::size_version(&self.inner.stat(path).await?))
        } else {
            Ok(real)
        }
    }

    async fn write_in_place(&self, path: &str, content: Vec<u8>) -> Result<Version> {
        let target = self.inner.resolve(path, None).await?.path;
        if let Some((parent, _)) = target.rsplit_once('/') {
            std::fs::create_dir_all(if parent.is_empty() { "/" } else { parent })
                .map_err(|e| Error::from_io("write", &e))?;
        }
        let mut file = std::fs::File::create(&target).map_err(|e| Error::from_io("write", &e))?;
        let (first, second) = content.split_at(content.len() / 2);
        file.write_all(first)
            .map_err(|e| Error::from_io("write", &e))?;
        // Long enough that the kit's drops (after 1, 5 and 20 ms) land in
        // it even on a loaded machine: with 2 ms, a busy CI run once had
        // every drop miss it and the flaw went unseen.
        tokio::time::sleep(Duration::from_millis(50)).await;
        file.write_all(second)
            .map_err(|e| Error::from_io("write", &e))?;
        Ok(self.inner.stat(&target).await?.version)
    }
}

fn lossy_text(bytes: &[u8]) -> Result<String> {
    if bytes[..bytes.len().min(BINARY_SAMPLE_LEN)].contains(&0) {
        return Err(Error::new(ErrorKind::Binary, "read_text: binary content"));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

#[async_trait]
impl FsProvider for BrokenFs {
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved> {
        self.inner.resolve(path, cwd).await
    }

    async fn contains(&self, root: &str, target: &str) -> Result<bool> {
        if self.flaw != FsFlaw::NaiveContains {
            return self.inner.contains(root, target).await;
        }
        if target.contains('\0') {
            return Err(Error::invalid_input("contains: NUL in target"));
        }
        let root = self.inner.resolve(root, None).await?.path;
        let mut parts: Vec<&str> = Vec::new();
        for part in target.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                part => parts.push(part),
            }
        }
        Ok(format!("/{}", parts.join("/")).starts_with(root.trim_end_matches('/')))
    }

    async fn stat(&self, path: &str) -> Result<Metadata> {
        Ok(self.weak(self.inner.stat(path).await?))
    }

    async fn lstat(&self, path: &str) -> Result<Metadata> {
        Ok(self.weak(self.inner.lstat(path).await?))
    }

    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        let entries = self.inner.list(dir).await?;
        Ok(entries
            .into_iter()
            .map(|entry| DirEntry {
                metadata: self.weak(entry.metadata),
                resolved: entry.resolved.map(|meta| self.weak(meta)),
                ..entry
            })
            .collect())
    }

    async fn read_text(&self, path: &str) -> Result<TextFile> {
        match self.flaw {
            FsFlaw::LossyUtf8 => {
                let stream = self.inner.read_bytes(path).await?;
                let bytes = dsh_plugin_api::stream::collect_bytes(stream.chunks).await?;
                Ok(TextFile {
                    text: Text::from(lossy_text(&bytes)?),
                    version: stream.version,
                })
            }
            FsFlaw::SizeVersion => {
                let file = self.inner.read_text(path).await?;
                let version = self.version_after(path, file.version).await?;
                Ok(TextFile { version, ..file })
            }
            _ => self.inner.read_text(path).await,
        }
    }

    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>> {
        if self.flaw != FsFlaw::LossyUtf8 {
            let stream = self.inner.stream_text(path).await?;
            let version = self.version_after(path, stream.version).await?;
            return Ok(ReadStream { version, ..stream });
        }
        let stream = self.inner.read_bytes(path).await?;
        // Decodes every chunk on its own: characters split across chunks
        // and invalid bytes become U+FFFD.
        let chunks = stream.chunks.map(|chunk| {
            chunk.map(|bytes| Text::from(String::from_utf8_lossy(&bytes).into_owned()))
        });
        Ok(ReadStream {
            version: stream.version,
            size: stream.size,
            chunks: Box::pin(chunks),
        })
    }

    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>> {
        let stream = self.inner.read_bytes(path).await?;
        let version = self.version_after(path, stream.version).await?;
        Ok(ReadStream { version, ..stream })
    }

    async fn write(&self, path: &str, content: Bytes, guard: WriteGuard) -> Result<Version> {
        if self.flaw == FsFlaw::NonAtomicWrite && guard == WriteGuard::Overwrite {
            return self.write_in_place(path, Vec::from(content)).await;
        }
        let guard = self.real_guard(path, guard).await?;
        let version = self.inner.write(path, content, guard).await?;
        self.version_after(path, version).await
    }

    async fn write_stream(
        &self,
        path: &str,
        mut content: ByteStream,
        guard: WriteGuard,
    ) -> Result<Version> {
        if self.flaw == FsFlaw::NonAtomicWrite && guard == WriteGuard::Overwrite {
            // Truncates first, then appends each chunk as it arrives.
            self.write_in_place(path, Vec::new()).await?;
            let target = self.inner.resolve(path, None).await?.path;
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&target)
                .map_err(|e| Error::from_io("write_stream", &e))?;
            while let Some(chunk) = content.next().await {
                file.write_all(&chunk?)
                    .map_err(|e| Error::from_io("write_stream", &e))?;
            }
            return Ok(self.inner.stat(path).await?.version);
        }
        let guard = self.real_guard(path, guard).await?;
        let version = self.inner.write_stream(path, content, guard).await?;
        self.version_after(path, version).await
    }

    async fn edit(&self, path: &str, edits: Vec<Edit>, guard: WriteGuard) -> Result<EditOutcome> {
        if self.flaw == FsFlaw::UnserialisedEdit {
            let file = self.inner.read_text(path).await?;
            let mut text = file.text;
            let mut replacements = 0;
            for edit in &edits {
                let count = text.matches(edit.old.as_str()).count();
                if count == 0 || (count > 1 && !edit.replace_all) {
                    return Err(Error::invalid_input(format!("edit: {count} matches")));
                }
                text = Text::from(text.replace(edit.old.as_str(), &edit.new));
                replacements += count;
            }
            // The window in which a concurrent edit's result is lost.
            tokio::time::sleep(Duration::from_millis(1)).await;
            let version = self.inner.write(path, text.into_bytes(), guard).await?;
            return Ok(EditOutcome {
                version,
                replacements,
            });
        }
        let guard = self.real_guard(path, guard).await?;
        let outcome = self.inner.edit(path, edits, guard).await?;
        Ok(EditOutcome {
            version: self.version_after(path, outcome.version).await?,
            ..outcome
        })
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        self.inner.mkdir(path).await
    }

    async fn remove(&self, path: &str) -> Result<bool> {
        self.inner.remove(path).await
    }

    async fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.inner.rename(from, to).await
    }

    async fn walk(&self, root: &str, spec: WalkSpec) -> Result<WalkStream> {
        let gitignore = spec.gitignore && self.flaw != FsFlaw::WalkIgnoresGitignore;
        self.inner.walk(root, WalkSpec { gitignore, ..spec }).await
    }

    async fn search(&self, root: &str, spec: SearchSpec) -> Result<SearchStream> {
        let mode = match spec.mode {
            SearchMode::Lines { .. } if self.flaw == FsFlaw::SearchDropsContext => {
                SearchMode::Lines { context: 0 }
            }
            mode => mode,
        };
        self.inner.search(root, SearchSpec { mode, ..spec }).await
    }

    async fn read_many(
        &self,
        paths: Vec<String>,
        limits: ReadManyLimits,
    ) -> Result<Vec<ReadManyItem>> {
        match &limits.beneath {
            Some(root) if self.flaw == FsFlaw::ReadManyUnconfined => {
                let paths = paths.iter().map(|path| format!("{root}/{path}")).collect();
                let limits = ReadManyLimits {
                    beneath: None,
                    ..limits
                };
                self.inner.read_many(paths, limits).await
            }
            _ => self.inner.read_many(paths, limits).await,
        }
    }
}

/// One broken `subprocess` contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubprocessFlaw {
    /// `terminate` SIGKILLs the leader only and reports success: the rest of
    /// the group leaks.
    LeaderOnlyTerminate,
    /// Ambient credential-shaped names are passed through.
    LeakyEnvironment,
    /// The requested program runs as a child of a wrapper shell, so it is
    /// not its group's leader and `pid()` is the wrapper's.
    WrappedChild,
    /// `spec.timeout` is ignored.
    IgnoredTimeout,
    /// Collect mode claims it never truncated.
    TruncationHidden,
    /// A missing program is reported as a process exiting 127, not an error.
    MissingProgramExits127,
    /// Terminal output starts with a bootstrap prompt.
    TerminalPromptNoise,
}

/// `subprocess-local` with one flaw.
pub struct BrokenSubprocess {
    pub inner: Arc<LocalSubprocess>,
    pub flaw: SubprocessFlaw,
}

#[async_trait]
impl SubprocessProvider for BrokenSubprocess {
    async fn resolve_executable(&self, name: &str, extra_path: &[String]) -> Result<String> {
        self.inner.resolve_executable(name, extra_path).await
    }

    async fn spawn(&self, mut spec: SpawnSpec) -> Result<Arc<dyn Process>> {
        match self.flaw {
            SubprocessFlaw::LeakyEnvironment => {
                for (name, value) in super::PLANTED {
                    spec.env
                        .entry((*name).to_owned())
                        .or_insert_with(|| (*value).to_owned());
                }
            }
            SubprocessFlaw::WrappedChild if !spec.argv.is_empty() => {
                let mut argv = vec![
                    "sh".to_owned(),
                    "-c".to_owned(),
                    "\"$@\"".to_owned(),
                    "sh".to_owned(),
                ];
                argv.append(&mut spec.argv);
                spec.argv = argv;
            }
            SubprocessFlaw::IgnoredTimeout => spec.timeout = None,
            _ => {}
        }
        let missing_program = self.flaw == SubprocessFlaw::MissingProgramExits127
            && match spec.argv.first() {
                Some(program) => self
                    .inner
                    .resolve_executable(program, &[])
                    .await
                    .is_err_and(|err| err.kind() == ErrorKind::NotFound),
                None => false,
            };
        let process = match self.inner.spawn(spec.clone()).await {
            Err(err) if err.kind() == ErrorKind::NotFound && missing_program => {
                let mut stand_in = spec;
                stand_in.argv = vec!["sh".into(), "-c".into(), "exit 127".into()];
                stand_in.cwd = None;
                self.inner.spawn(stand_in).await?
            }
            other => other?,
        };
        Ok(Arc::new(BrokenProcess {
            inner: process,
            flaw: self.flaw,
        }))
    }

    async fn spawn_terminal(&self, spec: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        let terminal = self.inner.spawn_terminal(spec).await?;
        Ok(Arc::new(BrokenTerminal {
            inner: terminal,
            flaw: self.flaw,
        }))
    }
}

struct BrokenProcess {
    inner: Arc<dyn Process>,
    flaw: SubprocessFlaw,
}

#[async_trait]
impl Process for BrokenProcess {
    fn pid(&self) -> u32 {
        self.inner.pid()
    }

    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>> {
        self.inner.take_stdin()
    }

    fn take_stdout(&self) -> Option<ByteStream> {
        self.inner.take_stdout()
    }

    fn take_stderr(&self) -> Option<ByteStream> {
        self.inner.take_stderr()
    }

    async fn wait(&self) -> Result<ExitStatus> {
        self.inner.wait().await
    }

    async fn read_output(
        &self,
        stream: OutputStream,
        offset: u64,
        max_len: usize,
    ) -> Result<OutputSnapshot> {
        let snapshot = self.inner.read_output(stream, offset, max_len).await?;
        if self.flaw == SubprocessFlaw::TruncationHidden {
            return Ok(OutputSnapshot {
                truncated: false,
                ..snapshot
            });
        }
        Ok(snapshot)
    }

    async fn terminate(&self, grace: Duration) -> Result<()> {
        if self.flaw != SubprocessFlaw::LeaderOnlyTerminate {
            return self.inner.terminate(grace).await;
        }
        let pid = libc::pid_t::try_from(self.inner.pid()).expect("pid fits pid_t");
        // SAFETY: kill(2) with a positive pid signals that one process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        Ok(())
    }
}

struct BrokenTerminal {
    inner: Arc<dyn Terminal>,
    flaw: SubprocessFlaw,
}

#[async_trait]
impl Terminal for BrokenTerminal {
    fn pid(&self) -> u32 {
        self.inner.pid()
    }

    fn take_output(&self) -> Option<ByteStream> {
        let output = self.inner.take_output()?;
        if self.flaw == SubprocessFlaw::TerminalPromptNoise {
            let prompt =
                futures::stream::once(async { Ok(Bytes::from_static(b"user@sandbox:~$ ")) });
            return Some(Box::pin(prompt.chain(output)));
        }
        Some(output)
    }

    async fn write(&self, data: Bytes) -> Result<()> {
        self.inner.write(data).await
    }

    async fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        self.inner.resize(cols, rows).await
    }

    async fn foreground_pgid(&self) -> Result<u32> {
        self.inner.foreground_pgid().await
    }

    async fn signal(&self, signal: dsh_plugin_api::subprocess::Signal) -> Result<()> {
        self.inner.signal(signal).await
    }

    async fn terminate(&self) -> Result<()> {
        self.inner.terminate().await
    }

    async fn wait(&self) -> Result<ExitStatus> {
        self.inner.wait().await
    }
}
