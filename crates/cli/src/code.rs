//! `dsh code …`: programs run in the world that call its tools as functions
//! (`dsh-consumers`' code runtime, docs/design.md §11, the code runtime). The runners live
//! as long as the command: every session is ended (its process group proven
//! gone) before it exits.

use std::io::{Read, Write};
use std::path::Path;

use dsh_consumers::Tools;
use dsh_consumers::code::{
    CodeRunRequest, CodeRunResult, Language, SessionCloseRequest, SessionOpenRequest,
};
use dsh_consumers::lsp::LspConfig;
use dsh_host::Host;

use crate::Stop;
use crate::args::CodeCommand;
use crate::failure::{EXIT_CONFIG, EXIT_FAILURE, Failure};
use crate::fs::report_outcome;
use crate::stdout::outln;

/// Runs one `dsh code` command: 0 when every program returned, 1 when one
/// raised or timed out (its traceback on stderr). On a shutdown signal
/// (`stop`, Ctrl-C) the program running is dropped — its runner's group
/// terminated, the processes it started swept — and the runtime is shut
/// down before dsh exits with the signal's code.
pub async fn run(
    host: &Host,
    command: CodeCommand,
    lsp: LspConfig,
    json: bool,
    stop: Stop,
) -> Result<i32, Failure> {
    let tools = Tools::with_lsp_config(host.fs()?, host.subprocess()?, lsp);
    let outcome = tokio::select! {
        outcome = answer(&tools, command, json) => outcome,
        // The code is the signal's, given by the caller.
        () = stop.requested() => Ok(EXIT_FAILURE),
    };
    for problem in tools.shutdown().await {
        tracing::warn!("dsh code: {problem}");
    }
    outcome
}

async fn answer(tools: &Tools, command: CodeCommand, json: bool) -> Result<i32, Failure> {
    match command {
        CodeCommand::Types { lang } => {
            outln!("{}", tools.code.declarations(lang.into()))?;
            Ok(0)
        }
        CodeCommand::Run {
            files,
            lang,
            session,
            timeout_ms,
        } => {
            let mut programs = Vec::new();
            for file in &files {
                let language = match lang {
                    Some(lang) => lang.into(),
                    None => Language::from_extension(file).ok_or_else(|| {
                        Failure::new(
                            EXIT_CONFIG,
                            format!("dsh code run {file}: no language from its name; give --lang python|javascript|typescript"),
                        )
                    })?,
                };
                programs.push((file.as_str(), language, read_program(file)?));
            }
            if let Some((_, first, _)) = programs.first()
                && programs.iter().any(|(_, language, _)| language != first)
                && (session || programs.len() > 1)
            {
                return Err(Failure::new(
                    EXIT_CONFIG,
                    "dsh code run: the programs of one session must be of one language",
                ));
            }
            let session_id = match programs.first() {
                Some((_, language, _)) if session || programs.len() > 1 => {
                    let opened = tools
                        .code
                        .code_session_open(SessionOpenRequest {
                            language: *language,
                        })
                        .await
                        .map_err(|err| Failure::new(EXIT_FAILURE, err.to_string()))?;
                    Some(opened.session)
                }
                _ => None,
            };
            let mut code = 0;
            for (file, language, program) in programs {
                let request = CodeRunRequest {
                    code: program,
                    language: Some(language),
                    session: session_id.clone(),
                    timeout_ms,
                };
                let result = tools.code.code_run(request).await.map_err(|err| {
                    Failure::new(EXIT_FAILURE, format!("dsh code run {file}: {err}"))
                })?;
                show(json, &result)?;
                if !result.ok {
                    code = EXIT_FAILURE;
                    break;
                }
            }
            if let Some(session) = session_id {
                // Closed by shutdown as well; closing here reports its failure by name.
                let _ = tools
                    .code
                    .code_session_close(SessionCloseRequest { session })
                    .await;
            }
            Ok(code)
        }
    }
}

/// The program in `file`, `-` for stdin.
fn read_program(file: &str) -> Result<String, Failure> {
    let mut program = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut program).map(|_| ())
    } else {
        std::fs::read_to_string(Path::new(file)).map(|text| program = text)
    };
    read.map_err(|err| Failure::new(EXIT_CONFIG, format!("dsh code run {file}: read: {err}")))?;
    Ok(program)
}

/// A result: with `--json` the whole; otherwise the program's stdout on
/// stdout, its stderr and any error on stderr, and the value (when not
/// null) as a JSON line on stdout.
fn show(json: bool, result: &CodeRunResult) -> Result<(), Failure> {
    if json {
        return report_outcome(json, result);
    }
    let mut out = std::io::stdout().lock();
    out.write_all(result.stdout.text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|err| crate::stdout::failed("program output", &err))?;
    drop(out);
    let _ = std::io::stderr().write_all(result.stderr.text.as_bytes());
    if let Some(error) = &result.error {
        let mut message = error.message.clone();
        for frame in &error.traceback {
            message.push_str(&format!(
                "\n  {}:{} in {}: {}",
                frame.file, frame.line, frame.function, frame.text
            ));
        }
        let _ = writeln!(std::io::stderr(), "{message}");
    } else if !result.value.is_null() {
        outln!("{}", result.value)?;
    }
    Ok(())
}
