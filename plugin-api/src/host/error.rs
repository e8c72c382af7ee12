//! Why a library could not be loaded as a plugin.

use std::path::PathBuf;

/// A refused plugin library. Every variant names the file; nothing of the
/// library has been used (it may have been mapped into the process: loaded
/// libraries are never unloaded).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file is missing or the dynamic loader rejected it (unreadable, a
    /// missing dependency, another architecture).
    #[error("cannot open plugin library {}: {reason}", .path.display())]
    Open { path: PathBuf, reason: String },
    /// The file is not a dsh plugin (not a shared library, or one without a
    /// dsh plugin entry).
    #[error("{} is not a dsh plugin: {reason}", .path.display())]
    NotAPlugin { path: PathBuf, reason: String },
    /// The file is a dsh plugin built against an incompatible plugin API
    /// (another API version or another layout of the ABI types).
    #[error("plugin library {} is incompatible with this host: {reason}", .path.display())]
    Incompatible { path: PathBuf, reason: String },
}

impl LoadError {
    /// The library file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            LoadError::Open { path, .. }
            | LoadError::NotAPlugin { path, .. }
            | LoadError::Incompatible { path, .. } => path,
        }
    }
}
