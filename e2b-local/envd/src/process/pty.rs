//! Pseudo-terminals for PTY processes: opening a master/slave pair at a size, resizing, and
//! non-blocking reads and writes on the master from the tokio runtime.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};

/// A freshly opened terminal: the master stays with the daemon, the slave becomes the child's
/// stdin/stdout/stderr and controlling terminal.
pub(crate) struct PtyPair {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

fn winsize(cols: u32, rows: u32) -> Winsize {
    Winsize {
        ws_row: u16::try_from(rows).unwrap_or(u16::MAX),
        ws_col: u16::try_from(cols).unwrap_or(u16::MAX),
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Opens a pty pair through `/dev/ptmx` with the window set to `cols`×`rows`.
pub(crate) fn open(cols: u32, rows: u32) -> io::Result<PtyPair> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::termios::tcsetwinsize(&master, winsize(cols, rows))?;
    Ok(PtyPair { master, slave })
}

/// The daemon's side of a terminal, usable concurrently for reading output, writing input and
/// resizing.
pub(crate) struct PtyMaster {
    fd: AsyncFd<OwnedFd>,
}

impl PtyMaster {
    /// Registers `master` with the current tokio runtime (switching it to non-blocking mode).
    pub(crate) fn new(master: OwnedFd) -> io::Result<Self> {
        let flags = rustix::fs::fcntl_getfl(&master)?;
        rustix::fs::fcntl_setfl(&master, flags | OFlags::NONBLOCK)?;
        // SAFETY: `master` is an open descriptor owned by the `AsyncFd` for its whole life.
        let fd = unsafe { AsyncFd::register(master)? };
        Ok(Self { fd })
    }

    /// Writes all of `data` to the terminal (as typed input).
    pub(crate) async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|fd| rustix::io::write(fd.get_ref(), data).map_err(io::Error::from))
            {
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }

    /// Sets the window size; the kernel sends SIGWINCH to the terminal's foreground group.
    pub(crate) fn resize(&self, cols: u32, rows: u32) -> io::Result<()> {
        rustix::termios::tcsetwinsize(self.fd.get_ref().as_fd(), winsize(cols, rows))?;
        Ok(())
    }
}

/// Terminal output as an [`AsyncRead`]: reads return what the terminal produced and end (EOF)
/// once every slave descriptor is closed, which the kernel reports as EIO.
pub(crate) struct PtyReader(pub Arc<PtyMaster>);

impl AsyncRead for PtyReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| {
                rustix::io::read(fd.get_ref(), &mut *unfilled).map_err(io::Error::from)
            }) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(err)) => return Poll::Ready(Err(err)),
                Err(_would_block) => continue,
            }
        }
    }
}
