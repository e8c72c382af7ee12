//! `world`'s edit and write ([`dsh_supervisor::world::WorldOp::Edit`],
//! [`dsh_supervisor::world::WorldOp::Write`]): the `fs` seam's `edit`, and
//! its `write` over an existing file, done where the file is, as the
//! world's user, in one round trip where the envd way takes two to four or
//! more (docs/design.md §6.3).
//!
//! They do only what the envd way would do to the same file, and decline
//! everything else ([`ReplaceAnswer::Declined`], nothing changed) for the
//! host to do the envd way, which says precisely what is wrong: a path
//! that does not resolve to a regular file of at most the request's size
//! (a write creating a file included), a file whose text is not plain UTF-8
//! (an edit's), one with set-id or sticky bits, one whose owner and group a
//! fresh file of this user would not get (the envd way's staged copy keeps
//! what the user may keep of them, a group of theirs say; a file created
//! here does not), a stale version, and a file changed meanwhile. Edits
//! that do not apply to the text are the seam's own refusal
//! ([`ReplaceAnswer::Refused`]), computed by the same literal engine the
//! host uses.
//!
//! The new content is written to a fresh staged file beside the target
//! (`dsh-fs-local`'s, removed unless published), given the request's
//! attribute (the write token every write
//! through `dsh-fs-e2b` stores, so that its versions always differ; an
//! attribute the filesystem refuses is a decline) and the target's
//! permission bits, and renamed over the target once it is checked to be
//! the very file opened, unchanged. Past the rename the answer is `Replaced` (or
//! an error, never a decline: the file was replaced).

use std::fs::{File, Permissions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use dsh_fs_local::native::{Describe, Op, Staged, read_all};
use dsh_plugin_api::fs::{Edit, Version};
use dsh_plugin_api::{Error, Result};
use dsh_provider_kit::literal;
use dsh_provider_kit::utf8::into_text;
use dsh_supervisor::world::{ReplaceAnswer, Replacing};
use rustix::fs::{Mode, OFlags, XattrFlags};

/// Applies `edits` to the file `target` names (relative to `cwd`); see the
/// module's documentation. `Err` only after the file was replaced (its new
/// state could not be described).
pub fn edit(
    describe: &impl Describe,
    cwd: &Path,
    target: &Replacing,
    edits: &[Edit],
) -> Result<ReplaceAnswer> {
    let opened = match Target::open(describe, cwd, target) {
        Ok(opened) => opened,
        Err(reason) => return Ok(ReplaceAnswer::Declined { reason }),
    };
    // Read and checked as the envd way reads it (`read_all`, then the
    // kit's binary and UTF-8 checks).
    let op = Op::new("edit", &opened.path);
    let original = match read_all(op, &opened.file, opened.opened.len()) {
        Ok(content) if content.len() as u64 > target.max_bytes => {
            return Ok(declined(format_args!(
                "grew past {} bytes",
                target.max_bytes
            )));
        }
        Ok(content) => into_text(&op, content),
        Err(err) => Err(err),
    };
    let original = match original {
        Ok(text) => text,
        Err(err) => return Ok(declined(err)),
    };
    let applied = match literal::apply(&original, edits) {
        Ok(applied) => applied,
        Err(failure) => {
            return Ok(ReplaceAnswer::Refused {
                failure: failure.to_string(),
            });
        }
    };
    drop(original);
    opened.store(
        describe,
        applied.text.as_bytes(),
        target,
        applied.replacements as u64,
    )
}

/// Replaces the content of the existing file `target` names (relative to
/// `cwd`) with `content`; see the module's documentation. `Err` only after
/// the file was replaced.
pub fn write(
    describe: &impl Describe,
    cwd: &Path,
    target: &Replacing,
    content: &[u8],
) -> Result<ReplaceAnswer> {
    match Target::open(describe, cwd, target) {
        Ok(opened) => opened.store(describe, content, target, 0),
        Err(reason) => Ok(ReplaceAnswer::Declined { reason }),
    }
}

fn declined(reason: impl std::fmt::Display) -> ReplaceAnswer {
    ReplaceAnswer::Declined {
        reason: reason.to_string(),
    }
}

/// The existing regular file a request replaces, open for reading.
struct Target {
    /// Canonical.
    path: PathBuf,
    file: File,
    /// Its `fstat` when opened.
    opened: std::fs::Metadata,
    /// Its version then.
    version: Version,
}

impl Target {
    /// The regular file `target` names, if it is at its version when one
    /// is given; `Err`: the reason to decline.
    fn open(
        describe: &impl Describe,
        cwd: &Path,
        target: &Replacing,
    ) -> std::result::Result<Target, String> {
        let path = std::fs::canonicalize(cwd.join(&target.path))
            .map_err(|err| format!("resolving it: {err}"))?;
        // Not followed (the path is canonical); a FIFO does not block.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = File::from(
            rustix::fs::open(&path, flags, Mode::empty())
                .map_err(|err| format!("opening it: {err}"))?,
        );
        let opened = file.metadata().map_err(|err| format!("fstat: {err}"))?;
        if !opened.is_file() {
            return Err("not a regular file".into());
        }
        if opened.len() > target.max_bytes {
            return Err(format!("larger than {} bytes", target.max_bytes));
        }
        if opened.mode() & 0o7000 != 0 {
            return Err("set-id or sticky bits".into());
        }
        let current = describe.version(&path, &opened);
        if target
            .version
            .as_ref()
            .is_some_and(|version| *version != current)
        {
            return Err("the file is at another version".into());
        }
        Ok(Target {
            path,
            file,
            opened,
            version: current,
        })
    }

    /// Stores `content` in place of the file (see [`replace`]) with the
    /// attribute `replacing` names, answering its new version and
    /// `replacements`.
    fn store(
        self,
        describe: &impl Describe,
        content: &[u8],
        replacing: &Replacing,
        replacements: u64,
    ) -> Result<ReplaceAnswer> {
        let Some(parent) = self.path.parent() else {
            return Ok(declined("the root is not a file"));
        };
        let staged = match Staged::create(Op::new("replace", &self.path), parent) {
            Ok(staged) => staged,
            Err(err) => return Ok(declined(err)),
        };
        let (name, value) = &replacing.attribute;
        if let Err(reason) = replace(describe, &self, &staged, content, (name, value)) {
            // Dropping the staged file removes it.
            return Ok(ReplaceAnswer::Declined { reason });
        }
        let now = staged.published().metadata().map_err(|err| {
            Error::from_io(
                &format!("replace {}: stored, but describing it", self.path.display()),
                &err,
            )
        })?;
        Ok(ReplaceAnswer::Replaced {
            version: describe.version(&self.path, &now),
            replacements,
        })
    }
}

/// Writes `content` into the staged file, gives it `attribute` and the
/// target's permission bits, and renames it over the target if the target
/// is still the file opened, unchanged, and the staged file has its owner
/// and group.
fn replace(
    describe: &impl Describe,
    target: &Target,
    staged: &Staged,
    content: &[u8],
    (name, value): (&str, &str),
) -> std::result::Result<(), String> {
    let read = &target.opened;
    let mut written = staged.file();
    let fresh = written.metadata().map_err(|err| format!("fstat: {err}"))?;
    if (fresh.uid(), fresh.gid()) != (read.uid(), read.gid()) {
        return Err(format!(
            "owned by {}:{} where a new file is {}:{}",
            read.uid(),
            read.gid(),
            fresh.uid(),
            fresh.gid()
        ));
    }
    written
        .write_all(content)
        .map_err(|err| format!("writing the staged file: {err}"))?;
    // The attribute first: a user attribute needs write permission, which
    // the target's mode may not give.
    rustix::fs::fsetxattr(written, name, value.as_bytes(), XattrFlags::empty())
        .map_err(|err| format!("setting {name}: {err}"))?;
    written
        .set_permissions(Permissions::from_mode(read.mode() & 0o777))
        .map_err(|err| format!("setting its mode: {err}"))?;
    let now = std::fs::symlink_metadata(&target.path).map_err(|err| format!("lstat: {err}"))?;
    if (now.dev(), now.ino()) != (read.dev(), read.ino())
        || describe.version(&target.path, &now) != target.version
    {
        return Err("changed meanwhile".into());
    }
    std::fs::rename(staged.staged_path(), &target.path)
        .map_err(|err| format!("renaming over it: {err}"))
}
