//! 64 MiB streamed through `/files` both ways against a real e2b-local,
//! with the content checked by hash and this process's resident memory
//! sampled throughout: it must stay flat (independent of the file size).
//! It needs its process to itself, so that no other test shares the
//! process's memory: nextest runs every test in a process of its own; under
//! `cargo test`, run it alone (`cargo test -p e2b-client --test it
//! e2b_local_large`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use e2b_client::{DownloadOptions, PlainHttp, UploadOptions, UploadPart, WireFormat};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::world::World;

const SIZE: u64 = 64 << 20;
const CHUNK: usize = 64 << 10;
/// Allowed growth of resident memory over the baseline while 64 MiB flow:
/// buffers of a few chunks, far below the file size.
const RSS_BUDGET: u64 = 16 << 20;

/// Deterministic pseudo-random chunks (xorshift), so the content is not
/// compressible and differs per offset.
fn chunks(seed: u64) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let count = SIZE as usize / CHUNK;
    futures::stream::iter((0..count).map(move |i| {
        let mut state = seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut chunk = Vec::with_capacity(CHUNK);
        while chunk.len() < CHUNK {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.extend_from_slice(&state.to_le_bytes());
        }
        Ok(Bytes::from(chunk))
    }))
}

async fn expected_hash(seed: u64) -> Vec<u8> {
    let mut hasher = Sha256::new();
    let mut stream = std::pin::pin!(chunks(seed));
    while let Some(chunk) = stream.next().await {
        hasher.update(chunk.unwrap());
    }
    hasher.finalize().to_vec()
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// Samples resident memory every 5 ms until stopped; keeps the peak.
struct RssSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start() -> Self {
        let peak = Arc::new(AtomicU64::new(rss_bytes()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_bytes(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        RssSampler {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.peak.load(Ordering::Relaxed)
    }
}

async fn round_trip(plain: PlainHttp) {
    let world = World::start();
    let api = world.api_with(WireFormat::Proto, plain);
    let sandbox = world.sandbox(&api).await;
    let envd = sandbox.envd();
    let want = expected_hash(7).await;

    // Warm up the connection and allocator before taking the baseline.
    envd.upload(
        "/home/user/warm",
        chunks(1).take(4),
        &UploadOptions::default(),
    )
    .await
    .unwrap();
    let baseline = rss_bytes();
    let sampler = RssSampler::start();

    let started = Instant::now();
    let written = envd
        .upload(
            "/home/user/big.bin",
            chunks(7),
            &UploadOptions::default().content_length(SIZE),
        )
        .await
        .unwrap();
    let upload_time = started.elapsed();
    assert_eq!(written.path, "/home/user/big.bin");
    assert_eq!(
        envd.stat("/home/user/big.bin", &Default::default())
            .await
            .unwrap()
            .size,
        SIZE
    );

    let started = Instant::now();
    let mut download = envd
        .download("/home/user/big.bin", &DownloadOptions::default())
        .await
        .unwrap();
    assert_eq!(download.content_length(), Some(SIZE));
    let mut hasher = Sha256::new();
    let mut received = 0u64;
    while let Some(chunk) = download.next().await {
        let chunk = chunk.unwrap();
        received += chunk.len() as u64;
        hasher.update(&chunk);
    }
    let download_time = started.elapsed();
    assert_eq!(received, SIZE);
    assert_eq!(
        hasher.finalize().to_vec(),
        want,
        "downloaded content differs"
    );

    // The multipart path streams too.
    let started = Instant::now();
    let written = envd
        .upload_files(
            vec![UploadPart::new("/home/user/big2.bin", chunks(7))],
            &UploadOptions::default(),
        )
        .await
        .unwrap();
    let multipart_time = started.elapsed();
    assert_eq!(written[0].path, "/home/user/big2.bin");

    let peak = sampler.finish();
    let growth = peak.saturating_sub(baseline);
    let mib = |d: Duration| SIZE as f64 / (1 << 20) as f64 / d.as_secs_f64();
    println!(
        "{plain:?}: upload {:.0} MiB/s, download {:.0} MiB/s, multipart upload {:.0} MiB/s, RSS baseline {} MiB, peak growth {:.1} MiB",
        mib(upload_time),
        mib(download_time),
        mib(multipart_time),
        baseline >> 20,
        growth as f64 / (1 << 20) as f64
    );
    assert!(
        growth < RSS_BUDGET,
        "resident memory grew by {growth} bytes while streaming {SIZE} bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_stream_both_ways_in_flat_memory() {
    round_trip(PlainHttp::Http1).await;
    round_trip(PlainHttp::H2cPriorKnowledge).await;
}
