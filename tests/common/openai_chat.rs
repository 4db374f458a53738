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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::anthropic::HoldReader;

/// What to answer to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A text answer.
    Text(String),
    /// A call of a declared function: its name as the request declared it (see
    /// [`declared_functions`]) and its arguments.
    Call(String, Value),
    /// Stream a first chunk, hold the connection for this long, then finish with the text.
    Hold(Duration, String),
    /// An HTTP error status with an OpenAI error body.
    Error(u16),
}

type Script = Box<dyn Fn(&Value) -> Reply + Send>;

/// The running stand-in.
pub struct ChatStandIn {
    server: Arc<tiny_http::Server>,
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Value>>>,
    script: Arc<Mutex<Script>>,
    thread: Option<std::thread::JoinHandle<()>>,
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

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("header")
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

fn respond(rq: tiny_http::Request, req: &Value, reply: Reply) {
    let model = req["model"].as_str().unwrap_or("standin-model").to_string();
    if let Reply::Error(code) = reply {
        let body =
            json!({"error": {"message": "stand-in error", "type": "server_error", "code": code}});
        let resp = tiny_http::Response::from_string(body.to_string())
            .with_status_code(code)
            .with_header(header("content-type", "application/json"));
        let _ = rq.respond(resp);
        return;
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
        let resp = tiny_http::Response::from_string(body.to_string())
            .with_header(header("content-type", "application/json"));
        let _ = rq.respond(resp);
        return;
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
    let reader = HoldReader::new(head.into_bytes(), tail.into_bytes(), hold);
    let headers = vec![
        header("content-type", "text/event-stream"),
        header("cache-control", "no-cache"),
    ];
    let resp = tiny_http::Response::new(200.into(), headers, reader, None, None);
    let _ = rq.respond(resp);
}

impl ChatStandIn {
    /// Start on 127.0.0.1 answering every request with "ok".
    pub fn start() -> ChatStandIn {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind stand-in"));
        let port = server.server_addr().to_ip().expect("ip").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Mutex<Script>> =
            Arc::new(Mutex::new(Box::new(|_| Reply::Text("ok".into()))));
        let (srv, reqs, scr) = (server.clone(), requests.clone(), script.clone());
        let thread = std::thread::spawn(move || {
            for mut rq in srv.incoming_requests() {
                let mut body = String::new();
                let _ = rq.as_reader().read_to_string(&mut body);
                let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                if rq.method() != &tiny_http::Method::Post
                    || !rq.url().ends_with("/chat/completions")
                {
                    let _ = rq.respond(
                        tiny_http::Response::from_string("{}")
                            .with_status_code(404)
                            .with_header(header("content-type", "application/json")),
                    );
                    continue;
                }
                reqs.lock().unwrap().push(parsed.clone());
                let reply = (scr.lock().unwrap())(&parsed);
                std::thread::spawn(move || respond(rq, &parsed, reply));
            }
        });
        ChatStandIn {
            server,
            port,
            requests,
            script,
            thread: Some(thread),
        }
    }

    /// The provider's `baseURL` (the stand-in answers `<baseURL>/chat/completions`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Replace the answering script.
    pub fn script(&self, f: impl Fn(&Value) -> Reply + Send + 'static) {
        *self.script.lock().unwrap() = Box::new(f);
    }

    /// Every request so far.
    pub fn recorded(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The turn requests so far (the title requests left out).
    pub fn turns(&self) -> Vec<Value> {
        self.recorded()
            .into_iter()
            .filter(|r| !is_title_request(r))
            .collect()
    }

    /// Whether a turn request's last message holds `needle`.
    pub fn has_turn_with(&self, needle: &str) -> bool {
        self.turns().iter().any(|r| last_text(r).contains(needle))
    }
}

impl Drop for ChatStandIn {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
