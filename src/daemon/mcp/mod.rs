//! MCP over stateless streamable HTTP (spec 02 §4): JSON-RPC parsing, the methods we answer
//! (`server/discover`, `initialize`, `ping`, `tools/list`, `tools/call`) in both protocol
//! eras (`era`: the `initialize` handshake, or revision 2026-07-28's per-request `_meta`),
//! and the response encoding (`application/json` or a one-event `text/event-stream`).
//!
//! Transport checks (Host, Origin, bearer, body size, content type) happen before this module
//! is reached (see `daemon::http`). Caller authentication and message routing sit behind the
//! [`Backend`] trait, implemented by the router.

pub mod era;
mod rpc;
pub mod tool;

#[cfg(test)]
mod tests;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde_json::Value;

pub use era::McpHeaders;
#[cfg(test)]
use tool::ArgError;

/// Arguments of one `send_to_peer` call, shape-checked but not value-checked (the router's
/// `route_send` validates patterns and limits, spec 03 §1): the send as the router takes it.
pub use crate::daemon::route::SendArgs;

/// What the caller presented to prove who it is (spec 02 §4, "Caller authentication").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallerCreds {
    /// `X-IAPeer-Identity`, trimmed; `None` when absent or blank.
    pub identity_header: Option<String>,
    /// The session token: `Authorization: Bearer <t>` when no `IAPEER_BEARER_TOKEN` is set,
    /// else the `X-IAPeer-Token` header. `None` when absent or blank.
    pub session_token: Option<String>,
}

/// The outcome of one routed send: the result object of spec 03 §1, or the failure (its text
/// is the tool error's; its code goes with it, as on the control socket).
pub type SendOutcome = Result<crate::protocol::SendResult, crate::protocol::Failure>;

/// Where [`Backend::submit`] delivers a send's outcome.
pub type SendDone = Box<dyn FnOnce(SendOutcome) + Send>;

/// The router, as seen from MCP. [`Backend::send_to_peer`] may block (a wake can take
/// minutes); the HTTP layer uses [`Backend::submit`], which must not.
pub trait Backend: Send + Sync {
    /// Authenticate the caller and route the message.
    /// `Ok` = the result object of spec 03 §1; `Err` = the failure (the tool error).
    fn send_to_peer(&self, creds: CallerCreds, args: SendArgs) -> SendOutcome;

    /// Route a send without waiting for it (issue 13 item 3: no thread per waiting call):
    /// `done` gets the outcome once, later, on another thread, and must return quickly.
    /// `gone` is set by the caller once its client has hung up, so work not begun for it is
    /// not begun (issue 7 item 4). The default blocks in [`Backend::send_to_peer`] (for
    /// backends whose sends are quick).
    fn submit(&self, creds: CallerCreds, args: SendArgs, gone: Arc<AtomicBool>, done: SendDone) {
        let _ = gone;
        done(self.send_to_peer(creds, args));
    }

    /// A client listed the tools: its MCP connection is up (sessions wait for this before
    /// their first message, so the agent's first turn already has `send_to_peer`).
    fn tools_listed(&self, _creds: &CallerCreds) {}
}

/// An HTTP answer produced by [`handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpResponse {
    /// HTTP status: 200, 202 (nothing to answer), 400 (unparseable or invalid single request; a
    /// modern request with an unsupported version or mismatched headers) or 404 (a modern
    /// request for a method we do not have).
    pub status: u16,
    /// `application/json`, `text/event-stream`, or `None` for an empty 202.
    pub content_type: Option<&'static str>,
    /// The encoded body (empty for 202).
    pub body: Vec<u8>,
}

/// Content type of a JSON answer.
pub const JSON: &str = "application/json";
/// Content type of an SSE answer.
pub const EVENT_STREAM: &str = "text/event-stream";

/// Handle one `POST /mcp` body (spec 02 §4), blocking on the backend for its sends: the
/// composition of `start` and `Pending::finish` (tests and the fuzz targets drive it).
///
/// `headers.accept`: JSON is used when it is absent or lists `application/json` (or `*/*`,
/// `application/*`), else the answer is one SSE event. The other `headers` are checked
/// against a modern request's body (see `era::of_request`).
/// Malformed JSON → 400 with error -32700; a single invalid request → 400 with -32600;
/// notifications and client responses → 202 with an empty body; a batch → an array of the
/// answers to its requests (202 when there are none).
pub fn handle(
    body: &[u8],
    headers: &McpHeaders<'_>,
    creds: CallerCreds,
    backend: &dyn Backend,
) -> McpResponse {
    respond(
        rpc::process(body, headers, &creds, backend),
        wants_json(headers.accept),
    )
}

/// A POST body whose answer waits for routed sends ([`start`]).
#[derive(Debug)]
pub struct Pending {
    plan: rpc::Plan,
    json: bool,
    events: bool,
}

/// What [`start`] made of a POST body.
#[derive(Debug)]
pub enum Started {
    /// The answer, complete.
    Done(McpResponse),
    /// The sends to route (each through [`Backend::submit`]) and the answer they complete.
    Sends(Pending, Vec<SendArgs>),
}

/// Begin one `POST /mcp` body without blocking: everything but its `send_to_peer` calls is
/// answered now (see [`handle`] for the shapes). With sends, the caller routes them and
/// passes their outcomes, in order, to [`Pending::finish`].
pub fn start(
    body: &[u8],
    headers: &McpHeaders<'_>,
    creds: &CallerCreds,
    backend: &dyn Backend,
) -> Started {
    let mut plan = rpc::plan(body, headers, creds, backend);
    let sends = plan.take_sends();
    let json = wants_json(headers.accept);
    if sends.is_empty() {
        Started::Done(respond(plan.finish(Vec::new()), json))
    } else {
        let events = takes_events(headers.accept);
        Started::Sends(Pending { plan, json, events }, sends)
    }
}

impl Pending {
    /// The complete answer, given each send's outcome in the order [`start`] listed them.
    pub fn finish(self, outcomes: Vec<SendOutcome>) -> McpResponse {
        respond(self.plan.finish(outcomes), self.json)
    }

    /// Whether the client's `Accept` lists `text/event-stream` ([`takes_events`]): its
    /// answer may be held as an event stream whose head goes out before the sends are done
    /// (streamable HTTP lets a POST be answered so; see `daemon::http::listen`,
    /// `HOLD_AS_EVENTS_AFTER`).
    pub fn takes_events(&self) -> bool {
        self.events
    }

    /// The answer as the one SSE event that ends an event stream whose head (status 200,
    /// `text/event-stream`) was sent already: `event: message\ndata: <JSON-RPC answer>\n\n`
    /// (empty when there is nothing to answer, which a body with sends never is). A body
    /// with sends is always answered 200, so the early head never disagrees with it.
    pub fn finish_as_event(self, outcomes: Vec<SendOutcome>) -> Vec<u8> {
        match self.plan.finish(outcomes) {
            (_, Some(value)) => encode(200, &value, false).body,
            (_, None) => Vec::new(),
        }
    }
}

fn respond((status, reply): (u16, Option<Value>), json: bool) -> McpResponse {
    match reply {
        None => McpResponse {
            status: 202,
            content_type: None,
            body: Vec::new(),
        },
        Some(value) => encode(status, &value, json),
    }
}

fn encode(status: u16, value: &Value, json: bool) -> McpResponse {
    let text = value.to_string();
    if json {
        McpResponse {
            status,
            content_type: Some(JSON),
            body: text.into_bytes(),
        }
    } else {
        McpResponse {
            status,
            content_type: Some(EVENT_STREAM),
            body: format!("event: message\ndata: {text}\n\n").into_bytes(),
        }
    }
}

/// True when an `Accept` header value lists `text/event-stream` itself (parameters ignored):
/// the client reads an SSE answer. A wildcard (`*/*`, `text/*`) does not count: a client that
/// names no stream (curl, say) keeps a plain JSON answer.
pub fn takes_events(accept: Option<&str>) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|range| {
            let media = range.split(';').next().unwrap_or("").trim();
            media.eq_ignore_ascii_case(EVENT_STREAM)
        })
    })
}

/// True when an `Accept` header value lets us answer with `application/json`: absent or blank,
/// or listing `application/json`, `application/*` or `*/*` (parameters such as `q` ignored).
pub fn wants_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return true;
    };
    accept.split(',').any(|range| {
        let media = range.split(';').next().unwrap_or("").trim();
        ["application/json", "application/*", "*/*"]
            .iter()
            .any(|ok| media.eq_ignore_ascii_case(ok))
    })
}
