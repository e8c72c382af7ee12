//! `exec`: become the program of a terminal.
//!
//! envd started the helper on a new PTY, as the leader of a new session
//! with the terminal as its controlling terminal. The helper takes on the
//! sandbox user's identity, enters the working directory, finds the
//! program, and replaces itself with it — so the program keeps the pid,
//! the session and the terminal. Right before that it writes the request's
//! random boundary and [`BOUNDARY_STARTED`] (or [`BOUNDARY_FAILED`] with
//! the reason, then exits 127): everything after the boundary is the
//! program's own output.

use std::io::stdout;

use dsh_supervisor::wire::{self, BOUNDARY_FAILED, BOUNDARY_STARTED, ExecRequest, Stage};

use crate::launch::{Failure, Prepared};
use crate::sys;

/// Runs `request`; never returns.
pub fn main(request: &ExecRequest) -> ! {
    let prepared = match Prepared::new(&request.launch) {
        Ok(prepared) => prepared,
        Err(message) => fail(
            &request.boundary,
            Failure {
                stage: Stage::Request,
                errno: libc::EINVAL,
            },
            &message,
        ),
    };
    if let Err(failure) = prepared.become_user() {
        let detail = if failure.stage == Stage::Cwd {
            request.launch.cwd.as_str()
        } else {
            ""
        };
        fail(&request.boundary, failure, detail);
    }
    let program = match prepared.find() {
        Ok(program) => program,
        Err(failure) => fail(&request.boundary, failure, &request.launch.argv[0]),
    };
    sys::reset_signals();
    let mut marker = request.boundary.clone().into_bytes();
    marker.push(BOUNDARY_STARTED);
    if sys::write_all_fd(stdout(), &marker).is_err() {
        sys::exit_now(125);
    }
    let failure = prepared.exec(program);
    // The boundary is out: this is the program's output now, as a shell
    // would print it.
    let message = format!(
        "dsh-supervisor: cannot execute {}: {}\r\n",
        program.to_string_lossy(),
        std::io::Error::from_raw_os_error(failure.errno)
    );
    let _ = sys::write_all_fd(std::io::stderr(), message.as_bytes());
    sys::exit_now(126)
}

/// Writes the failure marker `<boundary>!<stage>:<errno>:<base64 detail>;`
/// and exits 127.
fn fail(boundary: &str, failure: Failure, detail: &str) -> ! {
    let marker = failure_marker(boundary, failure, detail);
    let _ = sys::write_all_fd(stdout(), marker.as_bytes());
    sys::exit_now(127)
}

pub fn failure_marker(boundary: &str, failure: Failure, detail: &str) -> String {
    format!(
        "{boundary}{}{}:{}:{};",
        BOUNDARY_FAILED as char,
        failure.stage as u8,
        failure.errno,
        wire::base64_encode(detail.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failure_marker_has_no_newline_and_base64_details() {
        let marker = failure_marker(
            "b0",
            Failure {
                stage: Stage::Cwd,
                errno: 2,
            },
            "/x y\n",
        );
        assert_eq!(marker, "b0!4:2:L3ggeQo=;");
    }
}
