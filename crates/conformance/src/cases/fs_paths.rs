//! `resolve` and `contains`: canonical identity of paths and containment
//! decided on canonical targets (docs/design.md §5.1, first two rows).

use dsh_plugin_api::ErrorKind;

use crate::check::{CaseResult, ensure, ensure_eq, ensure_names};
use crate::context::Cx;
use crate::patterns::percent_decode;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.resolve.absolute_normalised",
        Fs,
        [Fs],
        "an absolute path comes back canonical: `.`, `..`, repeated and trailing slashes removed",
        absolute_normalised
    ),
    case!(
        "fs.resolve.root",
        Fs,
        [Fs],
        reach = Everywhere,
        "`/` and `..` above it resolve to `/`, whose URI is file:///; an absolute path ignores a cwd of `/`",
        root
    ),
    case!(
        "fs.resolve.relative_to_cwd",
        Fs,
        [Fs],
        "a relative path joins the caller's cwd; an absolute path ignores it",
        relative_to_cwd
    ),
    case!(
        "fs.resolve.relative_to_world_cwd",
        Fs,
        [Fs],
        "without a cwd a relative path joins the world's cwd, which is absolute",
        relative_to_world_cwd
    ),
    case!(
        "fs.resolve.missing_components",
        Fs,
        [Fs],
        "realpath -m semantics: missing final components are allowed and kept",
        missing_components
    ),
    case!(
        "fs.resolve.through_symlinks",
        Fs,
        [Fs, Shell],
        "symlinks are resolved where they exist: absolute, relative, chained and dangling links",
        through_symlinks
    ),
    case!(
        "fs.resolve.uri",
        Fs,
        [Fs],
        "the file: URI percent-encodes space, %, #, ?, newline and multibyte characters and decodes back to the path",
        uri
    ),
    case!(
        "fs.resolve.nul_rejected",
        Fs,
        [Fs],
        "a path containing NUL is InvalidInput for resolve, stat, lstat, list and read_text",
        nul_rejected
    ),
    case!(
        "fs.contains.lexical",
        Fs,
        [Fs],
        "root and its descendants are contained; a sibling sharing a name prefix and `..` escapes are not",
        contains_lexical
    ),
    case!(
        "fs.contains.root",
        Fs,
        [Fs],
        reach = Everywhere,
        "`/` contains every path",
        contains_root
    ),
    case!(
        "fs.contains.symlink_escape",
        Fs,
        [Fs, Shell],
        "a symlink inside root that points outside is not contained; links that land inside are",
        contains_symlink_escape
    ),
];

/// Resolves `path` (with optional `cwd`) and checks the canonical path.
async fn expect_resolved(cx: &Cx, path: &str, cwd: Option<&str>, expected: &str) -> CaseResult {
    let what = match cwd {
        Some(cwd) => format!("resolve {path:?} with cwd {cwd:?}"),
        None => format!("resolve {path:?}"),
    };
    let resolved = cx.ok(&what, cx.fs().resolve(path, cwd)).await?;
    ensure_eq(&what, &resolved.path.as_str(), &expected)
}

async fn absolute_normalised(cx: &Cx) -> CaseResult {
    let dir = &cx.dir;
    expect_resolved(
        cx,
        &format!("{dir}//a/./b/../c/"),
        None,
        &format!("{dir}/a/c"),
    )
    .await?;
    expect_resolved(cx, &format!("{dir}/a/b/../../d"), None, &format!("{dir}/d")).await
}

async fn root(cx: &Cx) -> CaseResult {
    expect_resolved(cx, "/", None, "/").await?;
    expect_resolved(cx, "/..", None, "/").await?;
    expect_resolved(cx, "/../..", None, "/").await?;
    let root = cx.ok("resolve \"/\"", cx.fs().resolve("/", None)).await?;
    ensure_eq("uri of \"/\"", &root.uri.as_str(), &"file:///")?;
    let dir = &cx.dir;
    expect_resolved(cx, &format!("{dir}/abs"), Some("/"), &format!("{dir}/abs")).await
}

async fn relative_to_cwd(cx: &Cx) -> CaseResult {
    let dir = &cx.dir;
    let parent = dir.rsplit_once('/').map_or("/", |(parent, _)| parent);
    let parent = if parent.is_empty() { "/" } else { parent };
    expect_resolved(cx, "x/y", Some(dir), &format!("{dir}/x/y")).await?;
    expect_resolved(cx, "./x/../z", Some(dir), &format!("{dir}/z")).await?;
    expect_resolved(cx, "../up", Some(dir), &join(parent, "up")).await?;
    expect_resolved(
        cx,
        &format!("{dir}/abs"),
        Some(parent),
        &format!("{dir}/abs"),
    )
    .await
}

async fn relative_to_world_cwd(cx: &Cx) -> CaseResult {
    let world = cx.ok("resolve \".\"", cx.fs().resolve(".", None)).await?;
    ensure!(
        world.path.starts_with('/'),
        "resolve \".\": the world's cwd must be absolute, got {:?}",
        world.path
    );
    expect_resolved(
        cx,
        "conformance-rel",
        None,
        &join(&world.path, "conformance-rel"),
    )
    .await?;
    expect_resolved(cx, "a/../b", None, &join(&world.path, "b")).await
}

async fn missing_components(cx: &Cx) -> CaseResult {
    let dir = &cx.dir;
    expect_resolved(
        cx,
        &format!("{dir}/no/such/file"),
        None,
        &format!("{dir}/no/such/file"),
    )
    .await?;
    expect_resolved(
        cx,
        &format!("{dir}/no/such/../other"),
        None,
        &format!("{dir}/no/other"),
    )
    .await
}

async fn through_symlinks(cx: &Cx) -> CaseResult {
    let dir = &cx.dir;
    cx.mkdirs("real/sub").await?;
    cx.symlink(&format!("{dir}/real"), "abs").await?;
    cx.symlink("real/sub", "rel").await?;
    cx.symlink("abs", "chain").await?;
    cx.symlink("nowhere/target", "dangling").await?;
    cx.symlink("../..", "real/sub/up").await?;
    expect_resolved(
        cx,
        &format!("{dir}/abs/file"),
        None,
        &format!("{dir}/real/file"),
    )
    .await?;
    expect_resolved(cx, &format!("{dir}/rel"), None, &format!("{dir}/real/sub")).await?;
    expect_resolved(
        cx,
        &format!("{dir}/chain/sub/x"),
        None,
        &format!("{dir}/real/sub/x"),
    )
    .await?;
    expect_resolved(
        cx,
        &format!("{dir}/dangling"),
        None,
        &format!("{dir}/nowhere/target"),
    )
    .await?;
    // `..` applies after the link is resolved, as the kernel does.
    expect_resolved(
        cx,
        &format!("{dir}/rel/../other"),
        None,
        &format!("{dir}/real/other"),
    )
    .await?;
    expect_resolved(
        cx,
        &format!("{dir}/real/sub/up/q"),
        None,
        &format!("{dir}/q"),
    )
    .await?;
    expect_resolved(cx, "abs/sub", Some(dir), &format!("{dir}/real/sub")).await
}

/// Characters a `file:` URI path may carry unencoded (RFC 3986 `pchar`
/// without `%`, plus `/`).
fn uri_safe(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&byte)
}

async fn uri(cx: &Cx) -> CaseResult {
    let name = "sp ace%25#frag?q=1\nnl é名😀";
    let path = format!("{}/{name}", cx.dir);
    let what = format!("resolve {path:?}");
    let resolved = cx.ok(&what, cx.fs().resolve(&path, None)).await?;
    ensure_eq(&what, &resolved.path, &path)?;
    let Some(encoded) = resolved.uri.strip_prefix("file://") else {
        crate::check::fail!("{what}: uri {:?} does not start with file://", resolved.uri);
    };
    ensure!(
        encoded.starts_with('/'),
        "{what}: uri {:?} must be file:///… (empty authority, absolute path)",
        resolved.uri
    );
    let mut rest = encoded.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            ensure!(
                tail.len() >= 2 && tail[0].is_ascii_hexdigit() && tail[1].is_ascii_hexdigit(),
                "{what}: uri {:?} has a '%' not followed by two hex digits",
                resolved.uri
            );
            rest = &tail[2..];
        } else {
            ensure!(
                uri_safe(byte),
                "{what}: uri {:?} carries {:?} unencoded",
                resolved.uri,
                char::from(byte)
            );
            rest = tail;
        }
    }
    let decoded = percent_decode(encoded);
    ensure!(
        decoded.as_deref() == Some(path.as_bytes()),
        "{what}: uri {:?} does not decode back to the path",
        resolved.uri
    );
    // A plain path (the case directory, unless the scratch root has
    // characters to escape) needs no escapes at all.
    if !cx.dir.bytes().all(uri_safe) {
        return Ok(());
    }
    let what = format!("resolve {:?}", cx.dir);
    let plain = cx.ok(&what, cx.fs().resolve(&cx.dir, None)).await?;
    ensure_eq(&what, &plain.uri, &format!("file://{}", cx.dir))
}

async fn nul_rejected(cx: &Cx) -> CaseResult {
    let path = format!("{}/a\0b", cx.dir);
    let fs = cx.fs();
    let kind = ErrorKind::InvalidInput;
    let err = cx
        .err("resolve of a path with NUL", kind, fs.resolve(&path, None))
        .await?;
    ensure!(
        !err.message().is_empty(),
        "resolve of a path with NUL: the error has no message"
    );
    cx.err("stat of a path with NUL", kind, fs.stat(&path))
        .await?;
    cx.err("lstat of a path with NUL", kind, fs.lstat(&path))
        .await?;
    cx.err("list of a path with NUL", kind, fs.list(&path))
        .await?;
    cx.err("read_text of a path with NUL", kind, fs.read_text(&path))
        .await?;
    cx.err(
        "resolve with a cwd containing NUL",
        kind,
        fs.resolve("x", Some("/tmp\0")),
    )
    .await?;
    Ok(())
}

/// Checks `contains(root, target) == expected`.
async fn expect_contains(cx: &Cx, root: &str, target: &str, expected: bool) -> CaseResult {
    let what = format!("contains({root:?}, {target:?})");
    let got = cx.ok(&what, cx.fs().contains(root, target)).await?;
    ensure!(got == expected, "{what}: expected {expected}, got {got}");
    Ok(())
}

async fn contains_lexical(cx: &Cx) -> CaseResult {
    let dir = &cx.dir;
    let root = format!("{dir}/root");
    expect_contains(cx, &root, &root, true).await?;
    expect_contains(cx, &root, &format!("{root}/a/b"), true).await?;
    expect_contains(cx, &format!("{root}/"), &format!("{root}/a"), true).await?;
    expect_contains(cx, &root, &format!("{root}/a/../../root/b"), true).await?;
    expect_contains(cx, &root, &format!("{dir}/rootx"), false).await?;
    expect_contains(cx, &root, &format!("{dir}/root2/a"), false).await?;
    expect_contains(cx, &root, dir, false).await?;
    expect_contains(cx, &root, &format!("{root}/../x"), false).await?;
    expect_contains(cx, &root, &format!("{root}/a/../../x"), false).await?;
    let err = cx
        .err(
            "contains with a NUL in the target",
            ErrorKind::InvalidInput,
            cx.fs().contains(&root, &format!("{root}/a\0b")),
        )
        .await?;
    ensure_names("contains with a NUL in the target", &err, "contains")
}

async fn contains_root(cx: &Cx) -> CaseResult {
    let dir = &cx.dir;
    expect_contains(cx, "/", "/", true).await?;
    expect_contains(cx, "/", dir, true).await?;
    expect_contains(cx, "/", &format!("{dir}/a/../../x"), true).await
}

async fn contains_symlink_escape(cx: &Cx) -> CaseResult {
    let dir = &cx.dir;
    cx.mkdirs("root/sub").await?;
    let root = format!("{dir}/root");
    cx.mkdirs("outside").await?;
    cx.put("outside/secret", b"s").await?;
    cx.symlink("../outside", "root/escape").await?;
    cx.symlink(&format!("{dir}/outside/secret"), "root/abs_escape")
        .await?;
    cx.symlink("../outside/missing/deeper", "root/dangling_escape")
        .await?;
    cx.symlink("sub", "root/inner").await?;
    cx.symlink("root/sub", "door").await?;
    cx.symlink("root", "rootlink").await?;
    expect_contains(cx, &root, &format!("{root}/escape"), false).await?;
    expect_contains(cx, &root, &format!("{root}/escape/secret"), false).await?;
    expect_contains(cx, &root, &format!("{root}/abs_escape"), false).await?;
    expect_contains(cx, &root, &format!("{root}/dangling_escape"), false).await?;
    expect_contains(cx, &root, &format!("{root}/inner/file"), true).await?;
    expect_contains(cx, &root, &format!("{dir}/door/file"), true).await?;
    expect_contains(cx, &format!("{dir}/rootlink"), &format!("{root}/sub"), true).await?;
    expect_contains(
        cx,
        &format!("{dir}/rootlink"),
        &format!("{dir}/outside"),
        false,
    )
    .await
}

fn join(base: &str, rel: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{rel}")
    } else {
        format!("{base}/{rel}")
    }
}
