//! The file tools over the real local `fs` provider, in a temporary
//! directory that is the world's working directory (so relative paths in
//! requests are relative to it).

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use dsh_consumers::Outcome;
use dsh_consumers::files::*;
use dsh_fs_local::FsLocal;
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::{Error, ErrorKind};

/// A world rooted at a fresh temporary directory.
pub(crate) struct World {
    dir: tempfile::TempDir,
    pub(crate) fs: Arc<FsLocal>,
    pub(crate) files: Files,
}

impl World {
    pub(crate) fn new() -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_str().expect("UTF-8 temp dir").to_owned();
        let fs = Arc::new(FsLocal::new(root).expect("fs-local"));
        let files = Files::new(fs.clone());
        World { dir, fs, files }
    }

    fn path(&self, relative: &str) -> std::path::PathBuf {
        self.dir.path().join(relative)
    }

    /// Creates `relative` (and its parents) with `content`, on the host.
    pub(crate) fn put(&self, relative: &str, content: impl AsRef<[u8]>) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, content).expect("write fixture");
    }

    pub(crate) fn get(&self, relative: &str) -> Vec<u8> {
        std::fs::read(self.path(relative)).expect("read back")
    }

    pub(crate) async fn version(&self, relative: &str) -> String {
        self.fs.stat(relative).await.expect("stat").version.0
    }
}

fn read(path: &str) -> ReadFileRequest {
    ReadFileRequest {
        path: path.to_owned(),
        offset: None,
        limit: None,
        byte_offset: None,
        max_bytes: None,
        line_numbers: None,
    }
}

pub(crate) fn edit(path: &str, old: &str, new: &str) -> EditFileRequest {
    EditFileRequest {
        path: Some(path.to_owned()),
        old_string: Some(old.to_owned()),
        new_string: Some(new.to_owned()),
        expected_replacements: None,
        if_version: None,
        edits: None,
        dry_run: None,
    }
}

fn grep(pattern: &str) -> GrepRequest {
    GrepRequest {
        pattern: pattern.to_owned(),
        path: None,
        glob: None,
        case_insensitive: None,
        max_matches: None,
        context: None,
        mode: None,
        file_type: None,
    }
}

fn find(pattern: &str) -> FindFilesRequest {
    FindFilesRequest {
        path: None,
        pattern: pattern.to_owned(),
        max_results: None,
    }
}

fn list(path: &str, depth: Option<u64>) -> ListDirRequest {
    ListDirRequest {
        path: Some(path.to_owned()),
        depth,
        max_entries: None,
    }
}

fn numbered_lines(count: usize) -> String {
    (1..=count).map(|n| format!("line {n}\n")).collect()
}

/// Asserts `err` is of `kind`, names `tool` and mentions `needle`.
pub(crate) fn assert_error(err: &Error, kind: ErrorKind, tool: &str, needle: &str) {
    assert_eq!(err.kind(), kind, "{err}");
    assert!(err.message().starts_with(&format!("{tool}: ")), "{err}");
    assert!(err.to_string().contains(needle), "{needle:?} not in: {err}");
}

/// The files a grep in a file mode found, with their counts.
fn files_found(result: &GrepResult) -> Vec<(&str, Option<u64>)> {
    result
        .files
        .iter()
        .map(|file| (file.path.as_str(), file.matches))
        .collect()
}

fn paths(entries: &[ListedEntry]) -> Vec<&str> {
    entries.iter().map(|entry| entry.path.as_str()).collect()
}

// ---------------------------------------------------------------- read_file

#[tokio::test]
async fn read_file_returns_a_line_window_with_the_version_and_where_to_continue() {
    let world = World::new();
    world.put("sub/ten.txt", numbered_lines(10));
    let result = world
        .files
        .read_file(ReadFileRequest {
            offset: Some(3),
            limit: Some(2),
            ..read("sub/ten.txt")
        })
        .await
        .expect("read");
    assert_eq!(result.path, "sub/ten.txt", "the path is echoed as given");
    assert_eq!(result.content, "line 3\nline 4\n");
    assert_eq!((result.start_line, result.lines), (3, 2));
    assert_eq!(result.start_byte, 14);
    assert_eq!(result.total_lines, Some(10));
    assert!(result.more);
    assert_eq!(result.next_offset, Some(5));
    assert_eq!(result.next_byte_offset, Some(result.end_byte));
    assert_eq!(result.version, world.version("sub/ten.txt").await);
    let text = result.text();
    assert!(text.starts_with("line 3\nline 4\n["), "{text}");
    assert!(text.contains("lines 3-4 of 10"), "{text}");
    assert!(text.contains("continue with offset=5"), "{text}");

    let whole = world
        .files
        .read_file(read("sub/ten.txt"))
        .await
        .expect("read all");
    assert_eq!(whole.content, numbered_lines(10));
    assert!(!whole.more);
    assert_eq!((whole.next_offset, whole.next_byte_offset), (None, None));
    assert!(whole.text().contains("end of file"), "{}", whole.text());
}

#[tokio::test]
async fn read_file_of_a_big_file_returns_a_bounded_window_without_reading_it_all() {
    let world = World::new();
    // 12 MiB: past the 4 MiB look-ahead, so the total is left uncounted.
    let line = format!("{}\n", "x".repeat(99));
    world.put("big.txt", line.repeat(120_000 + 5_000));
    let first = world.files.read_file(read("big.txt")).await.expect("read");
    assert!(first.content.len() <= READ_DEFAULT_MAX_BYTES as usize);
    assert_eq!(first.lines, 512, "whole lines up to 50 KiB");
    assert!(first.more);
    assert_eq!(first.total_lines, None, "not counted past the look-ahead");
    assert_eq!(first.size, 125_000 * 100);
    assert!(
        first.text().contains("(total not counted)"),
        "{}",
        first.text()
    );

    let raised = world
        .files
        .read_file(ReadFileRequest {
            max_bytes: Some(10 * 1024 * 1024),
            limit: Some(1_000_000),
            ..read("big.txt")
        })
        .await
        .expect("read with a raised max_bytes");
    assert!(raised.content.len() as u64 <= READ_MAX_BYTES, "capped");

    let near_end = world
        .files
        .read_file(ReadFileRequest {
            offset: Some(124_999),
            ..read("big.txt")
        })
        .await
        .expect("read near the end");
    assert_eq!(near_end.lines, 2);
    assert_eq!(near_end.total_lines, Some(125_000));
    assert!(!near_end.more);
}

#[tokio::test]
async fn read_file_cuts_long_lines_and_byte_offset_reads_the_rest() {
    let world = World::new();
    let long: String = (0..5000)
        .map(|n| char::from(b'a' + (n % 26) as u8))
        .collect();
    world.put("long.txt", format!("short\n{long}\nafter\n"));
    let result = world.files.read_file(read("long.txt")).await.expect("read");
    assert_eq!(result.cut_lines, 1);
    let shown: Vec<&str> = result.content.lines().collect();
    assert_eq!(shown[0], "short");
    let continue_at = 6 + READ_MAX_LINE_CHARS;
    assert_eq!(
        shown[1],
        format!(
            "{} [... line cut: 3000 more bytes; read_file byte_offset={continue_at} continues it]",
            &long[..READ_MAX_LINE_CHARS]
        )
    );
    assert_eq!(shown[2], "after");

    let rest = world
        .files
        .read_file(ReadFileRequest {
            byte_offset: Some(continue_at as u64),
            max_bytes: Some(3000),
            ..read("long.txt")
        })
        .await
        .expect("byte window");
    assert_eq!(rest.content, long[READ_MAX_LINE_CHARS..]);
    assert_eq!(rest.start_line, 2);
    assert_eq!(rest.start_byte, continue_at as u64);
    assert!(rest.more);
    assert_eq!(rest.next_byte_offset, Some(continue_at as u64 + 3000));
    assert_eq!(rest.next_offset, None, "byte mode continues by bytes");
}

#[tokio::test]
async fn read_file_numbers_lines_as_cat_n_within_its_window_and_bounds() {
    let world = World::new();
    world.put("ten.txt", numbered_lines(10));
    let files = &world.files;
    let numbered = |offset, limit, max_bytes| ReadFileRequest {
        offset,
        limit,
        max_bytes,
        line_numbers: Some(true),
        ..read("ten.txt")
    };
    let result = files
        .read_file(numbered(Some(9), Some(2), None))
        .await
        .expect("numbered read");
    assert_eq!(result.content, "     9\tline 9\n    10\tline 10\n");
    assert_eq!((result.start_line, result.lines), (9, 2));
    assert!(!result.more);

    // The numbers count toward max_bytes: 7 + 7 bytes for line 1, not line 2 too.
    let bounded = files
        .read_file(numbered(None, None, Some(20)))
        .await
        .expect("bounded numbered read");
    assert_eq!(bounded.content, "     1\tline 1\n");
    assert_eq!(bounded.next_offset, Some(2));

    let err = files
        .read_file(ReadFileRequest {
            byte_offset: Some(0),
            line_numbers: Some(true),
            ..read("ten.txt")
        })
        .await
        .unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "read_file", "line_numbers");
}

#[tokio::test]
async fn read_file_byte_windows_keep_characters_whole() {
    let world = World::new();
    world.put("utf8.txt", "aé日b\n");
    let result = world
        .files
        .read_file(ReadFileRequest {
            byte_offset: Some(2), // inside é
            max_bytes: Some(2),   // less than 日
            ..read("utf8.txt")
        })
        .await
        .expect("byte window");
    assert_eq!(result.start_byte, 3, "moved forward past é");
    assert_eq!(result.content, "日", "at least one whole character");
    assert_eq!(result.end_byte, 6);
}

#[tokio::test]
async fn read_file_refuses_binary_with_a_hint_and_invalid_utf8() {
    let world = World::new();
    world.put("blob.bin", b"PK\x03\x04\x00\x00binary");
    let err = world.files.read_file(read("blob.bin")).await.unwrap_err();
    assert_error(&err, ErrorKind::Binary, "read_file", "xxd");

    world.put("latin1.txt", b"caf\xe9\n");
    let err = world.files.read_file(read("latin1.txt")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidUtf8, "{err}");
    assert!(err.message().starts_with("read_file: "), "{err}");
}

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[tokio::test]
async fn read_file_returns_an_image_whole_as_base64_within_its_bound() {
    use base64::Engine;
    let base64 = base64::engine::general_purpose::STANDARD;
    let world = World::new();
    let png = base64.decode(PNG).expect("the PNG");
    world.put("plot.png", &png);
    let result = world
        .files
        .read_file(read("plot.png"))
        .await
        .expect("read an image");
    assert_eq!(result.mime_type.as_deref(), Some("image/png"));
    assert_eq!(result.image.as_deref(), Some(PNG));
    assert_eq!(
        (result.size, result.content.as_str()),
        (png.len() as u64, "")
    );
    assert_eq!(result.version, world.version("plot.png").await);
    assert_eq!(result.image(), Some(("image/png", PNG)));
    assert!(
        result.text().contains("image/png, 70 bytes"),
        "{}",
        result.text()
    );
    let structured = serde_json::to_value(&result).expect("JSON");
    assert!(
        structured.get("image").is_none(),
        "the bytes are the image content only"
    );

    let mut webp = b"RIFF\0\0\0\0WEBPVP8 ".to_vec();
    webp.resize(READ_MAX_IMAGE_BYTES as usize + 1, 0);
    world.put("huge.webp", &webp);
    let err = world.files.read_file(read("huge.webp")).await.unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "read_file",
        "over the 3145728-byte bound",
    );
    world.put("gif.gif", b"GIF89a\x01\0\x01\0\0\0\0;");
    let gif = world.files.read_file(read("gif.gif")).await.expect("a GIF");
    assert_eq!(gif.mime_type.as_deref(), Some("image/gif"));
}

#[tokio::test]
async fn read_file_refuses_bad_windows_and_directories() {
    let world = World::new();
    world.put("three.txt", numbered_lines(3));
    let files = &world.files;
    let err = files
        .read_file(ReadFileRequest {
            offset: Some(0),
            ..read("three.txt")
        })
        .await
        .unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "read_file", "1-based");
    let err = files
        .read_file(ReadFileRequest {
            offset: Some(4),
            ..read("three.txt")
        })
        .await
        .unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "read_file",
        "the file has 3 lines",
    );
    let err = files
        .read_file(ReadFileRequest {
            offset: Some(2),
            byte_offset: Some(0),
            ..read("three.txt")
        })
        .await
        .unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "read_file", "byte_offset");
    let err = files
        .read_file(ReadFileRequest {
            byte_offset: Some(100),
            ..read("three.txt")
        })
        .await
        .unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "read_file", "has 21 bytes");
    world.put("dir/x", "");
    let err = files.read_file(read("dir")).await.unwrap_err();
    assert_error(&err, ErrorKind::IsADirectory, "read_file", "list_dir");
    let err = files.read_file(read("missing.txt")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");

    world.put("empty.txt", "");
    let empty = files
        .read_file(read("empty.txt"))
        .await
        .expect("empty file");
    assert_eq!((empty.content.as_str(), empty.lines), ("", 0));
    assert_eq!((empty.total_lines, empty.more), (Some(0), false));
}

// --------------------------------------------------------------- write_file

#[tokio::test]
async fn write_file_writes_atomically_with_guards() {
    let world = World::new();
    let files = &world.files;
    let write = |content: &str, create_new, if_version| WriteFileRequest {
        path: "new/dir/file.txt".to_owned(),
        content: content.to_owned(),
        create_new,
        if_version,
    };
    let first = files
        .write_file(write("one\n", Some(true), None))
        .await
        .expect("create");
    assert_eq!(first.bytes, 4);
    assert_eq!(first.path, "new/dir/file.txt");
    assert_eq!(world.get("new/dir/file.txt"), b"one\n", "parents created");
    assert_eq!(first.version, world.version("new/dir/file.txt").await);

    let err = files
        .write_file(write("two\n", Some(true), None))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists, "{err}");
    assert!(err.message().starts_with("write_file: "), "{err}");

    let second = files
        .write_file(write("two\n", None, Some(first.version.clone())))
        .await
        .expect("guarded write at the current version");
    let err = files
        .write_file(write("three\n", None, Some(first.version)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert_eq!(
        world.get("new/dir/file.txt"),
        b"two\n",
        "a stale write changes nothing"
    );
    assert_eq!(second.version, world.version("new/dir/file.txt").await);

    let err = files
        .write_file(write("x", Some(true), Some(second.version)))
        .await
        .unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "write_file",
        "exclude each other",
    );
}

// ---------------------------------------------------------------- edit_file

#[tokio::test]
async fn edit_file_replaces_a_unique_match_and_returns_the_diff() {
    let world = World::new();
    world.put("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    let result = world
        .files
        .edit_file(edit("src/lib.rs", "fn b() {}", "fn b() { todo() }"))
        .await
        .expect("edit");
    assert_eq!(
        world.get("src/lib.rs"),
        b"fn a() {}\nfn b() { todo() }\nfn c() {}\n"
    );
    assert_eq!(result.replacements, 1);
    assert!(!result.dry_run);
    let [file] = &result.files[..] else {
        panic!("one file: {result:?}")
    };
    assert_eq!(file.path, "src/lib.rs");
    assert_eq!(file.replacements, 1);
    assert_eq!(file.version, Some(world.version("src/lib.rs").await));
    assert_ne!(file.version.as_deref(), Some(file.base_version.as_str()));
    assert_eq!(
        result.diff,
        "--- src/lib.rs\n+++ src/lib.rs\n@@ -1,3 +1,3 @@\n fn a() {}\n-fn b() {}\n+fn b() { todo() }\n fn c() {}\n"
    );
    assert!(
        result.text().contains("+fn b() { todo() }"),
        "{}",
        result.text()
    );
}

#[tokio::test]
async fn edit_file_refuses_a_non_unique_match_naming_the_count() {
    let world = World::new();
    world.put("f.txt", "x = 1\nx = 1\nx = 1\n");
    let files = &world.files;
    let err = files
        .edit_file(edit("f.txt", "x = 1", "x = 2"))
        .await
        .unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "edit_file",
        "matches 3 times",
    );
    assert!(err.message().contains("expected_replacements"), "{err}");
    let err = files
        .edit_file(EditFileRequest {
            expected_replacements: Some(2),
            ..edit("f.txt", "x = 1", "x = 2")
        })
        .await
        .unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "edit_file",
        "matches 3 times, not the 2",
    );
    assert_eq!(
        world.get("f.txt"),
        b"x = 1\nx = 1\nx = 1\n",
        "nothing changed"
    );

    let all = files
        .edit_file(EditFileRequest {
            expected_replacements: Some(3),
            ..edit("f.txt", "x = 1", "x = 2")
        })
        .await
        .expect("replace all three");
    assert_eq!(all.replacements, 3);
    assert_eq!(world.get("f.txt"), b"x = 2\nx = 2\nx = 2\n");

    let err = files
        .edit_file(edit("f.txt", "nope", "x"))
        .await
        .unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "edit_file",
        "matches 0 times",
    );
    let err = files.edit_file(edit("f.txt", "", "x")).await.unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "edit_file",
        "old_string is empty",
    );
    let err = files.edit_file(edit("f.txt", "x", "x")).await.unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "edit_file", "the same");
}

#[tokio::test]
async fn edit_file_with_a_stale_version_is_a_conflict_and_changes_nothing() {
    let world = World::new();
    world.put("f.txt", "before\n");
    let stale = world.version("f.txt").await;
    world
        .files
        .write_file(WriteFileRequest {
            path: "f.txt".to_owned(),
            content: "changed by someone\n".to_owned(),
            create_new: None,
            if_version: None,
        })
        .await
        .expect("someone else's write");
    let err = world
        .files
        .edit_file(EditFileRequest {
            if_version: Some(stale),
            ..edit("f.txt", "someone", "me")
        })
        .await
        .unwrap_err();
    assert_error(&err, ErrorKind::Conflict, "edit_file", "read it again");
    assert_eq!(world.get("f.txt"), b"changed by someone\n");
}

#[tokio::test]
async fn edit_file_dry_run_writes_nothing_and_shows_the_diff() {
    let world = World::new();
    world.put("f.txt", "keep\nold line\nkeep\n");
    let before = world.version("f.txt").await;
    let result = world
        .files
        .edit_file(EditFileRequest {
            dry_run: Some(true),
            ..edit("f.txt", "old line", "new line")
        })
        .await
        .expect("dry run");
    assert!(result.dry_run);
    assert_eq!(result.files[0].version, None);
    assert_eq!(result.files[0].base_version, before);
    assert_eq!(result.replacements, 1);
    assert!(
        result.diff.contains("-old line\n+new line\n"),
        "{}",
        result.diff
    );
    assert!(
        result.text().starts_with("dry run, nothing written"),
        "{}",
        result.text()
    );
    assert_eq!(world.get("f.txt"), b"keep\nold line\nkeep\n");
    assert_eq!(world.version("f.txt").await, before, "not even rewritten");

    // The dry run's base version applies exactly that edit.
    let applied = world
        .files
        .edit_file(EditFileRequest {
            if_version: Some(result.files[0].base_version.clone()),
            ..edit("f.txt", "old line", "new line")
        })
        .await
        .expect("apply");
    assert_eq!(applied.diff, result.diff);
}

#[tokio::test]
async fn edit_file_keeps_crlf_line_endings() {
    let world = World::new();
    world.put("win.txt", "one\r\ntwo\r\nthree\r\n");
    let result = world
        .files
        .edit_file(edit("win.txt", "two\nthree", "2\n3\n3.5"))
        .await
        .expect("edit a CRLF file with LF text");
    assert_eq!(world.get("win.txt"), b"one\r\n2\r\n3\r\n3.5\r\n");
    assert!(!result.diff.contains('\r'), "{:?}", result.diff);
    assert!(
        result.diff.contains("-two\n-three\n+2\n+3\n+3.5\n"),
        "{}",
        result.diff
    );
}

#[tokio::test]
async fn edit_file_refuses_binary_files() {
    let world = World::new();
    world.put("blob.bin", b"a\x00b");
    let err = world
        .files
        .edit_file(edit("blob.bin", "a", "b"))
        .await
        .unwrap_err();
    assert_error(&err, ErrorKind::Binary, "edit_file", "binary");
}

// ----------------------------------------------------------------- list_dir

#[tokio::test]
async fn list_dir_lists_breadth_first_with_kinds_and_sizes() {
    let world = World::new();
    world.put("b.txt", "12345");
    world.put("a/inner.txt", "x");
    world.put("a/deeper/leaf.txt", "");
    std::os::unix::fs::symlink("b.txt", world.path("link")).expect("symlink");
    let one = world.files.list_dir(list(".", None)).await.expect("list");
    assert_eq!(paths(&one.entries), ["a", "b.txt", "link"]);
    assert_eq!(one.entries[0].kind, EntryKind::Directory);
    assert_eq!(one.entries[0].size, None);
    assert_eq!(
        (one.entries[1].kind, one.entries[1].size),
        (EntryKind::File, Some(5))
    );
    assert_eq!(one.entries[2].kind, EntryKind::Symlink);
    assert_eq!(one.entries[2].symlink_target.as_deref(), Some("b.txt"));
    assert_eq!((one.more, one.complete), (0, true));
    let text = one.text();
    assert!(
        text.contains("a/\nb.txt (5 bytes)\nlink -> b.txt\n"),
        "{text}"
    );

    let two = world
        .files
        .list_dir(list(".", Some(2)))
        .await
        .expect("depth 2");
    assert_eq!(
        paths(&two.entries),
        ["a", "b.txt", "link", "a/deeper", "a/inner.txt"]
    );
    let all = world
        .files
        .list_dir(list(".", Some(99)))
        .await
        .expect("depth capped");
    assert_eq!(all.entries.len(), 6);
    assert_eq!(all.entries[5].path, "a/deeper/leaf.txt");

    let sub = world.files.list_dir(list("a", None)).await.expect("list a");
    assert_eq!(sub.path, "a");
    assert_eq!(
        paths(&sub.entries),
        ["deeper", "inner.txt"],
        "relative to the listed dir"
    );

    let err = world.files.list_dir(list("b.txt", None)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotADirectory, "{err}");
    assert!(err.message().starts_with("list_dir: "), "{err}");
}

#[tokio::test]
async fn list_dir_shows_at_most_max_entries_and_counts_the_rest() {
    let world = World::new();
    for n in 0..700 {
        world.put(&format!("many/f{n:04}"), "");
    }
    let default = world
        .files
        .list_dir(list("many", None))
        .await
        .expect("list");
    assert_eq!(default.entries.len(), LIST_DEFAULT_MAX_ENTRIES as usize);
    assert_eq!(default.entries[0].path, "f0000");
    assert_eq!(default.more, 200);
    assert!(default.complete);
    assert!(
        default.text().contains("200 more not shown"),
        "{}",
        default.text()
    );
    let ten = world
        .files
        .list_dir(ListDirRequest {
            max_entries: Some(10),
            ..list("many", None)
        })
        .await
        .expect("list 10");
    assert_eq!(ten.entries.len(), 10);
    assert_eq!(ten.more, 690);
}

#[tokio::test]
async fn walks_skip_what_gitignore_ignores_and_git_itself() {
    let world = World::new();
    world.put(".git/HEAD", "ref: refs/heads/main\n");
    world.put(".gitignore", "*.log\n/target\n");
    world.put("keep.rs", "needle\n");
    world.put("debug.log", "needle\n");
    world.put("target/out.rs", "needle\n");
    world.put("sub/target/kept.rs", "needle\n");
    world.put("sub/.gitignore", "!important.log\nlocal/\n");
    world.put("sub/important.log", "needle\n");
    world.put("sub/other.log", "needle\n");
    world.put("sub/local/x.rs", "needle\n");

    let listed = world
        .files
        .list_dir(list(".", Some(5)))
        .await
        .expect("list");
    assert_eq!(
        paths(&listed.entries),
        [
            ".gitignore",
            "keep.rs",
            "sub",
            "sub/.gitignore",
            "sub/important.log",
            "sub/target",
            "sub/target/kept.rs"
        ]
    );
    assert_eq!(
        listed.ignored, 4,
        "debug.log, target, sub/other.log, sub/local"
    );
    assert!(
        listed.text().contains("4 ignored by .gitignore"),
        "{}",
        listed.text()
    );

    // Rules from above the listed directory apply up to the repository root.
    let below = world
        .files
        .list_dir(list("sub", None))
        .await
        .expect("list sub");
    assert_eq!(
        paths(&below.entries),
        [".gitignore", "important.log", "target"]
    );

    let found = world.files.find_files(find("*.rs")).await.expect("find");
    let found: Vec<&str> = found.matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(found, ["keep.rs", "sub/target/kept.rs"]);

    let grepped = world.files.grep(grep("needle")).await.expect("grep");
    let grepped: Vec<&str> = grepped.matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(
        grepped,
        ["keep.rs", "sub/important.log", "sub/target/kept.rs"]
    );
}

#[tokio::test]
async fn gitignore_files_above_a_repository_do_not_apply() {
    let world = World::new();
    // Not a repository at the top: its rules stop at the nested root.
    world.put(".gitignore", "*.rs\n");
    world.put("repo/.git/HEAD", "");
    world.put("repo/src/main.rs", "");
    let listed = world
        .files
        .list_dir(list("repo/src", None))
        .await
        .expect("list");
    assert_eq!(paths(&listed.entries), ["main.rs"]);
    // Outside any repository, only the walked tree's own files apply.
    world.put("plain/a.rs", "");
    world.put("plain/.gitignore", "b.rs\n");
    world.put("plain/b.rs", "");
    let listed = world
        .files
        .list_dir(list("plain", None))
        .await
        .expect("list");
    assert_eq!(paths(&listed.entries), [".gitignore", "a.rs"]);
}

// --------------------------------------------------------------------- stat

#[tokio::test]
async fn stat_reports_kind_size_mode_time_version_and_symlink_target() {
    let world = World::new();
    world.put("f.sh", "#!/bin/sh\n");
    std::fs::set_permissions(world.path("f.sh"), std::fs::Permissions::from_mode(0o750))
        .expect("chmod");
    std::os::unix::fs::symlink("f.sh", world.path("link")).expect("symlink");
    std::os::unix::fs::symlink("nowhere", world.path("dangling")).expect("symlink");

    let file = world
        .files
        .stat(StatRequest {
            path: "f.sh".to_owned(),
        })
        .await
        .expect("stat");
    assert_eq!((file.kind, file.size), (EntryKind::File, 10));
    assert_eq!(file.mode, "0750");
    assert_eq!(file.version, world.version("f.sh").await);
    assert_eq!(file.symlink_target, None);
    let modified = file.modified.parse::<jiff::Timestamp>().expect("RFC 3339");
    let on_host = jiff::Timestamp::try_from(
        std::fs::metadata(world.path("f.sh"))
            .expect("meta")
            .modified()
            .expect("mtime"),
    )
    .expect("timestamp");
    assert_eq!(modified, on_host);

    let link = world
        .files
        .stat(StatRequest {
            path: "link".to_owned(),
        })
        .await
        .expect("stat link");
    assert_eq!(link.kind, EntryKind::File, "followed");
    assert_eq!(
        link.version, file.version,
        "the target's version guards writes"
    );
    assert_eq!(link.symlink_target.as_deref(), Some("f.sh"));
    assert!(link.text().contains("(symlink -> f.sh)"), "{}", link.text());

    let dangling = world
        .files
        .stat(StatRequest {
            path: "dangling".to_owned(),
        })
        .await
        .expect("stat dangling");
    assert_eq!(dangling.kind, EntryKind::Symlink);
    assert_eq!(dangling.symlink_target.as_deref(), Some("nowhere"));

    let err = world
        .files
        .stat(StatRequest {
            path: "missing".to_owned(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.message().starts_with("stat: "), "{err}");
}

// ------------------------------------------------ move_path, remove_path, make_dir

#[tokio::test]
async fn move_remove_and_make_dir() {
    let world = World::new();
    let files = &world.files;
    let made = files
        .make_dir(MakeDirRequest {
            path: "a/b/c".to_owned(),
        })
        .await
        .expect("mkdir -p");
    assert_eq!(made.path, "a/b/c");
    assert!(world.path("a/b/c").is_dir());
    files
        .make_dir(MakeDirRequest {
            path: "a/b/c".to_owned(),
        })
        .await
        .expect("an existing directory is success");
    world.put("file", "x");
    let err = files
        .make_dir(MakeDirRequest {
            path: "file".to_owned(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists, "{err}");
    assert!(err.message().starts_with("make_dir: "), "{err}");

    let moved = files
        .move_path(MovePathRequest {
            from: "file".to_owned(),
            to: "x/y/moved".to_owned(),
        })
        .await
        .expect("move");
    assert_eq!(
        (moved.from.as_str(), moved.to.as_str()),
        ("file", "x/y/moved")
    );
    assert!(!world.path("file").exists());
    assert_eq!(world.get("x/y/moved"), b"x");
    let err = files
        .move_path(MovePathRequest {
            from: "file".to_owned(),
            to: "elsewhere".to_owned(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.message().starts_with("move_path: "), "{err}");

    let remove = |path: &str, recursive| RemovePathRequest {
        path: path.to_owned(),
        recursive,
    };
    let err = files.remove_path(remove("x", None)).await.unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "remove_path",
        "directory with 1 entries",
    );
    assert!(err.message().contains("recursive"), "{err}");
    assert!(world.path("x/y/moved").exists(), "nothing removed");
    let removed = files
        .remove_path(remove("x", Some(true)))
        .await
        .expect("rm -r");
    assert!(removed.removed);
    assert!(!world.path("x").exists());
    let empty = files
        .remove_path(remove("a/b/c", None))
        .await
        .expect("empty dir");
    assert!(empty.removed);
    let missing = files
        .remove_path(remove("a/b/c", None))
        .await
        .expect("missing");
    assert!(!missing.removed);
    assert!(
        missing.text().contains("nothing removed"),
        "{}",
        missing.text()
    );

    let err = files
        .remove_path(remove(".", Some(true)))
        .await
        .unwrap_err();
    assert_error(
        &err,
        ErrorKind::PermissionDenied,
        "remove_path",
        "working directory",
    );
    assert!(world.path("a").exists());
}

// --------------------------------------------------------------- find_files

#[tokio::test]
async fn find_files_matches_globs_shallowest_first() {
    let world = World::new();
    world.put("main.rs", "");
    world.put("src/lib.rs", "");
    world.put("src/deep/mod.rs", "");
    world.put("src/notes.md", "");
    world.put("tests/it.rs", "");
    let names = |result: &FindFilesResult| -> Vec<String> {
        result.matches.iter().map(|m| m.path.clone()).collect()
    };
    let files = &world.files;
    let any = files.find_files(find("*.rs")).await.expect("find");
    assert_eq!(
        names(&any),
        ["main.rs", "src/lib.rs", "tests/it.rs", "src/deep/mod.rs"]
    );
    let direct = files.find_files(find("src/*.rs")).await.expect("find");
    assert_eq!(names(&direct), ["src/lib.rs"]);
    let deep = files.find_files(find("src/**/*.rs")).await.expect("find");
    assert_eq!(names(&deep), ["src/lib.rs", "src/deep/mod.rs"]);
    let dirs = files.find_files(find("deep")).await.expect("find");
    assert_eq!(names(&dirs), ["src/deep"]);
    assert_eq!(dirs.matches[0].kind, EntryKind::Directory);
    let below = files
        .find_files(FindFilesRequest {
            path: Some("src".to_owned()),
            ..find("*.rs")
        })
        .await
        .expect("find below src");
    assert_eq!(
        names(&below),
        ["src/lib.rs", "src/deep/mod.rs"],
        "the path as given, joined"
    );
    let absolute_root = world.dir.path().to_str().expect("UTF-8").to_owned();
    let absolute = files
        .find_files(FindFilesRequest {
            path: Some(absolute_root.clone()),
            ..find("main.rs")
        })
        .await
        .expect("find below an absolute path");
    assert_eq!(names(&absolute), [format!("{absolute_root}/main.rs")]);

    let err = files.find_files(find("src/[")).await.unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "find_files", "invalid glob");
    let err = files.find_files(find("/etc/*")).await.unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "find_files", "absolute");
}

#[tokio::test]
async fn find_files_returns_at_most_max_results_and_counts_the_rest() {
    let world = World::new();
    for n in 0..300 {
        world.put(&format!("d{}/f{n:03}.txt", n % 3), "");
    }
    let result = world.files.find_files(find("*.txt")).await.expect("find");
    assert_eq!(result.matches.len(), FIND_DEFAULT_MAX_RESULTS as usize);
    assert_eq!(result.more, 100);
    assert!(result.complete);
    assert!(
        result.text().contains("100 more not shown"),
        "{}",
        result.text()
    );
    let few = world
        .files
        .find_files(FindFilesRequest {
            max_results: Some(5),
            ..find("*.txt")
        })
        .await
        .expect("find 5");
    assert_eq!(few.matches.len(), 5);
    assert_eq!(few.more, 295);
    assert_eq!(few.matches[0].path, "d0/f000.txt");
}

// --------------------------------------------------------------------- grep

#[tokio::test]
async fn grep_finds_lines_with_paths_and_numbers() {
    let world = World::new();
    world.put("a.rs", "fn main() {\n    let Needle = 1;\n}\n");
    world.put("src/b.rs", "needle\nhay\nneedle again\r\n");
    world.put("src/c.md", "needle in docs\n");
    world.put("blob.bin", b"needle\x00needle");
    world.put("latin1.txt", b"needle caf\xe9\n");
    let files = &world.files;

    let result = files.grep(grep("needle")).await.expect("grep");
    let found: Vec<(&str, u64, &str)> = result
        .matches
        .iter()
        .map(|m| (m.path.as_str(), m.line, m.text.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("latin1.txt", 1, "needle caf\u{fffd}"),
            ("src/b.rs", 1, "needle"),
            ("src/b.rs", 3, "needle again"),
            ("src/c.md", 1, "needle in docs")
        ]
    );
    assert_eq!(result.match_count, 4);
    assert!(!result.more);
    assert_eq!(result.stopped_by, None);
    assert_eq!(
        result.files_searched, 4,
        "a.rs, latin1.txt (invalid UTF-8 shown as U+FFFD, as ripgrep does), src/b.rs, src/c.md"
    );
    assert_eq!(result.files_skipped, 1, "the binary file, silently");
    let text = result.text();
    assert!(
        text.starts_with(
            "latin1.txt:1:needle caf\u{fffd}\nsrc/b.rs:1:needle\nsrc/b.rs:3:needle again\n"
        ),
        "{text}"
    );

    let insensitive = files
        .grep(GrepRequest {
            case_insensitive: Some(true),
            glob: Some("*.rs".to_owned()),
            ..grep("needle")
        })
        .await
        .expect("grep -i");
    let found: Vec<(&str, u64)> = insensitive
        .matches
        .iter()
        .map(|m| (m.path.as_str(), m.line))
        .collect();
    assert_eq!(found, [("a.rs", 2), ("src/b.rs", 1), ("src/b.rs", 3)]);

    let one_file = files
        .grep(GrepRequest {
            path: Some("src/b.rs".to_owned()),
            ..grep("^needle$")
        })
        .await
        .expect("grep a file");
    let found: Vec<(&str, u64)> = one_file
        .matches
        .iter()
        .map(|m| (m.path.as_str(), m.line))
        .collect();
    assert_eq!(found, [("src/b.rs", 1)]);

    let err = files.grep(grep("(unclosed")).await.unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "grep", "invalid regex");
    let err = files
        .grep(GrepRequest {
            path: Some("missing".to_owned()),
            ..grep("x")
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

#[tokio::test]
async fn grep_lists_files_with_matches_or_counts_filtered_by_file_type() {
    let world = World::new();
    world.put("a.rs", "needle\nhay\nneedle\n");
    world.put("src/b.rs", "needle\n");
    world.put("src/c.py", "needle\nneedle\nneedle\n");
    world.put("d.md", "hay\n");
    let files = &world.files;
    let listed = files
        .grep(GrepRequest {
            mode: Some(GrepMode::FilesWithMatches),
            ..grep("needle")
        })
        .await
        .expect("grep -l");
    assert_eq!(
        files_found(&listed),
        [("a.rs", None), ("src/b.rs", None), ("src/c.py", None)]
    );
    assert!(listed.matches.is_empty());
    assert_eq!(listed.match_count, 3);
    assert!(
        listed
            .text()
            .starts_with("a.rs\nsrc/b.rs\nsrc/c.py\n[3 files with matches; 4 files searched"),
        "{}",
        listed.text()
    );

    let counted = files
        .grep(GrepRequest {
            mode: Some(GrepMode::Count),
            file_type: Some("rust".to_owned()),
            ..grep("needle")
        })
        .await
        .expect("grep -c --type rust");
    assert_eq!(
        files_found(&counted),
        [("a.rs", Some(2)), ("src/b.rs", Some(1))]
    );
    assert_eq!(counted.match_count, 3);
    assert_eq!(counted.files_searched, 2, "only the Rust files");
    assert!(
        counted
            .text()
            .starts_with("a.rs:2\nsrc/b.rs:1\n[3 matches in 2 files;"),
        "{}",
        counted.text()
    );

    // The bound counts files in the file modes.
    let first = files
        .grep(GrepRequest {
            mode: Some(GrepMode::FilesWithMatches),
            max_matches: Some(1),
            ..grep("needle")
        })
        .await
        .expect("grep -l, one file");
    assert_eq!(first.files.len(), 1);
    assert_eq!(first.stopped_by, Some(GrepLimit::MaxMatches));
    assert!(
        first.text().contains("more files match"),
        "{}",
        first.text()
    );

    let typed = files
        .grep(GrepRequest {
            file_type: Some("py".to_owned()),
            ..grep("needle")
        })
        .await
        .expect("grep --type py");
    assert_eq!(typed.match_count, 3);
    assert!(typed.matches.iter().all(|m| m.path == "src/c.py"));

    let err = files
        .grep(GrepRequest {
            file_type: Some("no-such-type".to_owned()),
            ..grep("needle")
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("no-such-type"), "{err}");
    let err = files
        .grep(GrepRequest {
            mode: Some(GrepMode::Count),
            context: Some(2),
            ..grep("needle")
        })
        .await
        .unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "grep", "context");
}

#[tokio::test]
async fn grep_returns_context_lines_once() {
    let world = World::new();
    world.put("f.txt", "1\n2\nhit 3\n4\nhit 5\n6\n7\n8\n9\nhit 10\n11\n");
    let result = world
        .files
        .grep(GrepRequest {
            context: Some(1),
            ..grep("hit")
        })
        .await
        .expect("grep -C1");
    let lines: Vec<(u64, bool)> = result.matches.iter().map(|m| (m.line, m.context)).collect();
    assert_eq!(
        lines,
        [
            (2, true),
            (3, false),
            (4, true),
            (5, false),
            (6, true),
            (9, true),
            (10, false),
            (11, true)
        ]
    );
    assert_eq!(result.match_count, 3);
    let text = result.text();
    assert!(
        text.contains("f.txt-6-6\n--\nf.txt-9-9\nf.txt:10:hit 10\n"),
        "{text}"
    );
}

#[tokio::test]
async fn grep_stops_at_max_matches_and_says_more_exist() {
    let world = World::new();
    world.put("many.txt", "match\n".repeat(500));
    let files = &world.files;
    let result = files.grep(grep("match")).await.expect("grep");
    assert_eq!(result.matches.len(), GREP_DEFAULT_MAX_MATCHES as usize);
    assert_eq!(result.match_count, 100);
    assert!(result.more);
    assert_eq!(result.stopped_by, Some(GrepLimit::MaxMatches));
    assert!(
        result.text().contains("more matches exist"),
        "{}",
        result.text()
    );

    let capped = files
        .grep(GrepRequest {
            max_matches: Some(1_000_000),
            ..grep("match")
        })
        .await
        .expect("grep with a huge max");
    assert_eq!(capped.match_count, 500, "all of them, under the cap");
    assert!(!capped.more);

    // Exactly max_matches matches: nothing more exists, so none is claimed.
    let exact = files
        .grep(GrepRequest {
            max_matches: Some(500),
            ..grep("match")
        })
        .await
        .expect("grep exactly");
    assert_eq!((exact.match_count, exact.more), (500, false));
}

#[tokio::test]
async fn grep_bounds_its_output_and_cuts_long_lines() {
    let world = World::new();
    let long = format!("{}NEEDLE{}\n", "a".repeat(50_000), "b".repeat(50_000));
    world.put("min.js", long.repeat(200));
    let result = world
        .files
        .grep(GrepRequest {
            max_matches: Some(1000),
            ..grep("NEEDLE")
        })
        .await
        .expect("grep");
    let first = &result.matches[0].text;
    assert!(first.contains("NEEDLE"), "shown around the match: {first}");
    assert!(first.starts_with("[... "), "{first}");
    assert!(first.ends_with(" more bytes]"), "{first}");
    assert!(first.chars().count() < GREP_MAX_LINE_CHARS + 60);
    assert_eq!(result.stopped_by, Some(GrepLimit::OutputBytes));
    assert!(result.more);
    let shown: usize = result
        .matches
        .iter()
        .map(|m| m.path.len() + m.text.len())
        .sum();
    assert!(shown <= GREP_MAX_OUTPUT_BYTES, "{shown}");
    assert!(result.match_count < 200);
}
