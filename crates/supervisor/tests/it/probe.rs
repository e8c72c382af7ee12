//! The helper's `probe`: the real binary, installed as a copy the way the
//! install script installs it, checks its own BLAKE3 digest before doing
//! anything else — unless it is a template's copy, which the template's
//! build checked.

use std::path::Path;
use std::process::{Command, Output};

const HELPER: &str = env!("CARGO_BIN_EXE_dsh-supervisor");

fn hex_digest(path: &Path) -> String {
    blake3::hash(&std::fs::read(path).expect("read the helper"))
        .to_hex()
        .to_string()
}

/// Installs a copy of the helper in `dir` beside an "upload" and probes
/// the account of root with `digest` (default: the copy's own); whether
/// the upload is left.
fn probe(dir: &Path, digest: Option<&str>) -> (Output, bool) {
    let installed = dir.join("dsh-supervisor");
    std::fs::copy(HELPER, &installed).expect("install a copy");
    let upload = dir.join("dsh-supervisor.part");
    std::fs::write(&upload, b"the upload").expect("upload");
    let digest = digest.map_or_else(|| hex_digest(&installed), str::to_owned);
    let output = Command::new(&installed)
        .args(["probe", "root"])
        .arg(&upload)
        .arg(digest)
        .output()
        .expect("run the probe");
    (output, upload.exists())
}

#[test]
fn a_helper_with_the_expected_digest_probes_and_removes_the_upload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (output, upload_left) = probe(dir.path(), None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let fields: Vec<&[u8]> = output.stdout.split(|&b| b == 0).collect();
    assert_eq!(
        fields[0],
        format!("dsh-supervisor {}", dsh_supervisor::wire::VERSION).as_bytes()
    );
    assert_eq!(fields[1], b"0", "root's uid");
    assert!(!upload_left, "the probe removes the upload");
}

#[test]
fn a_helper_that_is_not_the_one_sent_does_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (output, upload_left) = probe(dir.path(), Some(&"0".repeat(64)));
    assert_eq!(output.status.code(), Some(3));
    assert!(output.stdout.is_empty(), "nothing is reported");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("does not match its BLAKE3 digest"),
        "{stderr}"
    );
    assert!(upload_left, "nothing else is done");
}

/// A template's copy is probed with `-` for its digest: the template's
/// build checked it, so nothing is hashed (not even a copy that would fail
/// the check). An upload is never probed unchecked.
#[test]
fn a_template_copy_is_probed_without_a_digest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("dsh-supervisor");
    let mut bytes = std::fs::read(HELPER).expect("read the helper");
    bytes.extend_from_slice(b"not the helper that was sent");
    std::fs::write(&copy, bytes).expect("write the copy");
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let output = Command::new(&copy)
        .args(["probe", "root", "-", "-"])
        .output()
        .expect("run the probe");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(output.stdout.starts_with(b"dsh-supervisor "), "{stderr}");

    let (output, upload_left) = probe(dir.path(), Some("-"));
    assert_eq!(output.status.code(), Some(3));
    assert!(output.stdout.is_empty(), "nothing is reported");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("must be checked against its digest"),
        "{output:?}"
    );
    assert!(upload_left, "nothing else is done");
}
