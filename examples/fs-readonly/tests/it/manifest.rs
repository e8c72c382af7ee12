//! The decorator as a host loads it: by manifest, its library found next to
//! the other plugins, composed over `dsh-fs-local`, checked with the
//! conformance kit (the cases a read-only `fs` can pass; fixtures are made
//! through `dsh-subprocess-local`).

use dsh_conformance::{KitOptions, World, run};
use dsh_host::Host;
use dsh_plugin_api::{Bytes, ErrorKind, Service, ServiceKind};

use crate::support::start_host;

const MANIFEST: &str = "\
plugins:
  - id: local
    name: dsh-fs-local
  - id: fs
    name: dsh-example-fs-readonly
    inject: { fs: local }
  - id: subprocess
    name: dsh-subprocess-local
";

async fn start() -> Host {
    start_host(MANIFEST, "readonly.yaml").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_by_manifest_it_passes_the_read_only_parts_of_the_kit() {
    let host = start().await;
    let order: Vec<&str> = host
        .plugins()
        .iter()
        .map(|plugin| plugin.id.as_str())
        .collect();
    assert_eq!(
        order.first(),
        Some(&"local"),
        "the wrapped provider is created first: {order:?}"
    );
    let Service::Fs(fs) = host
        .service_of("fs", ServiceKind::Fs)
        .expect("the read-only fs")
    else {
        panic!("an fs service");
    };
    let world = World {
        fs: Some(fs),
        subprocess: Some(host.subprocess().expect("subprocess")),
    };
    let options = KitOptions {
        read_only_fs: true,
        filter: Some("fs.".into()),
        ..KitOptions::default()
    };
    let report = run(&world, &options, |case| println!("{case}")).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert!(report.passed() >= 10, "the read cases ran: {report}");
    assert!(
        report.skipped() > 0,
        "the write cases are skipped for a read-only fs: {report}"
    );
    host.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_by_manifest_it_refuses_mutations() {
    let host = start().await;
    let Service::Fs(fs) = host
        .service_of("fs", ServiceKind::Fs)
        .expect("the read-only fs")
    else {
        panic!("an fs service");
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("file.txt");
    let path = target.to_str().expect("UTF-8").to_owned();
    let err = fs
        .write(&path, Bytes::from_static(b"x"), Default::default())
        .await
        .expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert_eq!(err.message(), "write: `fs` is a read-only fs");
    assert_eq!(err.subject(), Some(path.as_str()));
    assert!(!target.exists());
    std::fs::write(&target, "kept").expect("write");
    assert_eq!(fs.read_text(&path).await.expect("read").text, "kept");
    host.dispose().await.expect("dispose");
}
