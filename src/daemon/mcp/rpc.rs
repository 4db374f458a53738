//! JSON-RPC 2.0 message handling for MCP (spec 02 §4): classify each message, dispatch the
//! methods we answer, build error objects.

use serde_json::{json, Value};

use super::tool::{
    call_result, prepare_call, tool_listing, INSTRUCTIONS, SUPPORTED_PROTOCOL_VERSIONS,
};
use super::{Backend, CallerCreds, SendArgs};

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

/// One answer of a request body: ready now, or the answer to a send still being routed.
#[derive(Debug)]
enum Slot {
    Ready(Value),
    /// `tools/call` request `id` waits for the outcome of the plan's next send.
    Send(Value),
}

/// Answer one message; `None` when it needs no answer. Sends go to `sends`.
fn answer(
    v: &Value,
    creds: &CallerCreds,
    backend: &dyn Backend,
    sends: &mut Vec<SendArgs>,
) -> Option<Slot> {
    match classify(v) {
        Message::NoReply => None,
        Message::Invalid { id, why } => Some(Slot::Ready(error(
            id,
            INVALID_REQUEST,
            &format!("invalid request: {why}"),
        ))),
        Message::Request { id, method, params } => {
            Some(dispatch(id, method, params, creds, backend, sends))
        }
    }
}

fn dispatch(
    id: &Value,
    method: &str,
    params: Option<&Value>,
    creds: &CallerCreds,
    backend: &dyn Backend,
    sends: &mut Vec<SendArgs>,
) -> Slot {
    Slot::Ready(match method {
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
                    match prepare_call(name, arguments) {
                        Err(answer) => success(id, answer),
                        Ok(args) => {
                            sends.push(args);
                            return Slot::Send(id.clone());
                        }
                    }
                }
            }
        }
        other => error(
            id.clone(),
            METHOD_NOT_FOUND,
            &format!("method not found: {other}"),
        ),
    })
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

/// A whole POST body, answered as far as it can be without routing a send: the sends to
/// route ([`Plan::sends`]) and where their outcomes go ([`Plan::finish`]).
#[derive(Debug)]
pub(super) struct Plan {
    status: u16,
    batch: bool,
    slots: Vec<Slot>,
    sends: Vec<SendArgs>,
}

impl Plan {
    /// The sends to route, in order (taken: a second call returns none).
    pub(super) fn take_sends(&mut self) -> Vec<SendArgs> {
        std::mem::take(&mut self.sends)
    }

    /// The HTTP status and the JSON to send (`None` = 202), given the outcome of each send
    /// in the order [`Plan::take_sends`] returned them. A missing outcome reads as an error.
    pub(super) fn finish(
        self,
        outcomes: Vec<Result<crate::protocol::SendResult, String>>,
    ) -> (u16, Option<Value>) {
        let mut outcomes = outcomes.into_iter();
        let mut answers: Vec<Value> = self
            .slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Ready(v) => v,
                Slot::Send(id) => {
                    let outcome = outcomes
                        .next()
                        .unwrap_or_else(|| Err("internal error: the send was not answered".into()));
                    success(&id, call_result(outcome))
                }
            })
            .collect();
        if answers.is_empty() {
            return (202, None);
        }
        if self.batch {
            (self.status, Some(Value::Array(answers)))
        } else {
            (self.status, answers.pop())
        }
    }
}

/// Plan a whole POST body (see [`Plan`]); `backend` is told when the tools are listed.
pub(super) fn plan(body: &[u8], creds: &CallerCreds, backend: &dyn Backend) -> Plan {
    let ready = |status, v| Plan {
        status,
        batch: false,
        slots: vec![Slot::Ready(v)],
        sends: Vec::new(),
    };
    let parsed: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            let text = format!("parse error: {e}");
            return ready(400, error(Value::Null, PARSE_ERROR, &text));
        }
    };
    let mut sends = Vec::new();
    match &parsed {
        Value::Array(items) if items.is_empty() => ready(
            400,
            error(Value::Null, INVALID_REQUEST, "invalid request: empty batch"),
        ),
        Value::Array(items) => {
            let slots = items
                .iter()
                .filter_map(|item| answer(item, creds, backend, &mut sends))
                .collect();
            Plan {
                status: 200,
                batch: true,
                slots,
                sends,
            }
        }
        single => {
            let status = match classify(single) {
                Message::Invalid { .. } => 400,
                _ => 200,
            };
            Plan {
                status,
                batch: false,
                slots: answer(single, creds, backend, &mut sends)
                    .into_iter()
                    .collect(),
                sends,
            }
        }
    }
}

/// Process a whole POST body, blocking on the backend for each send. Returns the HTTP status
/// and the JSON to send (`None` = 202).
pub(super) fn process(
    body: &[u8],
    creds: &CallerCreds,
    backend: &dyn Backend,
) -> (u16, Option<Value>) {
    let mut plan = plan(body, creds, backend);
    let outcomes = plan
        .take_sends()
        .into_iter()
        .map(|args| backend.send_to_peer(creds.clone(), args))
        .collect();
    plan.finish(outcomes)
}
