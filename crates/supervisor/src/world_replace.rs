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
//! The new content is written to a fresh `.dsh-stage-<random>` file beside
//! the target, given the request's attribute (the write token every write
//! through `dsh-fs-e2b` stores, so that its versions always differ; an
//! attribute the filesystem refuses is a decline) and the target's
//! permission bits, and renamed over the target once it is checked to be
//! the very file opened, unchanged; the staged file is removed on any
//! failure before the rename. Past the rename the answer is `Replaced` (or
//! an error, never a decline: the file was replaced).

use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use dsh_fs_local::STAGING_PREFIX;
use dsh_fs_local::native::Describe;
use dsh_plugin_api::fs::{Edit, Version};
use dsh_plugin_api::{Error, Result};
use dsh_provider_kit::literal;
use dsh_supervisor::world::{ReplaceAnswer, Replacing};
use rustix::fs::{Mode, OFlags, XattrFlags};

/// Attempts at a staged file name not taken already.
const NAME_ATTEMPTS: usize = 8;

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
    let original = match read_text(&opened.file, target.max_bytes) {
        Ok(text) => text,
        Err(reason) => return Ok(ReplaceAnswer::Declined { reason }),
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
        let (file, opened) = open_regular(&path, target.max_bytes)?;
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
        let (staged, mut written) = match create_beside(&self.path) {
            Ok(created) => created,
            Err(reason) => return Ok(ReplaceAnswer::Declined { reason }),
        };
        let (name, value) = &replacing.attribute;
        let attribute = (name.as_str(), value.as_str());
        if let Err(reason) = replace(describe, &self, (&staged, &mut written), content, attribute) {
            let _ = std::fs::remove_file(&staged);
            return Ok(ReplaceAnswer::Declined { reason });
        }
        let now = written.metadata().map_err(|err| {
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

/// The regular file `target` (not followed: it is canonical) opened for
/// reading, and its `fstat`; a FIFO does not block the open.
fn open_regular(
    target: &Path,
    max_bytes: u64,
) -> std::result::Result<(File, std::fs::Metadata), String> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(
        rustix::fs::open(target, flags, Mode::empty())
            .map_err(|err| format!("opening it: {err}"))?,
    );
    let meta = file.metadata().map_err(|err| format!("fstat: {err}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max_bytes {
        return Err(format!("larger than {max_bytes} bytes"));
    }
    if meta.mode() & 0o7000 != 0 {
        return Err("set-id or sticky bits".into());
    }
    Ok((file, meta))
}

/// The whole of `file` as plain UTF-8 text (no NUL byte: the seam's binary
/// check is the host's to make).
fn read_text(file: &File, max_bytes: u64) -> std::result::Result<String, String> {
    let mut content = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(|err| format!("reading it: {err}"))?;
    if content.len() as u64 > max_bytes {
        return Err(format!("grew past {max_bytes} bytes"));
    }
    if content.contains(&0) {
        return Err("a NUL byte".into());
    }
    String::from_utf8(content).map_err(|_| "not UTF-8".into())
}

/// A new, empty, private file beside `target`, open for writing.
fn create_beside(target: &Path) -> std::result::Result<(PathBuf, File), String> {
    let parent = target.parent().ok_or("the root is not a file")?;
    let mut last = String::new();
    for _ in 0..NAME_ATTEMPTS {
        let staged = parent.join(format!("{STAGING_PREFIX}{:032x}", random()?));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(&staged)
        {
            Ok(file) => return Ok((staged, file)),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                last = err.to_string();
            }
            Err(err) => return Err(format!("creating {}: {err}", staged.display())),
        }
    }
    Err(format!("no free staged file name: {last}"))
}

fn random() -> std::result::Result<u128, String> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut urandom| urandom.read_exact(&mut bytes))
        .map_err(|err| format!("reading /dev/urandom: {err}"))?;
    Ok(u128::from_le_bytes(bytes))
}

/// Writes `content` into the staged file, gives it `attribute` and the
/// target's permission bits, and renames it over the target if the target
/// is still the file opened, unchanged, and the staged file has its owner
/// and group.
fn replace(
    describe: &impl Describe,
    target: &Target,
    (staged, written): (&Path, &mut File),
    content: &[u8],
    attribute: (&str, &str),
) -> std::result::Result<(), String> {
    let read = &target.opened;
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
    let (name, value) = attribute;
    rustix::fs::fsetxattr(&*written, name, value.as_bytes(), XattrFlags::empty())
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
    std::fs::rename(staged, &target.path).map_err(|err| format!("renaming over it: {err}"))
}
