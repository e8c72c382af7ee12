//! State shared by every request: the runtime-adjustable settings (`/init` may change them),
//! the user database, the process table, the polling watchers and the CPU sampler.

use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use crate::acting_user::FileAccess;
use crate::env_vars::EnvVars;
use crate::filesystem::watchers::WatcherRegistry;
use crate::metrics::CpuSampler;
use crate::process::table::ProcessTable;
use crate::sandbox_log::SandboxLog;
use crate::users::{LookupError, User, UserDb};

/// What `/init` may change at runtime.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub env_vars: EnvVars,
    pub default_user: String,
    pub default_workdir: Option<PathBuf>,
    pub access_token: Option<String>,
    /// The newest `/init` timestamp applied (unix nanoseconds); older ones are ignored.
    pub last_init_nanos: Option<i128>,
}

/// Tunables that are not part of [`EnvdConfig`](crate::EnvdConfig).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// How long a process's exit stays available to `Connect`.
    pub exit_retention: Duration,
    /// Largest accepted Connect request message (and body), in bytes.
    pub max_message_size: usize,
    /// Whose permissions file operations run with.
    pub file_access: FileAccess,
}

/// Why a request's user could not be determined.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UserError {
    /// No explicit user and no default user configured.
    #[error("no user specified")]
    Unspecified,
    /// The explicit or default user does not exist (or the database is unreadable).
    #[error("{0}")]
    Lookup(#[from] LookupError),
}

/// The daemon's shared state.
pub(crate) struct Daemon {
    settings: RwLock<Settings>,
    pub users: UserDb,
    pub processes: ProcessTable,
    pub watchers: WatcherRegistry,
    pub cpu: CpuSampler,
    pub options: Options,
    /// What envd did, for the control plane's logs.
    pub log: SandboxLog,
}

impl Daemon {
    pub(crate) fn new(settings: Settings, options: Options, log: SandboxLog) -> Self {
        Self {
            settings: RwLock::new(settings),
            users: UserDb::default(),
            processes: ProcessTable::new(options.exit_retention),
            watchers: WatcherRegistry::default(),
            cpu: CpuSampler::new(),
            options,
            log,
        }
    }

    /// Read access to the current settings (never held across an await).
    pub(crate) fn settings(&self) -> RwLockReadGuard<'_, Settings> {
        self.settings
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Write access to the current settings (never held across an await).
    pub(crate) fn settings_mut(&self) -> RwLockWriteGuard<'_, Settings> {
        self.settings
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The user named `explicit`, or the default user. The returned name is the one looked up.
    pub(crate) fn resolve_user(&self, explicit: Option<&str>) -> Result<User, (String, UserError)> {
        let name = match explicit {
            Some(name) => name.to_owned(),
            None => {
                let default_user = self.settings().default_user.clone();
                if default_user.is_empty() {
                    return Err((String::new(), UserError::Unspecified));
                }
                default_user
            }
        };
        self.users
            .user(&name)
            .map_err(|err| (name, UserError::Lookup(err)))
    }

    /// The default working directory, if one is set.
    pub(crate) fn default_workdir(&self) -> Option<PathBuf> {
        self.settings().default_workdir.clone()
    }

    /// The access token, if the sandbox is secure.
    pub(crate) fn access_token(&self) -> Option<String> {
        self.settings().access_token.clone()
    }
}
