//! read_text, stream_text and read_bytes.

use std::os::unix::fs::PermissionsExt;

use dsh_fs_local::CHUNK_LEN;
use dsh_plugin_api::fs::{BINARY_SAMPLE_LEN, FsProvider};
use dsh_plugin_api::{Bytes, ErrorKind, Text};
use futures::StreamExt;

use crate::common::{World, as_unprivileged, assert_names, block_on, expect_err};

#[tokio::test]
async fn read_text_returns_text_and_the_current_version() {
    let world = World::new();
    world.put("a.txt", "héllo\r\nwörld 😀\n");
    let file = world.fs.read_text("a.txt").await.unwrap();
    assert_eq!(file.text, "héllo\r\nwörld 😀\n");
    assert_eq!(file.version, world.fs.stat("a.txt").await.unwrap().version);
    world.put("empty", "");
    assert_eq!(world.fs.read_text("empty").await.unwrap().text, "");
}

#[tokio::test]
async fn read_text_of_a_large_file_is_exact() {
    let world = World::new();
    let text = "línea de texto 日本\n".repeat(40_000);
    world.put("big.txt", &text);
    assert_eq!(world.fs.read_text("big.txt").await.unwrap().text, text);
}

#[tokio::test]
async fn reading_binary_content_is_binary() {
    let world = World::new();
    world.put("bin", b"ELF\x00\x01\x02");
    let err = expect_err(world.fs.read_text("bin").await, ErrorKind::Binary);
    assert_names(&err, "read_text", &world.abs("bin"));
    assert!(err.message().contains("offset 3"), "{err}");
    let err = expect_err(
        world.fs.stream_text("bin").await.map(|_| ()),
        ErrorKind::Binary,
    );
    assert_names(&err, "stream_text", &world.abs("bin"));
    // Raw bytes are fine.
    let stream = world.fs.read_bytes("bin").await.unwrap();
    assert_eq!(collect_bytes(stream.chunks).await, b"ELF\x00\x01\x02");
}

#[tokio::test]
async fn a_nul_only_after_the_sample_is_not_binary() {
    let world = World::new();
    let mut content = vec![b'a'; BINARY_SAMPLE_LEN];
    content.push(0);
    world.put("late-nul", &content);
    assert_eq!(
        world.fs.read_text("late-nul").await.unwrap().text.len(),
        content.len()
    );
    let mut early = vec![b'a'; BINARY_SAMPLE_LEN - 1];
    early.push(0);
    world.put("early-nul", &early);
    expect_err(world.fs.read_text("early-nul").await, ErrorKind::Binary);
    expect_err(
        world.fs.stream_text("early-nul").await.map(|_| ()),
        ErrorKind::Binary,
    );
}

#[tokio::test]
async fn invalid_utf8_is_an_error_never_replacement_characters() {
    let world = World::new();
    world.put("latin1", b"caf\xe9 au lait");
    let err = expect_err(world.fs.read_text("latin1").await, ErrorKind::InvalidUtf8);
    assert_names(&err, "read_text", &world.abs("latin1"));
    assert!(err.message().contains("byte offset 3"), "{err}");

    let stream = world.fs.stream_text("latin1").await.unwrap();
    let (text, err) = collect_text(stream.chunks).await;
    let err = err.expect("the stream ends with an error");
    assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
    assert_names(&err, "stream_text", &world.abs("latin1"));
    assert_eq!(text, "caf", "only the valid prefix is delivered");
    assert!(!text.contains('\u{FFFD}'));
}

#[tokio::test]
async fn invalid_utf8_deep_in_a_stream_ends_it_with_the_offset() {
    let world = World::new();
    let mut content = "ok ".repeat(100_000).into_bytes();
    let bad_at = content.len();
    content.extend_from_slice(b"\xff tail");
    world.put("late-bad", &content);
    let stream = world.fs.stream_text("late-bad").await.unwrap();
    let (text, err) = collect_text(stream.chunks).await;
    let err = err.expect("error");
    assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
    assert!(
        err.message().contains(&format!("byte offset {bad_at}")),
        "{err}"
    );
    assert_eq!(text.len(), bad_at);
}

#[tokio::test]
async fn a_sequence_cut_by_the_end_of_file_is_invalid() {
    let world = World::new();
    world.put("cut", &"abc日".as_bytes()[..5]);
    let stream = world.fs.stream_text("cut").await.unwrap();
    let (text, err) = collect_text(stream.chunks).await;
    assert_eq!(text, "abc");
    assert_eq!(err.expect("error").kind(), ErrorKind::InvalidUtf8);
}

#[tokio::test]
async fn missing_directory_and_special_paths_are_refused() {
    let world = World::new();
    let err = expect_err(world.fs.read_text("missing").await, ErrorKind::NotFound);
    assert_names(&err, "read_text", &world.abs("missing"));
    expect_err(
        world.fs.stream_text("missing").await.map(|_| ()),
        ErrorKind::NotFound,
    );
    expect_err(
        world.fs.read_bytes("missing").await.map(|_| ()),
        ErrorKind::NotFound,
    );

    std::fs::create_dir(world.path("dir")).unwrap();
    let err = expect_err(world.fs.read_text("dir").await, ErrorKind::IsADirectory);
    assert_names(&err, "read_text", &world.abs("dir"));
    expect_err(
        world.fs.stream_text("dir").await.map(|_| ()),
        ErrorKind::IsADirectory,
    );
    expect_err(
        world.fs.read_bytes("dir").await.map(|_| ()),
        ErrorKind::IsADirectory,
    );

    // A FIFO without a writer would block a reader forever: refused at once.
    let status = std::process::Command::new("mkfifo")
        .arg(world.path("fifo"))
        .status()
        .unwrap();
    assert!(status.success());
    let err = expect_err(world.fs.read_text("fifo").await, ErrorKind::InvalidInput);
    assert!(err.message().contains("FIFO"), "{err}");

    expect_err(world.fs.read_text("").await, ErrorKind::InvalidInput);
    expect_err(
        world.fs.read_bytes("a\0").await.map(|_| ()),
        ErrorKind::InvalidInput,
    );
}

#[test]
fn unreadable_files_are_permission_denied() {
    let world = World::new();
    let path = world.put("private", "secret");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    world.put("public", "open");
    let (public, private) = as_unprivileged(|| {
        block_on(async {
            (
                world.fs.read_text("public").await,
                world.fs.read_text("private").await,
            )
        })
    });
    assert_eq!(public.expect("the world itself is reachable").text, "open");
    let err = expect_err(private, ErrorKind::PermissionDenied);
    assert_names(&err, "read_text", &world.abs("private"));
}

#[tokio::test]
async fn empty_files_are_empty_streams() {
    let world = World::new();
    world.put("empty", "");
    let text = world.fs.stream_text("empty").await.unwrap();
    assert_eq!(text.size, 0);
    assert_eq!(text.chunks.count().await, 0);
    let bytes = world.fs.read_bytes("empty").await.unwrap();
    assert_eq!(bytes.size, 0);
    assert_eq!(bytes.chunks.count().await, 0);
}

#[tokio::test]
async fn streams_carry_size_and_version() {
    let world = World::new();
    world.put("s.txt", "streamed");
    let version = world.fs.stat("s.txt").await.unwrap().version;
    let text = world.fs.stream_text("s.txt").await.unwrap();
    assert_eq!((text.size, &text.version), (8, &version));
    let bytes = world.fs.read_bytes("s.txt").await.unwrap();
    assert_eq!((bytes.size, &bytes.version), (8, &version));
}

#[tokio::test]
async fn multibyte_text_decodes_across_every_chunk_boundary_split() {
    let world = World::new();
    // Place a 2-, 3- and 4-byte character across the first chunk boundary
    // at every possible split.
    for ch in ['é', '日', '😀'] {
        for shift in 0..ch.len_utf8() {
            let mut text = "a".repeat(CHUNK_LEN - shift - 1);
            text.push(ch);
            text.push_str(&"b€".repeat(CHUNK_LEN));
            world.put("split.txt", &text);
            let stream = world.fs.stream_text("split.txt").await.unwrap();
            let chunks: Vec<Text> = stream
                .chunks
                .map(|chunk| chunk.expect("valid chunk"))
                .collect()
                .await;
            assert!(chunks.iter().all(|chunk| !chunk.is_empty()));
            assert!(chunks.iter().all(|chunk| chunk.len() <= CHUNK_LEN + 3));
            assert_eq!(chunks.concat(), text, "{ch} shifted {shift}");
        }
    }
}

#[tokio::test]
async fn byte_streams_are_exact_bounded_and_never_empty() {
    let world = World::new();
    let content: Vec<u8> = (0..(3 * CHUNK_LEN + 12_345))
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    world.put("data.bin", &content);
    let stream = world.fs.read_bytes("data.bin").await.unwrap();
    let chunks: Vec<Bytes> = stream.chunks.map(|chunk| chunk.unwrap()).collect().await;
    assert!(
        chunks
            .iter()
            .all(|chunk| !chunk.is_empty() && chunk.len() <= CHUNK_LEN)
    );
    assert_eq!(chunks.concat(), content);
}

/// A large stream read slowly never reads ahead of its consumer: the
/// reader's file position (from /proc) is exactly what was consumed, so at
/// most one chunk is in memory per stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_streams_use_bounded_memory() {
    let world = World::new();
    let size = 64 * 1024 * 1024_u64;
    let file = std::fs::File::create(world.path("sparse.bin")).unwrap();
    file.set_len(size).unwrap();
    drop(file);
    let mut stream = world.fs.read_bytes("sparse.bin").await.unwrap().chunks;
    let mut consumed = 0_u64;
    for _ in 0..3 {
        consumed += stream.next().await.unwrap().unwrap().len() as u64;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let position = reader_position(&world.path("sparse.bin")).expect("the reader's fd is open");
    assert_eq!(position, consumed, "nothing is read ahead");
    let mut total = consumed;
    while let Some(chunk) = stream.next().await {
        total += chunk.unwrap().len() as u64;
    }
    assert_eq!(total, size);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_stream_closes_the_file() {
    let world = World::new();
    let file = std::fs::File::create(world.path("big.bin")).unwrap();
    file.set_len(32 * 1024 * 1024).unwrap();
    drop(file);
    let mut stream = world.fs.read_bytes("big.bin").await.unwrap().chunks;
    stream.next().await.unwrap().unwrap();
    drop(stream);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while reader_position(&world.path("big.bin")).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader kept the file open"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The file offset of this process's open descriptor for `path`, if any.
fn reader_position(path: &std::path::Path) -> Option<u64> {
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let entry = entry.unwrap();
        if std::fs::read_link(entry.path()).ok().as_deref() == Some(path) {
            let info = std::fs::read_to_string(format!(
                "/proc/self/fdinfo/{}",
                entry.file_name().to_string_lossy()
            ))
            .ok()?;
            let pos = info.lines().find_map(|line| line.strip_prefix("pos:"))?;
            return pos.trim().parse().ok();
        }
    }
    None
}

async fn collect_bytes(mut stream: dsh_plugin_api::stream::ByteStream) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.extend(chunk.unwrap());
    }
    out
}

async fn collect_text(
    mut stream: dsh_plugin_api::stream::TextStream,
) -> (String, Option<dsh_plugin_api::Error>) {
    let mut out = String::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                assert!(!chunk.is_empty(), "chunks are never empty");
                out.push_str(&chunk);
            }
            Err(err) => {
                assert!(
                    stream.next().await.is_none(),
                    "the stream ends after an error"
                );
                return (out, Some(err));
            }
        }
    }
    (out, None)
}
