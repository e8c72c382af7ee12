//! TypeScript to JavaScript on the host, by erasing the types
//! (`swc_ts_fast_strip` in strip-only mode): every type annotation,
//! interface and `as` cast is replaced by whitespace, so the JavaScript has
//! the TypeScript's lines and columns and a traceback needs no source map.
//! What cannot be erased (`enum`, `namespace` with values, parameter
//! properties) is refused with the compiler's message.

use std::io::Write;
use std::sync::{Arc, Mutex};

use dsh_plugin_api::{Error, Result};
use swc_common::SourceMap;
use swc_common::errors::Handler;
use swc_common::sync::Lrc;
use swc_ts_fast_strip::{Mode, Options, operate};

/// A diagnostics sink shared with the compiler's handler.
#[derive(Clone, Default)]
struct Diagnostics(Arc<Mutex<Vec<u8>>>);

impl Write for Diagnostics {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `body`, a TypeScript function body named `filename`, as JavaScript with
/// the same lines and columns. `operation` names the tool in the error.
///
/// The body is stripped inside the same async function header the runner
/// wraps it in, so a top-level `return` or `await` parses; the header and
/// footer are unchanged by stripping and cut off again.
pub(crate) fn strip(operation: &str, filename: &str, body: &str, header: &str) -> Result<String> {
    const FOOTER: &str = "\n})";
    let wrapped = format!("{header}{body}{FOOTER}");
    let map: Lrc<SourceMap> = Default::default();
    let diagnostics = Diagnostics::default();
    let handler = Handler::with_emitter_writer(Box::new(diagnostics.clone()), Some(map.clone()));
    let options = Options {
        filename: Some(filename.to_owned()),
        mode: Mode::StripOnly,
        module: Some(false),
        ..Options::default()
    };
    let stripped = operate(&map, &handler, wrapped, options).map_err(|err| {
        let shown = String::from_utf8_lossy(
            &diagnostics
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
        .into_owned();
        Error::invalid_input(format!(
            "{operation}: the TypeScript program cannot be run ({err}): {}",
            shown.trim()
        ))
        .with_subject(filename.to_owned())
    })?;
    stripped
        .code
        .strip_prefix(header)
        .and_then(|rest| rest.strip_suffix(FOOTER))
        .map(str::to_owned)
        .ok_or_else(|| {
            Error::invalid_input(format!(
                "{operation}: the TypeScript program closes the function it is run in (an unmatched '}}')"
            ))
            .with_subject(filename.to_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "(async function (dsh, require) {";

    #[test]
    fn types_are_erased_in_place() {
        let source = "const n: number = 1;\ninterface P { x: number }\nreturn (n as number) + 1;";
        let code = strip("code_run", "run-1.ts", source, HEADER).unwrap();
        assert_eq!(code.lines().count(), source.lines().count());
        assert!(
            !code.contains("number") && !code.contains("interface"),
            "{code}"
        );
        assert_eq!(code.find("return"), source.find("return"));
    }

    #[test]
    fn what_cannot_be_erased_is_refused_with_the_compilers_words() {
        let err = strip("code_run", "run-1.ts", "enum E { A }\nreturn E.A;", HEADER).unwrap_err();
        assert!(err.to_string().contains("code_run"), "{err}");
        assert!(err.to_string().to_lowercase().contains("enum"), "{err}");
    }
}
