//! A pseudo-terminal harness: runs a program as the session leader of a
//! fresh terminal we own, types into it and reads its screen bytes.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

pub struct PtySession {
    master: std::fs::File,
    child: Child,
    output: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl PtySession {
    /// Starts `command` on a new terminal of `cols`×`rows`, as the leader
    /// of a new session whose controlling terminal it is.
    pub fn spawn(mut command: Command, cols: u16, rows: u16) -> PtySession {
        let master =
            openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let name = name.to_str().expect("pts name is UTF-8").to_owned();
        set_size(&master, cols, rows);
        let slave: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&name)
            .expect("open pts")
            .into();
        command
            .stdin(Stdio::from(slave.try_clone().expect("dup pts")))
            .stdout(Stdio::from(slave.try_clone().expect("dup pts")))
            .stderr(Stdio::from(slave));
        // SAFETY: between fork and exec the closure only makes two system
        // calls (setsid, ioctl), both async-signal-safe, and allocates
        // nothing.
        unsafe {
            command.pre_exec(|| {
                rustix::process::setsid()?;
                rustix::process::ioctl_tiocsctty(std::io::stdin())?;
                Ok(())
            });
        }
        let child = command.spawn().expect("spawn on pty");
        let master = std::fs::File::from(master);
        let output = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let mut master = master.try_clone().expect("clone master");
            let output = output.clone();
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                // EIO once every slave fd is closed: the session ended.
                while let Ok(read) = master.read(&mut buffer) {
                    if read == 0 {
                        break;
                    }
                    output
                        .lock()
                        .expect("output")
                        .extend_from_slice(&buffer[..read]);
                }
            })
        };
        PtySession {
            master,
            child,
            output,
            reader: Some(reader),
        }
    }

    /// Types `bytes`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("write to pty");
        self.master.flush().expect("flush pty");
    }

    /// Everything read so far, lossily decoded.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().expect("output")).into_owned()
    }

    /// Waits until the output (after byte `from`) contains `needle`;
    /// returns the offset just past it. Panics with the screen on timeout.
    pub fn expect_from(&self, from: usize, needle: &str, limit: Duration) -> usize {
        self.try_expect_from(from, needle, limit)
            .unwrap_or_else(|| {
                panic!(
                    "timed out waiting for {needle:?}; screen:\n{}",
                    self.screen()
                )
            })
    }

    /// Like [`PtySession::expect_from`], but `None` on timeout.
    pub fn try_expect_from(&self, from: usize, needle: &str, limit: Duration) -> Option<usize> {
        let deadline = Instant::now() + limit;
        let needle = needle.as_bytes();
        loop {
            {
                let output = self.output.lock().expect("output");
                let tail = &output[from.min(output.len())..];
                if let Some(at) = tail.windows(needle.len()).position(|w| w == needle) {
                    return Some(from + at + needle.len());
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Bytes read so far.
    pub fn len(&self) -> usize {
        self.output.lock().expect("output").len()
    }

    /// Resizes the terminal (the kernel sends SIGWINCH to its foreground
    /// process group).
    pub fn resize(&self, cols: u16, rows: u16) {
        set_size(&self.master, cols, rows);
    }

    /// The program's pid (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the program to exit; its exit code.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("program did not exit; screen:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PtySession {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        drop(self.reader.take());
    }
}

fn set_size(fd: impl AsFd, cols: u16, rows: u16) {
    tcsetwinsize(
        fd,
        Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )
    .expect("set terminal size");
}
