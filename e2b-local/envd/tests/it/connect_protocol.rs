//! The Connect wire as the SDKs use it (docs/e2b-protocol.md §4): JSON and binary, unary and
//! streaming, HTTP/1.1 chunked bodies and h2c, gzip, JSON mapping rules, and every malformed input
//! answered with the proper error while the daemon keeps serving.

use std::io::Write;

use bytes::{Bytes, BytesMut};
use connectrpc::ErrorCode;
use envd_proto::filesystem::StatRequest;
use http::Method;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;

use crate::common::process::{run, shell};
use crate::common::{RawStream, TestDaemon, body, config, envelope, send, send_h2, unary_json};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_prior_knowledge_works_for_unary_and_streams() {
    let daemon = TestDaemon::start(config()).await;
    for json in [true, false] {
        let outcome = run(&daemon.process_h2(json), shell("printf h2")).await;
        assert_eq!(outcome.stdout_text(), "h2");
        assert_eq!(outcome.end().exit_code, 0);
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_mapping_accepts_both_spellings_strings_numbers_and_unknown_fields() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    // snake_case and lowerCamelCase, enum by number, unknown fields ignored.
    let created = unary_json(
        &daemon.url("/filesystem.Filesystem/CreateWatcher"),
        &format!(
            r#"{{"path":"{}","include_entry":true,"futureField":{{"x":1}}}}"#,
            dir.path().display()
        ),
        &[],
    )
    .await;
    assert_eq!(created.status, 200, "{}", created.text());
    let id = created.json()["watcherId"].as_str().unwrap().to_owned();
    let removed = unary_json(
        &daemon.url("/filesystem.Filesystem/RemoveWatcher"),
        &format!(r#"{{"watcher_id":"{id}"}}"#),
        &[],
    )
    .await;
    assert_eq!(removed.status, 200, "{}", removed.text());
    assert_eq!(removed.body.as_ref(), b"{}");

    // bytes as base64, pid as number or string, enum by name or number.
    let mut stream = RawStream::open(
        &daemon.url("/process.Process/Start"),
        r#"{"process":{"cmd":"/bin/cat"},"stdin":true,"tag":"json"}"#,
        &[],
    )
    .await;
    let start = stream.next().await.unwrap().json();
    let pid = start["event"]["start"]["pid"].as_u64().unwrap();
    let input = unary_json(
        &daemon.url("/process.Process/SendInput"),
        &format!(r#"{{"process":{{"pid":"{pid}"}},"input":{{"stdin":"aGkK"}}}}"#),
        &[],
    )
    .await;
    assert_eq!(input.status, 200, "{}", input.text());
    let data = stream.next().await.unwrap().json();
    assert_eq!(
        data,
        serde_json::json!({"event": {"data": {"stdout": "aGkK"}}})
    );
    let kill = unary_json(
        &daemon.url("/process.Process/SendSignal"),
        r#"{"process":{"tag":"json"},"signal":9}"#,
        &[],
    )
    .await;
    assert_eq!(kill.status, 200, "{}", kill.text());
    let end = stream.next().await.unwrap().json();
    assert_eq!(
        end,
        serde_json::json!({"event": {"end": {"exitCode": -1, "status": "signal: killed", "error": "signal: killed"}}})
    );
    assert_eq!(stream.next().await.unwrap().json(), serde_json::json!({}));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_mistyped_requests_are_invalid_argument() {
    let daemon = TestDaemon::start(config()).await;
    for (path, json) in [
        ("/process.Process/List", "{not json"),
        (
            "/process.Process/SendSignal",
            r#"{"process":{"pid":"abc"},"signal":9}"#,
        ),
        (
            "/process.Process/SendSignal",
            r#"{"process":{"pid":1},"signal":"SIGNAL_NOPE"}"#,
        ),
        ("/filesystem.Filesystem/Stat", r#"{"path":42}"#),
        (
            "/filesystem.Filesystem/ListDir",
            r#"{"path":"/","depth":-1}"#,
        ),
        (
            "/process.Process/SendSignal",
            r#"{"process":{"pid":1,"tag":"both"}}"#,
        ),
    ] {
        let reply = unary_json(&daemon.url(path), json, &[]).await;
        assert_eq!(reply.status, 400, "{path} {json}: {}", reply.text());
        assert_eq!(reply.json()["code"], "invalid_argument", "{path} {json}");
    }
    // Binary protobuf that does not parse.
    let reply = send(
        Method::POST,
        &daemon.url("/filesystem.Filesystem/Stat"),
        &[
            ("content-type", "application/proto"),
            ("connect-protocol-version", "1"),
        ],
        body(vec![0x0a, 0xff, 0xff, 0xff]),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert_eq!(reply.json()["code"], "invalid_argument");
    // Streaming: a broken envelope and a broken message are stream errors with HTTP 200.
    let stream = RawStream::open(&daemon.url("/process.Process/Start"), "{oops", &[]).await;
    assert_eq!(stream.status, 200);
    let envelopes = stream.collect().await;
    assert_eq!(envelopes.len(), 1);
    assert_eq!(envelopes[0].json()["error"]["code"], "invalid_argument");
    let truncated = send(
        Method::POST,
        &daemon.url("/process.Process/Start"),
        &[
            ("content-type", "application/connect+json"),
            ("connect-protocol-version", "1"),
        ],
        body(vec![0, 0, 0, 0, 50, b'{']),
    )
    .await;
    assert_eq!(truncated.status, 200);
    assert_eq!(truncated.body[0], 2, "an end-stream envelope");
    let end: serde_json::Value = serde_json::from_slice(&truncated.body[5..]).unwrap();
    assert_eq!(end["error"]["code"], "invalid_argument");
    // An unsupported protocol version.
    let reply = send(
        Method::POST,
        &daemon.url("/process.Process/List"),
        &[
            ("content-type", "application/json"),
            ("connect-protocol-version", "2"),
        ],
        body("{}"),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.text());
    // Unsupported content types.
    let reply = send(
        Method::POST,
        &daemon.url("/process.Process/List"),
        &[("content-type", "text/plain")],
        body("{}"),
    )
    .await;
    assert_eq!(reply.status, 415);
    // A bad timeout header.
    let reply = unary_json(
        &daemon.url("/process.Process/List"),
        "{}",
        &[("connect-timeout-ms", "soon")],
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["code"], "invalid_argument");
    // A timeout beyond the Connect spec's 10 digits is no limit, and a huge keepalive interval
    // is clamped: neither overflows.
    let huge = RawStream::open(
        &daemon.url("/process.Process/Start"),
        r#"{"process":{"cmd":"/bin/echo","args":["fine"]},"stdin":false}"#,
        &[
            ("connect-timeout-ms", "99999999999999999"),
            ("keepalive-ping-interval", "18446744073709551615"),
        ],
    )
    .await;
    let envelopes = huge.collect().await;
    assert_eq!(envelopes.len(), 4, "start, data, end, end-stream");
    assert_eq!(envelopes[1].json()["event"]["data"]["stdout"], "ZmluZQo=");
    assert_eq!(envelopes[3].json(), serde_json::json!({}));
    // A zero timeout means none.
    let reply = unary_json(
        &daemon.url("/process.Process/List"),
        "{}",
        &[("connect-timeout-ms", "0")],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    // Still serving.
    assert_eq!(
        run(&daemon.process(true), shell("true"))
            .await
            .end()
            .exit_code,
        0
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_messages_are_resource_exhausted() {
    let daemon =
        TestDaemon::start_with(e2b_local_envd::Envd::new(config()).max_message_size(1 << 20)).await;
    let json = [
        ("content-type", "application/json"),
        ("connect-protocol-version", "1"),
    ];
    // Over the cap on the wire (over h2c, so the early answer cannot break the connection).
    let big = format!(r#"{{"path":"{}"}}"#, "a".repeat(2 << 20));
    let reply = send_h2(
        Method::POST,
        &daemon.url("/filesystem.Filesystem/Stat"),
        &json,
        body(big),
    )
    .await;
    assert_eq!(
        reply.json()["code"],
        "resource_exhausted",
        "{}",
        reply.status
    );
    assert_eq!(reply.status, 429);
    // Small on the wire, over the cap once decompressed.
    let bomb = gzip(format!(r#"{{"path":"{}"}}"#, "a".repeat(4 << 20)).as_bytes());
    let reply = send(
        Method::POST,
        &daemon.url("/filesystem.Filesystem/Stat"),
        &[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
            ("connect-protocol-version", "1"),
        ],
        body(bomb),
    )
    .await;
    assert_eq!(
        reply.json()["code"],
        "resource_exhausted",
        "{}",
        reply.text()
    );
    // A stream request over the cap is a stream error.
    let frame =
        envelope(format!(r#"{{"process":{{"cmd":"{}"}}}}"#, "x".repeat(2 << 20)).as_bytes());
    let reply = send_h2(
        Method::POST,
        &daemon.url("/process.Process/Start"),
        &[
            ("content-type", "application/connect+json"),
            ("connect-protocol-version", "1"),
        ],
        body(frame),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body[0], 2, "an end-stream envelope");
    let end: serde_json::Value = serde_json::from_slice(&reply.body[5..]).unwrap();
    assert_eq!(end["error"]["code"], "resource_exhausted");
    assert_eq!(
        run(&daemon.process(false), shell("true"))
            .await
            .end()
            .exit_code,
        0
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_cap_is_32_mib() {
    let daemon = TestDaemon::start(config()).await;
    let json = [
        ("content-type", "application/json"),
        ("connect-protocol-version", "1"),
    ];
    // 20 MiB of stdin in one SendInput is decoded; 40 MiB is refused.
    let under = format!(
        r#"{{"process":{{"pid":999999}},"input":{{"stdin":"{}"}}}}"#,
        "QUFB".repeat(5 << 20)
    );
    let reply = send_h2(
        Method::POST,
        &daemon.url("/process.Process/SendInput"),
        &json,
        body(under),
    )
    .await;
    assert_eq!(
        reply.json()["code"],
        "not_found",
        "decoded, then the pid was unknown"
    );
    let over = format!(
        r#"{{"process":{{"pid":999999}},"input":{{"stdin":"{}"}}}}"#,
        "QUFB".repeat(10 << 20)
    );
    let reply = send_h2(
        Method::POST,
        &daemon.url("/process.Process/SendInput"),
        &json,
        body(over),
    )
    .await;
    assert_eq!(reply.json()["code"], "resource_exhausted");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_requests_and_responses() {
    let daemon = TestDaemon::start(config()).await;
    // A gzipped unary request body.
    let reply = send(
        Method::POST,
        &daemon.url("/filesystem.Filesystem/Stat"),
        &[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
            ("accept-encoding", "gzip"),
            ("connect-protocol-version", "1"),
        ],
        body(gzip(br#"{"path":"/"}"#)),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let text = if reply.header("content-encoding") == Some("gzip") {
        let mut out = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(reply.body.as_ref()),
            &mut out,
        )
        .unwrap();
        out
    } else {
        reply.text()
    };
    assert!(text.contains(r#""path":"/""#), "{text}");

    // A gzipped stream request envelope.
    let compressed = gzip(br#"{"process":{"cmd":"/bin/echo","args":["zipped"]},"stdin":false}"#);
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&[1]);
    frame.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
    frame.extend_from_slice(&compressed);
    let reply = send(
        Method::POST,
        &daemon.url("/process.Process/Start"),
        &[
            ("content-type", "application/connect+json"),
            ("connect-content-encoding", "gzip"),
            ("connect-protocol-version", "1"),
        ],
        body(frame.freeze()),
    )
    .await;
    assert_eq!(reply.status, 200);
    // No Connect-Accept-Encoding: the response frames are not compressed.
    assert!(
        reply.body.windows(8).any(|w| w == b"emlwcGVk"),
        "base64 of 'zipped': {:?}",
        reply.body
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_stream_request_bodies_are_accepted() {
    let daemon = TestDaemon::start(config()).await;
    let frame = envelope(br#"{"process":{"cmd":"/bin/echo","args":["chunked"]},"stdin":false}"#);
    let (head, tail) = frame.split_at(3);
    let pieces = vec![Bytes::copy_from_slice(head), Bytes::copy_from_slice(tail)];
    let stream = futures::stream::iter(
        pieces
            .into_iter()
            .map(|piece| Ok::<_, std::convert::Infallible>(Frame::data(piece))),
    );
    let reply = send(
        Method::POST,
        &daemon.url("/process.Process/Start"),
        &[
            ("content-type", "application/connect+json"),
            ("connect-protocol-version", "1"),
        ],
        StreamBody::new(stream)
            .map_err(|never| match never {})
            .boxed(),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(reply.text().contains("Y2h1bmtlZAo="), "{:?}", reply.text());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_errors_are_json_with_mapped_status() {
    let daemon = TestDaemon::start(config()).await;
    let reply = unary_json(
        &daemon.url("/filesystem.Filesystem/Stat"),
        r#"{"path":"/definitely/missing"}"#,
        &[],
    )
    .await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json()["code"], "not_found");
    let reply = unary_json(
        &daemon.url("/filesystem.Filesystem/MakeDir"),
        r#"{"path":"/tmp"}"#,
        &[],
    )
    .await;
    assert_eq!(
        (reply.status.as_u16(), reply.json()["code"].as_str()),
        (409, Some("already_exists"))
    );
    // The generated client surfaces the same codes over binary.
    let err = daemon
        .fs(false)
        .stat(StatRequest {
            path: "/definitely/missing".to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("missing");
    assert_eq!(err.code, ErrorCode::NotFound);
    daemon.stop().await;
}
