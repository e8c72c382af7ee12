//! The sandbox boundary's own round trip, with no dsh code on the way: a
//! line written to `/bin/cat` in a sandbox and read back, through this
//! client alone (stdin on one long-lived `StreamInput`, stdout on the
//! process's own stream; the front and envd between). It is the floor of
//! anything that crosses into a sandbox and back — such as a code runtime's
//! binding call, whose program runs in the sandbox and whose call is served
//! on the host (tests/benches/README.md, issue 27's figures).
//!
//! ```text
//! E2B_API_URL=… E2B_SANDBOX_URL=… E2B_API_KEY=… \
//!   cargo run --release -p e2b-client --example boundary_round_trip [-- http1|h2c]
//! ```
//!
//! Creates one sandbox from `base` (killed at the end) with the
//! environment's settings, as dsh's owner plugin would; plain `http://` goes
//! over HTTP/1.1 as the owner's does, or over h2c with `h2c` (which
//! e2b-local's front speaks and real envd does not). Then, for each line
//! `N` read from stdin, makes N round trips in sequence and prints their
//! mean in microseconds, one line each, so a bench can interleave these
//! with its other contenders. Ends at end of input.

use std::io::BufRead;
use std::time::{Duration, Instant};

use bytes::Bytes;
use e2b_client::{
    Api, CallOptions, Command, ConnectionOptions, NewSandbox, PlainHttp, ProcessEvent,
    ProcessInput, Sandbox, StreamOptions,
};
use futures::{SinkExt, StreamExt};

/// Bound on one round trip: a stuck sandbox fails the bench instead of
/// hanging it.
const ROUND_TRIP_BOUND: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let plain = match std::env::args().nth(1).as_deref() {
        None | Some("http1") => PlainHttp::Http1,
        Some("h2c") => PlainHttp::H2cPriorKnowledge,
        Some(other) => return Err(format!("unknown HTTP version {other:?}: http1 or h2c").into()),
    };
    let api = Api::new(
        ConnectionOptions::default()
            .with_plain_http(plain)
            .resolve()?,
    );
    let sandbox = Sandbox::create(
        &api,
        &NewSandbox::new("base").timeout(Duration::from_secs(3600)),
    )
    .await?;
    let outcome = serve(&sandbox).await;
    sandbox.kill().await?;
    outcome
}

/// Answers each count read from stdin with the mean round trip of that many.
async fn serve(sandbox: &Sandbox) -> Result<(), Box<dyn std::error::Error>> {
    let envd = sandbox.envd().clone();
    let mut cat = envd
        .start(
            &Command::new("/bin/cat").stdin(true),
            &StreamOptions::default(),
        )
        .await?;
    let pid = cat.pid();
    let (mut input, feed) = futures::channel::mpsc::channel::<ProcessInput>(1);
    let writer =
        tokio::spawn(async move { envd.stream_input(pid, feed, &CallOptions::default()).await });
    let (counts_tx, mut counts) = tokio::sync::mpsc::channel::<usize>(1);
    // Stdin is read on a thread of its own: the runtime's threads stay free
    // for the connection's tasks.
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(Ok(count)) = line.map(|l| l.trim().parse::<usize>()) else {
                break;
            };
            if counts_tx.blocking_send(count).is_err() {
                break;
            }
        }
    });
    while let Some(count) = counts.recv().await {
        let started = Instant::now();
        for i in 0..count {
            let line = Bytes::from(format!("{i}\n"));
            input.send(ProcessInput::Stdin(line.clone())).await?;
            let mut echoed = Vec::new();
            while !echoed.ends_with(b"\n") {
                match tokio::time::timeout(ROUND_TRIP_BOUND, cat.next()).await? {
                    Some(Ok(ProcessEvent::Stdout(bytes))) => echoed.extend_from_slice(&bytes),
                    Some(Ok(ProcessEvent::Stderr(_) | ProcessEvent::Pty(_))) => {}
                    Some(Ok(ProcessEvent::End(status))) => {
                        return Err(format!("cat ended: {status:?}").into());
                    }
                    Some(Err(e)) => return Err(e.into()),
                    None => return Err("cat's stream ended".into()),
                }
            }
            if echoed != line {
                return Err(format!("sent {line:?}, read {:?}", Bytes::from(echoed)).into());
            }
        }
        let mean = started.elapsed().as_secs_f64() * 1e6 / count.max(1) as f64;
        println!("{mean:.3}");
    }
    drop(input);
    writer.await??;
    Ok(())
}
