//! The hidden `e2b-local __sandbox-init` program: the process tree that runs one sandbox world.
//!
//! The server starts it with `unshare(`[`super::NAMESPACES`]`)` (mount, PID, network, UTS and
//! IPC namespaces) already applied, so this process (the *keeper*) stays in the host PID namespace while its first child
//! becomes PID 1 of the sandbox's. The keeper reads the [`InitConfig`] from stdin and forks:
//!
//! - **PID 1** builds the world ([`mounts::build_and_enter`]), binds envd's Unix socket (on the
//!   host path, before `pivot_root`), brings `lo` up, names its host, installs the seccomp filter
//!   ([`seccomp`]) and cuts its capabilities down ([`confine`]), forks envd, then only reaps: orphans re-parent to it, and
//!   when envd exits it exits too — which makes the kernel kill everything left in the namespace.
//! - **envd** (PID 2) starts `e2b_local_envd::Envd` on its own tokio runtime (its start logged to
//!   the sandbox log), writes `ready` on stdout, then serves on the socket PID 1 bound.
//! - The **keeper** waits for PID 1 and exits with its status.
//!
//! PID 1 leads a session of its own, so no sandbox process shares the server's process group.
//! Every level has `PR_SET_PDEATHSIG = SIGKILL`, so if the server dies the whole world dies.
//! Runs before any thread exists (forking is only sound single-threaded); never returns.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixListener;

use super::layout::InitConfig;
use super::{confine, host_name, mounts, seccomp};

/// Line envd's process prints on stdout once it accepts connections.
pub const READY_LINE: &str = "ready";

/// Entry point of `e2b-local __sandbox-init`; returns the process exit code.
pub fn run() -> i32 {
    let config = match read_config() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("sandbox init: {err}");
            return 1;
        }
    };
    // SAFETY: single-threaded here (called first thing from main).
    match unsafe { libc::fork() } {
        -1 => {
            eprintln!(
                "sandbox init: fork PID 1: {}",
                std::io::Error::last_os_error()
            );
            1
        }
        0 => pid1(&config),
        child => {
            // Only PID 1 and envd may hold the ready pipe, so the server sees EOF if they die.
            redirect_stdout_to_null();
            wait_for(child)
        }
    }
}

fn read_config() -> Result<InitConfig, String> {
    let mut raw = Vec::new();
    std::io::stdin()
        .read_to_end(&mut raw)
        .map_err(|e| format!("read config from stdin: {e}"))?;
    serde_json::from_slice(&raw).map_err(|e| format!("parse config from stdin: {e}"))
}

/// PID 1 of the sandbox namespace. Never returns.
fn pid1(config: &InitConfig) -> ! {
    die_with_parent();
    // A session of its own: every sandbox process descends from PID 1, and envd starts pipe
    // commands in its own process group (as real envd does). Without this they would share the
    // server's group, and a root command's `kill -TERM 0` would stop the whole server.
    // SAFETY: setsid(2) has no memory effects; it fails only for a group leader, which a
    // freshly forked child is not.
    if unsafe { libc::setsid() } == -1 {
        eprintln!(
            "sandbox init {}: setsid: {}",
            config.sandbox_id,
            std::io::Error::last_os_error()
        );
        exit(1);
    }
    // If the keeper died before PDEATHSIG was armed, PID 1 still sits in the world's cgroup,
    // which the server kills when it notices the keeper's exit. (getppid() cannot tell: the
    // parent is outside this PID namespace, so it reads 0 either way.)
    let (listener, log) = match setup(config) {
        Ok(opened) => opened,
        Err(err) => {
            eprintln!("sandbox init {}: {err}", config.sandbox_id);
            exit(1);
        }
    };
    // SAFETY: still single-threaded.
    let envd = match unsafe { libc::fork() } {
        -1 => {
            eprintln!(
                "sandbox init {}: fork envd: {}",
                config.sandbox_id,
                std::io::Error::last_os_error()
            );
            exit(1);
        }
        0 => {
            die_with_parent();
            exit(run_envd(config, listener, log))
        }
        pid => pid,
    };
    drop((listener, log));
    redirect_stdout_to_null();
    reap_until(envd)
}

/// Binds envd's socket and opens the sandbox log (both on host paths, before `pivot_root`),
/// then builds the world and enters it.
fn setup(config: &InitConfig) -> std::io::Result<(UnixListener, std::fs::File)> {
    // SAFETY: umask(2) cannot fail.
    unsafe { libc::umask(0o022) };
    let socket = config.dirs().socket();
    let _ = std::fs::remove_file(&socket);
    // Bound on the host path before pivot_root: the server connects here, sandbox processes
    // cannot reach it (the state dir is hidden inside).
    let listener = UnixListener::bind(&socket).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("bind envd socket {}: {e}", socket.display()),
        )
    })?;
    let log_path = config.dirs().log();
    let log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("open {}: {e}", log_path.display())))?;
    mounts::build_and_enter(config)?;
    confine::loopback_up()?;
    host_name::set(&config.sandbox_id)?;
    // Before the capabilities go: installing a filter without no_new_privs needs SYS_ADMIN.
    seccomp::install()?;
    confine::drop_capabilities()?;
    Ok((listener, log))
}

fn run_envd(config: &InitConfig, listener: UnixListener, log: std::fs::File) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("envd")
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("sandbox envd {}: build runtime: {err}", config.sandbox_id);
            return 1;
        }
    };
    let envd_config = e2b_local_envd::EnvdConfig {
        sandbox_id: config.sandbox_id.clone(),
        template_id: config.template_id.clone(),
        env_vars: config.env_vars.clone(),
        access_token: config.access_token.clone(),
        default_user: config.default_user.clone(),
        default_workdir: config.default_workdir.clone(),
    };
    let result = runtime.block_on(async move {
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("set socket non-blocking: {e}"))?;
        let listener = tokio::net::UnixListener::from_std(listener)
            .map_err(|e| format!("register socket: {e}"))?;
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| format!("install SIGTERM handler: {e}"))?;
        // Started (its start logged) before ready is reported: a client that sees the world
        // ready sees "envd started" in the sandbox log.
        let envd = e2b_local_envd::Envd::new(envd_config)
            .file_access(config.envd_file_access)
            .log_to(log)
            .start(e2b_local_envd::EnvdListener::Unix(listener))
            .map_err(|e| format!("start: {e}"))?;
        {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{READY_LINE}")
                .and_then(|()| stdout.flush())
                .map_err(|e| format!("report ready: {e}"))?;
        }
        redirect_stdout_to_null();
        let shutdown = async move {
            terminate.recv().await;
        };
        envd.serve(shutdown)
            .await
            .map_err(|e| format!("serve: {e}"))
    });
    match result {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("sandbox envd {}: {err}", config.sandbox_id);
            1
        }
    }
}

/// Reaps every child (orphans included) until `main` exits, then exits with its status.
fn reap_until(main: libc::pid_t) -> ! {
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) with a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == main {
            exit(exit_code(status));
        }
        if pid == -1 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            exit(1);
        }
    }
}

fn wait_for(child: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) with a valid status pointer.
        let pid = unsafe { libc::waitpid(child, &mut status, 0) };
        if pid == child {
            return exit_code(status);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 1;
        }
    }
}

fn exit_code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number; no pointers.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
}

fn redirect_stdout_to_null() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // SAFETY: dup2 onto fd 1 with a valid open descriptor.
        unsafe { libc::dup2(null.as_raw_fd(), libc::STDOUT_FILENO) };
    }
}

fn exit(code: i32) -> ! {
    std::process::exit(code)
}
