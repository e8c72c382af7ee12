//! A command's stdin on E2B: one `StreamInput` per writer carrying every
//! write in order (megabytes included), `SendInput` per piece against an
//! envd without `StreamInput`, and a stream cut under the writer reported
//! by every later write rather than lost silently.

use std::time::Duration;

use crate::support::wire::{SEND_INPUT, STREAM_INPUT, Wire};
use crate::support::{World, within};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{SpawnSpec, StdinMode, SubprocessProvider};
use dsh_plugin_api::{Bytes, ErrorKind};
use dsh_subprocess_e2b::E2bSubprocess;
use futures::StreamExt;

const LIMIT: Duration = Duration::from_secs(30);

/// `cat` with stdin and stdout piped.
fn cat() -> SpawnSpec {
    let mut spec = SpawnSpec::new(["cat"]);
    spec.stdin = StdinMode::Pipe;
    spec
}

/// 300 numbered records with a 5 MiB chunk after the 101st (larger than
/// one message: it crosses as several), then a last record split across
/// two writes.
fn writes() -> Vec<Bytes> {
    let mut writes = Vec::new();
    for i in 0..300 {
        writes.push(Bytes::from(format!("record {i}\n")));
        if i == 100 {
            writes.push(Bytes::from(
                (0..5 << 20)
                    .map(|n: u32| (n % 251) as u8)
                    .collect::<Vec<u8>>(),
            ));
        }
    }
    writes.push(Bytes::from_static(b"las"));
    writes.push(Bytes::from_static(b"t\n"));
    writes
}

/// Spawns `cat`, writes every chunk of [`writes`] and closes, reading
/// stdout meanwhile; asserts it came back byte for byte. Returns the
/// (`StreamInput`, `SendInput`) requests that took (counted from after the
/// spawn: the provider's setup feeds its install script with `SendInput`).
async fn round_trip(wire: &Wire, provider: &E2bSubprocess<Wire>) -> (usize, usize) {
    let process = provider.spawn(cat()).await.expect("spawn");
    let before = (wire.count(STREAM_INPUT), wire.count(SEND_INPUT));
    let mut stdin = process.take_stdin().expect("stdin");
    let expected: Vec<u8> = writes().concat();
    let feed = async move {
        for chunk in writes() {
            stdin.write(chunk).await.expect("write");
        }
        stdin.close().await.expect("close");
    };
    let (_, echoed) = within(
        LIMIT,
        "the round trip",
        futures::future::join(feed, collect_bytes(process.take_stdout().expect("stdout"))),
    )
    .await;
    let echoed = echoed.expect("stdout");
    assert_eq!(echoed.len(), expected.len());
    assert!(
        echoed == expected,
        "the bytes came back reordered or changed"
    );
    assert!(
        within(LIMIT, "cat ends", process.wait())
            .await
            .expect("wait")
            .success()
    );
    (
        wire.count(STREAM_INPUT) - before.0,
        wire.count(SEND_INPUT) - before.1,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_of_a_writer_travels_on_one_stream_in_order() {
    let world = World::start().await;
    let wire = Wire::new(&world, false);
    let provider = wire.provider(&world);
    assert_eq!(
        round_trip(&wire, &provider).await,
        (2, 0),
        "(StreamInput, SendInput): the provider's probe and the writer's stream, no request per write"
    );
    assert_eq!(
        round_trip(&wire, &provider).await,
        (1, 0),
        "(StreamInput, SendInput): a second writer's own stream, the probe not repeated"
    );
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envd_without_stream_input_gets_send_input_per_piece() {
    let world = World::start().await;
    let wire = Wire::new(&world, true);
    let provider = wire.provider(&world);
    assert_eq!(
        round_trip(&wire, &provider).await,
        (1, writes().len() + 4),
        "(StreamInput, SendInput): only the refused probe, then a request per piece \
         (one per write, five for the 5 MiB one)"
    );
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_fails_every_later_write_and_the_close() {
    let world = World::start().await;
    let wire = Wire::new(&world, false);
    let provider = wire.provider(&world);
    let process = provider.spawn(cat()).await.expect("spawn");
    let mut stdin = process.take_stdin().expect("stdin");
    let mut stdout = process.take_stdout().expect("stdout");
    stdin
        .write(Bytes::from_static(b"one\n"))
        .await
        .expect("write");
    assert_eq!(
        within(LIMIT, "the echo", stdout.next())
            .await
            .expect("an item")
            .expect("bytes"),
        &b"one\n"[..]
    );

    wire.cut_input_streams();

    // A write racing the cut may still be queued; the stream's failure
    // reaches the writer within moments, and from then on every write
    // fails with it.
    let err = within(LIMIT, "a write fails", async {
        loop {
            if let Err(err) = stdin.write(Bytes::from_static(b"two\n")).await {
                return err;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let message = err.message();
    assert!(
        message.contains(&format!("write stdin of process {}", process.pid()))
            && message.contains("input stream to envd ended")
            && message.contains("may be lost")
            && message.contains("connection reset (test)"),
        "{message}"
    );
    for _ in 0..3 {
        let again = stdin
            .write(Bytes::from_static(b"three\n"))
            .await
            .expect_err("a write after the cut");
        assert_eq!(again, err, "every later write fails the same way");
    }
    // The failure was reported, so the close only closes: cat reads end of
    // file and ends.
    within(LIMIT, "close", stdin.close()).await.expect("close");
    assert!(
        within(LIMIT, "cat ends", process.wait())
            .await
            .expect("wait")
            .success()
    );
    provider.dispose().await.expect("dispose");
}
