//! `world`'s edit ([`dsh_supervisor::world::WorldOp::Edit`]): the `fs` seam's `edit` done where the
//! file is, as the world's user, in one round trip where the envd way takes
//! four or more (docs/design.md §6.3).
//!
//! It does only what the envd way would do to the same file, and declines
//! everything else ([`EditAnswer::Declined`], nothing changed) for the host
//! to edit the envd way, which says precisely what is wrong: a path that
//! does not resolve to a regular file of at most the request's size, a file
//! whose text is not plain UTF-8, one with set-id or sticky bits, one whose
//! owner and group a fresh file of this user would not get (the envd way's
//! staged copy keeps what the user may keep of them, a group of theirs
//! say; a file created here does not), a stale version, and a file changed
//! while it was being edited. Edits that do not apply to the
//! text are the seam's own refusal ([`EditAnswer::Refused`]), computed by
//! the same literal engine the host uses.
//!
//! The new text is written to a fresh `.dsh-stage-<random>` file beside the
//! target, given the target's permission bits and the request's attribute
//! (the write token every write through `dsh-fs-e2b` stores, so that its
//! versions always differ; an attribute the filesystem refuses is a
//! decline), and renamed over it once the
//! target is checked to be the very file read, unchanged; the staged file is
//! removed on any failure before the rename. Past the rename the answer is
//! `Edited` (or an error, never a decline: the edit happened).

use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use dsh_fs_local::STAGING_PREFIX;
use dsh_fs_local::native::Describe;
use dsh_plugin_api::fs::Version;
use dsh_plugin_api::{Error, Result};
use dsh_provider_kit::literal;
use dsh_supervisor::world::{EditAnswer, EditRequest};
use rustix::fs::{Mode, OFlags, XattrFlags};

/// Attempts at a staged file name not taken already.
const NAME_ATTEMPTS: usize = 8;

/// Applies the request's edits to the file its path resolves to (relative
/// to `cwd`), if it is at the request's version when one is given; see the
/// module's documentation. `Err` only after the file was replaced (its new
/// state could not be described).
pub fn edit(describe: &impl Describe, cwd: &Path, request: &EditRequest) -> Result<EditAnswer> {
    let EditRequest {
        path,
        edits,
        version,
        max_bytes,
        attribute,
    } = request;
    let max_bytes = *max_bytes;
    let target = match std::fs::canonicalize(cwd.join(path)) {
        Ok(target) => target,
        Err(err) => return Ok(declined(format_args!("resolving it: {err}"))),
    };
    let (file, read) = match open_regular(&target, max_bytes) {
        Ok(opened) => opened,
        Err(reason) => return Ok(EditAnswer::Declined { reason }),
    };
    let read_version = describe.version(&target, &read);
    if version
        .as_ref()
        .is_some_and(|version| *version != read_version)
    {
        return Ok(declined("the file is at another version"));
    }
    let original = match read_text(file, max_bytes) {
        Ok(text) => text,
        Err(reason) => return Ok(EditAnswer::Declined { reason }),
    };
    let applied = match literal::apply(&original, edits) {
        Ok(applied) => applied,
        Err(failure) => {
            return Ok(EditAnswer::Refused {
                failure: failure.to_string(),
            });
        }
    };
    drop(original);
    let (staged, mut written) = match create_beside(&target) {
        Ok(created) => created,
        Err(reason) => return Ok(EditAnswer::Declined { reason }),
    };
    let replaced = replace(
        describe,
        (&target, &read, &read_version),
        (&staged, &mut written),
        applied.text.as_bytes(),
        (&attribute.0, &attribute.1),
    );
    if let Err(reason) = replaced {
        let _ = std::fs::remove_file(&staged);
        return Ok(EditAnswer::Declined { reason });
    }
    let now = written.metadata().map_err(|err| {
        Error::from_io(
            &format!("edit {}: stored, but describing it", target.display()),
            &err,
        )
    })?;
    Ok(EditAnswer::Edited {
        version: describe.version(&target, &now),
        replacements: applied.replacements as u64,
    })
}

fn declined(reason: impl std::fmt::Display) -> EditAnswer {
    EditAnswer::Declined {
        reason: reason.to_string(),
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
fn read_text(file: File, max_bytes: u64) -> std::result::Result<String, String> {
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

/// Writes `text` into the staged file, gives it the target's permission
/// bits and `attribute`, and renames it over the target if the target is
/// still the file read (its `fstat` `read`, at `read_version`) and the
/// staged file has its owner and group.
fn replace(
    describe: &impl Describe,
    (target, read, read_version): (&Path, &std::fs::Metadata, &Version),
    (staged, written): (&Path, &mut File),
    text: &[u8],
    attribute: (&str, &str),
) -> std::result::Result<(), String> {
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
        .write_all(text)
        .map_err(|err| format!("writing the staged file: {err}"))?;
    // The attribute first: a user attribute needs write permission, which
    // the target's mode may not give.
    let (name, value) = attribute;
    rustix::fs::fsetxattr(&*written, name, value.as_bytes(), XattrFlags::empty())
        .map_err(|err| format!("setting {name}: {err}"))?;
    written
        .set_permissions(Permissions::from_mode(read.mode() & 0o777))
        .map_err(|err| format!("setting its mode: {err}"))?;
    let now = std::fs::symlink_metadata(target).map_err(|err| format!("lstat: {err}"))?;
    if (now.dev(), now.ino()) != (read.dev(), read.ino())
        || describe.version(target, &now) != *read_version
    {
        return Err("changed while it was edited".into());
    }
    std::fs::rename(staged, target).map_err(|err| format!("renaming over it: {err}"))
}
