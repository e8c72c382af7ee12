//! `durable-start`: check the state directory, make the command's
//! directory, and start a detached supervisor (a forked child in a new
//! session of its own, orphaned when `durable-start` exits, stdio on
//! /dev/null), which
//! starts the command and reports one control line back through a pipe:
//! `ok <id> <pid>`, `failed <stage> <errno> <detail>` or
//! `error <errno> <message>`. That line is what `durable-start` prints.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use dsh_supervisor::wire::{DurableStartRequest, Stage, valid_durable_id};
use rustix::fs::{Mode, OFlags};
use rustix::pipe::PipeFlags;

use super::store::{self, Failure};
use super::supervise;
use crate::launch::Prepared;
use crate::sys;

/// The longest report line read from the supervisor.
const MAX_REPORT: usize = 64 * 1024;

/// Starts `request`; returns the control line.
pub fn main(request: &DurableStartRequest) -> String {
    // Nothing of the caller's but stdio may reach the supervisor (it would
    // keep the caller's pipes open for as long as the command runs).
    sys::close_from(3);
    match start(request) {
        Ok(line) => line,
        Err((errno, message)) => format!("error {errno} {}", one_line(&message)),
    }
}

fn start(request: &DurableStartRequest) -> Result<String, Failure> {
    let prepared = match Prepared::new(&request.launch) {
        Ok(prepared) => prepared,
        Err(message) => {
            return Ok(format!(
                "failed {} {} {}",
                Stage::Request as u8,
                libc::EINVAL,
                one_line(&message)
            ));
        }
    };
    let dir = Path::new(&request.dir);
    store::ensure_dir(dir)?;
    let id = request.id.clone();
    let cmd_dir = make_command_dir(dir, &id)?;
    let cleanup = |failure: Failure| {
        let _ = std::fs::remove_dir_all(&cmd_dir);
        failure
    };
    let resources =
        |err: rustix::io::Errno, what: &str| (err.raw_os_error(), format!("{what}: {err}"));
    let (report_r, report_w) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)
        .map_err(|e| cleanup(resources(e, "report pipe")))?;
    // SAFETY: the helper is single-threaded.
    match unsafe { sys::fork() } {
        Err(err) => {
            return Err(cleanup((
                err.raw_os_error().unwrap_or(0),
                format!("fork: {err}"),
            )));
        }
        Ok(Some(_)) => {}
        Ok(None) => {
            drop(report_r);
            detach(request, &prepared, &cmd_dir, &id, report_w)
        }
    }
    drop(report_w);
    // Not waited for: the supervisor outlives this process.
    let line = read_report(&report_r);
    match line {
        Some(line) => Ok(line),
        None => Err(cleanup((
            libc::EIO,
            "the supervisor ended without reporting".to_owned(),
        ))),
    }
}

/// Creates `<dir>/<id>`, mode 0700: a malformed id is EINVAL, one that
/// exists EEXIST.
fn make_command_dir(dir: &Path, id: &str) -> Result<PathBuf, Failure> {
    use std::os::unix::fs::DirBuilderExt;
    if !valid_durable_id(id) {
        return Err((libc::EINVAL, format!("malformed durable id {id:?}")));
    }
    let path = dir.join(id);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .map_err(|err| {
            (
                err.raw_os_error().unwrap_or(libc::EIO),
                format!("create {}: {err}", path.display()),
            )
        })?;
    Ok(path)
}

/// The forked child becomes the supervisor: a session of its own (no
/// terminal or caller owns it; it opens no terminal, so it never acquires
/// one), stdio on `/dev/null`; once `durable-start` has read its report
/// and exited, it is nobody's child but init's (or the nearest
/// subreaper's). One fork, not the classic two: the second cost a fork,
/// an exit and a wait on every start.
fn detach(
    request: &DurableStartRequest,
    prepared: &Prepared,
    cmd_dir: &Path,
    id: &str,
    report: OwnedFd,
) -> ! {
    let fail = |report: &OwnedFd, message: String| -> ! {
        let _ = std::fs::remove_dir_all(cmd_dir);
        let _ = sys::write_all_fd(report, format!("error {message}").as_bytes());
        sys::exit_now(1)
    };
    if let Err(err) = rustix::process::setsid() {
        fail(&report, format!("{} setsid: {err}", err.raw_os_error()));
    }
    let umask = rustix::process::umask(Mode::from_raw_mode(0o077));
    let null = match rustix::fs::open(c"/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()) {
        Ok(null) => null,
        Err(err) => fail(&report, format!("{} /dev/null: {err}", err.raw_os_error())),
    };
    let stdio = rustix::stdio::dup2_stdin(&null)
        .and_then(|()| rustix::stdio::dup2_stdout(&null))
        .and_then(|()| rustix::stdio::dup2_stderr(&null));
    if let Err(err) = stdio {
        fail(&report, format!("{} stdio: {err}", err.raw_os_error()));
    }
    drop(null);
    supervise::main(request, prepared, cmd_dir, id, umask, report)
}

/// The supervisor's line, without its newline (`None`: it sent nothing).
fn read_report(fd: &OwnedFd) -> Option<String> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    while bytes.len() < MAX_REPORT {
        match sys::read_fd(fd.as_fd(), &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let line = text.trim_end_matches('\n');
    (!line.is_empty()).then(|| line.to_owned())
}

/// `text` on one line (newlines become spaces): the last field of a
/// control line.
pub fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}
