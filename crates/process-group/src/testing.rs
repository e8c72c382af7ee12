//! A real process whose main thread ended while another thread runs — the
//! case the quiescence rule decides — for the crate's tests.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::table::{self, Stat};

/// Ignores SIGTERM, starts a (non-daemon) thread that keeps running, says
/// `ready`, and ends its main thread with `pthread_exit`.
const PROGRAM: &str = r#"
import ctypes, signal, sys, threading, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
def spin():
    while True:
        time.sleep(0.05)
threading.Thread(target=spin).start()
sys.stdout.write("ready\n")
sys.stdout.flush()
ctypes.CDLL(None).pthread_exit(None)
"#;

/// A child of this test process, leading its own process group, whose
/// leader thread is a zombie while another thread runs. Killed and reaped
/// on drop.
pub(crate) struct ZombieLeader {
    child: Child,
}

impl ZombieLeader {
    /// Starts `python3` with [`PROGRAM`] and waits until `/proc` shows the
    /// leader as a zombie. Panics (failing the test) if `python3` is not on
    /// `PATH` or the state never shows.
    pub(crate) fn spawn() -> ZombieLeader {
        let mut child = Command::new("python3")
            .args(["-c", PROGRAM])
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn python3 (the zombie-leader tests need it on PATH)");
        let mut ready = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut ready)
            .expect("read python3's ready line");
        assert_eq!(ready, "ready\n");
        let leader = ZombieLeader { child };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stat = leader.leader_stat();
            if stat.state == b'Z' {
                return leader;
            }
            assert!(
                Instant::now() < deadline,
                "the main thread of python3 never ended: {stat:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn pgid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The leader's row (it stays in `/proc` until this process reaps it).
    pub(crate) fn leader_stat(&self) -> Stat {
        table::stat_of(self.pgid())
            .expect("read the leader's stat")
            .expect("an unreaped child stays in /proc")
    }

    pub(crate) fn kill_group(&self) {
        crate::signal::signal_group(self.pgid(), libc::SIGKILL).expect("SIGKILL the group");
    }

    /// Waits until the leader is a zombie with no thread left.
    pub(crate) fn await_true_zombie(&self) -> Stat {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stat = self.leader_stat();
            if !stat.is_live() || Instant::now() >= deadline {
                return stat;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for ZombieLeader {
    fn drop(&mut self) {
        let _ = crate::signal::signal_group(self.pgid(), libc::SIGKILL);
        let _ = self.child.wait();
    }
}
