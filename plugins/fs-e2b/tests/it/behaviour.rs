//! What the conformance kit cannot see from outside the seam, checked in
//! the sandbox itself: names with newlines and multibyte characters, modes
//! with set-user-ID / set-group-ID / sticky bits and owners kept across
//! writes and edits, the staging directory's mode and owner during an
//! upload, the per-write token behind versions, reads that refuse FIFOs
//! instead of hanging, and bad input.
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

use std::time::Duration;

use dsh_fs_e2b::{FsE2b, STAGING_PREFIX, WRITE_TOKEN_KEY};
use dsh_plugin_api::fs::{Edit, FileKind, FsProvider, WriteGuard};
use dsh_plugin_api::owner::SandboxInfo;
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::StreamExt;

use crate::support::{CWD, Env};

fn edit(old: &str, new: &str) -> Vec<Edit> {
    vec![Edit {
        old: old.into(),
        new: new.into(),
        replace_all: false,
    }]
}

async fn read(fs: &dyn FsProvider, path: &str) -> Vec<u8> {
    collect_bytes(fs.read_bytes(path).await.expect("read").chunks)
        .await
        .expect("drain")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newline_and_multibyte_names_round_trip_through_every_operation() {
    let env = Env::start().await;
    let fs = env.direct();
    let dir = format!("{CWD}/names");
    let name = "new\nline é名😀 %#?.txt";
    let path = format!("{dir}/{name}");
    fs.write(&path, Bytes::from_static(b"content"), WriteGuard::CreateNew)
        .await
        .unwrap();
    // The sandbox sees exactly that name.
    let listed = env
        .sh(
            r#"cd -- "$1" && for f in *; do printf '%s\0' "$f"; done"#,
            &[&dir],
        )
        .await;
    assert_eq!(listed, format!("{name}\0"));

    let resolved = fs.resolve(name, Some(&dir)).await.unwrap();
    assert_eq!(resolved.path, path);
    assert!(
        resolved.uri.contains("new%0Aline%20%C3%A9"),
        "{}",
        resolved.uri
    );
    let entries = fs.list(&dir).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, name);
    assert_eq!(entries[0].path, path);
    assert_eq!(fs.stat(&path).await.unwrap().size, 7);
    fs.edit(&path, edit("content", "edited"), WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_eq!(fs.read_text(&path).await.unwrap().text, "edited");

    let moved = format!("{dir}/moved\n名");
    fs.rename(&path, &moved).await.unwrap();
    assert_eq!(read(&fs, &moved).await, b"edited");
    // A link whose stored text has a newline.
    let link = format!("{dir}/link\nname");
    env.sh(r#"ln -s -- "$1" "$2""#, &["moved\n名", &link]).await;
    let lstat = fs.lstat(&link).await.unwrap();
    assert_eq!(lstat.kind, FileKind::Symlink);
    assert_eq!(lstat.symlink_target.as_deref(), Some("moved\n名"));
    assert!(fs.remove(&moved).await.unwrap());
    assert!(fs.remove(&link).await.unwrap());
    assert!(fs.list(&dir).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canonical_paths_agree_with_gnu_realpath_m() {
    let env = Env::start().await;
    let fs = env.direct();
    env.sh(
        r#"cd -- "$1" && mkdir -p real/sub && : > real/file && ln -s real/sub link \
           && ln -s /etc abs && ln -s missing/target dangling && ln -s ../.. real/sub/up"#,
        &[CWD],
    )
    .await;
    let paths = [
        "/",
        "/..",
        "//home///user/",
        "real/./sub/../sub/",
        "real/file/..",
        "real/file/below/../x",
        "missing/a/../b/.",
        "link/../file",
        "link/deeper/..",
        "abs/hostname",
        "dangling/x/..",
        "real/sub/up/workspace/real",
        "../workspace/./link",
    ];
    for path in paths {
        let absolute = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("{CWD}/{path}")
        };
        let expected = env.sh(r#"realpath -m -- "$1""#, &[&absolute]).await;
        let resolved = fs.resolve(path, None).await.unwrap();
        assert_eq!(resolved.path, expected.trim_end_matches('\n'), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_mode_bits_and_owners_survive_writes_and_edits() {
    let env = Env::start().await;
    let fs = env.direct();
    let mode_and_owner = |path: String| {
        let env = &env;
        async move { env.sh(r#"stat -c '%a %U:%G' -- "$1""#, &[&path]).await }
    };
    for mode in ["4755", "2755", "1644", "6711", "600"] {
        let path = format!("{CWD}/mode-{mode}");
        fs.write(&path, Bytes::from_static(b"one\n"), WriteGuard::Overwrite)
            .await
            .unwrap();
        env.sh(r#"chmod "$1" -- "$2""#, &[mode, &path]).await;
        let expected = format!("{mode} user:user\n");
        assert_eq!(mode_and_owner(path.clone()).await, expected);
        let stat = fs.stat(&path).await.unwrap();
        assert_eq!(
            format!("{:o}", stat.mode),
            mode,
            "stat reports the full mode"
        );

        let version = fs
            .write(
                &path,
                Bytes::from_static(b"two\n"),
                WriteGuard::IfVersion(stat.version),
            )
            .await
            .unwrap();
        assert_eq!(mode_and_owner(path.clone()).await, expected, "after write");
        assert_eq!(fs.stat(&path).await.unwrap().version, version);
        fs.edit(&path, edit("two", "three"), WriteGuard::Overwrite)
            .await
            .unwrap();
        assert_eq!(mode_and_owner(path.clone()).await, expected, "after edit");
        assert_eq!(read(&fs, &path).await, b"three\n");
    }

    // Writes act as the world's user: publishing is a rename in the
    // target's directory, so a file of root's in the user's directory is
    // replaced and becomes the user's (only root may give a file away),
    // mode kept; one in a directory only root may write is refused and
    // left as it was.
    let rooted = format!("{CWD}/rooted");
    let made = env
        .run_as(
            "root",
            r#"printf old > "$1" && chmod 640 -- "$1" && mkdir -p /srv/sealed && printf old > /srv/sealed/f && chmod 666 /srv/sealed/f"#,
            &[&rooted],
        )
        .await;
    assert_eq!(made.code, 0, "{}", made.stderr_text());
    fs.write(&rooted, Bytes::from_static(b"new"), WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_eq!(mode_and_owner(rooted.clone()).await, "640 user:user\n");
    let err = fs
        .write(
            "/srv/sealed/f",
            Bytes::from_static(b"new"),
            WriteGuard::Overwrite,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("/srv/sealed"), "{err}");
    assert_eq!(
        env.sh("cat /srv/sealed/f; ls -A /srv/sealed", &[]).await,
        "oldf\n"
    );
    let fresh = format!("{CWD}/fresh/deeper/file");
    fs.write(&fresh, Bytes::from_static(b"x"), WriteGuard::CreateNew)
        .await
        .unwrap();
    assert_eq!(mode_and_owner(fresh).await, "644 user:user\n");
    assert_eq!(
        mode_and_owner(format!("{CWD}/fresh")).await,
        "755 user:user\n",
        "created parents belong to the envd user"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_staging_directory_is_private_while_content_uploads() {
    let env = Env::start().await;
    let fs = env.direct();
    // A file only its owner may read: its new content must not be readable
    // by anyone else before or after the commit (a new file, or one with
    // an upload's attributes, is staged beside itself, readable by whoever
    // may read the result).
    let path = format!("{CWD}/big");
    env.sh(r#"printf old > "$1" && chmod 600 "$1""#, &[&path])
        .await;
    let content = vec![b'z'; 256 << 20];
    let write = fs.write(&path, Bytes::from(content), WriteGuard::Overwrite);
    let watch = async {
        // Polls the directory until a staging directory shows up, and
        // reports its mode, owner and type as the sandbox sees them.
        for _ in 0..400 {
            let seen = env
                .sh(
                    r#"find "$1" -maxdepth 1 -name "$2*" -printf '%m %u %y\n'"#,
                    &[CWD, STAGING_PREFIX],
                )
                .await;
            if !seen.is_empty() {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("no staging directory appeared during a 256 MiB write");
    };
    let (written, seen) = tokio::join!(write, watch);
    written.unwrap();
    assert_eq!(
        seen.lines().next(),
        Some("700 user d"),
        "staged as the world's user: {seen}"
    );
    let left = env
        .sh(
            r#"find "$1" -maxdepth 1 -name "$2*""#,
            &[CWD, STAGING_PREFIX],
        )
        .await;
    assert_eq!(left, "", "the staging directory is gone after the commit");
    assert_eq!(
        env.sh(r#"stat -c '%a %s' -- "$1""#, &[&path]).await,
        format!("600 {}\n", 256 << 20)
    );
}

/// The write token stored on `path` (its `user.e2b.dsh-write` attribute).
async fn write_token(env: &Env, path: &str) -> String {
    let script = format!(
        r#"python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.e2b.{WRITE_TOKEN_KEY}").decode())' "$1""#
    );
    env.sh(&script, &[path]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_stores_a_fresh_token_that_the_version_covers() {
    let env = Env::start().await;
    let fs = env.direct();
    let path = format!("{CWD}/tokened");
    let first = fs
        .write(&path, Bytes::from_static(b"same"), WriteGuard::Overwrite)
        .await
        .unwrap();
    let first_token = write_token(&env, &path).await;
    let second = fs
        .write(&path, Bytes::from_static(b"same"), WriteGuard::Overwrite)
        .await
        .unwrap();
    let second_token = write_token(&env, &path).await;
    assert_ne!(first_token, second_token);
    assert_eq!(first_token.trim().len(), 32);
    assert_ne!(
        first, second,
        "same content, same size: the token tells them apart"
    );

    // A change made in the sandbox that moves the size is seen.
    env.sh(r#"printf 'longer content' > "$1""#, &[&path]).await;
    let err = fs
        .write(
            &path,
            Bytes::from_static(b"x"),
            WriteGuard::IfVersion(second),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert_eq!(read(&fs, &path).await, b"longer content");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_files_are_refused_instead_of_blocking() {
    let env = Env::start().await;
    let fs = env.direct();
    let fifo = format!("{CWD}/fifo");
    env.sh(r#"mkfifo -- "$1""#, &[&fifo]).await;
    let refused = tokio::time::timeout(Duration::from_secs(10), fs.read_text(&fifo))
        .await
        .expect("a FIFO read returns at once")
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
    assert!(refused.message().contains("FIFO"), "{refused}");
    for result in [
        fs.read_bytes(&fifo).await.map(drop),
        fs.stream_text(&fifo).await.map(drop),
        fs.edit(&fifo, edit("a", "b"), WriteGuard::Overwrite)
            .await
            .map(drop),
    ] {
        assert_eq!(result.unwrap_err().kind(), ErrorKind::InvalidInput);
    }
    let device = fs.read_bytes("/dev/zero").await.map(drop).unwrap_err();
    assert_eq!(device.kind(), ErrorKind::InvalidInput, "{device}");
    assert!(device.message().contains("character device"), "{device}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_loops_and_dangling_links_are_reported() {
    let env = Env::start().await;
    let fs = env.direct();
    let a = format!("{CWD}/loop-a");
    let b = format!("{CWD}/loop-b");
    env.sh(r#"ln -s loop-b "$1" && ln -s loop-a "$2""#, &[&a, &b])
        .await;
    let err = fs.resolve(&a, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    assert!(err.message().contains("symbolic links"), "{err}");
    let err = fs.stat(&a).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.message().contains("does not resolve"), "{err}");
    let lstat = fs.lstat(&a).await.unwrap();
    assert_eq!(lstat.symlink_target.as_deref(), Some("loop-b"));
    let err = fs
        .write(&a, Bytes::from_static(b"x"), WriteGuard::Overwrite)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    let entries = fs.list(CWD).await.unwrap();
    let looped = entries.iter().find(|e| e.name == "loop-a").unwrap();
    assert_eq!(looped.metadata.kind, FileKind::Symlink);
    assert_eq!(looped.resolved, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_anything_changes() {
    let env = Env::start().await;
    let fs = env.direct();
    let kind = |result: dsh_plugin_api::Result<()>| result.unwrap_err().kind();
    assert_eq!(kind(fs.stat("").await.map(drop)), ErrorKind::InvalidInput);
    assert_eq!(
        kind(
            fs.write("a\0b", Bytes::from(Vec::new()), WriteGuard::Overwrite)
                .await
                .map(drop)
        ),
        ErrorKind::InvalidInput
    );
    let err = fs.resolve("x", Some("relative/cwd")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.message().contains("not an absolute path"), "{err}");
    for refused in ["/", "//", &format!("{CWD}/..")] {
        let err = fs.remove(refused).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{refused}: {err}");
    }
    let tree = format!("{CWD}/tree");
    fs.mkdir(&format!("{tree}/sub")).await.unwrap();
    let err = fs
        .rename(&tree, &format!("{tree}/sub/inside"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.message().contains("into itself"), "{err}");
    assert_eq!(fs.stat(&tree).await.unwrap().kind, FileKind::Directory);
    let file = format!("{CWD}/file");
    fs.write(&file, Bytes::from_static(b"keep"), WriteGuard::Overwrite)
        .await
        .unwrap();
    let err = fs
        .edit(&file, Vec::new(), WriteGuard::Overwrite)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.message().contains("no edits"), "{err}");
    assert_eq!(read(&fs, &file).await, b"keep");

    let bad = |cwd: &str| SandboxInfo {
        cwd: cwd.to_owned(),
        ..env.info.clone()
    };
    for cwd in ["relative", "/with\0nul"] {
        let err = FsE2b::new(env.sandbox.envd().clone(), &bad(cwd)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{cwd:?}");
    }
}

/// Writes racing to create the same missing directories all succeed, on an
/// envd acting as the user and on one acting as root: a staging directory
/// whose parent another write made meanwhile is made on a second try (its
/// first `mkdir` fails with `ENOENT`, and by the check that follows the
/// parent exists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_racing_to_create_the_same_directories_all_succeed() {
    for args in [&[][..], &["--envd-file-access", "as-root"][..]] {
        let env = Env::start_with(args).await;
        let fs = env.through_owner();
        for round in 0..3 {
            let writes = (0..96).map(|index| {
                let fs = fs.clone();
                let path = format!("{CWD}/race-{round}/d{}/f{index}.txt", index % 6);
                async move {
                    fs.write(&path, Bytes::from("x"), WriteGuard::Overwrite)
                        .await
                        .map_err(|err| format!("{args:?} {path}: {err}"))
                }
            });
            let written: Vec<_> = futures::stream::iter(writes)
                .buffer_unordered(16)
                .collect()
                .await;
            for result in written {
                result.unwrap();
            }
        }
        assert!(fs.quiesce(Duration::from_secs(10)).await);
    }
}
