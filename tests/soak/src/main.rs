//! `dsh-soak`: a bounded soak of the E2B composition on loopback (issue 9). It starts a private
//! `e2b-local serve` (the harness: loopback ports, temporary state dir, random key), runs
//! `--sandboxes` workers for `--duration`, each driving the built `dsh` against a sandbox of its
//! own with a random mix of commands, terminals and file operations, SIGKILLing some `dsh`
//! processes and some commands inside sandboxes; then it checks that nothing is left (sandboxes,
//! processes, mounts, cgroups, state dirs) and that e2b-local's RSS at the end is within
//! `--max-rss-ratio` of its RSS after `--warm-up`.
//!
//! Exit status: 0 passed, 1 failed (failed operations, leaks, memory growth), 2 a usage error or
//! a soak that could not be set up. `tests/soak/README.md` says how to run it.

#![forbid(unsafe_code)]

mod args;
mod binaries;
mod content;
mod control;
mod dsh;
mod leaks;
mod manifest;
mod model;
mod ops;
mod procs;
mod report;
mod rss;
mod run;
mod sandbox;
mod tally;
mod worker;

use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use clap::Parser;
use tokio::signal::unix::SignalKind;

/// The snapshot directory of the programs, set on the one re-execution (see [`reexecute`]).
const SNAPSHOT_ENV: &str = "DSH_SOAK_SNAPSHOT";

fn main() -> ExitCode {
    let args = args::Args::parse();
    if let Err(err) = args.validate() {
        eprintln!("dsh-soak: {err}");
        return ExitCode::from(2);
    }
    let Some(snapshot) = std::env::var_os(SNAPSHOT_ENV).map(std::path::PathBuf::from) else {
        return reexecute(&args);
    };
    let binaries = binaries::Binaries::in_snapshot(&snapshot);
    let code = soak(&args, &binaries);
    if let Err(err) = std::fs::remove_dir_all(&snapshot) {
        eprintln!("dsh-soak: remove {}: {err}", snapshot.display());
    }
    code
}

fn soak(args: &args::Args, binaries: &binaries::Binaries) -> ExitCode {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64)
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("dsh-soak: start the tokio runtime: {err}");
            return ExitCode::from(2);
        }
    };
    // Ctrl-C or SIGTERM abandons the soak: its workers stop (their dsh processes are killed on
    // drop), the server is stopped (the harness), and the snapshot is removed.
    let verdict = runtime.block_on(async {
        let (count, interrupts) = tokio::sync::watch::channel(0);
        tokio::spawn(async move {
            let Ok(mut term) = tokio::signal::unix::signal(SignalKind::terminate()) else {
                return;
            };
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                eprintln!("dsh-soak: interrupted; stopping");
                count.send_modify(|count| *count += 1);
            }
        });
        run::soak(args, binaries, seed, interrupts).await
    });
    match verdict {
        Ok(Some(true)) => ExitCode::SUCCESS,
        Ok(Some(false)) => ExitCode::FAILURE,
        Ok(None) => ExitCode::from(130),
        Err(err) => {
            eprintln!("dsh-soak: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Locates the programs, copies them into a snapshot directory and re-executes this program
/// with `$SNAPSHOT_ENV` naming it. The re-execution is how the server gets its environment: the
/// harness starts `$E2B_LOCAL_BIN` and passes it this process's environment (`RUST_LOG` is its
/// log filter), and changing the environment of a running process is `unsafe` in this edition.
fn reexecute(args: &args::Args) -> ExitCode {
    let located = binaries::locate(args.dsh.clone(), args.e2b_local.clone());
    let snapshot = match located.and_then(|built| Ok((built.snapshot()?, built))) {
        Ok((snapshot, built)) => {
            println!(
                "dsh-soak: copied {}, {} and the plugins next to dsh into {}",
                built.dsh.display(),
                built.e2b_local.display(),
                snapshot.plugin_dir.display()
            );
            snapshot
        }
        Err(err) => {
            eprintln!("dsh-soak: {err:#}");
            return ExitCode::from(2);
        }
    };
    let err = match std::env::current_exe() {
        Ok(exe) => std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env("E2B_LOCAL_BIN", &snapshot.e2b_local)
            .env("RUST_LOG", &args.server_log)
            .env(SNAPSHOT_ENV, &snapshot.plugin_dir)
            .exec(),
        Err(err) => err,
    };
    eprintln!("dsh-soak: re-execute with the snapshot of the programs: {err}");
    let _ = std::fs::remove_dir_all(&snapshot.plugin_dir);
    ExitCode::from(2)
}
