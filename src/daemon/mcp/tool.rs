//! The `send_to_peer` tool (spec 02 §4): its listing (schema, annotations, description), the
//! server instructions, and the extraction of call arguments into [`SendArgs`].
//!
//! Only argument *shapes* are checked here (types, unknown keys, presence of the two required
//! fields). Value rules (patterns, lengths, counts, absolute paths) belong to the router's
//! `route_send` (spec 03 §1) so that every entry point reports them the same way.

use std::fmt;

use serde_json::{json, Map, Value};

use super::SendArgs;
use crate::names::RUNTIME_PATTERN;

/// The one tool we expose.
pub const TOOL_NAME: &str = "send_to_peer";

/// Handshake-era protocol versions we speak, newest first; `initialize` echoes the client's
/// when listed here, else answers the first.
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Modern (per-request `_meta`) protocol versions we speak, newest first (see `era`).
pub const MODERN_PROTOCOL_VERSIONS: [&str; 1] = ["2026-07-28"];

/// How long a modern client may keep our `tools/list` and `server/discover` results, in ms
/// (their `ttlMs`, with `cacheScope: "private"`): none. An agent's `tools/list` is how the
/// daemon learns that its tools are loaded (a boot waits for it), so no client may answer
/// it from a cache, least of all one shared between agents.
pub const LISTING_TTL_MS: u64 = 0;

/// The `instructions` paragraph of `initialize` (no roster: that lives in the system prompt).
pub const INSTRUCTIONS: &str = "iapeer connects you to the other members of your team \
(agents, humans and services) through the send_to_peer tool. Reply only to messages that \
actually need a reply: a question, a task, or a result someone is waiting for. Never send a \
bare acknowledgement, a thank-you or a \"got it\" note; those set off endless reply loops \
between agents. Staying silent is a perfectly good answer.";

/// The tool description (our wording; spec 02 §4 lists what it must say).
const DESCRIPTION: &str = "Send a message to another peer of your team: an AI agent, a human \
or a service. Address it by its bare personality (for example \"boris\"), never by a \
runtime-prefixed identity such as \"claude-boris\". Leave `runtime` out to reach the peer's \
default runtime; set it to force one of the runtimes the peer declares, which is woken even \
when another runtime of that peer is already live. A sleeping agent is woken first, so a call \
may take a while. `topic` is an optional short thread label; later messages on the same topic \
resume the same conversation. `attachments` are absolute paths of local files; the router \
copies them before it accepts the message, and the recipient gets the copies. Messages sent \
to you arrive as <iap from=... runtime=... intelligence=... ts=... topic=...> blocks; `ts` is \
the moment the sender dispatched the message (with a date prefix when it was not today), so \
compare it with the current time to notice stale messages. The result tells you whether the \
message reached the peer's live session (delivered), was queued for later, or failed (NOT \
delivered: send it again if it matters). An error that starts \"state unknown: it may have \
arrived\" means the message may well be with the peer: do not send it again as a new message; \
if it must be retried, call again with the `id` the error names, and it is never delivered \
twice. `if_busy` says what to do when the peer is in the middle of a turn: queue (default), \
interrupt it, or refuse. Do not send empty acknowledgements or thanks: reply only when a reply is needed.";

/// The `if_busy` property's description: the three choices for a peer mid-turn, and what
/// `queue` and `refuse` mean for a peer of another host that is offline (docs/FEDERATION.md,
/// "A host that is down"; the retention is `federation::keys::RETENTION`).
fn if_busy_description() -> String {
    use crate::federation::keys::{retention_text, RETENTION};
    format!(
        "Optional: what to do when the peer is in the middle of a turn. queue (the default): it \
         gets the message as it can (its runtime may queue it behind the turn; the result says \
         queued). interrupt: its turn is stopped first, then it gets the message (the result \
         says interrupted). refuse: the message is NOT delivered and the error says the peer \
         is busy. For a peer of another host that is offline (name@host): queue keeps the \
         message until that host returns, at most {} (the result says queued), and refuse \
         refuses it at once (code offline).",
        retention_text(RETENTION)
    )
}

/// The full `tools/list` entry for `send_to_peer`.
pub fn tool_listing() -> Value {
    json!({
        "name": TOOL_NAME,
        "description": DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "additionalProperties": false,
            "required": ["personality", "message"],
            "properties": {
                "personality": {
                    "type": "string",
                    "pattern": crate::federation::address::ADDRESS_PATTERN,
                    "description": "Bare personality of the target peer, e.g. \"boris\"; \"boris@host\" names a peer of another host of the federation."
                },
                "runtime": {
                    "type": "string",
                    "pattern": RUNTIME_PATTERN,
                    "description": "Optional: a runtime the target declares, to force (and wake) it."
                },
                "message": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 16000,
                    "description": "The message text."
                },
                "topic": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "Optional short thread label; the same topic resumes the same conversation."
                },
                "attachments": {
                    "type": "array",
                    "items": { "type": "string" },
                    "maxItems": 20,
                    "description": "Optional absolute paths of local files to hand over."
                },
                "id": {
                    "type": "string",
                    "pattern": ID_PATTERN,
                    "description": "Optional message id (1-64 letters, digits, . _ : -). A message is never delivered twice with the same id: when a result says the state is unknown, retry with the id it names, never as a new message."
                },
                "if_busy": {
                    "type": "string",
                    "enum": ["queue", "interrupt", "refuse"],
                    "description": if_busy_description()
                }
            }
        },
        "annotations": {
            "title": "Send to IAP peer",
            "readOnlyHint": false,
            "destructiveHint": false,
            "idempotentHint": false,
            "openWorldHint": true
        },
        "_meta": { "anthropic/alwaysLoad": true }
    })
}

/// Why the arguments of a `send_to_peer` call could not be turned into [`SendArgs`].
/// The Display text is what the calling agent reads in the tool error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// `arguments` present but not a JSON object.
    NotAnObject,
    /// `personality` or `message` missing, null or empty (the router's wording, spec 03 §1).
    MissingRequired,
    /// A known key holding a value of the wrong JSON type.
    NotAString(&'static str),
    /// `attachments` not an array of strings.
    BadAttachments,
    /// A key the schema does not declare.
    UnknownKey(String),
    /// `if_busy` not one of its choices (what it was).
    BadIfBusy(String),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::NotAnObject => write!(f, "send_to_peer arguments must be a JSON object"),
            ArgError::MissingRequired => write!(
                f,
                "send_to_peer requires non-empty \"personality\" and \"message\""
            ),
            ArgError::NotAString(key) => write!(f, "send_to_peer: \"{key}\" must be a string"),
            ArgError::BadAttachments => write!(
                f,
                "send_to_peer: \"attachments\" must be an array of strings (absolute paths)"
            ),
            ArgError::UnknownKey(key) => write!(
                f,
                "send_to_peer: unknown argument \"{key}\" (allowed: personality, runtime, \
                 message, topic, attachments, id, if_busy)"
            ),
            ArgError::BadIfBusy(v) => write!(
                f,
                "send_to_peer: \"if_busy\" must be \"queue\", \"interrupt\" or \"refuse\" \
                 (got {v}); leave it out to queue"
            ),
        }
    }
}

const KNOWN_KEYS: [&str; 7] = [
    "personality",
    "runtime",
    "message",
    "topic",
    "attachments",
    "id",
    "if_busy",
];

/// The schema's pattern of a message id ([`crate::msgids::valid_id`]).
const ID_PATTERN: &str = "^[A-Za-z0-9._:-]{1,64}$";

/// Turn `tools/call` arguments into [`SendArgs`]. `None` (absent) counts as an empty object.
/// A JSON `null` counts as absent for every key. An empty `runtime` counts as absent; empty
/// `topic` is passed on (the router treats a blank topic as none).
pub fn extract_send_args(arguments: Option<&Value>) -> Result<SendArgs, ArgError> {
    let empty = Map::new();
    let obj = match arguments {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err(ArgError::NotAnObject),
    };
    let mut unknown: Vec<&String> = obj
        .keys()
        .filter(|k| !KNOWN_KEYS.contains(&k.as_str()))
        .collect();
    unknown.sort();
    if let Some(key) = unknown.first() {
        return Err(ArgError::UnknownKey((*key).clone()));
    }
    let personality = optional_string(obj, "personality")?.unwrap_or_default();
    let message = optional_string(obj, "message")?.unwrap_or_default();
    let runtime = optional_string(obj, "runtime")?.filter(|r| !r.is_empty());
    let topic = optional_string(obj, "topic")?;
    let id = optional_string(obj, "id")?.filter(|i| !i.is_empty());
    let if_busy = match obj.get("if_busy") {
        None | Some(Value::Null) => crate::protocol::IfBusy::default(),
        Some(Value::String(v)) => crate::protocol::IfBusy::parse(v)
            .ok_or_else(|| ArgError::BadIfBusy(Value::String(v.clone()).to_string()))?,
        Some(other) => return Err(ArgError::BadIfBusy(other.to_string())),
    };
    let attachments = match obj.get("attachments") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or(ArgError::BadAttachments)
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(ArgError::BadAttachments),
    };
    if personality.is_empty() || message.is_empty() {
        return Err(ArgError::MissingRequired);
    }
    Ok(SendArgs {
        to: personality,
        runtime,
        message,
        topic,
        attachments,
        id,
        if_busy,
    })
}

fn optional_string(
    obj: &Map<String, Value>,
    key: &'static str,
) -> Result<Option<String>, ArgError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ArgError::NotAString(key)),
    }
}

/// Check one `tools/call` up to the routing: the send to make, or (`Err`) the tool result to
/// answer at once (unknown tool, bad arguments: the tool-error shape).
pub fn prepare_call(name: &str, arguments: Option<&Value>) -> Result<SendArgs, Value> {
    if name != TOOL_NAME {
        return Err(tool_error(&format!("unknown tool: {name}")));
    }
    extract_send_args(arguments).map_err(|e| tool_error(&e.to_string()))
}

/// The MCP result of a routed send: the success shape
/// `{"content":[{"type":"text","text":<pretty JSON>}],"structuredContent":<result>}` or the
/// tool-error shape `{"isError":true,"content":[{"type":"text","text":<error>}]}` with the
/// failure as the control socket answers it, `"structuredContent":{"ok":false,"code":…,
/// "error":…}` (spec 02 §4 names only the text; the code lets an agent tell `timeout` from
/// `not-registered` without reading it, as a CLI caller can).
pub fn call_result(outcome: super::SendOutcome) -> Value {
    match outcome {
        Ok(result) => {
            let result = serde_json::to_value(&result).unwrap_or_default();
            let text = serde_json::to_string_pretty(&result).unwrap_or_else(|_| result.to_string());
            json!({
                "content": [{ "type": "text", "text": text }],
                "structuredContent": result
            })
        }
        Err(f) => json!({
            "isError": true,
            "content": [{ "type": "text", "text": f.error }],
            "structuredContent": { "ok": false, "code": f.code, "error": f.error }
        }),
    }
}

fn tool_error(text: &str) -> Value {
    json!({ "isError": true, "content": [{ "type": "text", "text": text }] })
}
