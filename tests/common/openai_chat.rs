//! A stand-in for the OpenAI Chat Completions API (`POST <baseURL>/chat/completions`) on
//! 127.0.0.1 (a random port), for end-to-end tests with the real OpenCode CLI, whose
//! OpenAI-compatible provider (`@ai-sdk/openai-compatible`, bundled) calls it. The cloud API
//! cannot run here, so like the other model stand-ins this is a mock: it records every
//! request and answers from a script, streaming Server-Sent Events as the real API does
//! (`data: <chat.completion.chunk>` lines, a usage chunk, then `data: [DONE]`), or plain JSON
//! when the request is not streamed.
//!
//! What OpenCode 1.18.33 requests (recorded, `tests/fixtures/opencode-1.18.33/README.md`): a
//! turn (with `tools`), and a title request for a new session (no tools, a user message
//! `Generate a title for this conversation:`), both streamed.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

pub use super::standin::Reply;
use super::standin::{self, Recorded, Server};

/// The running stand-in (its [`Server`]: `script`, `recorded`, `port`).
pub struct ChatStandIn(Server<Reply>);

impl std::ops::Deref for ChatStandIn {
    type Target = Server<Reply>;
    fn deref(&self) -> &Server<Reply> {
        &self.0
    }
}

/// A message's content as text (a string, or the texts of its parts joined).
fn message_text(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of the request's last message (a user turn or a tool result).
pub fn last_text(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(message_text)
        .unwrap_or_default()
}

/// Whether the request's last message is a tool result.
pub fn last_is_tool_result(req: &Value) -> bool {
    req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool")
}

/// The texts of the request's `system` messages, joined.
pub fn system_text(req: &Value) -> String {
    req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system")
        .map(message_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names of the functions the request declares (`tools[].function.name`).
pub fn declared_functions(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Whether this is OpenCode's request for a session title (no tools; a user message asking
/// for a title).
pub fn is_title_request(req: &Value) -> bool {
    declared_functions(req).is_empty()
        && req["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| message_text(m).starts_with("Generate a title for this conversation"))
}

fn usage() -> Value {
    json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1,
        "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn sse(chunks: &[Value]) -> String {
    chunks.iter().map(|c| format!("data: {c}\n\n")).collect()
}

/// Each call its own id: a conversation may hold several.
fn call_id() -> String {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    format!("call_standin_{}", CALLS.fetch_add(1, Ordering::Relaxed))
}

/// The error body the OpenAI API sends with `code`: a wrong key (401), a rate limit (429),
/// else a server error.
fn error_body(code: u16) -> Value {
    let (message, kind, error_code) = match code {
        401 => (
            "stand-in: Incorrect API key provided",
            "invalid_request_error",
            json!("invalid_api_key"),
        ),
        429 => (
            "stand-in: Rate limit reached for requests",
            "requests",
            json!("rate_limit_exceeded"),
        ),
        _ => ("stand-in error", "server_error", json!(code)),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": error_code}})
}

fn respond(rq: tiny_http::Request, rec: Recorded, reply: Reply) {
    let req = &rec.body;
    if rec.method != "POST" || !rec.path.ends_with("/chat/completions") {
        return standin::json(rq, 404, &json!({}));
    }
    let model = req["model"].as_str().unwrap_or("standin-model").to_string();
    if let Reply::Error(code) = reply {
        return standin::json(rq, code, &error_body(code));
    }
    if req["stream"] != json!(true) {
        let message = match &reply {
            Reply::Call(name, args) => json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": call_id(), "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}}]}),
            Reply::Text(t) | Reply::Hold(_, t) => json!({"role": "assistant", "content": t}),
            Reply::Error(_) => unreachable!("answered above"),
        };
        let finish = if matches!(reply, Reply::Call(..)) {
            "tool_calls"
        } else {
            "stop"
        };
        let body = json!({"id": "chatcmpl-standin", "object": "chat.completion", "created": 1,
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage()});
        return standin::json(rq, 200, &body);
    }
    let role = chunk(&model, json!({"role": "assistant", "content": ""}), None);
    let mut done = json!({"id": "chatcmpl-standin", "object": "chat.completion.chunk",
        "created": 1, "model": model, "choices": []});
    done["usage"] = usage();
    let end = |finish: &str, mut chunks: Vec<Value>| {
        chunks.push(chunk(&model, json!({}), Some(finish)));
        chunks.push(done.clone());
        sse(&chunks) + "data: [DONE]\n\n"
    };
    let (head, tail, hold) = match reply {
        Reply::Text(t) => (
            end(
                "stop",
                vec![role, chunk(&model, json!({"content": t}), None)],
            ),
            String::new(),
            Duration::ZERO,
        ),
        Reply::Call(name, args) => {
            let start = json!({"tool_calls": [{"index": 0, "id": call_id(), "type": "function",
                "function": {"name": name, "arguments": ""}}]});
            let arguments =
                json!({"tool_calls": [{"index": 0, "function": {"arguments": args.to_string()}}]});
            (
                end(
                    "tool_calls",
                    vec![
                        role,
                        chunk(&model, start, None),
                        chunk(&model, arguments, None),
                    ],
                ),
                String::new(),
                Duration::ZERO,
            )
        }
        Reply::Hold(d, t) => (
            sse(&[role, chunk(&model, json!({"content": "Working"}), None)]),
            end(
                "stop",
                vec![chunk(&model, json!({"content": format!(" {t}")}), None)],
            ),
            d,
        ),
        Reply::Error(_) => unreachable!("answered above"),
    };
    standin::stream(rq, head, tail, hold);
}

impl ChatStandIn {
    /// Start on 127.0.0.1 answering every request with "ok".
    pub fn start() -> ChatStandIn {
        ChatStandIn(Server::start(|_| Reply::Text("ok".into()), respond))
    }

    /// The provider's `baseURL` (the stand-in answers `<baseURL>/chat/completions`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// An OpenCode user config (`opencode.json`) whose provider and model are this stand-in
    /// (`standin/standin-model`, its key from `STANDIN_API_KEY`), sharing off; a test adds
    /// its own keys.
    pub fn opencode_config(&self) -> Value {
        json!({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"standin": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Stand-in",
                "options": {"baseURL": self.base_url(), "apiKey": "{env:STANDIN_API_KEY}"},
                "models": {"standin-model": {"name": "Stand-in model"}},
            }},
            "model": "standin/standin-model",
            "small_model": "standin/standin-model",
            "share": "disabled",
        })
    }

    /// The turn requests so far (the title requests left out).
    pub fn turns(&self) -> Vec<Value> {
        self.recorded()
            .into_iter()
            .map(|r| r.body)
            .filter(|b| !b.is_null() && !is_title_request(b))
            .collect()
    }

    /// Whether a turn request's last message holds `needle`.
    pub fn has_turn_with(&self, needle: &str) -> bool {
        self.turns().iter().any(|r| last_text(r).contains(needle))
    }
}
