//! `.gitignore` rules as a walk meets them (read through the walk's
//! [`super::Tree`], never the host's filesystem: the world may be a remote
//! sandbox).
//!
//! Rules form a chain from a directory up to the repository root: a path is
//! decided by the deepest `.gitignore` with a matching rule (within one
//! file, the last matching rule; `!` re-includes), as git does. Matching
//! uses absolute paths in the world, so each file's anchored rules
//! (`/build`) apply relative to its own directory.

use std::path::Path;
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The largest `.gitignore` read (1 MiB); a bigger one is not applied.
pub(crate) const GITIGNORE_MAX_BYTES: u64 = 1024 * 1024;

/// How many ancestors of a walk's root are searched for the repository
/// root and its `.gitignore` files.
pub(crate) const MAX_ANCESTORS: usize = 32;

/// The rules in force in one directory; `None` where none are.
pub(crate) type Rules = Option<Arc<IgnoreRules>>;

/// One directory's `.gitignore` and the rules in force above it.
pub(crate) struct IgnoreRules {
    matcher: Gitignore,
    parent: Rules,
}

impl IgnoreRules {
    /// Whether `path` (absolute, in the world) is ignored.
    pub(crate) fn ignores(&self, path: &Path, is_dir: bool) -> bool {
        let mut rules = Some(self);
        while let Some(current) = rules {
            match current.matcher.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => rules = current.parent.as_deref(),
            }
        }
        false
    }
}

/// Whether `rules` ignore `path`.
pub(crate) fn ignored(rules: &Rules, path: &Path, is_dir: bool) -> bool {
    rules
        .as_ref()
        .is_some_and(|rules| rules.ignores(path, is_dir))
}

/// The rules of `dir` (absolute) given its `.gitignore` text, on top of
/// `parent`. Lines that are not valid patterns are skipped, as git skips
/// them.
pub(crate) fn with_gitignore(parent: Rules, dir: &Path, text: &str) -> Rules {
    let mut builder = GitignoreBuilder::new(dir);
    for line in text.lines() {
        if let Err(err) = builder.add_line(None, line) {
            tracing::debug!(dir = %dir.display(), %err, "skipping a .gitignore line");
        }
    }
    match builder.build() {
        Ok(matcher) if !matcher.is_empty() => Some(Arc::new(IgnoreRules { matcher, parent })),
        Ok(_) => parent,
        Err(err) => {
            tracing::debug!(dir = %dir.display(), %err, "not applying a .gitignore");
            parent
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deeper_files_decide_and_negation_re_includes() {
        let top = with_gitignore(None, Path::new("/r"), "*.log\n/build\nvendor/\n");
        let sub = with_gitignore(top.clone(), Path::new("/r/sub"), "!keep.log\n");
        assert!(ignored(&top, Path::new("/r/a.log"), false));
        assert!(ignored(&top, Path::new("/r/deep/b.log"), false));
        assert!(ignored(&top, Path::new("/r/build"), true));
        assert!(
            !ignored(&top, Path::new("/r/sub/build"), true),
            "anchored to /r"
        );
        assert!(ignored(&top, Path::new("/r/x/vendor"), true));
        assert!(
            !ignored(&top, Path::new("/r/x/vendor"), false),
            "vendor/ is for directories"
        );
        assert!(ignored(&sub, Path::new("/r/sub/other.log"), false));
        assert!(!ignored(&sub, Path::new("/r/sub/keep.log"), false));
        assert!(!ignored(&None, Path::new("/r/a.log"), false));
    }

    #[test]
    fn empty_and_comment_only_files_add_nothing() {
        assert!(with_gitignore(None, Path::new("/r"), "# nothing\n\n").is_none());
    }
}
