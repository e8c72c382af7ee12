//! The seccomp filter every sandbox process runs under (docs/design.md §7, "Sandbox root is not
//! host root"): the system calls through which root inside could act on the shared kernel or the
//! host — module loading, kexec, reboot, the kernel keyring (host-wide for uid 0 outside a user
//! namespace), `bpf`, `perf_event_open`, the mount family, new namespaces (`unshare`, `setns`,
//! `clone` with a `CLONE_NEW*` flag, so no user namespace hands root's powers back), swap,
//! quotas, the clocks, the kernel log, `userfaultfd`, `io_uring`, file handles — are refused
//! with `EPERM`, as under Docker's default profile for a container without `SYS_ADMIN`.
//! `clone3` gets `ENOSYS` (its flags live in memory a filter cannot read; C libraries then fall
//! back to `clone`, which is checked), and so does any system call of another ABI (x32, i386):
//! the filter speaks this architecture's numbers only.
//!
//! Installed by the world's PID 1 after it built the world and before it drops its capabilities
//! (installing without `no_new_privs` needs `SYS_ADMIN`, and `no_new_privs` would break `sudo`),
//! so envd and everything it starts — `sudo` included — inherit it; no process can remove a
//! filter.

use std::io;

/// `BPF_LD | BPF_W | BPF_ABS`: load the 32-bit word at a fixed offset of `seccomp_data`.
const LOAD: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const JUMP_EQUAL: u16 = 0x15;
/// `BPF_JMP | BPF_JGE | BPF_K`.
const JUMP_AT_LEAST: u16 = 0x35;
/// `BPF_JMP | BPF_JSET | BPF_K`: jump if any bit of the constant is set.
const JUMP_ANY_BIT: u16 = 0x45;
/// `BPF_RET | BPF_K`.
const RETURN: u16 = 0x06;

/// `SECCOMP_RET_ALLOW`.
const ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_RET_ERRNO`; the errno goes in the low 16 bits.
const ERRNO: u32 = 0x0005_0000;

/// Offsets in `struct seccomp_data`: `nr` (u32), `arch` (u32), `instruction_pointer` (u64),
/// `args[6]` (u64 each).
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// The low 32 bits of `args[0]`, where every `CLONE_NEW*` flag lives.
#[cfg(target_endian = "little")]
const OFFSET_ARG0_LOW: u32 = 16;
#[cfg(target_endian = "big")]
const OFFSET_ARG0_LOW: u32 = 20;

/// `AUDIT_ARCH_*` of the architecture this binary runs as.
#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xc000_00b7;

/// x86-64's x32 ABI: its calls carry the native `arch` with this bit set in `nr`.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Every namespace a `clone` may not create.
const NEW_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP) as u32;

/// System calls refused with `EPERM`, on every architecture.
const DENIED: &[libc::c_long] = &[
    // Kernel code and the machine itself.
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_syslog,
    // The kernel keyring: uid 0's keyrings are the host root's.
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    // Kernel attack surface a container does not need.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_fanotify_init,
    libc::SYS_lookup_dcookie,
    // File handles reach files outside any root.
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
    // Mounts and namespaces.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    // Clocks.
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
];

/// x86-64's own calls of the same kinds (port I/O, and calls the kernel no longer has).
#[cfg(target_arch = "x86_64")]
const DENIED_HERE: &[libc::c_long] = &[
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_nfsservctl,
    libc::SYS_uselib,
    libc::SYS__sysctl,
];
#[cfg(target_arch = "aarch64")]
const DENIED_HERE: &[libc::c_long] = &[];

/// The filter as classic BPF: foreign ABIs first, then one comparison per denied call, then
/// `clone`'s flags.
fn program() -> Vec<libc::sock_filter> {
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let nr = |call: libc::c_long| u32::try_from(call).expect("system call numbers are small");
    let mut program = vec![
        op(LOAD, 0, 0, OFFSET_ARCH),
        op(JUMP_EQUAL, 1, 0, NATIVE_ARCH),
        op(RETURN, 0, 0, ERRNO | libc::ENOSYS as u32),
        op(LOAD, 0, 0, OFFSET_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    program.extend([
        op(JUMP_AT_LEAST, 0, 1, X32_SYSCALL_BIT),
        op(RETURN, 0, 0, ERRNO | libc::ENOSYS as u32),
    ]);
    let refused = [(nr(libc::SYS_clone3), libc::ENOSYS)].into_iter().chain(
        DENIED
            .iter()
            .chain(DENIED_HERE)
            .map(|&call| (nr(call), libc::EPERM)),
    );
    for (call, errno) in refused {
        program.extend([
            op(JUMP_EQUAL, 0, 1, call),
            op(RETURN, 0, 0, ERRNO | errno as u32),
        ]);
    }
    program.extend([
        // Not clone: allowed (skip the flag check).
        op(JUMP_EQUAL, 0, 3, nr(libc::SYS_clone)),
        op(LOAD, 0, 0, OFFSET_ARG0_LOW),
        op(JUMP_ANY_BIT, 0, 1, NEW_NAMESPACES),
        op(RETURN, 0, 0, ERRNO | libc::EPERM as u32),
        op(RETURN, 0, 0, ALLOW),
    ]);
    program
}

/// Installs the filter on the calling thread, for it and every process it starts. Needs
/// `CAP_SYS_ADMIN` (no `no_new_privs` is set, so setuid programs keep working); call it
/// single-threaded, before forking anything that must be covered.
pub fn install() -> io::Result<()> {
    install_program(&program())
}

/// Installs `program`; allocates only to describe a failure, so a forked child may call it.
fn install_program(program: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len()).expect("the filter is short"),
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog): the kernel copies the program,
    // which `fprog` points to and outlives the call.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(
            err.kind(),
            format!("install the sandbox's seccomp filter: {err}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `probe` in a forked child under the filter; returns the child's exit code. Each test
    /// is a process of its own under nextest, whose other thread only waits for this one, so
    /// the child may allocate.
    fn under_filter(probe: fn() -> i32) -> i32 {
        let program = program();
        // SAFETY: the child only installs the filter, makes system calls and _exits.
        match unsafe { libc::fork() } {
            -1 => panic!("fork: {}", io::Error::last_os_error()),
            0 => {
                let code = match install_program(&program) {
                    Ok(()) => probe(),
                    Err(_) => 100,
                };
                // SAFETY: _exit ends the forked child without running the parent's destructors.
                unsafe { libc::_exit(code) }
            }
            child => {
                let mut status = 0;
                // SAFETY: waitpid on our own child with a valid status pointer.
                assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
                assert!(libc::WIFEXITED(status), "the probe died: {status:#x}");
                libc::WEXITSTATUS(status)
            }
        }
    }

    fn errno() -> i32 {
        io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    #[test]
    fn the_program_fits_its_jumps() {
        let program = program();
        assert!(program.len() < 200, "{} instructions", program.len());
        assert_eq!(program.last().map(|op| op.k), Some(ALLOW));
    }

    #[test]
    fn denied_calls_fail_with_eperm_and_clone3_with_enosys() {
        // The tests run as root (as e2b-local does): install() needs SYS_ADMIN.
        let code = under_filter(|| {
            // SAFETY: raw system calls with harmless arguments; each is refused by the filter
            // before the kernel looks at them.
            unsafe {
                if libc::syscall(libc::SYS_keyctl, 0, -3, 0) != -1 || errno() != libc::EPERM {
                    return 1;
                }
                if libc::unshare(libc::CLONE_NEWUTS) != -1 || errno() != libc::EPERM {
                    return 2;
                }
                if libc::syscall(libc::SYS_bpf, 0, 0, 0) != -1 || errno() != libc::EPERM {
                    return 3;
                }
                if libc::syscall(libc::SYS_clone3, 0, 0) != -1 || errno() != libc::ENOSYS {
                    return 4;
                }
                let flags = libc::CLONE_NEWUSER | libc::SIGCHLD;
                if libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) != -1 || errno() != libc::EPERM
                {
                    return 5;
                }
                #[cfg(target_arch = "x86_64")]
                if libc::syscall(libc::SYS_getpid | X32_SYSCALL_BIT as libc::c_long) != -1
                    || errno() != libc::ENOSYS
                {
                    return 6;
                }
            }
            0
        });
        assert_eq!(code, 0, "probe {code} was not refused as expected");
    }

    #[test]
    fn ordinary_calls_and_plain_forks_still_work() {
        let code = under_filter(|| {
            // SAFETY: getpid and a plain fork whose child _exits at once.
            unsafe {
                if libc::getpid() <= 0 {
                    return 1;
                }
                match libc::fork() {
                    -1 => return 2,
                    0 => libc::_exit(7),
                    child => {
                        let mut status = 0;
                        if libc::waitpid(child, &mut status, 0) != child
                            || libc::WEXITSTATUS(status) != 7
                        {
                            return 3;
                        }
                    }
                }
            }
            // A thread: std (glibc) tries clone3 first and falls back to clone on ENOSYS.
            match std::thread::spawn(|| 5).join() {
                Ok(5) => 0,
                _ => 4,
            }
        });
        assert_eq!(code, 0, "probe {code} failed under the filter");
    }
}
