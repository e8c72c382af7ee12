//! `DecoratedFs`: every call goes through the hook of its kind with its
//! operation and path; a refusal keeps the wrapped provider from being
//! called; `after_write` sees how each change ended.

use std::sync::{Arc, Mutex};

use dsh_plugin_api::decorate::{DecoratedFs, FsCall, FsHooks};
use dsh_plugin_api::fs::{Edit, FsProvider, WriteGuard};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result, async_trait};
use dsh_probe_common::magic::Counters;
use dsh_probe_common::memory_fs::MemoryFs;

/// Records every hook call; refuses anything under `/secret`.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl Recorder {
    fn note(&self, text: String) {
        self.seen.lock().unwrap().push(text);
    }

    fn check(&self, kind: &str, call: FsCall<'_>) -> Result<()> {
        self.note(format!(
            "{kind} {} {} {:?}",
            call.operation, call.path, call.to
        ));
        if call.path.starts_with("/secret") {
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!("{}: denied", call.operation),
            )
            .with_subject(call.path));
        }
        Ok(())
    }
}

#[async_trait]
impl FsHooks for Recorder {
    async fn on_read(&self, call: FsCall<'_>) -> Result<()> {
        self.check("read", call)
    }

    async fn on_write(&self, call: FsCall<'_>) -> Result<()> {
        self.check("write", call)
    }

    fn after_write(&self, call: FsCall<'_>, outcome: std::result::Result<(), &Error>) {
        self.note(format!(
            "after {} {}",
            call.operation,
            outcome.map_or_else(|err| format!("{:?}", err.kind()), |()| "ok".into())
        ));
    }
}

fn seen(fs: &DecoratedFs<Recorder>) -> Vec<String> {
    std::mem::take(&mut *fs.hooks().seen.lock().unwrap())
}

#[tokio::test]
async fn every_call_passes_its_hook_and_refusals_never_reach_the_inner_fs() {
    let inner: Arc<dyn FsProvider> = Arc::new(MemoryFs::new("/", Arc::new(Counters::default())));
    let fs = DecoratedFs::new(inner.clone(), Recorder::default());

    let version = fs
        .write(
            "/a.txt",
            Bytes::from_static(b"one\n"),
            WriteGuard::CreateNew,
        )
        .await
        .unwrap();
    assert_eq!(inner.read_text("/a.txt").await.unwrap().version, version);
    fs.edit(
        "/a.txt",
        vec![Edit {
            old: "one".into(),
            new: "two".into(),
            replace_all: false,
        }],
        WriteGuard::Overwrite,
    )
    .await
    .unwrap();
    assert_eq!(fs.read_text("/a.txt").await.unwrap().text.as_str(), "two\n");
    let bytes = collect_bytes(fs.read_bytes("/a.txt").await.unwrap().chunks)
        .await
        .unwrap();
    assert_eq!(bytes, b"two\n");
    fs.mkdir("/d").await.unwrap();
    fs.rename("/a.txt", "/d/b.txt").await.unwrap();
    assert_eq!(fs.list("/d").await.unwrap().len(), 1);
    fs.stat("/d/b.txt").await.unwrap();
    // A failure of the inner fs reaches after_write.
    let err = fs
        .write("/d/b.txt", Bytes::from_static(b"x"), WriteGuard::CreateNew)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(fs.remove("/d").await.unwrap());
    assert_eq!(
        seen(&fs),
        [
            "write write /a.txt None",
            "after write ok",
            "write edit /a.txt None",
            "after edit ok",
            "read read_text /a.txt None",
            "read read_bytes /a.txt None",
            "write mkdir /d None",
            "after mkdir ok",
            "write rename /a.txt Some(\"/d/b.txt\")",
            "after rename ok",
            "read list /d None",
            "read stat /d/b.txt None",
            "write write /d/b.txt None",
            "after write AlreadyExists",
            "write remove /d None",
            "after remove ok",
        ]
    );

    // Refused: the caller gets the hook's error, the inner fs is untouched.
    for err in [
        fs.write("/secret", Bytes::from_static(b"x"), WriteGuard::Overwrite)
            .await
            .map(drop)
            .unwrap_err(),
        fs.read_text("/secret").await.map(drop).unwrap_err(),
        fs.lstat("/secret").await.map(drop).unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
        assert_eq!(err.subject(), Some("/secret"));
    }
    assert_eq!(
        inner.stat("/secret").await.unwrap_err().kind(),
        ErrorKind::NotFound,
        "a refused write never reached the inner fs"
    );
    assert!(!seen(&fs).iter().any(|call| call.starts_with("after")));
}
