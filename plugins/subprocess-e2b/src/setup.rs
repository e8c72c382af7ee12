//! Preparing the sandbox for commands, once per provider: the helper is
//! installed in the owner's root-owned runtime root, and one trusted probe
//! — a control command as root, no login shell, no profile, a fresh
//! `HOME` — learns the sandbox user's identity, login home and ambient
//! environment.
//!
//! The helper is the template's copy when the sandbox has one, else
//! uploaded (`dsh_e2b_gateway::install_helper`).

use std::time::Duration;

use dsh_e2b_gateway::{ControlShell, GUARD_FAILED_EXIT, InstallPaths, Installed, install_helper};
use dsh_plugin_api::{Error, Result};
use e2b_client::Envd;

use crate::errors;
use crate::transport::EnvdTransport;
use crate::wire::{self, Identity};
use dsh_supervisor::ambient::Ambient;

/// Bound on the upload and on the install script.
pub(crate) const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Most probe output read (the ambient environment), from the install
/// script or a first command's [`crate::frames::Frame::Probed`].
pub(crate) const PROBE_LIMIT: usize = 8 << 20;

/// What commands of one provider need to know about the sandbox.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The sandbox user commands run as.
    pub identity: Identity,
    pub ambient: Ambient,
    /// The installed helper.
    pub helper: String,
    /// Whether the helper is the template's copy (nothing was uploaded
    /// into the provider's install directory).
    pub preinstalled: bool,
}

/// Installs the helper into `install_dir` (unless the template has it:
/// `looked`, when the caller already looked) and probes the sandbox for
/// `user`. Dropping the future may leave a partial upload in `install_dir`,
/// which disposal removes.
pub async fn prepare<T: EnvdTransport>(
    envd: &Envd<T>,
    shell: &ControlShell,
    install_dir: &str,
    user: &str,
    looked: Option<bool>,
) -> Result<Setup> {
    let paths = InstallPaths {
        upload: format!(
            "{install_dir}/dsh-supervisor.{:016x}.part",
            rand::random::<u64>()
        ),
        installed: format!("{install_dir}/dsh-supervisor"),
    };
    let Installed {
        output,
        helper,
        preinstalled,
    } = install_helper(
        envd,
        shell,
        &paths,
        async { Ok(user.to_owned()) },
        looked,
        SETUP_TIMEOUT,
        PROBE_LIMIT,
    )
    .await
    .map_err(|err| errors::client("install the sandbox helper", &err))?;
    if output.status.exit_code == GUARD_FAILED_EXIT {
        return Err(Error::io(format!(
            "probe the sandbox: the runtime root {} is not a root-owned directory: {}",
            shell.runtime_root(),
            output.stderr_text()
        )));
    }
    if !output.status.success() {
        return Err(Error::io(format!(
            "probe the sandbox: the install script failed ({}): {}",
            output.status.status,
            output.stderr_text()
        )));
    }
    if output.truncated {
        return Err(Error::io(format!(
            "probe the sandbox: the ambient environment is larger than {PROBE_LIMIT} bytes"
        )));
    }
    Setup::probed(&output.stdout, user, helper, preinstalled)
}

impl Setup {
    /// What `helper`'s probe printed for `user` (`record`: the install
    /// script's output, or a first command's
    /// [`crate::frames::Frame::Probed`]).
    pub fn probed(record: &[u8], user: &str, helper: String, preinstalled: bool) -> Result<Setup> {
        let (identity, ambient) = parse_probe(record, user)
            .map_err(|message| Error::io(format!("probe the sandbox: {message}")))?;
        Ok(Setup {
            identity,
            ambient,
            helper,
            preinstalled,
        })
    }
}

/// Splits the probe's output into the identity and the ambient environment.
fn parse_probe(stdout: &[u8], user: &str) -> std::result::Result<(Identity, Ambient), String> {
    let mut fields = stdout.splitn(6, |&b| b == 0);
    let mut next = |what: &str| -> std::result::Result<String, String> {
        let field = fields
            .next()
            .ok_or_else(|| format!("the probe output ends before {what}"))?;
        String::from_utf8(field.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
    };
    let version = next("the helper version")?;
    let expected = format!("dsh-supervisor {}", wire::VERSION);
    if version.trim() != expected {
        return Err(format!(
            "the installed helper says {version:?}, expected {expected:?}"
        ));
    }
    let number = |text: &str, what: &str| {
        text.trim()
            .parse::<u32>()
            .map_err(|_| format!("{what} {text:?} is not a number"))
    };
    let uid = number(&next("the uid")?, "uid")?;
    let gid = number(&next("the gid")?, "gid")?;
    let groups = next("the groups")?
        .split_whitespace()
        .map(|g| number(g, "group"))
        .collect::<std::result::Result<Vec<u32>, String>>()?;
    let home = next("the home directory")?;
    let env0 = fields.next().unwrap_or_default();
    let ambient = Ambient::from_probe(env0, user, &home)?;
    Ok((Identity { uid, gid, groups }, ambient))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe_output(version: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for field in [version, "1000", "1000", "1000 27", "/home/user"] {
            out.extend_from_slice(field.as_bytes());
            out.push(0);
        }
        out.extend_from_slice(b"PATH=/usr/bin\0E2B_SANDBOX=true\0");
        out
    }

    #[test]
    fn the_probe_parses() {
        let version = format!("dsh-supervisor {}", wire::VERSION);
        let (identity, ambient) = parse_probe(&probe_output(&version), "user").unwrap();
        assert_eq!(
            identity,
            Identity {
                uid: 1000,
                gid: 1000,
                groups: vec![1000, 27]
            }
        );
        assert_eq!(ambient.path(), "/usr/bin");
        assert!(ambient.names().any(|n| n == "HOME"));
    }

    #[test]
    fn a_wrong_helper_or_a_short_probe_is_an_error() {
        let err = parse_probe(&probe_output("dsh-supervisor 0"), "user").unwrap_err();
        assert!(err.contains("expected"), "{err}");
        let err = parse_probe(b"x", "user").unwrap_err();
        assert!(err.contains("says \"x\""), "{err}");
        let version = format!("dsh-supervisor {}", wire::VERSION);
        let err = parse_probe(version.as_bytes(), "user").unwrap_err();
        assert!(err.contains("ends before the uid"), "{err}");
    }
}
