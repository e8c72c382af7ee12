//! Direct writes (docs/design.md §6.1): what envd is asked for a small
//! write or edit, recorded at the transport — no command in the sandbox
//! and no staging directory when the target is new or already has the
//! upload's attributes — and the staged way, with its guarantees, for
//! everything else.

use dsh_fs_e2b::{FsE2b, STAGING_PREFIX};
use dsh_plugin_api::fs::{Edit, FsProvider, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::support::{CWD, Env, REMOVE, Recorder, recorded_provider};

const STAT: &str = "POST /filesystem.Filesystem/Stat";
const MOVE: &str = "POST /filesystem.Filesystem/Move";
const UPLOAD: &str = "POST /files";
const DOWNLOAD: &str = "GET /files";
const START: &str = "POST /process.Process/Start";

/// `calls` without their order: concurrent requests go out in any order.
fn sorted(mut calls: Vec<String>) -> Vec<String> {
    calls.sort();
    calls
}

fn expect(calls: &[&str]) -> Vec<String> {
    sorted(calls.iter().map(|call| (*call).to_owned()).collect())
}

async fn leftovers(env: &Env) -> String {
    env.sh(
        r#"ls -A -- "$1" | grep -F -- "$2" || true"#,
        &[CWD, STAGING_PREFIX],
    )
    .await
}

/// Writes `content` to `path` with a stale version, which must be refused
/// as a conflict, and returns the calls it made by the time it answered.
async fn refused_as_stale(
    fs: &FsE2b<Recorder>,
    recorder: &Recorder,
    path: &str,
    content: Bytes,
) -> Vec<String> {
    let stale = WriteGuard::IfVersion(dsh_plugin_api::fs::Version("stale".into()));
    let err = fs.write(path, content, stale).await.expect_err("stale");
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    recorder.take()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_write_is_a_stat_beside_the_upload_then_the_move() {
    let env = Env::start().await;
    let (fs, recorder) = recorded_provider(&env);
    let path = format!("{CWD}/direct.txt");
    // The first call of a provider asks once how envd acts for the user.
    fs.write(&path, Bytes::from_static(b"one\n"), WriteGuard::CreateNew)
        .await
        .expect("create");
    let first = recorder.take();
    assert!(!first.iter().any(|call| call == START), "{first:?}");
    recorder.take();

    let version = fs
        .write(&path, Bytes::from_static(b"two\n"), WriteGuard::Overwrite)
        .await
        .expect("overwrite");
    assert_eq!(sorted(recorder.take()), expect(&[STAT, UPLOAD, MOVE]));
    let read = fs.read_text(&path).await.expect("read");
    assert_eq!(read.text.as_str(), "two\n");
    assert_eq!(read.version, version);
    assert_eq!(
        env.sh(r#"stat -c '%a %U %G' -- "$1""#, &[&path]).await,
        "644 user user\n"
    );
    assert_eq!(leftovers(&env).await, "");

    // A stale guard is refused before anything is published, and the
    // staged upload is removed before the refusal is answered: a listing
    // right after it never shows the staged name, however slow the removal
    // (one left to a task showed it on a loaded machine).
    recorder.take();
    recorder.slow_removes();
    let calls = refused_as_stale(&fs, &recorder, &path, Bytes::from_static(b"three\n")).await;
    assert_eq!(leftovers(&env).await, "");
    assert_eq!(sorted(calls), expect(&[REMOVE, STAT, UPLOAD]));
    assert_eq!(fs.read_text(&path).await.unwrap().text.as_str(), "two\n");
}

/// Content over the direct limit goes the direct way too, once: the
/// target's `Stat` before the upload (so a write that cannot commit, or
/// one the direct way would not publish, sends nothing), the upload, a
/// second `Stat` for a guard, and the `Move`. A file whose attributes this
/// world's uploads are not yet known to give is staged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_write_asks_before_it_uploads_then_moves() {
    let env = Env::start().await;
    let path = format!("{CWD}/large.bin");
    env.sh(r#"printf old > "$1""#, &[&path]).await;
    let (fs, recorder) = recorded_provider(&env);
    // Over the helper's limit for a write too (1 MiB).
    let content = |byte: u8| Bytes::from(vec![byte; 2 << 20]);
    fs.write(&path, content(b'a'), WriteGuard::Overwrite)
        .await
        .expect("first write");
    let first = recorder.take();
    assert!(
        first.iter().any(|call| call == START),
        "staged while the upload's attributes are unknown: {first:?}"
    );
    fs.write(
        &format!("{CWD}/new.bin"),
        content(b'n'),
        WriteGuard::CreateNew,
    )
    .await
    .expect("a new file");
    assert_eq!(
        recorder.take(),
        [STAT, UPLOAD, STAT, MOVE],
        "a new file, direct (still absent before the commit)"
    );

    let version = fs
        .write(&path, content(b'b'), WriteGuard::Overwrite)
        .await
        .expect("overwrite");
    assert_eq!(recorder.take(), [STAT, UPLOAD, MOVE]);
    let version = fs
        .write(&path, content(b'c'), WriteGuard::IfVersion(version))
        .await
        .expect("guarded");
    assert_eq!(recorder.take(), [STAT, UPLOAD, STAT, MOVE]);
    let calls = refused_as_stale(&fs, &recorder, &path, content(b'd')).await;
    // Without an upload there is nothing to remove before answering (the
    // dropped attempt's removal of nothing may have gone out or not).
    let calls: Vec<String> = calls.into_iter().filter(|call| call != REMOVE).collect();
    assert_eq!(calls, [STAT], "nothing uploaded for a stale guard");

    let read = fs.read_text(&path).await.expect("read");
    assert_eq!(read.text.as_str(), "c".repeat(2 << 20));
    assert_eq!(read.version, version);
    assert_eq!(
        env.sh(r#"stat -c '%a %U %G %s' -- "$1""#, &[&path]).await,
        format!("644 user user {}\n", 2 << 20)
    );
    assert_eq!(leftovers(&env).await, "");
}

/// Against an envd acting as root the user's own command writes the staged
/// file, and the content reaches it on one `StreamInput` — not one
/// `SendInput` per MiB, each waiting for the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_root_the_content_is_fed_on_one_input_stream() {
    let env = Env::start_with(&["--envd-file-access", "as-root"]).await;
    let (fs, recorder) = recorded_provider(&env);
    let path = format!("{CWD}/fed.bin");
    let content = Bytes::from(vec![b'f'; 5 << 20]);
    for what in ["created", "replaced"] {
        fs.write(&path, content.clone(), WriteGuard::Overwrite)
            .await
            .unwrap_or_else(|err| panic!("{what}: {err}"));
        let calls = recorder.take();
        let count = |name: &str| calls.iter().filter(|call| call.ends_with(name)).count();
        assert_eq!(count("/SendInput"), 0, "{what}: {calls:?}");
        // The first also asks, once, whether envd serves `StreamInput`.
        let expected = if what == "created" { 2 } else { 1 };
        assert_eq!(count("/StreamInput"), expected, "{what}: {calls:?}");
    }
    assert_eq!(
        env.sh(r#"stat -c '%s %U' -- "$1""#, &[&path]).await,
        format!("{} user\n", 5 << 20)
    );
    assert_eq!(leftovers(&env).await, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_is_a_stat_the_download_the_upload_beside_a_stat_and_the_move() {
    let env = Env::start().await;
    let path = format!("{CWD}/edit.txt");
    env.sh(r#"printf 'alpha\nbeta\n' > "$1""#, &[&path]).await;
    let (fs, recorder) = recorded_provider(&env);
    fs.read_text(&path).await.expect("the probe and a read");
    recorder.take();

    // This world has not learned the upload's attributes yet: one `Stat`
    // of the staged file learns them, and the edit still goes direct.
    let edit = |old: &str, new: &str| {
        vec![Edit {
            old: old.into(),
            new: new.into(),
            replace_all: false,
        }]
    };
    fs.edit(&path, edit("beta", "gamma"), WriteGuard::Overwrite)
        .await
        .expect("edit");
    let calls = recorder.take();
    assert_eq!(
        sorted(calls),
        expect(&[STAT, DOWNLOAD, UPLOAD, STAT, STAT, MOVE])
    );
    let outcome = fs
        .edit(&path, edit("gamma", "delta"), WriteGuard::Overwrite)
        .await
        .expect("edit");
    assert_eq!(
        sorted(recorder.take()),
        expect(&[STAT, DOWNLOAD, UPLOAD, STAT, MOVE])
    );
    assert_eq!(outcome.replacements, 1);
    let read = fs.read_text(&path).await.unwrap();
    assert_eq!(read.text.as_str(), "alpha\ndelta\n");
    assert_eq!(read.version, outcome.version);
    assert_eq!(leftovers(&env).await, "");
}

/// A file whose mode or owner a fresh upload would change, and a symlink,
/// go the staged way: the mode and link are kept, and the owner where the
/// user may keep it (only root may give a file away: `shared`, root's and
/// group-writable, becomes the user's, as on the staged path always).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_upload_would_change_is_staged_and_kept() {
    let env = Env::start().await;
    env.run_as(
        "root",
        r#"cd "$1" && printf x > script && chmod 755 script && printf x > secret && chmod 600 secret \
           && printf x > shared && chown root:user shared && chmod 664 shared \
           && printf x > real && ln -s real link && chown -h user:user script secret real link"#,
        &[CWD],
    )
    .await;
    let (fs, recorder) = recorded_provider(&env);
    // Learn the upload's attributes with a new file first.
    fs.write(
        &format!("{CWD}/new"),
        Bytes::from_static(b"n"),
        WriteGuard::Overwrite,
    )
    .await
    .unwrap();
    for name in ["script", "secret", "shared", "link"] {
        recorder.take();
        let path = format!("{CWD}/{name}");
        fs.write(
            &path,
            Bytes::from_static(b"written\n"),
            WriteGuard::Overwrite,
        )
        .await
        .unwrap_or_else(|err| panic!("{name}: {err}"));
        let calls = recorder.take();
        assert!(calls.iter().any(|call| call == START), "{name}: {calls:?}");
        let edited = fs
            .edit(
                &path,
                vec![Edit {
                    old: "written".into(),
                    new: "edited".into(),
                    replace_all: false,
                }],
                WriteGuard::Overwrite,
            )
            .await;
        edited.unwrap_or_else(|err| panic!("{name}: {err}"));
    }
    let listing = env
        .sh(
            r#"cd "$1" && stat -c '%n %a %U %G %F' script secret shared link real && cat real"#,
            &[CWD],
        )
        .await;
    assert_eq!(
        listing,
        "script 755 user user regular file\n\
         secret 600 user user regular file\n\
         shared 664 user user regular file\n\
         link 777 user user symbolic link\n\
         real 644 user user regular file\n\
         edited\n"
    );
    assert_eq!(leftovers(&env).await, "");
}
