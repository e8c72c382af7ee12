//! `read_text`, `stream_text` and `read_bytes` (docs/design.md §5.1, read
//! rows): strict UTF-8, binary detection on the first 8192 bytes, streamed
//! decoding across chunk boundaries, exact bytes.

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::fs::{BINARY_SAMPLE_LEN, ReadStream};
use dsh_plugin_api::stream::TextStream;
use futures::StreamExt;

use crate::check::{CaseResult, ensure, ensure_bytes, ensure_eq, ensure_names, fail, show};
use crate::commands::drain;
use crate::context::Cx;
use crate::patterns::{binary, multibyte_text};
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.read_text.round_trip",
        Fs,
        [Fs, Fixtures],
        "read_text returns the exact text (CRLF, multibyte, no trailing newline, empty) and the stat version",
        read_text_round_trip
    ),
    case!(
        "fs.read_text.invalid_utf8",
        Fs,
        [Fs, Fixtures],
        "invalid UTF-8 anywhere (stray byte, late, truncated, surrogate, overlong) is InvalidUtf8, never replaced",
        read_text_invalid_utf8
    ),
    case!(
        "fs.read_text.binary",
        Fs,
        [Fs, Fixtures],
        "a NUL in the first 8192 bytes is Binary (even with invalid UTF-8 before it); a NUL at byte 8192 is text",
        read_text_binary
    ),
    case!(
        "fs.read_text.errors",
        Fs,
        [Fs, Fixtures],
        "read_text of a missing path is NotFound naming it, of a directory IsADirectory",
        read_text_errors
    ),
    case!(
        "fs.stream_text.across_chunks",
        Fs,
        [Fs, Fixtures],
        "stream_text of 1 MiB of multibyte text concatenates exactly: no split or replaced characters, no empty chunks",
        stream_text_across_chunks
    ),
    case!(
        "fs.stream_text.invalid_utf8_ends_stream",
        Fs,
        [Fs, Fixtures],
        "an invalid sequence past the binary sample ends the stream with InvalidUtf8 after the valid prefix",
        stream_text_invalid
    ),
    case!(
        "fs.stream_text.binary_before_stream",
        Fs,
        [Fs, Fixtures],
        "the binary check runs before stream_text returns: a NUL in the sample fails the call itself",
        stream_text_binary
    ),
    case!(
        "fs.stream_text.empty_and_errors",
        Fs,
        [Fs, Fixtures],
        "an empty file is an empty stream of size 0; missing is NotFound, a directory IsADirectory",
        stream_text_empty_and_errors
    ),
    case!(
        "fs.read_bytes.exact",
        Fs,
        [Fs, Fixtures],
        "read_bytes returns every byte value exactly with size and version; an empty file is an empty stream",
        read_bytes_exact
    ),
    case!(
        "fs.read_bytes.errors",
        Fs,
        [Fs, Fixtures],
        "read_bytes of a missing path is NotFound, of a directory IsADirectory",
        read_bytes_errors
    ),
];

async fn read_text_round_trip(cx: &Cx) -> CaseResult {
    let fs = cx.fs();
    for (name, text) in [
        ("crlf", "line one\r\nzwei é\r\n"),
        ("multibyte", "名前 😀\n\ttab\n"),
        ("no-newline", "last line without newline"),
        ("empty", ""),
    ] {
        let path = cx.put(name, text.as_bytes()).await?;
        let what = format!("read_text {path}");
        let read = cx.ok(&what, fs.read_text(&path)).await?;
        ensure_eq(&format!("{what}: text"), &read.text.as_str(), &text)?;
        let stat = cx.ok(&format!("stat {path}"), fs.stat(&path)).await?;
        ensure_eq(
            &format!("{what}: version vs stat"),
            &read.version,
            &stat.version,
        )?;
    }
    Ok(())
}

async fn read_text_invalid_utf8(cx: &Cx) -> CaseResult {
    let mut late = vec![b'a'; 20_000];
    late.extend_from_slice(b"\xc3\x28 tail");
    let cases: [(&str, Vec<u8>); 5] = [
        ("stray", b"ok \xff ok".to_vec()),
        ("late", late),
        ("truncated", b"abc\xe2\x82".to_vec()),
        ("surrogate", b"x\xed\xa0\x80y".to_vec()),
        ("overlong", b"x\xc0\xafy".to_vec()),
    ];
    for (name, bytes) in cases {
        let path = cx.put(name, &bytes).await?;
        let what = format!("read_text {path} ({name} invalid UTF-8)");
        let err = cx
            .err(&what, ErrorKind::InvalidUtf8, cx.fs().read_text(&path))
            .await?;
        ensure_names(&what, &err, name)?;
    }
    Ok(())
}

async fn read_text_binary(cx: &Cx) -> CaseResult {
    let mut at_last_sampled = vec![b'a'; BINARY_SAMPLE_LEN - 1];
    at_last_sampled.push(0);
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(&binary(4096, 3));
    for (name, bytes) in [
        ("nul-first", b"\0abc".to_vec()),
        ("nul-8191", at_last_sampled),
        ("png", png),
    ] {
        let path = cx.put(name, &bytes).await?;
        let what = format!("read_text {path} ({name})");
        let err = cx
            .err(&what, ErrorKind::Binary, cx.fs().read_text(&path))
            .await?;
        ensure_names(&what, &err, name)?;
    }
    // A NUL is valid UTF-8: outside the sample it is ordinary text.
    let mut text = "a".repeat(BINARY_SAMPLE_LEN);
    text.push('\0');
    text.push_str("tail");
    let path = cx.put("nul-8192", text.as_bytes()).await?;
    let what = format!("read_text {path} (NUL at byte 8192, outside the sample)");
    let read = cx.ok(&what, cx.fs().read_text(&path)).await?;
    ensure!(
        read.text == text,
        "{what}: the text came back altered ({} bytes)",
        read.text.len()
    );
    Ok(())
}

async fn read_text_errors(cx: &Cx) -> CaseResult {
    let missing = cx.path("missing-file");
    let err = cx
        .err(
            &format!("read_text {missing}"),
            ErrorKind::NotFound,
            cx.fs().read_text(&missing),
        )
        .await?;
    ensure_names(&format!("read_text {missing}"), &err, "missing-file")?;
    let dir = cx.mkdirs("a-directory").await?;
    let err = cx
        .err(
            &format!("read_text {dir}"),
            ErrorKind::IsADirectory,
            cx.fs().read_text(&dir),
        )
        .await?;
    ensure_names(&format!("read_text {dir}"), &err, "a-directory")
}

/// Reads a text stream to its end or first error; checks chunks are never
/// empty and never carry U+FFFD.
async fn collect_text(
    what: &str,
    cx: &Cx,
    mut stream: TextStream,
) -> Result<(String, Option<dsh_plugin_api::Error>), crate::check::Failure> {
    let mut text = String::new();
    let mut error = None;
    cx.within(what, async {
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => {
                    if chunk.is_empty() {
                        return Err(crate::check::Failure::new(format!(
                            "{what}: the stream yielded an empty chunk"
                        )));
                    }
                    text.push_str(&chunk);
                }
                Err(err) => {
                    error = Some(err);
                    if let Some(Ok(more)) = stream.next().await {
                        return Err(crate::check::Failure::new(format!(
                            "{what}: the stream went on after its error ({} more bytes)",
                            more.len()
                        )));
                    }
                    break;
                }
            }
        }
        Ok(())
    })
    .await??;
    ensure!(
        !text.contains('\u{FFFD}'),
        "{what}: the stream carries U+FFFD replacement characters (lossy decoding)"
    );
    Ok((text, error))
}

async fn stream_text_across_chunks(cx: &Cx) -> CaseResult {
    let fs = cx.fs();
    for shift in [0, 1] {
        let text = multibyte_text(1 << 20, shift);
        let path = cx.put(&format!("text-{shift}"), text.as_bytes()).await?;
        let what = format!("stream_text {path}");
        let ReadStream {
            version,
            size,
            chunks,
        } = cx.ok(&what, fs.stream_text(&path)).await?;
        ensure_eq(&format!("{what}: size"), &size, &(text.len() as u64))?;
        let stat = cx.ok(&format!("stat {path}"), fs.stat(&path)).await?;
        ensure_eq(&format!("{what}: version vs stat"), &version, &stat.version)?;
        let (got, error) = collect_text(&what, cx, chunks).await?;
        if let Some(err) = error {
            fail!("{what}: the stream failed with {}: {err}", err.kind());
        }
        ensure_bytes(&what, got.as_bytes(), text.as_bytes())?;
    }
    Ok(())
}

async fn stream_text_invalid(cx: &Cx) -> CaseResult {
    let valid = multibyte_text(200_000, 0);
    let mut bytes = valid.clone().into_bytes();
    bytes.extend_from_slice(b"\xff and more text after the bad byte\n");
    let path = cx.put("late-invalid", &bytes).await?;
    let what = format!("stream_text {path} (invalid byte at {})", valid.len());
    let stream = cx.ok(&what, cx.fs().stream_text(&path)).await?;
    let (got, error) = collect_text(&what, cx, stream.chunks).await?;
    match error {
        Some(err) if err.kind() == ErrorKind::InvalidUtf8 => {}
        Some(err) => fail!(
            "{what}: expected the stream to end with an invalid UTF-8 error, got {}: {err}",
            err.kind()
        ),
        None => fail!(
            "{what}: expected the stream to end with an invalid UTF-8 error, it ended cleanly after {} bytes",
            got.len()
        ),
    }
    ensure!(
        valid.starts_with(&got),
        "{what}: the text before the error is not a prefix of the valid part ({} bytes delivered)",
        got.len()
    );

    let path = cx.put("truncated-at-end", b"complete \xe2\x82").await?;
    let what = format!("stream_text {path} (truncated sequence at end of file)");
    let stream = cx.ok(&what, cx.fs().stream_text(&path)).await?;
    let (got, error) = collect_text(&what, cx, stream.chunks).await?;
    match error {
        Some(err) if err.kind() == ErrorKind::InvalidUtf8 => Ok(()),
        Some(err) => fail!(
            "{what}: expected an invalid UTF-8 error, got {}: {err}",
            err.kind()
        ),
        None => fail!(
            "{what}: expected an invalid UTF-8 error at end of file, the stream ended cleanly with {}",
            show(got.as_bytes())
        ),
    }
}

async fn stream_text_binary(cx: &Cx) -> CaseResult {
    let mut bytes = vec![b'a'; 5000];
    bytes[4000] = 0;
    let path = cx.put("binary", &bytes).await?;
    let what = format!("stream_text {path} (NUL at byte 4000)");
    match cx.within(&what, cx.fs().stream_text(&path)).await? {
        Err(err) if err.kind() == ErrorKind::Binary => ensure_names(&what, &err, "binary"),
        Err(err) => fail!(
            "{what}: expected a binary content error, got {}: {err}",
            err.kind()
        ),
        Ok(_) => fail!(
            "{what}: expected the call itself to fail with a binary content error, it returned a stream"
        ),
    }
}

async fn stream_text_empty_and_errors(cx: &Cx) -> CaseResult {
    let fs = cx.fs();
    let path = cx.put("empty", b"").await?;
    let what = format!("stream_text {path} (empty)");
    let stream = cx.ok(&what, fs.stream_text(&path)).await?;
    ensure_eq(&format!("{what}: size"), &stream.size, &0)?;
    let (got, error) = collect_text(&what, cx, stream.chunks).await?;
    ensure!(
        error.is_none() && got.is_empty(),
        "{what}: expected an empty stream, got {} bytes and error {error:?}",
        got.len()
    );
    let missing = cx.path("missing-file");
    let err = cx
        .err(
            &format!("stream_text {missing}"),
            ErrorKind::NotFound,
            fs.stream_text(&missing),
        )
        .await?;
    ensure_names(&format!("stream_text {missing}"), &err, "missing-file")?;
    cx.err(
        &format!("stream_text {}", cx.dir),
        ErrorKind::IsADirectory,
        fs.stream_text(&cx.dir),
    )
    .await?;
    Ok(())
}

async fn read_bytes_exact(cx: &Cx) -> CaseResult {
    let fs = cx.fs();
    for (name, bytes) in [("binary", binary(300_000, 11)), ("empty", Vec::new())] {
        let path = cx.put(name, &bytes).await?;
        let what = format!("read_bytes {path}");
        let stream = cx.ok(&what, fs.read_bytes(&path)).await?;
        ensure_eq(
            &format!("{what}: size"),
            &stream.size,
            &(bytes.len() as u64),
        )?;
        let stat = cx.ok(&format!("stat {path}"), fs.stat(&path)).await?;
        ensure_eq(
            &format!("{what}: version vs stat"),
            &stream.version,
            &stat.version,
        )?;
        let got = cx.ok(&what, drain(stream.chunks)).await?;
        ensure_bytes(&what, &got, &bytes)?;
    }
    Ok(())
}

async fn read_bytes_errors(cx: &Cx) -> CaseResult {
    let fs = cx.fs();
    let missing = cx.path("missing-file");
    let err = cx
        .err(
            &format!("read_bytes {missing}"),
            ErrorKind::NotFound,
            fs.read_bytes(&missing),
        )
        .await?;
    ensure_names(&format!("read_bytes {missing}"), &err, "missing-file")?;
    cx.err(
        &format!("read_bytes {}", cx.dir),
        ErrorKind::IsADirectory,
        fs.read_bytes(&cx.dir),
    )
    .await?;
    Ok(())
}
