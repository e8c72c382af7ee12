//! The composition every section starts: `config/local.yaml` with the
//! plugin libraries of this build.

use std::path::PathBuf;

use anyhow::{Context, Result};
use dsh_host::{Host, Manifest, SearchPath};

use crate::locate::{local_manifest, plugin_search};

/// Where the local composition's manifest and libraries are.
#[derive(Debug, Clone)]
pub struct LocalComposition {
    pub manifest: PathBuf,
    pub search: SearchPath,
}

impl LocalComposition {
    /// Finds the manifest in this checkout and the libraries of this build
    /// (see [`crate::locate::plugin_dir`]).
    pub fn locate() -> Result<LocalComposition> {
        Ok(LocalComposition {
            manifest: local_manifest()?,
            search: plugin_search()?,
        })
    }

    /// Manifest → ready: reads and parses the manifest, validates it,
    /// loads the libraries and creates both plugins. Runs on the caller's
    /// tokio runtime (as [`Host::from_manifest`] does).
    pub async fn start(&self) -> Result<Host> {
        let manifest = Manifest::from_path(&self.manifest)
            .with_context(|| format!("read the manifest {}", self.manifest.display()))?;
        Host::from_manifest(&manifest, &self.search)
            .await
            .with_context(|| format!("start {}", self.manifest.display()))
    }
}
