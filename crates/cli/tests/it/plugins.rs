//! `dsh plugins`: the shipped TOML and YAML local manifests are the same
//! composition, and the embedded default is that composition too.

use crate::support::{
    cargo_toml, config_dir, library, package_dir, plugin_dir, require, run_dsh, text,
};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];

fn plugins(args: &[&str]) -> String {
    let output = run_dsh(args);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "dsh {args:?} failed: {stderr}");
    stdout
}

#[test]
fn local_yaml_and_toml_print_the_same_plugins() {
    require(&LOCAL);
    let yaml = config_dir().join("local.yaml").display().to_string();
    let toml = config_dir().join("local.toml").display().to_string();
    for json in [false, true] {
        let mut yaml_args = vec!["--config", yaml.as_str(), "plugins"];
        let mut toml_args = vec!["--config", toml.as_str(), "plugins"];
        if json {
            yaml_args.push("--json");
            toml_args.push("--json");
        }
        let from_yaml = plugins(&yaml_args);
        let from_toml = plugins(&toml_args);
        assert_eq!(from_yaml, from_toml, "json={json}");
        // The embedded default is config/local.yaml.
        let embedded = plugins(if json {
            &["plugins", "--json"]
        } else {
            &["plugins"]
        });
        assert_eq!(embedded, from_yaml, "json={json}");
    }
}

#[test]
fn plugins_lists_load_order_services_and_versions() {
    require(&LOCAL);
    let listing = plugins(&["plugins"]);
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 3, "{listing}");
    assert!(lines[0].starts_with("#  ID"), "{listing}");
    let first: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(first[..3], ["1", "fs", "dsh-fs-local"], "{listing}");
    assert_eq!(first[4..], ["fs", "-", "fs"], "{listing}");
    let second: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        second[..3],
        ["2", "subprocess", "dsh-subprocess-local"],
        "{listing}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&plugins(&["plugins", "--json"])).expect("JSON");
    let list = json.as_array().expect("array");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["id"], "fs");
    assert_eq!(list[0]["provides"], serde_json::json!(["fs"]));
    assert_eq!(list[1]["provides"], serde_json::json!(["subprocess"]));
    assert_eq!(list[1]["serves"], serde_json::json!(["subprocess"]));
    assert!(list[0]["version"].as_str().is_some_and(|v| !v.is_empty()));
    assert!(
        list[0]["library"]
            .as_str()
            .is_some_and(|path| path.ends_with("libdsh_fs_local.so")),
        "{json}"
    );
}

#[test]
fn check_validates_without_creating() {
    require(&LOCAL);
    let out = plugins(&["check"]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "<embedded config/local.yaml>: ok, 2 plugins in load order: fs, subprocess",
            "fs: served by entry \"fs\"",
            "subprocess: served by entry \"subprocess\"",
        ]
    );
    let json: serde_json::Value =
        serde_json::from_str(&plugins(&["check", "--json"])).expect("JSON");
    assert_eq!(json["ok"], true);
    assert_eq!(json["plugins"], serde_json::json!(["fs", "subprocess"]));
    assert_eq!(
        json["served"],
        serde_json::json!({"fs": "fs", "subprocess": "subprocess"})
    );
}

#[test]
fn usage_errors_exit_2() {
    let output = run_dsh(&["no-such-command"]);
    assert_eq!(output.status.code(), Some(2));
    let output = run_dsh(&["exec"]);
    assert_eq!(output.status.code(), Some(2), "exec without argv");
    let output = run_dsh(&["--log", "no=such=filter[", "plugins"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output).1.contains("--log"), "{}", text(&output).1);
}

/// Every plugin library dsh-cli's tests can load is one cargo builds with
/// them (a dev-dependency, into the test executable's directory) and is no
/// older than its crate's sources: after a plugin's source changes, `cargo
/// test -p dsh-cli` runs the plugin as changed, never a library that merely
/// exists in `target/debug`.
#[test]
fn the_plugins_the_tests_load_are_built_from_their_current_sources() {
    let manifest = cargo_toml("Cargo.toml");
    let workspace = cargo_toml("../../Cargo.toml");
    let plugins: Vec<&str> = manifest["dev-dependencies"]
        .as_table()
        .expect("[dev-dependencies]")
        .keys()
        .map(String::as_str)
        .filter(|package| {
            workspace["workspace"]["dependencies"]
                .get(package)
                .is_some_and(|spec| spec.get("path").is_some())
        })
        .filter(|package| {
            let dir = package_dir(package);
            let path = dir.join("Cargo.toml");
            let crate_types = std::fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
                .parse::<toml::Table>()
                .unwrap_or_else(|err| panic!("parse {}: {err}", path.display()))
                .get("lib")
                .and_then(|lib| lib.get("crate-type"))
                .cloned();
            crate_types.is_some_and(|types| types.to_string().contains("cdylib"))
        })
        .collect();
    for expected in LOCAL
        .iter()
        .chain(&["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"])
        .chain(&["dsh-probe-e2b", "dsh-probe-fs", "dsh-probe-subprocess"])
        .chain(&["dsh-example-fs-readonly"])
    {
        assert!(plugins.contains(expected), "{expected} in {plugins:?}");
    }
    for package in plugins {
        assert_eq!(library(package).parent(), Some(plugin_dir().as_path()));
    }
}
