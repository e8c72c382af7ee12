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

/// Opens libraries; shared by the threads that open several at once.
pub(crate) trait LibraryLoader: Sync {
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
        let key = cache_key(path);
        self.opened
            .entry(key)
            .or_insert_with(|| self.inner.load(path))
            .clone()
    }

    /// Opens every distinct path of `paths` not opened yet, each on a
    /// thread of its own, so that [`CachingLoader::load`] then finds them.
    /// `dlopen` itself is serialised by the dynamic loader's lock, but what
    /// follows it — abi_stable's layout check of the root module, a few
    /// milliseconds per library and a cold `dsh`'s largest CPU cost — runs
    /// in parallel.
    pub(crate) fn open_all(&mut self, paths: &[PathBuf]) {
        let mut todo: Vec<(PathBuf, &Path)> = Vec::new();
        for path in paths {
            let key = cache_key(path);
            if !self.opened.contains_key(&key) && !todo.iter().any(|(known, _)| *known == key) {
                todo.push((key, path));
            }
        }
        let inner = self.inner;
        let opened: Vec<(PathBuf, Result<LoadedLibrary, LoadFailure>)> =
            std::thread::scope(|scope| {
                let threads: Vec<_> = todo
                    .into_iter()
                    .map(|(key, path)| scope.spawn(move || (key, inner.load(path))))
                    .collect();
                threads
                    .into_iter()
                    .map(|thread| match thread.join() {
                        Ok(opened) => opened,
                        Err(panic) => std::panic::resume_unwind(panic),
                    })
                    .collect()
            });
        self.opened.extend(opened);
    }
}

/// Paths naming one file share one entry.
fn cache_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
