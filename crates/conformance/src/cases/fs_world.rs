//! The world-side operations — `walk`, `search`, `read_many` and their
//! `beneath` confinement (docs/design.md §5.1, "World-side operations").
//! A native operation must answer exactly what `dsh_provider_kit::world`'s
//! composition over the provider's own primitives answers on the same tree;
//! a provider without one is checked through that composition (what callers
//! then get).

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_plugin_api::fs::{
    FsProvider, ReadManyItem, ReadManyLimits, SearchEvent, SearchLimit, SearchLimits, SearchMode,
    SearchSpec, WalkEvent, WalkSpec,
};
use dsh_plugin_api::{ErrorKind, Result};
use dsh_provider_kit::world::{self, composed};
use futures::{Stream, StreamExt};

use crate::check::{CaseResult, Failure, ensure, ensure_eq};
use crate::context::Cx;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.walk.same_as_composed",
        Fs,
        [Fs, Fixtures, Shell],
        "walk yields the tree breadth-first by name with lstat metadata, skips what .gitignore ignores, never follows a symlink, and answers exactly what the composition over list answers",
        walk_same
    ),
    case!(
        "fs.walk.bounds",
        Fs,
        [Fs, Fixtures],
        "walk keeps its depth, entry and glob bounds and says when it stopped early; a bad glob or depth 0 is InvalidInput",
        walk_bounds
    ),
    case!(
        "fs.search.same_as_composed",
        Fs,
        [Fs, Fixtures],
        "search finds matching lines with context, files with matches and counts in walk order, skips binary and ignored files, and answers exactly what the composition answers",
        search_same
    ),
    case!(
        "fs.search.bounds",
        Fs,
        [Fs, Fixtures],
        "search stops at max_matches, max_files, max_bytes_scanned and max_output_bytes saying which; long lines are windowed around the match; bad patterns and types are InvalidInput",
        search_bounds
    ),
    case!(
        "fs.world.cancellation",
        Fs,
        [Fs, Fixtures],
        "dropping a walk or search stream part-way stops it promptly and leaves the provider usable",
        cancellation
    ),
    case!(
        "fs.read_many.same_as_read_text",
        Fs,
        [Fs, Fixtures],
        "read_many answers each file in request order as read_text does, per-file errors alone, and keeps its per-file and total bounds",
        read_many_same
    ),
    case!(
        "fs.beneath.symlink_races",
        Fs,
        [Fs, FsWrite, Shell],
        "a beneath-confined read_many, walk and search never yield anything outside the root while a symlink is swapped under them (or the provider refuses beneath as Unsupported)",
        beneath_races
    ),
];

fn walk_spec(max_depth: u32, max_entries: u64, globs: &[&str]) -> WalkSpec {
    WalkSpec {
        max_depth,
        max_entries,
        globs: globs.iter().map(|glob| (*glob).to_owned()).collect(),
        gitignore: true,
        beneath: false,
    }
}

fn limits() -> SearchLimits {
    SearchLimits {
        max_matches: 1000,
        max_bytes_scanned: 1 << 30,
        max_files: 10_000,
        max_output_bytes: 1 << 20,
        max_entries: 50_000,
        max_line_chars: 500,
    }
}

fn search_spec(pattern: &str, mode: SearchMode) -> SearchSpec {
    SearchSpec {
        pattern: pattern.to_owned(),
        case_insensitive: false,
        mode,
        globs: Vec::new(),
        types: Vec::new(),
        gitignore: true,
        max_depth: 64,
        beneath: false,
        limits: limits(),
    }
}

/// Every event of a walk's or search's stream (an error ends it).
async fn events<T>(
    cx: &Cx,
    what: &str,
    opened: impl Future<Output = Result<Pin<Box<dyn Stream<Item = Result<T>> + Send>>>>,
) -> std::result::Result<Vec<T>, Failure> {
    let stream = cx.ok(what, opened).await?;
    let events: Vec<Result<T>> = cx.within(what, stream.collect()).await?;
    events
        .into_iter()
        .collect::<Result<Vec<_>>>()
        .map_err(|err| Failure::new(format!("{what}: the stream failed: {err}")))
}

/// The walk through the provider (native, or the composition when it has
/// none) and through the composition, which must agree; the former.
async fn walk_both(
    cx: &Cx,
    root: &str,
    spec: WalkSpec,
) -> std::result::Result<Vec<WalkEvent>, Failure> {
    let fs = cx.fs_shared();
    let native = events(
        cx,
        &format!("walk {root}"),
        world::walk(&fs, root, spec.clone()),
    )
    .await?;
    let composed = events(
        cx,
        &format!("composed walk {root}"),
        composed::walk(fs.clone(), root, spec),
    )
    .await?;
    ensure_eq(
        &format!("walk {root} against the composition over list"),
        &native,
        &composed,
    )?;
    Ok(native)
}

async fn search_both(
    cx: &Cx,
    root: &str,
    spec: SearchSpec,
) -> std::result::Result<Vec<SearchEvent>, Failure> {
    let fs = cx.fs_shared();
    let native = events(
        cx,
        &format!("search {root}"),
        world::search(&fs, root, spec.clone()),
    )
    .await?;
    let composed = events(
        cx,
        &format!("composed search {root}"),
        composed::search(fs.clone(), root, spec),
    )
    .await?;
    ensure_eq(
        &format!("search {root} against the composition"),
        &native,
        &composed,
    )?;
    Ok(native)
}

fn relatives(events: &[WalkEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            WalkEvent::Entry(entry) => Some(entry.relative.clone()),
            WalkEvent::End(_) => None,
        })
        .collect()
}

fn summary(events: &[WalkEvent]) -> std::result::Result<dsh_plugin_api::fs::WalkSummary, Failure> {
    match events.last() {
        Some(WalkEvent::End(summary)) => Ok(*summary),
        other => Err(Failure::new(format!(
            "the walk did not end with its summary: {other:?}"
        ))),
    }
}

/// A small repository: a `.gitignore`, nested directories, a symlink to a
/// directory (never followed) and a binary file.
async fn tree(cx: &Cx) -> std::result::Result<String, Failure> {
    cx.mkdirs("t/.git").await?;
    cx.put("t/.gitignore", b"*.log\n/build\n").await?;
    cx.put("t/a.rs", b"fn alpha() {}\nlet x = 1;\nfn beta() {}\n")
        .await?;
    cx.put("t/b.txt", b"no match here\n").await?;
    cx.put("t/debug.log", b"fn ignored() {}\n").await?;
    cx.put("t/build/out.rs", b"fn built() {}\n").await?;
    cx.put("t/src/lib.rs", b"// lib\nfn gamma() {}\n").await?;
    cx.put("t/src/deep/more.rs", b"fn delta() {}\r\nfn epsilon() {}\n")
        .await?;
    cx.put("t/src/blob.bin", b"fn \0binary\n").await?;
    Ok(cx.path("t"))
}

async fn walk_same(cx: &Cx) -> CaseResult {
    let root = tree(cx).await?;
    cx.symlink(&cx.path("t/src"), "t/src-link").await?;
    let events = walk_both(cx, &root, walk_spec(64, 1000, &[])).await?;
    ensure_eq(
        &format!("walk {root}: entries, breadth-first by name"),
        &relatives(&events),
        &[
            ".gitignore",
            "a.rs",
            "b.txt",
            "src",
            "src-link",
            "src/blob.bin",
            "src/deep",
            "src/lib.rs",
            "src/deep/more.rs",
        ]
        .map(String::from)
        .to_vec(),
    )?;
    let summary = summary(&events)?;
    ensure!(summary.complete, "walk {root}: not complete: {summary:?}");
    ensure_eq(
        &format!("walk {root}: ignored (debug.log, build)"),
        &summary.ignored,
        &2,
    )?;
    for event in &events {
        if let WalkEvent::Entry(entry) = event {
            let lstat = cx
                .ok(&format!("lstat {}", entry.path), cx.fs().lstat(&entry.path))
                .await?;
            ensure_eq(
                &format!("walk {root}: metadata of {}", entry.relative),
                &entry.metadata,
                &lstat,
            )?;
            ensure_eq(
                &format!("walk {root}: path of {}", entry.relative),
                &entry.path,
                &format!("{root}/{}", entry.relative),
            )?;
        }
    }
    Ok(())
}

async fn walk_bounds(cx: &Cx) -> CaseResult {
    let root = tree(cx).await?;
    let shallow = walk_both(cx, &root, walk_spec(1, 1000, &[])).await?;
    ensure_eq(
        &format!("walk {root} to depth 1"),
        &relatives(&shallow),
        &[".gitignore", "a.rs", "b.txt", "src"]
            .map(String::from)
            .to_vec(),
    )?;
    let few = walk_both(cx, &root, walk_spec(64, 3, &[])).await?;
    ensure_eq(
        &format!("walk {root}, 3 entries"),
        &relatives(&few).len(),
        &3,
    )?;
    ensure!(
        !summary(&few)?.complete,
        "walk {root}, 3 entries: says complete"
    );
    let globbed = walk_both(cx, &root, walk_spec(64, 1000, &["*.rs", "!deep"])).await?;
    ensure_eq(
        &format!("walk {root} with globs *.rs, !deep"),
        &relatives(&globbed),
        &["a.rs", "src/lib.rs"].map(String::from).to_vec(),
    )?;
    let fs = cx.fs_shared();
    for (what, spec) in [
        ("depth 0", walk_spec(0, 10, &[])),
        ("glob a[", walk_spec(3, 10, &["a["])),
    ] {
        cx.err(
            &format!("walk {root} with {what}"),
            ErrorKind::InvalidInput,
            world::walk(&fs, &root, spec),
        )
        .await?;
    }
    cx.err(
        &format!("walk {root}/a.rs (a file)"),
        ErrorKind::NotADirectory,
        world::walk(&fs, &format!("{root}/a.rs"), walk_spec(3, 10, &[])),
    )
    .await?;
    Ok(())
}

fn lines(events: &[SearchEvent]) -> Vec<(String, u64, String, bool)> {
    events
        .iter()
        .filter_map(|event| match event {
            SearchEvent::Line(line) => Some((
                line.path.clone(),
                line.line,
                line.text.clone(),
                line.context,
            )),
            _ => None,
        })
        .collect()
}

fn files(events: &[SearchEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter_map(|event| match event {
            SearchEvent::File { path, matches } => Some((path.clone(), *matches)),
            _ => None,
        })
        .collect()
}

fn search_summary(
    events: &[SearchEvent],
) -> std::result::Result<dsh_plugin_api::fs::SearchSummary, Failure> {
    match events.last() {
        Some(SearchEvent::End(summary)) => Ok(*summary),
        other => Err(Failure::new(format!(
            "the search did not end with its summary: {other:?}"
        ))),
    }
}

async fn search_same(cx: &Cx) -> CaseResult {
    let root = tree(cx).await?;
    let at = |rel: &str| format!("{root}/{rel}");
    let found = search_both(
        cx,
        &root,
        search_spec(r"fn \w+", SearchMode::Lines { context: 1 }),
    )
    .await?;
    ensure_eq(
        &format!("search {root} for fn, context 1"),
        &lines(&found),
        &vec![
            (at("a.rs"), 1, "fn alpha() {}".into(), false),
            (at("a.rs"), 2, "let x = 1;".into(), true),
            (at("a.rs"), 3, "fn beta() {}".into(), false),
            (at("src/lib.rs"), 1, "// lib".into(), true),
            (at("src/lib.rs"), 2, "fn gamma() {}".into(), false),
            (at("src/deep/more.rs"), 1, "fn delta() {}".into(), false),
            (at("src/deep/more.rs"), 2, "fn epsilon() {}".into(), false),
        ],
    )?;
    let summary = search_summary(&found)?;
    ensure_eq(
        &format!("search {root}: files searched"),
        &summary.files_searched,
        &5,
    )?;
    ensure_eq(
        &format!("search {root}: files skipped (blob.bin)"),
        &summary.files_skipped,
        &1,
    )?;
    ensure_eq(
        &format!("search {root}: stopped"),
        &summary.stopped_by,
        &None,
    )?;
    let with = search_both(cx, &root, search_spec("fn", SearchMode::FilesWithMatches)).await?;
    ensure_eq(
        &format!("search {root}: files with matches"),
        &files(&with),
        &vec![
            (at("a.rs"), 1),
            (at("src/lib.rs"), 1),
            (at("src/deep/more.rs"), 1),
        ],
    )?;
    let counted = search_both(cx, &root, search_spec("fn", SearchMode::Count)).await?;
    ensure_eq(
        &format!("search {root}: counts"),
        &files(&counted),
        &vec![
            (at("a.rs"), 2),
            (at("src/lib.rs"), 1),
            (at("src/deep/more.rs"), 2),
        ],
    )?;
    let typed = SearchSpec {
        types: vec!["rust".into()],
        globs: vec!["!more.rs".into()],
        case_insensitive: true,
        ..search_spec("FN", SearchMode::Count)
    };
    let typed = search_both(cx, &root, typed).await?;
    ensure_eq(
        &format!("search {root}: type rust, glob !more.rs, case-insensitive"),
        &files(&typed),
        &vec![(at("a.rs"), 2), (at("src/lib.rs"), 1)],
    )?;
    let one = search_both(
        cx,
        &at("a.rs"),
        search_spec("beta", SearchMode::Lines { context: 0 }),
    )
    .await?;
    ensure_eq(
        &format!("search {} (a file)", at("a.rs")),
        &lines(&one),
        &vec![(at("a.rs"), 3, "fn beta() {}".into(), false)],
    )
}

async fn search_bounds(cx: &Cx) -> CaseResult {
    let root = tree(cx).await?;
    let long = format!("{}NEEDLE{}", "a".repeat(3000), "b".repeat(3000));
    cx.put("t/long.txt", long.as_bytes()).await?;
    let bounded = |change: fn(&mut SearchLimits)| {
        let mut spec = search_spec(r"fn \w+", SearchMode::Lines { context: 0 });
        change(&mut spec.limits);
        spec
    };
    for (what, spec, limit, shown) in [
        (
            "max_matches 2",
            bounded(|l| l.max_matches = 2),
            SearchLimit::Matches,
            2,
        ),
        // Walk order: .gitignore (13 bytes, no match), a.rs (2 matches in 38 bytes), …
        (
            "max_files 2",
            bounded(|l| l.max_files = 2),
            SearchLimit::Files,
            2,
        ),
        (
            "max_bytes_scanned 33",
            bounded(|l| l.max_bytes_scanned = 33),
            SearchLimit::BytesScanned,
            1,
        ),
        (
            "max_output_bytes 1",
            bounded(|l| l.max_output_bytes = 1),
            SearchLimit::OutputBytes,
            0,
        ),
    ] {
        let found = search_both(cx, &root, spec).await?;
        ensure_eq(
            &format!("search {root} with {what}: lines"),
            &lines(&found).len(),
            &shown,
        )?;
        ensure_eq(
            &format!("search {root} with {what}: stopped by"),
            &search_summary(&found)?.stopped_by,
            &Some(limit),
        )?;
    }
    let needle = search_both(
        cx,
        &root,
        search_spec("NEEDLE", SearchMode::Lines { context: 0 }),
    )
    .await?;
    let line = needle.iter().find_map(|event| match event {
        SearchEvent::Line(line) => Some(line.clone()),
        _ => None,
    });
    let Some(line) = line else {
        return Err(Failure::new(format!(
            "search {root} for NEEDLE: nothing found"
        )));
    };
    ensure_eq(
        &format!("search {root} for NEEDLE: window start"),
        &line.offset,
        &(3000 - 80),
    )?;
    ensure_eq(
        &format!("search {root} for NEEDLE: line length"),
        &line.len,
        &(long.len() as u64),
    )?;
    ensure!(
        line.text.contains("NEEDLE") && line.text.chars().count() == 500,
        "search {root} for NEEDLE: window {:?}",
        line.text
    );
    let fs = cx.fs_shared();
    for (what, spec) in [
        ("regex (", search_spec("(", SearchMode::Count)),
        (
            "type no-such-type",
            SearchSpec {
                types: vec!["no-such-type".into()],
                ..search_spec("x", SearchMode::Count)
            },
        ),
        (
            "max_matches 0",
            SearchSpec {
                limits: SearchLimits {
                    max_matches: 0,
                    ..limits()
                },
                ..search_spec("x", SearchMode::Count)
            },
        ),
    ] {
        cx.err(
            &format!("search {root} with {what}"),
            ErrorKind::InvalidInput,
            world::search(&fs, &root, spec),
        )
        .await?;
    }
    Ok(())
}

async fn cancellation(cx: &Cx) -> CaseResult {
    cx.put_many((0..100).map(|index| {
        (
            format!("c/d{}/f{index}.txt", index % 10),
            format!("line {index}\n").into_bytes(),
        )
    }))
    .await?;
    let root = cx.path("c");
    let fs = cx.fs_shared();
    let started = Instant::now();
    let mut walk = cx
        .ok(
            &format!("walk {root}"),
            world::walk(&fs, &root, walk_spec(64, 100_000, &[])),
        )
        .await?;
    cx.within(&format!("walk {root}: first entry"), walk.next())
        .await?;
    drop(walk);
    let mut search = cx
        .ok(
            &format!("search {root}"),
            world::search(
                &fs,
                &root,
                search_spec("line", SearchMode::Lines { context: 0 }),
            ),
        )
        .await?;
    cx.within(&format!("search {root}: first result"), search.next())
        .await?;
    drop(search);
    ensure!(
        started.elapsed() < Duration::from_secs(10),
        "dropping part-way walks and searches took {:?}",
        started.elapsed()
    );
    let again = walk_both(cx, &root, walk_spec(64, 100_000, &[])).await?;
    ensure_eq(
        &format!("walk {root} after the dropped ones"),
        &relatives(&again).len(),
        &110,
    )
}

async fn read_many_same(cx: &Cx) -> CaseResult {
    let root = tree(cx).await?;
    let at = |rel: &str| format!("{root}/{rel}");
    cx.put("t/big.txt", &[b'x'; 300]).await?;
    let paths: Vec<String> = [
        "a.rs",
        "missing",
        "src/blob.bin",
        "src",
        "b.txt",
        "big.txt",
        "src/lib.rs",
    ]
    .iter()
    .map(|rel| at(rel))
    .collect();
    let limits = ReadManyLimits {
        max_file_bytes: 200,
        max_total_bytes: 60,
        beneath: None,
    };
    let fs = cx.fs_shared();
    let items = cx
        .ok(
            "read_many",
            world::read_many(&fs, paths.clone(), limits.clone()),
        )
        .await?;
    let composed = cx
        .ok(
            "composed read_many",
            composed::read_many(fs.clone(), paths.clone(), limits),
        )
        .await?;
    // Errors are compared by kind: their wording is the provider's.
    let outcomes = |items: &[ReadManyItem]| -> Vec<(
        String,
        std::result::Result<dsh_plugin_api::fs::TextFile, ErrorKind>,
    )> {
        items
            .iter()
            .map(|item| {
                (
                    item.path.clone(),
                    item.result.clone().map_err(|err| err.kind()),
                )
            })
            .collect()
    };
    ensure_eq(
        "read_many against the composition",
        &outcomes(&items),
        &outcomes(&composed),
    )?;
    ensure_eq(
        "read_many: paths in request order",
        &items
            .iter()
            .map(|item| item.path.clone())
            .collect::<Vec<_>>(),
        &paths,
    )?;
    let kinds: Vec<Option<ErrorKind>> = items
        .iter()
        .map(|item| item.result.as_ref().err().map(|err| err.kind()))
        .collect();
    ensure_eq(
        "read_many: outcome of each",
        &kinds,
        &vec![
            None,
            Some(ErrorKind::NotFound),
            Some(ErrorKind::Binary),
            Some(ErrorKind::IsADirectory),
            None,
            Some(ErrorKind::InvalidInput),
            // 41 + 14 bytes were read; 20 more would pass 60.
            Some(ErrorKind::InvalidInput),
        ],
    )?;
    for item in items.iter().filter(|item| item.result.is_ok()) {
        let alone = cx
            .ok(
                &format!("read_text {}", item.path),
                cx.fs().read_text(&item.path),
            )
            .await?;
        ensure_eq(
            &format!("read_many: {}", item.path),
            &item.result,
            &Ok(alone),
        )?;
    }
    Ok(())
}

/// Swaps `root/d` between a directory inside and a symlink to a directory
/// outside until told to stop; how many swaps it made.
async fn swap(
    fs: Arc<dyn FsProvider>,
    root: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Result<u64> {
    let d = format!("{root}/d");
    let (inside, link) = (format!("{root}/inside"), format!("{root}/link"));
    let mut swaps = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        fs.rename(&inside, &d).await?;
        fs.rename(&d, &inside).await?;
        fs.rename(&link, &d).await?;
        fs.rename(&d, &link).await?;
        swaps += 1;
        tokio::task::yield_now().await;
    }
    Ok(swaps)
}

async fn beneath_races(cx: &Cx) -> CaseResult {
    cx.put("b/outside/secret.txt", b"OUTSIDE\n").await?;
    cx.put("b/root/inside/secret.txt", b"inside\n").await?;
    let root = cx.path("b/root");
    cx.symlink(&cx.path("b/outside"), "b/root/link").await?;
    let fs = cx.fs_shared();
    let confined = ReadManyLimits {
        max_file_bytes: 1024,
        max_total_bytes: 1024,
        beneath: Some(root.clone()),
    };
    let probe = fs
        .read_many(vec!["link/secret.txt".into()], confined.clone())
        .await;
    match probe {
        Err(err) if err.kind() == ErrorKind::Unsupported => {
            return Err(Failure::unsupported(format!(
                "the provider has no confined read_many: {err}"
            )));
        }
        Err(err) => return Err(Failure::new(format!("read_many beneath {root}: {err}"))),
        Ok(items) => ensure!(
            items.iter().all(|item| item.result.is_err()),
            "read_many beneath {root}: read through a symlink out of the root: {items:?}"
        ),
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = tokio::spawn(swap(fs.clone(), root.clone(), stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut rounds = 0;
    let mut outcome = Ok(());
    while Instant::now() < deadline && outcome.is_ok() {
        rounds += 1;
        outcome = race_round(&fs, &root, &confined).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = cx.within("the swapping task", swapper).await?;
    outcome?;
    let swaps = swaps
        .map_err(|err| Failure::new(format!("swapping the symlink: {err}")))?
        .map_err(|err| Failure::new(format!("swapping the symlink: {err}")))?;
    ensure!(
        swaps > 0 && rounds > 0,
        "no race happened: {swaps} swaps, {rounds} rounds"
    );
    Ok(())
}

/// One confined read_many, walk and search during the swaps: none may
/// yield the outside file.
async fn race_round(fs: &Arc<dyn FsProvider>, root: &str, confined: &ReadManyLimits) -> CaseResult {
    let items = fs
        .read_many(vec!["d/secret.txt".into()], confined.clone())
        .await
        .map_err(|err| Failure::new(format!("read_many beneath {root}: {err}")))?;
    for ReadManyItem { result, .. } in &items {
        if let Ok(file) = result {
            ensure!(
                !file.text.contains("OUTSIDE"),
                "read_many beneath {root} read the outside file"
            );
        }
    }
    let failed = |what: &str, err: dsh_plugin_api::Error| {
        Failure::new(format!("{what} beneath {root}: {err}"))
    };
    let spec = WalkSpec {
        beneath: true,
        ..walk_spec(8, 1000, &[])
    };
    match fs.walk(root, spec).await {
        Err(err) if err.kind() == ErrorKind::Unsupported => {}
        Err(err) => return Err(failed("walk", err)),
        Ok(mut walk) => {
            while let Some(event) = walk.next().await {
                if let WalkEvent::Entry(entry) = event.map_err(|err| failed("walk", err))? {
                    ensure!(
                        !(entry.relative.starts_with("d/") && entry.metadata.size == 8),
                        "walk beneath {root} listed the outside directory: {}",
                        entry.relative
                    );
                }
            }
        }
    }
    let spec = SearchSpec {
        beneath: true,
        ..search_spec("OUTSIDE", SearchMode::Lines { context: 0 })
    };
    match fs.search(root, spec).await {
        Err(err) if err.kind() == ErrorKind::Unsupported => {}
        Err(err) => return Err(failed("search", err)),
        Ok(mut search) => {
            while let Some(event) = search.next().await {
                let event = event.map_err(|err| failed("search", err))?;
                ensure!(
                    !matches!(event, SearchEvent::Line(_)),
                    "search beneath {root} found the outside file: {event:?}"
                );
            }
        }
    }
    Ok(())
}
