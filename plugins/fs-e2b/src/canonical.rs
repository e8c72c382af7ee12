//! Canonical identity in the sandbox: GNU `realpath -m`, run by envd as an
//! internal command, NUL-framed so names with newlines (and any other byte
//! but NUL) survive.
//!
//! `realpath -m` resolves every existing component (symlinks followed, `.`
//! and `..` applied physically), keeps components that do not exist (or lie
//! under a non-directory) as spelled, and applies `..` after a missing
//! component lexically — the seam's `realpath -m` semantics, computed by
//! the world itself. GNU `realpath -m` also keeps a component it cannot
//! resolve because of a symlink loop as spelled; the script below reports
//! that as the loop it is (a canonical path never contains a symlink), so
//! a path through a loop is an `Io` error, as on the host.

use dsh_plugin_api::{ErrorKind, Result};

use crate::errors::Op;
use crate::world::{EnvdTransport, World, command_failed, nul_fields};

/// A bash function: `canonical PATH` sets `$canonical` to the canonical
/// form of the absolute PATH, or prints why it cannot (realpath's complaint,
/// or the loop) on stderr and returns 1.
///
/// Fast path, builtins only: PATH is walked component by component; when no
/// component on the way is a symlink, the physical path is the lexical one
/// (`.` dropped, `..` taking back the previous component, missing
/// components kept as spelled). At the first symlink the whole path goes to
/// `realpath -m` (one process), whose answer is then checked for a
/// component it left unresolved — a symlink loop.
macro_rules! canonical_function {
    () => {
        r#"
canonical() {
  local rest=$1 lexical= part
  while [[ -n $rest ]]; do
    part=${rest%%/*}
    if [[ $rest == */* ]]; then rest=${rest#*/}; else rest=; fi
    case $part in
      '' | .) continue ;;
      ..) lexical=${lexical%/*}; continue ;;
    esac
    lexical=$lexical/$part
    if [[ -L $lexical ]]; then
      canonical=$(realpath -m -- "$1" && printf x) || return 1
      canonical=${canonical%$'\nx'}
      rest=${canonical#/} lexical=
      while [[ -n $rest ]]; do
        lexical=$lexical/${rest%%/*}
        if [[ -L $lexical ]]; then
          printf 'realpath: %s: Too many levels of symbolic links\n' "$1" >&2
          return 1
        fi
        [[ -e $lexical ]] || break
        if [[ $rest == */* ]]; then rest=${rest#*/}; else rest=; fi
      done
      return 0
    fi
  done
  canonical=${lexical:-/}
}
"#
    };
}
pub(crate) use canonical_function;

/// Prints the canonical form of every argument, each NUL-terminated.
const RESOLVE: &str = concat!(
    canonical_function!(),
    r#"for path; do canonical "$path" || exit 1; printf '%s\0' "$canonical"; done"#
);

impl<T: EnvdTransport> World<T> {
    /// The canonical forms of the absolute `paths`, in order, in one
    /// command. Fails with `Io` when a path cannot be resolved (a symlink
    /// loop) and `InvalidInput` when a resolved path is not UTF-8.
    pub(crate) async fn canonicalize(&self, op: Op<'_>, paths: &[&str]) -> Result<Vec<String>> {
        debug_assert!(paths.iter().all(|path| path.starts_with('/')));
        let command = self.shell.script(RESOLVE, paths.iter().copied());
        let output = self.control(op, &command).await?;
        if !output.status.success() {
            return Err(command_failed(op, "resolving the canonical path", &output));
        }
        parse(op, &output.stdout, paths.len())
    }

    /// The canonical form of one absolute path.
    pub(crate) async fn canonical(&self, op: Op<'_>, path: &str) -> Result<String> {
        let mut resolved = self.canonicalize(op, &[path]).await?;
        Ok(resolved.remove(0))
    }
}

/// `count` NUL-terminated absolute UTF-8 paths.
fn parse(op: Op<'_>, stdout: &[u8], count: usize) -> Result<Vec<String>> {
    let fields = nul_fields(stdout)
        .filter(|fields| fields.len() == count)
        .ok_or_else(|| {
            op.error(
                ErrorKind::Io,
                format_args!(
                    "realpath printed {} bytes that are not {count} NUL-terminated paths",
                    stdout.len()
                ),
            )
        })?;
    fields
        .into_iter()
        .map(|field| match std::str::from_utf8(field) {
            Ok(path) if path.starts_with('/') => Ok(path.to_owned()),
            Ok(path) => Err(op.error(
                ErrorKind::Io,
                format_args!("realpath printed a relative path {path:?}"),
            )),
            Err(_) => Err(op.error(
                ErrorKind::InvalidInput,
                format_args!(
                    "the resolved path {:?} is not valid UTF-8",
                    String::from_utf8_lossy(field)
                ),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_split_into_exactly_the_expected_paths() {
        let op = Op::new("contains", "/w");
        assert_eq!(
            parse(op, b"/a/new\nline\0/b\0", 2).unwrap(),
            vec!["/a/new\nline".to_owned(), "/b".to_owned()]
        );
        assert_eq!(parse(op, b"/a\0", 2).unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(parse(op, b"/a", 1).unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(parse(op, b"rel\0", 1).unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(
            parse(op, b"/\xff\0", 1).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }
}
