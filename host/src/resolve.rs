//! Where a plugin's library file is: the name → file rule and the search
//! path.
//!
//! **Name rule.** A manifest `name` is a package name, optionally with an
//! npm-style scope: `dsh-fs-local`, `@deepseek-ai/dsh-e2b-owner`. The scope
//! is dropped, `-` becomes `_`, and the file is `lib<name>.so` — so both of
//! those map to `libdsh_fs_local.so` and `libdsh_e2b_owner.so`, the files
//! cargo builds for crates with `[lib] name = "dsh_fs_local"` /
//! `"dsh_e2b_owner"`. The package name (scope dropped) is also what must
//! equal the library's descriptor name.
//!
//! **Renamed plugins.** A plugin's old name keeps loading it: [`RENAMED`]
//! maps it to the current one before both steps (the old `dsh-e2b` is
//! `libdsh_e2b_owner.so`, whose descriptor says `dsh-e2b-owner`), and
//! loading a composition warns that the old name is deprecated.
//!
//! **Search.** An entry's explicit `path` is used as is (relative to the
//! manifest's directory). Otherwise the file is looked up in each directory
//! of `DSH_PLUGIN_PATH` (colon-separated, empty parts ignored), in order,
//! then in the directory of the running executable (for `dsh`, the
//! directory it was installed or built into, where cargo also puts the
//! plugin libraries). The first existing file wins. A miss names every
//! place that was tried.

use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable listing plugin directories.
pub const PLUGIN_PATH_ENV: &str = "DSH_PLUGIN_PATH";

/// Plugins renamed since they first shipped, `(old package name, current)`:
/// the one table of aliases.
pub const RENAMED: &[(&str, &str)] = &[("dsh-e2b", "dsh-e2b-owner")];

/// The package a manifest name stands for: the scope dropped (`@scope/pkg`
/// → `pkg`) and a renamed plugin's old name replaced by its current one
/// ([`RENAMED`]); other names unchanged.
pub fn package_name(name: &str) -> &str {
    let package = written_package(name);
    renamed(name).unwrap_or(package)
}

/// The current name of the plugin `name` (scope dropped) names, if that is
/// an old name ([`RENAMED`]).
pub fn renamed(name: &str) -> Option<&'static str> {
    let package = written_package(name);
    RENAMED
        .iter()
        .find(|(old, _)| *old == package)
        .map(|(_, current)| *current)
}

fn written_package(name: &str) -> &str {
    match name.strip_prefix('@').and_then(|rest| rest.split_once('/')) {
        Some((_, package)) => package,
        None => name,
    }
}

/// Checks a manifest name against the rule above; the error says what is
/// wrong with it. (The manifest's own rule: `dsh-manifest` checks every
/// entry's name as it reads it.)
pub use dsh_manifest::validate_plugin_name;

/// The library file a (valid) manifest name maps to: `lib<package with - as _>.so`.
pub fn library_file_name(name: &str) -> String {
    format!("lib{}.so", package_name(name).replace('-', "_"))
}

/// Where a directory on the search path came from (for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchOrigin {
    /// A directory of `DSH_PLUGIN_PATH`.
    PluginPathEnv,
    /// The running executable's directory.
    ExecutableDir,
    /// Given explicitly by the embedding program.
    Explicit,
}

impl fmt::Display for SearchOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SearchOrigin::PluginPathEnv => PLUGIN_PATH_ENV,
            SearchOrigin::ExecutableDir => "executable's directory",
            SearchOrigin::Explicit => "search path",
        })
    }
}

/// The ordered directories searched for libraries of entries without a
/// `path`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchPath {
    dirs: Vec<(PathBuf, SearchOrigin)>,
}

impl SearchPath {
    /// `DSH_PLUGIN_PATH`'s directories, then the running executable's
    /// directory (skipped if it cannot be determined).
    pub fn from_env() -> SearchPath {
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf));
        SearchPath::from_parts(std::env::var_os(PLUGIN_PATH_ENV).as_deref(), exe_dir)
    }

    fn from_parts(plugin_path: Option<&std::ffi::OsStr>, exe_dir: Option<PathBuf>) -> SearchPath {
        let mut search = SearchPath::default();
        if let Some(value) = plugin_path {
            for dir in std::env::split_paths(value) {
                if !dir.as_os_str().is_empty() {
                    search.dirs.push((dir, SearchOrigin::PluginPathEnv));
                }
            }
        }
        if let Some(dir) = exe_dir {
            search.dirs.push((dir, SearchOrigin::ExecutableDir));
        }
        search
    }

    /// Exactly `dirs`, in order.
    pub fn new<I, P>(dirs: I) -> SearchPath
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        SearchPath {
            dirs: dirs
                .into_iter()
                .map(|dir| (dir.into(), SearchOrigin::Explicit))
                .collect(),
        }
    }

    /// The directories with where each came from.
    pub fn dirs(&self) -> &[(PathBuf, SearchOrigin)] {
        &self.dirs
    }
}

/// Why a library could not be located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveFailure {
    /// The entry's explicit `path` names nothing (or not a file).
    PathMissing { path: PathBuf, reason: String },
    /// No directory of the search path holds the file.
    NotOnSearchPath {
        file_name: String,
        /// Every candidate tried, with where its directory came from.
        tried: Vec<(PathBuf, SearchOrigin)>,
    },
}

impl fmt::Display for ResolveFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveFailure::PathMissing { path, reason } => {
                write!(f, "library {}: {reason}", path.display())
            }
            ResolveFailure::NotOnSearchPath { file_name, tried } if tried.is_empty() => write!(
                f,
                "library {file_name} not found: the search path is empty (set {PLUGIN_PATH_ENV} or give the entry a `path`)"
            ),
            ResolveFailure::NotOnSearchPath { file_name, tried } => {
                write!(f, "library {file_name} not found; searched ")?;
                for (index, (path, origin)) in tried.iter().enumerate() {
                    if index > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{} ({origin})", path.display())?;
                }
                write!(f, " (set {PLUGIN_PATH_ENV} or give the entry a `path`)")
            }
        }
    }
}

/// Locates the library for a plugin named `name` with an optional explicit
/// `path`; `base_dir` anchors a relative `path` (the manifest's directory,
/// or the current directory when the manifest has none).
pub fn resolve_library(
    name: &str,
    path: Option<&Path>,
    base_dir: Option<&Path>,
    search: &SearchPath,
) -> Result<PathBuf, ResolveFailure> {
    if let Some(path) = path {
        let full = match base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path.to_path_buf(),
        };
        return match std::fs::metadata(&full) {
            Ok(meta) if meta.is_file() => Ok(full),
            Ok(_) => Err(ResolveFailure::PathMissing {
                path: full,
                reason: "is not a regular file".to_owned(),
            }),
            Err(err) => Err(ResolveFailure::PathMissing {
                path: full,
                reason: err.to_string(),
            }),
        };
    }
    let file_name = library_file_name(name);
    let mut tried = Vec::with_capacity(search.dirs.len());
    for (dir, origin) in &search.dirs {
        let candidate = dir.join(&file_name);
        if candidate.is_file() {
            return Ok(candidate);
        }
        tried.push((candidate, *origin));
    }
    Err(ResolveFailure::NotOnSearchPath { file_name, tried })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_library_files() {
        assert_eq!(library_file_name("dsh-fs-local"), "libdsh_fs_local.so");
        assert_eq!(
            library_file_name("@deepseek-ai/dsh-e2b-owner"),
            "libdsh_e2b_owner.so"
        );
        assert_eq!(library_file_name("plain_name"), "libplain_name.so");
        assert_eq!(package_name("@deepseek-ai/dsh-fs-e2b"), "dsh-fs-e2b");
        assert_eq!(package_name("dsh-e2b-owner"), "dsh-e2b-owner");
    }

    #[test]
    fn a_renamed_plugins_old_name_resolves_to_the_current_library() {
        for old in ["dsh-e2b", "@deepseek-ai/dsh-e2b"] {
            assert_eq!(renamed(old), Some("dsh-e2b-owner"), "{old}");
            assert_eq!(package_name(old), "dsh-e2b-owner", "{old}");
            assert_eq!(library_file_name(old), "libdsh_e2b_owner.so", "{old}");
        }
        // Only the exact old package name is an alias.
        for name in ["dsh-e2b-owner", "dsh-e2b-gateway", "dsh-fs-e2b", "dsh_e2b"] {
            assert_eq!(renamed(name), None, "{name}");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("libdsh_e2b_owner.so"), b"").expect("write");
        let search = SearchPath::new([dir.path()]);
        assert_eq!(
            resolve_library("dsh-e2b", None, None, &search).expect("found"),
            dir.path().join("libdsh_e2b_owner.so")
        );
    }

    #[test]
    fn explicit_paths_are_manifest_relative() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("libx.so"), b"").expect("write");
        let found = resolve_library(
            "x",
            Some(Path::new("libx.so")),
            Some(dir.path()),
            &SearchPath::default(),
        )
        .expect("found");
        assert_eq!(found, dir.path().join("libx.so"));

        let err = resolve_library(
            "x",
            Some(Path::new("missing.so")),
            Some(dir.path()),
            &SearchPath::default(),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("missing.so"), "{text}");

        let err = resolve_library("x", Some(dir.path()), None, &SearchPath::default()).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn the_search_path_is_tried_in_order_and_every_miss_is_named() {
        let first = tempfile::tempdir().expect("tempdir");
        let second = tempfile::tempdir().expect("tempdir");
        std::fs::write(second.path().join("libdsh_probe.so"), b"").expect("write");
        std::fs::write(first.path().join("libother.so"), b"").expect("write");
        let search = SearchPath::new([first.path(), second.path()]);
        assert_eq!(
            resolve_library("dsh-probe", None, None, &search).expect("found"),
            second.path().join("libdsh_probe.so")
        );
        let err = resolve_library("@x/missing-one", None, None, &search).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("libmissing_one.so not found"), "{text}");
        assert!(
            text.contains(&first.path().join("libmissing_one.so").display().to_string()),
            "{text}"
        );
        assert!(
            text.contains(
                &second
                    .path()
                    .join("libmissing_one.so")
                    .display()
                    .to_string()
            ),
            "{text}"
        );
        let err = resolve_library("x", None, None, &SearchPath::default()).unwrap_err();
        assert!(err.to_string().contains("search path is empty"), "{err}");
    }

    #[test]
    fn env_search_path_skips_empty_parts_and_ends_with_the_executable_dir() {
        let search = SearchPath::from_parts(
            Some(std::ffi::OsStr::new("/a::/b:")),
            Some(PathBuf::from("/bin-dir")),
        );
        assert_eq!(
            search.dirs(),
            &[
                (PathBuf::from("/a"), SearchOrigin::PluginPathEnv),
                (PathBuf::from("/b"), SearchOrigin::PluginPathEnv),
                (PathBuf::from("/bin-dir"), SearchOrigin::ExecutableDir),
            ]
        );
        assert_eq!(SearchPath::from_parts(None, None).dirs(), &[]);
    }
}
