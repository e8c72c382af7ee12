//! Starting a host over the built plugin libraries.

use dsh_host::{Host, Manifest, ManifestFormat, SearchPath};
use dsh_testkit::plugin_dirs;

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
