//! The plugin model: descriptor, strict config, the one service, disposal.

use dsh_plugin_api::subprocess::SpawnSpec;
use dsh_plugin_api::{CreateContext, ErrorKind, Injected, Plugin, Service, ServiceKind};
use dsh_subprocess_local::SubprocessLocalPlugin;

fn ctx(config: serde_json::Value) -> CreateContext {
    CreateContext {
        id: "subprocess".into(),
        config,
        services: Injected::default(),
    }
}

#[test]
fn descriptor_provides_subprocess_and_injects_nothing() {
    let descriptor = SubprocessLocalPlugin::DESCRIPTOR;
    assert_eq!(descriptor.name, "dsh-subprocess-local");
    assert_eq!(descriptor.provides, &[ServiceKind::Subprocess]);
    assert!(descriptor.inject.is_empty());
    assert!(semver_like(descriptor.version), "{}", descriptor.version);
}

fn semver_like(version: &str) -> bool {
    version.split('.').count() == 3 && version.split('.').all(|part| part.parse::<u32>().is_ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_from_config_it_serves_subprocess_until_disposed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path().canonicalize().expect("canonical");
    let plugin = SubprocessLocalPlugin::create(ctx(serde_json::json!({
        "cwd": cwd.to_str().expect("utf-8"),
        "spillDir": cwd.to_str().expect("utf-8"),
        "killGraceMs": 200,
    })))
    .await
    .expect("create");
    let services = plugin.services();
    assert_eq!(services.len(), 1);
    let Service::Subprocess(subprocess) = &services[0] else {
        panic!("expected subprocess, got {:?}", services[0]);
    };
    let process = subprocess
        .spawn(SpawnSpec::new(["pwd"]))
        .await
        .expect("spawn");
    let out = dsh_plugin_api::stream::collect_bytes(process.take_stdout().expect("stdout"))
        .await
        .expect("stdout");
    assert_eq!(out, format!("{}\n", cwd.display()).into_bytes());

    let sleeper = subprocess
        .spawn(SpawnSpec::new(["sleep", "30"]))
        .await
        .expect("spawn");
    plugin.dispose().await.expect("dispose");
    assert!(
        sleeper.wait().await.expect("wait").signal.is_some(),
        "disposal ended it"
    );
    let err = subprocess
        .spawn(SpawnSpec::new(["true"]))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_config_is_a_config_error_naming_the_field() {
    for (config, field) in [
        (serde_json::json!({"bogus": 1}), "unknown field `bogus`"),
        (
            serde_json::json!({"killGraceMs": "soon"}),
            "config.killGraceMs",
        ),
        (serde_json::json!({"cwd": "/no/such/dir"}), "config.cwd"),
        (
            serde_json::json!({"spillDir": "relative"}),
            "config.spillDir",
        ),
    ] {
        let err = SubprocessLocalPlugin::create(ctx(config.clone()))
            .await
            .err()
            .unwrap_or_else(|| panic!("{config} must fail"));
        assert_eq!(err.kind(), ErrorKind::Config, "{err}");
        assert!(err.message().contains(field), "{config}: {err}");
        assert_eq!(err.subject(), Some("subprocess"), "names the entry");
    }
    let plugin = SubprocessLocalPlugin::create(ctx(serde_json::Value::Null))
        .await
        .expect("no config");
    plugin.dispose().await.expect("dispose");
}
