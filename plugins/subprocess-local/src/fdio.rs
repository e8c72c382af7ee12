//! Non-blocking descriptors on the tokio reactor: pipes to children and
//! the PTY master.
//!
//! Everything here registers with the reactor of the runtime it is called
//! on (the plugin's own runtime); the resulting futures and streams may be
//! polled from any task as long as that runtime is running.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::task::{Context, Poll, ready};

use rustix::pipe::PipeFlags;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// The read size of every output path: 64 KiB matches the default Linux
/// pipe capacity, so one read usually drains the pipe.
pub const CHUNK: usize = 64 * 1024;

/// A pipe whose ends are both close-on-exec; the parent's end is later made
/// non-blocking, the child's end stays blocking (children expect that).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    Ok((above_stdio(read)?, above_stdio(write)?))
}

/// The capacity an output pipe grows to once its stream proves bulky. A
/// child writing in small pieces (coreutils write 8 KiB at a time) then
/// rarely blocks on a reader that is busy with the previous chunk, and each
/// wake-up of the reader finds up to [`CHUNK`] bytes waiting: fewer context
/// switches and fewer, fuller reads. 1 MiB is the default
/// `/proc/sys/fs/pipe-max-size`; the kernel allocates pages only as they
/// fill.
pub const BULK_PIPE_CAPACITY: usize = 1 << 20;

/// How many bytes a stream carries before its pipe is grown: short
/// commands never pay for the resize (a kernel allocation).
pub const GROW_AFTER: u64 = 4 * CHUNK as u64;

/// Grows one output pipe to [`BULK_PIPE_CAPACITY`] once [`GROW_AFTER`]
/// bytes went through it, best effort (a lowered `pipe-max-size` or an
/// exhausted per-user pipe budget leaves the current capacity, which is
/// only slower).
#[derive(Debug, Default)]
pub struct Growth {
    seen: u64,
    done: bool,
}

impl Growth {
    /// Accounts for `n` bytes just read from `fd`.
    pub fn note(&mut self, fd: BorrowedFd<'_>, n: usize) {
        if self.done {
            return;
        }
        self.seen += n as u64;
        if self.seen >= GROW_AFTER {
            let _ = rustix::pipe::fcntl_setpipe_size(fd, BULK_PIPE_CAPACITY);
            self.done = true;
        }
    }
}

/// Moves `fd` to a number above 2 if it is 0, 1 or 2, so that a later
/// `dup2(fd, 0..=2)` in a child can never be a no-op that leaves the
/// close-on-exec flag set. Only happens when the host closed its stdio.
pub fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
}

/// A non-blocking descriptor registered with the reactor.
#[derive(Debug)]
pub struct NonBlocking {
    fd: AsyncFd<OwnedFd>,
}

impl NonBlocking {
    /// Makes `fd` non-blocking and registers it for `interest`. Must run
    /// inside a tokio runtime.
    pub fn new(fd: OwnedFd, interest: Interest) -> io::Result<NonBlocking> {
        rustix::io::ioctl_fionbio(&fd, true)?;
        // SAFETY: an `OwnedFd` stays open and keeps its number until the
        // `AsyncFd` drops it, and nothing here hands out `&mut` access that
        // could swap it.
        let fd = unsafe { AsyncFd::register_with_interest(fd, interest) }
            .map_err(|err| err.into_parts().1)?;
        Ok(NonBlocking { fd })
    }

    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }

    /// Waits for readability and runs `op`; `Ok(None)` means "not yet"
    /// (readiness is cleared and the wait resumes). Cancel-safe as long as
    /// `op` is.
    pub async fn when_readable<R>(
        &self,
        mut op: impl FnMut(BorrowedFd<'_>) -> io::Result<Option<R>>,
    ) -> io::Result<R> {
        loop {
            let mut guard = self.fd.readable().await?;
            match op(self.fd.get_ref().as_fd()) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => guard.clear_ready(),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// Reads at most `buf.len()` bytes, waiting for readiness; `Ok(0)` is
    /// end of file. Cancel-safe: dropping the future loses no data.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| retry_eintr(|| rustix::io::read(fd.get_ref(), &mut *buf))) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// One read without waiting for readiness: `WouldBlock` when the pipe
    /// is empty but still open.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::io::read(self.fd.get_ref(), buf)?)
    }

    /// Polls a read into the spare capacity of `buf` (which must have
    /// some), extending its length; `Ready(Ok(0))` is end of file.
    pub fn poll_read_spare(
        &self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            let result = guard.try_io(|fd| {
                retry_eintr(|| {
                    let spare: &mut [MaybeUninit<u8>] = buf.spare_capacity_mut();
                    let (filled, _) = rustix::io::read(fd.get_ref(), spare)?;
                    Ok(filled.len())
                })
            });
            match result {
                Ok(Ok(n)) => {
                    // SAFETY: `read` initialised the first `n` spare bytes.
                    unsafe { buf.set_len(buf.len() + n) };
                    return Poll::Ready(Ok(n));
                }
                Ok(Err(err)) => return Poll::Ready(Err(err)),
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes all of `data`, waiting for readiness as needed. Dropping the
    /// future may leave a prefix written.
    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|fd| retry_eintr(|| rustix::io::write(fd.get_ref(), data))) {
                Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }
}

fn retry_eintr<T>(mut op: impl FnMut() -> rustix::io::Result<T>) -> io::Result<T> {
    loop {
        match op() {
            Err(rustix::io::Errno::INTR) => continue,
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Writes all of `data` to a descriptor the host owns (its stdout or
/// stderr), blocking the calling thread; run it on a blocking thread. A
/// descriptor someone made non-blocking is waited on with `poll`.
pub fn write_all_blocking(fd: BorrowedFd<'_>, mut data: &[u8]) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags};
    while !data.is_empty() {
        match rustix::io::write(fd, data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
                match rustix::event::poll(&mut fds, None) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(err) => return Err(err.into()),
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn pipes_grow_only_once_a_stream_is_bulky() {
        let (read, _write) = pipe().expect("pipe");
        let before = rustix::pipe::fcntl_getpipe_size(&read).expect("size");
        let mut growth = Growth::default();
        growth.note(read.as_fd(), CHUNK);
        growth.note(read.as_fd(), CHUNK);
        assert_eq!(
            rustix::pipe::fcntl_getpipe_size(&read).expect("size"),
            before,
            "short output keeps the default"
        );
        growth.note(read.as_fd(), 2 * CHUNK);
        assert_eq!(
            rustix::pipe::fcntl_getpipe_size(&read).expect("size"),
            BULK_PIPE_CAPACITY
        );
    }
}
