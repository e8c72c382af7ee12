//! The plugin: descriptor, strict config, provided service.

use dsh_fs_local::{FsLocalConfig, FsLocalPlugin};
use dsh_plugin_api::{CreateContext, ErrorKind, Injected, Plugin, Service, ServiceKind};
use serde_json::json;

fn ctx(config: serde_json::Value) -> CreateContext {
    CreateContext {
        id: "fs".into(),
        config,
        services: Injected::default(),
    }
}

#[test]
fn the_descriptor_provides_fs_and_injects_nothing() {
    let descriptor = FsLocalPlugin::DESCRIPTOR;
    assert_eq!(descriptor.name, "dsh-fs-local");
    assert_eq!(descriptor.provides, &[ServiceKind::Fs]);
    assert!(descriptor.inject.is_empty());
    assert_eq!(descriptor.version, env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn a_configured_cwd_roots_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("hello.txt"), "hi").unwrap();
    let plugin = FsLocalPlugin::create(ctx(json!({ "cwd": root })))
        .await
        .unwrap();
    let services = plugin.services();
    assert_eq!(services.len(), 1);
    let Service::Fs(fs) = &services[0] else {
        panic!("expected an fs service, got {:?}", services[0]);
    };
    assert_eq!(fs.read_text("hello.txt").await.unwrap().text, "hi");
    assert_eq!(plugin.fs().cwd(), root);
    plugin.dispose().await.unwrap();
}

#[tokio::test]
async fn no_config_uses_the_process_cwd() {
    let plugin = FsLocalPlugin::create(ctx(serde_json::Value::Null))
        .await
        .unwrap();
    assert_eq!(plugin.fs().cwd(), std::env::current_dir().unwrap());
    let plugin = FsLocalPlugin::create(ctx(json!({}))).await.unwrap();
    assert_eq!(plugin.fs().cwd(), std::env::current_dir().unwrap());
}

#[tokio::test]
async fn bad_configs_are_config_errors_naming_the_field() {
    let cases = [
        (
            json!({ "cwd": "relative/dir" }),
            "config.cwd",
            "not an absolute path",
        ),
        (
            json!({ "cwd": "/definitely/missing/dsh" }),
            "config.cwd",
            "cannot be used",
        ),
        (
            json!({ "cwd": "/etc/passwd" }),
            "config.cwd",
            "not a directory",
        ),
        (json!({ "cwd": "/tmp\u{0}x" }), "config.cwd", "NUL"),
        (json!({ "cwd": 42 }), "config.cwd", "invalid type"),
        (json!({ "cwdd": "/tmp" }), "config", "unknown field `cwdd`"),
        (json!("not an object"), "config", "invalid type"),
    ];
    for (config, field, why) in cases {
        let err = FsLocalPlugin::create(ctx(config.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{config}: {err}");
        assert!(err.message().starts_with(field), "{config}: {err}");
        assert!(err.message().contains(why), "{config}: {err}");
        assert_eq!(err.subject(), Some("fs"), "{config}");
    }
}

#[test]
fn the_config_type_is_strict_camel_case() {
    let parsed: FsLocalConfig = serde_json::from_value(json!({ "cwd": "/w" })).unwrap();
    assert_eq!(parsed.cwd.as_deref(), Some("/w"));
    assert!(serde_json::from_value::<FsLocalConfig>(json!({ "extra": 1 })).is_err());
}
