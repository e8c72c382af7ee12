//! What a model should know about the world before its first call: where it
//! is, who it is, which system — asked of the world itself through the
//! `subprocess` seam, so every provider answers the same way.

use std::time::Duration;

use dsh_plugin_api::Result;
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec, SubprocessProvider};

/// How long the world may take to answer (a cold sandbox included).
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// The most bytes of the answer kept (three short lines).
const ANSWER_LIMIT: usize = 4096;

/// The world's own account of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldFacts {
    /// The working directory relative paths are resolved against.
    pub cwd: String,
    /// The user commands run as (`id -un`, or the numeric id when the user
    /// has no name).
    pub user: String,
    /// The system (`uname -srm`: kernel, release, machine).
    pub os: String,
}

impl WorldFacts {
    /// The facts as lines for a model.
    pub fn lines(&self) -> Vec<String> {
        vec![
            format!("Working directory: {}", self.cwd),
            format!("User: {}", self.user),
            format!("OS: {}", self.os),
        ]
    }
}

/// Asks the world for its facts: one short POSIX `sh` command in the
/// world's working directory, bounded in time and output. Runs on the
/// caller's runtime; dropping the future ends the command with it (the
/// seam's contract).
pub async fn facts(subprocess: &dyn SubprocessProvider) -> Result<WorldFacts> {
    let script = "id -un 2>/dev/null || id -u; uname -srm; pwd";
    let mut spec = SpawnSpec::new(["sh", "-c", script]);
    spec.stdout = OutputMode::Collect {
        limit: ANSWER_LIMIT,
    };
    spec.stderr = OutputMode::Null;
    spec.timeout = Some(ASK_TIMEOUT);
    let process = subprocess.spawn(spec).await?;
    let status = process.wait().await?;
    let output = process
        .read_output(OutputStream::Stdout, 0, ANSWER_LIMIT)
        .await?;
    let text = String::from_utf8_lossy(&output.bytes);
    let mut lines = text.lines().map(str::trim);
    match (status.success(), lines.next(), lines.next(), lines.next()) {
        (true, Some(user), Some(os), Some(cwd)) => Ok(WorldFacts {
            cwd: cwd.to_owned(),
            user: user.to_owned(),
            os: os.to_owned(),
        }),
        _ => Err(dsh_plugin_api::Error::io(format!(
            "world facts: `sh -c '{script}'` ended {status:?} with {text:?}"
        ))),
    }
}
