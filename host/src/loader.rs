//! Reading a plugin library: its descriptor, and a factory for instances.
//!
//! [`LibraryLoader`] is the seam between validation and the dynamic loader:
//! [`DlopenLoader`] opens real `.so` files through the plugin API's host
//! loader (which checks the root module's layout and API version); tests
//! substitute in-process fakes. A library backing several entries is
//! opened once per composition.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_plugin_api::ServiceKind;
use serde::Serialize;

use crate::lifecycle::Factory;
use crate::validation::LibraryProblem;

/// What a plugin library declares about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginDescriptor {
    /// Package name, e.g. `dsh-fs-local`.
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// The plugin API version it was built against.
    pub api_version: u32,
    #[serde(serialize_with = "crate::loader::serialize_kinds")]
    pub provides: Vec<ServiceKind>,
    #[serde(serialize_with = "crate::loader::serialize_kinds")]
    pub inject: Vec<ServiceKind>,
}

pub(crate) fn serialize_kinds<S: serde::Serializer>(
    kinds: &[ServiceKind],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(kinds.iter().map(|kind| kind.name()))
}

/// An opened library.
#[derive(Clone)]
pub(crate) struct LoadedLibrary {
    pub descriptor: PluginDescriptor,
    pub factory: Arc<dyn Factory>,
}

/// Why a library could not be used, with the loader's explanation.
#[derive(Debug, Clone)]
pub(crate) struct LoadFailure {
    pub problem: LibraryProblem,
    pub message: String,
}

/// Opens libraries.
pub(crate) trait LibraryLoader {
    fn load(&self, path: &Path) -> Result<LoadedLibrary, LoadFailure>;
}

/// Opens each distinct path once (by canonical path) and hands out clones.
pub(crate) struct CachingLoader<'a> {
    inner: &'a dyn LibraryLoader,
    opened: HashMap<PathBuf, Result<LoadedLibrary, LoadFailure>>,
}

impl<'a> CachingLoader<'a> {
    pub(crate) fn new(inner: &'a dyn LibraryLoader) -> CachingLoader<'a> {
        CachingLoader {
            inner,
            opened: HashMap::new(),
        }
    }

    pub(crate) fn load(&mut self, path: &Path) -> Result<LoadedLibrary, LoadFailure> {
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.opened
            .entry(key)
            .or_insert_with(|| self.inner.load(path))
            .clone()
    }
}
