//! resolve, contains and file URIs.

use std::os::unix::fs::symlink;
use std::process::Command;

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::fs::FsProvider;

use crate::common::{World, assert_names, expect_err};

fn decode_uri(uri: &str) -> Vec<u8> {
    let path = uri.strip_prefix("file://").expect("file scheme");
    percent_encoding::percent_decode_str(path).collect()
}

#[tokio::test]
async fn relative_paths_join_the_world_cwd_or_the_callers() {
    let world = World::new();
    world.put("src/main.rs", "fn main() {}");
    let resolved = world.fs.resolve("src/main.rs", None).await.unwrap();
    assert_eq!(resolved.path, world.abs("src/main.rs"));
    let resolved = world
        .fs
        .resolve("main.rs", Some(&world.abs("src")))
        .await
        .unwrap();
    assert_eq!(resolved.path, world.abs("src/main.rs"));
    let resolved = world
        .fs
        .resolve(&world.abs("src"), Some("/elsewhere"))
        .await
        .unwrap();
    assert_eq!(
        resolved.path,
        world.abs("src"),
        "absolute paths ignore the cwd"
    );
}

#[tokio::test]
async fn missing_final_components_resolve_like_realpath_m() {
    let world = World::new();
    world.put("a/file", "x");
    let resolved = world
        .fs
        .resolve("a/new/deeper/../leaf.txt", None)
        .await
        .unwrap();
    assert_eq!(resolved.path, world.abs("a/new/leaf.txt"));
    let resolved = world.fs.resolve("a/./file/", None).await.unwrap();
    assert_eq!(resolved.path, world.abs("a/file"));
}

#[tokio::test]
async fn symlinks_are_resolved_physically() {
    let world = World::new();
    std::fs::create_dir_all(world.path("real/inner")).unwrap();
    symlink(world.path("real/inner"), world.path("link")).unwrap();
    symlink("../../real", world.path("real/inner/up")).unwrap();
    // `link/..` is the parent of the link's *target*, not the world root.
    let resolved = world.fs.resolve("link/../x", None).await.unwrap();
    assert_eq!(resolved.path, world.abs("real/x"));
    let resolved = world
        .fs
        .resolve("link/up/inner/missing", None)
        .await
        .unwrap();
    assert_eq!(resolved.path, world.abs("real/inner/missing"));
}

#[tokio::test]
async fn resolve_agrees_with_gnu_realpath_m() {
    let world = World::new();
    std::fs::create_dir_all(world.path("d/e")).unwrap();
    world.put("d/f", "");
    symlink("d/e", world.path("rel")).unwrap();
    symlink(world.path("nowhere/deep"), world.path("dangling")).unwrap();
    symlink("/", world.path("root")).unwrap();
    let cases = [
        "d/e/../f",
        "rel/../f",
        "rel/x/y/../../z",
        "dangling/more",
        "dangling/../q",
        "root/tmp/../etc",
        "d/f/under-a-file/..",
        "missing/../d/./e//",
        "../../..",
    ];
    for case in cases {
        let ours = world.fs.resolve(case, None).await.unwrap().path;
        let output = Command::new("realpath")
            .arg("-m")
            .arg(case)
            .current_dir(world.root())
            .output()
            .expect("realpath is part of coreutils");
        assert!(output.status.success(), "realpath -m {case}");
        let theirs = String::from_utf8(output.stdout).unwrap();
        assert_eq!(ours, theirs.trim_end_matches('\n'), "realpath -m {case}");
    }
}

#[tokio::test]
async fn newline_and_multibyte_names_round_trip_through_path_and_uri() {
    let world = World::new();
    for name in ["new\nline.txt", "日本語 ü ñ.md", "100% #hash?.rs"] {
        world.put(name, "x");
        let resolved = world.fs.resolve(name, None).await.unwrap();
        assert_eq!(resolved.path, world.abs(name));
        assert!(resolved.uri.starts_with("file:///"), "{}", resolved.uri);
        assert!(
            !resolved.uri.contains(['\n', ' ', '#', '?']) && resolved.uri.is_ascii(),
            "encoded: {}",
            resolved.uri
        );
        assert_eq!(decode_uri(&resolved.uri), resolved.path.as_bytes());
        // The resolved path addresses the same file.
        let text = world.fs.read_text(&resolved.path).await.unwrap().text;
        assert_eq!(text, "x");
    }
}

#[tokio::test]
async fn bad_paths_and_cwds_are_invalid_input() {
    let world = World::new();
    let err = expect_err(world.fs.resolve("", None).await, ErrorKind::InvalidInput);
    assert!(err.message().starts_with("resolve: "), "{err}");
    expect_err(
        world.fs.resolve("a\0b", None).await,
        ErrorKind::InvalidInput,
    );
    let err = expect_err(
        world.fs.resolve("x", Some("relative/cwd")).await,
        ErrorKind::InvalidInput,
    );
    assert!(err.message().contains("not an absolute path"), "{err}");
    expect_err(
        world.fs.resolve("x", Some("/a\0")).await,
        ErrorKind::InvalidInput,
    );
}

#[tokio::test]
async fn a_symlink_loop_is_an_error_naming_resolve() {
    let world = World::new();
    symlink("b", world.path("a")).unwrap();
    symlink("a", world.path("b")).unwrap();
    let err = expect_err(world.fs.resolve("a/x", None).await, ErrorKind::Io);
    assert_names(&err, "resolve", &world.abs("a/x"));
    assert!(err.message().contains("symbolic links"), "{err}");
}

#[tokio::test]
async fn contains_uses_canonical_paths() {
    let world = World::new();
    std::fs::create_dir_all(world.path("root/sub")).unwrap();
    std::fs::create_dir_all(world.path("outside")).unwrap();
    std::fs::create_dir_all(world.path("rootbeer")).unwrap();
    let root = world.abs("root");
    assert!(world.fs.contains(&root, &root).await.unwrap());
    assert!(world.fs.contains(&root, "root/sub/new-file").await.unwrap());
    assert!(world.fs.contains("/", &root).await.unwrap());
    assert!(
        !world.fs.contains(&root, "rootbeer").await.unwrap(),
        "prefix is not containment"
    );
    assert!(!world.fs.contains(&root, "root/../outside").await.unwrap());
    assert!(!world.fs.contains(&root, &world.abs("")).await.unwrap());
}

#[tokio::test]
async fn contains_is_false_through_a_symlink_escape() {
    let world = World::new();
    std::fs::create_dir_all(world.path("root")).unwrap();
    world.put("secret/key", "k");
    symlink(world.path("secret"), world.path("root/escape")).unwrap();
    symlink(world.path("root/sub-real"), world.path("root/inward")).unwrap();
    let root = world.abs("root");
    assert!(!world.fs.contains(&root, "root/escape/key").await.unwrap());
    assert!(!world.fs.contains(&root, "root/escape").await.unwrap());
    assert!(world.fs.contains(&root, "root/inward/x").await.unwrap());
    // A root reached through a symlink contains its real children.
    symlink(world.path("root"), world.path("alias")).unwrap();
    assert!(world.fs.contains("alias", "root/inward").await.unwrap());
}

#[tokio::test]
async fn contains_rejects_bad_input() {
    let world = World::new();
    expect_err(world.fs.contains("", "x").await, ErrorKind::InvalidInput);
    expect_err(world.fs.contains("/", "x\0").await, ErrorKind::InvalidInput);
}
