//! Builds `dsh-e2b-run`, the helper this plugin runs inside the sandbox,
//! and leaves it in `OUT_DIR` for `include_bytes!`.
//!
//! The helper is one dependency-free Rust program (`helper/`), compiled
//! here by calling `rustc` directly — no nested cargo, no lock on the
//! shared target directory — as a static x86_64 Linux executable (glibc
//! linked in with `crt-static`, no dynamic dependencies), stripped, so it
//! runs in any E2B sandbox whatever its libraries. CI therefore builds it
//! with the plugin; at runtime it travels inside the plugin and is uploaded
//! into the sandbox on first use.

use std::path::PathBuf;
use std::process::Command;

/// E2B sandboxes are x86_64 Linux machines.
const HELPER_TARGET: &str = "x86_64-unknown-linux-gnu";

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let helper = out.join("dsh-e2b-run");
    println!("cargo::rerun-if-changed=helper");
    let output = Command::new(&rustc)
        .args([
            "--edition",
            "2024",
            "--crate-name",
            "dsh_e2b_run",
            "--crate-type",
            "bin",
            "--target",
            HELPER_TARGET,
            "-C",
            "opt-level=2",
            "-C",
            "panic=abort",
            "-C",
            "debuginfo=0",
            "-C",
            "strip=symbols",
            "-C",
            "target-feature=+crt-static",
            "-o",
        ])
        .arg(&helper)
        .arg("helper/main.rs")
        .output()
        .unwrap_or_else(|err| {
            panic!(
                "run {} to build the sandbox helper: {err}",
                rustc.to_string_lossy()
            )
        });
    if !output.status.success() {
        panic!(
            "building the sandbox helper (helper/main.rs for {HELPER_TARGET}, static) failed; \
             it needs the {HELPER_TARGET} standard library and the static glibc (libc6-dev):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
