//! The two protocol eras of MCP (revision 2026-07-28, "Versioning and Compatibility"): a
//! *legacy* client opens with the `initialize` handshake (revisions 2025-11-25 and before); a
//! *modern* client carries its protocol version in every request's `params._meta`
//! (`io.modelcontextprotocol/protocolVersion`), mirrored into HTTP headers, and expects
//! `resultType` in every result. iapeer speaks both on the same endpoint (dual-era).
//!
//! Claude Code 2.1.332 opens with a modern `server/discover` probe and falls back to the
//! handshake when it fails; answering the probe saves the handshake's two round trips and
//! the 405 of the old GET stream on every Claude boot (issue 13 item 2). Codex 0.171 opens
//! with the handshake (recorded: `initialize`, then `tools/list`) and is answered as before.
//!
//! Everything here is a pure function of one request's body fields and headers.

use base64::Engine as _;
use serde_json::{json, Value};

use super::rpc::INVALID_PARAMS;
use super::tool::{MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS};

/// JSON-RPC error code of a header that is missing or disagrees with the body (2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC error code of a protocol version the server does not speak (2026-07-28).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The `_meta` key carrying a modern request's protocol version.
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key carrying a modern request's client capabilities (required, an object).
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// The MCP headers of one HTTP request, as sent (values untrimmed; `None` when absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct McpHeaders<'a> {
    /// `Accept`: decides between a JSON and a one-event SSE answer.
    pub accept: Option<&'a str>,
    /// `MCP-Protocol-Version`.
    pub protocol_version: Option<&'a str>,
    /// `Mcp-Method`: must equal the body's `method` on a modern request.
    pub method: Option<&'a str>,
    /// `Mcp-Name`: must equal `params.name` of a modern `tools/call` (plain ASCII, or the
    /// `=?base64?…?=` sentinel form).
    pub name: Option<&'a str>,
}

/// A modern request refused before dispatch: the HTTP status and the JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Always 400 (the 2026-07-28 transport's status for these errors).
    pub status: u16,
    /// [`HEADER_MISMATCH`], [`UNSUPPORTED_PROTOCOL_VERSION`] or -32602 (a required `_meta`
    /// field missing).
    pub code: i64,
    /// One sentence saying what was wrong and what the client should send.
    pub message: String,
    /// For [`UNSUPPORTED_PROTOCOL_VERSION`]: `{"supported": [...], "requested": "..."}`.
    pub data: Option<Value>,
}

/// The era of one request: `Ok(None)` = legacy, `Ok(Some(version))` = modern at `version`,
/// `Err` = a modern request that must be refused (unsupported version, a header that is
/// missing or disagrees with the body, or no client capabilities in `_meta`).
///
/// A request is modern when its `params._meta` carries a protocol version, or when its
/// `MCP-Protocol-Version` header names a modern version (then a body without one is a
/// mismatch).
pub fn of_request<'a>(
    method: &str,
    params: Option<&'a Value>,
    headers: &McpHeaders<'_>,
) -> Result<Option<&'a str>, Refusal> {
    let header = headers.protocol_version.map(str::trim);
    let meta = params.and_then(|p| p.get("_meta"));
    let body = meta.and_then(|m| m.get(VERSION_KEY));
    let Some(body) = body else {
        if !names_modern_version(headers) {
            return Ok(None);
        }
        return Err(refused(
            HEADER_MISMATCH,
            format!(
                "the MCP-Protocol-Version header says {} but params._meta carries no \
                 \"{VERSION_KEY}\"; send the version in both",
                header.unwrap_or_default()
            ),
        ));
    };
    let Some(version) = body.as_str() else {
        return Err(refused(
            INVALID_PARAMS,
            format!("params._meta \"{VERSION_KEY}\" must be a string such as \"2026-07-28\""),
        ));
    };
    if !MODERN_PROTOCOL_VERSIONS.contains(&version) {
        return Err(Refusal {
            data: Some(json!({ "supported": all_versions(), "requested": version })),
            ..refused(
                UNSUPPORTED_PROTOCOL_VERSION,
                format!(
                    "unsupported protocol version {version:?}: use one of {}",
                    all_versions().join(", ")
                ),
            )
        });
    }
    if header != Some(version) {
        return Err(refused(
            HEADER_MISMATCH,
            format!(
                "the MCP-Protocol-Version header ({}) does not match params._meta \
                 \"{VERSION_KEY}\" ({version})",
                header.unwrap_or("absent")
            ),
        ));
    }
    if headers.method.map(str::trim) != Some(method) {
        return Err(refused(
            HEADER_MISMATCH,
            format!(
                "the Mcp-Method header ({}) does not match the method ({method})",
                headers.method.unwrap_or("absent")
            ),
        ));
    }
    if !meta
        .and_then(|m| m.get(CAPABILITIES_KEY))
        .is_some_and(Value::is_object)
    {
        return Err(refused(
            INVALID_PARAMS,
            format!(
                "a {version} request needs params._meta \"{CAPABILITIES_KEY}\" (an object, \
                 {{}} when the client has none)"
            ),
        ));
    }
    if matches!(method, "tools/call" | "resources/read" | "prompts/get") {
        let field = if method == "resources/read" {
            "uri"
        } else {
            "name"
        };
        // Without the field the method itself answers invalid params.
        if let Some(want) = params.and_then(|p| p.get(field)).and_then(Value::as_str) {
            if headers.name.and_then(decode_header_value).as_deref() != Some(want) {
                return Err(refused(
                    HEADER_MISMATCH,
                    format!(
                        "the Mcp-Name header ({}) does not match params.{field} ({want})",
                        headers.name.unwrap_or("absent")
                    ),
                ));
            }
        }
    }
    Ok(Some(version))
}

/// True when the `MCP-Protocol-Version` header names a modern version (its body then holds
/// exactly one request: the modern transport has no batches).
pub fn names_modern_version(headers: &McpHeaders<'_>) -> bool {
    headers
        .protocol_version
        .is_some_and(|h| MODERN_PROTOCOL_VERSIONS.contains(&h.trim()))
}

/// Every protocol version we speak, modern first: what `server/discover` and an
/// [`UNSUPPORTED_PROTOCOL_VERSION`] refusal list.
pub fn all_versions() -> Vec<&'static str> {
    MODERN_PROTOCOL_VERSIONS
        .iter()
        .chain(SUPPORTED_PROTOCOL_VERSIONS.iter())
        .copied()
        .collect()
}

/// A header value in the transport's encoding: the text itself, or the base64 inside
/// `=?base64?…?=`. `None` when the sentinel holds no valid base64 UTF-8.
fn decode_header_value(raw: &str) -> Option<String> {
    let raw = raw.trim();
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(raw.to_owned()),
    }
}

/// A 400 refusal with JSON-RPC error `code`.
fn refused(code: i64, message: String) -> Refusal {
    Refusal {
        status: 400,
        code,
        message,
        data: None,
    }
}

/// Mark `result` (an object) as a modern one: `resultType: "complete"` and the server's
/// identity in `_meta` (2026-07-28 "Key Changes" 2 and 8). Other values are left alone.
pub fn modern_result(mut result: Value) -> Value {
    if let Some(obj) = result.as_object_mut() {
        obj.insert("resultType".into(), json!("complete"));
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("io.modelcontextprotocol/serverInfo".into(), server_info());
        }
    }
    result
}

/// `{"name": "iapeer", "version": <crate version>}`.
pub fn server_info() -> Value {
    json!({ "name": "iapeer", "version": env!("CARGO_PKG_VERSION") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> McpHeaders<'a> {
        McpHeaders {
            accept: None,
            protocol_version: Some("2026-07-28"),
            method: Some(method),
            name,
        }
    }

    fn meta(version: &str) -> Value {
        json!({ "_meta": { VERSION_KEY: version, "io.modelcontextprotocol/clientCapabilities": {} } })
    }

    #[test]
    fn a_request_without_meta_or_modern_header_is_legacy() {
        let legacy = McpHeaders {
            protocol_version: Some("2025-11-25"),
            ..McpHeaders::default()
        };
        assert_eq!(of_request("tools/list", None, &legacy), Ok(None));
        let p = json!({"name": "send_to_peer"});
        assert_eq!(
            of_request("tools/call", Some(&p), &McpHeaders::default()),
            Ok(None)
        );
    }

    #[test]
    fn a_modern_request_with_matching_headers_is_modern() {
        let p = meta("2026-07-28");
        let h = modern_headers("tools/list", None);
        assert_eq!(
            of_request("tools/list", Some(&p), &h),
            Ok(Some("2026-07-28"))
        );
        let mut call = meta("2026-07-28");
        call["name"] = json!("send_to_peer");
        let h = modern_headers("tools/call", Some("send_to_peer"));
        assert_eq!(
            of_request("tools/call", Some(&call), &h),
            Ok(Some("2026-07-28"))
        );
        // The name may come in the base64 sentinel form.
        let h = modern_headers("tools/call", Some("=?base64?c2VuZF90b19wZWVy?="));
        assert_eq!(
            of_request("tools/call", Some(&call), &h),
            Ok(Some("2026-07-28"))
        );
    }

    #[test]
    fn an_unknown_version_is_refused_with_the_supported_list() {
        let p = meta("1900-01-01");
        let r =
            of_request("tools/list", Some(&p), &modern_headers("tools/list", None)).unwrap_err();
        assert_eq!((r.status, r.code), (400, UNSUPPORTED_PROTOCOL_VERSION));
        let data = r.data.unwrap();
        assert_eq!(data["requested"], "1900-01-01");
        assert_eq!(data["supported"][0], "2026-07-28");
        assert!(data["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25")));
    }

    #[test]
    fn headers_that_disagree_with_the_body_are_refused() {
        let p = meta("2026-07-28");
        let cases = [
            (
                McpHeaders {
                    protocol_version: None,
                    ..modern_headers("tools/list", None)
                },
                "MCP-Protocol-Version header (absent)",
            ),
            (
                modern_headers("tools/call", None),
                "Mcp-Method header (tools/call)",
            ),
            (
                McpHeaders {
                    method: None,
                    ..modern_headers("tools/list", None)
                },
                "Mcp-Method header (absent)",
            ),
        ];
        for (h, says) in cases {
            let r = of_request("tools/list", Some(&p), &h).unwrap_err();
            assert_eq!((r.status, r.code), (400, HEADER_MISMATCH), "{h:?}");
            assert!(r.message.contains(says), "{}", r.message);
        }
        // The capabilities are required, an object.
        for caps in [json!(null), json!("none")] {
            let mut p = meta("2026-07-28");
            p["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps;
            let r = of_request("tools/list", Some(&p), &modern_headers("tools/list", None))
                .unwrap_err();
            assert_eq!((r.status, r.code), (400, INVALID_PARAMS));
            assert!(r.message.contains("clientCapabilities"), "{}", r.message);
        }
        let mut call = meta("2026-07-28");
        call["name"] = json!("send_to_peer");
        for name in [None, Some("other"), Some("=?base64?!!?=")] {
            let r = of_request(
                "tools/call",
                Some(&call),
                &modern_headers("tools/call", name),
            )
            .unwrap_err();
            assert_eq!(r.code, HEADER_MISMATCH, "{name:?}");
            assert!(r.message.contains("Mcp-Name"), "{}", r.message);
        }
        // A modern header over a body without the version.
        let r = of_request("tools/list", None, &modern_headers("tools/list", None)).unwrap_err();
        assert_eq!(r.code, HEADER_MISMATCH);
        assert!(r.message.contains("carries no"), "{}", r.message);
    }

    #[test]
    fn a_modern_result_says_complete_and_who_answered() {
        let r = modern_result(json!({"tools": [], "_meta": {"x": 1}}));
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["_meta"]["x"], 1);
        assert_eq!(
            r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "iapeer"
        );
        assert_eq!(modern_result(json!(3)), json!(3));
    }
}
