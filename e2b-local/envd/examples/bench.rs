//! Measures the daemon against a peer doing the same work without it, in the same run, and prints
//! ratios (CONTRIBUTING: performance is measured, never asserted):
//!
//! - `Start` of `/bin/true` to its end event (JSON and binary) vs `tokio::process` spawning and
//!   reaping `/bin/true` directly;
//! - 256 MiB of command stdout streamed through `Start` vs reading the same command's pipe
//!   directly;
//! - a 256 MiB `/files` upload and download vs `std::fs` writing and reading the same bytes.
//!
//! ```text
//! cargo run --release -p e2b-local-envd --example bench
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use connectrpc::client::{ClientConfig, HttpClient};
use e2b_local_envd::{EnvdConfig, EnvdListener, serve};
use envd_proto::process::process_event::Event;
use envd_proto::process::process_event::data_event::Output;
use envd_proto::process::{ProcessClient, ProcessConfig, StartRequest};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::io::AsyncReadExt;

const ROUNDS: usize = 200;
const STREAM_BYTES: usize = 256 << 20;

fn start(cmd: &str, args: &[&str]) -> StartRequest {
    StartRequest {
        process: ProcessConfig {
            cmd: cmd.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            ..Default::default()
        }
        .into(),
        stdin: Some(false),
        ..Default::default()
    }
}

/// Runs `request` to its end; returns the stdout byte count.
async fn run(client: &ProcessClient<HttpClient>, request: StartRequest) -> usize {
    let mut stream = client.start(request).await.expect("start");
    let mut bytes = 0;
    while let Some(message) = stream.message().await.expect("stream") {
        if let Some(Event::Data(data)) = message
            .to_owned_message()
            .event
            .into_option()
            .and_then(|e| e.event)
            && let Some(Output::Stdout(chunk)) = data.output
        {
            bytes += chunk.len();
        }
    }
    bytes
}

fn per_op(total: Duration, ops: usize) -> Duration {
    total / u32::try_from(ops).expect("few rounds")
}

fn report(name: &str, daemon: Duration, peer: Duration, unit: &str) {
    println!(
        "{name:<44} daemon {daemon:>10.3?}{unit}  peer {peer:>10.3?}{unit}  ratio {:.2}",
        daemon.as_secs_f64() / peer.as_secs_f64()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let config = EnvdConfig {
        sandbox_id: "bench".to_owned(),
        template_id: "base".to_owned(),
        env_vars: BTreeMap::new(),
        access_token: None,
        default_user: "root".to_owned(),
        default_workdir: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(serve(config, EnvdListener::Tcp(listener), async move {
        let _ = stopped.await;
    }));
    let uri: http::Uri = base.parse().expect("uri");

    for (label, json) in [("json", true), ("binary", false)] {
        let config = ClientConfig::new(uri.clone());
        let client = ProcessClient::new(
            HttpClient::plaintext(),
            if json { config.json() } else { config.proto() },
        );
        run(&client, start("/bin/true", &[])).await;
        let began = Instant::now();
        for _ in 0..ROUNDS {
            run(&client, start("/bin/true", &[])).await;
        }
        let daemon_time = per_op(began.elapsed(), ROUNDS);
        let began = Instant::now();
        for _ in 0..ROUNDS {
            tokio::process::Command::new("/bin/true")
                .status()
                .await
                .expect("spawn true");
        }
        let peer_time = per_op(began.elapsed(), ROUNDS);
        report(
            &format!("start /bin/true to end ({label})"),
            daemon_time,
            peer_time,
            "/op",
        );
    }

    let producer = format!("head -c {STREAM_BYTES} /dev/zero");
    let client = ProcessClient::new(
        HttpClient::plaintext(),
        ClientConfig::new(uri.clone()).proto(),
    );
    let began = Instant::now();
    let streamed = run(&client, start("/bin/sh", &["-c", &producer])).await;
    let daemon_time = began.elapsed();
    assert_eq!(streamed, STREAM_BYTES);
    let began = Instant::now();
    let mut child = tokio::process::Command::new("/bin/sh")
        .args(["-c", &producer])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn producer");
    let mut pipe = child.stdout.take().expect("stdout");
    let mut buf = vec![0u8; 32 << 10];
    let mut read = 0;
    loop {
        let n = pipe.read(&mut buf).await.expect("read pipe");
        if n == 0 {
            break;
        }
        read += n;
    }
    child.wait().await.expect("reap producer");
    assert_eq!(read, STREAM_BYTES);
    let peer_time = began.elapsed();
    report(
        "256 MiB of stdout (binary stream)",
        daemon_time,
        peer_time,
        "",
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let payload = Bytes::from(vec![42u8; STREAM_BYTES]);
    let target = dir.path().join("upload.bin");
    let http: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let url = format!(
        "{base}/files?path={}",
        percent_encoding::utf8_percent_encode(
            target.to_str().expect("utf-8"),
            percent_encoding::NON_ALPHANUMERIC
        )
    );
    let began = Instant::now();
    let response = http
        .request(
            http::Request::post(&url)
                .header("content-type", "application/octet-stream")
                .body(Full::new(payload.clone()))
                .expect("request"),
        )
        .await
        .expect("upload");
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.expect("upload body");
    let daemon_time = began.elapsed();
    let began = Instant::now();
    std::fs::write(dir.path().join("peer.bin"), &payload).expect("peer write");
    let peer_time = began.elapsed();
    report(
        "256 MiB /files upload (octet-stream)",
        daemon_time,
        peer_time,
        "",
    );

    let began = Instant::now();
    let response = http
        .request(
            http::Request::get(&url)
                .body(Full::new(Bytes::new()))
                .expect("request"),
        )
        .await
        .expect("download");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("download body")
        .to_bytes();
    assert_eq!(body.len(), STREAM_BYTES);
    let daemon_time = began.elapsed();
    let began = Instant::now();
    let peer = std::fs::read(dir.path().join("peer.bin")).expect("peer read");
    assert_eq!(peer.len(), STREAM_BYTES);
    let peer_time = began.elapsed();
    report(
        "256 MiB /files download (identity)",
        daemon_time,
        peer_time,
        "",
    );

    let _ = stop.send(());
    daemon.await.expect("daemon task").expect("daemon");
}
