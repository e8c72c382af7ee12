//! Ratios of this provider against `tokio::process` measured in the same
//! run (lower is better; 1.00 = parity):
//!
//! - spawn + wait of `true`, outputs piped (the default spec) and null;
//! - 256 MiB through pipe mode vs reading a `tokio::process` pipe directly;
//! - peak RSS growth while 1 GiB passes through collect mode (1 MiB tail).
//!
//! `cargo bench -p dsh-subprocess-local` runs it; `DSH_BENCH_QUICK=1` uses
//! fewer iterations. Rounds alternate the two sides so drift hits both.

use std::process::Stdio;
use std::time::{Duration, Instant};

use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec, SubprocessProvider};
use dsh_subprocess_local::{Config, LocalSubprocess};
use futures::StreamExt;
use tokio::io::AsyncReadExt;

fn main() {
    let quick = std::env::var_os("DSH_BENCH_QUICK").is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let provider = LocalSubprocess::new(&Config::default()).expect("provider");
        let (rounds, spawns, big) = if quick { (3, 100, 64 << 20) } else { (7, 400, 256 << 20) };

        let ours = |null: bool| {
            let provider = provider.clone();
            async move {
                let mut spec = SpawnSpec::new(["true"]);
                if null {
                    spec.stdout = OutputMode::Null;
                    spec.stderr = OutputMode::Null;
                }
                let process = provider.spawn(spec).await.expect("spawn");
                process.wait().await.expect("wait");
            }
        };
        let peer = |null: bool| async move {
            let io = || if null { Stdio::null() } else { Stdio::piped() };
            let mut child = tokio::process::Command::new("true")
                .stdout(io())
                .stderr(io())
                .spawn()
                .expect("spawn");
            child.wait().await.expect("wait");
        };
        for null in [false, true] {
            let label = if null { "spawn+wait true (null outputs)" } else { "spawn+wait true (piped outputs)" };
            let (a, b) = compare(rounds, || async {
                let start = Instant::now();
                for _ in 0..spawns {
                    ours(null).await;
                }
                start.elapsed() / spawns
            }, || async {
                let start = Instant::now();
                for _ in 0..spawns {
                    peer(null).await;
                }
                start.elapsed() / spawns
            })
            .await;
            report(label, a, b);
        }

        let script = format!("head -c {big} /dev/zero");
        let faults_before = minor_faults();
        let (a, b) = compare(rounds, || async {
            let start = Instant::now();
            let process = provider.spawn(SpawnSpec::new(["sh", "-c", &script])).await.expect("spawn");
            let mut stdout = process.take_stdout().expect("stdout");
            let mut total = 0usize;
            while let Some(chunk) = stdout.next().await {
                total += chunk.expect("chunk").len();
            }
            assert_eq!(total, big);
            process.wait().await.expect("wait");
            start.elapsed()
        }, || async {
            let start = Instant::now();
            let mut child = tokio::process::Command::new("sh")
                .args(["-c", &script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            let mut stdout = child.stdout.take().expect("stdout");
            let mut buf = vec![0u8; 64 * 1024];
            let mut total = 0usize;
            loop {
                let n = stdout.read(&mut buf).await.expect("read");
                if n == 0 {
                    break;
                }
                total += n;
            }
            assert_eq!(total, big);
            child.wait().await.expect("wait");
            start.elapsed()
        })
        .await;
        report(&format!("{} MiB through pipe mode", big >> 20), a, b);
        println!("  (minor page faults during the pipe rounds: {})", minor_faults() - faults_before);

        let baseline = rss_kib();
        let mut spec = SpawnSpec::new(["sh", "-c", "head -c 1073741824 /dev/zero"]);
        spec.stdout = OutputMode::Collect { limit: 1 << 20 };
        let start = Instant::now();
        let process = provider.spawn(spec).await.expect("spawn");
        let mut peak = baseline;
        loop {
            tokio::select! {
                status = process.wait() => { status.expect("wait"); break; }
                () = tokio::time::sleep(Duration::from_millis(10)) => peak = peak.max(rss_kib()),
            }
        }
        let total = process.read_output(OutputStream::Stdout, 0, 0).await.expect("read").total;
        println!(
            "1 GiB through collect (1 MiB tail): {} MiB in {:?}, peak RSS growth {} KiB (baseline {} KiB)",
            total >> 20,
            start.elapsed(),
            peak.saturating_sub(baseline),
            baseline
        );
        provider.dispose().await.expect("dispose");
    });
}

/// Runs both sides `rounds` times, alternating, and returns their medians.
async fn compare<A, AF, B, BF>(rounds: usize, mut ours: A, mut peer: B) -> (Duration, Duration)
where
    A: FnMut() -> AF,
    AF: std::future::Future<Output = Duration>,
    B: FnMut() -> BF,
    BF: std::future::Future<Output = Duration>,
{
    // One warm-up each.
    ours().await;
    peer().await;
    let mut a = Vec::with_capacity(rounds);
    let mut b = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        a.push(ours().await);
        b.push(peer().await);
    }
    a.sort();
    b.sort();
    (a[rounds / 2], b[rounds / 2])
}

fn report(label: &str, ours: Duration, peer: Duration) {
    println!(
        "{label}: subprocess-local {ours:?}, tokio::process {peer:?}, ratio {:.3}",
        ours.as_secs_f64() / peer.as_secs_f64()
    );
}

fn minor_faults() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init().ru_minflt
    }
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}
