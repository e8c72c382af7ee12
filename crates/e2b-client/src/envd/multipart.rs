//! A streamed `multipart/form-data` body for multi-file uploads: part
//! headers are generated, part contents are the callers' streams, passed
//! through chunk by chunk.

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use rand::Rng;

use crate::body::BoxError;

/// One file of a multipart upload: its target path and its content.
pub(crate) struct Part {
    pub path: String,
    pub body: BoxStream<'static, Result<Bytes, BoxError>>,
}

/// A random boundary: 32 hex digits cannot plausibly occur in the data by
/// chance, and contain nothing that needs quoting.
pub(crate) fn new_boundary() -> String {
    let mut rng = rand::rng();
    let value: u128 = rng.random();
    format!("e2b-client-{value:032x}")
}

/// The request's `Content-Type`.
pub(crate) fn content_type(boundary: &str) -> String {
    format!("multipart/form-data; boundary={boundary}")
}

/// Why a path cannot be a multipart file name.
pub(crate) fn check_file_name(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("the path is empty");
    }
    // Servers disagree on backslash escapes in quoted strings (Go's mime
    // unescapes `\\`, multer does not), so a backslash cannot be carried
    // portably; `"` can (both unescape `\"`).
    if path.contains(['\r', '\n', '\0', '\\']) {
        return Err(
            "a multipart file name cannot carry CR, LF, NUL or a backslash; upload this file alone",
        );
    }
    Ok(())
}

/// `path` (checked by [`check_file_name`]) as a quoted-string parameter
/// value, `"` escaped.
fn quoted(path: &str) -> String {
    format!("\"{}\"", path.replace('"', "\\\""))
}

/// The whole body: every part as a header, its content and a CRLF, then
/// the closing delimiter. Parts named `file` with the path as `filename`,
/// which envd takes as the full target path when no `path` query is given.
pub(crate) fn body(
    boundary: String,
    parts: Vec<Part>,
) -> BoxStream<'static, Result<Bytes, BoxError>> {
    let closing = Bytes::from(format!("--{boundary}--\r\n"));
    let parts = parts.into_iter().map(move |part| {
        let head = Bytes::from(format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename={}\r\nContent-Type: application/octet-stream\r\n\r\n",
            quoted(&part.path)
        ));
        stream::once(async move { Ok(head) })
            .chain(part.body)
            .chain(stream::once(async { Ok(Bytes::from_static(b"\r\n")) }))
    });
    stream::iter(parts)
        .flatten()
        .chain(stream::once(async move { Ok(closing) }))
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(path: &str, chunks: &[&'static [u8]]) -> Part {
        let chunks: Vec<Result<Bytes, BoxError>> =
            chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect();
        Part {
            path: path.to_owned(),
            body: stream::iter(chunks).boxed(),
        }
    }

    #[tokio::test]
    async fn a_standard_parser_reads_back_every_part() {
        let boundary = new_boundary();
        let body = body(
            boundary.clone(),
            vec![
                part("/tmp/a.txt", &[b"hello ", b"world"]),
                part("rel/quote\"d é.bin", &[b"\x00\x01\r\n--x"]),
                part("empty", &[]),
            ],
        );
        let mut reader = multer::Multipart::new(body, boundary);
        let mut seen = Vec::new();
        while let Some(field) = reader.next_field().await.unwrap() {
            assert_eq!(field.name(), Some("file"));
            let name = field.file_name().unwrap().to_owned();
            let data = field.bytes().await.unwrap();
            seen.push((name, data));
        }
        assert_eq!(seen.len(), 3);
        assert_eq!(
            seen[0],
            ("/tmp/a.txt".to_owned(), Bytes::from_static(b"hello world"))
        );
        assert_eq!(seen[1].0, "rel/quote\"d é.bin");
        assert_eq!(seen[1].1, Bytes::from_static(b"\x00\x01\r\n--x"));
        assert_eq!(seen[2], ("empty".to_owned(), Bytes::new()));
    }

    #[test]
    fn file_names_that_cannot_be_carried_are_refused() {
        assert!(check_file_name("").is_err());
        assert!(check_file_name("a\nb").is_err());
        assert!(check_file_name("a\rb").is_err());
        assert!(check_file_name("a\0b").is_err());
        assert!(check_file_name("a\\b").is_err());
        assert!(check_file_name("/ok/é \"q\"").is_ok());
        assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
    }

    #[test]
    fn boundaries_are_random() {
        assert_ne!(new_boundary(), new_boundary());
        assert!(content_type("b").starts_with("multipart/form-data; boundary=b"));
    }
}
