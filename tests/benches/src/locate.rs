//! Where the benchmark finds the plugin libraries and the manifest.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use dsh_host::SearchPath;
use dsh_plugin_api::host::library_file_name;

/// Chooses where benchmark files live (default: the system's temporary
/// directory).
pub const BENCH_DIR_ENV: &str = "DSH_BENCH_DIR";

/// The plugins of the local composition (`config/local.yaml`).
pub const LOCAL_PLUGINS: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];

/// A fresh directory for benchmark files, in `$DSH_BENCH_DIR` if set, else
/// in the system's temporary directory; removed when dropped.
pub fn bench_dir() -> Result<tempfile::TempDir> {
    match std::env::var_os(BENCH_DIR_ENV) {
        Some(base) => tempfile::tempdir_in(&base).with_context(|| {
            format!(
                "create a directory in {BENCH_DIR_ENV}={}",
                base.to_string_lossy()
            )
        }),
        None => tempfile::tempdir().context("create a temporary directory"),
    }
}

/// The local composition's manifest in this checkout.
pub fn local_manifest() -> Result<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/local.yaml");
    path.canonicalize()
        .with_context(|| format!("locate the local manifest {}", path.display()))
}

/// The directory holding the plugin libraries: the first directory of
/// `DSH_PLUGIN_PATH` if set, else the build's `deps` directory next to the
/// running benchmark (where cargo puts the cdylibs of this crate's
/// dependencies, built with the same profile).
pub fn plugin_dir() -> Result<PathBuf> {
    if let Some(value) = std::env::var_os(dsh_host::resolve::PLUGIN_PATH_ENV) {
        let Some(dir) = std::env::split_paths(&value).find(|dir| !dir.as_os_str().is_empty())
        else {
            bail!(
                "{} is set but names no directory",
                dsh_host::resolve::PLUGIN_PATH_ENV
            );
        };
        return Ok(dir);
    }
    let exe = std::env::current_exe().context("locate the running benchmark")?;
    let exe_dir = exe.parent().context("the benchmark's directory")?;
    // Bench targets run from target/<profile>/deps, examples from
    // target/<profile>/examples.
    let candidates = [exe_dir.to_path_buf(), exe_dir.join("../deps")];
    let wanted = library_file_name(LOCAL_PLUGINS[0]);
    candidates
        .iter()
        .find(|dir| dir.join(&wanted).is_file())
        .cloned()
        .with_context(|| {
            format!(
                "{wanted} is not next to {} (build the plugins with the same profile, or set {})",
                exe.display(),
                dsh_host::resolve::PLUGIN_PATH_ENV
            )
        })
}

/// A search path of exactly [`plugin_dir`].
pub fn plugin_search() -> Result<SearchPath> {
    Ok(SearchPath::new([plugin_dir()?]))
}

/// The library file of `package` in [`plugin_dir`], which must exist.
pub fn plugin_library(package: &str) -> Result<PathBuf> {
    let path = plugin_dir()?.join(library_file_name(package));
    if !path.is_file() {
        bail!("locate plugin {package}: {} does not exist", path.display());
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_manifest_names_both_local_plugins() {
        let manifest = local_manifest().expect("manifest");
        let text = std::fs::read_to_string(&manifest).expect("read");
        for plugin in LOCAL_PLUGINS {
            assert!(
                text.contains(plugin),
                "{} lacks {plugin}",
                manifest.display()
            );
        }
    }

    #[test]
    fn plugin_libraries_are_found_next_to_the_build_and_a_missing_one_is_named() {
        // Unit tests run from target/<profile>/deps, beside the cdylibs of
        // this crate's dependencies.
        for plugin in LOCAL_PLUGINS {
            let path = plugin_library(plugin).expect("built with the tests");
            assert!(path.is_file(), "{}", path.display());
        }
        let err = plugin_library("dsh-no-such-plugin").expect_err("missing");
        let message = err.to_string();
        assert!(
            message.starts_with("locate plugin dsh-no-such-plugin: ")
                && message.ends_with("libdsh_no_such_plugin.so does not exist"),
            "{message}"
        );
    }
}
