//! `DecoratedFs`: every call goes through the hook of its kind with its
//! operation and path; a refusal keeps the wrapped provider from being
//! called; `after_write` sees how each change ended; `on_resolve` sees
//! `resolve`'s cwd and `filter_list` decides what a listing shows.

use std::sync::{Arc, Mutex};

use dsh_plugin_api::decorate::{DecoratedFs, FsCall, FsHooks};
use dsh_plugin_api::fs::{DirEntry, Edit, FsProvider, WriteGuard};
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
    // Without `on_resolve`, `resolve` reaches `on_read` as before.
    assert_eq!(
        fs.resolve("b.txt", Some("/d")).await.unwrap().path,
        "/d/b.txt"
    );
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
            "read resolve b.txt None",
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

/// Confines `resolve` to `/work` — a relative path with a cwd outside it is
/// refused — and hides entries named `.hidden*` from listings.
struct Confine {
    resolved: Mutex<Vec<String>>,
}

#[async_trait]
impl FsHooks for Confine {
    async fn on_resolve(&self, path: &str, cwd: Option<&str>) -> Result<()> {
        self.resolved
            .lock()
            .unwrap()
            .push(format!("{path} {cwd:?}"));
        match cwd {
            Some(cwd) if !path.starts_with('/') && !cwd.starts_with("/work") => Err(Error::new(
                ErrorKind::PermissionDenied,
                format!("resolve: cwd {cwd} is outside /work"),
            )
            .with_subject(path)),
            _ => Ok(()),
        }
    }

    async fn filter_list(&self, dir: &str, entries: Vec<DirEntry>) -> Result<Vec<DirEntry>> {
        if dir == "/forbidden" {
            return Err(
                Error::new(ErrorKind::PermissionDenied, "list: forbidden").with_subject(dir)
            );
        }
        Ok(entries
            .into_iter()
            .filter(|entry| !entry.name.starts_with(".hidden"))
            .collect())
    }
}

#[tokio::test]
async fn resolve_shows_its_cwd_and_listings_are_filtered() {
    let inner: Arc<dyn FsProvider> = Arc::new(MemoryFs::new("/", Arc::new(Counters::default())));
    let fs = DecoratedFs::new(
        inner.clone(),
        Confine {
            resolved: Mutex::default(),
        },
    );
    for path in ["/work/a", "/work/.hidden-b", "/work/c", "/forbidden/x"] {
        inner
            .write(path, Bytes::from_static(b"x"), WriteGuard::CreateNew)
            .await
            .unwrap();
    }

    assert_eq!(
        fs.resolve("a", Some("/work")).await.unwrap().path,
        "/work/a"
    );
    assert_eq!(
        fs.resolve("/work/c", Some("/etc")).await.unwrap().path,
        "/work/c"
    );
    let refused = fs.resolve("passwd", Some("/etc")).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::PermissionDenied, "{refused}");
    assert_eq!(refused.message(), "resolve: cwd /etc is outside /work");
    assert_eq!(
        *fs.hooks().resolved.lock().unwrap(),
        [
            "a Some(\"/work\")",
            "/work/c Some(\"/etc\")",
            "passwd Some(\"/etc\")"
        ]
    );

    let names: Vec<String> = fs
        .list("/work")
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    assert_eq!(
        names,
        ["a", "c"],
        "the hidden entry is filtered out, order kept"
    );
    assert_eq!(inner.list("/work").await.unwrap().len(), 3);
    let err = fs.list("/forbidden").await.unwrap_err();
    assert_eq!(
        (err.kind(), err.subject()),
        (ErrorKind::PermissionDenied, Some("/forbidden"))
    );
    // A failing inner list never reaches the filter.
    let missing = fs.list("/missing").await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
}
