//! Path globs of walks and searches, in `rg -g` syntax.
//!
//! `*` and `?` stay within one path component, `**` spans any number,
//! `{a,b}` and `[ab]` as usual. A pattern with a `/` matches the whole path
//! below the walked root (`src/*.rs`, `**/tests/*.rs`); one without
//! matches the name at any depth (`*.rs`, `Cargo.toml`), as in
//! `.gitignore` and `rg -g`. A leading `!` makes a glob exclude.

use dsh_plugin_api::{Error, Result};
use globset::{GlobBuilder, GlobMatcher};

/// One compiled path glob (see the module docs).
pub struct PathGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    /// Compiles `pattern`; an empty, invalid or absolute one is
    /// `InvalidInput` from `operation`.
    pub fn new(operation: &str, pattern: &str) -> Result<PathGlob> {
        let invalid = |detail: String| Error::invalid_input(format!("{operation}: {detail}"));
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        if pattern.is_empty() {
            return Err(invalid("the glob pattern is empty".into()));
        }
        if pattern.starts_with('/') {
            return Err(invalid(format!(
                "the glob {pattern:?} is absolute; patterns match below the searched directory \
                 (set the path to the directory and the pattern relative to it)"
            )));
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|err| invalid(format!("invalid glob {pattern:?}: {err}")))?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            by_name: !pattern.contains('/'),
        })
    }

    /// Whether `relative` (a path below the walked root) matches.
    pub fn matches(&self, relative: &str) -> bool {
        let candidate = if self.by_name {
            relative.rsplit('/').next().unwrap_or(relative)
        } else {
            relative
        };
        self.matcher.is_match(candidate)
    }
}

/// Include and exclude globs together (`rg -g` with several patterns).
#[derive(Default)]
pub struct Globs {
    include: Vec<PathGlob>,
    exclude: Vec<PathGlob>,
}

impl Globs {
    /// Compiles `patterns` (`!` prefix: exclude); errors as [`PathGlob::new`].
    pub fn new(operation: &str, patterns: &[String]) -> Result<Globs> {
        let mut globs = Globs::default();
        for pattern in patterns {
            match pattern.strip_prefix('!') {
                Some(excluded) => globs.exclude.push(PathGlob::new(operation, excluded)?),
                None => globs.include.push(PathGlob::new(operation, pattern)?),
            }
        }
        Ok(globs)
    }

    /// Whether an exclude glob matches `relative` (a directory it matches
    /// is not descended into).
    pub fn excludes(&self, relative: &str) -> bool {
        self.exclude.iter().any(|glob| glob.matches(relative))
    }

    /// Whether `relative` is admitted: some include glob matches (or there
    /// is none) and no exclude glob does.
    pub fn admits(&self, relative: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|glob| glob.matches(relative)))
            && !self.excludes(relative)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(pattern: &str) -> PathGlob {
        PathGlob::new("walk", pattern).expect("valid glob")
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
    fn excludes_win_over_includes() {
        let globs = Globs::new("walk", &["*.rs".into(), "!gen_*".into()]).expect("globs");
        assert!(globs.admits("src/a.rs"));
        assert!(!globs.admits("src/gen_a.rs"));
        assert!(!globs.admits("README"));
        assert!(globs.excludes("x/gen_dir"));
        assert!(Globs::default().admits("anything"));
    }

    #[test]
    fn bad_patterns_are_invalid_input() {
        for pattern in ["", "/etc/*", "a[", "./", "!"] {
            let err = Globs::new("walk", &[pattern.into()])
                .err()
                .unwrap_or_else(|| panic!("{pattern:?} accepted"));
            assert_eq!(err.kind(), dsh_plugin_api::ErrorKind::InvalidInput);
            assert!(err.message().starts_with("walk: "), "{err}");
        }
    }
}
