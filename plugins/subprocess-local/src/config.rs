//! The plugin's configuration (`config` in the manifest entry).

use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_plugin_api::{Error, Result};
use schemars::JsonSchema;
use serde::Deserialize;

/// The default grace between SIGTERM (or SIGHUP for terminals) and SIGKILL
/// when the provider itself ends work: a spec's timeout, a terminal's
/// `terminate`, and disposal.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(1000);

/// Configuration of one provider instance, as written in a manifest:
///
/// ```yaml
/// config: { cwd: /srv/work, spillDir: /var/tmp, killGraceMs: 500, durableDir: /srv/dsh-durable, durableScope: build }
/// ```
///
/// Every field is optional; unknown fields are rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// The world's cwd: where commands run when their spec names none.
    /// Absolute, an existing directory. Default: the host process's cwd at
    /// creation.
    pub cwd: Option<String>,
    /// Where the private spill directory is created (mode 0700, removed at
    /// disposal). Absolute, an existing directory. Default: the system
    /// temporary directory.
    pub spill_dir: Option<String>,
    /// Grace in milliseconds between the polite signal and SIGKILL for
    /// timeouts, terminal teardown and disposal. Default 1000.
    pub kill_grace_ms: Option<u64>,
    /// Where durable commands keep their records and output (created with
    /// mode 0700 on first use; a later `dsh` configured with the same
    /// directory lists and attaches to them). Absolute. Default:
    /// `$XDG_STATE_HOME/dsh/durable`, else `$HOME/.local/state/dsh/durable`.
    pub durable_dir: Option<String>,
    /// Whose durable commands this provider's are (docs/design.md
    /// §5.2.1): listing and forgetting see this scope's only; `attach`
    /// reaches another scope's command by its id alone. Any non-empty
    /// text. Default: the world's cwd, so worlds of different folders
    /// do not see each other's commands, and one folder's servers do.
    pub durable_scope: Option<String>,
}

/// A validated [`Config`] with its defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub cwd: PathBuf,
    pub spill_parent: PathBuf,
    pub kill_grace: Duration,
    /// `None` when it is not configured and no default exists (no `HOME`).
    pub durable_dir: Option<PathBuf>,
    /// Whose durable commands these are (see [`Config::durable_scope`]).
    pub durable_scope: String,
}

impl Config {
    /// Applies defaults and checks every path; errors are `Config` errors
    /// naming the field (`config.cwd: /nope: not found`).
    pub fn settle(&self) -> Result<Settings> {
        let cwd = match &self.cwd {
            Some(cwd) => existing_dir("config.cwd", cwd)?,
            None => std::env::current_dir().map_err(|err| {
                Error::config(format!(
                    "config.cwd: not set and the host's cwd is unreadable: {err}"
                ))
            })?,
        };
        let spill_parent = match &self.spill_dir {
            Some(dir) => existing_dir("config.spillDir", dir)?,
            None => std::env::temp_dir(),
        };
        let durable_dir = match &self.durable_dir {
            Some(dir) if Path::new(dir).is_absolute() => Some(PathBuf::from(dir)),
            Some(dir) => {
                return Err(Error::config(format!(
                    "config.durableDir: {dir:?} is not an absolute path"
                )));
            }
            None => default_durable_dir(),
        };
        let durable_scope = match &self.durable_scope {
            Some(scope) if scope.is_empty() => {
                return Err(Error::config("config.durableScope: empty"));
            }
            Some(scope) => scope.clone(),
            None => cwd.to_string_lossy().into_owned(),
        };
        Ok(Settings {
            cwd,
            spill_parent,
            durable_dir,
            durable_scope,
            kill_grace: self
                .kill_grace_ms
                .map_or(DEFAULT_KILL_GRACE, Duration::from_millis),
        })
    }
}

/// `$XDG_STATE_HOME/dsh/durable`, else `$HOME/.local/state/dsh/durable`
/// (absolute values only, as the XDG base directory rules say).
fn default_durable_dir() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local/state")))
        .map(|state| state.join("dsh/durable"))
}

fn existing_dir(field: &str, value: &str) -> Result<PathBuf> {
    let path = Path::new(value);
    if !path.is_absolute() {
        return Err(Error::config(format!(
            "{field}: {value:?} is not an absolute path"
        )));
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(path.to_path_buf()),
        Ok(_) => Err(Error::config(format!("{field}: {value}: not a directory"))),
        Err(err) => Err(Error::config(format!("{field}: {value}: {err}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::ErrorKind;

    #[test]
    fn defaults_come_from_the_host() {
        let settings = Config::default().settle().expect("defaults");
        assert_eq!(settings.cwd, std::env::current_dir().expect("cwd"));
        assert_eq!(settings.spill_parent, std::env::temp_dir());
        assert_eq!(settings.kill_grace, DEFAULT_KILL_GRACE);
        assert!(
            settings
                .durable_dir
                .is_some_and(|dir| dir.ends_with("dsh/durable") && dir.is_absolute())
        );
        assert_eq!(
            Path::new(&settings.durable_scope),
            settings.cwd,
            "durable commands are the world's cwd's"
        );
    }

    #[test]
    fn bad_paths_name_the_field() {
        for (config, field) in [
            (
                Config {
                    cwd: Some("relative".into()),
                    ..Config::default()
                },
                "config.cwd",
            ),
            (
                Config {
                    cwd: Some("/definitely/not/here".into()),
                    ..Config::default()
                },
                "config.cwd",
            ),
            (
                Config {
                    durable_dir: Some("state/durable".into()),
                    ..Config::default()
                },
                "config.durableDir",
            ),
            (
                Config {
                    durable_scope: Some(String::new()),
                    ..Config::default()
                },
                "config.durableScope",
            ),
        ] {
            let err = config.settle().expect_err("must fail");
            assert_eq!(err.kind(), ErrorKind::Config);
            assert!(err.message().starts_with(field), "{err}");
        }
    }

    #[test]
    fn a_file_is_not_a_spill_dir() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        let config = Config {
            spill_dir: Some(file.path().to_str().expect("utf-8").to_owned()),
            ..Config::default()
        };
        let err = config.settle().expect_err("a file");
        assert!(err.message().starts_with("config.spillDir"), "{err}");
        assert!(err.message().ends_with("not a directory"), "{err}");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = serde_json::from_value::<Config>(serde_json::json!({"cwdd": "/"}))
            .expect_err("unknown field");
        assert!(err.to_string().contains("unknown field `cwdd`"), "{err}");
        let config: Config =
            serde_json::from_value(serde_json::json!({"killGraceMs": 5, "spillDir": "/tmp"}))
                .expect("valid");
        assert_eq!(config.kill_grace_ms, Some(5));
    }
}
