//! Preparing the sandbox for commands, once per provider: the helper is
//! installed in the owner's root-owned runtime root, and one trusted probe
//! — a control command as root, no login shell, no profile, a fresh
//! `HOME` — learns the sandbox user's identity, login home and ambient
//! environment.
//!
//! Two round trips: the upload, then one control script that verifies and
//! installs the helper and runs the probe.

use std::time::Duration;

use bytes::Bytes;
use dsh_e2b_gateway::{ControlShell, GUARD_FAILED_EXIT};
use dsh_helper::{HELPER, helper_digest};
use dsh_plugin_api::{Error, Result};
use e2b_client::{Envd, UploadOptions};

use crate::env::Ambient;
use crate::errors;
use crate::transport::EnvdTransport;
use crate::wire::{self, Identity};

/// Bound on the upload and on the install script.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Most probe output read (the ambient environment).
const PROBE_LIMIT: usize = 8 << 20;

/// Verifies and installs the uploaded helper, then runs it to report the
/// user's identity and the ambient environment (its `probe`: version, uid,
/// gid, groups, home, then `env -0`; it removes the upload). `$1` upload,
/// `$2` final path, `$3` SHA-256, `$4` user. Three programs in all: every
/// fork and exec costs milliseconds in a sandbox.
///
/// The helper is installed as a copy (`install`), not by renaming the
/// upload: a process envd forks (for another request) while the upload is
/// open for writing holds a copy of that descriptor until its own exec,
/// and running the uploaded inode meanwhile fails with "Text file busy"
/// (found by the soak with two `dsh` starting on one sandbox). The copy is
/// a new inode only `install` ever opened.
const INSTALL_AND_PROBE: &str = r#"
sha256sum --check --status <<< "$3  $1" || { printf 'dsh: the uploaded helper %s does not match its SHA-256\n' "$1" >&2; exit 3; }
install -m 0700 -- "$1" "$2" || exit 3
exec "$2" probe "$4" "$1"
"#;

/// What commands of one provider need to know about the sandbox.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The sandbox user commands run as.
    pub identity: Identity,
    pub ambient: Ambient,
    /// The installed helper.
    pub helper: String,
}

/// Installs the helper into `install_dir` and probes the sandbox for
/// `user`. Dropping the future may leave a partial upload in
/// `install_dir`, which disposal removes.
pub async fn prepare<T: EnvdTransport>(
    envd: &Envd<T>,
    shell: &ControlShell,
    install_dir: &str,
    user: &str,
) -> Result<Setup> {
    let upload = format!(
        "{install_dir}/dsh-e2b-run.{:016x}.part",
        rand::random::<u64>()
    );
    let helper = format!("{install_dir}/dsh-e2b-run");
    envd.upload(
        &upload,
        futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from_static(HELPER)) }),
        &UploadOptions::default()
            .user(dsh_e2b_gateway::CONTROL_USER)
            .content_length(HELPER.len() as u64)
            .timeout(SETUP_TIMEOUT),
    )
    .await
    .map_err(|err| errors::client("install the sandbox helper", &err))?;
    let script = shell.script(
        INSTALL_AND_PROBE,
        [upload.as_str(), helper.as_str(), helper_digest(), user],
    );
    let output = shell
        .run(envd, &script, SETUP_TIMEOUT, PROBE_LIMIT)
        .await
        .map_err(|err| errors::client("probe the sandbox", &err))?;
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
    let probe = parse_probe(&output.stdout, user)
        .map_err(|message| Error::io(format!("probe the sandbox: {message}")))?;
    Ok(Setup {
        identity: probe.0,
        ambient: probe.1,
        helper,
    })
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
    let expected = format!("dsh-e2b-run {}", wire::VERSION);
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
    use sha2::{Digest, Sha256};

    fn probe_output(version: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for field in [version, "1000", "1000", "1000 27", "/home/user"] {
            out.extend_from_slice(field.as_bytes());
            out.push(0);
        }
        out.extend_from_slice(b"PATH=/usr/bin\0E2B_SANDBOX=true\0");
        out
    }

    /// The install script, run by bash on this host: an upload that some
    /// other process still holds open for writing (as a process envd forked
    /// meanwhile does) is installed and runs at once — its copy is another
    /// inode — and the installed helper's probe ends the script.
    #[test]
    fn an_upload_held_open_for_writing_is_installed_and_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upload = dir.path().join("helper.part");
        let installed = dir.path().join("helper");
        let helper = b"#!/bin/sh\nrm -f -- \"$3\"\nprintf 'dsh-e2b-run test\\0%s\\0' \"$2\"\n";
        std::fs::write(&upload, helper).expect("write");
        let digest: String = Sha256::digest(helper)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut holder = std::process::Command::new("bash")
            .args(["-c", "exec 3>>\"$1\"; sleep 1", "holder"])
            .arg(&upload)
            .spawn()
            .expect("holder");
        std::thread::sleep(Duration::from_millis(100));
        let output = std::process::Command::new("bash")
            .args(["-c", INSTALL_AND_PROBE, "dsh-control"])
            .arg(&upload)
            .arg(&installed)
            .arg(&digest)
            .arg("someone")
            .output()
            .expect("run the install script");
        holder.wait().expect("holder");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert_eq!(output.stdout, b"dsh-e2b-run test\0someone\0", "{stderr}");
        assert!(!upload.exists(), "the probe removes the upload");
        let mode = std::fs::metadata(&installed)
            .expect("installed")
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o700
        );
    }

    /// A corrupted upload is refused before it runs.
    #[test]
    fn an_upload_that_does_not_match_its_digest_is_not_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upload = dir.path().join("helper.part");
        std::fs::write(&upload, b"#!/bin/sh\necho ran\n").expect("write");
        let output = std::process::Command::new("bash")
            .args(["-c", INSTALL_AND_PROBE, "dsh-control"])
            .arg(&upload)
            .arg(dir.path().join("helper"))
            .arg("0".repeat(64))
            .arg("user")
            .output()
            .expect("run the install script");
        assert_eq!(output.status.code(), Some(3));
        assert!(output.stdout.is_empty());
        assert!(String::from_utf8_lossy(&output.stderr).contains("does not match its SHA-256"));
    }

    #[test]
    fn the_probe_parses() {
        let version = format!("dsh-e2b-run {}", wire::VERSION);
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
        let err = parse_probe(&probe_output("dsh-e2b-run 0"), "user").unwrap_err();
        assert!(err.contains("expected"), "{err}");
        let err = parse_probe(b"x", "user").unwrap_err();
        assert!(err.contains("says \"x\""), "{err}");
        let version = format!("dsh-e2b-run {}", wire::VERSION);
        let err = parse_probe(version.as_bytes(), "user").unwrap_err();
        assert!(err.contains("ends before the uid"), "{err}");
    }
}
