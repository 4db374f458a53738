//! JSON-RPC 2.0 message handling for MCP (spec 02 §4): classify each message, tell its era
//! (`era`), dispatch the methods we answer, build error objects.

use serde_json::{json, Value};

use super::era::{self, McpHeaders};
use super::tool::{
    call_result, prepare_call, tool_listing, INSTRUCTIONS, LISTING_TTL_MS,
    SUPPORTED_PROTOCOL_VERSIONS,
};
use super::{Backend, CallerCreds, SendArgs};

/// JSON-RPC error codes we use.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
/// Also what `era` answers for a modern request without its required `_meta` fields.
pub(super) const INVALID_PARAMS: i64 = -32602;

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

/// `result` as the answer to request `id`; a modern request's result is marked as one.
fn success(id: &Value, result: Value, modern: bool) -> Value {
    let result = if modern {
        era::modern_result(result)
    } else {
        result
    };
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// One answer of a request body: ready now, or the answer to a send still being routed.
#[derive(Debug)]
enum Slot {
    Ready(Value),
    /// `tools/call` request `id` waits for the outcome of the plan's next send; `modern`:
    /// the request was a modern one (see `era`).
    Send {
        id: Value,
        modern: bool,
    },
}

/// One message's answer, and the HTTP status it calls for when it is the whole body.
#[derive(Debug)]
struct Answered {
    slot: Slot,
    status: u16,
}

impl Answered {
    fn ok(v: Value) -> Answered {
        Answered {
            slot: Slot::Ready(v),
            status: 200,
        }
    }

    /// JSON-RPC error `e` of a request: 200 in the handshake era, `modern_status` in the
    /// modern one (its transport gives errors their HTTP status).
    fn error(e: Value, modern: bool, modern_status: u16) -> Answered {
        Answered {
            slot: Slot::Ready(e),
            status: if modern { modern_status } else { 200 },
        }
    }
}

/// Answer one message; `None` when it needs no answer. Sends go to `sends`.
fn answer(
    v: &Value,
    headers: &McpHeaders<'_>,
    creds: &CallerCreds,
    backend: &dyn Backend,
    sends: &mut Vec<SendArgs>,
) -> Option<Answered> {
    match classify(v) {
        Message::NoReply => None,
        Message::Invalid { id, why } => Some(Answered {
            slot: Slot::Ready(error(
                id,
                INVALID_REQUEST,
                &format!("invalid request: {why}"),
            )),
            status: 400,
        }),
        Message::Request { id, method, params } => {
            Some(match era::of_request(method, params, headers) {
                Err(refusal) => {
                    let mut e = error(id.clone(), refusal.code, &refusal.message);
                    if let Some(data) = refusal.data {
                        e["error"]["data"] = data;
                    }
                    Answered::error(e, true, refusal.status)
                }
                Ok(version) => {
                    log::debug!("mcp: {method} ({})", version.unwrap_or("handshake era"));
                    let modern = version.is_some();
                    dispatch(id, method, params, modern, creds, backend, sends)
                }
            })
        }
    }
}

fn dispatch(
    id: &Value,
    method: &str,
    params: Option<&Value>,
    modern: bool,
    creds: &CallerCreds,
    backend: &dyn Backend,
    sends: &mut Vec<SendArgs>,
) -> Answered {
    Answered::ok(match method {
        // Answered in either era: a legacy client may probe with it too.
        "server/discover" => success(id, discover_result(), true),
        "initialize" => success(id, initialize_result(params), modern),
        // 2026-07-28 removed `ping`: a modern one is an unknown method.
        "ping" if !modern => success(id, json!({}), false),
        "tools/list" => {
            crate::daemon::test_hooks::on_tools_list();
            let mut result = json!({ "tools": [tool_listing()] });
            if modern {
                result["ttlMs"] = json!(LISTING_TTL_MS);
                result["cacheScope"] = json!("private");
            }
            let answer = success(id, result, modern);
            // Reported once the answer is made, which the HTTP thread writes next: a session
            // counts its MCP settle from here (issue 31 item 1). Reported at the request, a
            // listing answered late let the first Enter go before the agent could have the
            // tool (`a_wake_whose_tool_listing_is_answered_late…` in tests/claude.rs).
            backend.tools_listed(creds);
            answer
        }
        "tools/call" => {
            let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
            match name {
                None => {
                    let e = error(
                        id.clone(),
                        INVALID_PARAMS,
                        "tools/call needs params.name (a string)",
                    );
                    return Answered::error(e, modern, 400);
                }
                Some(name) => {
                    let arguments = params.and_then(|p| p.get("arguments"));
                    match prepare_call(name, arguments) {
                        Err(answer) => success(id, answer, modern),
                        Ok(args) => {
                            sends.push(args);
                            return Answered {
                                slot: Slot::Send {
                                    id: id.clone(),
                                    modern,
                                },
                                status: 200,
                            };
                        }
                    }
                }
            }
        }
        other => {
            let e = error(
                id.clone(),
                METHOD_NOT_FOUND,
                &format!("method not found: {other}"),
            );
            return Answered::error(e, modern, 404);
        }
    })
}

/// The `server/discover` result (2026-07-28): every version we speak, our one capability,
/// who we are, and the same instructions as `initialize`.
fn discover_result() -> Value {
    json!({
        "supportedVersions": era::all_versions(),
        "capabilities": { "tools": {} },
        "instructions": INSTRUCTIONS,
        "ttlMs": LISTING_TTL_MS,
        "cacheScope": "private"
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
        "serverInfo": era::server_info(),
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
    pub(super) fn finish(self, outcomes: Vec<super::SendOutcome>) -> (u16, Option<Value>) {
        let mut outcomes = outcomes.into_iter();
        let mut answers: Vec<Value> = self
            .slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Ready(v) => v,
                Slot::Send { id, modern } => {
                    let outcome = outcomes.next().unwrap_or_else(|| {
                        Err(crate::protocol::Failure::new(
                            crate::protocol::Code::Internal,
                            "internal error: the send was not answered",
                        ))
                    });
                    success(&id, call_result(outcome), modern)
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
pub(super) fn plan(
    body: &[u8],
    headers: &McpHeaders<'_>,
    creds: &CallerCreds,
    backend: &dyn Backend,
) -> Plan {
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
        Value::Array(_) if era::names_modern_version(headers) => ready(
            400,
            error(
                Value::Null,
                INVALID_REQUEST,
                "invalid request: a 2026-07-28 body is one request, not a batch; send each \
                 request in its own POST",
            ),
        ),
        Value::Array(items) => {
            let slots = items
                .iter()
                .filter_map(|item| answer(item, headers, creds, backend, &mut sends))
                .map(|a| a.slot)
                .collect();
            Plan {
                status: 200,
                batch: true,
                slots,
                sends,
            }
        }
        single => {
            let answered = answer(single, headers, creds, backend, &mut sends);
            Plan {
                status: answered.as_ref().map_or(200, |a| a.status),
                batch: false,
                slots: answered.into_iter().map(|a| a.slot).collect(),
                sends,
            }
        }
    }
}

/// Process a whole POST body, blocking on the backend for each send. Returns the HTTP status
/// and the JSON to send (`None` = 202).
pub(super) fn process(
    body: &[u8],
    headers: &McpHeaders<'_>,
    creds: &CallerCreds,
    backend: &dyn Backend,
) -> (u16, Option<Value>) {
    let mut plan = plan(body, headers, creds, backend);
    let outcomes = plan
        .take_sends()
        .into_iter()
        .map(|args| backend.send_to_peer(creds.clone(), args))
        .collect();
    plan.finish(outcomes)
}
