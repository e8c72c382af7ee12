//! Paths whose characters URI writers may escape differently, against clangd, pyright and
//! typescript-language-server through the language tools: clangd 14 answers with `:` unescaped
//! for a document sent as `%3A`, so a server's answer is matched to its document by the path it
//! decodes to, never by the URI's spelling. Each file's diagnostics (of the version written) and a definition in a file of the
//! same directory that was never opened (read through `fs` at the path the server named).

use std::path::PathBuf;

use dsh_consumers::Tools;
use dsh_consumers::lsp::tools::{DiagnosticsRequest, PositionRequest};
use serde_json::json;

use crate::world::LocalWorld;

/// One directory per character (or run of them) that some writer escapes and another does not,
/// or that a decoder must decode exactly once (`%3A` literally in a name).
const NAMES: [&str; 11] = [
    "a:b",
    "a@b",
    "a+b",
    "a b",
    "a%3Ab",
    "a#b",
    "a?b",
    "a(b)!",
    "a$b&c=d,e;f'g*h",
    "ü 日本",
    "new\nline",
];

/// A language's files in a directory: `lib{i}` declares `twice`, `main` uses it wrongly (one
/// error) and asks for its definition.
struct Case {
    /// The workspace root's marker (file, content).
    marker: (&'static str, &'static str),
    /// The library's file name and text, given its index.
    lib: fn(usize) -> (String, String),
    /// `main`'s file name and text, given the library's index.
    main: fn(usize) -> (String, String),
    /// The error's line and what its message says.
    error: (u32, &'static str),
    /// Where `main` uses `twice`, and where the library declares it (line, column).
    used: (u32, u32),
    declared: (u32, u32),
}

const CPP: Case = Case {
    marker: ("compile_flags.txt", "-std=c++17\n"),
    lib: |i| {
        (
            format!("lib{i}.h"),
            "#pragma once\nint twice(int n);\n".to_owned(),
        )
    },
    main: |i| {
        (
            "main.cpp".to_owned(),
            format!(
                "#include \"lib{i}.h\"\nint main() {{\n  int x = \"text\";\n  return twice(x);\n}}\n"
            ),
        )
    },
    error: (3, "cannot initialize"),
    used: (4, 10),
    declared: (2, 5),
};

const PYTHON: Case = Case {
    marker: ("pyrightconfig.json", "{}\n"),
    lib: |i| {
        (
            format!("lib{i}.py"),
            "def twice(n: int) -> int:\n    return n * 2\n".to_owned(),
        )
    },
    main: |i| {
        (
            "main.py".to_owned(),
            format!("from lib{i} import twice\n\nx: str = twice(2)\n"),
        )
    },
    error: (3, "is not assignable"),
    used: (3, 10),
    declared: (1, 5),
};

const TYPESCRIPT: Case = Case {
    marker: (
        "tsconfig.json",
        "{\"compilerOptions\": {\"strict\": true}}\n",
    ),
    lib: |i| {
        (
            format!("lib{i}.ts"),
            "export function twice(n: number): number {\n  return n * 2;\n}\n".to_owned(),
        )
    },
    main: |i| {
        (
            "main.ts".to_owned(),
            format!(
                "import {{ twice }} from './lib{i}';\nconst a: string = twice(2);\nconsole.log(a);\n"
            ),
        )
    },
    error: (2, "not assignable"),
    used: (2, 19),
    declared: (1, 17),
};

async fn write(tools: &Tools, path: &str, content: &str) {
    let request = serde_json::from_value(json!({"path": path, "content": content})).unwrap();
    tools.files.write_file(request).await.unwrap();
}

/// Every name of [`NAMES`] in `case`'s language; all failures named at once.
async fn every_name_is_answered(case: Case) {
    let world = LocalWorld::new();
    let tools = Tools::new(world.fs.clone(), world.subprocess.clone());
    let cwd: PathBuf = std::fs::canonicalize(world.dir.path().join("cwd")).unwrap();
    let cwd = cwd.to_str().unwrap();
    write(&tools, &format!("proj/{}", case.marker.0), case.marker.1).await;
    for (i, name) in NAMES.iter().enumerate() {
        let (lib, text) = (case.lib)(i);
        write(&tools, &format!("proj/{name}/{lib}"), &text).await;
        let (main, text) = (case.main)(i);
        write(&tools, &format!("proj/{name}/{main}"), &text).await;
    }
    let mut failures = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let (lib, main) = ((case.lib)(i).0, (case.main)(i).0);
        let path = format!("proj/{name}/{main}");
        let found = tools
            .lsp
            .lsp_diagnostics(DiagnosticsRequest {
                path: path.clone(),
                timeout_secs: Some(30),
            })
            .await;
        let found = match found {
            Ok(found) => found,
            Err(err) => {
                failures.push(format!("{name:?}: diagnostics: {err}"));
                continue;
            }
        };
        let errors: Vec<_> = found
            .diagnostics
            .iter()
            .filter(|d| d.severity == "error")
            .collect();
        let expected = format!("{cwd}/{path}");
        let right = errors.len() == 1
            && errors[0].path == expected
            && errors[0].start.line == case.error.0
            && errors[0].message.to_lowercase().contains(case.error.1);
        if !right {
            failures.push(format!("{name:?}: diagnostics {:?}", found.diagnostics));
            continue;
        }
        let definition = tools
            .lsp
            .lsp_definition(PositionRequest {
                path,
                line: Some(case.used.0),
                column: Some(case.used.1),
                symbol: None,
            })
            .await;
        let expected = format!("{cwd}/proj/{name}/{lib}");
        match definition {
            Ok(found)
                if found.locations.len() == 1
                    && found.locations[0].path == expected
                    && (
                        found.locations[0].start.line,
                        found.locations[0].start.column,
                    ) == case.declared => {}
            Ok(found) => failures.push(format!("{name:?}: definition {:?}", found.locations)),
            Err(err) => failures.push(format!("{name:?}: definition: {err}")),
        }
    }
    let left = tools.shutdown().await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn clangd_answers_for_paths_of_every_character() {
    every_name_is_answered(CPP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pyright_answers_for_paths_of_every_character() {
    every_name_is_answered(PYTHON).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn typescript_answers_for_paths_of_every_character() {
    every_name_is_answered(TYPESCRIPT).await;
}
