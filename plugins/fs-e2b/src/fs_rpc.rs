//! envd's unary filesystem RPCs (`Stat`, `ListDir`, `MakeDir`, `Move`,
//! `Remove`), called through the generated `connectrpc` client over the
//! provider's transport, answered in `e2b_client`'s types.
//!
//! Why not `e2b_client::Envd`'s own methods: the futures of its unary calls
//! cannot be proven `Send` by rustc (its private `unary` helper is generic
//! over a `'static` message view, whose lifetime the async state machine
//! erases — "implementation of `MessageView` is not general enough"), and
//! every seam method must return a `Send` future. Its streaming calls and
//! `/files` transfers are not affected and are used as they are. Once
//! `e2b-client` builds the owned message inside each call's future instead,
//! this module can go.
//!
//! Failures are classified from the Connect error as `e2b_client` does for
//! these calls: the code names the class; a failure below the Connect
//! layer, or a response body that broke off, is a transport failure (the
//! sandbox is unreachable).

use std::time::Duration;

use connectrpc::client::{CallOptions, ClientConfig, UnaryResponse};
use connectrpc::{ConnectError, ErrorCode};
use e2b_client::{Context, EntryInfo, Error, FileType, Result};
use envd_proto::filesystem as pb;
use envd_proto::filesystem::FilesystemClient;
use http::HeaderValue;

use crate::world::EnvdTransport;

/// Bound of one call (sent as `Connect-Timeout-Ms` and enforced locally),
/// as `e2b_client`'s default request timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The unary filesystem calls of one sandbox's envd, as its default user.
pub(crate) struct FsRpc<T> {
    client: FilesystemClient<T>,
    /// `Authorization` naming the user calls act as, for envd versions
    /// without a default user of their own (below 0.4.0); `None` lets envd
    /// use its default user.
    user: Option<HeaderValue>,
}

impl<T: EnvdTransport> FsRpc<T> {
    /// Calls through `transport`, which takes path-only request URIs (as
    /// `Envd`'s transports do), in binary protobuf, as `user` when given
    /// (else envd's default user).
    pub(crate) fn new(transport: T, user: Option<&str>) -> FsRpc<T> {
        let config = ClientConfig::new(http::Uri::from_static("/")).proto();
        FsRpc {
            client: FilesystemClient::new(transport, config),
            user: user.and_then(basic_auth),
        }
    }

    fn options(&self) -> CallOptions {
        let options = CallOptions::default().with_timeout(CALL_TIMEOUT);
        match &self.user {
            Some(user) => options.with_headers([(http::header::AUTHORIZATION, user.clone())]),
            None => options,
        }
    }

    /// `Stat`: `lstat`-based metadata of `path`.
    pub(crate) async fn stat(&self, path: &str) -> Result<EntryInfo> {
        let context = Context::new("stat", path);
        let request = pb::StatRequest {
            path: path.to_owned(),
            ..Default::default()
        };
        let response = self
            .client
            .stat_with_options(request, self.options())
            .await
            .map(UnaryResponse::into_owned)
            .map_err(|err| classify(context.clone(), &err))?;
        entry(context, response.entry.into_option())
    }

    /// `ListDir` of `path` to `depth` levels.
    pub(crate) async fn list_dir(&self, path: &str, depth: u32) -> Result<Vec<EntryInfo>> {
        let context = Context::new("list directory", path);
        let request = pb::ListDirRequest {
            path: path.to_owned(),
            depth,
            ..Default::default()
        };
        let response = self
            .client
            .list_dir_with_options(request, self.options())
            .await
            .map(UnaryResponse::into_owned)
            .map_err(|err| classify(context.clone(), &err))?;
        response
            .entries
            .into_iter()
            .map(|raw| convert(raw).map_err(|why| protocol(&context, why)))
            .collect()
    }

    /// `MakeDir`: `mkdir -p path`, new directories owned by the user.
    pub(crate) async fn make_dir(&self, path: &str) -> Result<EntryInfo> {
        let context = Context::new("make directory", path);
        let request = pb::MakeDirRequest {
            path: path.to_owned(),
            ..Default::default()
        };
        let response = self
            .client
            .make_dir_with_options(request, self.options())
            .await
            .map(UnaryResponse::into_owned)
            .map_err(|err| classify(context.clone(), &err))?;
        entry(context, response.entry.into_option())
    }

    /// `Move`: renames `source` to `destination` (parents created); the
    /// destination's metadata right after the rename.
    pub(crate) async fn rename(&self, source: &str, destination: &str) -> Result<EntryInfo> {
        let context = Context::new("rename", format!("{source} to {destination}"));
        let request = pb::MoveRequest {
            source: source.to_owned(),
            destination: destination.to_owned(),
            ..Default::default()
        };
        let response = self
            .client
            .move_with_options(request, self.options())
            .await
            .map(UnaryResponse::into_owned)
            .map_err(|err| classify(context.clone(), &err))?;
        entry(context, response.entry.into_option())
    }

    /// `Remove`: recursive; a missing path is success.
    pub(crate) async fn remove(&self, path: &str) -> Result<()> {
        let context = Context::new("remove", path);
        let request = pb::RemoveRequest {
            path: path.to_owned(),
            ..Default::default()
        };
        self.client
            .remove_with_options(request, self.options())
            .await
            .map(UnaryResponse::into_owned)
            .map_err(|err| classify(context.clone(), &err))?;
        Ok(())
    }
}

/// `Basic base64("<user>:")` (envd's user selection, empty password);
/// `None` for a name that cannot be one (a `:` or a control character).
fn basic_auth(user: &str) -> Option<HeaderValue> {
    use base64::Engine;
    if user.is_empty() || user.contains(':') || user.chars().any(char::is_control) {
        return None;
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:"));
    HeaderValue::from_str(&format!("Basic {encoded}")).ok()
}

/// The entry a response must carry.
fn entry(context: Context, raw: Option<pb::EntryInfo>) -> Result<EntryInfo> {
    let raw = raw.ok_or_else(|| protocol(&context, "the response carries no entry".to_owned()))?;
    convert(raw).map_err(|why| protocol(&context, why))
}

fn protocol(context: &Context, message: String) -> Error {
    Error::Protocol {
        context: context.clone(),
        message,
    }
}

/// envd's entry in `e2b_client`'s form.
fn convert(raw: pb::EntryInfo) -> std::result::Result<EntryInfo, String> {
    let size = u64::try_from(raw.size)
        .map_err(|_| format!("entry {:?} has a negative size {}", raw.path, raw.size))?;
    let modified = match raw.modified_time.as_option() {
        Some(time) => Some(
            jiff::Timestamp::new(time.seconds, time.nanos)
                .map_err(|err| format!("entry {:?} has an invalid time: {err}", raw.path))?,
        ),
        None => None,
    };
    let file_type = match raw.r#type.as_known() {
        Some(pb::FileType::FILE_TYPE_FILE) => FileType::File,
        Some(pb::FileType::FILE_TYPE_DIRECTORY) => FileType::Directory,
        Some(pb::FileType::FILE_TYPE_SYMLINK) => FileType::Symlink,
        Some(pb::FileType::FILE_TYPE_UNSPECIFIED) => FileType::Unspecified,
        None => FileType::Other(raw.r#type.to_i32()),
    };
    Ok(EntryInfo {
        name: raw.name,
        file_type,
        path: raw.path,
        size,
        mode: raw.mode,
        permissions: raw.permissions,
        owner: raw.owner,
        group: raw.group,
        modified,
        symlink_target: raw.symlink_target,
        metadata: raw.metadata.into_iter().collect(),
    })
}

/// The `e2b_client` class of a Connect failure of a unary call.
fn classify(context: Context, err: &ConnectError) -> Error {
    let message = err.message.clone().unwrap_or_default();
    match err.code {
        ErrorCode::Unauthenticated => Error::Authentication { context, message },
        ErrorCode::InvalidArgument => Error::InvalidArgument { context, message },
        ErrorCode::DeadlineExceeded => Error::Timeout { context, message },
        ErrorCode::NotFound => Error::NotFound { context, message },
        ErrorCode::AlreadyExists => Error::AlreadyExists { context, message },
        ErrorCode::PermissionDenied => Error::PermissionDenied { context, message },
        ErrorCode::ResourceExhausted => Error::RateLimited { context, message },
        // Below the Connect layer (refused, reset), or a body that broke
        // off: the sandbox could not be reached.
        ErrorCode::Unavailable if err.source_arc().is_some() => Error::Transport {
            context,
            message,
            source: err.source_arc(),
        },
        ErrorCode::Internal if message.starts_with("failed to read response body") => {
            Error::Transport {
                context,
                message,
                source: err.source_arc(),
            }
        }
        code => Error::Rpc {
            context,
            code,
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_convert_with_types_times_and_metadata() {
        let raw = pb::EntryInfo {
            name: "a".into(),
            r#type: pb::FileType::FILE_TYPE_DIRECTORY.into(),
            path: "/w/a".into(),
            size: 4096,
            mode: 0o755,
            permissions: "drwxr-xr-x".into(),
            owner: "user".into(),
            group: "user".into(),
            modified_time: buffa::MessageField::some(buffa_types::google::protobuf::Timestamp {
                seconds: 1_700_000_000,
                nanos: 7,
                ..Default::default()
            }),
            metadata: [("k".to_owned(), "v".to_owned())].into_iter().collect(),
            ..Default::default()
        };
        let entry = convert(raw).unwrap();
        assert_eq!(entry.file_type, FileType::Directory);
        assert_eq!(entry.size, 4096);
        assert_eq!(entry.modified.unwrap().subsec_nanosecond(), 7);
        assert_eq!(entry.metadata["k"], "v");
        let negative = pb::EntryInfo {
            size: -1,
            ..Default::default()
        };
        assert!(convert(negative).unwrap_err().contains("negative size"));
    }

    #[test]
    fn users_are_named_as_envd_reads_them() {
        assert_eq!(basic_auth("user").unwrap(), "Basic dXNlcjo=");
        assert_eq!(basic_auth("root").unwrap(), "Basic cm9vdDo=");
        assert!(basic_auth("a:b").is_none());
        assert!(basic_auth("").is_none());
    }

    #[test]
    fn connect_codes_map_onto_client_classes() {
        let context = Context::new("stat", "/w/a");
        let cases = [
            (ConnectError::not_found("gone"), "not found"),
            (ConnectError::invalid_argument("bad"), "invalid argument"),
            (ConnectError::internal("lstat: not a directory"), "internal"),
        ];
        for (err, class) in cases {
            let mapped = classify(context.clone(), &err);
            assert!(mapped.to_string().contains(class), "{mapped}");
        }
        assert!(classify(context.clone(), &ConnectError::not_found("x")).is_not_found());
        let broke = ConnectError::internal("failed to read response body: reset");
        assert!(classify(context, &broke).is_unavailable());
    }
}
