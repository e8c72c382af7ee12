//! The plugin: its configuration (none), its injected owner, the built
//! `libdsh_fs_e2b.so` serving `fs` across the ABI, and the shipped
//! composition (`dsh-e2b-owner` + `dsh-fs-e2b` through `dsh-host`) on e2b-local.
//!
//! Needs root, the built server (`cargo build -p e2b-local`) and the
//! plugin libraries (built with this crate's tests: `dsh-e2b-owner` is a
//! dev-dependency, and cdylibs land beside the test executable).

use std::path::PathBuf;
use std::time::Duration;

use dsh_fs_e2b::FsE2bPlugin;
use dsh_host::{Host, ManifestFormat};
use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::fs::{Edit, FileKind, FsProvider, WriteGuard};
use dsh_plugin_api::host::{CreateRequest, PluginLibrary, library_file_name};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::{Bytes, CreateContext, ErrorKind, Injected, Plugin, Service, ServiceKind};
use e2b_client::{Api, ConnectionOptions};
use serde_json::json;

use crate::support::{CWD, Env};

fn context(config: serde_json::Value, services: Vec<Service>) -> CreateContext {
    CreateContext {
        id: "fs".into(),
        config,
        services: Injected::new(services),
    }
}

/// Writes, reads, edits, lists and stats through `fs`.
async fn exercise(fs: &dyn FsProvider, dir: &str) {
    let path = format!("{dir}/through/a.txt");
    let version = fs
        .write(
            &path,
            Bytes::from_static(b"one\r\ntwo\r\n"),
            WriteGuard::CreateNew,
        )
        .await
        .unwrap();
    let read = fs.read_text(&path).await.unwrap();
    assert_eq!(read.text, "one\r\ntwo\r\n");
    assert_eq!(read.version, version);
    let outcome = fs
        .edit(
            &path,
            vec![Edit {
                old: "two\n".into(),
                new: "2\nthree\n".into(),
                replace_all: false,
            }],
            WriteGuard::IfVersion(version),
        )
        .await
        .unwrap();
    assert_eq!(outcome.replacements, 1);
    let bytes = collect_bytes(fs.read_bytes(&path).await.unwrap().chunks)
        .await
        .unwrap();
    assert_eq!(bytes, b"one\r\n2\r\nthree\r\n");
    let entries = fs.list(&format!("{dir}/through")).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "a.txt");
    assert_eq!(entries[0].metadata.version, outcome.version);
    assert_eq!(fs.stat(&path).await.unwrap().kind, FileKind::File);
    let missing = fs.stat(&format!("{dir}/missing")).await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_takes_no_config_and_needs_the_owner() {
    let env = Env::start().await;
    let owner = Service::Owner(OwnerKind::E2B, env.owner());
    for config in [json!(null), json!({})] {
        let plugin = FsE2bPlugin::create(context(config, vec![owner.clone()]))
            .await
            .unwrap();
        assert!(matches!(plugin.services().as_slice(), [Service::Fs(_)]));
        plugin.dispose().await.unwrap();
    }
    let err = FsE2bPlugin::create(context(json!({ "cwd": "/tmp" }), vec![owner]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("config"), "{err}");
    assert!(err.to_string().contains("cwd"), "{err}");
    let err = FsE2bPlugin::create(context(json!(null), Vec::new()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("e2b"), "{err}");
}

/// The cdylib cargo built for this test run, beside the test executable
/// (`target/<profile>/deps`): this package's own library or a
/// dev-dependency's, so never older than its sources.
fn library(package: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let path = exe.with_file_name(library_file_name(package));
    assert!(
        path.is_file(),
        "{} was not built beside the test executable",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_library_serves_fs_across_the_abi() {
    let env = Env::start().await;
    let library = PluginLibrary::load(&library("dsh-fs-e2b")).expect("load");
    let descriptor = library.descriptor();
    assert_eq!(descriptor.name, "dsh-fs-e2b");
    assert_eq!(descriptor.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(descriptor.provides, vec![ServiceKind::Fs]);
    assert_eq!(descriptor.inject, vec![ServiceKind::Owner(OwnerKind::E2B)]);
    let instance = library
        .create(CreateRequest {
            id: "fs".into(),
            config: json!(null),
            services: vec![Service::Owner(OwnerKind::E2B, env.owner())],
        })
        .await
        .expect("create");
    let fs = match instance.services() {
        [Service::Fs(fs)] => fs.clone(),
        other => panic!("expected one fs service, got {other:?}"),
    };
    exercise(fs.as_ref(), CWD).await;
    drop(fs);
    instance.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_composition_works_and_leaves_no_sandbox() {
    let env = Env::start().await;
    let server = env.server();
    let manifest = format!(
        "plugins:
  - id: e2b
    name: dsh-e2b-owner
    config:
      apiKey: {}
      apiUrl: {}
      sandboxUrl: {}
      cwd: /home/user/project
  - id: fs
    name: dsh-fs-e2b
",
        server.api_key(),
        server.api_url(),
        server.sandbox_url()
    );
    let host = Host::from_str(&manifest, ManifestFormat::Yaml)
        .await
        .expect("start the composition");
    let fs = host.fs().unwrap();
    let sandbox_id = host.owner(OwnerKind::E2B).unwrap().info().sandbox_id;
    assert_eq!(
        fs.resolve(".", None).await.unwrap().path,
        "/home/user/project"
    );
    exercise(fs.as_ref(), "relative").await;
    drop(fs);
    host.dispose().await.expect("dispose");

    let api = Api::new(
        ConnectionOptions::default()
            .with_api_key(server.api_key())
            .with_api_url(server.api_url())
            .with_sandbox_url(server.sandbox_url())
            .with_request_timeout(Some(Duration::from_secs(30)))
            .resolve_with(|_| None)
            .unwrap(),
    );
    let gone = api.sandbox_info(&sandbox_id).await.unwrap_err();
    assert!(
        gone.is_sandbox_gone(),
        "the composition's sandbox {sandbox_id} outlived its disposal: {gone}"
    );
}
