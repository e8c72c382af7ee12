//! What the host's benchmarks share.

use std::path::PathBuf;

use dsh_host::SearchPath;

/// The plugin libraries of this build profile (or DSH_PLUGIN_PATH).
pub fn search_path() -> SearchPath {
    if std::env::var_os(dsh_host::resolve::PLUGIN_PATH_ENV).is_some() {
        return SearchPath::from_env();
    }
    // target/<profile>/deps/<bench>-… → target/<profile>
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir: PathBuf = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile directory")
        .to_path_buf();
    SearchPath::new([profile_dir])
}
