//! Peak RSS of a process that streams one file: each client runs in its own
//! child process (ours: this bench binary again, with [`FLAG`]) and the
//! kernel's account of its high-water mark (`wait4`'s `ru_maxrss`) is the
//! figure.

use std::io::Read;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use e2b_local::harness::LocalServer;

use crate::ours::{self, Endpoints};
use crate::peers::Peer;

/// The argument that makes this binary the RSS child of our side.
pub const FLAG: &str = "--stream-child";

/// Who streams.
#[derive(Debug, Clone, Copy)]
pub enum Client {
    Dsh,
    Js,
    Python,
}

/// Runs `client` streaming `path` of `sandbox_id` in a child process and
/// returns the child's peak RSS in bytes.
pub fn peak_rss(client: Client, server: &LocalServer, sandbox_id: &str, path: &str) -> Result<u64> {
    let env = server.env();
    let mut command = match client {
        Client::Dsh => {
            let mut command = Command::new(std::env::current_exe()?);
            command
                .args([FLAG, sandbox_id, path])
                .envs(env.iter().cloned())
                .stdin(Stdio::null())
                .stderr(Stdio::inherit());
            command
        }
        Client::Js => Peer::js().command(&env, "stream", &[sandbox_id, path]),
        Client::Python => Peer::python().command(&env, "stream", &[sandbox_id, path]),
    };
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("start the {client:?} streaming child"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).map(|_| out)
    });
    let pid = libc::pid_t::try_from(child.id()).context("child pid")?;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `status` and `usage` are valid
    // out-pointers for the call's duration.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if waited != pid {
        bail!(
            "wait4 for the {client:?} child: {}",
            std::io::Error::last_os_error()
        );
    }
    let out = reader.join().expect("stdout reader")?;
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("the {client:?} streaming child failed (wait status {status}); stdout {out:?}");
    }
    let bytes: serde_json::Value = serde_json::from_str(out.trim())
        .with_context(|| format!("the {client:?} child printed {out:?}"))?;
    anyhow::ensure!(
        bytes["bytes"].as_u64().is_some(),
        "the {client:?} child read nothing: {out}"
    );
    // Linux reports ru_maxrss in KiB.
    Ok(u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024)
}

/// Our RSS child: `FLAG <sandbox id> <path>`, the server from the `E2B_*`
/// variables; prints `{"bytes": n}`.
pub fn main(args: &[String]) -> Result<()> {
    let [sandbox_id, path] = args else {
        bail!("usage: {FLAG} <sandbox id> <path>");
    };
    let endpoints = Endpoints::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let bytes = runtime.block_on(ours::stream(&endpoints, sandbox_id, path))?;
    println!("{{\"bytes\": {bytes}}}");
    Ok(())
}
