//! The world-side operations' process in the sandbox (docs/design.md §6.3):
//! one `dsh-supervisor world` per provider, started on first use, serving
//! operations side by side; a dropped stream stops its operation and
//! nothing else; a process that ends fails the operation in flight with
//! an error saying so and the next call starts another; disposal ends it.
//! Its requests travel on one envd `StreamInput`; a cut one fails the
//! operations in flight as an ended process does. A write replacing a
//! large file has it hold the replaced file over the rename and let go.
//! While it runs it reads texts of up to 1 MiB, answering exactly what
//! envd's `Stat` and download answer, and edits and rewrites files as the
//! envd way would, declining to it what it cannot do so.
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

use std::time::{Duration, Instant};

use dsh_e2b_gateway::OwnerTransport;
use dsh_fs_e2b::FsE2b;
use dsh_plugin_api::fs::{
    Edit, FsProvider, ReadManyLimits, Version, WalkEvent, WalkSpec, WalkStream, WriteGuard,
};
use dsh_plugin_api::{Bytes, ErrorKind};
use e2b_client::{CallOptions, Signal};
use futures::{StreamExt, TryStreamExt};

use crate::support::{CWD, Env, SEND_INPUT, STREAM_INPUT, recorded_provider};

/// Directories of [`FILES`] files each in the big tree: its walk answers
/// several times the supervisor's window of credit.
const DIRS: usize = 8;
const FILES: usize = 1000;

async fn fixture(env: &Env) {
    env.sh(
        r#"mkdir -p "$1/small/d" && printf 'alpha\n' > "$1/small/d/a.txt" && cd "$1" && for d in $(seq -w 1 $2); do mkdir -p "big/directory-with-a-long-name-$d" && (cd "big/directory-with-a-long-name-$d" && seq -f "file-with-a-long-name-%05g.txt" 1 $3 | xargs touch); done"#,
        &[CWD, &DIRS.to_string(), &FILES.to_string()],
    )
    .await;
}

fn spec() -> WalkSpec {
    WalkSpec {
        max_depth: 8,
        max_entries: 1_000_000,
        globs: Vec::new(),
        gitignore: false,
        beneath: false,
    }
}

async fn walk(fs: &dyn FsProvider, root: &str) -> WalkStream {
    fs.walk(&format!("{CWD}/{root}"), spec())
        .await
        .expect("walk")
}

async fn entries(stream: WalkStream) -> Vec<String> {
    stream
        .try_filter_map(|event| async move {
            Ok(match event {
                WalkEvent::Entry(entry) => Some(entry.relative),
                WalkEvent::End(_) => None,
            })
        })
        .try_collect()
        .await
        .expect("walk events")
}

/// The fixture, and a walk of the big tree whose first event was taken;
/// the pid of the one process serving it.
async fn big_walk_started(env: &Env, fs: &dyn FsProvider) -> (WalkStream, Vec<u32>) {
    fixture(env).await;
    let mut big = walk(fs, "big").await;
    big.next().await.expect("a first event").expect("an entry");
    let pids = world_processes(env).await;
    assert_eq!(pids.len(), 1, "{pids:?}");
    (big, pids)
}

/// The error that ends `walk` (within 10 s of each event), as text.
async fn failure(walk: &mut WalkStream) -> String {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), walk.next())
            .await
            .expect("the walk goes on or fails")
        {
            Some(Ok(WalkEvent::Entry(_))) => {}
            Some(Ok(WalkEvent::End(_))) | None => panic!("the walk ended as if complete"),
            Some(Err(err)) => return err.to_string(),
        }
    }
}

/// The pids of the running `dsh-supervisor world` processes.
async fn world_processes(env: &Env) -> Vec<u32> {
    env.sandbox
        .envd()
        .list_processes(&CallOptions::default())
        .await
        .expect("list processes")
        .into_iter()
        .filter(|process| process.cmd.ends_with("/dsh-supervisor") && process.args == ["world"])
        .map(|process| process.pid)
        .collect()
}

/// The thread count of `pid` (its main thread and one per operation).
async fn threads(env: &Env, pid: u32) -> usize {
    env.sh(
        r#"sed -n 's/^Threads:[[:space:]]*//p' "/proc/$1/status""#,
        &[&pid.to_string()],
    )
    .await
    .trim()
    .parse()
    .expect("a thread count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serves_the_provider_side_by_side_until_disposal() {
    let env = Env::start().await;
    fixture(&env).await;
    let fs = env.through_owner();
    assert!(world_processes(&env).await.is_empty());

    let mut big = walk(fs.as_ref(), "big").await;
    let first = big.next().await.expect("a first event").expect("an entry");
    assert!(matches!(first, WalkEvent::Entry(_)));
    // While the big walk is open, other operations come and go.
    let items = fs
        .read_many(
            vec![format!("{CWD}/small/d/a.txt")],
            ReadManyLimits {
                max_file_bytes: 100,
                max_total_bytes: 100,
                beneath: None,
            },
        )
        .await
        .expect("read_many");
    assert_eq!(
        items[0].result.as_ref().expect("read").text.as_str(),
        "alpha\n"
    );
    assert_eq!(
        entries(walk(fs.as_ref(), "small").await).await,
        ["d", "d/a.txt"]
    );
    let pids = world_processes(&env).await;
    assert_eq!(pids.len(), 1, "one process: {pids:?}");
    let rest = entries(big).await;
    assert_eq!(
        rest.len() + 1,
        DIRS * (FILES + 1),
        "every entry of the big walk"
    );
    assert_eq!(entries(walk(fs.as_ref(), "small").await).await.len(), 2);
    assert_eq!(
        world_processes(&env).await,
        pids,
        "the same process serves on"
    );

    assert!(fs.quiesce(Duration::from_secs(10)).await);
    fs.remove_installed().await.expect("dispose");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !world_processes(&env).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the process outlived the disposal"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_stops_its_operation_only() {
    let env = Env::start().await;
    let fs = env.direct();
    let (big, pids) = big_walk_started(&env, &fs).await;
    // Held back by its window, the walk's thread waits for credit.
    assert_eq!(threads(&env, pids[0]).await, 2);
    drop(big);
    let deadline = Instant::now() + Duration::from_secs(5);
    while threads(&env, pids[0]).await > 1 {
        assert!(Instant::now() < deadline, "the abandoned walk runs on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(entries(walk(&fs, "small").await).await, ["d", "d/a.txt"]);
    assert_eq!(
        world_processes(&env).await,
        pids,
        "the same process serves on"
    );
}

/// Kills the world process `pid` under the walk `big` and returns the
/// walk's error, which must say the process ended by that kill.
async fn killed_under(env: &Env, pid: u32, big: &mut WalkStream) -> String {
    env.sandbox
        .envd()
        .send_signal(pid, Signal::Kill, &CallOptions::default())
        .await
        .expect("kill the process");
    let message = failure(big).await;
    assert!(
        message.contains("ended while the operation was in flight")
            && message.contains("signal: killed"),
        "{message}"
    );
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_process_fails_the_operation_in_flight_and_the_next_call_starts_another() {
    let env = Env::start().await;
    let fs = env.direct();
    let (mut big, pids) = big_walk_started(&env, &fs).await;
    let message = killed_under(&env, pids[0], &mut big).await;
    assert!(message.contains("walk: the sandbox helper"), "{message}");
    assert!(big.next().await.is_none(), "nothing after the error");

    assert_eq!(entries(walk(&fs, "small").await).await, ["d", "d/a.txt"]);
    let restarted = world_processes(&env).await;
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    assert_ne!(restarted, pids, "another process");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_travel_on_one_input_stream() {
    let env = Env::start().await;
    fixture(&env).await;
    let (fs, recorder) = recorded_provider(&env);
    assert_eq!(entries(walk(&fs, "small").await).await.len(), 2);
    let first = recorder.take();
    let count = |calls: &[String], call: &str| calls.iter().filter(|c| *c == call).count();
    // envd asked once whether it serves `StreamInput`, then the stream.
    assert_eq!(count(&first, STREAM_INPUT), 2, "{first:?}");
    for _ in 0..20 {
        assert_eq!(entries(walk(&fs, "small").await).await, ["d", "d/a.txt"]);
    }
    let rest = recorder.take();
    assert_eq!(
        (count(&rest, STREAM_INPUT), count(&rest, SEND_INPUT)),
        (0, 0),
        "20 walks on the stream already open: {rest:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_input_stream_fails_the_operation_in_flight_and_the_next_call_starts_another() {
    let env = Env::start().await;
    let (fs, recorder) = recorded_provider(&env);
    let (mut big, pids) = big_walk_started(&env, &fs).await;
    recorder.cut_input_streams();
    // The walk in flight fails: its requests on the cut stream may be lost.
    let message = failure(&mut big).await;
    assert!(
        message.contains("walk: the sandbox helper")
            && message.contains("ended while the operation was in flight")
            && message.contains("writing to its stdin failed")
            && message.contains("connection reset (test)"),
        "{message}"
    );
    assert_eq!(entries(walk(&fs, "small").await).await, ["d", "d/a.txt"]);
    // The cut one is killed (its kill may still be on its way).
    let deadline = Instant::now() + Duration::from_secs(5);
    let restarted = loop {
        let now = world_processes(&env).await;
        if !now.contains(&pids[0]) || Instant::now() > deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(restarted.len(), 1, "the cut one was killed: {restarted:?}");
    assert_ne!(restarted, pids, "another process");
}

/// envd refuses input to a process that has just ended before its end event
/// arrives: the operation in flight is told the end's reason, not the
/// refused write's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_ending_as_its_input_fails_is_reported_by_its_end() {
    let env = Env::start().await;
    let (fs, recorder) = recorded_provider(&env);
    let (mut big, pids) = big_walk_started(&env, &fs).await;
    recorder.cut_input_streams();
    let message = killed_under(&env, pids[0], &mut big).await;
    assert!(!message.contains("connection reset (test)"), "{message}");
}

/// A provider whose first world-side call ran on a runtime that has
/// ended (its process's reader and writer tasks with it) starts another
/// process on the next call instead of waiting on the dead one.
#[test]
fn a_provider_outliving_the_runtime_of_its_process_starts_another() {
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
    };
    let first = runtime();
    let env = first.block_on(async {
        let env = Env::start().await;
        fixture(&env).await;
        env
    });
    let fs = env.direct();
    let pids = first.block_on(async {
        assert_eq!(entries(walk(&fs, "small").await).await.len(), 2);
        world_processes(&env).await
    });
    assert_eq!(pids.len(), 1, "{pids:?}");
    drop(first);
    runtime().block_on(async {
        let walked = tokio::time::timeout(Duration::from_secs(30), async {
            entries(walk(&fs, "small").await).await
        })
        .await
        .expect("the walk is answered, not left waiting on the ended tasks");
        assert_eq!(walked, ["d", "d/a.txt"]);
        let now = world_processes(&env).await;
        assert!(now.iter().any(|pid| !pids.contains(pid)), "{now:?}");
    });
}

/// The versions of `root`'s entries as a walk gives them, by relative path.
async fn walked_versions(fs: &dyn FsProvider, root: &str) -> Vec<(String, Version)> {
    walk(fs, root)
        .await
        .try_filter_map(|event| async move {
            Ok(match event {
                WalkEvent::Entry(entry) => Some((entry.relative, entry.metadata.version)),
                WalkEvent::End(_) => None,
            })
        })
        .try_collect()
        .await
        .expect("walk events")
}

/// The process remembers entries' attribute names by inode and change time
/// (`dsh-supervisor`'s `xattr_names`): an attribute set on a file old
/// enough to be remembered still moves its walked version, which stays its
/// `lstat`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walked_version_follows_an_attribute_set_on_a_remembered_file() {
    let env = Env::start().await;
    env.sh(
        r#"mkdir -p "$1/tagged" && printf 'x' > "$1/tagged/f""#,
        &[CWD],
    )
    .await;
    // Past the 2 s within which a change time is read each time.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let fs = env.direct();
    let path = format!("{CWD}/tagged/f");
    let before = walked_versions(&fs, "tagged").await;
    assert_eq!(before, walked_versions(&fs, "tagged").await);
    assert_eq!(before[0].1, fs.lstat(&path).await.expect("lstat").version);

    env.sh(
        r#"python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.e2b.k", b"v")' "$1""#,
        &[&path],
    )
    .await;
    let after = walked_versions(&fs, "tagged").await;
    assert_ne!(after, before, "the attribute moves the version");
    assert_eq!(after[0].1, fs.lstat(&path).await.expect("lstat").version);
}

/// How many descriptors of `pid` lead to a deleted file.
async fn deleted_files_held(env: &Env, pid: u32) -> usize {
    env.sh(
        r#"find "/proc/$1/fd" -lname '* (deleted)' | wc -l"#,
        &[&pid.to_string()],
    )
    .await
    .trim()
    .parse()
    .expect("a count")
}

/// Writes of 1 MiB and 9 MiB, new and over the last, then twice over the
/// 9 MiB file: the first of those starts the process for the writes to come
/// (not waiting for it), the second has it hold the replaced file, and let
/// it go. With `mode`, the file is given that mode after the first write, so
/// that every later one is staged (an upload's mode is 644) and keeps it.
async fn a_large_replaced_file_is_held_over_the_rename(env: Env, mode: Option<&str>) {
    let fs = env.through_owner();
    let path = format!("{CWD}/large.bin");
    let write = |fill: u8, len: usize| {
        let fs = fs.clone();
        let path = path.clone();
        async move {
            fs.write(&path, Bytes::from(vec![fill; len]), WriteGuard::Overwrite)
                .await
                .expect("write")
        }
    };
    // A new file and one over a small one: nothing worth holding, no process.
    write(b'a', 1 << 20).await;
    if let Some(mode) = mode {
        env.sh(r#"chmod "$1" "$2""#, &[mode, &path]).await;
    }
    write(b'b', 1 << 20).await;
    assert!(world_processes(&env).await.is_empty());
    write(b'c', 9 << 20).await;
    assert!(world_processes(&env).await.is_empty());

    // Over a file of 9 MiB: the process is started meanwhile, and holds nothing yet.
    write(b'c', 9 << 20).await;
    assert_eq!(fs.holds(), 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let pids = loop {
        let pids = world_processes(&env).await;
        if !pids.is_empty() {
            break pids;
        }
        assert!(
            Instant::now() < deadline,
            "no process started for the writes to come"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(pids.len(), 1, "{pids:?}");
    // The next one is held by the process over its rename, then let go.
    write(b'd', 9 << 20).await;
    assert_eq!(fs.holds(), 1, "the replaced file was held");
    let deadline = Instant::now() + Duration::from_secs(10);
    while deleted_files_held(&env, pids[0]).await > 0 || threads(&env, pids[0]).await > 1 {
        assert!(Instant::now() < deadline, "the hold outlived the write");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let other = env.sh(r#"tr -d d < "$1" | wc -c"#, &[&path]).await;
    assert_eq!(other.trim(), "0", "only the new content");
    assert_eq!(
        env.sh(r#"stat -c '%s %a' "$1""#, &[&path]).await.trim(),
        format!("{} {}", 9 << 20, mode.unwrap_or("644"))
    );
    assert!(fs.quiesce(Duration::from_secs(10)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_replacing_a_large_file_has_the_process_hold_it_over_the_rename() {
    a_large_replaced_file_is_held_over_the_rename(Env::start().await, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_write_replacing_a_large_private_file_has_the_process_hold_it() {
    a_large_replaced_file_is_held_over_the_rename(Env::start().await, Some("600")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_replacing_a_large_file_holds_it_over_the_mv_of_an_envd_acting_as_root() {
    let env = Env::start_with(&["--envd-file-access", "as-root"]).await;
    a_large_replaced_file_is_held_over_the_rename(env, None).await;
}

/// What `read_text` and `stream_text` answer for `path`: the text (whole,
/// or streamed and joined) and version, or the error's kind.
async fn read_both(fs: &dyn FsProvider, path: &str) -> [Result<(String, Version), ErrorKind>; 2] {
    let whole = fs
        .read_text(path)
        .await
        .map(|file| (file.text.to_string(), file.version))
        .map_err(|err| err.kind());
    let streamed = match fs.stream_text(path).await {
        Ok(read) => {
            let chunks: Vec<_> = read.chunks.collect().await;
            let text: Result<String, _> = chunks
                .into_iter()
                .map(|chunk| chunk.map(|text| text.to_string()))
                .collect();
            match text {
                Ok(text) => {
                    assert_eq!(
                        read.size,
                        text.len() as u64,
                        "{path}: the size is the text's"
                    );
                    Ok((text, read.version))
                }
                Err(err) => Err(err.kind()),
            }
        }
        Err(err) => Err(err.kind()),
    };
    [whole, streamed]
}

/// Every kind of path read before the helper's process runs (envd's `Stat`
/// and download, or the user's reading process against an envd acting as
/// root) and again while it runs: the same texts, versions and errors;
/// only the small texts came from the process.
async fn reads_as_envd_does(env: Env) {
    let fs = env.through_owner();
    env.sh(
        r#"cd "$1" && printf 'h\303\251llo\n' > text && ln -s text link && : > empty \
        && printf 'a\0b' > binary && printf '\377\376' > invalid && mkdir dir && mkfifo fifo \
        && head -c 2000000 /dev/zero | tr '\0' 'x' > big && printf 'no' > secret && chmod 000 secret"#,
        &[CWD],
    )
    .await;
    let names = [
        "text", "link", "empty", "binary", "invalid", "dir", "fifo", "big", "secret", "absent",
    ];
    let mut before = Vec::new();
    for name in names {
        before.push(read_both(fs.as_ref(), &format!("{CWD}/{name}")).await);
    }
    assert!(
        world_processes(&env).await.is_empty(),
        "reads do not start it"
    );
    assert_eq!(fs.native_reads(), 0);

    // Started by a walk; then the same reads.
    entries(walk(fs.as_ref(), "dir").await).await;
    assert_eq!(world_processes(&env).await.len(), 1);
    for (name, expected) in names.into_iter().zip(&before) {
        let path = format!("{CWD}/{name}");
        assert_eq!(&read_both(fs.as_ref(), &path).await, expected, "{name}");
    }
    assert_eq!(
        fs.native_reads(),
        6,
        "text, link and empty, each read whole and streamed, came from the process"
    );
    assert!(matches!(&before[0][0], Ok((text, _)) if text == "héllo\n"));
    assert!(matches!(&before[7][0], Ok((text, _)) if text.len() == 2_000_000));
    assert_eq!(before[3][0], Err(ErrorKind::Binary));
    assert_eq!(before[4][0], Err(ErrorKind::InvalidUtf8));
    assert_eq!(before[5][0], Err(ErrorKind::IsADirectory));
    assert_eq!(before[6][0], Err(ErrorKind::InvalidInput));
    assert_eq!(before[8][0], Err(ErrorKind::PermissionDenied));
    assert_eq!(before[9][0], Err(ErrorKind::NotFound));
    assert!(fs.quiesce(Duration::from_secs(10)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_helper_reads_texts_as_envd_does() {
    reads_as_envd_does(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_helper_reads_texts_as_an_envd_acting_as_root_does() {
    reads_as_envd_does(Env::start_with(&["--envd-file-access", "as-root"]).await).await;
}

/// What an edit did to a file: the replacements, then the file's text (or
/// the error's kind reading it) and `stat`'s owner, group and mode; or the
/// edit's error kind.
type Edited = Result<(usize, Result<String, ErrorKind>, String), ErrorKind>;

/// The edit cases: a file name, its edits, its guard.
fn edit_cases() -> Vec<(&'static str, Vec<Edit>, WriteGuard)> {
    let one = |old: &str, new: &str| {
        vec![Edit {
            old: old.into(),
            new: new.into(),
            replace_all: false,
        }]
    };
    let all = vec![Edit {
        old: "x".into(),
        new: "y".into(),
        replace_all: true,
    }];
    let any = WriteGuard::Overwrite;
    vec![
        ("text", one("beta", "gamma"), any.clone()),
        ("crlf", one("two", "2\nthree"), any.clone()),
        ("link", one("target", "aimed"), any.clone()),
        ("twice", all, any.clone()),
        ("mode", one("mode", "still"), any.clone()),
        ("readonly", one("ro", "rw"), any.clone()),
        ("none", one("zzz", "y"), any.clone()),
        ("ambiguous", one("x", "y"), any.clone()),
        ("suid", one("suid", "plain"), any.clone()),
        ("rootowned", one("r", "s"), any.clone()),
        ("big", one("END", "FIN"), any.clone()),
        ("binary", one("a", "c"), any.clone()),
        ("invalid", one("a", "c"), any.clone()),
        ("dir", one("a", "c"), any.clone()),
        ("fifo", one("a", "c"), any.clone()),
        ("absent", one("a", "c"), any.clone()),
        (
            "stale",
            one("v", "w"),
            WriteGuard::IfVersion(Version("stale".into())),
        ),
    ]
}

/// Runs every edit case in `dir`; each edit that succeeds answers the
/// version a read then gives.
async fn edit_all(env: &Env, fs: &dyn FsProvider, dir: &str) -> Vec<Edited> {
    let mut outcomes = Vec::new();
    for (name, edits, guard) in edit_cases() {
        let path = format!("{CWD}/{dir}/{name}");
        let outcome = match fs.edit(&path, edits, guard).await {
            Ok(outcome) => {
                let read = fs.read_text(&path).await;
                if let Ok(read) = &read {
                    assert_eq!(read.version, outcome.version, "{path}: the edit's version");
                }
                let attrs = env.sh(r#"stat -L -c '%U:%G:%a' "$1""#, &[&path]).await;
                Ok((
                    outcome.replacements,
                    read.map(|read| read.text.to_string())
                        .map_err(|err| err.kind()),
                    attrs,
                ))
            }
            Err(err) => Err(err.kind()),
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// The files the edit and write cases replace, in each of the
/// space-separated `dirs` of the workspace.
async fn replaceable_files(env: &Env, dirs: &str) {
    env.sh(
        r#"cd "$1" && for d in $2; do mkdir "$d" && (cd "$d" \
        && printf 'alpha\nbeta\n' > text && printf 'one\r\ntwo\r\n' > crlf \
        && printf 'target\n' > t2 && ln -s t2 link && printf 'x and x\n' > twice \
        && printf 'mode\n' > mode && chmod 640 mode && printf 'ro\n' > readonly && chmod 444 readonly \
        && printf 'abc\n' > none && printf 'x and x\n' > ambiguous \
        && printf 'suid\n' > suid && chmod 4755 suid \
        && { head -c 2000000 /dev/zero | tr '\0' 'x'; printf 'END\n'; } > big \
        && printf 'a\0b' > binary && printf 'a\377\376' > invalid && mkdir dir && mkfifo fifo \
        && printf 'v\n' > stale); done"#,
        &[CWD, dirs],
    )
    .await;
    let ran = env
        .run_as(
            "root",
            r#"for d in $2; do printf 'r\n' > "$1/$d/rootowned" && chmod 666 "$1/$d/rootowned"; done"#,
            &[CWD, dirs],
        )
        .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr_text());
}

/// Runs the cases `cases` (one outcome per name, in order) on fresh
/// [`replaceable_files`] in one directory before the helper's process runs
/// (which they must not start), and in another once a walk started it: the
/// same outcomes, the same names left in both directories. Returns the
/// first run's outcomes.
async fn both_ways<T: PartialEq + std::fmt::Debug>(
    env: &Env,
    fs: &FsE2b<OwnerTransport>,
    names: Vec<&str>,
    cases: impl AsyncFn(&str) -> Vec<T>,
) -> Vec<T> {
    replaceable_files(env, "before while").await;
    let before = cases("before").await;
    assert!(
        world_processes(env).await.is_empty(),
        "the cases do not start it"
    );
    entries(walk(fs, "while").await).await;
    assert_eq!(world_processes(env).await.len(), 1);
    let after = cases("while").await;
    for (name, (before, after)) in names.iter().zip(before.iter().zip(&after)) {
        assert_eq!(before, after, "{name}");
    }
    same_names(env, "before", "while").await;
    before
}

/// Every kind of edit done before the helper's process runs (envd's way:
/// direct, staged, or the user's process against an envd acting as root)
/// and again, on a copy, while it runs: the same outcomes, texts, owners
/// and modes, nothing left beside the files; the plain texts the user owns
/// were edited by the process, the rest declined to the envd way.
async fn edits_as_envd_does(env: Env) {
    let fs = env.through_owner();
    let names = edit_cases().into_iter().map(|(name, ..)| name);
    let before = both_ways(&env, &fs, names.collect(), async |dir| {
        edit_all(&env, fs.as_ref(), dir).await
    })
    .await;
    assert_eq!(
        fs.native_edits(),
        6,
        "text, crlf, link, twice, mode and readonly were edited by the process"
    );

    let user = env.sh("id -un; id -gn", &[]).await.replace('\n', ":");
    let ok = |replacements: usize, text: &str, attrs: &str| -> Edited {
        Ok((replacements, Ok(text.into()), format!("{attrs}\n")))
    };
    assert_eq!(before[0], ok(1, "alpha\ngamma\n", &format!("{user}644")));
    assert_eq!(
        before[1],
        ok(1, "one\r\n2\r\nthree\r\n", &format!("{user}644"))
    );
    assert_eq!(before[2], ok(1, "aimed\n", &format!("{user}644")));
    assert_eq!(before[3], ok(2, "y and y\n", &format!("{user}644")));
    assert_eq!(before[4], ok(1, "still\n", &format!("{user}640")));
    assert_eq!(before[5], ok(1, "rw\n", &format!("{user}444")));
    assert_eq!(before[6], Err(ErrorKind::InvalidInput));
    assert_eq!(before[7], Err(ErrorKind::InvalidInput));
    // Declined by the process: the envd way's edit, as the user, leaves the
    // file the user's.
    assert_eq!(before[9], ok(1, "s\n", &format!("{user}666")));
    assert!(matches!(&before[10], Ok((1, Ok(text), _)) if text.ends_with("xFIN\n")));
    assert_eq!(before[11], Err(ErrorKind::Binary));
    assert_eq!(before[12], Err(ErrorKind::InvalidUtf8));
    assert_eq!(before[15], Err(ErrorKind::NotFound));
    assert_eq!(before[16], Err(ErrorKind::Conflict));
    assert!(fs.quiesce(Duration::from_secs(10)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_helper_edits_as_envd_does() {
    edits_as_envd_does(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_helper_edits_as_an_envd_acting_as_root_does() {
    edits_as_envd_does(Env::start_with(&["--envd-file-access", "as-root"]).await).await;
}

/// The two directories hold the same names, none of them a staged file's.
async fn same_names(env: &Env, a: &str, b: &str) {
    let listed = env
        .sh(
            r#"cd "$1" && ls -A "$2" && echo -- && ls -A "$3""#,
            &[CWD, a, b],
        )
        .await;
    let (a, b) = listed.split_once("--\n").expect("two listings");
    assert_eq!(a, b, "nothing left beside the files");
    assert!(!a.contains(".dsh-stage-"), "{a}");
}

/// A write case's guard.
#[derive(Clone, Copy)]
enum Guard {
    Any,
    /// The version a read gives just before.
    Current,
    Stale,
    New,
}

/// The write cases: a file name, its new content, its guard.
fn write_cases() -> Vec<(&'static str, Vec<u8>, Guard)> {
    vec![
        ("text", b"new text\n".to_vec(), Guard::Any),
        ("crlf", b"guarded\r\n".to_vec(), Guard::Current),
        ("link", b"through\n".to_vec(), Guard::Any),
        ("mode", b"m\n".to_vec(), Guard::Any),
        ("readonly", b"r\n".to_vec(), Guard::Any),
        ("binary", b"\0\x01\xff".to_vec(), Guard::Any),
        ("invalid", b"ok\n".to_vec(), Guard::Current),
        ("suid", b"s\n".to_vec(), Guard::Any),
        ("rootowned", b"o\n".to_vec(), Guard::Any),
        ("big", b"small\n".to_vec(), Guard::Any),
        ("none", vec![b'z'; 2 << 20], Guard::Any),
        ("dir", b"d\n".to_vec(), Guard::Any),
        ("fifo", b"f\n".to_vec(), Guard::Any),
        ("absent", b"new\n".to_vec(), Guard::Any),
        ("stale", b"w\n".to_vec(), Guard::Stale),
        ("twice", b"again\n".to_vec(), Guard::New),
    ]
}

/// What a write did to a file: `stat`'s owner, group, mode and size and
/// the content's digest after it; or the write's error kind.
type Written = Result<String, ErrorKind>;

/// Runs every write case in `dir`; each write that succeeds answers the
/// version a `stat` then gives.
async fn write_all(env: &Env, fs: &dyn FsProvider, dir: &str) -> Vec<Written> {
    let mut outcomes = Vec::new();
    for (name, content, guard) in write_cases() {
        let path = format!("{CWD}/{dir}/{name}");
        let guard = match guard {
            Guard::Any => WriteGuard::Overwrite,
            Guard::Current => WriteGuard::IfVersion(fs.stat(&path).await.expect("stat").version),
            Guard::Stale => WriteGuard::IfVersion(Version("stale".into())),
            Guard::New => WriteGuard::CreateNew,
        };
        let outcome = match fs.write(&path, Bytes::from(content), guard).await {
            Ok(version) => {
                let now = fs.stat(&path).await.expect("stat after the write");
                assert_eq!(now.version, version, "{path}: the write's version");
                Ok(env
                    .sh(
                        r#"stat -L -c '%U:%G:%a:%s' "$1" && md5sum < "$1""#,
                        &[&path],
                    )
                    .await)
            }
            Err(err) => Err(err.kind()),
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// Every kind of write done before the helper's process runs and again, on
/// a copy, while it runs: the same outcomes, contents, owners and modes,
/// nothing left beside the files; the plain files the user owns were
/// replaced by the process, the rest declined to the envd way.
async fn writes_as_envd_does(env: Env) {
    let fs = env.through_owner();
    let names = write_cases().into_iter().map(|(name, ..)| name);
    let before = both_ways(&env, &fs, names.collect(), async |dir| {
        write_all(&env, fs.as_ref(), dir).await
    })
    .await;
    assert_eq!(
        fs.native_writes(),
        7,
        "text, crlf, link, mode, readonly, binary and invalid were replaced by the process"
    );
    let user = env.sh("id -un; id -gn", &[]).await.replace('\n', ":");
    assert!(matches!(&before[0], Ok(attrs) if attrs.starts_with(&format!("{user}644:9\n"))));
    assert!(matches!(&before[4], Ok(attrs) if attrs.starts_with(&format!("{user}444:2\n"))));
    assert!(matches!(&before[10], Ok(attrs) if attrs.contains(":2097152\n")));
    assert!(matches!(&before[13], Ok(attrs) if attrs.contains(":4\n")));
    assert_eq!(before[14], Err(ErrorKind::Conflict));
    assert_eq!(before[15], Err(ErrorKind::AlreadyExists));
    assert!(fs.quiesce(Duration::from_secs(10)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_helper_writes_as_envd_does() {
    writes_as_envd_does(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_helper_writes_as_an_envd_acting_as_root_does() {
    writes_as_envd_does(Env::start_with(&["--envd-file-access", "as-root"]).await).await;
}
