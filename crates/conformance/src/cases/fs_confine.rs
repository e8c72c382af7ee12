//! An `fs` confined to a directory (`KitOptions::fs_confined_to`): paths
//! outside it are refused however they are spelled — absolute, through
//! `..`, from a cwd outside, through a symlink that leads out — reads and
//! changes alike, and a listing does not show what lies outside. These
//! cases replace, for such an `fs`, the ones that reach `/`.

use dsh_plugin_api::fs::WriteGuard;
use dsh_plugin_api::{Bytes, ErrorKind, Result};

use crate::check::{CaseResult, Failure, ensure, fail};
use crate::context::Cx;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.confine.outside_refused",
        Fs,
        [Fs],
        reach = Confined,
        "paths outside the confining root — absolute, `..` escapes, relative to a cwd outside — are refused by resolve, stat, lstat, list, read_text, mkdir and write",
        outside_refused
    ),
    case!(
        "fs.confine.symlink_escape",
        Fs,
        [Fs, Shell],
        reach = Confined,
        "a symlink inside the root that leads outside is refused when followed (stat, list, read_text, resolve, write), and a listing shows no metadata of its target",
        symlink_escape
    ),
];

/// What a refusal may be: the confining `fs` says no, or that nothing is
/// there. (An unconfined `fs` answers these calls, or fails with another
/// kind: the parent directory exists.)
const REFUSED: &[ErrorKind] = &[ErrorKind::PermissionDenied, ErrorKind::NotFound];

/// The confining root (canonical) and a directory outside it that exists
/// (its parent), after checking that the case directory lies inside.
async fn confinement(cx: &Cx) -> std::result::Result<(String, String), Failure> {
    let Some(root) = cx.confined_to.as_deref() else {
        fail!("KitOptions::fs_confined_to is not set (the runner runs this case only when it is)");
    };
    ensure!(
        root.starts_with('/') && !root.contains('\0'),
        "fs_confined_to {root:?} must be an absolute path without NUL"
    );
    let what = format!("resolve {root:?} (fs_confined_to)");
    let root = cx.ok(&what, cx.fs().resolve(root, None)).await?.path;
    let Some((parent, _)) = root.rsplit_once('/').filter(|_| root != "/") else {
        fail!("fs_confined_to is `/`: nothing lies outside it");
    };
    ensure!(
        cx.dir.starts_with(&format!("{root}/")),
        "the case directory {} is not inside fs_confined_to {root}: set scratch_root inside it",
        cx.dir
    );
    let parent = if parent.is_empty() { "/" } else { parent }.to_owned();
    Ok((root, parent))
}

/// A name outside the root no one else uses: the case directory's scratch
/// name, which is unique per run.
fn stray_name(cx: &Cx) -> String {
    let scratch = cx
        .dir
        .rsplit('/')
        .nth(1)
        .unwrap_or("dsh-conformance-scratch");
    format!("{scratch}-outside")
}

/// Checks that a call about a path outside the root is refused.
async fn refused<T>(cx: &Cx, what: &str, fut: impl Future<Output = Result<T>>) -> CaseResult {
    cx.err_of(what, REFUSED, fut).await.map(drop)
}

/// Checks that a change at `stray` (outside the root) is refused; if it
/// was made, removes it again and fails.
async fn change_refused<T>(
    cx: &Cx,
    what: &str,
    stray: &str,
    fut: impl Future<Output = Result<T>>,
) -> CaseResult {
    match cx.within(what, fut).await? {
        Err(err) if REFUSED.contains(&err.kind()) => Ok(()),
        Err(err) => fail!(
            "{what}: expected a refusal (PermissionDenied or NotFound), got {}: {err}",
            err.kind()
        ),
        Ok(_) => {
            let undone = match cx.within(what, cx.fs().remove(stray)).await {
                Ok(Ok(_)) => "it was removed again".to_owned(),
                Ok(Err(err)) => format!("removing it failed: {err}"),
                Err(failure) => format!("removing it failed: {}", failure.message),
            };
            fail!("{what}: the change was made outside the confining root ({stray}; {undone})")
        }
    }
}

async fn outside_refused(cx: &Cx) -> CaseResult {
    let (root, outside) = confinement(cx).await?;
    let fs = cx.fs();
    refused(
        cx,
        &format!("resolve {outside:?}"),
        fs.resolve(&outside, None),
    )
    .await?;
    let up = format!("{root}/..");
    refused(cx, &format!("resolve {up:?}"), fs.resolve(&up, None)).await?;
    // From the case directory up one level more than it lies below the root.
    let depth = cx.dir[root.len()..].matches('/').count();
    let escape = format!("{}{}", cx.dir, "/..".repeat(depth + 1));
    refused(
        cx,
        &format!("resolve {escape:?}"),
        fs.resolve(&escape, None),
    )
    .await?;
    refused(
        cx,
        &format!("resolve \"..\" with cwd {root:?}"),
        fs.resolve("..", Some(&root)),
    )
    .await?;
    refused(
        cx,
        &format!("resolve \"x\" with cwd {outside:?}"),
        fs.resolve("x", Some(&outside)),
    )
    .await?;
    refused(cx, &format!("stat {outside:?}"), fs.stat(&outside)).await?;
    refused(cx, &format!("lstat {outside:?}"), fs.lstat(&outside)).await?;
    refused(cx, &format!("list {outside:?}"), fs.list(&outside)).await?;
    refused(cx, &format!("list {up:?}"), fs.list(&up)).await?;
    refused(
        cx,
        &format!("read_text {outside:?}"),
        fs.read_text(&outside),
    )
    .await?;
    let stray = format!("{}/{}", outside.trim_end_matches('/'), stray_name(cx));
    change_refused(cx, &format!("mkdir {stray:?}"), &stray, fs.mkdir(&stray)).await?;
    let through_up = format!("{up}/{}", stray_name(cx));
    change_refused(
        cx,
        &format!("write {through_up:?}"),
        &stray,
        fs.write(
            &through_up,
            Bytes::from_static(b"outside\n"),
            WriteGuard::CreateNew,
        ),
    )
    .await
}

async fn symlink_escape(cx: &Cx) -> CaseResult {
    let (_, outside) = confinement(cx).await?;
    let fs = cx.fs();
    let link = cx.symlink(&outside, "escape").await?;
    cx.put("inside.txt", b"in\n").await?;
    refused(cx, &format!("stat {link:?}"), fs.stat(&link)).await?;
    refused(cx, &format!("list {link:?}"), fs.list(&link)).await?;
    refused(cx, &format!("read_text {link:?}"), fs.read_text(&link)).await?;
    let beyond = format!("{link}/x");
    refused(
        cx,
        &format!("resolve {beyond:?}"),
        fs.resolve(&beyond, None),
    )
    .await?;
    let through = format!("{link}/{}", stray_name(cx));
    let stray = format!("{}/{}", outside.trim_end_matches('/'), stray_name(cx));
    change_refused(
        cx,
        &format!("write {through:?}"),
        &stray,
        fs.write(
            &through,
            Bytes::from_static(b"outside\n"),
            WriteGuard::CreateNew,
        ),
    )
    .await?;
    let what = format!("list {}", cx.dir);
    let entries = cx.ok(&what, fs.list(&cx.dir)).await?;
    ensure!(
        entries.iter().any(|entry| entry.name == "inside.txt"),
        "{what}: inside.txt is missing from {:?}",
        entries.iter().map(|entry| &entry.name).collect::<Vec<_>>()
    );
    if let Some(entry) = entries.iter().find(|entry| entry.name == "escape") {
        ensure!(
            entry.resolved.is_none(),
            "{what}: the entry of the link to {outside} shows its target's metadata ({:?})",
            entry.resolved
        );
    }
    Ok(())
}
