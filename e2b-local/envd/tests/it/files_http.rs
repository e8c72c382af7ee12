//! `GET /files` and `POST /files` (docs/e2b-protocol.md §7.1, §7.3): downloads with gzip, ranges
//! and conditionals; multipart and octet-stream uploads with ownership, modes, metadata, gzip
//! bodies, ENOSPC, and every bad-input answer.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use bytes::Bytes;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use http::Method;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;

use crate::common::{self, RequestBody, TestDaemon, body, config, send};

fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    GzDecoder::new(data)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// A multipart body with `(field name, filename, content)` parts.
fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "----e2bLocalEnvdTestBoundary";
    let mut out = Vec::new();
    for (name, filename, content) in parts {
        out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match filename {
            Some(filename) => out.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n"
                )
                .as_bytes(),
            ),
            None => out.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n").as_bytes(),
            ),
        }
        out.extend_from_slice(b"Content-Type: application/octet-stream\r\n\r\n");
        out.extend_from_slice(content);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_plain_gzip_and_empty() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("note.txt");
    std::fs::write(&file, b"hello world").unwrap();
    let empty = dir.path().join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    let daemon = TestDaemon::start(config()).await;
    let url = daemon.url(&format!("/files?path={}", encode(file.to_str().unwrap())));

    let plain = send(Method::GET, &url, &[], body(Bytes::new())).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.text(), "hello world");
    assert_eq!(plain.header("content-length"), Some("11"));
    assert_eq!(plain.header("accept-ranges"), Some("bytes"));
    assert_eq!(
        plain.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        plain.header("content-disposition"),
        Some("inline; filename=note.txt")
    );
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert!(plain.header("last-modified").is_some());

    let zipped = send(
        Method::GET,
        &url,
        &[("accept-encoding", "gzip, deflate")],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(zipped.status, 200);
    assert_eq!(zipped.header("content-encoding"), Some("gzip"));
    assert!(zipped.header("content-length").is_none());
    assert_eq!(gunzip(&zipped.body), b"hello world");

    let empty_url = daemon.url(&format!("/files?path={}", encode(empty.to_str().unwrap())));
    let reply = send(Method::GET, &empty_url, &[], body(Bytes::new())).await;
    assert_eq!((reply.status.as_u16(), reply.body.len()), (200, 0));
    assert_eq!(reply.header("content-length"), Some("0"));
    let reply = send(
        Method::GET,
        &empty_url,
        &[("accept-encoding", "gzip")],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(gunzip(&reply.body), b"");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_ranges_and_conditionals() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("digits");
    std::fs::write(&file, b"0123456789").unwrap();
    let daemon = TestDaemon::start(config()).await;
    let url = daemon.url(&format!("/files?path={}", encode(file.to_str().unwrap())));

    let partial = send(
        Method::GET,
        &url,
        &[("range", "bytes=2-5"), ("accept-encoding", "gzip")],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(partial.status, 206);
    assert_eq!(partial.text(), "2345");
    assert_eq!(partial.header("content-range"), Some("bytes 2-5/10"));
    assert!(
        partial.header("content-encoding").is_none(),
        "ranges are never gzipped"
    );

    let suffix = send(
        Method::GET,
        &url,
        &[("range", "bytes=-3")],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(
        (suffix.status.as_u16(), suffix.text().as_str()),
        (206, "789")
    );

    let several = send(
        Method::GET,
        &url,
        &[("range", "bytes=0-0,8-9")],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(several.status, 206);
    let content_type = several.header("content-type").unwrap().to_owned();
    let boundary = content_type
        .strip_prefix("multipart/byteranges; boundary=")
        .expect("multipart ranges");
    let text = several.text();
    assert!(text.contains(&format!("--{boundary}\r\nContent-Range: bytes 0-0/10\r\n")));
    assert!(text.contains("\r\n\r\n0\r\n"));
    assert!(text.contains("Content-Range: bytes 8-9/10\r\n"));
    assert!(text.contains("\r\n\r\n89\r\n"));
    assert!(text.ends_with(&format!("--{boundary}--\r\n")));
    assert_eq!(
        several.header("content-length"),
        Some(several.body.len().to_string().as_str())
    );

    let unsatisfiable = send(
        Method::GET,
        &url,
        &[("range", "bytes=50-")],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(unsatisfiable.status, 416);
    assert_eq!(unsatisfiable.header("content-range"), Some("bytes */10"));

    let last_modified = send(Method::GET, &url, &[], body(Bytes::new()))
        .await
        .header("last-modified")
        .unwrap()
        .to_owned();
    let not_modified = send(
        Method::GET,
        &url,
        &[("if-modified-since", &last_modified)],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(not_modified.status, 304);
    assert!(not_modified.body.is_empty());

    let refused = send(
        Method::GET,
        &url,
        &[
            ("range", "bytes=0-1"),
            ("accept-encoding", "gzip, identity;q=0"),
        ],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(refused.status, 406);
    let none_acceptable = send(
        Method::GET,
        &url,
        &[("accept-encoding", "br, *;q=0")],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(none_acceptable.status, 406);
    assert_eq!(none_acceptable.json()["code"], 406);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_errors_are_json() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    let missing = dir.path().join("missing.txt");
    let reply = send(
        Method::GET,
        &daemon.url(&format!(
            "/files?path={}",
            encode(missing.to_str().unwrap())
        )),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, 404);
    assert_eq!(
        reply.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(
        reply.json(),
        serde_json::json!({"code": 404, "message": format!("path '{}' does not exist", missing.display())})
    );
    let reply = send(
        Method::GET,
        &daemon.url(&format!(
            "/files?path={}",
            encode(dir.path().to_str().unwrap())
        )),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.json()["message"]
            .as_str()
            .unwrap()
            .ends_with("is a directory")
    );
    let reply = send(
        Method::GET,
        &daemon.url("/files?path=%2Fetc%2Fhostname&username=ghost"),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.json()["message"],
        "error looking up user 'ghost': user: unknown user ghost"
    );
    // A path through a regular file: the stat fails with ENOTDIR, an internal error.
    let reply = send(
        Method::GET,
        &daemon.url("/files?path=%2Fetc%2Fhostname%2Fx"),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, 500);
    assert_eq!(reply.json()["code"], 500);
    let reply = send(
        Method::GET,
        &daemon.url("/files?path=a%00b"),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, 400);
    let reply = send(
        Method::GET,
        &daemon.url("/files?path=%zz"),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["code"], 400);
    let reply = send(
        Method::GET,
        &daemon.url("/files?path=~other%2Fx"),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, 400);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_uploads_create_owned_files_in_part_order() {
    let dir = common::shared_tempdir();
    let daemon = TestDaemon::start(config()).await;
    let one = dir.path().join("one.txt");
    let (content_type, payload) = multipart(&[("file", Some("ignored-name.txt"), b"first")]);
    let reply = send(
        Method::POST,
        &daemon.url(&format!(
            "/files?path={}&username=nobody",
            encode(one.to_str().unwrap())
        )),
        &[("content-type", &content_type)],
        body(payload),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.json(),
        serde_json::json!([{"path": one.to_str().unwrap(), "name": "one.txt", "type": "file"}])
    );
    let meta = std::fs::metadata(&one).unwrap();
    assert_eq!(std::fs::read(&one).unwrap(), b"first");
    assert_eq!(meta.uid(), 65534);
    assert_eq!(meta.mode() & 0o777, 0o644);

    let a = dir.path().join("nested/deeper/a.txt");
    let b = dir.path().join("b.txt");
    let (content_type, payload) = multipart(&[
        ("other", None, b"skipped"),
        ("file", Some(a.to_str().unwrap()), b"A"),
        ("file", Some(b.to_str().unwrap()), b"B"),
    ]);
    let reply = send(
        Method::POST,
        &daemon.url("/files?username=nobody"),
        &[("content-type", &content_type)],
        body(payload),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let paths: Vec<String> = reply
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(paths, [a.to_str().unwrap(), b.to_str().unwrap()]);
    for created in ["nested", "nested/deeper"] {
        let meta = std::fs::metadata(dir.path().join(created)).unwrap();
        assert_eq!(
            (meta.uid(), meta.mode() & 0o777),
            (65534, 0o755),
            "{created}"
        );
    }
    assert_eq!(std::fs::read(&a).unwrap(), b"A");

    // Overwrite truncates and keeps the file owned by the uploader.
    let (content_type, payload) = multipart(&[("file", Some(b.to_str().unwrap()), b"")]);
    let reply = send(
        Method::POST,
        &daemon.url("/files"),
        &[("content-type", &content_type)],
        body(payload),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(std::fs::read(&b).unwrap(), b"");
    assert_eq!(std::fs::metadata(&b).unwrap().uid(), 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octet_stream_gzip_chunked_and_large_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    let raw = dir.path().join("raw.bin");
    let url = daemon.url(&format!("/files?path={}", encode(raw.to_str().unwrap())));
    let reply = send(
        Method::POST,
        &url,
        &[("content-type", "application/octet-stream")],
        body(gzip(b"compressed body")),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        std::fs::read(&raw).unwrap(),
        gzip(b"compressed body"),
        "no decoding without the header"
    );
    let reply = send(
        Method::POST,
        &url,
        &[
            ("content-type", "application/octet-stream"),
            ("content-encoding", "gzip"),
        ],
        body(gzip(b"compressed body")),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(std::fs::read(&raw).unwrap(), b"compressed body");

    // A chunked body of 12 MiB (above the RPC message cap: uploads are not capped).
    let chunk = Bytes::from(vec![b'z'; 1 << 20]);
    let stream = futures::stream::iter(
        (0..12).map(move |_| Ok::<_, std::convert::Infallible>(Frame::data(chunk.clone()))),
    );
    let streamed: RequestBody = StreamBody::new(stream)
        .map_err(|never| match never {})
        .boxed();
    let big = dir.path().join("big.bin");
    let reply = send(
        Method::POST,
        &daemon.url(&format!("/files?path={}", encode(big.to_str().unwrap()))),
        &[("content-type", "application/octet-stream")],
        streamed,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 12 << 20);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_metadata_is_stored_as_xattrs() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    let path = dir.path().join("meta.txt");
    let url = daemon.url(&format!("/files?path={}", encode(path.to_str().unwrap())));
    let reply = send(
        Method::POST,
        &url,
        &[
            ("content-type", "application/octet-stream"),
            ("x-metadata-Owner-Team", "infra"),
            ("x-metadata-kind", "note"),
        ],
        body("x"),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.json()[0]["metadata"],
        serde_json::json!({"owner-team": "infra", "kind": "note"})
    );
    let entry = daemon
        .fs(true)
        .stat(envd_proto::filesystem::StatRequest {
            path: path.to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_owned()
        .entry
        .into_option()
        .unwrap();
    assert_eq!(entry.metadata.get("kind").map(String::as_str), Some("note"));

    // A later upload replaces the metadata.
    let reply = send(
        Method::POST,
        &url,
        &[
            ("content-type", "application/octet-stream"),
            ("x-metadata-kind", "v2"),
        ],
        body("y"),
    )
    .await;
    assert_eq!(
        reply.json()[0]["metadata"],
        serde_json::json!({"kind": "v2"})
    );

    let too_long = "k".repeat(247);
    for (name, value) in [
        (format!("x-metadata-{too_long}"), "v".to_owned()),
        ("x-metadata-k".to_owned(), "tab\there".to_owned()),
    ] {
        let reply = send(
            Method::POST,
            &url,
            &[
                ("content-type", "application/octet-stream"),
                (&name, &value),
            ],
            body("z"),
        )
        .await;
        assert_eq!(reply.status, 400, "{name}");
        assert!(
            reply.json()["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid metadata: ")
        );
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_bad_input_is_refused_with_400_or_401() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    let target = dir.path().join("t.txt");
    let with_path = daemon.url(&format!("/files?path={}", encode(target.to_str().unwrap())));
    let dup = dir.path().join("dup.txt");
    let (dup_type, dup_payload) = multipart(&[
        ("file", Some(dup.to_str().unwrap()), b"1"),
        ("file", Some(dup.to_str().unwrap()), b"2"),
    ]);
    let (nameless_type, nameless_payload) = multipart(&[("file", None, b"1")]);
    // (url, headers, body, status, message fragment)
    type Case<'a> = (String, Vec<(&'a str, String)>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            daemon.url("/files"),
            vec![("content-type", "application/octet-stream".to_owned())],
            b"x".to_vec(),
            400,
            "path query parameter is required for raw body upload",
        ),
        (
            with_path.clone(),
            vec![("content-type", "text/plain".to_owned())],
            b"x".to_vec(),
            400,
            "unsupported content type: text/plain, expected multipart/form-data or application/octet-stream",
        ),
        (
            with_path.clone(),
            vec![
                ("content-type", "application/octet-stream".to_owned()),
                ("content-encoding", "br".to_owned()),
            ],
            b"x".to_vec(),
            400,
            "error decompressing request body: unsupported Content-Encoding: br, supported: [gzip]",
        ),
        (
            with_path.clone(),
            vec![
                ("content-type", "application/octet-stream".to_owned()),
                ("content-encoding", "gzip".to_owned()),
            ],
            b"not gzip at all".to_vec(),
            400,
            "",
        ),
        (
            daemon.url("/files"),
            vec![("content-type", dup_type)],
            dup_payload,
            400,
            "you cannot upload multiple files to the same path",
        ),
        (
            daemon.url("/files"),
            vec![("content-type", nameless_type)],
            nameless_payload,
            400,
            "error getting multipart custom part file name: filename not found in Content-Disposition header",
        ),
        (
            daemon.url("/files"),
            vec![("content-type", "multipart/form-data".to_owned())],
            b"x".to_vec(),
            400,
            "error parsing multipart form",
        ),
        (
            daemon.url(&format!(
                "/files?path={}",
                encode(dir.path().to_str().unwrap())
            )),
            vec![("content-type", "application/octet-stream".to_owned())],
            b"x".to_vec(),
            400,
            "path is a directory",
        ),
        (
            daemon.url(&format!(
                "/files?path={}&username=ghost",
                encode(target.to_str().unwrap())
            )),
            vec![("content-type", "application/octet-stream".to_owned())],
            b"x".to_vec(),
            401,
            "error looking up user 'ghost'",
        ),
    ];
    for (url, headers, payload, status, message) in cases {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let reply = send(Method::POST, &url, &headers, body(payload)).await;
        assert_eq!(
            reply.status.as_u16(),
            status,
            "{url} {headers:?}: {}",
            reply.text()
        );
        let json = reply.json();
        assert_eq!(json["code"], status);
        assert!(
            json["message"].as_str().unwrap().contains(message),
            "{message:?} in {json}"
        );
    }
    // The daemon is still serving.
    let reply = send(Method::GET, &daemon.url("/health"), &[], body(Bytes::new())).await;
    assert_eq!(reply.status, 204);
    daemon.stop().await;
}

/// A tiny tmpfs, unmounted on drop, to provoke ENOSPC.
struct TinyFs(tempfile::TempDir);

impl TinyFs {
    fn mount() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "mounting a tmpfs needs root");
        Self(dir)
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.path())
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_507() {
    let tiny = TinyFs::mount();
    let daemon = TestDaemon::start(config()).await;
    let path = tiny.0.path().join("big");
    let reply = send(
        Method::POST,
        &daemon.url(&format!("/files?path={}", encode(path.to_str().unwrap()))),
        &[("content-type", "application/octet-stream")],
        body(vec![1u8; 1 << 20]),
    )
    .await;
    assert_eq!(reply.status, 507, "{}", reply.text());
    assert_eq!(
        reply.json()["message"],
        "attempted to write 1048576 bytes: not enough disk space available"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    daemon.stop().await;
}

/// A file that grows while it is downloaded is sent exactly as long as the `Content-Length` its
/// response announced (what envd's `ServeContent` does): sending on to the new end broke the
/// body for the client (a command's spill file read while the command still writes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_growing_file_is_sent_as_long_as_announced() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("growing.log");
    let announced = 64 << 20;
    std::fs::write(&file, vec![b'a'; announced]).unwrap();
    let daemon = TestDaemon::start(config()).await;
    let url = daemon.url(&format!("/files?path={}", encode(file.to_str().unwrap())));
    let request = http::Request::builder()
        .method(Method::GET)
        .uri(url)
        .body(body(Bytes::new()))
        .unwrap();
    // Over h2c, as the front asks: a body longer than announced is a stream error there.
    let response = common::h2_client().request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let length: usize = response.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(length, announced);
    // The file grows while the body is still being sent (the client has not read it yet).
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(&vec![b'b'; 4 << 20])
        .unwrap();
    let received = response.into_body().collect().await.expect("a whole body");
    let received = received.to_bytes();
    assert_eq!(received.len(), announced);
    assert!(received.iter().all(|&b| b == b'a'));
    daemon.stop().await;
}
