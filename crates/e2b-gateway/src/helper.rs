//! The sandbox helper's way into a sandbox, for every adapter that runs it
//! (`dsh-subprocess-e2b`'s commands, `dsh-fs-e2b`'s world-side operations):
//! a template's preinstalled copy when the template has one, else an upload
//! into the adapter's directory under the runtime root (docs/design.md
//! §6.4, "The helper in a template").
//!
//! Either way one control script as root ends in the helper's `probe` (an
//! upload's own digest checked — a template's copy was checked when the
//! template was built — the user's account and the ambient environment
//! printed). The script starts while the host looks for the preinstalled
//! copy and, without one, uploads: it waits on its stdin for the word of
//! which it is, so neither the look nor the upload waits for the other.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use dsh_plugin_api::owner::SandboxInfo;
use dsh_supervisor_client::{HELPER, HELPER_DIGEST, template_path_in};
use e2b_client::{CallOptions, Envd, FileType, UploadOptions};

use crate::control::{CONTROL_USER, ControlOutput, ControlShell, EnvdReadable};

/// Where [`install`] puts an uploaded helper: the upload (removed by the
/// probe) and the installed copy.
#[derive(Debug, Clone)]
pub struct InstallPaths {
    pub upload: String,
    pub installed: String,
}

/// What [`install`] ran: the probe's output and the helper's path.
#[derive(Debug)]
pub struct Installed {
    pub output: ControlOutput,
    /// The helper to run from now on.
    pub helper: String,
    /// Whether it is the template's copy (nothing was uploaded).
    pub preinstalled: bool,
}

/// Reads which helper to run and the user to probe for (one line on stdin;
/// none means the upload failed), then runs that helper's `probe`: the
/// template's copy in place, after checking it is a root-owned file in a
/// root-owned directory (its digest `-`: the template's build checked it),
/// or the upload installed as a copy. `$1` upload, `$2` installed path,
/// `$3` its BLAKE3 digest, `$4` the template's path.
///
/// The upload is installed as a copy (`install`), not renamed: a process
/// envd forks (for another request) while the upload is open for writing
/// holds a copy of that descriptor until its own exec, and running the
/// uploaded inode meanwhile fails with "Text file busy" (found by the soak
/// with two `dsh` starting on one sandbox). The copy is a new inode only
/// `install` ever opened.
const INSTALL_AND_PROBE: &str = r#"
read -r source user || { printf 'dsh: the helper was not uploaded\n' >&2; exit 4; }
if [[ $source == preinstalled ]]; then
  [[ -f $4 && ! -L $4 && -O $4 && -O ${4%/*} ]] || { printf 'dsh: the template helper %s is not a root-owned file in a root-owned directory\n' "$4" >&2; exit 3; }
  exec "$4" probe "$user" - -
fi
install -m 0700 -- "$1" "$2" || exit 3
exec "$2" probe "$user" "$1" "$3"
"#;

/// Installs the helper ([`HELPER`]) for `shell`'s (root's) use and runs its `probe` for the
/// user `user` resolves to: the template's copy when the sandbox has one
/// (at [`template_path_in`] `shell`'s runtime root, root's alone), else uploaded to
/// `paths.upload` and installed at `paths.installed`. `looked`: what the caller already knows
/// of the copy (`Some(false)`: starting it found none), so nothing asks again; `None` looks
/// while the script starts. `timeout` bounds the look, the upload and the script; at most
/// `output_limit` bytes of the probe's output are kept.
///
/// Runs on the caller's runtime. Dropping the future may leave a partial
/// upload at `paths.upload`, which the caller's disposal removes.
pub async fn install<T, U>(
    envd: &Envd<T>,
    shell: &ControlShell,
    paths: &InstallPaths,
    user: U,
    looked: Option<bool>,
    timeout: Duration,
    output_limit: usize,
) -> e2b_client::Result<Installed>
where
    T: EnvdReadable,
    U: Future<Output = e2b_client::Result<String>>,
{
    let template_copy = template_path_in(shell.runtime_root());
    let used_template = AtomicBool::new(false);
    let source = async {
        let found = match looked {
            Some(found) => found,
            // Boxed: two envd calls' futures, kept off the caller's stack.
            None => Box::pin(preinstalled(envd, &template_copy, timeout)).await,
        };
        if found {
            used_template.store(true, Ordering::Relaxed);
            return Ok("preinstalled");
        }
        envd.upload(
            &paths.upload,
            futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from_static(HELPER)) }),
            &UploadOptions::default()
                .user(CONTROL_USER)
                .content_length(HELPER.len() as u64)
                .timeout(timeout),
        )
        .await
        .map(|_| "uploaded")
    };
    let feed = async {
        let (source, user) = tokio::join!(source, user);
        Ok(Bytes::from(format!("{} {}\n", source?, user?)))
    };
    let script = shell
        .script(
            INSTALL_AND_PROBE,
            [
                paths.upload.as_str(),
                paths.installed.as_str(),
                HELPER_DIGEST,
                template_copy.as_str(),
            ],
        )
        .stdin(true);
    let output = shell
        .run_fed(envd, &script, feed, timeout, output_limit)
        .await?;
    let preinstalled = used_template.into_inner();
    Ok(Installed {
        output,
        helper: if preinstalled {
            template_copy
        } else {
            paths.installed.clone()
        },
        preinstalled,
    })
}

/// E2B's default template, which never holds the helper's copy.
pub const BASE_TEMPLATE: &str = "base";

/// Where the sandbox `info` describes may hold the template's copy of the
/// helper ([`template_path_in`] its runtime root), for an adapter to run it
/// with no look of its own: only root can have put a file in the runtime
/// root, which its owner verified before handing the sandbox out
/// (docs/design.md §6.4). `None` for a sandbox from [`BASE_TEMPLATE`]; E2B's
/// cloud names templates by id, so there a sandbox from `base` is not told
/// apart and its first start of the copy finds none.
pub fn template_copy_of(info: &SandboxInfo) -> Option<String> {
    (info.template_id != BASE_TEMPLATE).then(|| template_path_in(&info.runtime_root))
}

/// Whether the sandbox holds the template's copy of the helper at `path`:
/// a regular file (not a symlink) owned by root in a root-owned directory,
/// neither writable by group or others. Anything else, an error included,
/// is "no" (the helper is uploaded instead); the install script checks
/// ownership again where it runs.
async fn preinstalled<T: EnvdReadable>(envd: &Envd<T>, path: &str, timeout: Duration) -> bool {
    let options = CallOptions::default().user(CONTROL_USER).timeout(timeout);
    let dir = path.rsplit_once('/').map_or("/", |(dir, _)| dir);
    let (file, dir) = tokio::join!(envd.stat(path, &options), envd.stat(dir, &options));
    matches!((file, dir), (Ok(file), Ok(dir))
        if root_only(&file, FileType::File) && root_only(&dir, FileType::Directory))
}

/// Whether envd's `entry` is a `kind` itself (not a symlink to one), owned
/// by root and writable by root only: what no one but root can replace or
/// change.
pub fn root_only(entry: &e2b_client::EntryInfo, kind: FileType) -> bool {
    entry.file_type == kind
        && entry.symlink_target.is_none()
        && matches!(entry.owner.as_str(), "root" | "0")
        && entry.mode & 0o022 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Stands in for the helper's probe: removes the upload unless `-`,
    /// says who it was asked about and which digest it was given to check.
    const FAKE_HELPER: &[u8] = b"#!/bin/sh\n[ \"$3\" = - ] || rm -f -- \"$3\"\nprintf 'ran %s\\0%s\\0%s\\0' \"$0\" \"$2\" \"$4\"\n";

    /// Runs the install script with bash on this host (the paths `$1…$4`),
    /// `stdin` on its stdin.
    fn run(paths: [&Path; 3], stdin: &[u8]) -> std::process::Output {
        let [upload, installed, template] = paths;
        let mut child = std::process::Command::new("bash")
            .args(["-c", INSTALL_AND_PROBE, "dsh-control"])
            .arg(upload)
            .arg(installed)
            .arg("the-digest")
            .arg(template)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run the install script");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), stdin)
            .expect("write stdin");
        child.wait_with_output().expect("install script")
    }

    /// The script succeeded by running the fake helper at `helper`, for
    /// user `someone` and digest `digest`.
    fn assert_ran(output: &std::process::Output, helper: &Path, digest: &str) {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let expected = format!("ran {}\0someone\0{digest}\0", helper.display());
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            expected,
            "{stderr}"
        );
    }

    fn mode(path: &Path) -> u32 {
        std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(path).expect("stat").permissions(),
        ) & 0o777
    }

    /// Told the upload is complete: an upload that some other process still
    /// holds open for writing (as a process envd forked meanwhile does) is
    /// installed (mode 0700) and runs at once — its copy is another inode —
    /// and the installed helper's probe, given the user, the upload and the
    /// digest, ends the script.
    #[test]
    fn an_upload_held_open_for_writing_is_installed_and_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upload = dir.path().join("helper.part");
        let installed = dir.path().join("helper");
        std::fs::write(&upload, FAKE_HELPER).expect("write");
        let mut holder = std::process::Command::new("bash")
            .args(["-c", "exec 3>>\"$1\"; sleep 1", "holder"])
            .arg(&upload)
            .spawn()
            .expect("holder");
        std::thread::sleep(Duration::from_millis(100));
        let output = run(
            [&upload, &installed, &dir.path().join("none/dsh-supervisor")],
            b"uploaded someone\n",
        );
        holder.wait().expect("holder");
        assert_ran(&output, &installed, "the-digest");
        assert!(!upload.exists(), "the probe removes the upload");
        assert_eq!(mode(&installed), 0o700);
    }

    /// Told the template has the helper: its copy runs where it is, with
    /// no upload to remove and no digest to check (the template's build
    /// checked it), and nothing is installed.
    #[test]
    fn the_template_copy_runs_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let template = dir.path().join("digest/dsh-supervisor");
        std::fs::create_dir(dir.path().join("digest")).expect("mkdir");
        std::fs::write(&template, FAKE_HELPER).expect("write");
        std::fs::set_permissions(
            &template,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        let (upload, installed) = (dir.path().join("helper.part"), dir.path().join("helper"));
        let output = run([&upload, &installed, &template], b"preinstalled someone\n");
        assert_ran(&output, &template, "-");
        assert!(!installed.exists(), "nothing installed");
    }

    /// A template path that is a symlink (the file could be anyone's) is
    /// not run: the script fails before any helper runs.
    #[test]
    fn a_template_copy_behind_a_symlink_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("elsewhere");
        std::fs::write(&real, FAKE_HELPER).expect("write");
        std::fs::set_permissions(&real, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let template = dir.path().join("dsh-supervisor");
        std::os::unix::fs::symlink(&real, &template).expect("symlink");
        let (upload, installed) = (dir.path().join("helper.part"), dir.path().join("helper"));
        let output = run([&upload, &installed, &template], b"preinstalled someone\n");
        assert_eq!(output.status.code(), Some(3));
        assert!(output.stdout.is_empty(), "nothing ran");
        assert!(String::from_utf8_lossy(&output.stderr).contains("not a root-owned file"));
    }

    /// A stdin closed without the word (the upload failed) ends the script
    /// before anything is installed or run.
    #[test]
    fn without_the_word_nothing_is_installed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upload = dir.path().join("helper.part");
        std::fs::write(&upload, FAKE_HELPER).expect("write");
        let installed = dir.path().join("helper");
        let output = run([&upload, &installed, &dir.path().join("t")], b"");
        assert_eq!(output.status.code(), Some(4));
        assert!(output.stdout.is_empty());
        assert!(String::from_utf8_lossy(&output.stderr).contains("not uploaded"));
        assert!(!installed.exists());
    }
}
