//! `subprocess`: dsh-subprocess-local through the host against
//! `tokio::process` — spawn + wait of `true`, and bulk output through pipe
//! mode.

use std::process::Stdio;
use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use dsh_host::Host;
use dsh_plugin_api::subprocess::{OutputMode, SpawnSpec, SubprocessProvider};
use dsh_subprocess_local::{Config, LocalSubprocess};
use futures::StreamExt;

use super::Bench;
use super::producer::{PEER_READ, producer_argv, tokio_drain};
use crate::figure::{Figure, Section, Target};
use crate::measure::{Contender, Plan, interleave, time_each_async};

/// Measures the section with the host's `subprocess` service.
pub fn measure(bench: &Bench, host: &Host) -> Result<Section> {
    let through_host = host.subprocess().context("the host's subprocess service")?;
    let local = {
        // It registers with the reactor of the runtime it is created on.
        let _entered = bench.runtime.enter();
        LocalSubprocess::new(&Config::default()).context("create an in-process subprocess-local")?
    };
    let in_process: Arc<dyn SubprocessProvider> = Arc::new(local.clone());
    let spawn_plan = Plan {
        rounds: bench.pick(21, 5),
        iterations: bench.pick(30, 10),
    };
    let mut figures = Vec::new();
    for (null, label, target) in [
        (
            false,
            "spawn+wait `true`, piped outputs, vs tokio::process",
            Target::RatioAtMost(1.15),
        ),
        (
            true,
            "spawn+wait `true`, null outputs, vs tokio::process",
            Target::None,
        ),
    ] {
        let run = |provider: Arc<dyn SubprocessProvider>| {
            move |n| {
                bench
                    .runtime
                    .block_on(time_each_async(n, || spawn_true(provider.as_ref(), null)))
            }
        };
        let mut contenders = [
            Contender::new("dsh spawn true", run(through_host.clone())),
            Contender::new("in-process spawn true", run(in_process.clone())),
            Contender::new("tokio::process spawn true", |n| {
                bench
                    .runtime
                    .block_on(time_each_async(n, || tokio_spawn_true(null)))
            }),
        ];
        let [ours, in_proc, peer] = interleave(spawn_plan, &mut contenders)?;
        figures.push(Figure::timed(label, &ours, Some(&in_proc), &peer, target));
    }

    let mib = bench.pick(256, 64);
    let pipe_plan = Plan {
        rounds: bench.pick(11, 3),
        iterations: 1,
    };
    let run = |provider: Arc<dyn SubprocessProvider>| {
        move |n| {
            bench
                .runtime
                .block_on(time_each_async(n, || pipe_through(provider.as_ref(), mib)))
        }
    };
    let mut contenders = [
        Contender::new("dsh pipe mode", run(through_host.clone())),
        Contender::new("in-process pipe mode", run(in_process.clone())),
        Contender::new("tokio::process pipe", |n| {
            bench
                .runtime
                .block_on(time_each_async(n, || tokio_pipe_through(mib)))
        }),
    ];
    let [ours, in_proc, peer] = interleave(pipe_plan, &mut contenders)?;
    figures.push(Figure::timed(
        format!("{mib} MiB through pipe mode vs tokio::process pipe"),
        &ours,
        Some(&in_proc),
        &peer,
        Target::RatioAtMost(1.15),
    ));

    bench
        .runtime
        .block_on(local.dispose())
        .context("dispose the in-process subprocess-local")?;
    Ok(Section {
        title: "subprocess — dsh-subprocess-local loaded through the host vs tokio::process".into(),
        figures,
        notes: vec![
            "spawn: the default spec (stdin null, stdout/stderr piped, left unread) vs tokio::process with the same stdio".into(),
            format!(
                "pipe: `{}` read to the end through take_stdout vs a tokio::process pipe read into one reused {} KiB buffer",
                producer_argv(mib).join(" "),
                PEER_READ / 1024
            ),
        ],
    })
}

/// One spawn + wait of `true`, outputs piped (the default) or null.
async fn spawn_true(provider: &dyn SubprocessProvider, null: bool) -> Result<()> {
    let mut spec = SpawnSpec::new(["true"]);
    if null {
        spec.stdout = OutputMode::Null;
        spec.stderr = OutputMode::Null;
    }
    let process = provider.spawn(spec).await.context("spawn true")?;
    let status = process.wait().await.context("wait for true")?;
    ensure!(status.success(), "true exited unsuccessfully: {status:?}");
    Ok(())
}

async fn tokio_spawn_true(null: bool) -> Result<()> {
    let stdio = || if null { Stdio::null() } else { Stdio::piped() };
    let mut child = tokio::process::Command::new("true")
        .stdin(Stdio::null())
        .stdout(stdio())
        .stderr(stdio())
        .spawn()
        .context("tokio::process: spawn true")?;
    let status = child
        .wait()
        .await
        .context("tokio::process: wait for true")?;
    ensure!(status.success(), "true exited unsuccessfully: {status}");
    Ok(())
}

/// Runs the producer of `mib` MiB in pipe mode and reads stdout to its end.
async fn pipe_through(provider: &dyn SubprocessProvider, mib: u64) -> Result<()> {
    let argv = producer_argv(mib);
    let command = argv.join(" ");
    let process = provider
        .spawn(SpawnSpec::new(argv))
        .await
        .with_context(|| format!("spawn {command}"))?;
    let mut stdout = process
        .take_stdout()
        .with_context(|| format!("take_stdout of {command}: no stream in pipe mode"))?;
    let mut total = 0u64;
    while let Some(chunk) = stdout.next().await {
        total += chunk
            .with_context(|| format!("read stdout of {command}"))?
            .len() as u64;
    }
    let status = process
        .wait()
        .await
        .with_context(|| format!("wait for {command}"))?;
    ensure!(
        status.success(),
        "{command} exited unsuccessfully: {status:?}"
    );
    ensure!(
        total == mib << 20,
        "{command}: read {total} bytes, expected {}",
        mib << 20
    );
    Ok(())
}

async fn tokio_pipe_through(mib: u64) -> Result<()> {
    tokio_drain(mib, |chunk| {
        std::hint::black_box(chunk);
    })
    .await?;
    Ok(())
}
