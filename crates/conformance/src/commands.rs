//! Helper commands a case runs in the world (to prepare fixtures or probe
//! what the world sees), and the plumbing to read their output.

use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{ExitStatus, OutputMode, SpawnSpec, StdinMode};
use dsh_plugin_api::{Bytes, Error, Result};
use futures::StreamExt;

use crate::check::{Failure, ensure, show};
use crate::context::Cx;

/// A finished helper command.
#[derive(Debug)]
pub(crate) struct Ran {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

impl Cx {
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
                        writer.write(Bytes::copy_from_slice(bytes)).await?;
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
