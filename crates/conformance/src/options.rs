//! What the kit runs against ([`World`]) and how ([`KitOptions`]).

use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::subprocess::SubprocessProvider;

/// The providers of one execution world. Both seams, when present, must
/// address the same world: a file written through `fs` is what a command
/// started through `subprocess` sees.
#[derive(Clone, Default)]
pub struct World {
    pub fs: Option<Arc<dyn FsProvider>>,
    pub subprocess: Option<Arc<dyn SubprocessProvider>>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("fs", &self.fs.is_some())
            .field("subprocess", &self.subprocess.is_some())
            .finish()
    }
}

/// The default per-case time limit (see [`KitOptions::case_timeout`]).
pub const DEFAULT_CASE_TIMEOUT: Duration = Duration::from_secs(30);

/// How to run the kit.
///
/// Capability switches exclude the cases a provider legitimately cannot
/// pass; an excluded case is reported [`crate::Outcome::Skipped`] with the
/// reason, never as passed.
#[derive(Debug, Clone)]
pub struct KitOptions {
    /// An absolute directory in the world under which the kit creates its
    /// unique scratch directory (`<root>/dsh-conformance-<random>`) and
    /// removes it at the end. Default `/tmp`.
    pub scratch_root: String,
    /// Run only cases whose name contains one of these comma-separated
    /// substrings (`fs.write,terminal`). `None` (or a filter with no
    /// non-empty part) runs every case. Cases left out by the filter do not
    /// appear in the report.
    pub filter: Option<String>,
    /// The `fs` provider refuses mutations: cases that check `write`,
    /// `edit`, `mkdir`, `remove` and `rename` are skipped, and fixtures are
    /// created through `subprocess` when there is one.
    pub read_only_fs: bool,
    /// The `subprocess` provider has no terminals: `spawn_terminal` cases are
    /// skipped.
    pub no_terminals: bool,
    /// The absolute directory the `fs` provider confines paths to (a
    /// sandboxing decorator), which must hold `scratch_root`. Set, the
    /// cases that reach paths outside it (`/`: [`crate::FsReach::Everywhere`])
    /// are replaced by cases that check the confinement
    /// ([`crate::FsReach::Confined`]: paths outside, `..` and symlink
    /// escapes, a cwd outside, listings of links that lead out); unset,
    /// the confinement cases do not apply. Either way the cases left out
    /// do not appear in the report, as with the filter: they are not
    /// skipped, another case checks the same calls.
    pub fs_confined_to: Option<String>,
    /// Upper bound on one case, its cleanup included; a case that takes
    /// longer fails (a provider that hangs fails instead of stalling the
    /// run). `None` = [`DEFAULT_CASE_TIMEOUT`]. Single provider calls are
    /// bounded by half of it.
    pub case_timeout: Option<Duration>,
}

impl Default for KitOptions {
    fn default() -> KitOptions {
        KitOptions {
            scratch_root: "/tmp".to_owned(),
            filter: None,
            read_only_fs: false,
            no_terminals: false,
            fs_confined_to: None,
            case_timeout: None,
        }
    }
}

impl KitOptions {
    /// The effective per-case limit.
    pub fn case_timeout(&self) -> Duration {
        self.case_timeout.unwrap_or(DEFAULT_CASE_TIMEOUT)
    }

    /// Whether the filter selects the case named `name`.
    pub fn selects(&self, name: &str) -> bool {
        match &self.filter {
            None => true,
            Some(filter) => {
                let parts: Vec<&str> = filter
                    .split(',')
                    .map(str::trim)
                    .filter(|part| !part.is_empty())
                    .collect();
                parts.is_empty() || parts.iter().any(|part| name.contains(part))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(filter: &str) -> KitOptions {
        KitOptions {
            filter: Some(filter.to_owned()),
            ..KitOptions::default()
        }
    }

    #[test]
    fn the_filter_matches_any_comma_separated_substring() {
        assert!(KitOptions::default().selects("fs.stat.errors"));
        assert!(filtered("fs.stat").selects("fs.stat.errors"));
        assert!(!filtered("fs.stat").selects("fs.list.errors"));
        assert!(filtered("terminal, fs.list").selects("fs.list.errors"));
        assert!(
            filtered(" , ").selects("anything"),
            "no non-empty part selects all"
        );
        assert!(!filtered("nothing-matches").selects("fs.stat.errors"));
    }

    #[test]
    fn defaults_are_the_full_kit_under_tmp() {
        let options = KitOptions::default();
        assert_eq!(options.scratch_root, "/tmp");
        assert!(!options.read_only_fs && !options.no_terminals && options.filter.is_none());
        assert_eq!(options.fs_confined_to, None);
        assert_eq!(options.case_timeout(), DEFAULT_CASE_TIMEOUT);
        let custom = KitOptions {
            case_timeout: Some(Duration::from_secs(3)),
            ..KitOptions::default()
        };
        assert_eq!(custom.case_timeout(), Duration::from_secs(3));
    }
}
