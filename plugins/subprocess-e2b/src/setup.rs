//! Preparing the sandbox for commands, once per provider: the helper is
//! installed in the owner's root-owned runtime root, and one trusted probe
//! — a control command as root, no login shell, no profile, a fresh
//! `HOME` — learns the sandbox user's identity, login home and ambient
//! environment.
//!
//! The helper's upload and the control script that installs it and probes
//! start together: the script waits on its stdin for the upload's end, so
//! its start (two shells, milliseconds in a sandbox) costs no time of its
//! own.

use std::time::Duration;

use bytes::Bytes;
use dsh_e2b_gateway::{ControlShell, GUARD_FAILED_EXIT};
use dsh_plugin_api::{Error, Result};
use dsh_supervisor_client::{HELPER, HELPER_DIGEST};
use e2b_client::{Envd, UploadOptions};

use crate::env::Ambient;
use crate::errors;
use crate::transport::EnvdTransport;
use crate::wire::{self, Identity};

/// Bound on the upload and on the install script.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Most probe output read (the ambient environment).
const PROBE_LIMIT: usize = 8 << 20;

/// Waits for the word that the upload is complete (a line on stdin; a
/// stdin closed without it means the upload failed), installs the uploaded
/// helper, then runs it to check its own SHA-256 and report the user's
/// identity and the ambient environment (its `probe`: version, uid, gid,
/// groups, home, then `env -0`; it removes the upload). `$1` upload, `$2`
/// final path, `$3` SHA-256, `$4` user. Two programs in all: every fork and
/// exec costs milliseconds in a sandbox (a `sha256sum` of the helper here
/// cost 15 ms; the helper hashes itself in one).
///
/// The helper is installed as a copy (`install`), not by renaming the
/// upload: a process envd forks (for another request) while the upload is
/// open for writing holds a copy of that descriptor until its own exec,
/// and running the uploaded inode meanwhile fails with "Text file busy"
/// (found by the soak with two `dsh` starting on one sandbox). The copy is
/// a new inode only `install` ever opened.
const INSTALL_AND_PROBE: &str = r#"
read -r uploaded || { printf 'dsh: the helper was not uploaded\n' >&2; exit 4; }
install -m 0700 -- "$1" "$2" || exit 3
exec "$2" probe "$4" "$1" "$3"
"#;

/// The line [`INSTALL_AND_PROBE`] waits for.
const UPLOADED: &[u8] = b"uploaded\n";

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
        "{install_dir}/dsh-supervisor.{:016x}.part",
        rand::random::<u64>()
    );
    let helper = format!("{install_dir}/dsh-supervisor");
    let uploaded = async {
        envd.upload(
            &upload,
            futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from_static(HELPER)) }),
            &UploadOptions::default()
                .user(dsh_e2b_gateway::CONTROL_USER)
                .content_length(HELPER.len() as u64)
                .timeout(SETUP_TIMEOUT),
        )
        .await
        .map(|_| Bytes::from_static(UPLOADED))
    };
    let script = shell
        .script(
            INSTALL_AND_PROBE,
            [upload.as_str(), helper.as_str(), HELPER_DIGEST, user],
        )
        .stdin(true);
    let output = shell
        .run_fed(envd, &script, uploaded, SETUP_TIMEOUT, PROBE_LIMIT)
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
    use std::path::Path;

    fn probe_output(version: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for field in [version, "1000", "1000", "1000 27", "/home/user"] {
            out.extend_from_slice(field.as_bytes());
            out.push(0);
        }
        out.extend_from_slice(b"PATH=/usr/bin\0E2B_SANDBOX=true\0");
        out
    }

    /// Runs the install script with bash on this host: `upload` installed
    /// as `installed`, `stdin` on its stdin.
    fn install(upload: &Path, installed: &Path, stdin: &[u8]) -> std::process::Output {
        let mut child = std::process::Command::new("bash")
            .args(["-c", INSTALL_AND_PROBE, "dsh-control"])
            .arg(upload)
            .arg(installed)
            .arg("the-digest")
            .arg("someone")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run the install script");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), stdin)
            .expect("write stdin");
        child.wait_with_output().expect("install script")
    }

    /// The install script, once told the upload is complete: an upload that
    /// some other process still holds open for writing (as a process envd
    /// forked meanwhile does) is installed (mode 0700) and runs at once —
    /// its copy is another inode — and the installed helper's probe, given
    /// the user, the upload and the digest, ends the script.
    #[test]
    fn an_upload_held_open_for_writing_is_installed_and_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upload = dir.path().join("helper.part");
        let installed = dir.path().join("helper");
        // Stands in for the helper's probe: removes the upload, says who
        // it was asked about and which digest it was given to check.
        let helper =
            b"#!/bin/sh\nrm -f -- \"$3\"\nprintf 'dsh-supervisor test\\0%s\\0%s\\0' \"$2\" \"$4\"\n";
        std::fs::write(&upload, helper).expect("write");
        let mut holder = std::process::Command::new("bash")
            .args(["-c", "exec 3>>\"$1\"; sleep 1", "holder"])
            .arg(&upload)
            .spawn()
            .expect("holder");
        std::thread::sleep(Duration::from_millis(100));
        let output = install(&upload, &installed, UPLOADED);
        holder.wait().expect("holder");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert_eq!(
            output.stdout, b"dsh-supervisor test\0someone\0the-digest\0",
            "{stderr}"
        );
        assert!(!upload.exists(), "the probe removes the upload");
        let mode = std::fs::metadata(&installed)
            .expect("installed")
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o700
        );
    }

    /// A stdin closed without the word (the upload failed) ends the script
    /// before anything is installed or run.
    #[test]
    fn without_the_word_nothing_is_installed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upload = dir.path().join("helper.part");
        std::fs::write(&upload, b"#!/bin/sh\necho ran\n").expect("write");
        let installed = dir.path().join("helper");
        let output = install(&upload, &installed, b"");
        assert_eq!(output.status.code(), Some(4));
        assert!(output.stdout.is_empty());
        assert!(String::from_utf8_lossy(&output.stderr).contains("not uploaded"));
        assert!(!installed.exists());
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
