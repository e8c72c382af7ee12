//! `edit` (docs/design.md §5.1): literal replacements on LF-normalised text,
//! the dominant line ending restored, all-or-nothing, serialised per target.

use dsh_plugin_api::fs::{Edit, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::check::{CaseResult, Failure, ensure, ensure_bytes, ensure_eq, fail};
use crate::context::Cx;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.edit.single_and_sequence",
        Fs,
        [Fs, FsWrite],
        "edits apply in order (a later edit sees an earlier one's result); the count and committed version are returned",
        single_and_sequence
    ),
    case!(
        "fs.edit.replace_all",
        Fs,
        [Fs, FsWrite],
        "replace_all replaces every occurrence and counts them",
        replace_all
    ),
    case!(
        "fs.edit.no_match",
        Fs,
        [Fs, FsWrite],
        "an edit matching nothing is InvalidInput saying so, and nothing is stored (even when an earlier edit matched)",
        no_match
    ),
    case!(
        "fs.edit.ambiguous",
        Fs,
        [Fs, FsWrite],
        "an edit matching 3 times without replace_all is InvalidInput giving the count, and nothing is stored",
        ambiguous
    ),
    case!(
        "fs.edit.crlf",
        Fs,
        [Fs, FsWrite],
        "matching ignores CRLF vs LF; new line breaks take the dominant ending (CRLF or LF)",
        crlf
    ),
    case!(
        "fs.edit.guards_and_errors",
        Fs,
        [Fs, FsWrite],
        "empty old text is InvalidInput; stale version Conflict; missing NotFound; binary Binary; invalid UTF-8 InvalidUtf8; a directory IsADirectory",
        guards_and_errors
    ),
    case!(
        "fs.edit.serialised",
        Fs,
        [Fs, FsWrite],
        "16 concurrent edits of one file all land: mutations on one target are serialised",
        serialised
    ),
];

fn edit(old: &str, new: &str, replace_all: bool) -> Edit {
    Edit {
        old: old.to_owned(),
        new: new.to_owned(),
        replace_all,
    }
}

async fn put(cx: &Cx, name: &str, content: &str) -> Result<String, Failure> {
    let path = cx.path(name);
    cx.ok(
        &format!("write {path}"),
        cx.fs().write(
            &path,
            Bytes::copy_from_slice(content.as_bytes()),
            WriteGuard::Overwrite,
        ),
    )
    .await?;
    Ok(path)
}

async fn expect_text(cx: &Cx, path: &str, expected: &str, context: &str) -> CaseResult {
    let got = cx.read_all(path).await?;
    ensure_bytes(
        &format!("content of {path} {context}"),
        &got,
        expected.as_bytes(),
    )
}

async fn single_and_sequence(cx: &Cx) -> CaseResult {
    let path = put(cx, "file", "alpha beta gamma\none three\n").await?;
    let before = cx
        .ok(&format!("stat {path}"), cx.fs().stat(&path))
        .await?
        .version;
    let what = format!("edit {path}");
    let outcome = cx
        .ok(
            &what,
            cx.fs().edit(
                &path,
                vec![
                    edit("beta", "BETA", false),
                    edit("one", "two", false),
                    edit("two three", "done", false),
                ],
                WriteGuard::Overwrite,
            ),
        )
        .await?;
    ensure_eq(&format!("{what}: replacements"), &outcome.replacements, &3)?;
    expect_text(cx, &path, "alpha BETA gamma\ndone\n", "after three edits").await?;
    ensure!(
        outcome.version != before,
        "{what}: the committed version equals the version before the edit"
    );
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure_eq(
        &format!("{what}: returned version vs stat"),
        &outcome.version,
        &stat.version,
    )
}

async fn replace_all(cx: &Cx) -> CaseResult {
    let path = put(cx, "file", "x, x and x\n").await?;
    let what = format!("edit {path} replace_all");
    let outcome = cx
        .ok(
            &what,
            cx.fs()
                .edit(&path, vec![edit("x", "yy", true)], WriteGuard::Overwrite),
        )
        .await?;
    ensure_eq(&format!("{what}: replacements"), &outcome.replacements, &3)?;
    expect_text(cx, &path, "yy, yy and yy\n", "after replace_all").await
}

/// Runs an edit that must fail with `kind` and leave the file unchanged.
async fn refused(
    cx: &Cx,
    path: &str,
    edits: Vec<Edit>,
    guard: WriteGuard,
    kind: ErrorKind,
    what: &str,
) -> Result<dsh_plugin_api::Error, Failure> {
    let before = cx.read_all(path).await?;
    let version = cx
        .ok(&format!("stat {path}"), cx.fs().stat(path))
        .await?
        .version;
    let err = cx.err(what, kind, cx.fs().edit(path, edits, guard)).await?;
    let after = cx.read_all(path).await?;
    ensure_bytes(
        &format!("{what}: content after the refused edit"),
        &after,
        &before,
    )?;
    let now = cx
        .ok(&format!("stat {path}"), cx.fs().stat(path))
        .await?
        .version;
    ensure_eq(
        &format!("{what}: version after the refused edit"),
        &now,
        &version,
    )?;
    Ok(err)
}

async fn no_match(cx: &Cx) -> CaseResult {
    let path = put(cx, "file", "one two\n").await?;
    let what = format!("edit {path}: second edit matches nothing");
    let err = refused(
        cx,
        &path,
        vec![edit("one", "1", false), edit("absent text", "x", false)],
        WriteGuard::Overwrite,
        ErrorKind::InvalidInput,
        &what,
    )
    .await?;
    // The path may contain digits itself: judge only the rest of the text.
    let text = err.to_string().replace(&path, "").to_lowercase();
    ensure!(
        text.contains('0')
            || text.contains("no match")
            || text.contains("not found")
            || text.contains("zero"),
        "{what}: the error does not say the edit matched nothing: {err}"
    );
    Ok(())
}

async fn ambiguous(cx: &Cx) -> CaseResult {
    let path = put(cx, "file", "one dup dup dup\n").await?;
    let what = format!("edit {path}: \"dup\" occurs 3 times");
    let err = refused(
        cx,
        &path,
        vec![edit("dup", "x", false)],
        WriteGuard::Overwrite,
        ErrorKind::InvalidInput,
        &what,
    )
    .await?;
    ensure!(
        err.to_string().replace(&path, "").contains('3'),
        "{what}: the error does not give the match count 3: {err}"
    );
    let what = format!("edit {path}: valid edit then an ambiguous one");
    refused(
        cx,
        &path,
        vec![edit("one", "1", false), edit("dup", "x", false)],
        WriteGuard::Overwrite,
        ErrorKind::InvalidInput,
        &what,
    )
    .await
    .map(drop)
}

async fn crlf(cx: &Cx) -> CaseResult {
    let path = put(cx, "crlf", "a\r\nb\r\nc\r\n").await?;
    let what = format!("edit {path} (CRLF file, LF edit)");
    cx.ok(
        &what,
        cx.fs().edit(
            &path,
            vec![edit("a\nb", "A\nB\nX", false)],
            WriteGuard::Overwrite,
        ),
    )
    .await?;
    expect_text(
        cx,
        &path,
        "A\r\nB\r\nX\r\nc\r\n",
        "after an LF edit of a CRLF file",
    )
    .await?;
    let what = format!("edit {path} (CRLF in the edit's old text)");
    cx.ok(
        &what,
        cx.fs().edit(
            &path,
            vec![edit("X\r\nc", "Y", false)],
            WriteGuard::Overwrite,
        ),
    )
    .await?;
    expect_text(cx, &path, "A\r\nB\r\nY\r\n", "after a CRLF-spelled edit").await?;

    let path = put(cx, "lf", "a\nb\n").await?;
    let what = format!("edit {path} (LF file)");
    cx.ok(
        &what,
        cx.fs().edit(
            &path,
            vec![edit("a\nb", "1\n2", false)],
            WriteGuard::Overwrite,
        ),
    )
    .await?;
    expect_text(cx, &path, "1\n2\n", "after an edit of an LF file").await?;

    // Mixed endings: only the edited text is pinned (its new line break
    // takes the dominant CRLF); the lone LF elsewhere may be kept or
    // normalised.
    let path = put(cx, "mixed", "l1\r\nl2\r\nl3\nl4\r\n").await?;
    let what = format!("edit {path} (3 CRLF, 1 LF)");
    cx.ok(
        &what,
        cx.fs().edit(
            &path,
            vec![edit("l4", "L4\nL5", false)],
            WriteGuard::Overwrite,
        ),
    )
    .await?;
    let got = cx.read_all(&path).await?;
    ensure!(
        got.ends_with(b"L4\r\nL5\r\n"),
        "{what}: the new line break should be stored as the dominant CRLF; the file ends {}",
        crate::check::show(&got[got.len().saturating_sub(12)..])
    );
    let normalised = String::from_utf8_lossy(&got).replace("\r\n", "\n");
    ensure_eq(
        &format!("{what}: content with line endings normalised"),
        &normalised.as_str(),
        &"l1\nl2\nl3\nL4\nL5\n",
    )
}

async fn guards_and_errors(cx: &Cx) -> CaseResult {
    let path = put(cx, "file", "text\n").await?;
    refused(
        cx,
        &path,
        vec![edit("", "x", false)],
        WriteGuard::Overwrite,
        ErrorKind::InvalidInput,
        &format!("edit {path} with empty old text"),
    )
    .await?;
    let stale = cx
        .ok(&format!("stat {path}"), cx.fs().stat(&path))
        .await?
        .version;
    put(cx, "file", "text changed\n").await?;
    refused(
        cx,
        &path,
        vec![edit("text", "x", false)],
        WriteGuard::IfVersion(stale),
        ErrorKind::Conflict,
        &format!("edit {path} guarded by a stale version"),
    )
    .await?;
    let current = cx
        .ok(&format!("stat {path}"), cx.fs().stat(&path))
        .await?
        .version;
    cx.ok(
        &format!("edit {path} guarded by the current version"),
        cx.fs().edit(
            &path,
            vec![edit("changed", "ok", false)],
            WriteGuard::IfVersion(current),
        ),
    )
    .await?;
    expect_text(cx, &path, "text ok\n", "after a guarded edit").await?;

    let missing = cx.path("missing");
    cx.err(
        &format!("edit {missing}"),
        ErrorKind::NotFound,
        cx.fs()
            .edit(&missing, vec![edit("a", "b", false)], WriteGuard::Overwrite),
    )
    .await?;
    let binary = cx.path("binary");
    cx.ok(
        &format!("write {binary}"),
        cx.fs()
            .write(&binary, Bytes::from_static(b"a\0b"), WriteGuard::Overwrite),
    )
    .await?;
    refused(
        cx,
        &binary,
        vec![edit("a", "b", false)],
        WriteGuard::Overwrite,
        ErrorKind::Binary,
        &format!("edit {binary} (binary)"),
    )
    .await?;
    let invalid = cx.path("invalid");
    cx.ok(
        &format!("write {invalid}"),
        cx.fs().write(
            &invalid,
            Bytes::from_static(b"a \xff b"),
            WriteGuard::Overwrite,
        ),
    )
    .await?;
    refused(
        cx,
        &invalid,
        vec![edit("a", "b", false)],
        WriteGuard::Overwrite,
        ErrorKind::InvalidUtf8,
        &format!("edit {invalid} (invalid UTF-8)"),
    )
    .await?;
    let dir = cx.mkdirs("a-directory").await?;
    cx.err(
        &format!("edit {dir}"),
        ErrorKind::IsADirectory,
        cx.fs()
            .edit(&dir, vec![edit("a", "b", false)], WriteGuard::Overwrite),
    )
    .await?;
    Ok(())
}

async fn serialised(cx: &Cx) -> CaseResult {
    const EDITORS: usize = 16;
    let path = put(cx, "shared", "START\nEND\n").await?;
    let edits = (0..EDITORS).map(|i| {
        cx.fs().edit(
            &path,
            vec![edit("END", &format!("marker-{i}\nEND"), false)],
            WriteGuard::Overwrite,
        )
    });
    let results = cx
        .within("16 concurrent edits", futures::future::join_all(edits))
        .await?;
    for (i, result) in results.iter().enumerate() {
        if let Err(err) = result {
            fail!(
                "edit {path} #{i} (concurrent): expected success, got {}: {err}",
                err.kind()
            );
        }
    }
    let text = cx.read_all(&path).await?;
    let text = String::from_utf8_lossy(&text);
    let lost: Vec<usize> = (0..EDITORS)
        .filter(|i| !text.lines().any(|line| line == format!("marker-{i}")))
        .collect();
    ensure!(
        lost.is_empty(),
        "edit {path}: {} of {EDITORS} concurrent edits were lost (markers {lost:?} missing): mutations on one target are not serialised",
        lost.len()
    );
    ensure!(
        text.lines().count() == EDITORS + 2,
        "edit {path}: expected {} lines after {EDITORS} edits, got {}",
        EDITORS + 2,
        text.lines().count()
    );
    Ok(())
}
