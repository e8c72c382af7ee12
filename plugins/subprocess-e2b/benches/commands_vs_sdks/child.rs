//! Peak RSS while a large output passes through collect mode: each client
//! runs in its own child process (ours: this bench binary again, with
//! [`FLAG`]) and the kernel's account of its high-water mark (`wait4`'s
//! `ru_maxrss`) is the figure.

use std::io::Read;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use e2b_local::harness::LocalServer;

use crate::ours;
use crate::peers;

/// The argument that makes this binary our collect child.
pub const FLAG: &str = "--collect-child";

/// Who collects.
#[derive(Debug, Clone, Copy)]
pub enum Client {
    Dsh,
    Js,
    Python,
}

/// Runs `client` collecting `bytes` of output in a child and returns its
/// peak RSS in bytes, and the error it reported if the run failed.
pub fn peak_rss(
    client: Client,
    server: &LocalServer,
    sandbox_id: &str,
    bytes: u64,
) -> Result<(u64, Option<String>)> {
    let size = bytes.to_string();
    let mut command = match client {
        Client::Dsh => {
            let mut command = Command::new(std::env::current_exe()?);
            command
                .args([FLAG, sandbox_id, &size])
                .envs(server.env())
                .stdin(Stdio::null())
                .stderr(Stdio::inherit());
            command
        }
        Client::Js => peers::js().command(server, "collect", &[sandbox_id, &size]),
        Client::Python => peers::python().command(server, "collect", &[sandbox_id, &size]),
    };
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("start the {client:?} collect child"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).map(|_| out)
    });
    let pid = libc::pid_t::try_from(child.id()).context("child pid")?;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; both out-pointers are valid.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if waited != pid {
        bail!(
            "wait4 for the {client:?} child: {}",
            std::io::Error::last_os_error()
        );
    }
    let out = reader.join().expect("stdout reader")?;
    let rss = u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024;
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Ok((
            rss,
            Some(format!("the child died (wait status {status:#x}): {out}")),
        ));
    }
    let report: serde_json::Value = serde_json::from_str(out.trim())
        .with_context(|| format!("the {client:?} child printed {out:?}"))?;
    if let Some(error) = report["error"].as_str() {
        return Ok((rss, Some(error.to_owned())));
    }
    let got = report["bytes"].as_u64().unwrap_or(0);
    if got != bytes {
        return Ok((rss, Some(format!("collected {got} of {bytes} bytes"))));
    }
    Ok((rss, None))
}

/// Our collect child: `FLAG <sandbox id> <bytes>`, the server from the
/// `E2B_*` variables; prints `{"bytes": n}`.
pub fn main(args: &[String]) -> Result<()> {
    let [sandbox_id, bytes] = args else {
        bail!("usage: {FLAG} <sandbox id> <bytes>");
    };
    let bytes: u64 = bytes.parse().context("bytes")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let total = runtime.block_on(ours::collect(sandbox_id, bytes))?;
    println!("{{\"bytes\": {total}}}");
    Ok(())
}
