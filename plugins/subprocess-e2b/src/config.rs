//! The plugin's configuration (`config` in the manifest entry).

use std::time::Duration;

use dsh_plugin_api::{Error, Result};
use schemars::JsonSchema;
use serde::Deserialize;

/// The default grace between the polite signal (SIGTERM, SIGHUP for
/// terminals) and SIGKILL when the provider itself ends work: a timeout, a
/// terminal's `terminate`, disposal.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(1000);

/// The default sandbox user (E2B templates run commands as `user`).
pub const DEFAULT_USER: &str = "user";

/// The default directory in the sandbox under which the private spill
/// directory is created.
pub const DEFAULT_SPILL_PARENT: &str = "/tmp";

/// Configuration of one provider instance:
///
/// ```yaml
/// config: { killGraceMs: 500, user: user, spillDir: /tmp }
/// ```
///
/// Every field is optional; unknown fields are rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Grace in milliseconds between the polite signal and SIGKILL for
    /// timeouts, terminal teardown and disposal. Default 1000.
    pub kill_grace_ms: Option<u64>,
    /// The sandbox user commands and terminals run as. Default `user`.
    pub user: Option<String>,
    /// Absolute directory in the sandbox under which the private spill
    /// directory (mode 0700, the user's) is created. Default `/tmp`.
    pub spill_dir: Option<String>,
}

/// A validated [`Config`] with its defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub kill_grace: Duration,
    pub user: String,
    pub spill_parent: String,
}

impl Config {
    /// Applies defaults and checks every field; errors are `Config` errors
    /// naming the field.
    pub fn settle(&self) -> Result<Settings> {
        let user = self.user.clone().unwrap_or_else(|| DEFAULT_USER.to_owned());
        let valid_user = user
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
            && user
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            && user.len() <= 32;
        if !valid_user {
            return Err(Error::config(format!(
                "config.user: {user:?} is not a user name ([a-z_][a-z0-9_-]*, at most 32 characters)"
            )));
        }
        let spill_parent = self
            .spill_dir
            .clone()
            .unwrap_or_else(|| DEFAULT_SPILL_PARENT.to_owned());
        if !spill_parent.starts_with('/') || spill_parent.contains('\0') {
            return Err(Error::config(format!(
                "config.spillDir: {spill_parent:?} is not an absolute path"
            )));
        }
        Ok(Settings {
            kill_grace: self
                .kill_grace_ms
                .map_or(DEFAULT_KILL_GRACE, Duration::from_millis),
            user,
            spill_parent: spill_parent.trim_end_matches('/').to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::ErrorKind;

    #[test]
    fn defaults() {
        let settings = Config::default().settle().unwrap();
        assert_eq!(settings.kill_grace, DEFAULT_KILL_GRACE);
        assert_eq!(settings.user, "user");
        assert_eq!(settings.spill_parent, "/tmp");
    }

    #[test]
    fn bad_fields_are_named() {
        for (config, field) in [
            (
                Config {
                    user: Some("Root;rm".into()),
                    ..Config::default()
                },
                "config.user",
            ),
            (
                Config {
                    user: Some(String::new()),
                    ..Config::default()
                },
                "config.user",
            ),
            (
                Config {
                    spill_dir: Some("tmp".into()),
                    ..Config::default()
                },
                "config.spillDir",
            ),
        ] {
            let err = config.settle().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config);
            assert!(err.message().starts_with(field), "{err}");
        }
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err =
            serde_json::from_value::<Config>(serde_json::json!({"killGrace": 1})).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `killGrace`"),
            "{err}"
        );
        let config: Config =
            serde_json::from_value(serde_json::json!({"killGraceMs": 5, "spillDir": "/var/tmp/"}))
                .unwrap();
        assert_eq!(config.settle().unwrap().spill_parent, "/var/tmp");
    }
}
