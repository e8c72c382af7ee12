//! One identity: `fs` reads, writes, lists and changes the tree with exactly
//! the permissions of the user the world's commands run as (docs/design.md
//! §5.1 identity), so it succeeds exactly where `cat`, `ls` or a shell write
//! through `subprocess` does — whether that user is root (everything
//! allowed on both sides) or not.

use dsh_plugin_api::fs::WriteGuard;
use dsh_plugin_api::{Bytes, Error, ErrorKind};

use crate::check::{CaseResult, Failure, ensure_names, fail};
use crate::commands::drain;
use crate::context::Cx;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[case!(
    "coherence.permissions_agree",
    Coherence,
    [Fs, FsWrite, Subprocess],
    "fs succeeds exactly when a command does: reading /etc/shadow and a mode-0000 file, writing, mkdir, rename and remove in a directory without write permission, listing one without read permission",
    permissions_agree
)];

/// A root-only file most worlds have.
const ROOT_ONLY: &str = "/etc/shadow";

async fn permissions_agree(cx: &Cx) -> CaseResult {
    cx.sh_ok(
        "make a mode-0000 file and directories without write and read permission",
        "printf secret > locked && chmod 000 locked && mkdir sealed hidden && : > sealed/inner \
         && chmod 555 sealed && chmod 000 hidden",
        &[],
    )
    .await?;
    let checked = compare(cx).await;
    // Whatever happened, the case directory must stay removable.
    let restored = cx
        .sh_ok(
            "restore the permissions",
            "chmod 755 sealed hidden && chmod 644 locked",
            &[],
        )
        .await;
    checked.and(restored.map(drop))
}

async fn compare(cx: &Cx) -> CaseResult {
    // Reads: `cat` against a full `read_bytes`.
    let locked = cx.path("locked");
    let mut reads = vec![locked.as_str()];
    // A confined fs refuses the root-only file whoever asks
    // (`fs.confine.outside_refused`): it is compared only where reachable.
    let root_only = cx.reaches(ROOT_ONLY);
    if root_only
        && cx
            .sh("is there a root-only file", r#"test -e "$1""#, &[ROOT_ONLY])
            .await?
            .status
            .success()
    {
        reads.push(ROOT_ONLY);
    }
    for path in reads {
        let by_command = cx
            .sh(
                &format!("cat {path}"),
                r#"cat -- "$1" > /dev/null"#,
                &[path],
            )
            .await?
            .status
            .success();
        let by_fs = read_all(cx, path).await?;
        agree(&format!("read {path}"), path, by_command, by_fs)?;
    }

    // A new file in a directory without write permission: the command's
    // file, if it could make one, is removed before fs tries.
    let new = cx.path("sealed/new");
    let by_command = cx
        .sh(
            &format!("create {new}"),
            r#": >> "$1" && rm -f -- "$1""#,
            &[&new],
        )
        .await?
        .status
        .success();
    let by_fs = cx
        .within(
            &format!("write {new}"),
            cx.fs()
                .write(&new, Bytes::from_static(b"x"), WriteGuard::CreateNew),
        )
        .await?
        .map(drop);
    agree(&format!("write {new}"), &new, by_command, by_fs)?;

    // The root-only file is written only where the command was denied (a
    // non-destructive probe: `: >>` opens for writing and writes nothing),
    // so no world's system file is ever overwritten by a correct provider.
    let shadow = root_only
        && cx
            .sh(
                &format!("open {ROOT_ONLY} for writing"),
                r#"test -e "$1" && ! { : >> "$1"; } 2>/dev/null"#,
                &[ROOT_ONLY],
            )
            .await?
            .status
            .success();
    if shadow {
        let by_fs = cx
            .within(
                &format!("write {ROOT_ONLY}"),
                cx.fs()
                    .write(ROOT_ONLY, Bytes::from_static(b"x"), WriteGuard::Overwrite),
            )
            .await?
            .map(drop);
        agree(&format!("write {ROOT_ONLY}"), ROOT_ONLY, false, by_fs)?;
    }
    tree(cx).await
}

/// `mkdir`, `rename` and `remove` in the directory without write
/// permission, and `list` of the one without read permission. Whether the
/// user may change the directory is the kernel's own access check (`test
/// -w -a -x`), so no probe changes anything; when allowed (a root world),
/// `fs` really renames and then removes.
async fn tree(cx: &Cx) -> CaseResult {
    let sealed = cx.path("sealed");
    let may_change = cx
        .sh(
            &format!("may the user change {sealed}"),
            r#"test -w "$1" -a -x "$1""#,
            &[&sealed],
        )
        .await?
        .status
        .success();
    let sub = cx.path("sealed/sub");
    let by_fs = cx
        .within(&format!("mkdir {sub}"), cx.fs().mkdir(&sub))
        .await?;
    agree(&format!("mkdir {sub}"), &sub, may_change, by_fs)?;
    let (inner, renamed) = (cx.path("sealed/inner"), cx.path("sealed/renamed"));
    let by_fs = cx
        .within(&format!("rename {inner}"), cx.fs().rename(&inner, &renamed))
        .await?;
    agree(&format!("rename {inner}"), &inner, may_change, by_fs)?;
    let left = if may_change { renamed } else { inner };
    let by_fs = cx
        .within(&format!("remove {left}"), cx.fs().remove(&left))
        .await?
        .map(drop);
    agree(&format!("remove {left}"), &left, may_change, by_fs)?;
    let hidden = cx.path("hidden");
    let by_command = cx
        .sh(
            &format!("ls {hidden}"),
            r#"ls -- "$1" > /dev/null"#,
            &[&hidden],
        )
        .await?
        .status
        .success();
    let by_fs = cx
        .within(&format!("list {hidden}"), cx.fs().list(&hidden))
        .await?
        .map(drop);
    agree(&format!("list {hidden}"), &hidden, by_command, by_fs)
}

/// Reads the whole content of `path` through `fs`, bounded by the call
/// limit; the inner result is the provider's answer.
async fn read_all(cx: &Cx, path: &str) -> Result<Result<(), Error>, Failure> {
    cx.within(&format!("read_bytes {path}"), async {
        let stream = cx.fs().read_bytes(path).await?;
        drain(stream.chunks).await.map(drop)
    })
    .await
}

/// `fs` must succeed exactly when the command did; a refusal is
/// `PermissionDenied` naming `path`.
fn agree(what: &str, path: &str, by_command: bool, by_fs: Result<(), Error>) -> CaseResult {
    match (by_command, by_fs) {
        (true, Ok(())) => Ok(()),
        (false, Err(err)) if err.kind() == ErrorKind::PermissionDenied => {
            ensure_names(what, &err, path)
        }
        (false, Err(err)) => fail!(
            "{what}: a command in the world was denied, and fs failed with {} rather than PermissionDenied: {err}",
            err.kind()
        ),
        (true, Err(err)) => fail!("{what}: a command in the world could, fs could not: {err}"),
        (false, Ok(())) => fail!(
            "{what}: fs succeeded where a command in the world was denied: fs has powers the world's user lacks"
        ),
    }
}
