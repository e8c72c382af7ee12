//! Becoming the requested program: the sandbox user's identity, the
//! working directory, the program found on the search path, the exact
//! environment. Everything that allocates is prepared before a fork, so
//! the steps after it only make system calls.

use std::ffi::{CString, c_char, c_int};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use dsh_supervisor::wire::{Identity, Launch, Stage};
use rustix::fs::{Access, Mode};
use rustix::io::Errno;
use rustix::process::{Pid, Signal};

use crate::sys;

/// Why a step failed: where, and the errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub stage: Stage,
    pub errno: c_int,
}

/// A program ready to be started.
pub struct Prepared {
    identity: Identity,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: CString,
    /// The paths tried for `argv[0]`, in order.
    candidates: Vec<CString>,
}

impl Prepared {
    /// Converts the request's strings (which the host validated: no NUL)
    /// and lists the candidates for `argv[0]`: itself when absolute, else
    /// `<dir>/<argv[0]>` for every absolute `dir` of `search`.
    pub fn new(launch: &Launch) -> Result<Prepared, String> {
        let Launch {
            identity,
            argv,
            env,
            cwd,
            search,
        } = launch;
        let c = |text: &str, what: &str| {
            CString::new(text).map_err(|_| format!("{what} contains a NUL byte"))
        };
        let program = argv.first().ok_or("argv is empty")?;
        let candidates = if program.starts_with('/') {
            vec![c(program, "argv[0]")?]
        } else {
            search
                .iter()
                .filter(|dir| dir.starts_with('/'))
                .map(|dir| c(&format!("{}/{program}", dir.trim_end_matches('/')), "PATH"))
                .collect::<Result<_, _>>()?
        };
        Ok(Prepared {
            identity: identity.clone(),
            argv: argv
                .iter()
                .map(|arg| c(arg, "argv"))
                .collect::<Result<_, _>>()?,
            env: env
                .iter()
                .map(|entry| c(entry, "env"))
                .collect::<Result<_, _>>()?,
            cwd: c(cwd, "cwd")?,
            candidates,
        })
    }

    /// Takes on the sandbox user's identity for good, then enters the
    /// working directory with its permissions. When the helper already is
    /// that user (its real uid and gid are the requested ones: the local
    /// provider runs it as the user itself, often not root) nothing is
    /// changed — a non-root process may not call `setgroups`.
    pub fn become_user(&self) -> Result<(), Failure> {
        let id = &self.identity;
        let same = rustix::process::getuid().as_raw() == id.uid
            && rustix::process::getgid().as_raw() == id.gid;
        if !same {
            sys::become_user(id.uid, id.gid, &id.groups).map_err(|err| Failure {
                stage: Stage::Identity,
                errno: err.raw_os_error().unwrap_or(0),
            })?;
        }
        rustix::process::chdir(self.cwd.as_c_str()).map_err(|err| Failure {
            stage: Stage::Cwd,
            errno: err.raw_os_error(),
        })
    }

    /// The first candidate that is an executable regular file for the
    /// current identity. An absolute program that is not one fails with
    /// its reason (`ENOENT`, `EISDIR`, `ENOEXEC` for another kind of file,
    /// `EACCES`); a bare name found nowhere fails with `ENOENT`.
    pub fn find(&self) -> Result<&CString, Failure> {
        let absolute = self.argv[0].as_bytes().first() == Some(&b'/');
        let fail = |errno| Failure {
            stage: Stage::Program,
            errno,
        };
        for candidate in &self.candidates {
            let path = std::path::Path::new(std::ffi::OsStr::from_bytes(candidate.as_bytes()));
            let meta = match std::fs::metadata(path) {
                Ok(meta) => meta,
                Err(err) if absolute => {
                    return Err(fail(err.raw_os_error().unwrap_or(libc::ENOENT)));
                }
                Err(_) => continue,
            };
            let kind = meta.file_type();
            // `access` checks with the real identity, which the caller has
            // already made the sandbox user's.
            let verdict = if kind.is_dir() {
                Err(libc::EISDIR)
            } else if !kind.is_file() {
                Err(libc::ENOEXEC)
            } else if rustix::fs::access(candidate.as_c_str(), Access::EXEC_OK).is_err() {
                Err(libc::EACCES)
            } else {
                Ok(())
            };
            match verdict {
                Ok(()) => return Ok(candidate),
                Err(errno) if absolute => return Err(fail(errno)),
                Err(_) => {}
            }
        }
        Err(fail(libc::ENOENT))
    }

    /// Executes `program` with the request's argv and environment; returns
    /// only on failure.
    pub fn exec(&self, program: &CString) -> Failure {
        let argv = null_terminated(&self.argv);
        let env = null_terminated(&self.env);
        // SAFETY: both arrays are NULL-terminated and point into strings
        // that outlive the call.
        let err = unsafe { sys::exec(program, &argv, &env) };
        Failure {
            stage: Stage::Exec,
            errno: err.raw_os_error().unwrap_or(0),
        }
    }
}

/// What a child waits for before it takes on the user's identity: its
/// parent's go-ahead (one byte on `go`; anything else and it exits 127
/// quietly, its parent having given up) and the umask it gets back.
pub struct Gate<'a> {
    pub go: &'a OwnedFd,
    pub umask: Mode,
}

/// The forked child of `run` and of a durable command's supervisor: a new
/// session, the `gate` if any, the user's identity, the parent-death signal
/// (after the identity change, which clears it, and checked against a
/// parent that died meanwhile), stdio, the program. Reports a failure
/// through `report` (`[stage: u8][errno: i32 LE]`) and exits 127.
pub fn child(
    prepared: &Prepared,
    parent: Pid,
    out: &OwnedFd,
    err: &OwnedFd,
    report: &OwnedFd,
    gate: Option<Gate<'_>>,
) -> ! {
    let fail = |failure: Failure| -> ! {
        let mut bytes = [0u8; 5];
        bytes[0] = failure.stage as u8;
        bytes[1..].copy_from_slice(&failure.errno.to_le_bytes());
        let _ = sys::write_all_fd(report, &bytes);
        sys::exit_now(127)
    };
    let resource = |err: Errno| Failure {
        stage: Stage::Resources,
        errno: err.raw_os_error(),
    };
    if let Err(e) = rustix::process::setsid() {
        fail(resource(e));
    }
    if let Some(gate) = gate {
        let mut go = [0u8; 1];
        if !matches!(sys::read_fd(gate.go.as_fd(), &mut go), Ok(1)) {
            sys::exit_now(127);
        }
        rustix::process::umask(gate.umask);
    }
    if let Err(failure) = prepared.become_user() {
        fail(failure);
    }
    if let Err(e) = rustix::process::set_parent_process_death_signal(Some(Signal::KILL)) {
        fail(resource(e));
    }
    if rustix::process::getppid() != Some(parent) {
        sys::exit_now(127);
    }
    if let Err(e) = rustix::stdio::dup2_stdout(out).and_then(|()| rustix::stdio::dup2_stderr(err)) {
        fail(resource(e));
    }
    sys::cloexec_from(3);
    sys::reset_signals();
    let program = match prepared.find() {
        Ok(program) => program,
        Err(failure) => fail(failure),
    };
    fail(prepared.exec(program))
}

fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(argv0: &str, search: &[&str]) -> Launch {
        Launch {
            identity: Identity::root(),
            argv: vec![argv0.to_owned()],
            env: vec![],
            cwd: "/".to_owned(),
            search: search.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn prepared(argv0: &str, search: &[&str]) -> Prepared {
        Prepared::new(&launch(argv0, search)).expect("prepared")
    }

    #[test]
    fn bare_names_are_searched_in_absolute_directories_only() {
        let p = prepared("sh", &["relative", "/nonexistent", "/bin/", "/usr/bin"]);
        assert_eq!(
            p.candidates
                .iter()
                .map(|c| c.to_str().unwrap())
                .collect::<Vec<_>>(),
            ["/nonexistent/sh", "/bin/sh", "/usr/bin/sh"]
        );
        assert_eq!(p.find().unwrap().to_str().unwrap(), "/bin/sh");
        let missing = prepared("dsh-no-such-program", &["/bin"]);
        assert_eq!(
            missing.find().unwrap_err(),
            Failure {
                stage: Stage::Program,
                errno: libc::ENOENT
            }
        );
    }

    #[test]
    fn absolute_programs_report_why_they_cannot_run() {
        assert!(prepared("/bin/sh", &[]).find().is_ok());
        let errno = |path: &str| prepared(path, &[]).find().unwrap_err().errno;
        assert_eq!(errno("/nonexistent/x"), libc::ENOENT);
        assert_eq!(errno("/tmp"), libc::EISDIR);
        assert_eq!(errno("/dev/null"), libc::ENOEXEC);
    }

    #[test]
    fn nul_bytes_are_refused() {
        let err = Prepared::new(&launch("a\0b", &[])).err().expect("refused");
        assert!(err.contains("NUL"), "{err}");
    }
}
