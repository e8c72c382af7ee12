//! The program's results on standard output.
//!
//! dsh keeps SIGPIPE ignored (Rust's default), so a reader that went away
//! (`dsh fs ls | head -1`) shows up as a `BrokenPipe` write error instead of
//! killing dsh before the composition is disposed. Every write here turns
//! that error into [`Failure::closed_stdout`]: dsh then disposes, prints
//! nothing and exits 141 (128 + SIGPIPE), the status a shell reports for a
//! coreutils program whose reader closed the pipe.

use std::fmt;
use std::io::{self, Write};

use crate::failure::{EXIT_FAILURE, Failure};

/// Writes `args` and a newline to stdout.
pub fn line(args: fmt::Arguments<'_>) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(|err| failed("stdout", &err))
}

/// What a failed write to our stdout means for the exit: a closed pipe is
/// [`Failure::closed_stdout`], anything else a failure of `subject`.
pub fn failed(subject: &str, err: &io::Error) -> Failure {
    if err.kind() == io::ErrorKind::BrokenPipe {
        Failure::closed_stdout()
    } else {
        Failure::new(EXIT_FAILURE, format!("{subject}: write stdout: {err}"))
    }
}

/// `outln!(…)`: [`line()`] with `format!` arguments.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdout::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;
