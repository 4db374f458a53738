//! Plain HTTP answers of the loopback server (spec 02 §3): status, content type, extra headers
//! and body, independent of `tiny_http` so that decisions stay pure and testable.

use std::borrow::Cow;

use serde_json::json;
use tiny_http::{HTTPVersion, Header, Response};

use crate::daemon::mcp::{McpResponse, JSON};

/// One HTTP answer. Never carries CORS headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type`, when there is a body.
    pub content_type: Option<&'static str>,
    /// Extra headers (lowercase name, value).
    pub headers: Vec<(&'static str, Cow<'static, str>)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

/// The exact 401 body of the bearer gate (spec 02 §3).
pub const UNAUTHORIZED_BODY: &str =
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"unauthorized"}}"#;

impl Reply {
    /// A JSON answer `{"error": <text>}`.
    pub fn error(status: u16, text: &str) -> Reply {
        Reply {
            status,
            content_type: Some(JSON),
            headers: Vec::new(),
            body: json!({ "error": text }).to_string().into_bytes(),
        }
    }

    /// 401 for a missing or wrong `IAPEER_BEARER_TOKEN` bearer.
    pub fn unauthorized() -> Reply {
        Reply {
            status: 401,
            content_type: Some(JSON),
            headers: vec![("www-authenticate", "Bearer".into())],
            body: UNAUTHORIZED_BODY.as_bytes().to_vec(),
        }
    }

    /// 403 with the reason (Host or Origin refused).
    pub fn forbidden(why: &str) -> Reply {
        Reply::error(403, &format!("forbidden: {why}"))
    }

    /// 404 `{"error":"not found"}`.
    pub fn not_found() -> Reply {
        Reply::error(404, "not found")
    }

    /// 404 for `/` that says what the port serves and how to open the page (issue 30 item 6):
    /// a browser pointed at the daemon's port learns `iapeer ui`.
    pub fn front_door() -> Reply {
        Reply::error(
            404,
            "not found: this is the iapeer daemon's port (MCP at /mcp, the fleet API at \
             /fleet/v1); open the operator's page with: iapeer ui",
        )
    }

    /// 405 for anything but POST on `/mcp` (no server-initiated stream, no session to delete).
    pub fn method_not_allowed() -> Reply {
        let mut r = Reply::error(405, "method not allowed: /mcp accepts POST only");
        r.headers.push(("allow", "POST".into()));
        r
    }

    /// 413 naming the limit in bytes.
    pub fn too_large(limit: usize) -> Reply {
        Reply::error(
            413,
            &format!("request body too large (limit {limit} bytes)"),
        )
    }

    /// 415 for a POST /mcp whose Content-Type is not application/json.
    pub fn unsupported_media_type() -> Reply {
        Reply::error(
            415,
            "unsupported media type: /mcp expects Content-Type: application/json",
        )
    }

    /// 503 when too many requests are already being served.
    pub fn busy() -> Reply {
        let mut r = Reply::error(
            503,
            "server busy: too many requests in flight; retry shortly",
        );
        r.headers.push(("retry-after", "1".into()));
        r
    }

    /// 408 when the head or the body did not arrive in time.
    pub fn timeout() -> Reply {
        Reply::error(
            408,
            "request timeout: the request did not arrive in time; send it whole and promptly",
        )
    }

    /// The answer as HTTP/1.1 bytes, printed by `tiny_http` (status line, `Date`, `Server`,
    /// `Content-Length`, our headers, the body unless `head_only`), plus `Connection: close`
    /// right after the status line: the server closes every connection after one answer, and
    /// `tiny_http`'s `Response` refuses to carry a `Connection` header itself.
    /// `served_in`, when given, is added as `Server-Timing: total;dur=<ms>` (W3C Server
    /// Timing; milliseconds with µs precision): the daemon's time from having read the whole
    /// request to this answer, which `scripts/bench.sh` sets against the delivery's own
    /// time to find the daemon's overhead per call (issue 13 item 3).
    pub fn to_http(&self, head_only: bool, served_in: Option<std::time::Duration>) -> Vec<u8> {
        let mut response = Response::from_data(self.body.clone())
            .with_status_code(self.status)
            .with_chunked_threshold(usize::MAX);
        let headers = self
            .content_type
            .map(|ct| ("content-type", ct))
            .into_iter()
            .chain(self.headers.iter().map(|(n, v)| (*n, v.as_ref())));
        for (name, value) in headers {
            if let Ok(h) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
                response.add_header(h);
            }
        }
        let mut out = Vec::with_capacity(self.body.len() + 256);
        // Writing to a Vec cannot fail.
        let _ = response.raw_print(&mut out, HTTPVersion(1, 1), &[], head_only, None);
        let status_line_end = out
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(out.len(), |i| i + 2);
        out.splice(
            status_line_end..status_line_end,
            b"Connection: close\r\n".iter().copied(),
        );
        if let Some(d) = served_in {
            let line = format!("Server-Timing: total;dur={:.3}\r\n", d.as_secs_f64() * 1e3);
            out.splice(status_line_end..status_line_end, line.bytes());
        }
        out
    }
}

impl From<McpResponse> for Reply {
    fn from(r: McpResponse) -> Reply {
        Reply {
            status: r.status,
            content_type: r.content_type,
            headers: Vec::new(),
            body: r.body,
        }
    }
}
