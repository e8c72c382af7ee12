//! Host start for the local composition: `config/local.yaml` read, parsed,
//! validated, both libraries loaded and both plugins created — manifest →
//! ready.
//!
//! Cold: in a fresh process (what `dsh` pays on every invocation), against
//! the bare `dlopen` of the same two libraries in a fresh process. Warm: a
//! second start in a process that has the libraries loaded already (what
//! an embedder re-creating its world pays), against building the two
//! tokio runtimes the design gives every plugin instance.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dsh_host::Host;

use super::{Bench, host_runtime};
use crate::child::{self, ChildReport, ChildTask};
use crate::composition::LocalComposition;
use crate::figure::{Figure, Section, Target, Value};
use crate::locate::{LOCAL_PLUGINS, plugin_library};
use crate::measure::{Contender, Plan, interleave};

/// The target for a start: manifest → ready within 20 ms.
const START_TARGET: Duration = Duration::from_millis(20);

/// Measures the section.
pub fn measure(bench: &Bench) -> Result<Section> {
    let cold_plan = Plan {
        rounds: bench.pick(21, 5),
        iterations: 1,
    };
    let in_child = |task: ChildTask| {
        move |n| {
            let mut total = Duration::ZERO;
            for _ in 0..n {
                total += child::run(task)?.elapsed();
            }
            Ok(total)
        }
    };
    let mut contenders = [
        Contender::new("cold host start", in_child(ChildTask::HostStart)),
        Contender::new(
            "cold dlopen of both libraries",
            in_child(ChildTask::DlopenPeer),
        ),
    ];
    let [cold, dlopen] = interleave(cold_plan, &mut contenders)?;

    let composition = LocalComposition::locate()?;
    let warm_plan = Plan {
        rounds: bench.pick(15, 5),
        iterations: bench.pick(10, 3),
    };
    let mut contenders = [
        Contender::new("warm host start", |n| {
            let mut total = Duration::ZERO;
            for _ in 0..n {
                let (host, elapsed) = bench.runtime.block_on(start(&composition))?;
                total += elapsed;
                bench
                    .runtime
                    .block_on(host.dispose())
                    .context("dispose the local composition")?;
            }
            Ok(total)
        }),
        Contender::new("two plugin-style runtimes", |n| {
            let mut total = Duration::ZERO;
            for _ in 0..n {
                let started = Instant::now();
                let runtimes = [
                    plugin_style_runtime("fs")?,
                    plugin_style_runtime("subprocess")?,
                ];
                total += started.elapsed();
                runtimes
                    .into_iter()
                    .for_each(tokio::runtime::Runtime::shutdown_background);
            }
            Ok(total)
        }),
    ];
    let [warm, runtimes] = interleave(warm_plan, &mut contenders)?;

    let target = Target::AtMost(Value::Time(START_TARGET));
    Ok(Section {
        title: "host start — config/local.yaml → both plugins created and ready".into(),
        figures: vec![
            Figure::timed(
                "cold start (fresh process) vs dlopen of both libraries",
                &cold,
                None,
                &dlopen,
                target,
            ),
            Figure::timed(
                "warm start (libraries loaded) vs two 2-worker runtimes",
                &warm,
                None,
                &runtimes,
                target,
            ),
        ],
        notes: vec![
            "timed inside the process from reading the manifest to both services ready; process start-up and dispose are not timed".into(),
            "peer (cold): dlopen(RTLD_LAZY | RTLD_LOCAL, the host's flags) of both plugin libraries in a fresh process".into(),
            "peer (warm): building the two multi-thread tokio runtimes (2 workers each) that every plugin instance owns by design".into(),
        ],
    })
}

/// Starts the local composition; returns it with the time manifest →
/// both services ready.
async fn start(composition: &LocalComposition) -> Result<(Host, Duration)> {
    let started = Instant::now();
    let host = composition.start().await?;
    host.fs().context("the started host's fs service")?;
    host.subprocess()
        .context("the started host's subprocess service")?;
    Ok((host, started.elapsed()))
}

fn plugin_style_runtime(id: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(format!("dsh-{id}"))
        .enable_all()
        .build()
        .with_context(|| format!("build a runtime for {id}"))
}

/// In a fresh child: one cold start of the local composition.
pub fn child_host_start() -> Result<ChildReport> {
    let composition = LocalComposition::locate()?;
    let runtime = host_runtime()?;
    runtime.block_on(async {
        let (host, elapsed) = start(&composition).await?;
        host.dispose()
            .await
            .context("dispose the local composition")?;
        Ok(ChildReport::timed(elapsed))
    })
}

/// In a fresh child: `dlopen` both plugin libraries as the host does
/// (never closed: the host never unloads a library either).
pub fn child_dlopen_peer() -> Result<ChildReport> {
    let paths = LOCAL_PLUGINS
        .into_iter()
        .map(|package| {
            let path = plugin_library(package)?;
            CString::new(path.as_os_str().as_bytes())
                .with_context(|| format!("dlopen {}: the path contains NUL", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let started = Instant::now();
    for path in &paths {
        // SAFETY: a valid C string; the libraries' initialisers are the
        // ones the host runs when it loads them.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if handle.is_null() {
            // SAFETY: dlerror returns a valid C string after a failure.
            let reason = unsafe { std::ffi::CStr::from_ptr(libc::dlerror()) };
            bail!(
                "dlopen {}: {}",
                path.to_string_lossy(),
                reason.to_string_lossy()
            );
        }
    }
    Ok(ChildReport::timed(started.elapsed()))
}
