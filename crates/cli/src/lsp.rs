//! `dsh lsp …`: the language tools of `dsh-consumers` on the command line. The servers live as
//! long as the command: they are shut down (each process group proven gone) before it exits.

use std::path::Path;

use dsh_consumers::lsp::tools::{
    DiagnosticsRequest, PositionRequest, ReferencesRequest, RenameRequest, SymbolsRequest,
};
use dsh_consumers::lsp::{Lsp, LspConfig};
use dsh_host::Host;
use dsh_plugin_api::{Error as PluginError, ErrorKind};

use crate::args::{LspAt, LspCommand};
use crate::failure::{EXIT_CONFIG, EXIT_FAILURE, Failure};
use crate::fs::report_outcome;

/// The language servers: the defaults, or with `path`'s languages.
pub fn config(path: Option<&Path>) -> Result<LspConfig, Failure> {
    match path {
        None => Ok(LspConfig::default()),
        Some(path) => {
            LspConfig::from_path(path).map_err(|err| Failure::new(EXIT_CONFIG, err.to_string()))
        }
    }
}

/// Runs one `dsh lsp` command; 1 when diagnostics report errors.
pub async fn run(
    host: &Host,
    command: LspCommand,
    config: LspConfig,
    json: bool,
) -> Result<i32, Failure> {
    let lsp = Lsp::new(host.fs()?, host.subprocess()?, config);
    let outcome = answer(&lsp, command, json).await;
    for problem in lsp.shutdown().await {
        tracing::warn!("dsh lsp: {problem}");
    }
    outcome
}

async fn answer(lsp: &Lsp, command: LspCommand, json: bool) -> Result<i32, Failure> {
    match command {
        LspCommand::Diagnostics { file, timeout } => {
            let result = lsp
                .lsp_diagnostics(DiagnosticsRequest {
                    path: file,
                    timeout_secs: timeout,
                })
                .await
                .map_err(failed)?;
            report_outcome(json, &result)?;
            return Ok(if result.errors > 0 { EXIT_FAILURE } else { 0 });
        }
        LspCommand::Definition(at) => report_outcome(
            json,
            &lsp.lsp_definition(position(at)?).await.map_err(failed)?,
        )?,
        LspCommand::References { at, no_declaration } => {
            let request = ReferencesRequest {
                at: position(at)?,
                include_declaration: Some(!no_declaration),
            };
            report_outcome(json, &lsp.lsp_references(request).await.map_err(failed)?)?
        }
        LspCommand::Hover(at) => {
            report_outcome(json, &lsp.lsp_hover(position(at)?).await.map_err(failed)?)?
        }
        LspCommand::Symbols {
            query,
            file,
            language,
        } => {
            let request = SymbolsRequest {
                path: file,
                query,
                language,
            };
            report_outcome(json, &lsp.lsp_symbols(request).await.map_err(failed)?)?
        }
        LspCommand::Rename {
            at,
            new_name,
            dry_run,
        } => {
            let request = RenameRequest {
                at: position(at)?,
                new_name,
                apply: Some(!dry_run),
            };
            let result = lsp.lsp_rename(request).await.map_err(failed)?;
            report_outcome(json, &result)?;
            if !result.conflicts.is_empty() {
                return Ok(EXIT_FAILURE);
            }
        }
    }
    Ok(0)
}

/// `FILE:LINE:COL`, or `FILE` with `--symbol`.
fn position(at: LspAt) -> Result<PositionRequest, Failure> {
    let usage = |why: &str| Failure::new(EXIT_CONFIG, format!("dsh lsp: {:?}: {why}", at.at));
    let parts: Vec<&str> = at.at.rsplitn(3, ':').collect();
    let numbers = match parts.as_slice() {
        [column, line, file] => match (line.parse::<u32>(), column.parse::<u32>()) {
            (Ok(line), Ok(column)) => Some((file.to_string(), line, column)),
            _ => None,
        },
        _ => None,
    };
    match (numbers, at.symbol.clone()) {
        (Some(_), Some(_)) => Err(usage("give FILE:LINE:COL or FILE --symbol NAME, not both")),
        (Some((path, line, column)), None) => Ok(PositionRequest {
            path,
            line: Some(line),
            column: Some(column),
            symbol: None,
        }),
        (None, Some(symbol)) => Ok(PositionRequest {
            path: at.at.clone(),
            line: None,
            column: None,
            symbol: Some(symbol),
        }),
        (None, None) => Err(usage(
            "expected FILE:LINE:COL (1-based), or FILE --symbol NAME",
        )),
    }
}

/// A tool's error (it names the tool and the file) with the exit code its kind means. A file
/// no server can be given (not UTF-8, binary, not a regular file, too large, of no configured
/// language) is bad input, 2 — never 1, which `diagnostics` gives for a file with errors.
fn failed(err: PluginError) -> Failure {
    let code = match err.kind() {
        ErrorKind::InvalidInput
        | ErrorKind::Config
        | ErrorKind::InvalidUtf8
        | ErrorKind::Binary => EXIT_CONFIG,
        _ => EXIT_FAILURE,
    };
    Failure::new(code, err.to_string())
}
