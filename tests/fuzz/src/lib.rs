//! The decoders of hostile input, each as one function over raw bytes: what
//! the fuzz targets in `fuzz_targets/` drive under libFuzzer (`tests/fuzz/run.sh`)
//! and what `tests/it` replays over the stored corpora, so an input that
//! once crashed stays fixed.
//!
//! Each function panics only on a defect: a decoder that panics, or a
//! refusal that breaks its contract (a manifest error with no problem in
//! it, an API error that is not a 4xx naming the operation). Every input
//! is otherwise acceptable — accepting or refusing is the decoder's call.

#![forbid(unsafe_code)]

use bytes::BytesMut;
use dsh_manifest::{Manifest, ManifestFormat};
use e2b_local_api::{json_body, model};

/// The manifest parser (`dsh_manifest::Manifest::parse`, which dsh-host
/// re-exports as `dsh_host::Manifest`): the first byte picks
/// the syntax (even: TOML, odd: YAML), the rest is the document. Input that
/// is not UTF-8 never reaches the parser (`Manifest::from_path` refuses it
/// first), so it is skipped here.
pub fn manifest(data: &[u8]) {
    let Some((selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let format = if selector % 2 == 0 {
        ManifestFormat::Toml
    } else {
        ManifestFormat::Yaml
    };
    if let Err(err) = Manifest::parse(text, format, "<fuzz>", None) {
        assert!(
            !err.problems.is_empty(),
            "an error with no problem: {err:?}"
        );
        assert!(err.to_string().starts_with("<fuzz>"), "{err}");
    }
}

/// Every e2b-local control-plane request body, through the same
/// `json_body` parsing and validation the handlers use: the first byte
/// picks the body type, the rest is the body.
pub fn rest_body(data: &[u8]) {
    let Some((selector, body)) = data.split_first() else {
        return;
    };
    let (op, refused) = match selector % 7 {
        0 => (
            "create sandbox",
            json_body::parse::<model::NewSandbox>("create sandbox", body)
                .and_then(|new| new.validate("create sandbox"))
                .err(),
        ),
        1 => (
            "connect sandbox",
            json_body::parse_optional::<model::ConnectSandbox>("connect sandbox", body).err(),
        ),
        2 => (
            "resume sandbox",
            json_body::parse_optional::<model::ResumeSandbox>("resume sandbox", body).err(),
        ),
        3 => (
            "set timeout",
            json_body::parse::<model::SetTimeout>("set timeout", body)
                .and_then(|set| model::check_timeout("set timeout", set.timeout))
                .err(),
        ),
        4 => (
            "refresh sandbox",
            json_body::parse_optional::<model::Refresh>("refresh sandbox", body).err(),
        ),
        5 => (
            "pause sandbox",
            json_body::parse_optional::<model::PauseSandbox>("pause sandbox", body).err(),
        ),
        _ => (
            "create sandbox",
            json_body::parse::<model::NewSandbox>("create sandbox", body).err(),
        ),
    };
    if let Some(err) = refused {
        assert!(
            err.status.is_client_error(),
            "{} {}",
            err.status,
            err.message
        );
        assert!(err.message.starts_with(op), "{op}: {}", err.message);
    }
}

/// The largest envd message the fuzz target lets an envelope declare (the
/// server's own limit is larger; the decoding is the same).
const MAX_MESSAGE: usize = 1 << 16;

/// An envd Connect request body as the server decodes it: envelope frames
/// (5-byte header, size-limited) then each payload as a protobuf or JSON
/// envd request. The first byte picks the codec (bit 0) and the request
/// type (the rest); the remainder is the framed body.
pub fn connect_request(data: &[u8]) {
    let Some((selector, body)) = data.split_first() else {
        return;
    };
    let json = selector & 1 == 1;
    let kind = selector >> 1;
    let mut buffer = BytesMut::from(body);
    // A body that ends mid-frame is a truncated request: the decoder waits
    // for more (`Ok(None)`) and the server ends the request there.
    while let Ok(Some(envelope)) =
        connectrpc::envelope::Envelope::decode_with_limit(&mut buffer, MAX_MESSAGE)
    {
        assert!(envelope.data.len() <= MAX_MESSAGE);
        decode_request(kind, json, &envelope.data);
    }
}

/// One payload as envd request type `kind` (modulo the number of types).
fn decode_request(kind: u8, json: bool, payload: &[u8]) {
    use envd_proto::filesystem as fs;
    use envd_proto::process as proc;

    macro_rules! decode {
        ($($index:literal => $ty:ty,)*) => {
            match kind % 17 {
                $($index => {
                    if json {
                        let _ = connectrpc::codec::decode_json::<$ty>(payload);
                    } else {
                        let _ = connectrpc::codec::decode_proto::<$ty>(payload);
                    }
                })*
                _ => unreachable!("kind % 17 is below 17"),
            }
        };
    }
    decode! {
        0 => proc::StartRequest,
        1 => proc::ConnectRequest,
        2 => proc::ListRequest,
        3 => proc::UpdateRequest,
        4 => proc::SendInputRequest,
        5 => proc::StreamInputRequest,
        6 => proc::SendSignalRequest,
        7 => proc::CloseStdinRequest,
        8 => fs::StatRequest,
        9 => fs::MakeDirRequest,
        10 => fs::MoveRequest,
        11 => fs::ListDirRequest,
        12 => fs::RemoveRequest,
        13 => fs::WatchDirRequest,
        14 => fs::CreateWatcherRequest,
        15 => fs::GetWatcherEventsRequest,
        16 => fs::RemoveWatcherRequest,
    }
}
