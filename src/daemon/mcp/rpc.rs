//! JSON-RPC 2.0 message handling for MCP (spec 02 §4): classify each message, dispatch the
//! methods we answer, build error objects.

use serde_json::{json, Value};

use super::tool::{call_tool, tool_listing, INSTRUCTIONS, SUPPORTED_PROTOCOL_VERSIONS};
use super::{Backend, CallerCreds};

/// JSON-RPC error codes we use.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// One incoming JSON-RPC message, classified.
#[derive(Debug, PartialEq)]
enum Message<'a> {
    /// A request: must be answered.
    Request {
        id: &'a Value,
        method: &'a str,
        params: Option<&'a Value>,
    },
    /// A notification or a response from the client: never answered.
    NoReply,
    /// Not a valid JSON-RPC message: answered with -32600 (`id` when we could read one).
    Invalid { id: Value, why: &'static str },
}

fn classify(v: &Value) -> Message<'_> {
    let Some(obj) = v.as_object() else {
        return Message::Invalid {
            id: Value::Null,
            why: "a JSON-RPC message must be an object",
        };
    };
    let id = obj.get("id");
    let id_ok = matches!(id, Some(Value::String(_)) | Some(Value::Number(_)));
    let safe_id = if id_ok { id.cloned() } else { None }.unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Message::Invalid {
            id: safe_id,
            why: "\"jsonrpc\" must be \"2.0\"",
        };
    }
    let method = obj.get("method");
    if method.is_none() && (obj.contains_key("result") || obj.contains_key("error")) {
        // A response to something we never send; the transport says to accept it silently.
        return Message::NoReply;
    }
    let Some(method) = method.and_then(Value::as_str) else {
        return Message::Invalid {
            id: safe_id,
            why: "\"method\" must be a string",
        };
    };
    let Some(id) = id else {
        return Message::NoReply;
    };
    if !id_ok {
        return Message::Invalid {
            id: Value::Null,
            why: "\"id\" must be a string or a number",
        };
    }
    let params = obj.get("params");
    if !matches!(
        params,
        None | Some(Value::Object(_)) | Some(Value::Array(_))
    ) {
        return Message::Invalid {
            id: id.clone(),
            why: "\"params\" must be an object",
        };
    }
    Message::Request { id, method, params }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

fn success(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// Answer one message; `None` when it needs no answer.
fn answer(v: &Value, creds: &CallerCreds, backend: &dyn Backend) -> Option<Value> {
    match classify(v) {
        Message::NoReply => None,
        Message::Invalid { id, why } => Some(error(
            id,
            INVALID_REQUEST,
            &format!("invalid request: {why}"),
        )),
        Message::Request { id, method, params } => {
            Some(dispatch(id, method, params, creds, backend))
        }
    }
}

fn dispatch(
    id: &Value,
    method: &str,
    params: Option<&Value>,
    creds: &CallerCreds,
    backend: &dyn Backend,
) -> Value {
    match method {
        "initialize" => success(id, initialize_result(params)),
        "ping" => success(id, json!({})),
        "tools/list" => {
            backend.tools_listed(creds);
            success(id, json!({ "tools": [tool_listing()] }))
        }
        "tools/call" => {
            let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
            match name {
                None => error(
                    id.clone(),
                    INVALID_PARAMS,
                    "tools/call needs params.name (a string)",
                ),
                Some(name) => {
                    let arguments = params.and_then(|p| p.get("arguments"));
                    success(id, call_tool(name, arguments, creds.clone(), backend))
                }
            }
        }
        other => error(
            id.clone(),
            METHOD_NOT_FOUND,
            &format!("method not found: {other}"),
        ),
    }
}

/// The `initialize` result: echo a supported `protocolVersion`, else offer the newest.
fn initialize_result(params: Option<&Value>) -> Value {
    let asked = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let version = SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .find(|v| Some(**v) == asked)
        .unwrap_or(&SUPPORTED_PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": {} },
        "serverInfo": { "name": "iapeer", "version": env!("CARGO_PKG_VERSION") },
        "instructions": INSTRUCTIONS
    })
}

/// Process a whole POST body. Returns the HTTP status and the JSON to send (`None` = 202).
pub(super) fn process(
    body: &[u8],
    creds: &CallerCreds,
    backend: &dyn Backend,
) -> (u16, Option<Value>) {
    let parsed: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            let text = format!("parse error: {e}");
            return (400, Some(error(Value::Null, PARSE_ERROR, &text)));
        }
    };
    match &parsed {
        Value::Array(items) if items.is_empty() => (
            400,
            Some(error(
                Value::Null,
                INVALID_REQUEST,
                "invalid request: empty batch",
            )),
        ),
        Value::Array(items) => {
            let answers: Vec<Value> = items
                .iter()
                .filter_map(|item| answer(item, creds, backend))
                .collect();
            if answers.is_empty() {
                (202, None)
            } else {
                (200, Some(Value::Array(answers)))
            }
        }
        single => {
            let status = match classify(single) {
                Message::Invalid { .. } => 400,
                _ => 200,
            };
            match answer(single, creds, backend) {
                None => (202, None),
                Some(v) => (status, Some(v)),
            }
        }
    }
}
