//! Pseudo-terminal pairs, through `rustix::pty` and `rustix::termios`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;

/// A new PTY master with its slave's path; the slave is opened only by
/// the child (so it becomes the child's controlling terminal).
#[derive(Debug)]
pub struct Pty {
    pub master: OwnedFd,
    pub slave_path: CString,
}

/// Opens a master (close-on-exec, never our controlling terminal), unlocks
/// its slave and sets the initial window size.
pub fn open(cols: u16, rows: u16) -> io::Result<Pty> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    let master = crate::fdio::above_stdio(master)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let slave_path = rustix::pty::ptsname(&master, Vec::new())?;
    resize(&master, cols, rows)?;
    Ok(Pty { master, slave_path })
}

/// Sets the window size; the kernel sends SIGWINCH to the foreground
/// process group when it changes.
pub fn resize(master: impl AsFd, cols: u16, rows: u16) -> io::Result<()> {
    rustix::termios::tcsetwinsize(
        master,
        Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )?;
    Ok(())
}
