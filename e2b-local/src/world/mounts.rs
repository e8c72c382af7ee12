//! The sandbox's filesystem, built inside its fresh mount namespace by the init (single-threaded,
//! before envd starts): a copy-on-write overlay of the host root, its own `/proc`, a minimal
//! `/dev` with a private devpts, fresh `/tmp` and `/home/user`, every e2b-local state dir hidden,
//! then `pivot_root` so nothing of the host stays reachable except through the overlay.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::layout::{InitConfig, SandboxDirs, UPPER, WORK};
use super::{boot_id, host_name, users};

/// Device nodes every sandbox gets: name, major, minor.
const DEVICES: [(&str, u32, u32); 6] = [
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];

/// Kernel interfaces made read-only inside, as the OCI runtimes do: through them root writes
/// settings of the whole machine (`/proc/sys`: `kernel/core_pattern` and `kernel/modprobe` name
/// programs the host kernel runs as root, `vm/drop_caches`, `net/ipv6/…/disable_ipv6`),
/// triggers SysRq actions or reaches devices. Paths under `/proc` and `/sys`.
const READ_ONLY: [&str; 5] = [
    "proc/sys",
    "proc/sysrq-trigger",
    "proc/irq",
    "proc/bus",
    "proc/fs",
];

/// Kernel interfaces masked inside (an empty read-only tmpfs over a dir, `/dev/null` over a
/// file), as the OCI runtimes do: kernel memory, the keyring list, timers and scheduler state of
/// the whole machine, firmware tables and power controls.
const MASKED: [&str; 11] = [
    "proc/kcore",
    "proc/keys",
    "proc/timer_list",
    "proc/timer_stats",
    "proc/latency_stats",
    "proc/sched_debug",
    "proc/acpi",
    "proc/asound",
    "proc/scsi",
    "sys/firmware",
    "sys/devices/virtual/powercap",
];

/// Builds the whole world under `dirs.root()` and pivots into it. Must run as root, as PID 1 of
/// a fresh PID namespace, in a fresh mount namespace.
pub fn build_and_enter(config: &InitConfig) -> io::Result<()> {
    let dirs = config.dirs();
    // Nothing mounted from here on may propagate back to the host.
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let root = dirs.root();
    // The layers are named relative to the sandbox dir: overlayfs shows its options as given in
    // /proc/self/mountinfo, and the upper layer's host path is no business of the sandbox's.
    std::env::set_current_dir(&dirs.dir)
        .map_err(|e| io::Error::new(e.kind(), format!("chdir {}: {e}", dirs.dir.display())))?;
    let overlay = format!("lowerdir=/,upperdir={UPPER},workdir={WORK}");
    mount(Some("overlay"), &root, Some("overlay"), 0, Some(&overlay))?;
    hide(config, &root)?;
    mount_proc_and_sys(&root)?;
    mount_dev(&root)?;
    protect_kernel_files(&root)?;
    show_boot_id(&dirs, &root)?;
    mount_private_dirs(&dirs, &root)?;
    mount_volumes(config, &root)?;
    pivot(&root)?;
    // The world's own /etc, written only now: its root may have replaced any of these files or
    // dirs by a symlink (kept by a snapshot, a template or a files-only pause), which before
    // pivot_root would resolve against the host's root — and this process is the host's root.
    let world = Path::new("/");
    users::install(world)?;
    offer_python(world)?;
    host_name::write_files(world, &config.sandbox_id)
}

/// E2B's base template answers to `python` as well as `python3` (the SDKs' tests run
/// `python -c …`); a host with only `python3` (Debian's default) gets `usr/bin/python ->
/// python3` in the world's own layer, unless the world already has a `python` there, even a
/// dangling one (a template's or the user's choice).
fn offer_python(world: &Path) -> io::Result<()> {
    let bin = world.join("usr/bin");
    let python = bin.join("python");
    if std::fs::symlink_metadata(&python).is_ok() || !bin.join("python3").is_file() {
        return Ok(());
    }
    symlink("python3", &python)
}

/// Covers each host dir the world must not see. One the world shows only through a symlink of
/// its own is not the host's dir inside the world, and is left alone.
fn hide(config: &InitConfig, root: &Path) -> io::Result<()> {
    for host_path in &config.hide {
        if let Some(target) = real_dir(root, host_path, false)? {
            mount(
                Some("tmpfs"),
                &target,
                Some("tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                Some("size=4k,mode=0755"),
            )?;
        }
    }
    Ok(())
}

fn mount_proc_and_sys(root: &Path) -> io::Result<()> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let proc = made_dir(root, Path::new("/proc"))?;
    mount(Some("proc"), &proc, Some("proc"), flags, None)?;
    // A fresh read-only sysfs (it shows no cgroup mounts, so the world cannot thaw itself).
    mount(
        Some("sysfs"),
        &made_dir(root, Path::new("/sys"))?,
        Some("sysfs"),
        flags | libc::MS_RDONLY,
        None,
    )
}

/// Applies [`READ_ONLY`] and [`MASKED`] to the world's fresh `/proc` and `/sys` (what this
/// kernel lacks is skipped). Root inside cannot undo either: it has no `SYS_ADMIN` and the
/// seccomp filter refuses the mount family.
fn protect_kernel_files(root: &Path) -> io::Result<()> {
    let exists = |path: &Path| std::fs::symlink_metadata(path).is_ok();
    for rel in READ_ONLY {
        let path = root.join(rel);
        if exists(&path) {
            bind_read_only(&path, &path)?;
        }
    }
    let null = root.join("dev/null");
    for rel in MASKED {
        let path = root.join(rel);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => mount(
                Some("tmpfs"),
                &path,
                Some("tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                Some("size=4k,mode=0555"),
            )?,
            Ok(_) => bind(&null, &path)?,
            Err(_) => {}
        }
    }
    Ok(())
}

/// A boot id of this boot's own over the host's (after `/proc/sys` became read-only, whose bind
/// would otherwise cover it), itself read-only.
fn show_boot_id(dirs: &SandboxDirs, root: &Path) -> io::Result<()> {
    let target = root.join("proc/sys/kernel/random/boot_id");
    if std::fs::symlink_metadata(&target).is_err() {
        return Ok(());
    }
    let source = dirs.boot_id();
    boot_id::write_new(&source)?;
    bind_read_only(&source, &target)
}

/// Binds `source` on `target`, then makes that bind read-only (and nosuid, nodev, noexec): a bind
/// takes its flags only from a remount.
fn bind_read_only(source: &Path, target: &Path) -> io::Result<()> {
    bind(source, target)?;
    mount(
        None,
        target,
        None,
        libc::MS_REMOUNT
            | libc::MS_BIND
            | libc::MS_RDONLY
            | libc::MS_NOSUID
            | libc::MS_NODEV
            | libc::MS_NOEXEC,
        None,
    )
}

fn mount_dev(root: &Path) -> io::Result<()> {
    let dev = made_dir(root, Path::new("/dev"))?;
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("mode=0755,size=65536k"),
    )?;
    for (name, major, minor) in DEVICES {
        let path = dev.join(name);
        let c = cstring(&path)?;
        // SAFETY: mknod(2) with a valid NUL-terminated path.
        if unsafe {
            libc::mknod(
                c.as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(major, minor),
            )
        } != 0
        {
            return Err(os_error(format!("mknod {}", path.display())));
        }
        chmod(&path, 0o666)?;
    }
    let pts = dev.join("pts");
    mkdir(&pts, 0o755)?;
    let tty_gid = group_id(root, "tty");
    let mut options = String::from("newinstance,ptmxmode=0666,mode=0620");
    if let Some(gid) = tty_gid {
        options.push_str(&format!(",gid={gid}"));
    }
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(&options),
    )?;
    symlink("pts/ptmx", &dev.join("ptmx"))?;
    let shm = dev.join("shm");
    mkdir(&shm, 0o1777)?;
    mount(
        Some("tmpfs"),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=1777"),
    )?;
    symlink("/proc/self/fd", &dev.join("fd"))?;
    for (i, name) in ["stdin", "stdout", "stderr"].iter().enumerate() {
        symlink(&format!("/proc/self/fd/{i}"), &dev.join(name))?;
    }
    Ok(())
}

/// `/tmp`, `/home` (holding only `user`) and `/root` are bind mounts of fresh dirs the server
/// prepared in the sandbox dir, so they start fresh whatever the host has there — the host's
/// other users' homes and root's keys, history and credentials stay out — and live on a real
/// disk.
fn mount_private_dirs(dirs: &SandboxDirs, root: &Path) -> io::Result<()> {
    for (source, target) in [
        (dirs.tmp(), "/tmp"),
        (dirs.homes(), "/home"),
        (dirs.root_home(), "/root"),
    ] {
        bind(&source, &made_dir(root, Path::new(target))?)?;
    }
    Ok(())
}

/// Binds each volume at its path, creating the missing dirs of that path (root's, 0755).
fn mount_volumes(config: &InitConfig, root: &Path) -> io::Result<()> {
    for volume in &config.volumes {
        let at = made_dir(root, &volume.target).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("mount a volume at {}: {e}", volume.target.display()),
            )
        })?;
        bind(&volume.source, &at)?;
        // What one sandbox leaves in a volume cannot be a device or a setuid program to the next.
        mount(
            None,
            &at,
            None,
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | libc::MS_NODEV,
            None,
        )?;
    }
    Ok(())
}

/// [`real_dir`] creating what is missing: the world's dir `path` under `root`, or why it cannot be.
fn made_dir(root: &Path, path: &Path) -> io::Result<PathBuf> {
    real_dir(root, path, true).map(|dir| dir.expect("real_dir returns a dir it may create"))
}

/// The world's dir `path` (absolute, as seen inside) under `root`, every component of it a
/// directory of the world's, none followed as a symlink: before `pivot_root` the world's tree is
/// the host root's overlay, and a symlink its root left there would resolve against the host.
/// Missing components are created (root's, 0755) when `create`, else `None` is returned, as it
/// is for a component that is a symlink or not a directory when not `create` (which is an
/// error when `create`).
fn real_dir(root: &Path, path: &Path, create: bool) -> io::Result<Option<PathBuf>> {
    let mut at = root.to_path_buf();
    for part in path.components().skip(1) {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) if !create => return Ok(None),
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is not a directory (symlinks are not followed)",
                        Path::new("/")
                            .join(at.strip_prefix(root).unwrap_or(&at))
                            .display()
                    ),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => mkdir(&at, 0o755)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(io::Error::new(e.kind(), format!("{}: {e}", at.display())));
            }
        }
    }
    Ok(Some(at))
}

fn pivot(root: &Path) -> io::Result<()> {
    std::env::set_current_dir(root)
        .map_err(|e| io::Error::new(e.kind(), format!("chdir {}: {e}", root.display())))?;
    let dot = CString::new(".").expect("no NUL");
    // SAFETY: pivot_root(".", ".") stacks the old root under the new one; both args are valid.
    if unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) } != 0 {
        return Err(os_error(format!("pivot_root into {}", root.display())));
    }
    // SAFETY: detaching the old root now stacked on "."; valid NUL-terminated path.
    if unsafe { libc::umount2(dot.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(os_error("detach the host root".to_owned()));
    }
    std::env::set_current_dir("/").map_err(|e| io::Error::new(e.kind(), format!("chdir /: {e}")))
}

/// The gid of `name` in the world's `/etc/group`, if present.
fn group_id(root: &Path, name: &str) -> Option<u32> {
    let text = std::fs::read_to_string(root.join("etc/group")).ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next()? == name)
            .then(|| fields.nth(1)?.parse().ok())
            .flatten()
    })
}

fn bind(source: &Path, target: &Path) -> io::Result<()> {
    mount(
        Some(
            source
                .to_str()
                .ok_or_else(|| io::Error::other(format!("non-UTF-8 path {}", source.display())))?,
        ),
        target,
        None,
        libc::MS_BIND,
        None,
    )
}

fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let describe = || {
        format!(
            "mount {} on {}",
            fstype.or(source).unwrap_or("(remount)"),
            target.display()
        )
    };
    let source_c = source
        .map(|s| CString::new(s).map_err(|_| io::Error::other(describe())))
        .transpose()?;
    let fstype_c = fstype
        .map(|s| CString::new(s).map_err(|_| io::Error::other(describe())))
        .transpose()?;
    let data_c = data
        .map(|s| CString::new(s).map_err(|_| io::Error::other(describe())))
        .transpose()?;
    let target_c = cstring(target)?;
    // SAFETY: every pointer is either null or a valid NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            source_c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            target_c.as_ptr(),
            fstype_c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            flags,
            data_c
                .as_ref()
                .map_or(std::ptr::null(), |c| c.as_ptr().cast()),
        )
    };
    if rc != 0 {
        return Err(os_error(describe()));
    }
    Ok(())
}

fn mkdir(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::create_dir(path)
        .map_err(|e| io::Error::new(e.kind(), format!("mkdir {}: {e}", path.display())))?;
    chmod(path, mode)
}

fn chmod(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io::Error::new(e.kind(), format!("chmod {}: {e}", path.display())))
}

fn symlink(target: &str, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("symlink {} -> {target}: {e}", link.display()),
        )
    })
}

fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path {} contains NUL", path.display()),
        )
    })
}

fn os_error(context: String) -> io::Error {
    let err = io::Error::last_os_error();
    io::Error::new(err.kind(), format!("{context}: {err}"))
}
