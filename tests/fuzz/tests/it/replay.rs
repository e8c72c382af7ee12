//! Replays `tests/fuzz/corpus/<target>/*` through the target's function. The
//! functions assert their own contracts (see `dsh_fuzz`); a panic fails the
//! test naming the input.

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("read {}: {err}", dir.display()))
        .map(|entry| {
            let path = entry.expect("corpus entry").path();
            let bytes =
                std::fs::read(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()));
            (path, bytes)
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} holds no input", dir.display());
    inputs
}

/// Runs `target` over every input of its corpus, naming the input that
/// panics.
fn replay(name: &str, target: fn(&[u8])) -> usize {
    let inputs = corpus(name);
    for (path, bytes) in &inputs {
        if std::panic::catch_unwind(|| target(bytes)).is_err() {
            panic!(
                "{name}: {} fails (replay it with tests/fuzz/run.sh)",
                path.display()
            );
        }
    }
    inputs.len()
}

#[test]
fn manifest_corpus_replays_and_the_shipped_configs_parse() {
    assert!(replay("manifest", dsh_fuzz::manifest) >= 15);
    // The seeds taken from `config/` are valid manifests: the target's
    // selector byte maps them to their own syntax.
    for (path, bytes) in corpus("manifest") {
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        if let Some(config) = name.strip_prefix("config-") {
            let format = if config.ends_with(".toml") {
                dsh_manifest::ManifestFormat::Toml
            } else {
                dsh_manifest::ManifestFormat::Yaml
            };
            assert_eq!(
                bytes[0] % 2,
                u8::from(format == dsh_manifest::ManifestFormat::Yaml)
            );
            let text = std::str::from_utf8(&bytes[1..]).expect("UTF-8 config");
            dsh_manifest::Manifest::parse(text, format, config, None)
                .unwrap_or_else(|err| panic!("{config}: {err}"));
        }
    }
}

#[test]
fn rest_body_corpus_replays() {
    assert!(replay("rest_body", dsh_fuzz::rest_body) >= 7);
}

#[test]
fn connect_request_corpus_replays() {
    assert!(replay("connect_request", dsh_fuzz::connect_request) >= 8);
}
