//! The LSP client against a real language server (`clangd`, installed by scripts/setup.sh) in
//! the local world: diagnostics of each version sent, waited for; the server's group ended by
//! shutdown; servers that are missing or die say so.

use std::time::Duration;

use dsh_consumers::lsp::position::TextPosition;
use dsh_consumers::lsp::server::{LanguageServer, ServerSpec};
use dsh_plugin_api::ErrorKind;
use dsh_process_group::table;
use lsp_types::DiagnosticSeverity;
use tokio_util::sync::CancellationToken;

use crate::world::LocalWorld;

const WAIT: Duration = Duration::from_secs(60);

/// Whether process `pid` is gone by the quiescence rule the providers prove a group empty by
/// ([`table::Stat::is_live`]): absent, or a zombie its parent has yet to reap (the local
/// provider reaps its direct child on a task of its own, which may run just after the group was
/// proven empty).
fn gone(pid: u32) -> bool {
    !table::stat_of(i32::try_from(pid).expect("a pid"))
        .expect("read the process table")
        .is_some_and(|stat| stat.is_live())
}

fn spec(world: &LocalWorld, argv: &[&str]) -> ServerSpec {
    ServerSpec {
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        root: world.dir.path().join("cwd").to_str().unwrap().to_owned(),
        initialization_options: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn clangd_diagnoses_each_version_sent_and_ends_with_its_group() {
    let world = LocalWorld::new();
    let spec = spec(&world, &["clangd", "--log=error"]);
    std::fs::write(format!("{}/compile_flags.txt", spec.root), "-std=c++17\n").unwrap();
    let path = format!("{}/main.cpp", spec.root);
    let broken = "int main() {\n  int x = \"text\";\n  return x;\n}\n";
    std::fs::write(&path, broken).unwrap();
    let server = LanguageServer::start(
        world.subprocess.as_ref(),
        world.fs.clone(),
        spec,
        &CancellationToken::new(),
    )
    .await
    .expect("clangd starts (scripts/setup.sh installs it)");
    assert!(server.capabilities().text_document_sync.is_some());

    assert_eq!(server.update(&path, "cpp", broken.to_owned()).unwrap(), 1);
    let errors = server.diagnostics(&path, WAIT).await.unwrap();
    assert!(
        errors
            .iter()
            .any(|d| d.severity == Some(DiagnosticSeverity::ERROR)
                && d.range.start.line == 1
                && d.message.to_lowercase().contains("cannot initialize")),
        "{errors:#?}"
    );

    let fixed = "int main() {\n  int x = 1;\n  return x;\n}\n";
    assert_eq!(server.update(&path, "cpp", fixed.to_owned()).unwrap(), 2);
    let cleared = server.diagnostics(&path, WAIT).await.unwrap();
    assert!(cleared.is_empty(), "version 2 has no error: {cleared:#?}");

    let never = server
        .diagnostics(&format!("{}/other.cpp", world.dir.path().display()), WAIT)
        .await
        .unwrap_err();
    assert_eq!(never.kind(), ErrorKind::NotFound);

    server.close(&path).unwrap();
    let pid = server.pid();
    server.shutdown().await.unwrap();
    assert!(gone(pid), "clangd (pid {pid}) is gone");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_is_missing_or_dies_says_so() {
    let world = LocalWorld::new();
    let missing = LanguageServer::start(
        world.subprocess.as_ref(),
        world.fs.clone(),
        spec(&world, &["no-such-language-server"]),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    assert!(
        missing.to_string().contains("no-such-language-server"),
        "{missing}"
    );

    let dies = LanguageServer::start(
        world.subprocess.as_ref(),
        world.fs.clone(),
        spec(
            &world,
            &["sh", "-c", "echo cannot start: no license >&2; exit 3"],
        ),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(dies.kind(), ErrorKind::Unavailable, "{dies}");
    assert!(dies.to_string().contains("no license"), "{dies}");

    let relative = LanguageServer::start(
        world.subprocess.as_ref(),
        world.fs.clone(),
        ServerSpec {
            root: "relative".to_owned(),
            ..spec(&world, &["clangd"])
        },
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(relative.kind(), ErrorKind::InvalidInput);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_start_that_is_never_answered_ends_when_cancelled() {
    let world = LocalWorld::new();
    // Reads its stdin, never answers `initialize` (its stdout, the shell's, stays open);
    // writes its pid where the test finds it.
    let pid_file = world.dir.path().join("silent.pid");
    let script = format!("echo $$ > {}; cat > /dev/null", pid_file.display());
    let closing = CancellationToken::new();
    let start = LanguageServer::start(
        world.subprocess.as_ref(),
        world.fs.clone(),
        spec(&world, &["sh", "-c", &script]),
        &closing,
    );
    let cancel = async {
        while !pid_file.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        closing.cancel();
    };
    let started = std::time::Instant::now();
    let (outcome, ()) = tokio::join!(start, cancel);
    let err = outcome.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cancelled after {:?}, not at the 60 s initialize timeout",
        started.elapsed()
    );
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    assert!(
        err.to_string().contains("before it answered initialize"),
        "{err}"
    );
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(gone(pid), "the silent server (pid {pid}) is gone");
}

#[tokio::test(flavor = "multi_thread")]
async fn clangd_answers_definition_references_hover_rename_and_symbols() {
    let world = LocalWorld::new();
    let spec = spec(&world, &["clangd", "--log=error"]);
    let root = spec.root.clone();
    std::fs::write(format!("{root}/compile_flags.txt"), "-std=c++17\n").unwrap();
    std::fs::write(
        format!("{root}/shape.h"),
        "#pragma once\nint area(int width, int height);\n",
    )
    .unwrap();
    let main = format!("{root}/main.cpp");
    let text = "#include \"shape.h\"\nint main() {\n  int side = 3;\n  int total = area(side, side) + area(side, 2);\n  return total - side;\n}\nnamespace a { int helper() { return 1; } }\nnamespace b { int helper() { return 2; } }\n";
    std::fs::write(&main, text).unwrap();
    let server = LanguageServer::start(
        world.subprocess.as_ref(),
        world.fs.clone(),
        spec,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    server.update(&main, "cpp", text.to_owned()).unwrap();
    server.diagnostics(&main, WAIT).await.unwrap();
    let at = |line, column| TextPosition { line, column };

    // `area` in main.cpp is declared in the header, which was never opened: read through fs.
    let definition = server.definition(&main, at(4, 15)).await.unwrap();
    assert_eq!(definition.len(), 1, "{definition:?}");
    assert_eq!(definition[0].path, format!("{root}/shape.h"));
    assert_eq!(
        (definition[0].start, definition[0].end),
        (at(2, 5), at(2, 9))
    );

    let references = server.references(&main, at(3, 7), true).await.unwrap();
    let mut found: Vec<(u32, u32)> = references
        .iter()
        .map(|r| (r.start.line, r.start.column))
        .collect();
    found.sort();
    assert_eq!(found, [(3, 7), (4, 20), (4, 26), (4, 39), (5, 18)]);

    let hover = server
        .hover(&main, at(4, 15))
        .await
        .unwrap()
        .expect("hover text");
    assert!(hover.contains("int area(int width, int height)"), "{hover}");

    let edits = server.rename(&main, at(5, 18), "edge").await.unwrap();
    assert_eq!(edits.len(), 1, "{edits:?}");
    let (edits, computed_on) = &edits[0];
    assert_eq!(edits.path, main);
    assert_eq!(
        computed_on,
        &std::fs::read_to_string(&main).unwrap(),
        "the text sent"
    );
    assert_eq!(edits.edits.len(), 5);
    assert!(
        edits
            .edits
            .iter()
            .all(|e| e.new_text == "edge" && e.end.column - e.start.column == 4)
    );

    let symbols = server.document_symbols(&main).await.unwrap();
    assert!(
        symbols
            .iter()
            .any(|s| s.name == "main" && s.kind == "function"),
        "{symbols:?}"
    );
    // Positions by name: a function, one in a namespace, an ambiguous and a missing one.
    assert_eq!(server.position_of(&main, "main").await.unwrap(), at(2, 5));
    let ambiguous = server.position_of(&main, "helper").await.unwrap_err();
    assert_eq!(ambiguous.kind(), ErrorKind::Conflict, "{ambiguous}");
    assert_eq!(
        server.position_of(&main, "b::helper").await.unwrap(),
        at(8, 19)
    );
    let missing = server.position_of(&main, "nowhere").await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    assert!(missing.to_string().contains("main"), "{missing}");

    let unopened = server
        .hover(&format!("{root}/shape.h"), at(2, 5))
        .await
        .unwrap_err();
    assert_eq!(unopened.kind(), ErrorKind::NotFound);
    let past = server.hover(&main, at(40, 1)).await.unwrap_err();
    assert_eq!(past.kind(), ErrorKind::InvalidInput);
    server.shutdown().await.unwrap();
}
