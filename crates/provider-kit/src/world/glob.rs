//! Path globs of `find_files` and `grep`'s file filter.
//!
//! `*` and `?` stay within one path component, `**` spans any number,
//! `{a,b}` and `[ab]` as usual. A pattern with a `/` matches the whole path
//! below the searched directory (`src/*.rs`, `**/tests/*.rs`); one without
//! matches the name at any depth (`*.rs`, `Cargo.toml`), as in
//! `.gitignore` and `rg -g`.

use dsh_plugin_api::Result;
use globset::{GlobBuilder, GlobMatcher};

use super::errors::invalid;

/// A compiled path glob (see the module docs).
pub(super) struct PathGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    /// Compiles `pattern`; an invalid or absolute one is `InvalidInput`
    /// from `tool`, about `subject`.
    pub(super) fn new(tool: &str, subject: &str, pattern: &str) -> Result<PathGlob> {
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        if pattern.is_empty() {
            return Err(invalid(tool, subject, "the glob pattern is empty"));
        }
        if pattern.starts_with('/') {
            return Err(invalid(
                tool,
                subject,
                format!(
                    "the glob {pattern:?} is absolute; patterns match below `path` (set `path` \
                     to the directory and the pattern relative to it)"
                ),
            ));
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|err| invalid(tool, subject, format!("invalid glob {pattern:?}: {err}")))?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            by_name: !pattern.contains('/'),
        })
    }

    /// Whether `relative` (a path below the searched directory) matches.
    pub(super) fn matches(&self, relative: &str) -> bool {
        let candidate = if self.by_name {
            relative.rsplit('/').next().unwrap_or(relative)
        } else {
            relative
        };
        self.matcher.is_match(candidate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(pattern: &str) -> PathGlob {
        PathGlob::new("find_files", ".", pattern).expect("valid glob")
    }

    #[test]
    fn names_match_at_any_depth_and_paths_from_the_root() {
        assert!(glob("*.rs").matches("main.rs"));
        assert!(glob("*.rs").matches("src/deep/lib.rs"));
        assert!(!glob("*.rs").matches("src/lib.rs.bak"));
        assert!(glob("src/*.rs").matches("src/lib.rs"));
        assert!(!glob("src/*.rs").matches("src/deep/lib.rs"));
        assert!(glob("**/*.rs").matches("lib.rs"));
        assert!(glob("**/*.rs").matches("a/b/c.rs"));
        assert!(glob("./src/**").matches("src/a/b"));
        assert!(glob("*.{rs,toml}").matches("x/Cargo.toml"));
    }

    #[test]
    fn bad_patterns_are_invalid_input() {
        for pattern in ["", "/etc/*", "a[", "./"] {
            let err = PathGlob::new("find_files", ".", pattern)
                .err()
                .unwrap_or_else(|| panic!("{pattern:?} accepted"));
            assert_eq!(err.kind(), dsh_plugin_api::ErrorKind::InvalidInput);
        }
    }
}
