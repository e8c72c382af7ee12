//! Inherit mode copies output to the host's own stdout and stderr. This
//! binary holds one test because it redirects the process-wide descriptors
//! 1 and 2 while it runs.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::support::{provider, sh};
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SubprocessProvider};

/// Points `target` (1 or 2) at a new pipe; returns the saved original and
/// the pipe's read end.
fn capture(target: i32) -> (OwnedFd, OwnedFd) {
    let (read, write) = rustix::pipe::pipe().expect("pipe");
    // SAFETY: plain descriptor syscalls on descriptors we own; `target` is
    // restored by `restore` before the test ends.
    unsafe {
        let saved = libc::dup(target);
        assert!(saved >= 0);
        assert!(libc::dup2(write.as_raw_fd(), target) >= 0);
        (OwnedFd::from_raw_fd(saved), read)
    }
}

fn restore(target: i32, saved: OwnedFd) {
    // SAFETY: see `capture`.
    unsafe {
        assert!(libc::dup2(saved.as_raw_fd(), target) >= 0);
    }
}

#[test]
fn inherit_copies_output_to_the_host_descriptors() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (saved_out, out_read) = capture(1);
    let (saved_err, err_read) = capture(2);
    let totals = runtime.block_on(async {
        let p = provider();
        let mut spec = sh("printf 'to stdout\\n'; printf 'to stderr\\n' >&2");
        spec.stdout = OutputMode::Inherit;
        spec.stderr = OutputMode::Inherit;
        let process = p.spawn(spec).await.expect("spawn");
        assert!(
            process.take_stdout().is_none(),
            "inherit mode has no stream"
        );
        let status = process.wait().await.expect("wait");
        let out = process
            .read_output(OutputStream::Stdout, 0, 100)
            .await
            .expect("read");
        let err = process
            .read_output(OutputStream::Stderr, 0, 100)
            .await
            .expect("read");
        p.dispose().await.expect("dispose");
        (status, out, err)
    });
    restore(1, saved_out);
    restore(2, saved_err);
    drop(runtime);

    let (status, out, err) = totals;
    assert!(status.success());
    assert_eq!(
        (out.total, out.bytes.len()),
        (10, 0),
        "counted, not retained"
    );
    assert_eq!(err.total, 10);
    let read_all = |fd: OwnedFd| {
        // Every write end is closed now (restored descriptors, dead child).
        let mut file = std::fs::File::from(fd);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text).expect("read");
        text
    };
    assert_eq!(read_all(out_read), "to stdout\n");
    assert_eq!(read_all(err_read), "to stderr\n");
}
