//! Starting a host over the built plugin libraries.

use std::path::PathBuf;

use dsh_host::{Host, Manifest, ManifestFormat, SearchPath};

/// Where cargo put the plugin libraries: `target/<profile>/deps` (built as
/// dependencies of these tests) and `target/<profile>` (`cargo build`).
fn plugin_dirs() -> Vec<PathBuf> {
    let exe = std::env::current_exe().expect("test executable");
    let deps = exe.parent().expect("its directory").to_path_buf();
    let profile = deps.parent().expect("the profile directory").to_path_buf();
    vec![deps, profile]
}

/// A host started from the YAML manifest `text` (called `name` in errors),
/// its plugins found in [`plugin_dirs`].
pub async fn start_host(text: &str, name: &str) -> Host {
    let manifest = Manifest::parse(text, ManifestFormat::Yaml, name, None).expect("manifest");
    Host::from_manifest(&manifest, &SearchPath::new(plugin_dirs()))
        .await
        .unwrap_or_else(|err| {
            panic!("start (build the plugins first: `cargo build --workspace`): {err}")
        })
}
