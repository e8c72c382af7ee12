//! [`plugin_error`]: an `e2b_client` error in the plugin API's vocabulary.

use dsh_plugin_api::{Error, ErrorKind};
use e2b_client::ErrorCode;

/// Maps an `e2b_client` error onto the shared vocabulary, keeping its text
/// (which already names the operation and its subject):
///
/// | `e2b_client::Error` | kind |
/// |---|---|
/// | `SandboxNotFound`, `Transport`, Connect `unavailable` | `Unavailable` (the world is gone or unreachable) |
/// | `NotFound` | `NotFound` |
/// | `InvalidArgument` | `InvalidInput` |
/// | `AlreadyExists` | `AlreadyExists` |
/// | `PermissionDenied`, `Authentication` | `PermissionDenied` |
/// | `Timeout`, Connect `deadline_exceeded` | `Timeout` |
/// | `Conflict`, Connect `aborted` | `Conflict` |
/// | `RateLimited` | `Busy` |
/// | `Config` | `Config` |
/// | `NotEnoughSpace`, `UploadSource`, Connect `data_loss` | `Io` |
/// | Connect `canceled` | `Cancelled` |
/// | Connect `unimplemented` | `Unsupported` |
/// | `Http`, `Protocol`, other Connect codes | `Remote` |
///
/// Adapters with a richer vocabulary (the fs seam's `NotADirectory`, …)
/// refine this for the calls where envd's answer says more.
pub fn plugin_error(err: &e2b_client::Error) -> Error {
    use e2b_client::Error as E;
    let kind = match err {
        E::SandboxNotFound { .. } | E::Transport { .. } => ErrorKind::Unavailable,
        E::NotFound { .. } => ErrorKind::NotFound,
        E::InvalidArgument { .. } => ErrorKind::InvalidInput,
        E::AlreadyExists { .. } => ErrorKind::AlreadyExists,
        E::PermissionDenied { .. } | E::Authentication { .. } => ErrorKind::PermissionDenied,
        E::Timeout { .. } => ErrorKind::Timeout,
        E::Conflict { .. } => ErrorKind::Conflict,
        E::RateLimited { .. } => ErrorKind::Busy,
        E::Config { .. } => ErrorKind::Config,
        E::NotEnoughSpace { .. } | E::UploadSource { .. } => ErrorKind::Io,
        E::Rpc { code, .. } => match code {
            ErrorCode::Unavailable => ErrorKind::Unavailable,
            ErrorCode::DeadlineExceeded => ErrorKind::Timeout,
            ErrorCode::Aborted => ErrorKind::Conflict,
            ErrorCode::Canceled => ErrorKind::Cancelled,
            ErrorCode::Unimplemented => ErrorKind::Unsupported,
            ErrorCode::DataLoss => ErrorKind::Io,
            _ => ErrorKind::Remote,
        },
        _ => ErrorKind::Remote,
    };
    Error::new(kind, err.to_string())
}

#[cfg(test)]
mod tests {
    use e2b_client::Context;

    use super::*;

    fn context() -> Context {
        Context::new("stat", "/home/user/x")
    }

    #[test]
    fn classes_map_onto_the_vocabulary_and_keep_their_text() {
        let cases = [
            (
                e2b_client::Error::SandboxNotFound {
                    context: context(),
                    sandbox_id: "sbx".into(),
                    message: "gone".into(),
                },
                ErrorKind::Unavailable,
            ),
            (
                e2b_client::Error::Transport {
                    context: context(),
                    message: "reset".into(),
                    source: None,
                },
                ErrorKind::Unavailable,
            ),
            (
                e2b_client::Error::NotFound {
                    context: context(),
                    message: "no such file".into(),
                },
                ErrorKind::NotFound,
            ),
            (
                e2b_client::Error::Authentication {
                    context: context(),
                    message: "bad key".into(),
                },
                ErrorKind::PermissionDenied,
            ),
            (
                e2b_client::Error::Rpc {
                    context: context(),
                    code: ErrorCode::Canceled,
                    message: "stop".into(),
                },
                ErrorKind::Cancelled,
            ),
            (
                e2b_client::Error::Rpc {
                    context: context(),
                    code: ErrorCode::Internal,
                    message: "boom".into(),
                },
                ErrorKind::Remote,
            ),
            (
                e2b_client::Error::Http {
                    context: context(),
                    status: 500,
                    message: "oops".into(),
                },
                ErrorKind::Remote,
            ),
        ];
        for (err, kind) in cases {
            let mapped = plugin_error(&err);
            assert_eq!(mapped.kind(), kind, "{err:?}");
            assert_eq!(mapped.message(), err.to_string());
            assert!(
                mapped.message().starts_with("stat /home/user/x: "),
                "{mapped}"
            );
        }
    }
}
