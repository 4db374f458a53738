//! What a fleet API request asks for (spec 10 §1), as pure functions: the endpoint from the
//! method and path, the request bodies, the `replay` query and the error answers.

use serde::Deserialize;
use serde_json::json;

use crate::daemon::http::reply::Reply;
use crate::daemon::mcp::JSON;

/// The prefix every fleet path starts with.
pub const PREFIX: &str = "/fleet/v1";
/// Most events `GET /fleet/v1/events?replay=N` replays (larger `N` is clamped).
pub const MAX_REPLAY: usize = 500;

/// Every endpoint, as the 404 of an unknown path lists them.
pub const ENDPOINTS: &[&str] = &[
    "GET /fleet/v1/snapshot",
    "GET /fleet/v1/peers/<p>",
    "GET /fleet/v1/peers/<p>/screen?runtime=<rt>",
    "GET /fleet/v1/inbox?peer=<p>",
    "GET /fleet/v1/events?replay=N",
    "GET /fleet/v1/notices",
    "GET /fleet/v1/notices/<id>",
    "POST /fleet/v1/peers/<p>/(wake|stop|start|new|restart|refresh|interrupt|compact)",
    "POST /fleet/v1/send",
    "GET /fleet/v1/approvals?wait=S&since=MS",
    "POST /fleet/v1/approvals/<id>/(approve|deny)",
];

/// The longest `wait` of `GET /fleet/v1/approvals`, in seconds (larger is clamped).
pub const MAX_WAIT_SECS: u64 = 300;

/// A lifecycle verb of `POST /fleet/v1/peers/<p>/<verb>`; each is the CLI verb of the same
/// name (spec 07).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `wake`.
    Wake,
    /// `stop`.
    Stop,
    /// `start`.
    Start,
    /// `new`.
    New,
    /// `restart` (issue 30 item 4).
    Restart,
    /// `refresh`.
    Refresh,
    /// `interrupt`.
    Interrupt,
    /// `compact`.
    Compact,
}

impl Verb {
    fn parse(s: &str) -> Option<Verb> {
        Some(match s {
            "wake" => Verb::Wake,
            "stop" => Verb::Stop,
            "start" => Verb::Start,
            "new" => Verb::New,
            "restart" => Verb::Restart,
            "refresh" => Verb::Refresh,
            "interrupt" => Verb::Interrupt,
            "compact" => Verb::Compact,
            _ => return None,
        })
    }
}

/// An endpoint of the fleet API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /fleet/v1/snapshot`.
    Snapshot,
    /// `GET /fleet/v1/peers/<p>`.
    Peer(String),
    /// `GET /fleet/v1/events`.
    Events,
    /// `GET /fleet/v1/notices` (spec 10 §3).
    Notices,
    /// `GET /fleet/v1/notices/<id>`.
    Notice(String),
    /// `POST /fleet/v1/peers/<p>/<verb>`.
    Verb(String, Verb),
    /// `POST /fleet/v1/send`.
    Send,
    /// `GET /fleet/v1/peers/<p>/screen`: the live screen as text.
    Screen(String),
    /// `GET /fleet/v1/inbox`: a human peer's inbox.
    Inbox,
    /// `GET /fleet/v1/approvals` (spec 10 §4).
    Approvals,
    /// `GET /fleet/v1/approvals/<id>`: one pending prompt.
    Approval(String),
    /// `POST /fleet/v1/approvals/<id>/(approve|deny)`: the id and `true` for approve.
    Decide(String, bool),
}

/// The endpoint of `method` on `path` (origin-form, no query). `HEAD` counts as `GET`.
///
/// Errors: 404 listing the endpoints for a path that is none of them; 405 (with `Allow`) for
/// a known path asked with another method.
pub fn route(method: &str, path: &str) -> Result<Endpoint, Reply> {
    let rest = path
        .strip_prefix(PREFIX)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or("");
    let parts: Vec<&str> = rest.split('/').collect();
    let (endpoint, allow) = match parts.as_slice() {
        ["snapshot"] => (Endpoint::Snapshot, "GET"),
        ["events"] => (Endpoint::Events, "GET"),
        ["notices"] => (Endpoint::Notices, "GET"),
        ["notices", id] if !id.is_empty() => (Endpoint::Notice(decode(id)), "GET"),
        ["send"] => (Endpoint::Send, "POST"),
        ["approvals"] => (Endpoint::Approvals, "GET"),
        ["approvals", id] if !id.is_empty() => (Endpoint::Approval(decode(id)), "GET"),
        ["approvals", id, "approve"] if !id.is_empty() => {
            (Endpoint::Decide(decode(id), true), "POST")
        }
        ["approvals", id, "deny"] if !id.is_empty() => {
            (Endpoint::Decide(decode(id), false), "POST")
        }
        ["peers", p] if !p.is_empty() => (Endpoint::Peer(decode(p)), "GET"),
        ["inbox"] => (Endpoint::Inbox, "GET"),
        ["peers", p, "screen"] if !p.is_empty() => (Endpoint::Screen(decode(p)), "GET"),
        ["peers", p, verb] if !p.is_empty() => match Verb::parse(verb) {
            Some(v) => (Endpoint::Verb(decode(p), v), "POST"),
            None => return Err(unknown_path(path)),
        },
        _ => return Err(unknown_path(path)),
    };
    let method = if method == "HEAD" { "GET" } else { method };
    if method != allow {
        let mut r = error(
            405,
            &format!("method not allowed: {path} accepts {allow} only"),
        );
        r.headers.push(("allow", allow.into()));
        return Err(r);
    }
    Ok(endpoint)
}

/// Undo `%XX` escapes of a path segment (a peer name is plain ASCII; anything odd is kept as
/// sent, bytes that are not UTF-8 as U+FFFD, and refused later as an unknown peer).
fn decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

/// The value of query parameter `name` in the request target (`%XX` undone), if given and
/// not empty: `query("/x?runtime=echo", "runtime")` → `Some("echo")`.
pub fn query(target: &str, name: &str) -> Option<String> {
    let query = target.split_once('?')?.1;
    let query = query.split('#').next().unwrap_or("");
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| decode(v))
        .filter(|v| !v.is_empty())
}

/// A fleet error answer: `{"error":"<text>"}` and a newline (spec 10 §1), written by
/// [`crate::visible::json`] like every fleet answer.
pub fn error(status: u16, text: &str) -> Reply {
    ok(status, &json!({ "error": text }))
}

/// A fleet JSON answer: `value` and a newline. The text holds no raw control, bidi or
/// separator character: [`crate::visible::json`] escapes them (the parsed value is exact).
pub fn ok(status: u16, value: &serde_json::Value) -> Reply {
    let mut body = crate::visible::json(value).into_bytes();
    body.push(b'\n');
    Reply {
        status,
        content_type: Some(JSON),
        headers: Vec::new(),
        body,
    }
}

/// The 404 of a path that is no endpoint: names the path and lists the endpoints (also as
/// `"endpoints"`).
pub fn unknown_path(path: &str) -> Reply {
    ok(
        404,
        &json!({
            "error": format!("not found: {path} is not a fleet API endpoint; endpoints: {}", ENDPOINTS.join(", ")),
            "endpoints": ENDPOINTS,
        }),
    )
}

/// What the fleet's 401 says: where its owner finds the token, in words that name no path of
/// this host (whoever asks without it may be another user).
pub const UNAUTHORIZED: &str = "unauthorized: send Authorization: Bearer <token>, the token \
     being the line in state/iapeer/fleet.token under the iapeer root (IAPEER_BEARER_TOKEN \
     instead when the daemon has one); a browser: open the page with `iapeer ui`";

/// A refusal of the HTTP gate (Host, Origin, bearer, size; spec 02 §3) in the fleet's error
/// shape: same status and headers, `{"error":…}` body. The bearer's 401 says what to send
/// ([`UNAUTHORIZED`]).
pub fn gate_refusal(r: Reply) -> Reply {
    let said = serde_json::from_slice::<serde_json::Value>(&r.body)
        .ok()
        .and_then(|v| v.get("error")?.as_str().map(str::to_string));
    let text = match (r.status, said) {
        (_, Some(text)) => text,
        (401, None) => UNAUTHORIZED.to_string(),
        (_, None) => String::from_utf8_lossy(&r.body).into_owned(),
    };
    let mut out = error(r.status, &text);
    out.headers = r.headers;
    out
}

/// The body of a verb: `{runtime?, topic?}` (`topic` is accepted for every verb and used by
/// none today). An empty body is `{}`.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct VerbBody {
    /// The runtime to act on (default: the CLI verb's rule).
    #[serde(default)]
    pub runtime: Option<String>,
    /// Thread label (unused by the verbs).
    #[serde(default)]
    pub topic: Option<String>,
}

/// The body of `POST /fleet/v1/send`.
#[derive(Debug, Deserialize, PartialEq, Eq)]
pub struct SendBody {
    /// Target peer.
    pub personality: String,
    /// The text.
    pub message: String,
    /// Forced runtime of the target.
    #[serde(default)]
    pub runtime: Option<String>,
    /// Thread label.
    #[serde(default)]
    pub topic: Option<String>,
    /// Sender identity `<runtime>-<name>`; default: the only natural (human) peer.
    #[serde(default)]
    pub from: Option<String>,
    /// Message id (a retry with the same id is never delivered twice); default: one the
    /// daemon makes.
    #[serde(default)]
    pub id: Option<String>,
    /// What to do when the target's agent is mid-turn (`queue`, `interrupt`, `refuse`;
    /// default `queue`): [`crate::protocol::IfBusy`].
    #[serde(default)]
    pub if_busy: Option<crate::protocol::IfBusy>,
}

/// Parse a JSON request body (`{}` when empty).
///
/// Errors: 400 naming what is wrong (not JSON, not an object, a missing or mistyped field).
pub fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Reply> {
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        bytes
    };
    serde_json::from_slice(bytes).map_err(|e| {
        error(
            400,
            &format!("bad request: the body must be a JSON object of this endpoint's shape: {e}"),
        )
    })
}

/// The replay count of `GET /fleet/v1/events?replay=N` from the request target's query:
/// absent → 0, clamped to [`MAX_REPLAY`].
///
/// Errors: 400 when `replay` is not a whole number.
pub fn replay(target: &str) -> Result<usize, Reply> {
    let query = target.split_once('?').map_or("", |(_, q)| q);
    let query = query.split('#').next().unwrap_or("");
    let Some(value) = query.split('&').find_map(|kv| kv.strip_prefix("replay=")) else {
        return Ok(0);
    };
    // A whole number too big for u64 is clamped like any other big one.
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    value
        .parse::<u64>()
        .or(if digits { Ok(u64::MAX) } else { Err(()) })
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX).min(MAX_REPLAY))
        .map_err(|_| {
            error(
                400,
                &format!(
                    "bad request: replay must be a whole number 0…{MAX_REPLAY}, got \"{value}\""
                ),
            )
        })
}

/// The long poll of `GET /fleet/v1/approvals?wait=S&since=MS`: `wait` in whole seconds
/// (clamped to [`MAX_WAIT_SECS`]; absent or 0: answer at once) as ms, and `since` in epoch
/// ms (absent: any pending prompt answers it).
///
/// Errors: 400 when either is not a whole number.
pub fn approvals_query(target: &str) -> Result<(Option<u64>, Option<u64>), Reply> {
    let query = target.split_once('?').map_or("", |(_, q)| q);
    let query = query.split('#').next().unwrap_or("");
    let field = |name: &str| -> Result<Option<u64>, Reply> {
        let prefix = format!("{name}=");
        match query
            .split('&')
            .find_map(|kv| kv.strip_prefix(prefix.as_str()))
        {
            None => Ok(None),
            Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
                error(
                    400,
                    &format!("bad request: {name} must be a whole number, got \"{v}\""),
                )
            }),
        }
    };
    let wait = field("wait")?.map(|s| s.min(MAX_WAIT_SECS) * 1000);
    Ok((wait, field("since")?))
}

/// The body of `POST /fleet/v1/approvals/<id>/deny`: `{reason?}` (may be empty).
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct DenyBody {
    /// Why, for the model.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The body of `POST /fleet/v1/approvals/<id>/approve`: `{option?}` (may be empty): for a
/// boot dialog's request, the option to choose by number or label.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ApproveBody {
    /// The option to choose: its number (a JSON number or string) or label.
    #[serde(default, deserialize_with = "number_or_text")]
    pub option: Option<String>,
}

/// A JSON string, or a number given as its decimal text.
fn number_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Number(u64),
    }
    // serde's own words for a mismatch name this private enum: say what fits instead.
    let either = Option::<Either>::deserialize(d).map_err(|_| {
        serde::de::Error::custom(
            "\"option\" must be the option's number (a JSON number or string) or its label",
        )
    })?;
    Ok(either.map(|e| match e {
        Either::Text(t) => t,
        Either::Number(n) => n.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_endpoints_and_their_query() {
        assert_eq!(route("GET", "/fleet/v1/approvals"), Ok(Endpoint::Approvals));
        assert_eq!(
            route("POST", "/fleet/v1/approvals/ap-0123abcd/approve"),
            Ok(Endpoint::Decide("ap-0123abcd".into(), true))
        );
        assert_eq!(
            route("POST", "/fleet/v1/approvals/ap-0123abcd/deny"),
            Ok(Endpoint::Decide("ap-0123abcd".into(), false))
        );
        assert_eq!(
            route("GET", "/fleet/v1/approvals/ap-0123abcd/deny")
                .unwrap_err()
                .status,
            405
        );
        assert_eq!(
            route("POST", "/fleet/v1/approvals/x/maybe")
                .unwrap_err()
                .status,
            404
        );
        assert_eq!(approvals_query("/fleet/v1/approvals"), Ok((None, None)));
        assert_eq!(
            approvals_query("/fleet/v1/approvals?wait=30&since=17"),
            Ok((Some(30_000), Some(17)))
        );
        assert_eq!(
            approvals_query("/fleet/v1/approvals?wait=9999"),
            Ok((Some(MAX_WAIT_SECS * 1000), None))
        );
        assert_eq!(
            approvals_query("/fleet/v1/approvals?wait=x")
                .unwrap_err()
                .status,
            400
        );
    }

    #[test]
    fn endpoints_methods_and_unknown_paths() {
        assert_eq!(route("GET", "/fleet/v1/snapshot"), Ok(Endpoint::Snapshot));
        assert_eq!(route("HEAD", "/fleet/v1/events"), Ok(Endpoint::Events));
        assert_eq!(route("GET", "/fleet/v1/notices"), Ok(Endpoint::Notices));
        assert_eq!(
            route("GET", "/fleet/v1/notices/nt-0123abcd"),
            Ok(Endpoint::Notice("nt-0123abcd".into()))
        );
        assert_eq!(route("POST", "/fleet/v1/notices").unwrap_err().status, 405);
        assert_eq!(
            route("GET", "/fleet/v1/peers/bob"),
            Ok(Endpoint::Peer("bob".into()))
        );
        assert_eq!(
            route("POST", "/fleet/v1/peers/b%6Fb/compact"),
            Ok(Endpoint::Verb("bob".into(), Verb::Compact))
        );
        assert_eq!(route("POST", "/fleet/v1/send"), Ok(Endpoint::Send));
        assert_eq!(
            route("GET", "/fleet/v1/peers/bob/screen"),
            Ok(Endpoint::Screen("bob".into()))
        );
        assert_eq!(
            route("POST", "/fleet/v1/peers/bob/screen")
                .unwrap_err()
                .status,
            405
        );
        assert_eq!(route("GET", "/fleet/v1/inbox"), Ok(Endpoint::Inbox));
        assert_eq!(
            query("/x?runtime=echo&y=1", "runtime").as_deref(),
            Some("echo")
        );
        assert_eq!(query("/x?peer=y%6Fu", "peer").as_deref(), Some("you"));
        // An escape that is not two hex digits is kept as sent; bytes that are not UTF-8
        // become U+FFFD.
        assert_eq!(query("/x?peer=a%zz%4", "peer").as_deref(), Some("a%zz%4"));
        assert_eq!(
            query("/x?peer=%C3%A9%FF", "peer").as_deref(),
            Some("é\u{FFFD}")
        );
        assert_eq!(query("/x?runtime=", "runtime"), None);
        assert_eq!(query("/x", "runtime"), None);
        let r = route("POST", "/fleet/v1/snapshot").unwrap_err();
        assert_eq!(
            (r.status, r.headers.clone()),
            (405, vec![("allow", "GET".into())])
        );
        assert_eq!(route("GET", "/fleet/v1/send").unwrap_err().status, 405);
        for bad in [
            "/fleet",
            "/fleet/v1",
            "/fleet/v2/snapshot",
            "/fleet/v1/peers/",
            "/fleet/v1/peers/bob/dance",
            "/fleet/v1/snapshot/x",
        ] {
            let r = route("GET", bad).unwrap_err();
            assert_eq!(r.status, 404, "{bad}");
            let text = String::from_utf8(r.body).unwrap();
            assert!(
                text.contains("GET /fleet/v1/snapshot") && text.ends_with('\n'),
                "{text}"
            );
        }
    }

    #[test]
    fn bodies_and_replay() {
        assert_eq!(body::<VerbBody>(b""), Ok(VerbBody::default()));
        let v: VerbBody = body(br#"{"runtime":"echo"}"#).unwrap();
        assert_eq!(v.runtime.as_deref(), Some("echo"));
        assert_eq!(body::<VerbBody>(b"[1]").unwrap_err().status, 400);
        assert_eq!(
            body::<SendBody>(br#"{"message":"x"}"#).unwrap_err().status,
            400
        );
        assert_eq!(replay("/fleet/v1/events"), Ok(0));
        assert_eq!(replay("/fleet/v1/events?x=1&replay=7"), Ok(7));
        assert_eq!(
            replay("/fleet/v1/events?replay=9999999999999"),
            Ok(MAX_REPLAY)
        );
        assert_eq!(
            replay("/fleet/v1/events?replay=99999999999999999999"),
            Ok(MAX_REPLAY)
        );
        assert_eq!(
            replay("/fleet/v1/events?replay=-1").unwrap_err().status,
            400
        );
        // A wrong `option` says what fits, not the name of serde's helper type.
        let e = body::<ApproveBody>(br#"{"option":[1]}"#).unwrap_err();
        let text = String::from_utf8_lossy(&e.body).to_string();
        assert!(
            e.status == 400
                && text.contains("must be the option's number")
                && !text.contains("Either"),
            "{text}"
        );
        let b: ApproveBody = body(br#"{"option":2}"#).unwrap();
        assert_eq!(b.option.as_deref(), Some("2"));
    }

    #[test]
    fn gate_refusals_take_the_fleet_shape() {
        let r = gate_refusal(Reply::unauthorized());
        assert_eq!(r.status, 401);
        assert!(r.headers.contains(&("www-authenticate", "Bearer".into())));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert!(v["error"].as_str().unwrap().starts_with("unauthorized"));
        let r = gate_refusal(Reply::forbidden("cross-origin requests are not accepted"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            v["error"],
            "forbidden: cross-origin requests are not accepted"
        );
    }
}
