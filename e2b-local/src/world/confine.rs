//! What keeps sandbox root from acting as host root (docs/design.md §7): each world has its own
//! network namespace (only `lo`, brought up here) and, once its filesystem is built, a capability
//! bounding set cut down to what a container's root needs for ordinary work (`sudo`, `chown`,
//! `kill`, binding low ports) — no `SYS_ADMIN` (mount, setns), `SYS_MODULE`, `SYS_TIME`,
//! `NET_ADMIN`, `MKNOD` (device nodes reaching host disks), `DAC_READ_SEARCH` (file handles that
//! escape a root), `SYS_RAWIO`, `SYS_BOOT`, `BPF`, …
//!
//! Runs in the world's PID 1, single-threaded, after `pivot_root` and before envd is forked, so
//! envd and everything it starts inherit the reduced sets; a setuid `sudo` inside regains at most
//! the bounding set.

use std::io;

/// Capabilities sandbox processes may hold: Docker's default set without `MKNOD` (no device
/// cgroup guards mknod here) and `SETFCAP`, plus `SYS_PTRACE`: root inside reads the exit code of
/// a `user` process from its zombie's `/proc/<pid>/stat` (dsh's helper does), which the kernel
/// shows only to a tracer; the PID namespace keeps every host process out of its reach. Numbers
/// from `linux/capability.h`.
pub const KEPT: [(u32, &str); 13] = [
    (0, "CHOWN"),
    (1, "DAC_OVERRIDE"),
    (3, "FOWNER"),
    (4, "FSETID"),
    (5, "KILL"),
    (6, "SETGID"),
    (7, "SETUID"),
    (8, "SETPCAP"),
    (10, "NET_BIND_SERVICE"),
    (13, "NET_RAW"),
    (18, "SYS_CHROOT"),
    (19, "SYS_PTRACE"),
    (29, "AUDIT_WRITE"),
];

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The kept set as the two words capset(2) takes.
fn kept_words() -> [u32; 2] {
    let mut words = [0u32; 2];
    for (cap, _) in KEPT {
        words[(cap / 32) as usize] |= 1 << (cap % 32);
    }
    words
}

/// Sets `lo` up in the world's (fresh) network namespace: 127.0.0.1 works inside, and reaches
/// nothing of the host's.
pub fn loopback_up() -> io::Result<()> {
    let fail = |what: &str| {
        let err = io::Error::last_os_error();
        io::Error::new(
            err.kind(),
            format!("bring up the sandbox's lo: {what}: {err}"),
        )
    };
    // SAFETY: socket(2) with constant arguments; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(fail("socket"));
    }
    // SAFETY: ifreq is plain old data; zeroed is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq we own; fd is a valid socket.
    let result = unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) != 0 {
            Err(fail("SIOCGIFFLAGS"))
        } else {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) != 0 {
                Err(fail("SIOCSIFFLAGS"))
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    result
}

/// Drops every capability not in [`KEPT`] from the bounding set, then from this process's
/// effective, permitted and inheritable sets (a fork, as envd is, keeps its parent's sets).
pub fn drop_capabilities() -> io::Result<()> {
    let last = last_capability()?;
    for cap in 0..=last {
        if KEPT.iter().any(|(kept, _)| *kept == cap) {
            continue;
        }
        // SAFETY: prctl(PR_CAPBSET_DROP) takes a capability number; no pointers.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap)) } != 0 {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                err.kind(),
                format!("drop capability {cap} from the sandbox's bounding set: {err}"),
            ));
        }
    }
    let words = kept_words();
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = words.map(|word| CapData {
        effective: word,
        permitted: word,
        inheritable: 0,
    });
    // SAFETY: capset(2) reads a version-3 header and two data words, both valid for the call.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(
            err.kind(),
            format!("reduce the sandbox init's capabilities: {err}"),
        ));
    }
    Ok(())
}

/// The highest capability number this kernel knows (`/proc/sys/kernel/cap_last_cap`).
fn last_capability() -> io::Result<u32> {
    let path = "/proc/sys/kernel/cap_last_cap";
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("read {path}: {e}")))?;
    text.trim().parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("read {path}: {text:?} is not a number: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_set_is_docker_default_without_mknod_and_setfcap_with_ptrace() {
        // Bits of CHOWN..SYS_PTRACE in word 0, AUDIT_WRITE (29) too; nothing in word 1.
        assert_eq!(kept_words(), [0b0010_0000_0000_1100_0010_0101_1111_1011, 0]);
        for forbidden in [21, 16, 25, 12, 27, 2, 17, 39] {
            assert!(
                !KEPT.iter().any(|(cap, _)| *cap == forbidden),
                "capability {forbidden} is kept"
            );
        }
    }
}
