//! Byte payloads cross the real loader without copies, both ways: a buffer
//! the host writes to a plugin is the buffer the plugin stores, and the
//! chunks the plugin streams back are slices of that same buffer — so the
//! data pointers the host sees are the ones it allocated. Each side frees
//! what it allocated, and a payload received from an instance outlives the
//! instance (the sending library's `release` stays loaded).

use dsh_plugin_api::fs::WriteGuard;
use dsh_plugin_api::{Bytes, Text};
use dsh_probe_common::memory_fs::CHUNK;
use futures::StreamExt;

use crate::support::World;

/// A host buffer of `len` bytes that is not one repeated value, so a copy
/// that reorders or drops bytes would show.
fn host_buffer(len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|index| (index % 251) as u8)
            .collect::<Vec<u8>>(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_bytes_stream_back_at_the_address_the_host_allocated() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    let original = host_buffer(3 * CHUNK + 100);
    fs.write("blob", original.clone(), WriteGuard::CreateNew)
        .await
        .expect("write");

    let read = fs.read_bytes("blob").await.expect("read_bytes");
    let chunks: Vec<Bytes> = read
        .chunks
        .map(|chunk| chunk.expect("chunk"))
        .collect()
        .await;
    assert_eq!(chunks.len(), 4, "the probe streams {CHUNK}-byte chunks");
    let mut offset = 0;
    for chunk in &chunks {
        assert_eq!(
            chunk.as_ptr(),
            original.as_ptr().wrapping_add(offset),
            "chunk at offset {offset}: host → plugin → host without a copy"
        );
        assert_eq!(chunk[..], original[offset..offset + chunk.len()]);
        offset += chunk.len();
    }
    assert_eq!(offset, original.len());
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_text_is_read_back_at_the_address_the_host_allocated() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    let original = Text::from(String::from("grüße aus dem host\n").repeat(64));
    fs.write(
        "notes.txt",
        original.as_bytes().clone(),
        WriteGuard::CreateNew,
    )
    .await
    .expect("write");
    let file = fs.read_text("notes.txt").await.expect("read_text");
    assert_eq!(file.text, original);
    assert_eq!(
        file.text.as_ptr(),
        original.as_ptr(),
        "the text crosses twice without a copy"
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_outlive_the_instance_that_sent_them() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    fs.write("kept", host_buffer(2 * CHUNK), WriteGuard::CreateNew)
        .await
        .expect("write");
    let expected = host_buffer(2 * CHUNK);
    // Plugin-made payloads: the probe's state text and a magic stream it
    // allocates itself.
    let state = fs.read_text("/.probe/state").await.expect("state").text;
    let mut stream = fs
        .read_bytes("/.probe/stream/3")
        .await
        .expect("magic stream")
        .chunks;
    let made_by_plugin = stream.next().await.expect("a chunk").expect("chunk");
    drop(stream);
    let kept = fs
        .read_bytes("kept")
        .await
        .expect("read_bytes")
        .chunks
        .next()
        .await
        .expect("a chunk")
        .expect("chunk");
    drop(fs);
    world.dispose().await;
    // The instances are gone; their libraries are not (never unloaded), so
    // the payloads are still readable and their owners are released by
    // the code of the binary that made them when they drop here.
    assert!(state.starts_with('{'), "{state}");
    assert_eq!(made_by_plugin.len(), 1024);
    assert!(made_by_plugin.iter().all(|&byte| byte == 0));
    assert_eq!(kept[..], expected[..CHUNK]);
    let clone = kept.slice(10..20);
    drop(kept);
    assert_eq!(clone[..], expected[10..20]);
    drop((state, made_by_plugin, clone));
}
