//! One world through both seams: what `fs` writes a command sees, what a
//! command writes `fs` sees, and both agree on cwd, names and metadata.

use dsh_plugin_api::fs::{FileKind, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::check::{CaseResult, ensure, ensure_bytes, ensure_eq, show};
use crate::commands::sh_spec;
use crate::context::Cx;
use crate::patterns::binary;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "coherence.fs_write_seen_by_command",
        Coherence,
        [Fs, FsWrite, Subprocess],
        "bytes written through fs (binary, under a newline/multibyte name) are what `cat` in the world reads",
        fs_write_seen_by_command
    ),
    case!(
        "coherence.command_write_seen_by_fs",
        Coherence,
        [Fs, Subprocess],
        "bytes a command writes are what fs reads, with the size stat reports",
        command_write_seen_by_fs
    ),
    case!(
        "coherence.external_change_bumps_version",
        Coherence,
        [Fs, FsWrite, Subprocess],
        "a change made by a command gives a new version, and a write guarded by the old one is Conflict",
        external_change_bumps_version
    ),
    case!(
        "coherence.world_cwd",
        Coherence,
        [Fs, Subprocess],
        "fs resolves `.` to the directory a command without cwd runs in",
        world_cwd
    ),
    case!(
        "coherence.metadata_agrees",
        Coherence,
        [Fs, Subprocess],
        "stat's size, mode and mtime seconds match `stat` in the world; lstat's target matches `readlink`",
        metadata_agrees
    ),
    case!(
        "coherence.names_both_ways",
        Coherence,
        [Fs, FsWrite, Subprocess],
        "names with newlines, spaces and multibyte characters made on either side are listed exactly on the other",
        names_both_ways
    ),
];

async fn fs_write_seen_by_command(cx: &Cx) -> CaseResult {
    let data = binary(100_000, 31);
    for name in ["plain", "name with\nnewline é名"] {
        let path = cx.path(name);
        cx.ok(
            &format!("write {path:?}"),
            cx.fs()
                .write(&path, Bytes::from(data.clone()), WriteGuard::Overwrite),
        )
        .await?;
        let out = cx
            .sh_ok(&format!("cat {path:?}"), r#"cat -- "$1""#, &[&path])
            .await?;
        ensure_bytes(&format!("cat of {path:?} written through fs"), &out, &data)?;
    }
    Ok(())
}

async fn command_write_seen_by_fs(cx: &Cx) -> CaseResult {
    let data = binary(150_000, 37);
    let path = cx.path("from-command");
    cx.sh_ok_with_stdin(&format!("cat > {path}"), r#"cat > "$1""#, &[&path], &data)
        .await?;
    let stream = cx
        .ok(&format!("read_bytes {path}"), cx.fs().read_bytes(&path))
        .await?;
    ensure_eq(
        &format!("read_bytes {path}: size"),
        &stream.size,
        &(data.len() as u64),
    )?;
    let got = cx
        .ok(
            &format!("read_bytes {path}"),
            crate::commands::drain(stream.chunks),
        )
        .await?;
    ensure_bytes(
        &format!("fs read of {path} written by a command"),
        &got,
        &data,
    )?;
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure_eq(
        &format!("stat {path}: size"),
        &stat.size,
        &(data.len() as u64),
    )?;
    let text_path = cx.path("text");
    cx.sh_ok("printf text", r"printf 'caf\303\251\n' > text", &[])
        .await?;
    let text = cx
        .ok(
            &format!("read_text {text_path}"),
            cx.fs().read_text(&text_path),
        )
        .await?;
    ensure_eq(
        &format!("read_text {text_path}"),
        &text.text.as_str(),
        &"café\n",
    )
}

async fn external_change_bumps_version(cx: &Cx) -> CaseResult {
    let path = cx.path("watched");
    let before = cx
        .ok(
            &format!("write {path}"),
            cx.fs()
                .write(&path, Bytes::from_static(b"v1"), WriteGuard::Overwrite),
        )
        .await?;
    cx.sh_ok("append through a command", r#"printf x >> "$1""#, &[&path])
        .await?;
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure!(
        stat.version != before,
        "stat {path}: a command appended a byte but the version is still {before}"
    );
    cx.err(
        &format!("write {path} guarded by the version from before the command's change"),
        ErrorKind::Conflict,
        cx.fs().write(
            &path,
            Bytes::from_static(b"lost update"),
            WriteGuard::IfVersion(before),
        ),
    )
    .await?;
    let got = cx.read_all(&path).await?;
    ensure_bytes(
        &format!("content of {path} after a refused write"),
        &got,
        b"v1x",
    )
}

async fn world_cwd(cx: &Cx) -> CaseResult {
    let resolved = cx.ok("resolve \".\"", cx.fs().resolve(".", None)).await?;
    let ran = cx
        .run("pwd -P without cwd", sh_spec("pwd -P", &[], None), None)
        .await?;
    ensure!(
        ran.status.success(),
        "pwd -P: expected exit 0, got {:?}",
        ran.status
    );
    ensure_eq(
        "the world's cwd: fs resolve(\".\") vs a command's pwd -P",
        &format!("{}\n", resolved.path),
        &String::from_utf8_lossy(&ran.stdout).into_owned(),
    )
}

async fn metadata_agrees(cx: &Cx) -> CaseResult {
    let path = cx.path("file");
    cx.sh_ok(
        "create a 0640 file of 1234 bytes",
        r#"head -c 1234 /dev/zero > "$1" && chmod 640 "$1" && ln -s "file" link"#,
        &[&path],
    )
    .await?;
    let out = cx
        .sh_ok(
            "stat -c in the world",
            r#"stat -c '%s %a %Y' -- "$1"; readlink link"#,
            &[&path],
        )
        .await?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let mut lines = text.lines();
    let fields: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    let parsed = match fields.as_slice() {
        [size, mode, mtime] => size
            .parse::<u64>()
            .ok()
            .zip(u32::from_str_radix(mode, 8).ok())
            .zip(mtime.parse::<u64>().ok()),
        _ => None,
    };
    let Some(((size, mode), mtime)) = parsed else {
        crate::check::fail!("stat -c '%s %a %Y': unparsable output {}", show(&out));
    };
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure_eq(
        &format!("stat {path}: size vs the world's stat"),
        &stat.size,
        &size,
    )?;
    ensure_eq(
        &format!("stat {path}: mode vs the world's stat"),
        &stat.mode,
        &mode,
    )?;
    let seconds = stat
        .modified
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    ensure_eq(
        &format!("stat {path}: mtime seconds vs the world's stat"),
        &seconds,
        &mtime,
    )?;
    let link = cx.path("link");
    let lstat = cx
        .ok(&format!("lstat {link}"), cx.fs().lstat(&link))
        .await?;
    ensure_eq(
        &format!("lstat {link}: kind"),
        &lstat.kind,
        &FileKind::Symlink,
    )?;
    ensure_eq(
        &format!("lstat {link}: target vs readlink"),
        &lstat.symlink_target.as_deref(),
        &lines.next(),
    )
}

async fn names_both_ways(cx: &Cx) -> CaseResult {
    let from_fs = ["fs made\nnewline", "fs-é名😀"];
    let from_command = ["cmd made\nnewline", "cmd-é名😀", "cmd with space"];
    let fs_dir = cx.path("by-fs");
    for name in from_fs {
        let path = format!("{fs_dir}/{name}");
        cx.ok(
            &format!("write {path:?}"),
            cx.fs().write(
                &path,
                Bytes::copy_from_slice(name.as_bytes()),
                WriteGuard::Overwrite,
            ),
        )
        .await?;
    }
    // NUL-separated names from a shell glob: exact bytes, no ls quoting.
    let out = cx
        .sh_ok(
            "list names in the world",
            r#"cd -- "$1" && for f in *; do printf '%s\0' "$f"; done"#,
            &[&fs_dir],
        )
        .await?;
    let mut seen: Vec<&[u8]> = out.split(|&b| b == 0).filter(|n| !n.is_empty()).collect();
    seen.sort_unstable();
    let mut expected: Vec<&[u8]> = from_fs.iter().map(|n| n.as_bytes()).collect();
    expected.sort_unstable();
    ensure!(
        seen == expected,
        "names made through fs, listed in the world: expected {:?}, got {:?}",
        from_fs,
        seen.iter()
            .map(|n| String::from_utf8_lossy(n))
            .collect::<Vec<_>>()
    );

    let cmd_dir = cx.path("by-command");
    cx.sh_ok(
        "create names in the world",
        r#"mkdir -p -- "$1" && cd -- "$1" && shift && for n in "$@"; do : > "$n"; done"#,
        &[&cmd_dir, from_command[0], from_command[1], from_command[2]],
    )
    .await?;
    let entries = cx
        .ok(&format!("list {cmd_dir}"), cx.fs().list(&cmd_dir))
        .await?;
    let mut names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    let mut expected = from_command.to_vec();
    expected.sort_unstable();
    ensure_eq(
        "names made by a command, listed through fs",
        &names,
        &expected,
    )
}
