//! The dsh foundation benchmarks (issue 2, item 9).
//!
//! What users get is the providers **loaded as plugins through the host**
//! ([`dsh_host::Host`], typed proxies over the plugin ABI), so that is what
//! is measured, each figure against a raw peer measured in the same run
//! (the machines are noisy; a ratio survives where absolute times do not):
//!
//! - `host-start` ([`sections::host_start`]): `config/local.yaml` →
//!   ready, cold and warm;
//! - `subprocess` ([`sections::subprocess`]): spawn + wait of `true`, and
//!   256 MiB through pipe mode, vs `tokio::process`;
//! - `fs` ([`sections::fs`]): read and write of 1 KiB and 64 MiB vs
//!   `std::fs`;
//! - `collect` ([`sections::collect`]): peak RSS while 1 GiB passes through
//!   collect mode with a 1 MiB tail, and at a quarter of that size.
//!
//! Where it explains a gap, the same provider linked in-process (no ABI
//! crossing) is measured too. Contenders run interleaved round by round
//! ([`measure`]); figures are medians and per-round paired ratios
//! ([`stats`]); the table ([`table`]) shows each next to its target.
//!
//! Run with `cargo bench -p dsh-benches` (see `tests/benches/README.md`).

pub mod child;
pub mod composition;
pub mod figure;
pub mod locate;
pub mod machine;
pub mod measure;
pub mod memory;
pub mod options;
pub mod sections;
pub mod stats;
pub mod table;

use anyhow::{Context, Result};
use dsh_host::Host;

use crate::child::ChildTask;
use crate::composition::LocalComposition;
use crate::figure::Section;
use crate::options::{Invocation, RunOptions, SectionName};
use crate::sections::Bench;

/// The benchmark program: parses `args` (without the program name) and
/// either measures and prints the table, or performs one child task.
pub fn main_with_args(args: &[String]) -> Result<()> {
    let quick_env = std::env::var("DSH_BENCH_QUICK").ok();
    match options::parse(args, quick_env.as_deref())? {
        Invocation::Child(task) => child::emit(&run_child(task)?),
        Invocation::Run(options) => run(&options),
    }
}

fn run_child(task: ChildTask) -> Result<child::ChildReport> {
    match task {
        ChildTask::HostStart => sections::host_start::child_host_start(),
        ChildTask::DlopenPeer => sections::host_start::child_dlopen_peer(),
        ChildTask::Collect { bytes } => sections::collect::child_collect(bytes),
        ChildTask::CollectPeer { bytes } => sections::collect::child_collect_peer(bytes),
    }
}

fn run(options: &RunOptions) -> Result<()> {
    println!("dsh foundation benchmarks — {}", machine::describe());
    if options.quick {
        println!("quick run: fewer rounds and smaller payloads; figures are noisier");
    }
    let bench = Bench::new(options.quick)?;
    let needs_host = options
        .sections
        .iter()
        .any(|section| matches!(section, SectionName::Subprocess | SectionName::Fs));
    let host = if needs_host {
        Some(start_local(&bench)?)
    } else {
        None
    };
    let mut sections: Vec<Section> = Vec::new();
    let mut outcome = Ok(());
    for &name in &options.sections {
        eprintln!("measuring {} …", name.as_str());
        let measured = match (name, &host) {
            (SectionName::HostStart, _) => sections::host_start::measure(&bench),
            (SectionName::Collect, _) => sections::collect::measure(&bench),
            (SectionName::Subprocess, Some(host)) => sections::subprocess::measure(&bench, host),
            (SectionName::Fs, Some(host)) => sections::fs::measure(&bench, host),
            (SectionName::Subprocess | SectionName::Fs, None) => {
                unreachable!("the host is started when these sections run")
            }
        };
        match measured.with_context(|| format!("section {}", name.as_str())) {
            Ok(section) => sections.push(section),
            Err(err) => {
                outcome = Err(err);
                break;
            }
        }
    }
    if let Some(host) = host {
        bench
            .runtime
            .block_on(host.dispose())
            .context("dispose the local composition")?;
    }
    // What was measured is printed even when a later section failed.
    println!();
    print!("{}", table::render(&sections, table::Headings::FOUNDATION));
    println!("finished: {}", machine::describe_load());
    outcome
}

/// Starts the local composition the fs and subprocess sections measure.
fn start_local(bench: &Bench) -> Result<Host> {
    let composition = LocalComposition::locate()?;
    bench.runtime.block_on(composition.start())
}
