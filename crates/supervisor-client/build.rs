//! Builds `dsh-supervisor`, the helper both subprocess providers run (inside
//! the sandbox, and on the host for durable commands),
//! and leaves it in `OUT_DIR` for `include_bytes!`.
//!
//! The helper is the workspace crate `dsh-supervisor`, built here by a nested
//! `cargo build` as a static x86_64 Linux executable (glibc linked in with
//! `crt-static`, no dynamic dependencies), with `panic=abort` and stripped,
//! so it runs in any E2B sandbox whatever its libraries. The nested build
//! has a target directory of its own (`<target>/supervisor`): sharing the
//! outer build's would wait forever on the lock the outer build holds;
//! `DSH_SUPERVISOR_TARGET_DIR` names another, one builds of other workspaces
//! (the provider template's) can share. It
//! runs with the outer build's cargo and rustc (no toolchain lookup) and
//! `--locked`, without the outer build's flags and wrappers (clippy's
//! driver, RUSTFLAGS, an outer `--target`), which are not meant for the
//! helper. CI therefore builds the helper with this crate; at runtime it
//! travels inside each plugin that links it (docs/design.md §6.3).

use std::path::{Path, PathBuf};
use std::process::Command;

/// E2B sandboxes are x86_64 Linux machines.
const HELPER_TARGET: &str = "x86_64-unknown-linux-gnu";

/// Names the nested build's target directory instead of
/// `<target>/supervisor`: builds of the helper that share it build it once.
const SHARED_TARGET_DIR: &str = "DSH_SUPERVISOR_TARGET_DIR";

/// Variables of the outer build that would change what the nested build
/// does, or where; it gets its own settings instead.
const OUTER_ONLY: &[&str] = &[
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_BUILD_DIR",
    "CARGO_BUILD_TARGET",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    // The outer jobserver: the nested build schedules its own few jobs.
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cargo = std::env::var_os("CARGO").expect("cargo sets CARGO for build scripts");
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let workspace = manifest_dir
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .expect("the plugin lives in the dsh workspace, next to its Cargo.lock")
        .to_owned();
    for watched in [
        "crates/supervisor",
        "crates/process-group",
        // `dsh-supervisor world` runs their engines.
        "plugins/fs-local",
        "crates/provider-kit",
        "plugin-api",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!(
            "cargo::rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_DIR");
    println!("cargo::rerun-if-env-changed={SHARED_TARGET_DIR}");
    // Another build of the same helper (the provider template's, in CI) can
    // name the first one's directory and find the helper built there.
    let target_dir = std::env::var_os(SHARED_TARGET_DIR).map_or_else(
        || {
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| workspace.join("target"), PathBuf::from)
                .join("supervisor")
        },
        PathBuf::from,
    );

    let mut command = Command::new(&cargo);
    command
        .current_dir(&workspace)
        .args([
            "build",
            "--package",
            "dsh-supervisor",
            "--bin",
            "dsh-supervisor",
        ])
        .args(["--release", "--locked", "--target", HELPER_TARGET])
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    for setting in [
        "profile.release.panic=\"abort\"",
        "profile.release.strip=\"symbols\"",
        "profile.release.debug=false",
        "profile.release.opt-level=2",
        // One unit per crate: less work in all (90 CPU-seconds for the whole build against 102
        // with release's 16) and a smaller helper; its crates build side by side anyway.
        "profile.release.codegen-units=1",
    ] {
        command.args(["--config", setting]);
    }
    for name in OUTER_ONLY {
        command.env_remove(name);
    }
    // For the helper's target only (not build scripts, which run here).
    command.env(
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
        "-C target-feature=+crt-static",
    );
    let output = command.output().unwrap_or_else(|err| {
        panic!(
            "run {} to build the sandbox helper: {err}",
            Path::new(&cargo).display()
        )
    });
    if !output.status.success() {
        panic!(
            "building the sandbox helper (cargo build -p dsh-supervisor for {HELPER_TARGET}, static, \
             in {}) failed; it needs the {HELPER_TARGET} standard library and the static glibc \
             (libc6-dev):\n{}",
            target_dir.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let built = target_dir
        .join(HELPER_TARGET)
        .join("release")
        .join("dsh-supervisor");
    let bytes = std::fs::read(&built)
        .unwrap_or_else(|err| panic!("read the sandbox helper {}: {err}", built.display()));
    // The digest is written beside the program so that no process hashes
    // it at run time (a cold `dsh exec` did, on its critical path).
    let digest = blake3::hash(&bytes).to_hex();
    for (name, contents) in [
        ("dsh-supervisor", bytes),
        ("dsh-supervisor.blake3", digest.as_bytes().to_vec()),
    ] {
        std::fs::write(out.join(name), contents)
            .unwrap_or_else(|err| panic!("write {name} into {}: {err}", out.display()));
    }
}
