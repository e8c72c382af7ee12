//! `list`: one level of a directory.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use dsh_plugin_api::Result;
use dsh_plugin_api::fs::DirEntry;

use crate::blocking;
use crate::errors::Op;
use crate::meta::{link_target, project};
use crate::paths::name_string;

/// Lists `dir` through [`blocking::run`] (a large directory costs one
/// `lstat` per entry). Entries are sorted by their raw name bytes; `path` is `dir`
/// joined with the name. An entry removed while listing is skipped. For a
/// symlink entry, `resolved` is the metadata of what it points to, or
/// `None` when it cannot be followed (dangling, a loop, no permission).
/// A name that is not UTF-8 is shown lossily and cannot be used to address
/// the entry.
pub(crate) async fn list(op: Op<'_>, dir: &Path) -> Result<Vec<DirEntry>> {
    let owned = op.to_owned();
    let dir = dir.to_path_buf();
    blocking::run(op, move || list_blocking(owned.op(), &dir)).await?
}

fn list_blocking(op: Op<'_>, dir: &Path) -> Result<Vec<DirEntry>> {
    let mut raw = Vec::new();
    for entry in fs::read_dir(dir).map_err(|err| op.io(&err))? {
        let entry = entry.map_err(|err| op.io(&err))?;
        raw.push((entry.file_name(), entry));
    }
    raw.sort_unstable_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
    let mut entries = Vec::with_capacity(raw.len());
    for (name, entry) in raw {
        let path = dir.join(&name);
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(op.io_at(format_args!("stat {}", path.display()), &err)),
        };
        let (symlink_target, resolved) = if meta.file_type().is_symlink() {
            let target = match link_target(op, &path) {
                Ok(target) => target,
                Err(err) if err.kind() == dsh_plugin_api::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            let resolved = fs::metadata(&path).ok().map(|meta| project(&meta, None));
            (Some(target), resolved)
        } else {
            (None, None)
        };
        entries.push(DirEntry {
            name: name_string(&name),
            path: name_string(path.as_os_str()),
            metadata: project(&meta, symlink_target),
            resolved,
        });
    }
    Ok(entries)
}
