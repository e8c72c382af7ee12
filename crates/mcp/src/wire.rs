//! Client messages as they arrive, over either transport: one JSON-RPC
//! message decoded from bytes, or the error to answer instead — a parse
//! error (-32700) for bytes that are not JSON, an invalid request (-32600)
//! for JSON that is not an MCP message — as JSON-RPC 2.0 says, with the
//! request's `id` when one can be read and `null` otherwise, so a client
//! waiting for that id gets its answer instead of waiting forever.

use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientRequest, ErrorCode, JsonRpcMessage, JsonRpcRequest,
};
use serde::de::IgnoredAny;
use serde_json::Value;

/// The most one message may take (16 MiB, rmcp's own bound for a stdio line
/// and an SSE event): larger ones are refused without being held whole.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Why bytes are not a message the server can serve, and how to say so.
#[derive(Debug)]
pub(crate) struct Rejected {
    /// The JSON-RPC error code.
    pub(crate) code: ErrorCode,
    /// The request's id, `Value::Null` when it could not be read.
    pub(crate) id: Value,
    /// What was wrong, for the client's user.
    pub(crate) message: String,
    /// Whether the bytes were a notification: JSON-RPC answers those with
    /// nothing, not even an error.
    pub(crate) notification: bool,
}

impl Rejected {
    /// The JSON-RPC error response, one line of JSON without its newline.
    pub(crate) fn body(&self) -> Vec<u8> {
        let response = serde_json::json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code.0, "message": self.message},
        });
        serde_json::to_vec(&response).unwrap_or_default()
    }

    /// The refusal of a message of more than [`MAX_MESSAGE_BYTES`], answered
    /// to `id` (what [`IdScanner`] found).
    pub(crate) fn oversized(id: Option<Value>) -> Rejected {
        Rejected {
            code: ErrorCode::INVALID_REQUEST,
            id: id.unwrap_or(Value::Null),
            message: format!(
                "dsh mcp: a message of more than {MAX_MESSAGE_BYTES} bytes (16 MiB) was discarded"
            ),
            notification: false,
        }
    }
}

/// Decodes one client message (`bytes` without its line end; a UTF-8 byte
/// order mark is ignored).
pub(crate) fn decode(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Rejected> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Some(call) = tool_call(bytes) {
        return Ok(call);
    }
    // The usual case parses once; only a refusal looks again, for the id.
    let err = match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(message) => return Ok(message),
        Err(err) => err,
    };
    let value = match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => value,
        Err(syntax) => {
            return Err(Rejected {
                code: ErrorCode::PARSE_ERROR,
                id: Value::Null,
                message: format!("dsh mcp: parse error: the message is not JSON: {syntax}"),
                notification: false,
            });
        }
    };
    let id = value.get("id").filter(|id| is_id(id)).cloned();
    let notification = value.get("method").is_some() && value.get("id").is_none();
    Err(Rejected {
        code: ErrorCode::INVALID_REQUEST,
        id: id.unwrap_or(Value::Null),
        message: format!("dsh mcp: invalid request: not an MCP client message: {err}"),
        notification,
    })
}

/// `bytes` as the `tools/call` request they are, decoded as that type alone;
/// `None` for anything else, which [`decode`] decodes as any client message.
///
/// rmcp's client request is an untagged union: decoded as one, a message is
/// tried against each request type in turn, and every failed try builds an
/// error (allocated, formatted, its position found) that is thrown away.
/// `tools/call` is the 14th type, `ping` the first, so a tool call paid 13
/// such tries that a ping does not — most of what decoding a tool call cost
/// beyond a ping (issue 26, the per-call toll). Only messages that carry the
/// method as a compact member (`"method":"tools/call"`, as the official SDKs
/// write it) are tried here; such bytes cannot occur inside a JSON string, and
/// the result is what the union gives, since no type before `tools/call`
/// accepts that method and the message's shape is checked the same way (a
/// stray `result` or `error` makes it no request). A message this does not
/// take, valid or not, is decoded by the union as before.
fn tool_call(bytes: &[u8]) -> Option<ClientJsonRpcMessage> {
    memchr::memmem::find(bytes, br#""method":"tools/call""#)?;
    match serde_json::from_slice::<JsonRpcMessage<CallToolRequest, IgnoredAny, IgnoredAny>>(bytes) {
        Ok(JsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc,
            id,
            request,
        })) => Some(ClientJsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc,
            id,
            request: ClientRequest::CallToolRequest(request),
        })),
        _ => None,
    }
}

/// A JSON-RPC request id: a string or a number.
fn is_id(value: &Value) -> bool {
    value.is_string() || value.is_number()
}

/// The longest `id` value [`IdScanner`] keeps (longer ones are not looked
/// for: no client makes them).
const MAX_ID_BYTES: usize = 256;

/// Finds the top-level `"id"` member of a JSON object fed to it in pieces,
/// holding a few bytes at most: a message too large to keep is still
/// answered to its id. Keys and strings are matched as written (an id key
/// spelled with escapes is not recognised; no client writes one).
#[derive(Debug, Default)]
pub(crate) struct IdScanner {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The top-level value is an object (only then has it members).
    object: bool,
    role: Role,
    /// The key being read, up to 3 bytes (enough to tell `id` from others).
    key: Vec<u8>,
    /// The id's value being read, as written.
    value: Vec<u8>,
    found: Option<Value>,
}

/// Where the scan is within the top-level object.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum Role {
    /// Before a member's key.
    #[default]
    Key,
    /// Inside a key string.
    InKey,
    /// After a key, before its colon; whether the key is `id`.
    Colon(bool),
    /// In a member's value; whether it is the id's.
    Value(bool),
}

impl IdScanner {
    /// Reads the next piece of the message.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.found.is_some() {
                return;
            }
            self.step(byte);
        }
    }

    /// The id found so far (a string or a number).
    pub(crate) fn id(&self) -> Option<Value> {
        self.found.clone()
    }

    fn step(&mut self, byte: u8) {
        let top = self.object && self.depth == 1;
        if top && self.role == Role::Value(true) {
            if self.value.len() == MAX_ID_BYTES {
                self.role = Role::Value(false);
            } else {
                self.value.push(byte);
            }
        }
        if self.in_string {
            if top && self.role == Role::InKey && !self.escaped && byte != b'"' {
                // One byte past `id` is enough to know it is another key.
                if self.key.len() < 3 {
                    self.key.push(byte);
                }
            }
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                if top && self.role == Role::InKey {
                    self.role = Role::Colon(self.key == b"id");
                }
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if top && self.role == Role::Key {
                    self.role = Role::InKey;
                    self.key.clear();
                }
            }
            b'{' | b'[' => {
                if self.depth == 0 {
                    self.object = byte == b'{';
                    self.role = Role::Key;
                } else if top && self.role == Role::Value(true) {
                    // An object or array is no id.
                    self.role = Role::Value(false);
                }
                self.depth += 1;
            }
            b'}' | b']' => {
                if top {
                    self.finish_value();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if top => {
                if let Role::Colon(is_id) = self.role {
                    self.role = Role::Value(is_id);
                    self.value.clear();
                }
            }
            b',' if top => {
                self.finish_value();
                self.role = Role::Key;
            }
            _ => {}
        }
    }

    /// At the end of a top-level member: keeps its value if it was the id's.
    fn finish_value(&mut self) {
        if self.role != Role::Value(true) {
            return;
        }
        // The delimiter that ended the value was pushed with it.
        let written = &self.value[..self.value.len().saturating_sub(1)];
        if let Ok(value) = serde_json::from_slice::<Value>(written.trim_ascii())
            && is_id(&value)
        {
            self.found = Some(value);
        }
        self.role = Role::Value(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::GetMeta;

    fn scan(text: &str, piece: usize) -> Option<Value> {
        let mut scanner = IdScanner::default();
        for chunk in text.as_bytes().chunks(piece) {
            scanner.feed(chunk);
        }
        scanner.id()
    }

    #[test]
    fn the_scanner_finds_the_top_level_id_wherever_it_is_and_however_the_bytes_arrive() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
                Some(serde_json::json!(7)),
            ),
            // The TypeScript SDK writes the id last, after the (large) params.
            (
                r#"{"method":"tools/call","params":{"id":1,"arguments":{"content":"x\"id\":2,"}},"jsonrpc":"2.0","id":"req-9"}"#,
                Some(serde_json::json!("req-9")),
            ),
            (r#"{ "id" : 12 }"#, Some(serde_json::json!(12))),
            (
                r#"{"idx":1,"i":2,"id":-3.5}"#,
                Some(serde_json::json!(-3.5)),
            ),
            (r#"{"method":"notifications/initialized"}"#, None),
            (r#"{"id":{"nested":1}}"#, None),
            (r#"{"id":null}"#, None),
            (r#"[{"id":1}]"#, None),
            (r#"{"params":{"id":5}}"#, None),
            (r#"{"text":"\\","id":4}"#, Some(serde_json::json!(4))),
        ];
        for (text, expected) in cases {
            for piece in [1, 2, 5, text.len()] {
                assert_eq!(scan(text, piece), expected, "{text} in pieces of {piece}");
            }
        }
    }

    #[test]
    fn decoding_tells_a_parse_error_from_an_invalid_request_and_keeps_the_id() {
        let not_json = decode(b"this is not json").unwrap_err();
        assert_eq!(not_json.code, ErrorCode::PARSE_ERROR);
        assert_eq!(not_json.id, Value::Null);
        assert!(!not_json.notification);
        let body: Value = serde_json::from_slice(&not_json.body()).unwrap();
        assert_eq!(body["error"]["code"], -32700);
        assert_eq!(body["id"], Value::Null);

        let invalid =
            decode(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":7}"#).unwrap_err();
        assert_eq!(invalid.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(invalid.id, serde_json::json!(3));
        assert!(!invalid.notification);

        let notification =
            decode(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":7}"#)
                .unwrap_err();
        assert!(notification.notification, "{notification:?}");

        let ok = decode(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
        assert!(ok.is_ok(), "{ok:?}");
    }

    /// The client message rmcp's own decoding makes of `text`, or its error.
    fn as_rmcp_decodes(text: &str) -> Result<ClientJsonRpcMessage, String> {
        serde_json::from_str::<ClientJsonRpcMessage>(text).map_err(|err| err.to_string())
    }

    /// `tools/call`, decoded as that type alone, is the message rmcp's union
    /// makes of it — its arguments, id and `_meta` (the progress token)
    /// included — and whatever is not a request of that method (a nested
    /// member that says it, a stray `result`, a malformed call) is left to the
    /// union, so it is refused or accepted exactly as before.
    #[test]
    fn a_tool_call_decodes_as_the_union_decodes_it_and_nothing_else_is_taken_for_one() {
        let calls = [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_terminals","arguments":{}}}"#,
            // The TypeScript SDK's order: the id last.
            r#"{"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a \"method\":\"tools/call\""},"_meta":{"progressToken":3}},"jsonrpc":"2.0","id":"req-9"}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"run"}}"#,
        ];
        for text in calls {
            let ours = tool_call(text.as_bytes()).expect("taken as a tool call");
            let theirs = as_rmcp_decodes(text).unwrap();
            assert_eq!(
                serde_json::to_value(&ours).unwrap(),
                serde_json::to_value(&theirs).unwrap(),
                "{text}"
            );
            let (JsonRpcMessage::Request(ours), JsonRpcMessage::Request(theirs)) = (ours, theirs)
            else {
                panic!("{text}: not requests");
            };
            assert!(
                matches!(ours.request, ClientRequest::CallToolRequest(_)),
                "{text}"
            );
            // `_meta` is kept beside the request, where the handler reads the progress token.
            assert_eq!(
                ours.request.get_meta().get_progress_token(),
                theirs.request.get_meta().get_progress_token(),
                "{text}"
            );
            assert_eq!(
                ours.request.get_meta().get_progress_token().is_some(),
                text.contains("progressToken"),
                "{text}"
            );
        }
        let not_calls = [
            // Said by a nested member only.
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":{"method":"tools/call"}}}}"#,
            // A response in the shape of a call.
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"},"result":{}}"#,
            // A notification.
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            // Malformed: params not an object, no name.
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":7}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#,
            // The method written with a space: the union's.
            r#"{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "x"}}"#,
        ];
        for text in not_calls {
            assert!(tool_call(text.as_bytes()).is_none(), "{text}");
            // And decode gives what the union gives.
            match (decode(text.as_bytes()), as_rmcp_decodes(text)) {
                (Ok(ours), Ok(theirs)) => assert_eq!(
                    serde_json::to_value(&ours).unwrap(),
                    serde_json::to_value(&theirs).unwrap(),
                    "{text}"
                ),
                (Err(refused), Err(why)) => assert!(refused.message.contains(&why), "{text}"),
                (ours, theirs) => panic!("{text}: {ours:?} where rmcp gives {theirs:?}"),
            }
        }
    }
}
