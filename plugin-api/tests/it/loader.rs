//! Loading plugin libraries: descriptors before anything is created, and a
//! clear refusal for every kind of library that is not a loadable plugin.

use std::path::PathBuf;

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::ServiceKind;
use dsh_plugin_api::host::{API_VERSION, LoadError, PluginLibrary, library_file_name};

use crate::support;

/// A fresh directory, removed when the guard drops.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("dsh-loader-test-{name}-"))
        .tempdir()
        .expect("scratch dir")
}

fn refused(path: &std::path::Path) -> LoadError {
    match PluginLibrary::load(path) {
        Ok(library) => panic!("{} loaded: {library:?}", path.display()),
        Err(err) => err,
    }
}

#[test]
fn descriptors_are_read_at_load_and_nothing_is_created() {
    let scratch = scratch("descriptors");
    let record = scratch.path().join("events.jsonl");
    let e2b = support::load("dsh-probe-e2b");
    let fs = support::load("dsh-probe-fs");
    let subprocess = support::load("dsh-probe-subprocess");
    let expect = [
        (
            &e2b,
            "dsh-probe-e2b",
            vec![ServiceKind::Owner(OwnerKind::E2B)],
            vec![],
        ),
        (
            &fs,
            "dsh-probe-fs",
            vec![ServiceKind::Fs],
            vec![ServiceKind::Owner(OwnerKind::E2B)],
        ),
        (
            &subprocess,
            "dsh-probe-subprocess",
            vec![ServiceKind::Subprocess],
            vec![ServiceKind::Owner(OwnerKind::E2B), ServiceKind::Fs],
        ),
    ];
    for (library, name, provides, inject) in expect {
        let descriptor = library.descriptor();
        assert_eq!(descriptor.name, name);
        assert_eq!(descriptor.version, dsh_probe_common::PROBE_VERSION);
        assert_eq!(descriptor.api_version, API_VERSION);
        assert_eq!(descriptor.provides, provides);
        assert_eq!(descriptor.inject, inject);
        assert!(library.path().is_absolute());
        assert_eq!(
            library.path().file_name().and_then(|name| name.to_str()),
            Some(library_file_name(name).as_str())
        );
    }
    // Loading records nothing: no instance exists.
    assert!(!record.exists());
}

#[test]
fn a_second_plugin_is_never_mistaken_for_the_first() {
    // abi_stable's RootModule::load_from_file caches one module per type;
    // the loader must not, and loading the same file again is fine.
    let e2b = support::load("dsh-probe-e2b");
    let fs = support::load("dsh-probe-fs");
    let again = support::load("dsh-probe-e2b");
    assert_eq!(e2b.descriptor().name, "dsh-probe-e2b");
    assert_eq!(fs.descriptor().name, "dsh-probe-fs");
    assert_eq!(again.descriptor(), e2b.descriptor());
    assert_eq!(again.path(), e2b.path());
}

#[test]
fn a_renamed_library_still_loads() {
    let dir = scratch("renamed");
    let copy = dir.path().join("my-owner.so");
    std::fs::copy(support::library("dsh-probe-e2b"), &copy).expect("copy");
    let library = PluginLibrary::load(&copy).expect("renamed copy loads");
    assert_eq!(library.descriptor().name, "dsh-probe-e2b");
}

#[test]
fn library_file_names_follow_the_documented_rule() {
    assert_eq!(library_file_name("dsh-fs-local"), "libdsh_fs_local.so");
    assert_eq!(library_file_name("dsh-e2b-owner"), "libdsh_e2b_owner.so");
    assert_eq!(
        library_file_name("@acme/dsh-fs-local"),
        "libdsh_fs_local.so"
    );
}

#[test]
fn a_missing_file_is_refused_as_open() {
    let dir = scratch("missing");
    let path = dir.path().join("libnothing.so");
    let err = refused(&path);
    assert!(matches!(err, LoadError::Open { .. }), "{err:?}");
    assert_eq!(err.path(), path);
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("no such file"), "{text}");
}

#[test]
fn a_directory_is_refused_as_open() {
    let dir = scratch("directory");
    let err = refused(dir.path());
    assert!(matches!(err, LoadError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("is a directory"), "{err}");
}

#[test]
fn a_file_that_is_not_a_library_is_not_a_plugin() {
    let dir = scratch("text");
    let path = dir.path().join("libtext.so");
    std::fs::write(
        &path,
        "this is a text file pretending to be a shared library\n",
    )
    .expect("write");
    let err = refused(&path);
    assert!(matches!(err, LoadError::NotAPlugin { .. }), "{err:?}");
    assert!(err.to_string().contains("not an ELF file"), "{err}");
}

#[test]
fn a_system_library_is_not_a_plugin() {
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/usr/lib64/libc.so.6",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|path| path.exists())
    .expect("a libc.so.6 in a standard location");
    let err = refused(&libc);
    assert!(matches!(err, LoadError::NotAPlugin { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("is not a dsh plugin"), "{text}");
    assert!(text.contains("export_plugin!"), "{text}");
}

#[test]
fn another_plugin_api_layout_is_incompatible() {
    let err = refused(&support::library("dsh-probe-abi-layout"));
    assert!(matches!(err, LoadError::Incompatible { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("is incompatible with this host"), "{text}");
    assert!(
        text.contains("layout of its plugin-API types differs"),
        "{text}"
    );
    // abi_stable names the first difference it meets: the root module type
    // comes from another package than dsh-plugin-api.
    assert!(
        text.contains("mismatched package in PluginModule (expected dsh-plugin-api, found dsh-probe-abi-layout)"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "the report is one line:\n{text}");
}

#[test]
fn another_api_version_is_incompatible_naming_both() {
    let err = refused(&support::library("dsh-probe-api-version"));
    assert!(matches!(err, LoadError::Incompatible { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "built against dsh plugin API version {}, this host speaks version {API_VERSION}",
            API_VERSION + 1
        )),
        "{text}"
    );
}
