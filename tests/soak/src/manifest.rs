//! The manifests the soak runs `dsh` with: the E2B composition of `config/e2b-local.yaml`, with
//! the owner (`dsh-e2b-owner`) told to create a tagged sandbox or connect to a worker's, and what to do
//! with it on disposal. Connection settings come from the `E2B_*` environment of each `dsh`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

/// Metadata key holding the soak run's token on every sandbox it creates.
pub const RUN_KEY: &str = "soak-run";
/// Metadata key naming the worker that created a sandbox.
pub const WORKER_KEY: &str = "soak-worker";
/// Metadata key numbering a worker's sandboxes.
pub const GENERATION_KEY: &str = "soak-generation";
/// Metadata key: `worker` (a worker's own sandbox) or `ephemeral` (one `dsh` run's).
pub const KIND_KEY: &str = "soak-kind";

/// How the owner gets its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// Create worker `worker`'s sandbox number `generation`.
    Create { worker: u32, generation: u32 },
    /// Create a sandbox for one `dsh` run.
    Ephemeral,
    /// Connect to this sandbox.
    Connect(String),
}

/// What the owner does with the sandbox when `dsh` ends (`onDispose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDispose {
    Kill,
    Leave,
}

/// A directory of manifests, removed when dropped.
#[derive(Debug)]
pub struct Manifests {
    dir: tempfile::TempDir,
    run: String,
    timeout: Duration,
}

impl Manifests {
    /// A fresh directory; every sandbox gets `timeoutMs` = `timeout` and run token `run`.
    pub fn new(run: &str, timeout: Duration) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("dsh-soak-manifests-")
            .tempdir()
            .context("create the manifest directory")?;
        Ok(Self {
            dir,
            run: run.to_owned(),
            timeout,
        })
    }

    /// Writes manifest `name` (`<name>.yaml`) and returns its path.
    pub fn write(&self, name: &str, acquire: &Acquire, on_dispose: OnDispose) -> Result<PathBuf> {
        let path = self.dir.path().join(format!("{name}.yaml"));
        let text = text(&self.run, self.timeout, acquire, on_dispose);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        Ok(path)
    }
}

/// The manifest's text.
fn text(run: &str, timeout: Duration, acquire: &Acquire, on_dispose: OnDispose) -> String {
    let on_dispose = match on_dispose {
        OnDispose::Kill => "kill",
        OnDispose::Leave => "leave",
    };
    let acquire = match acquire {
        Acquire::Create { worker, generation } => format!(
            "      template: base\n      metadata:\n        {RUN_KEY}: \"{run}\"\n        \
             {KIND_KEY}: worker\n        {WORKER_KEY}: \"{worker}\"\n        \
             {GENERATION_KEY}: \"{generation}\"\n"
        ),
        Acquire::Ephemeral => format!(
            "      template: base\n      metadata:\n        {RUN_KEY}: \"{run}\"\n        \
             {KIND_KEY}: ephemeral\n"
        ),
        Acquire::Connect(id) => format!("      sandboxId: \"{id}\"\n"),
    };
    format!(
        "# Written by dsh-soak.\nplugins:\n  - id: e2b\n    name: dsh-e2b-owner\n    config:\n{acquire}      \
         cwd: /home/user/workspace\n      timeoutMs: {}\n      onDispose: {on_dispose}\n  \
         - id: fs\n    name: dsh-fs-e2b\n  - id: subprocess\n    name: dsh-subprocess-e2b\n",
        timeout.as_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_sandbox_is_created_tagged_and_left() {
        let text = text(
            "r1",
            Duration::from_secs(60),
            &Acquire::Create {
                worker: 3,
                generation: 7,
            },
            OnDispose::Leave,
        );
        assert_eq!(
            text,
            "# Written by dsh-soak.\nplugins:\n  - id: e2b\n    name: dsh-e2b-owner\n    config:\n      \
             template: base\n      metadata:\n        soak-run: \"r1\"\n        soak-kind: worker\n        \
             soak-worker: \"3\"\n        soak-generation: \"7\"\n      cwd: /home/user/workspace\n      \
             timeoutMs: 60000\n      onDispose: leave\n  - id: fs\n    name: dsh-fs-e2b\n  - id: \
             subprocess\n    name: dsh-subprocess-e2b\n"
        );
    }

    #[test]
    fn a_connection_names_only_the_sandbox() {
        let text = text(
            "r1",
            Duration::from_secs(20),
            &Acquire::Connect("abc".to_owned()),
            OnDispose::Kill,
        );
        assert!(
            text.contains("      sandboxId: \"abc\"\n      cwd:"),
            "{text}"
        );
        assert!(
            !text.contains("template") && !text.contains("metadata"),
            "{text}"
        );
        assert!(
            text.contains("timeoutMs: 20000\n      onDispose: kill\n"),
            "{text}"
        );
    }

    #[test]
    fn manifests_are_files_in_their_directory() {
        let manifests = Manifests::new("r1", Duration::from_secs(30)).unwrap();
        let path = manifests
            .write("w0-ephemeral", &Acquire::Ephemeral, OnDispose::Kill)
            .unwrap();
        assert!(path.ends_with("w0-ephemeral.yaml"));
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.contains("soak-kind: ephemeral"), "{written}");
    }
}
