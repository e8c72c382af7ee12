//! 1 GiB through collect mode with a 1 MiB tail keeps host memory flat.
//! nextest runs it in a process of its own, so no other test moves this
//! process's RSS. The
//! bound is a sanity check (a leak of the stream would be ~1 GiB), not a
//! measurement; the benchmark reports the real figure.

use std::time::Duration;

use crate::support::{provider, sh};
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SubprocessProvider};

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .expect("value")
        .parse()
        .expect("number");
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gib_through_collect_keeps_rss_flat() {
    const GIB: u64 = 1 << 30;
    const TAIL: usize = 1 << 20;
    let p = provider();
    // 16-byte records, so the tail's content can be checked exactly.
    let mut spec = sh("yes 0123456789abcde | head -c 1073741824");
    spec.stdout = OutputMode::Collect { limit: TAIL };
    let baseline = rss_bytes();
    let process = p.spawn(spec).await.expect("spawn");
    let mut peak = baseline;
    let status = loop {
        tokio::select! {
            status = process.wait() => break status.expect("wait"),
            () = tokio::time::sleep(Duration::from_millis(20)) => peak = peak.max(rss_bytes()),
        }
    };
    peak = peak.max(rss_bytes());
    assert!(status.success(), "{status:?}");

    let snapshot = process
        .read_output(OutputStream::Stdout, 0, usize::MAX)
        .await
        .expect("read");
    assert_eq!(snapshot.total, GIB);
    assert!(snapshot.truncated);
    assert_eq!(snapshot.offset, GIB - TAIL as u64);
    assert_eq!(snapshot.bytes.len(), TAIL);
    // GIB and TAIL are multiples of 16, so the tail starts on a record.
    assert!(
        snapshot
            .bytes
            .chunks(16)
            .all(|record| record == b"0123456789abcde\n")
    );

    let growth = peak.saturating_sub(baseline);
    eprintln!(
        "RSS baseline {} KiB, peak {} KiB, growth {} KiB",
        baseline / 1024,
        peak / 1024,
        growth / 1024
    );
    assert!(
        growth < 32 << 20,
        "RSS grew by {growth} bytes for a 1 MiB tail"
    );
    p.dispose().await.expect("dispose");
}
