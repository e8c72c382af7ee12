//! What sandbox networking costs a create: the official JS SDK, warm in one process per server
//! (`tests/sdk-peers/bench/lifecycle.mjs`), doing create → `commands.run('true')` → kill against two
//! e2b-local servers started by this bench — one giving every sandbox its network (the
//! default), one with `--sandbox-network none` (loopback only, as before networking) — in
//! interleaved rounds (the order alternates each round).
//!
//! Run (as root; the SDK peers from `scripts/install-sdk-peers.sh`):
//!
//! ```sh
//! cargo build --release -p e2b-local && cargo bench -p e2b-local --bench create_latency
//! ```
//!
//! `DSH_BENCH_ROUNDS` (default 60) sets the rounds. Prints each server's median and quartiles
//! and the median of the paired ratios networked / loopback only.

use e2b_local::harness::{LocalServer, SdkDriver, Steps, millis, quantile};

fn main() -> std::io::Result<()> {
    let rounds: usize = std::env::var("DSH_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let networked = LocalServer::start();
    let loopback = LocalServer::start_with_args(&["--sandbox-network", "none"]);
    let driver = SdkDriver::js("lifecycle");
    let mut contenders: [(&str, Steps); 2] = [
        ("networked (veth, routes)", driver.steps(&networked, &[])?),
        (
            "loopback only (--sandbox-network none)",
            driver.steps(&loopback, &[])?,
        ),
    ];
    let mut samples = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    for round in 0..rounds {
        for offset in 0..2 {
            let index = (round + offset) % 2;
            samples[index].push(contenders[index].1.once()?);
        }
    }
    println!(
        "\n{rounds} interleaved rounds of create → commands.run('true') → kill ({})\n",
        driver.name
    );
    println!("{:<42} {:>10} {:>16}", "server", "median ms", "p25-p75 ms");
    for ((name, _), times) in contenders.iter_mut().zip(&samples) {
        println!(
            "{name:<42} {:>10.1} {:>7.1}-{:<8.1}",
            millis(quantile(times, 0.5)),
            millis(quantile(times, 0.25)),
            millis(quantile(times, 0.75))
        );
    }
    let mut ratios: Vec<f64> = samples[0]
        .iter()
        .zip(&samples[1])
        .map(|(net, lo)| net.as_secs_f64() / lo.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "\nnetworked / loopback only, paired by round: median {:.3}x [p25 {:.3}x, p75 {:.3}x] (target <= 1.25x)",
        ratios[ratios.len() / 2],
        ratios[ratios.len() / 4],
        ratios[ratios.len() * 3 / 4]
    );
    Ok(())
}
