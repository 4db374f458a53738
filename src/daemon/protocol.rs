//! The control-socket protocol between the CLI and the daemon (spec 02 §2): one JSON object
//! per line each way. Requests carry `"op"`; final responses carry `"ok"` and, on failure,
//! `"error"` (human text) and `"code"` (a stable token). Long requests may first send
//! progress lines `{"progress":"waking","identity":"echo-bob","elapsed_ms":1200}`.
//! The exact schema is documented in `docs/PROTOCOL.md`.

use serde::Deserialize;
use serde_json::{json, Value};

/// Longest accepted request line (1 MiB); longer is a protocol error.
pub const MAX_LINE: usize = 1 << 20;

/// Stable failure tokens (`"code"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// The target or caller is not in the registry.
    NotRegistered,
    /// The endpoint has its stop flag set.
    Stopped,
    /// The endpoint is not running and could not be woken or revived.
    Offline,
    /// A field failed validation.
    InvalidArgument,
    /// The request conflicts with work in progress.
    Busy,
    /// Something did not finish in time.
    Timeout,
    /// The op is unknown.
    UnknownOp,
    /// The line is not a JSON object of a known shape.
    BadRequest,
    /// The peer has no live session where one is needed.
    NotLive,
    /// The daemon is shutting down.
    ShuttingDown,
    /// Anything else.
    Internal,
}

impl Code {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::NotRegistered => "not-registered",
            Code::Stopped => "stopped",
            Code::Offline => "offline",
            Code::InvalidArgument => "invalid-argument",
            Code::Busy => "busy",
            Code::Timeout => "timeout",
            Code::UnknownOp => "unknown-op",
            Code::BadRequest => "bad-request",
            Code::NotLive => "not-live",
            Code::ShuttingDown => "shutting-down",
            Code::Internal => "internal",
        }
    }
}

/// A control request. Field names are the JSON keys.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Health check → `{"ok":true,"version":…,"pid":…}`.
    Ping,
    /// Route one message (spec 03 §1) → `{"ok":true,"result":<result object>}`.
    Send {
        /// Sender identity `<runtime>-<personality>`.
        from: String,
        /// Target personality.
        to: String,
        /// Forced endpoint runtime.
        #[serde(default)]
        runtime: Option<String>,
        /// The body.
        message: String,
        /// Optional thread label.
        #[serde(default)]
        topic: Option<String>,
        /// Absolute source paths.
        #[serde(default)]
        attachments: Vec<String>,
    },
    /// Live session states → `{"ok":true,"sessions":[…]}`.
    List,
    /// Wake a peer without a message.
    Wake {
        /// Peer.
        personality: String,
        /// Runtime (default: the peer's default runtime).
        #[serde(default)]
        runtime: Option<String>,
    },
    /// Set the stop flag and end sessions.
    Stop {
        /// Peer (absent with `all`).
        #[serde(default)]
        personality: Option<String>,
        /// One runtime (default: every declared runtime).
        #[serde(default)]
        runtime: Option<String>,
        /// Every peer.
        #[serde(default)]
        all: bool,
    },
    /// Clear the stop flag (always-on peers are started).
    Start {
        /// Peer (absent with `all`).
        #[serde(default)]
        personality: Option<String>,
        /// One runtime (default: every declared runtime).
        #[serde(default)]
        runtime: Option<String>,
        /// Every peer.
        #[serde(default)]
        all: bool,
    },
    /// Attach a terminal; after the final ok line the connection carries frames.
    Attach {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule of spec 05 §5).
        #[serde(default)]
        runtime: Option<String>,
        /// Start a fresh session first (the bare `iapeer <runtime>` form).
        #[serde(default)]
        fresh: bool,
        /// Only bring the session up; do not turn the connection into an attach stream.
        #[serde(default)]
        no_attach: bool,
    },
    /// A fresh session now (agents: once ready; always-on peers: restarted and un-parked).
    New {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule).
        #[serde(default)]
        runtime: Option<String>,
    },
    /// Send the runtime's interrupt keys to the live session.
    Interrupt {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule).
        #[serde(default)]
        runtime: Option<String>,
    },
    /// Compact the conversation → `{"ok":true,"outcome":"compacted"|"nothing-to-compact"}`.
    Compact {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule).
        #[serde(default)]
        runtime: Option<String>,
    },
    /// From inside a session: end it and bring up a fresh one.
    SelfFresh {
        /// The caller's `PEER_IDENTITY`.
        identity: String,
    },
    /// End every session of a peer being removed.
    Forget {
        /// Peer.
        personality: String,
    },
    /// The runtime a peer is live on → `{"ok":true,"runtime":…}`.
    LiveRuntime {
        /// Peer.
        personality: String,
    },
    /// Daemon health and a sessions summary.
    Status,
}

/// Every op name, to tell an unknown op from a malformed request.
pub const OPS: &[&str] = &[
    "ping",
    "send",
    "list",
    "wake",
    "stop",
    "start",
    "attach",
    "new",
    "interrupt",
    "compact",
    "self-fresh",
    "forget",
    "live-runtime",
    "status",
];

/// Parse one request line. Errors are complete failure responses (`unknown-op` or
/// `bad-request`) to send back; the connection stays usable.
pub fn parse_request(line: &[u8]) -> Result<Request, Value> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| failure(Code::BadRequest, &format!("malformed JSON: {e}")))?;
    let op = value
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| failure(Code::BadRequest, "a request needs a string \"op\""))?;
    if !OPS.contains(&op) {
        return Err(failure(Code::UnknownOp, &format!("unknown op \"{op}\"")));
    }
    let op = op.to_string();
    serde_json::from_value(value)
        .map_err(|e| failure(Code::BadRequest, &format!("bad \"{op}\" request: {e}")))
}

/// A failure response line.
pub fn failure(code: Code, error: &str) -> Value {
    json!({"ok": false, "code": code.as_str(), "error": error})
}

/// A progress line.
pub fn progress(phase: &str, identity: &str, elapsed_ms: u64) -> Value {
    json!({"progress": phase, "identity": identity, "elapsed_ms": elapsed_ms})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_ops_and_defaults() {
        assert_eq!(parse_request(br#"{"op":"ping"}"#).unwrap(), Request::Ping);
        let r = parse_request(br#"{"op":"send","from":"echo-a","to":"b","message":"hi"}"#).unwrap();
        assert_eq!(
            r,
            Request::Send {
                from: "echo-a".into(),
                to: "b".into(),
                runtime: None,
                message: "hi".into(),
                topic: None,
                attachments: vec![]
            }
        );
        let r = parse_request(br#"{"op":"stop","all":true}"#).unwrap();
        assert!(matches!(r, Request::Stop { all: true, .. }));
    }

    #[test]
    fn unknown_op_and_bad_requests_have_codes() {
        let e = parse_request(br#"{"op":"fly"}"#).unwrap_err();
        assert_eq!(e["code"], "unknown-op");
        let e = parse_request(b"{nope").unwrap_err();
        assert_eq!(e["code"], "bad-request");
        let e = parse_request(br#"{"op":"send","to":"b"}"#).unwrap_err();
        assert_eq!(e["code"], "bad-request");
        assert!(e["error"].as_str().unwrap().contains("from"), "{e}");
        let e = parse_request(br#"["op"]"#).unwrap_err();
        assert_eq!(e["code"], "bad-request");
    }
}
