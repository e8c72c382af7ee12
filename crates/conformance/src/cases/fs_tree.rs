//! `mkdir`, `remove`, `rename` (docs/design.md §5.1: as users of the E2B SDK
//! expect).

use dsh_plugin_api::fs::{FileKind, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::check::{CaseResult, ensure, ensure_bytes, ensure_eq, ensure_names};
use crate::context::Cx;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.mkdir.parents",
        Fs,
        [Fs, FsWrite],
        "mkdir creates missing parents, an existing directory is success, a file in the way is AlreadyExists / NotADirectory",
        mkdir_parents
    ),
    case!(
        "fs.remove.recursive",
        Fs,
        [Fs, FsWrite],
        "remove deletes a whole tree or a file and says whether anything existed; a missing path is false, not an error",
        remove_recursive
    ),
    case!(
        "fs.remove.symlink_not_target",
        Fs,
        [Fs, FsWrite, Shell],
        "removing a symlink (to a file or a directory) removes the link, never its target",
        remove_symlink
    ),
    case!(
        "fs.rename.files_and_dirs",
        Fs,
        [Fs, FsWrite],
        "rename moves files and trees, creates the destination's parents, replaces an existing file; a missing source is NotFound",
        rename
    ),
];

async fn kind_of(cx: &Cx, path: &str) -> Result<FileKind, crate::check::Failure> {
    Ok(cx
        .ok(&format!("lstat {path}"), cx.fs().lstat(path))
        .await?
        .kind)
}

async fn expect_missing(cx: &Cx, path: &str, context: &str) -> CaseResult {
    cx.err(
        &format!("lstat {path} {context}"),
        ErrorKind::NotFound,
        cx.fs().lstat(path),
    )
    .await
    .map(drop)
}

async fn write(cx: &Cx, path: &str, content: &[u8]) -> CaseResult {
    cx.ok(
        &format!("write {path}"),
        cx.fs()
            .write(path, Bytes::copy_from_slice(content), WriteGuard::Overwrite),
    )
    .await
    .map(drop)
}

async fn mkdir_parents(cx: &Cx) -> CaseResult {
    let deep = cx.path("m/a/b/c");
    cx.ok(&format!("mkdir {deep}"), cx.fs().mkdir(&deep))
        .await?;
    for rel in ["m", "m/a", "m/a/b", "m/a/b/c"] {
        let path = cx.path(rel);
        ensure_eq(
            &format!("kind of {path} after mkdir"),
            &kind_of(cx, &path).await?,
            &FileKind::Directory,
        )?;
    }
    cx.ok(&format!("mkdir {deep} again"), cx.fs().mkdir(&deep))
        .await?;
    let file = cx.path("m/file");
    write(cx, &file, b"x").await?;
    let err = cx
        .err(
            &format!("mkdir {file} (an existing file)"),
            ErrorKind::AlreadyExists,
            cx.fs().mkdir(&file),
        )
        .await?;
    ensure_names(&format!("mkdir {file}"), &err, "file")?;
    cx.err(
        &format!("mkdir {file}/sub (below a file)"),
        ErrorKind::NotADirectory,
        cx.fs().mkdir(&format!("{file}/sub")),
    )
    .await?;
    ensure_eq(
        &format!("kind of {file} after refused mkdirs"),
        &kind_of(cx, &file).await?,
        &FileKind::File,
    )
}

async fn remove_recursive(cx: &Cx) -> CaseResult {
    for rel in ["tree/a", "tree/sub/b", "tree/sub/deeper/c"] {
        write(cx, &cx.path(rel), rel.as_bytes()).await?;
    }
    cx.ok("mkdir tree/empty", cx.fs().mkdir(&cx.path("tree/empty")))
        .await?;
    let tree = cx.path("tree");
    let removed = cx
        .ok(&format!("remove {tree}"), cx.fs().remove(&tree))
        .await?;
    ensure!(
        removed,
        "remove {tree}: returned false for an existing tree"
    );
    expect_missing(cx, &tree, "after remove").await?;
    let again = cx
        .ok(&format!("remove {tree} again"), cx.fs().remove(&tree))
        .await?;
    ensure!(
        !again,
        "remove {tree}: returned true for a path that no longer exists"
    );
    let file = cx.path("file");
    write(cx, &file, b"x").await?;
    let removed = cx
        .ok(&format!("remove {file}"), cx.fs().remove(&file))
        .await?;
    ensure!(
        removed,
        "remove {file}: returned false for an existing file"
    );
    expect_missing(cx, &file, "after remove").await
}

async fn remove_symlink(cx: &Cx) -> CaseResult {
    write(cx, &cx.path("target/file"), b"kept").await?;
    let to_file = cx.symlink("target/file", "to_file").await?;
    let to_dir = cx.symlink("target", "to_dir").await?;
    for link in [&to_file, &to_dir] {
        let removed = cx
            .ok(&format!("remove {link}"), cx.fs().remove(link))
            .await?;
        ensure!(
            removed,
            "remove {link}: returned false for an existing link"
        );
        expect_missing(cx, link, "after removing the link").await?;
    }
    let target = cx.path("target/file");
    let got = cx.read_all(&target).await?;
    ensure_bytes(
        &format!("content of {target} after removing links to it"),
        &got,
        b"kept",
    )
}

async fn rename(cx: &Cx) -> CaseResult {
    let from = cx.path("from");
    write(cx, &from, b"moved").await?;
    let to = cx.path("new/deep/to");
    cx.ok(
        &format!("rename {from} -> {to}"),
        cx.fs().rename(&from, &to),
    )
    .await?;
    expect_missing(cx, &from, "after rename").await?;
    let got = cx.read_all(&to).await?;
    ensure_bytes(&format!("content of {to} after rename"), &got, b"moved")?;

    let other = cx.path("other");
    write(cx, &other, b"replacement").await?;
    cx.ok(
        &format!("rename {other} -> {to} (over a file)"),
        cx.fs().rename(&other, &to),
    )
    .await?;
    let got = cx.read_all(&to).await?;
    ensure_bytes(
        &format!("content of {to} after rename over it"),
        &got,
        b"replacement",
    )?;

    write(cx, &cx.path("tree/sub/f"), b"in tree").await?;
    let tree = cx.path("tree");
    let moved = cx.path("moved/tree");
    cx.ok(
        &format!("rename {tree} -> {moved}"),
        cx.fs().rename(&tree, &moved),
    )
    .await?;
    expect_missing(cx, &tree, "after renaming the tree").await?;
    let got = cx.read_all(&format!("{moved}/sub/f")).await?;
    ensure_bytes(
        &format!("content of {moved}/sub/f after moving its tree"),
        &got,
        b"in tree",
    )?;

    let missing = cx.path("missing");
    let err = cx
        .err(
            &format!("rename {missing} (missing source)"),
            ErrorKind::NotFound,
            cx.fs().rename(&missing, &cx.path("anywhere")),
        )
        .await?;
    ensure_names(&format!("rename {missing}"), &err, "missing")?;
    expect_missing(cx, &cx.path("anywhere"), "after a failed rename").await
}
