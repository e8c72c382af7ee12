//! Terminal rules every subprocess provider applies identically.

use dsh_plugin_api::{Error, Result};

/// Checks a size `Terminal::resize` was given: both dimensions at least 1,
/// else `InvalidInput` (`"resize: terminal size 0x24 must be at least
/// 1x1"`), before anything reaches the terminal.
pub fn check_resize(cols: u16, rows: u16) -> Result<()> {
    if cols == 0 || rows == 0 {
        return Err(Error::invalid_input(format!(
            "resize: terminal size {cols}x{rows} must be at least 1x1"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use dsh_plugin_api::ErrorKind;

    use super::*;

    #[test]
    fn zero_dimensions_are_refused() {
        check_resize(80, 24).unwrap();
        check_resize(1, 1).unwrap();
        for (cols, rows) in [(0, 24), (80, 0), (0, 0)] {
            let err = check_resize(cols, rows).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            assert_eq!(
                err.message(),
                format!("resize: terminal size {cols}x{rows} must be at least 1x1")
            );
        }
    }
}
