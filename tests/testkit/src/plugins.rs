//! Where a test finds plugin libraries.

use std::path::PathBuf;

/// The directories holding plugin libraries for the running test
/// executable: its own directory (`target/<profile>/deps`, where cargo puts
/// the libraries of the test's dependencies) and the profile directory
/// above it (`target/<profile>`, where `cargo build` puts them).
///
/// # Panics
/// If the path of the running executable cannot be read.
pub fn plugin_dirs() -> Vec<PathBuf> {
    let exe = std::env::current_exe()
        .unwrap_or_else(|err| panic!("dsh-testkit: locate the test executable: {err}"));
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.to_path_buf())
        .collect()
}
