//! `stat`, `lstat`, `list` and versions (docs/design.md §5.1, metadata rows).

use std::time::{Duration, SystemTime};

use dsh_plugin_api::fs::{DirEntry, FileKind, Metadata, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::check::{CaseResult, ensure, ensure_eq, ensure_names, fail};
use crate::context::Cx;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.stat.file_and_directory",
        Fs,
        [Fs, Fixtures],
        "stat and lstat report kind, size, mode bits only, a plausible mtime and a non-empty version",
        file_and_directory
    ),
    case!(
        "fs.stat.errors",
        Fs,
        [Fs, Fixtures],
        "stat/lstat of a missing path is NotFound naming it; a file used as a directory is NotADirectory",
        stat_errors
    ),
    case!(
        "fs.stat.symlink",
        Fs,
        [Fs, Fixtures, Shell],
        "stat follows a symlink, lstat reports it as a symlink with its stored target; dangling links",
        stat_symlink
    ),
    case!(
        "fs.stat.mode_bits",
        Fs,
        [Fs, Fixtures, Shell],
        "mode carries exactly the 0o7777 permission bits set in the world (sticky, setgid included)",
        mode_bits
    ),
    case!(
        "fs.stat.other_kinds",
        Fs,
        [Fs, Shell],
        "FIFOs and devices are FileKind::Other",
        other_kinds
    ),
    case!(
        "fs.version.stable_when_unchanged",
        Fs,
        [Fs, Fixtures],
        "an unchanged file keeps its version across stat, lstat, read_text and list",
        version_stable
    ),
    case!(
        "fs.version.changes_on_every_write",
        Fs,
        [Fs, FsWrite],
        "every write yields a new version, even with the same size within the same second, and A→B→A does not reuse A's",
        version_changes
    ),
    case!(
        "fs.list.sorted_one_level",
        Fs,
        [Fs, Fixtures],
        "list is one level, byte-ordered, without . and .., with entry paths and kinds; an empty dir is empty",
        list_sorted
    ),
    case!(
        "fs.list.symlink_entries_resolved",
        Fs,
        [Fs, Fixtures, Shell],
        "symlink entries carry the link itself and the resolved target's metadata; dangling links resolve to None",
        list_symlinks
    ),
    case!(
        "fs.list.errors",
        Fs,
        [Fs, Fixtures],
        "list of a missing path is NotFound, of a file NotADirectory",
        list_errors
    ),
];

/// 2020-01-01T00:00:00Z: any mtime before it is a placeholder, not a clock.
const PLAUSIBLE_EPOCH: Duration = Duration::from_secs(1_577_836_800);

fn ensure_kind(what: &str, meta: &Metadata, kind: FileKind) -> CaseResult {
    ensure_eq(&format!("{what}: kind"), &meta.kind, &kind)
}

async fn file_and_directory(cx: &Cx) -> CaseResult {
    let file = cx.put("file", b"hello").await?;
    let fs = cx.fs();
    let stat = cx.ok(&format!("stat {file}"), fs.stat(&file)).await?;
    ensure_kind(&format!("stat {file}"), &stat, FileKind::File)?;
    ensure_eq(&format!("stat {file}: size"), &stat.size, &5)?;
    ensure!(
        stat.mode & !0o7777 == 0,
        "stat {file}: mode {:o} carries bits outside 0o7777 (file type bits must be masked)",
        stat.mode
    );
    ensure!(
        stat.mode & 0o400 != 0,
        "stat {file}: mode {:o} lacks owner read on a file the kit just created",
        stat.mode
    );
    ensure!(
        stat.modified > SystemTime::UNIX_EPOCH + PLAUSIBLE_EPOCH,
        "stat {file}: mtime {:?} is before 2020 (a placeholder, not the file's mtime)",
        stat.modified
    );
    ensure!(!stat.version.0.is_empty(), "stat {file}: version is empty");
    ensure_eq(
        &format!("stat {file}: symlink_target"),
        &stat.symlink_target,
        &None,
    )?;
    let lstat = cx.ok(&format!("lstat {file}"), fs.lstat(&file)).await?;
    ensure_eq(
        &format!("lstat {file} (a regular file) vs stat"),
        &lstat,
        &stat,
    )?;

    let dir = &cx.dir;
    let stat = cx.ok(&format!("stat {dir}"), fs.stat(dir)).await?;
    ensure_kind(&format!("stat {dir}"), &stat, FileKind::Directory)?;
    ensure!(!stat.version.0.is_empty(), "stat {dir}: version is empty");
    let lstat = cx.ok(&format!("lstat {dir}"), fs.lstat(dir)).await?;
    ensure_kind(&format!("lstat {dir}"), &lstat, FileKind::Directory)
}

async fn stat_errors(cx: &Cx) -> CaseResult {
    let file = cx.put("file", b"x").await?;
    let fs = cx.fs();
    let missing = cx.path("missing-entry");
    let err = cx
        .err(
            &format!("stat {missing}"),
            ErrorKind::NotFound,
            fs.stat(&missing),
        )
        .await?;
    ensure_names(&format!("stat {missing}"), &err, "missing-entry")?;
    let err = cx
        .err(
            &format!("lstat {missing}"),
            ErrorKind::NotFound,
            fs.lstat(&missing),
        )
        .await?;
    ensure_names(&format!("lstat {missing}"), &err, "missing-entry")?;
    let below = format!("{file}/child");
    cx.err(
        &format!("stat {below} (below a regular file)"),
        ErrorKind::NotADirectory,
        fs.stat(&below),
    )
    .await?;
    Ok(())
}

async fn stat_symlink(cx: &Cx) -> CaseResult {
    let target = cx.put("target", b"content").await?;
    let link = cx.symlink("target", "link").await?;
    let dangling = cx.symlink("gone/nowhere", "dangling").await?;
    let fs = cx.fs();
    let stat = cx.ok(&format!("stat {link}"), fs.stat(&link)).await?;
    ensure_kind(
        &format!("stat {link} (follows the link)"),
        &stat,
        FileKind::File,
    )?;
    ensure_eq(&format!("stat {link}: size of the target"), &stat.size, &7)?;
    let lstat = cx.ok(&format!("lstat {link}"), fs.lstat(&link)).await?;
    ensure_kind(&format!("lstat {link}"), &lstat, FileKind::Symlink)?;
    ensure_eq(
        &format!("lstat {link}: symlink_target (as stored in the link)"),
        &lstat.symlink_target.as_deref(),
        &Some("target"),
    )?;
    ensure_eq(
        &format!("lstat {link}: size (the link's own: its target's length)"),
        &lstat.size,
        &6,
    )?;
    let target_stat = cx.ok(&format!("stat {target}"), fs.stat(&target)).await?;
    ensure!(
        lstat.version != target_stat.version,
        "lstat {link}: the link and its target report the same version {}",
        lstat.version
    );
    let err = cx
        .err(
            &format!("stat {dangling} (dangling link)"),
            ErrorKind::NotFound,
            fs.stat(&dangling),
        )
        .await?;
    ensure_names(&format!("stat {dangling}"), &err, "dangling")?;
    let lstat = cx
        .ok(&format!("lstat {dangling}"), fs.lstat(&dangling))
        .await?;
    ensure_kind(&format!("lstat {dangling}"), &lstat, FileKind::Symlink)?;
    ensure_eq(
        &format!("lstat {dangling}: symlink_target"),
        &lstat.symlink_target.as_deref(),
        &Some("gone/nowhere"),
    )
}

async fn mode_bits(cx: &Cx) -> CaseResult {
    let file = cx.put("file", b"x").await?;
    let dir = cx.mkdirs("sub").await?;
    for (path, mode) in [
        (&file, 0o640),
        (&file, 0o751),
        (&file, 0o2755),
        (&dir, 0o711),
        (&dir, 0o1777),
    ] {
        cx.chmod(path, mode).await?;
        let what = format!("stat {path} after chmod {mode:o}");
        let stat = cx.ok(&what, cx.fs().stat(path)).await?;
        ensure!(
            stat.mode == mode,
            "{what}: expected mode {mode:o}, got {:o}",
            stat.mode
        );
    }
    Ok(())
}

async fn other_kinds(cx: &Cx) -> CaseResult {
    let fifo = cx.path("fifo");
    cx.sh_ok(
        &format!("fixture: mkfifo {fifo}"),
        r#"mkfifo -- "$1""#,
        &[&fifo],
    )
    .await?;
    let stat = cx.ok(&format!("stat {fifo}"), cx.fs().stat(&fifo)).await?;
    ensure_kind(&format!("stat {fifo} (a FIFO)"), &stat, FileKind::Other)?;
    if !cx.reaches("/dev/null") {
        // A confined fs refuses it (`fs.confine.outside_refused`).
        return Ok(());
    }
    let stat = cx.ok("stat /dev/null", cx.fs().stat("/dev/null")).await?;
    ensure_kind(
        "stat /dev/null (a character device)",
        &stat,
        FileKind::Other,
    )
}

async fn version_stable(cx: &Cx) -> CaseResult {
    let file = cx.put("file", b"stable\n").await?;
    let fs = cx.fs();
    let first = cx
        .ok(&format!("stat {file}"), fs.stat(&file))
        .await?
        .version;
    let again = cx
        .ok(&format!("stat {file}"), fs.stat(&file))
        .await?
        .version;
    ensure_eq(
        &format!("stat {file} twice, nothing changed: version"),
        &again,
        &first,
    )?;
    let lstat = cx
        .ok(&format!("lstat {file}"), fs.lstat(&file))
        .await?
        .version;
    ensure_eq(&format!("lstat {file} vs stat: version"), &lstat, &first)?;
    let read = cx
        .ok(&format!("read_text {file}"), fs.read_text(&file))
        .await?;
    ensure_eq(
        &format!("read_text {file}: version vs stat"),
        &read.version,
        &first,
    )?;
    let stream = cx
        .ok(&format!("read_bytes {file}"), fs.read_bytes(&file))
        .await?;
    ensure_eq(
        &format!("read_bytes {file}: version vs stat"),
        &stream.version,
        &first,
    )?;
    drop(stream);
    let entries = cx.ok(&format!("list {}", cx.dir), fs.list(&cx.dir)).await?;
    let entry = find_entry(&entries, "file", &cx.dir)?;
    ensure_eq(
        &format!("list {}: version of entry \"file\" vs stat", cx.dir),
        &entry.metadata.version,
        &first,
    )
}

async fn version_changes(cx: &Cx) -> CaseResult {
    let file = cx.path("file");
    let fs = cx.fs();
    let what = format!("write {file}");
    // Same size, same second: only a real version tells these apart.
    let a = cx
        .ok(
            &what,
            fs.write(&file, Bytes::from_static(b"AAAA"), WriteGuard::Overwrite),
        )
        .await?;
    let b = cx
        .ok(
            &what,
            fs.write(&file, Bytes::from_static(b"BBBB"), WriteGuard::Overwrite),
        )
        .await?;
    let a_again = cx
        .ok(
            &what,
            fs.write(&file, Bytes::from_static(b"AAAA"), WriteGuard::Overwrite),
        )
        .await?;
    ensure!(
        a != b,
        "write {file}: AAAA then BBBB both returned version {a}"
    );
    ensure!(
        b != a_again,
        "write {file}: BBBB then AAAA both returned version {b}"
    );
    ensure!(
        a != a_again,
        "write {file}: AAAA, BBBB, AAAA returned the first version {a} again (a caller holding it would miss the change)"
    );
    let stat = cx.ok(&format!("stat {file}"), fs.stat(&file)).await?;
    ensure_eq(
        &format!("stat {file}: version vs the one the last write returned"),
        &stat.version,
        &a_again,
    )
}

async fn list_sorted(cx: &Cx) -> CaseResult {
    for name in ["b", "a", "C", ".hidden", "z", "é", "sub/nested"] {
        cx.put(&format!("list/{name}"), name.as_bytes()).await?;
    }
    cx.mkdirs("list/empty").await?;
    let dir = cx.path("list");
    let what = format!("list {dir}");
    let entries = cx.ok(&what, cx.fs().list(&dir)).await?;
    let names: Vec<&str> = entries.iter().map(|entry| entry.name.as_str()).collect();
    ensure_eq(
        &format!("{what}: names in byte order, one level"),
        &names,
        &vec![".hidden", "C", "a", "b", "empty", "sub", "z", "é"],
    )?;
    for entry in &entries {
        ensure_eq(
            &format!("{what}: path of entry {:?}", entry.name),
            &entry.path,
            &format!("{dir}/{}", entry.name),
        )?;
        ensure_eq(
            &format!("{what}: resolved of non-link entry {:?}", entry.name),
            &entry.resolved,
            &None,
        )?;
        let expected = if matches!(entry.name.as_str(), "sub" | "empty") {
            FileKind::Directory
        } else {
            FileKind::File
        };
        ensure_kind(
            &format!("{what}: entry {:?}", entry.name),
            &entry.metadata,
            expected,
        )?;
    }
    let a = find_entry(&entries, "a", &dir)?;
    ensure_eq(
        &format!("{what}: size of entry \"a\""),
        &a.metadata.size,
        &1,
    )?;
    let empty = cx.path("list/empty");
    let entries = cx
        .ok(&format!("list {empty}"), cx.fs().list(&empty))
        .await?;
    ensure!(
        entries.is_empty(),
        "list {empty}: expected no entries in an empty directory, got {:?}",
        entries.iter().map(|e| &e.name).collect::<Vec<_>>()
    );
    Ok(())
}

async fn list_symlinks(cx: &Cx) -> CaseResult {
    cx.put("list/file", b"12345").await?;
    cx.mkdirs("list/dir").await?;
    cx.symlink("file", "list/to_file").await?;
    cx.symlink("dir", "list/to_dir").await?;
    cx.symlink("missing", "list/dangling").await?;
    let dir = cx.path("list");
    let what = format!("list {dir}");
    let entries = cx.ok(&what, cx.fs().list(&dir)).await?;
    let to_file = find_entry(&entries, "to_file", &dir)?;
    ensure_kind(
        &format!("{what}: to_file metadata (the link itself)"),
        &to_file.metadata,
        FileKind::Symlink,
    )?;
    ensure_eq(
        &format!("{what}: to_file symlink_target"),
        &to_file.metadata.symlink_target.as_deref(),
        &Some("file"),
    )?;
    let Some(resolved) = &to_file.resolved else {
        fail!("{what}: entry to_file: resolved is None for a link to an existing file");
    };
    ensure_kind(
        &format!("{what}: to_file resolved"),
        resolved,
        FileKind::File,
    )?;
    ensure_eq(
        &format!("{what}: to_file resolved size"),
        &resolved.size,
        &5,
    )?;
    let to_dir = find_entry(&entries, "to_dir", &dir)?;
    match &to_dir.resolved {
        Some(resolved) => ensure_kind(
            &format!("{what}: to_dir resolved"),
            resolved,
            FileKind::Directory,
        )?,
        None => fail!("{what}: entry to_dir: resolved is None for a link to an existing directory"),
    }
    let dangling = find_entry(&entries, "dangling", &dir)?;
    ensure_kind(
        &format!("{what}: dangling metadata"),
        &dangling.metadata,
        FileKind::Symlink,
    )?;
    ensure_eq(
        &format!("{what}: dangling resolved"),
        &dangling.resolved,
        &None,
    )
}

async fn list_errors(cx: &Cx) -> CaseResult {
    let file = cx.put("file", b"x").await?;
    let missing = cx.path("missing-dir");
    let err = cx
        .err(
            &format!("list {missing}"),
            ErrorKind::NotFound,
            cx.fs().list(&missing),
        )
        .await?;
    ensure_names(&format!("list {missing}"), &err, "missing-dir")?;
    cx.err(
        &format!("list {file} (a file)"),
        ErrorKind::NotADirectory,
        cx.fs().list(&file),
    )
    .await?;
    Ok(())
}

fn find_entry<'a>(
    entries: &'a [DirEntry],
    name: &str,
    dir: &str,
) -> Result<&'a DirEntry, crate::check::Failure> {
    entries
        .iter()
        .find(|entry| entry.name == name)
        .ok_or_else(|| {
            crate::check::Failure::new(format!(
                "list {dir}: no entry {name:?} among {:?}",
                entries.iter().map(|e| &e.name).collect::<Vec<_>>()
            ))
        })
}
