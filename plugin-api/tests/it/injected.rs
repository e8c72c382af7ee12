//! Plugin → injected service: the subprocess probe's `fs` and `e2b`
//! programs call its injected services from inside the plugin, so every
//! method of those seams is driven across the boundary in the other
//! direction — once with services of other plugins (plugin → plugin; the
//! host hands on the FFI objects underneath its proxies) and once with
//! services the host implements itself (plugin → host).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::host::PluginInstance;
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{SpawnSpec, SubprocessProvider};
use dsh_plugin_api::{Service, ServiceKind};
use dsh_probe_common::Counters;
use dsh_probe_common::fake_owner::FakeOwner;
use dsh_probe_common::memory_fs::MemoryFs;
use serde_json::{Value, json};

use crate::support::{self, World};

struct Output {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

async fn run(subprocess: &Arc<dyn SubprocessProvider>, argv: &[&str]) -> Output {
    let process = subprocess
        .spawn(SpawnSpec::new(argv.iter().copied()))
        .await
        .expect("spawn");
    let stdout = tokio::spawn(collect_bytes(process.take_stdout().expect("stdout")));
    let stderr = tokio::spawn(collect_bytes(process.take_stderr().expect("stderr")));
    let status = process.wait().await.expect("wait");
    Output {
        code: status.code,
        stdout: stdout.await.expect("join").expect("stdout"),
        stderr: stderr.await.expect("join").expect("stderr"),
    }
}

/// Runs a program that prints one JSON document and returns it.
async fn json_of(subprocess: &Arc<dyn SubprocessProvider>, argv: &[&str]) -> Value {
    let output = run(subprocess, argv).await;
    let value: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{argv:?} printed no JSON ({err}): {:?}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    let expected_code = if value.get("ok").is_some() { 0 } else { 1 };
    assert_eq!(output.code, Some(expected_code), "{argv:?}: {value}");
    value
}

/// The same script against any injected `fs` whose cwd is `/probe/e2b`:
/// every method, with values checked.
async fn every_fs_method(subprocess: &Arc<dyn SubprocessProvider>) {
    let text = "héllo wörld";
    let version = json_of(
        subprocess,
        &["fs", "write", "notes/a.txt", text, "create-new"],
    )
    .await;
    let version = version["ok"].as_str().expect("a version").to_owned();
    assert_eq!(
        json_of(
            subprocess,
            &["fs", "write", "notes/a.txt", "x", "create-new"]
        )
        .await["error"]["kind"],
        3,
        "AlreadyExists"
    );
    assert_eq!(
        json_of(subprocess, &["fs", "resolve", "notes/a.txt"]).await,
        json!({"ok": {"path": "/probe/e2b/notes/a.txt", "uri": "file:///probe/e2b/notes/a.txt"}})
    );
    assert_eq!(
        json_of(subprocess, &["fs", "resolve", "a.txt", "/probe/e2b/notes"]).await["ok"]["path"],
        "/probe/e2b/notes/a.txt"
    );
    assert_eq!(
        json_of(subprocess, &["fs", "contains", "/probe/e2b", "notes/a.txt"]).await,
        json!({"ok": true})
    );
    assert_eq!(
        json_of(
            subprocess,
            &["fs", "contains", "/probe/e2b/notes", "/probe"]
        )
        .await,
        json!({"ok": false})
    );
    let stat = json_of(subprocess, &["fs", "stat", "notes/a.txt"]).await;
    assert_eq!(
        stat,
        json!({"ok": {"kind": "file", "size": text.len(), "mode": 0o644, "symlinkTarget": null, "version": version}})
    );
    assert_eq!(
        json_of(subprocess, &["fs", "lstat", "notes/a.txt"]).await,
        stat
    );
    let list = json_of(subprocess, &["fs", "list", "notes"]).await;
    assert_eq!(list["ok"].as_array().expect("entries").len(), 1);
    assert_eq!(list["ok"][0]["name"], "a.txt");
    assert_eq!(list["ok"][0]["path"], "/probe/e2b/notes/a.txt");
    assert_eq!(list["ok"][0]["metadata"], stat["ok"]);
    assert_eq!(
        json_of(subprocess, &["fs", "read_text", "notes/a.txt"]).await,
        json!({"ok": {"text": text, "version": version}})
    );
    let streamed = run(subprocess, &["fs", "stream_text", "notes/a.txt"]).await;
    assert_eq!(
        (streamed.code, streamed.stdout.as_slice()),
        (Some(0), text.as_bytes())
    );
    let bytes = run(subprocess, &["fs", "read_bytes", "notes/a.txt"]).await;
    assert_eq!(
        (bytes.code, bytes.stdout.as_slice()),
        (Some(0), text.as_bytes())
    );
    let edited = json_of(subprocess, &["fs", "edit", "notes/a.txt", "wörld", "world"]).await;
    assert_eq!(edited["ok"]["replacements"], 1);
    assert_eq!(
        json_of(subprocess, &["fs", "read_text", "notes/a.txt"]).await["ok"]["text"],
        "héllo world"
    );
    assert_eq!(
        json_of(subprocess, &["fs", "mkdir", "deep/x"]).await,
        json!({"ok": null})
    );
    assert_eq!(
        json_of(subprocess, &["fs", "rename", "notes", "deep/x/notes"]).await,
        json!({"ok": null})
    );
    assert_eq!(
        json_of(subprocess, &["fs", "read_text", "deep/x/notes/a.txt"]).await["ok"]["text"],
        "héllo world"
    );
    assert_eq!(
        json_of(subprocess, &["fs", "remove", "deep"]).await,
        json!({"ok": true})
    );
    assert_eq!(
        json_of(subprocess, &["fs", "stat", "deep"]).await,
        json!({"error": {"kind": 1, "message": "stat: no such file or directory", "subject": "deep"}})
    );
    // Error kinds and panics cross into the plugin that called.
    assert_eq!(
        json_of(subprocess, &["fs", "stat", "/.probe/error/4"]).await,
        json!({"error": {"kind": 4, "message": "stat: injected conflict (code 4)", "subject": "/.probe/error/4"}})
    );
    let panicked = json_of(subprocess, &["fs", "stat", "/.probe/panic"]).await;
    assert_eq!(panicked["error"]["kind"], 15);
    // Streams flow through two boundaries, in order.
    let streamed = run(subprocess, &["fs", "read_bytes", "/.probe/stream/8"]).await;
    assert_eq!(streamed.code, Some(0));
    assert_eq!(streamed.stdout.len(), 8 * 1024);
    assert!(
        streamed
            .stdout
            .chunks(1024)
            .enumerate()
            .all(|(index, chunk)| chunk.iter().all(|byte| *byte == index as u8))
    );
    let failed = run(subprocess, &["fs", "read_bytes", "/.probe/panic-stream"]).await;
    assert_eq!(failed.code, Some(1));
    assert_eq!(
        failed.stdout.len(),
        1024,
        "the chunk before the panic arrived"
    );
    let error: Value = serde_json::from_slice(&failed.stderr).expect("error document");
    assert_eq!(error["error"]["kind"], 15);
}

/// Every owner method through the injected owner.
async fn every_owner_method(subprocess: &Arc<dyn SubprocessProvider>, sandbox_id: &str) {
    let info = json_of(subprocess, &["e2b", "info"]).await;
    assert_eq!(info["ok"]["sandboxId"], sandbox_id);
    assert_eq!(info["ok"]["cwd"], "/probe/e2b");
    assert_eq!(
        json_of(subprocess, &["e2b", "alive"]).await,
        json!({"ok": true})
    );
    let echo = json_of(
        subprocess,
        &["e2b", "envd", "PUT", "/files?path=/x", "payload"],
    )
    .await;
    assert_eq!(echo["ok"]["status"], 200);
    assert_eq!(echo["ok"]["headers"]["x-echo-method"], "PUT");
    assert_eq!(echo["ok"]["headers"]["x-echo-path"], "/files?path=/x");
    assert_eq!(echo["ok"]["headers"]["x-probe"], "subprocess");
    assert_eq!(echo["ok"]["body"], "payload");
    let err = json_of(subprocess, &["e2b", "envd", "GET", "/.probe/error/12"]).await;
    assert_eq!(err["error"]["kind"], 12);
}

fn subprocess_of(instance: &PluginInstance) -> Arc<dyn SubprocessProvider> {
    match support::service(instance, ServiceKind::Subprocess) {
        Service::Subprocess(subprocess) => subprocess,
        _ => unreachable!("service() matched the kind"),
    }
}

/// A subprocess probe injected with an owner and an fs the host implements
/// itself (in this process), sharing one set of counters.
struct HostServices {
    counters: Arc<Counters>,
    fs: Arc<MemoryFs>,
    instance: PluginInstance,
}

async fn host_services() -> HostServices {
    let counters = Arc::new(Counters::default());
    let owner = Arc::new(FakeOwner::new("e2b", counters.clone()));
    let fs = Arc::new(MemoryFs::new("/probe/e2b", counters.clone()));
    let instance = support::create(
        "dsh-probe-subprocess",
        "subprocess",
        Value::Null,
        vec![
            Service::Owner(OwnerKind::E2B, owner),
            Service::Fs(fs.clone()),
        ],
    )
    .await;
    HostServices {
        counters,
        fs,
        instance,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_of_other_plugins_work_inside_a_plugin() {
    let world = World::new(Value::Null).await;
    let subprocess = world.subprocess();
    every_fs_method(&subprocess).await;
    every_owner_method(&subprocess, "probe-e2b").await;
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_the_host_implements_work_inside_a_plugin() {
    let HostServices {
        counters,
        fs,
        instance,
    } = host_services().await;
    let subprocess = subprocess_of(&instance);
    every_fs_method(&subprocess).await;
    every_owner_method(&subprocess, "probe-e2b").await;
    // The plugin's writes landed in the host's own object.
    json_of(
        &subprocess,
        &["fs", "write", "/probe/e2b/from-plugin", "hi"],
    )
    .await;
    assert_eq!(
        fs.read_text("/probe/e2b/from-plugin")
            .await
            .expect("host read")
            .text,
        "hi"
    );
    assert!(counters.calls.load(Ordering::SeqCst) > 20);
    instance.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_call_inside_a_plugin_cancels_it_in_the_injected_plugin() {
    let world = World::new(Value::Null).await;
    let subprocess = world.subprocess();
    let fs = world.fs();
    let state = || {
        let fs = fs.clone();
        async move {
            let text = fs.read_text("/.probe/state").await.expect("state").text;
            serde_json::from_str::<Value>(&text).expect("JSON")
        }
    };
    let process = subprocess
        .spawn(SpawnSpec::new(["fs", "stat", "/.probe/hang"]))
        .await
        .expect("spawn");
    while state().await["hangsStarted"] != 1 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(state().await["hangsCancelled"], 0);
    // Terminating the fake process drops its program, which drops the
    // injected call: the fs plugin sees the cancellation.
    process
        .terminate(Duration::from_millis(10))
        .await
        .expect("terminate");
    let mut cancelled = state().await["hangsCancelled"].clone();
    for _ in 0..100 {
        if cancelled == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        cancelled = state().await["hangsCancelled"].clone();
    }
    assert_eq!(cancelled, 1);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_service_sees_cancellation_from_inside_a_plugin() {
    let HostServices {
        counters, instance, ..
    } = host_services().await;
    let subprocess = subprocess_of(&instance);
    let process = subprocess
        .spawn(SpawnSpec::new(["fs", "list", "/.probe/hang"]))
        .await
        .expect("spawn");
    while counters.hangs_started.load(Ordering::SeqCst) != 1 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    process
        .terminate(Duration::from_millis(10))
        .await
        .expect("terminate");
    for _ in 0..100 {
        if counters.hangs_cancelled.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(counters.hangs_cancelled.load(Ordering::SeqCst), 1);
    instance.dispose().await.expect("dispose");
}
