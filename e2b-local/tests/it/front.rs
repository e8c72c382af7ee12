//! The envd front: routing by header, by Host and by signed URL; 502 JSON for unknown, paused
//! and dead sandboxes; streaming without buffering; HTTP/1.1 and h2c.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::json;

use crate::common::{self, Api, Http, LocalServer};

fn assert_not_found(reply: &common::Reply, sandbox_id: &str) {
    assert_eq!(
        reply.status,
        StatusCode::BAD_GATEWAY,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(
        reply.json(),
        json!({"sandboxId": sandbox_id, "message": "The sandbox was not found", "code": 502})
    );
}

async fn health(http: &Http, server: &LocalServer, headers: &[(&str, &str)]) -> common::Reply {
    http.send(
        Method::GET,
        &format!("{}/health", server.sandbox_url()),
        headers,
        "",
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn unroutable_requests_get_502_json() {
    let server = LocalServer::start();
    let http = Http::default();
    assert_not_found(
        &health(&http, &server, &[("e2b-sandbox-id", "unknown")]).await,
        "unknown",
    );
    assert_not_found(&health(&http, &server, &[]).await, "");
    assert_not_found(
        &health(&http, &server, &[("host", "49983-nosuchbox.e2b.local")]).await,
        "nosuchbox",
    );
    let bad_port = health(
        &http,
        &server,
        &[("e2b-sandbox-id", "x"), ("e2b-sandbox-port", "http")],
    )
    .await;
    assert_eq!(bad_port.status, StatusCode::BAD_GATEWAY);
    assert!(
        bad_port.json()["message"]
            .as_str()
            .unwrap()
            .contains("invalid E2b-Sandbox-Port")
    );
    let other_port = health(
        &http,
        &server,
        &[("e2b-sandbox-id", "x"), ("e2b-sandbox-port", "8080")],
    )
    .await;
    assert_eq!(other_port.status, StatusCode::BAD_GATEWAY);
    assert_eq!(other_port.json()["code"], json!(502));
    let unsigned = http
        .send(
            Method::GET,
            &format!("{}/files?path=/etc/hostname", server.sandbox_url()),
            &[],
            "",
        )
        .await;
    assert_not_found(&unsigned, "");
    let forged = format!(
        "{}/files?path=/etc/hostname&signature=v1_forged",
        server.sandbox_url()
    );
    assert_not_found(&http.send(Method::GET, &forged, &[], "").await, "");
}

#[tokio::test(flavor = "multi_thread")]
async fn routes_by_header_and_host_and_answers_502_while_paused_or_dead() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let http = Http::default();
    let id = api.sandbox().await;
    assert_eq!(
        health(
            &http,
            &server,
            &[("e2b-sandbox-id", &id), ("e2b-sandbox-port", "49983")]
        )
        .await
        .status,
        204
    );
    let host = format!("49983-{id}.e2b.local");
    assert_eq!(health(&http, &server, &[("host", &host)]).await.status, 204);

    api.call(Method::POST, &format!("/sandboxes/{id}/pause"), "")
        .await;
    assert_not_found(
        &health(&http, &server, &[("e2b-sandbox-id", &id)]).await,
        &id,
    );
    assert_not_found(&health(&http, &server, &[("host", &host)]).await, &id);
    api.call(
        Method::POST,
        &format!("/sandboxes/{id}/connect"),
        r#"{"timeout":30}"#,
    )
    .await;
    assert_eq!(
        health(&http, &server, &[("e2b-sandbox-id", &id)])
            .await
            .status,
        204
    );

    assert_eq!(api.kill(&id).await, StatusCode::NO_CONTENT);
    assert_not_found(
        &health(&http, &server, &[("e2b-sandbox-id", &id)]).await,
        &id,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serves_h2c_with_prior_knowledge() {
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let request = Request::get(format!("{}/health", server.sandbox_url()))
        .header("e2b-sandbox-id", &id)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = client.request(request).await.expect("h2c request");
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
}

/// The parameters of the first SETTINGS frame an h2c server sends, read off the wire.
async fn server_settings(address: &str) -> Vec<(u16, u32)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    // The client preface, then an empty SETTINGS frame.
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .expect("preface");
    let mut header = [0u8; 9];
    stream
        .read_exact(&mut header)
        .await
        .expect("a frame header");
    assert_eq!(header[3], 0x4, "the server's first frame is SETTINGS");
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.expect("the settings");
    payload
        .chunks_exact(6)
        .map(|entry| {
            let id = u16::from_be_bytes([entry[0], entry[1]]);
            (
                id,
                u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]),
            )
        })
        .collect()
}

/// E2B's edge and envd are Go servers, whose HTTP/2 default reads frames of up to 1 MiB;
/// hyper's default (16 KiB) cut uploads into 64 times more frames (docs/e2b-protocol.md §12).
#[tokio::test(flavor = "multi_thread")]
async fn advertises_the_frame_size_and_upload_window_of_e2b_s_servers() {
    let server = LocalServer::start();
    let address = server
        .sandbox_url()
        .strip_prefix("http://")
        .expect("a plain front")
        .trim_end_matches('/')
        .to_owned();
    let settings = server_settings(&address).await;
    let setting = |id: u16| settings.iter().find(|(at, _)| *at == id).map(|(_, v)| *v);
    assert_eq!(setting(0x5), Some(1 << 20), "MAX_FRAME_SIZE: {settings:?}");
    assert_eq!(
        setting(0x4),
        Some(8 << 20),
        "INITIAL_WINDOW_SIZE: {settings:?}"
    );
}

/// Starts `bash -c script` in sandbox `id` with a Connect JSON `Start` over HTTP/1.1 and
/// returns the response with its stream unread.
async fn start_bash(server: &LocalServer, id: &str, script: &str) -> http::Response<Incoming> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let body = json!({"process": {"cmd": "/bin/bash", "args": ["-c", script]}});
    let request = Request::post(format!("{}/process.Process/Start", server.sandbox_url()))
        .header("content-type", "application/connect+json")
        .header("e2b-sandbox-id", id)
        .body(Full::new(Bytes::from(common::envelope(
            body.to_string().as_bytes(),
        ))))
        .unwrap();
    client.request(request).await.expect("Start")
}

#[tokio::test(flavor = "multi_thread")]
async fn streams_are_forwarded_as_they_are_produced() {
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let started = Instant::now();
    let response = start_bash(&server, &id, "echo first; sleep 2; echo second").await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut received = Vec::new();
    let mut first_output_at = None;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.expect("stream frame").into_data() {
            received.extend_from_slice(&data);
            if first_output_at.is_none()
                && String::from_utf8_lossy(&received).contains("\"stdout\"")
            {
                first_output_at = Some(started.elapsed());
            }
        }
    }
    let total = started.elapsed();
    let first = first_output_at.expect("stdout frame");
    assert!(total >= Duration::from_secs(2), "{total:?}");
    // "second" is printed 2 s after "first": a buffering front would deliver both together.
    assert!(
        first + Duration::from_secs(1) < total,
        "first output after {first:?}, stream done after {total:?}: the front buffered the stream"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn signed_file_urls_find_their_sandbox_without_routing_headers() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let created = api
        .create(json!({"templateID": "base", "timeout": 60, "secure": true}))
        .await;
    let id = created["sandboxID"].as_str().unwrap();
    let token = created["envdAccessToken"].as_str().unwrap();
    // A second secure sandbox, so the front must pick by signature.
    api.create(json!({"templateID": "base", "timeout": 60, "secure": true}))
        .await;
    let http = Http::default();
    let path = "/home/user/signed.txt";
    let sign = |op| e2b_local::signature::file_signature(path, op, "", token, None);
    let write_sig = sign(e2b_local::signature::FileOp::Write);
    let upload = format!(
        "{}/files?path={path}&signature={}",
        server.sandbox_url(),
        encode(&write_sig)
    );
    let reply = http
        .send(
            Method::POST,
            &upload,
            &[("content-type", "application/octet-stream")],
            "signed body",
        )
        .await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let read_sig = sign(e2b_local::signature::FileOp::Read);
    let download = format!(
        "{}/files?path={path}&signature={}",
        server.sandbox_url(),
        encode(&read_sig)
    );
    let reply = http.send(Method::GET, &download, &[], "").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(&reply.body[..], b"signed body");
    let direct = format!("{}/files?path={path}", server.sandbox_url());
    let reply = http
        .send(
            Method::GET,
            &direct,
            &[("e2b-sandbox-id", id), ("x-access-token", token)],
            "",
        )
        .await;
    assert_eq!(
        &reply.body[..],
        b"signed body",
        "the file landed in the signing sandbox"
    );
}

fn encode(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn large_file_transfers_stream_through_the_front() {
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let http = Http::default();
    let data: Vec<u8> = (0..32u32 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let url = format!("{}/files?path=/tmp/large.bin", server.sandbox_url());
    let headers = [
        ("e2b-sandbox-id", id.as_str()),
        ("content-type", "application/octet-stream"),
    ];
    let up = http.send(Method::POST, &url, &headers, data.clone()).await;
    assert_eq!(
        up.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&up.body)
    );
    let down = http
        .send(Method::GET, &url, &[("e2b-sandbox-id", id.as_str())], "")
        .await;
    assert_eq!(down.status, StatusCode::OK);
    assert!(
        down.body.len() == data.len() && down.body[..] == data[..],
        "round trip of 32 MiB"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn traffic_resumes_a_paused_sandbox_with_auto_resume() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let http = Http::default();
    let body = json!({"templateID": "base", "timeout": 60, "autoResume": {"enabled": true}});
    let id = api.create(body).await["sandboxID"]
        .as_str()
        .unwrap()
        .to_owned();
    let plain = api.sandbox().await;
    for sandbox in [&id, &plain] {
        let pause = api
            .call(Method::POST, &format!("/sandboxes/{sandbox}/pause"), "")
            .await;
        assert_eq!(pause.status, StatusCode::NO_CONTENT);
    }
    assert_eq!(
        api.info(&id).await.json()["lifecycle"]["autoResume"],
        json!(true)
    );
    let resumed = health(&http, &server, &[("e2b-sandbox-id", &id)]).await;
    assert_eq!(
        resumed.status,
        StatusCode::NO_CONTENT,
        "traffic resumes an autoResume sandbox"
    );
    assert_eq!(api.info(&id).await.json()["state"], json!("running"));
    assert_not_found(
        &health(&http, &server, &[("e2b-sandbox-id", &plain)]).await,
        &plain,
    );
    assert_eq!(
        api.info(&plain).await.json()["state"],
        json!("paused"),
        "without autoResume it stays paused"
    );
}

/// `allowPublicTraffic: false`: a request to one of the sandbox's ports without its traffic
/// token is refused (403) before it could resume the paused sandbox; with the token it resumes
/// it as any traffic does. envd's port needs no traffic token.
#[tokio::test(flavor = "multi_thread")]
async fn a_private_sandbox_refuses_traffic_without_its_token_before_resuming() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let http = Http::default();
    let body = json!({"templateID": "base", "timeout": 60, "autoResume": {"enabled": true},
        "network": {"allowPublicTraffic": false}});
    let created = api.create(body).await;
    let id = created["sandboxID"].as_str().unwrap().to_owned();
    let token = created["trafficAccessToken"]
        .as_str()
        .expect("a traffic access token")
        .to_owned();
    let pause = api
        .call(Method::POST, &format!("/sandboxes/{id}/pause"), "")
        .await;
    assert_eq!(pause.status, StatusCode::NO_CONTENT);
    let port = |extra: &[(&'static str, String)]| {
        let mut headers = vec![
            ("e2b-sandbox-id", id.clone()),
            ("e2b-sandbox-port", "8000".to_owned()),
        ];
        headers.extend(extra.iter().cloned());
        headers
    };
    for headers in [
        port(&[]),
        port(&[("e2b-traffic-access-token", "wrong".to_owned())]),
    ] {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let refused = health(&http, &server, &headers).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert_eq!(
            api.info(&id).await.json()["state"],
            json!("paused"),
            "not resumed"
        );
    }
    let with_token = port(&[("e2b-traffic-access-token", token)]);
    let headers: Vec<(&str, &str)> = with_token.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // Nothing listens on 8000: the sandbox resumed and said so.
    let resumed = health(&http, &server, &headers).await;
    assert_eq!(resumed.status, StatusCode::BAD_GATEWAY);
    assert_eq!(api.info(&id).await.json()["state"], json!("running"));
    // envd's own port is not behind the traffic token.
    assert_eq!(
        health(&http, &server, &[("e2b-sandbox-id", &id)])
            .await
            .status,
        StatusCode::NO_CONTENT
    );
}

/// Splits a Connect stream body into its envelopes' (flags, payload).
fn envelopes(mut body: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    while body.len() >= 5 {
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        assert!(body.len() >= 5 + len, "truncated envelope");
        out.push((body[0], &body[5..5 + len]));
        body = &body[5 + len..];
    }
    assert!(body.is_empty(), "trailing bytes after the last envelope");
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_reader_of_many_tiny_events_keeps_its_stream() {
    use base64::Engine;
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    // Every `echo` is its own tiny write, so envd forwards each as its own event: while the
    // reader stalls, tens of thousands of tiny HTTP/2 DATA frames queue between the front and
    // the sandbox's daemon. h2 counts such frames against a small-frame budget and closes the
    // whole connection when it runs out (seen as broken streams under CPU load).
    let lines = 200_000;
    let script = format!("for i in $(seq 1 {lines}); do echo $i; done");
    let response = start_bash(&server, &id, &script).await;
    assert_eq!(response.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let received = response
        .into_body()
        .collect()
        .await
        .expect("the stream survives the stall")
        .to_bytes();
    let mut stdout = Vec::new();
    let mut ended = false;
    let envelopes = envelopes(&received);
    let (last_flags, last) = envelopes.last().expect("envelopes");
    assert_eq!(*last_flags, 2, "end-stream last");
    assert_eq!(*last, b"{}", "end-stream without error");
    for (flags, payload) in &envelopes[..envelopes.len() - 1] {
        assert_eq!(*flags, 0);
        let message: serde_json::Value = serde_json::from_slice(payload).unwrap();
        let event = &message["event"];
        if let Some(data) = event["data"]["stdout"].as_str() {
            stdout.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap(),
            );
        }
        ended |= event.get("end").is_some();
    }
    assert!(ended, "end event");
    let expected: String = (1..=lines).map(|i| format!("{i}\n")).collect();
    assert!(
        stdout == expected.as_bytes(),
        "{} of {} bytes",
        stdout.len(),
        expected.len()
    );
}

/// A server listening inside a sandbox is reached through the front by `E2b-Sandbox-Port` or
/// `Host: <port>-<id>.<domain>` (a 3 MiB file whole); a port nothing listens on is E2B's 502
/// "port is not open"; another sandbox cannot reach it directly, even served on the world's
/// address (the pool is unreachable from each world); a killed sandbox's port is not found.
#[tokio::test(flavor = "multi_thread")]
async fn ports_served_in_a_sandbox_are_reached_through_the_front_only() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let http = Http::default();
    let (id, other) = (api.sandbox().await, api.sandbox().await);
    let served = common::exec(
        &server,
        &id,
        None,
        "mkdir -p ~/site && cd ~/site && head -c 3145728 /dev/urandom > big.bin && \
         (setsid python3 -m http.server 8765 --bind 0.0.0.0 >/dev/null 2>&1 &) && \
         for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8765))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1",
    )
    .await;
    assert_eq!(served.exit_code, 0, "the server listens: {}", served.stderr);
    let digest = common::exec(
        &server,
        &id,
        None,
        "sha256sum ~/site/big.bin | cut -d' ' -f1",
    )
    .await;
    let get = |headers: Vec<(&'static str, String)>| {
        let http = http.clone();
        let url = format!("{}/big.bin", server.sandbox_url());
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            http.send(Method::GET, &url, &headers, "").await
        }
    };
    for headers in [
        vec![
            ("e2b-sandbox-id", id.clone()),
            ("e2b-sandbox-port", "8765".to_owned()),
        ],
        vec![("host", format!("8765-{id}.e2b.local"))],
    ] {
        let reply = get(headers.clone()).await;
        assert_eq!(reply.status, StatusCode::OK, "{headers:?}");
        assert_eq!(reply.body.len(), 3 << 20);
        use sha2::Digest;
        let got = format!("{:x}", sha2::Sha256::digest(&reply.body));
        assert_eq!(got, digest.stdout.trim());
    }
    let closed = get(vec![("host", format!("8766-{id}.e2b.local"))]).await;
    assert_eq!(closed.status, StatusCode::BAD_GATEWAY);
    assert!(
        closed.json()["message"]
            .as_str()
            .unwrap()
            .contains("port is not open"),
        "{}",
        closed.json()
    );
    // Served on every address of its world, yet not reachable from another world's.
    let address = common::exec(
        &server,
        &id,
        None,
        "ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1",
    )
    .await;
    let address = address.stdout.trim();
    assert!(!address.is_empty(), "the sandbox has an address");
    let direct = common::exec(
        &server,
        &other,
        None,
        &format!(
            "python3 -c 'import socket; socket.create_connection((\"{address}\", 8765), timeout=2)'"
        ),
    )
    .await;
    assert_ne!(
        direct.exit_code, 0,
        "another sandbox reached the port directly"
    );
    // Refused by the world's own routes at once, not lost on the host (which may not forward).
    assert!(
        direct.stderr.contains("No route to host"),
        "{}",
        direct.stderr
    );
    assert_eq!(api.kill(&id).await, StatusCode::NO_CONTENT);
    assert_not_found(
        &get(vec![("host", format!("8765-{id}.e2b.local"))]).await,
        &id,
    );
}

/// An upgrade (what a WebSocket starts with) to a port inside the sandbox is relayed: the
/// server's 101 comes back, then bytes flow both ways on the joined connections.
#[tokio::test(flavor = "multi_thread")]
async fn upgrades_to_a_sandbox_port_are_relayed_both_ways() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    // A server that answers any request with 101 and then echoes in upper case.
    let script = r#"
import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8770))
s.listen()
def serve(c):
    data = b""
    while b"\r\n\r\n" not in data:
        data += c.recv(4096)
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
    while True:
        d = c.recv(4096)
        if not d:
            break
        c.sendall(d.upper())
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;
    let started = common::exec(
        &server,
        &id,
        None,
        &format!(
            "cat > /tmp/echo.py <<'EOF'\n{script}\nEOF\n(setsid python3 /tmp/echo.py >/dev/null 2>&1 &); \
             for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8770))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1"
        ),
    )
    .await;
    assert_eq!(started.exit_code, 0, "{}", started.stderr);
    let front = server
        .sandbox_url()
        .trim_start_matches("http://")
        .to_owned();
    let mut stream = tokio::net::TcpStream::connect(&front)
        .await
        .expect("connect to the front");
    let request = format!(
        "GET /socket HTTP/1.1\r\nHost: 8770-{id}.e2b.local\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "{}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: echo"), "{head}");
    for word in ["hello", "through the front"] {
        stream.write_all(word.as_bytes()).await.unwrap();
        let mut echoed = vec![0u8; word.len()];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut echoed))
            .await
            .expect("the echo within 10 s")
            .unwrap();
        assert_eq!(echoed, word.to_uppercase().as_bytes());
    }
}

/// `--tls`: the same envd port speaks HTTPS too, with a certificate for `*.<domain>` from the
/// local CA in the state dir: curl, trusting only that CA, reaches a server in a sandbox by its
/// `https://<port>-<id>.<domain>` name, envd by its own and the API as `api.<domain>` (as
/// E2B's cloud serves it); plain HTTP still works on the port; a name outside the domain is
/// refused; the CA's key is root's only.
#[tokio::test(flavor = "multi_thread")]
async fn tls_serves_sandbox_ports_and_envd_under_a_local_ca() {
    let parent = tempfile::tempdir().expect("tempdir");
    let server = LocalServer::start_in(parent.path(), &["--tls", "--domain", "e2b.test"]);
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let served = common::exec(
        &server,
        &id,
        None,
        "mkdir -p ~/site && echo 'over tls' > ~/site/index.html && cd ~/site && \
         (setsid python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &) && \
         for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8765))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1",
    )
    .await;
    assert_eq!(served.exit_code, 0, "{}", served.stderr);
    let ca = server.state_dir().join("tls/ca.pem");
    let port = server.sandbox_url().rsplit(':').next().unwrap().to_owned();
    let curl = |host: String, path: &str| {
        let output = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "20", "--cacert"])
            .arg(&ca)
            .arg("--resolve")
            .arg(format!("{host}:{port}:127.0.0.1"))
            .arg("-w")
            .arg("\n%{http_code}")
            .arg(format!("https://{host}:{port}{path}"))
            .output()
            .expect("run curl");
        assert!(
            output.status.success(),
            "curl {host}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    assert_eq!(
        curl(format!("8765-{id}.e2b.test"), "/index.html"),
        "over tls\n\n200"
    );
    assert!(curl(format!("49983-{id}.e2b.test"), "/health").ends_with("\n204"));
    // The API, by its name on the same port, with the key: its JSON answer to GET `path`.
    let api_json = |path: String| -> serde_json::Value {
        let output = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "20", "--cacert"])
            .arg(&ca)
            .arg("--resolve")
            .arg(format!("api.e2b.test:{port}:127.0.0.1"))
            .arg("-H")
            .arg(format!("X-API-KEY: {}", server.api_key()))
            .arg(format!("https://api.e2b.test:{port}{path}"))
            .output()
            .expect("run curl");
        serde_json::from_slice(&output.stdout).expect("JSON")
    };
    // The key's sandboxes, and E2B's 401 without it.
    let listed = api_json("/sandboxes".to_owned());
    assert!(
        listed
            .as_array()
            .expect("a list")
            .iter()
            .any(|sandbox| sandbox["sandboxID"] == id.as_str()),
        "{listed}"
    );
    assert!(curl("api.e2b.test".to_owned(), "/sandboxes").ends_with("\n401"));
    // The URLs it hands out name the scheme and host the client used: a template's upload link.
    let template = api
        .call(Method::POST, "/v3/templates", r#"{"name":"over-tls"}"#)
        .await
        .json()["templateID"]
        .as_str()
        .expect("a template id")
        .to_owned();
    let hash = "a".repeat(64);
    let linked = api_json(format!("/templates/{template}/files/{hash}"));
    let url = linked["url"].as_str().expect("an upload URL");
    assert!(
        url.starts_with(&format!(
            "https://api.e2b.test:{port}/template-uploads/{hash}?token="
        )),
        "{url}"
    );
    // Plain HTTP on the same port.
    let plain = Http::default()
        .send(
            Method::GET,
            &format!("{}/index.html", server.sandbox_url()),
            &[("host", &format!("8765-{id}.e2b.test"))],
            "",
        )
        .await;
    assert_eq!(plain.status, StatusCode::OK);
    // A name outside the domain is not vouched for.
    let other = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(&ca)
        .arg("--resolve")
        .arg(format!("elsewhere.test:{port}:127.0.0.1"))
        .arg(format!("https://elsewhere.test:{port}/health"))
        .output()
        .expect("run curl");
    assert!(!other.status.success(), "a certificate for elsewhere.test");
    let key_mode = std::fs::metadata(server.state_dir().join("tls/ca-key.pem")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&key_mode.permissions()) & 0o777,
        0o600
    );
}
