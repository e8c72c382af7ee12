//! The decorator hands on what its inner provider produced without a copy:
//! loaded by a host over the in-memory probe `fs`, a buffer the host wrote
//! to the inner provider comes back through the decorator at the address
//! the host allocated — streamed chunks (the decorator returns the inner
//! provider's stream, which crosses as the inner plugin's own stream
//! object) and whole text (which crosses twice, owners nested: host →
//! probe → decorator → host). Every owner is released by the binary that
//! made it, innermost last, after the host disposed everything.

use dsh_host::Host;
use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use dsh_plugin_api::{Bytes, Service, ServiceKind, Text};
use futures::StreamExt;

use crate::support::start_host;

const MANIFEST: &str = "\
plugins:
  - id: e2b
    name: dsh-probe-e2b
  - id: inner
    name: dsh-probe-fs
    inject: { e2b: e2b }
  - id: fs
    name: dsh-example-fs-readonly
    inject: { fs: inner }
";

fn fs_of(host: &Host, id: &str) -> std::sync::Arc<dyn FsProvider> {
    match host.service_of(id, ServiceKind::Fs).expect("an fs") {
        Service::Fs(fs) => fs,
        _ => unreachable!("service_of matched the kind"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decorator_hands_on_its_inner_providers_payloads_without_copies() {
    let host = start_host(MANIFEST, "zero-copy.yaml").await;
    let inner = fs_of(&host, "inner");
    let readonly = fs_of(&host, "fs");

    let blob = Bytes::from(
        (0..20_000)
            .map(|index| (index % 253) as u8)
            .collect::<Vec<u8>>(),
    );
    inner
        .write("blob", blob.clone(), WriteGuard::CreateNew)
        .await
        .expect("write to the inner provider");
    let text = Text::from("zwölf Boxkämpfer jagen Viktor quer über den Sylter Deich\n".repeat(50));
    inner
        .write("text", text.as_bytes().clone(), WriteGuard::CreateNew)
        .await
        .expect("write text");

    let chunks: Vec<Bytes> = readonly
        .read_bytes("blob")
        .await
        .expect("read_bytes through the decorator")
        .chunks
        .map(|chunk| chunk.expect("chunk"))
        .collect()
        .await;
    let mut offset = 0;
    for chunk in &chunks {
        assert_eq!(
            chunk.as_ptr(),
            blob.as_ptr().wrapping_add(offset),
            "chunk at {offset} is the host's own buffer"
        );
        offset += chunk.len();
    }
    assert_eq!(offset, blob.len());

    let file = readonly
        .read_text("text")
        .await
        .expect("read_text through the decorator");
    assert_eq!(file.text, text);
    assert_eq!(file.text.as_ptr(), text.as_ptr(), "nested owners, no copy");

    // The decorator still refuses writes (nothing reached the inner fs).
    assert!(
        readonly
            .write("blob", Bytes::new(), WriteGuard::Overwrite)
            .await
            .is_err()
    );

    drop((inner, readonly));
    host.dispose().await.expect("dispose");
    // Dropped after every instance is gone: each owner's release is the
    // code of the binary that made it, and libraries are never unloaded.
    drop(blob);
    assert_eq!(file.text, text);
    assert_eq!(chunks.iter().map(Bytes::len).sum::<usize>(), 20_000);
    drop((chunks, file));
}
