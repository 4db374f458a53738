//! A minimal MCP client over plain HTTP for the echo agent's replies (spec 02 §4): one
//! `initialize`, then `tools/call` `send_to_peer`.

use crate::paths::Paths;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

/// The protocol version the echo agent asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// A reply may wake a sleeping peer (boot deadline 240 s), so allow a long call.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest short-result text shown after `replied to …:`.
const SHORT_RESULT_CHARS: usize = 120;

/// Why a reply could not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// No `IAPEER_MCP_URL` and no usable `router.json` (is the daemon running?).
    #[error("no MCP endpoint: {0}")]
    NoUrl(String),
    /// The HTTP exchange failed (connection refused, timeout, …).
    #[error("MCP request failed: {0}")]
    Http(String),
    /// The server answered with a non-success HTTP status.
    #[error("MCP endpoint answered HTTP {0}: {1}")]
    Status(u16, String),
    /// The answer was not a JSON-RPC response we understand.
    #[error("unexpected MCP answer: {0}")]
    Protocol(String),
    /// A JSON-RPC error object.
    #[error("MCP error {0}: {1}")]
    Rpc(i64, String),
    /// The tool ran and failed (`isError: true`): its text.
    #[error("{0}")]
    Tool(String),
}

/// The MCP URL: `IAPEER_MCP_URL` when set (`env_url`), else the `tcp` field of the discovery
/// file text `router_json` (`{"tcp":"http://127.0.0.1:8765/mcp",…}`).
///
/// Errors: [`McpError::NoUrl`] when neither gives a URL.
pub fn resolve_url(env_url: Option<&str>, router_json: Option<&str>) -> Result<String, McpError> {
    if let Some(url) = env_url.map(str::trim).filter(|u| !u.is_empty()) {
        return Ok(url.to_string());
    }
    let text = router_json.ok_or_else(|| {
        McpError::NoUrl("router.json not found — is the iapeer daemon running?".into())
    })?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| McpError::NoUrl(format!("router.json is not valid JSON: {e}")))?;
    value
        .get("tcp")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .ok_or_else(|| McpError::NoUrl("router.json has no \"tcp\" address".into()))
}

/// The caller headers (spec 02 §4): `X-IAPeer-Identity` when an identity is known;
/// `Authorization: Bearer <session token>`, or — when a host bearer token is set —
/// `Authorization: Bearer <bearer>` plus `X-IAPeer-Token: <session token>`.
pub fn auth_headers(
    identity: Option<&str>,
    token: Option<&str>,
    bearer: Option<&str>,
) -> Vec<(String, String)> {
    let mut h = Vec::new();
    if let Some(id) = identity.filter(|s| !s.is_empty()) {
        h.push(("X-IAPeer-Identity".into(), id.to_string()));
    }
    match (
        bearer.filter(|s| !s.is_empty()),
        token.filter(|s| !s.is_empty()),
    ) {
        (Some(b), t) => {
            h.push(("Authorization".into(), format!("Bearer {b}")));
            if let Some(t) = t {
                h.push(("X-IAPeer-Token".into(), t.to_string()));
            }
        }
        (None, Some(t)) => h.push(("Authorization".into(), format!("Bearer {t}"))),
        (None, None) => {}
    }
    h
}

/// Read a JSON-RPC response from an HTTP body: plain JSON, or a `text/event-stream` whose
/// first event's `data:` lines hold it. Returns the `result` member.
///
/// Errors: [`McpError::Protocol`] for unreadable bodies, [`McpError::Rpc`] for error objects.
pub fn parse_response(content_type: &str, body: &str) -> Result<Value, McpError> {
    let json_text = if content_type
        .to_ascii_lowercase()
        .starts_with("text/event-stream")
    {
        let data: Vec<&str> = body
            .lines()
            .skip_while(|l| !l.starts_with("data:"))
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            return Err(McpError::Protocol("event stream without data".into()));
        }
        data.join("\n")
    } else {
        body.to_string()
    };
    let msg: Value = serde_json::from_str(&json_text)
        .map_err(|e| McpError::Protocol(format!("not JSON ({e})")))?;
    if let Some(err) = msg.get("error") {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let text = err.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(McpError::Rpc(code, text.to_string()));
    }
    msg.get("result")
        .cloned()
        .ok_or_else(|| McpError::Protocol("response has no result".into()))
}

/// Judge a `tools/call` result: `isError: true` → [`McpError::Tool`] with its text; else a
/// short summary (`delivered` or `delivered (woke)` for a [`crate::protocol::SendResult`] in
/// `structuredContent`, else the first line of the text content).
pub fn tool_outcome(result: &Value) -> Result<String, McpError> {
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(McpError::Tool(if text.is_empty() {
            "tool call failed".into()
        } else {
            text
        }));
    }
    let sent = result
        .get("structuredContent")
        .and_then(|sc| crate::protocol::SendResult::deserialize(sc).ok());
    if let Some(sent) = sent.filter(|s| s.ok) {
        return Ok(if sent.woke {
            "delivered (woke)".into()
        } else {
            "delivered".into()
        });
    }
    let first = text.lines().next().unwrap_or("").trim();
    Ok(first.chars().take(SHORT_RESULT_CHARS).collect())
}

/// An initialized connection to the MCP endpoint.
pub struct McpClient {
    agent: ureq::Agent,
    url: String,
    headers: Vec<(String, String)>,
    next_id: u64,
}

impl McpClient {
    /// Resolve the URL and headers from the environment (`IAPEER_MCP_URL` or router.json,
    /// `PEER_IDENTITY`, `IAPEER_TOKEN`, `IAPEER_BEARER_TOKEN`) and run `initialize`
    /// (then the `notifications/initialized` notification).
    ///
    /// Errors: any [`McpError`].
    pub fn connect() -> Result<McpClient, McpError> {
        let env = |k: &str| std::env::var(k).ok();
        let router_json = Paths::from_env()
            .ok()
            .and_then(|p| std::fs::read_to_string(p.router_json()).ok());
        let url = resolve_url(env("IAPEER_MCP_URL").as_deref(), router_json.as_deref())?;
        let headers = auth_headers(
            env("PEER_IDENTITY").as_deref(),
            env("IAPEER_TOKEN").as_deref(),
            env("IAPEER_BEARER_TOKEN").as_deref(),
        );
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(CALL_TIMEOUT))
            .build()
            .into();
        let mut client = McpClient {
            agent,
            url,
            headers,
            next_id: 1,
        };
        client.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "iapeer-echo-agent", "version": env!("CARGO_PKG_VERSION")}
            }),
        )?;
        client.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(client)
    }

    /// Call `send_to_peer` with `{personality, message[, topic]}`; returns the short result.
    ///
    /// Errors: transport and protocol failures, or [`McpError::Tool`] when the daemon refused.
    pub fn send_to_peer(
        &mut self,
        personality: &str,
        message: &str,
        topic: Option<&str>,
    ) -> Result<String, McpError> {
        let mut args = json!({"personality": personality, "message": message});
        if let Some(t) = topic {
            args["topic"] = json!(t);
        }
        let result = self.request(
            "tools/call",
            json!({"name": "send_to_peer", "arguments": args}),
        )?;
        tool_outcome(&result)
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        let (content_type, body) = self.post(&json!({
            "jsonrpc": "2.0", "id": id, "method": method, "params": params
        }))?;
        parse_response(&content_type, &body)
    }

    /// POST one message; returns the response content type and body.
    fn post(&self, msg: &Value) -> Result<(String, String), McpError> {
        let mut req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let mut resp = req
            .send(msg.to_string())
            .map_err(|e| McpError::Http(e.to_string()))?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| McpError::Http(e.to_string()))?;
        if !(200..300).contains(&status) {
            let body = body.trim().chars().take(SHORT_RESULT_CHARS).collect();
            return Err(McpError::Status(status, body));
        }
        Ok((content_type, body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_prefers_the_env_then_router_json() {
        let rj = r#"{"sock":"/s","tcp":"http://127.0.0.1:9/mcp","version":"0.1.0"}"#;
        assert_eq!(
            resolve_url(Some("http://x/mcp"), Some(rj)).unwrap(),
            "http://x/mcp"
        );
        assert_eq!(
            resolve_url(Some(" "), Some(rj)).unwrap(),
            "http://127.0.0.1:9/mcp"
        );
        assert!(matches!(resolve_url(None, None), Err(McpError::NoUrl(_))));
        assert!(matches!(
            resolve_url(None, Some("{}")),
            Err(McpError::NoUrl(_))
        ));
        assert!(matches!(
            resolve_url(None, Some("{")),
            Err(McpError::NoUrl(_))
        ));
    }

    #[test]
    fn headers_follow_the_bearer_rule() {
        let pairs = |v: Vec<(String, String)>| -> Vec<String> {
            v.into_iter().map(|(k, v)| format!("{k}: {v}")).collect()
        };
        assert_eq!(
            pairs(auth_headers(Some("echo-bob"), Some("tok"), None)),
            ["X-IAPeer-Identity: echo-bob", "Authorization: Bearer tok"]
        );
        assert_eq!(
            pairs(auth_headers(Some("echo-bob"), Some("tok"), Some("host"))),
            [
                "X-IAPeer-Identity: echo-bob",
                "Authorization: Bearer host",
                "X-IAPeer-Token: tok"
            ]
        );
        assert!(auth_headers(None, Some(""), None).is_empty());
    }

    #[test]
    fn responses_in_json_and_sse() {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"x":1}}"#;
        assert_eq!(
            parse_response("application/json", body).unwrap(),
            json!({"x":1})
        );
        let sse = format!("event: message\ndata: {body}\n\n");
        assert_eq!(
            parse_response("text/event-stream", &sse).unwrap(),
            json!({"x":1})
        );
        let err = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}"#;
        assert_eq!(
            parse_response("application/json", err),
            Err(McpError::Rpc(-32601, "nope".into()))
        );
        assert!(matches!(
            parse_response("text/event-stream", "\n"),
            Err(McpError::Protocol(_))
        ));
    }

    #[test]
    fn tool_outcomes() {
        let to = json!({"personality":"bob","runtime":"echo"});
        let ts = "2026-11-30T10:00:00+00:00";
        let ok = json!({"content":[{"type":"text","text":"{}"}],
            "structuredContent":{"ok":true,"delivered_to":to,"woke":false,"ts":ts}});
        assert_eq!(tool_outcome(&ok).unwrap(), "delivered");
        let woke = json!({"structuredContent":{"ok":true,"delivered_to":to,"woke":true,"ts":ts}});
        assert_eq!(tool_outcome(&woke).unwrap(), "delivered (woke)");
        let other = json!({"content":[{"type":"text","text":"something else\nmore"}],
            "structuredContent":{"ok":true}});
        assert_eq!(tool_outcome(&other).unwrap(), "something else");
        let bad = json!({"isError":true,"content":[{"type":"text","text":"cannot send to self"}]});
        assert_eq!(
            tool_outcome(&bad),
            Err(McpError::Tool("cannot send to self".into()))
        );
        assert_eq!(McpError::Tool("x".into()).to_string(), "x");
    }
}
