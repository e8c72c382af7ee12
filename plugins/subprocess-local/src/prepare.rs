//! What commands and terminals share before and at the launch: the world's
//! checks (open provider, existing cwd, environment, resolvable program),
//! the launch itself, and the rollback of a child whose handle could not be
//! completed.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use dsh_plugin_api::{Error, ErrorKind, Result};
use rustix::process::Pid;

use crate::env::EnvBlock;
use crate::launch::{self, FdAction, Launch};
use crate::world::World;

/// A request that passed every check; nothing has started yet.
pub struct Checked<'a> {
    operation: &'static str,
    argv: &'a [String],
    program: PathBuf,
    cwd: PathBuf,
    env: EnvBlock<'a>,
}

/// Checks a validated request against `world`: the provider is open, the
/// cwd (relative to the world's) is an existing directory, and `argv[0]`
/// resolves on the command's own `PATH`.
pub fn check<'a>(
    world: &'a World,
    operation: &'static str,
    argv: &'a [String],
    cwd: Option<&str>,
    env: &'a std::collections::BTreeMap<String, String>,
) -> Result<Checked<'a>> {
    world.check_open(operation)?;
    let cwd = world.working_dir(operation, cwd)?;
    let env = world.env().block(env);
    let program = crate::resolve::find_program(operation, &argv[0], env.search_path(), &[])?;
    Ok(Checked {
        operation,
        argv,
        program,
        cwd,
        env,
    })
}

impl Checked<'_> {
    /// The working directory, absolute.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The command's environment block.
    pub fn env(&self) -> &EnvBlock<'_> {
        &self.env
    }

    /// Starts the program with `fds` as its descriptor setup; the child
    /// leads a new session and process group.
    pub fn launch(&self, fds: &[FdAction<'_>]) -> Result<Pid> {
        let program = c_path(&self.program);
        let argv_c: Vec<CString> = self
            .argv
            .iter()
            .map(|arg| CString::new(arg.as_bytes()).expect("validated: no NUL"))
            .collect();
        let argv: Vec<&CStr> = argv_c.iter().map(CString::as_c_str).collect();
        let env: Vec<&CStr> = self.env.entries().iter().map(AsRef::as_ref).collect();
        let cwd = c_path(&self.cwd);
        launch::spawn(&Launch {
            program: &program,
            argv: &argv,
            env: &env,
            cwd: &cwd,
            fds,
        })
        .map_err(|err| self.launch_error(&err))
    }

    /// Maps a failed `posix_spawn` to the seam's vocabulary.
    fn launch_error(&self, err: &std::io::Error) -> Error {
        let (operation, name) = (self.operation, &self.argv[0]);
        match err.raw_os_error() {
            Some(libc::ENOENT) => Error::not_found(format!(
                "{operation}: {name}: program or its interpreter not found"
            )),
            Some(libc::EACCES) => Error::new(
                ErrorKind::PermissionDenied,
                format!("{operation}: {name}: permission denied"),
            ),
            Some(libc::ENOEXEC) => {
                Error::invalid_input(format!("{operation}: {name}: not an executable format"))
            }
            _ => Error::from_io(&format!("{operation}: {name}"), err),
        }
        .with_subject(self.program.display().to_string())
    }
}

/// Kills and reaps a child whose handle could not be completed. It has run
/// for microseconds and leads a fresh group, so SIGKILL to the group ends it
/// and anything it forked; the blocking reap returns as soon as the kernel
/// has torn it down.
pub fn rollback(pid: Pid) {
    let _ = dsh_process_group::signal::signal_group(pid.as_raw_nonzero().get(), libc::SIGKILL);
    let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes())
        .expect("paths from the OS or validated strings have no NUL")
}
