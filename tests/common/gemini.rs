//! A stand-in for the Gemini API (Generative Language API, `v1beta`) on 127.0.0.1 (a random
//! port), for end-to-end tests with the real Gemini CLI (`GOOGLE_GEMINI_BASE_URL` points at
//! it). The cloud API cannot run here, so like the Anthropic and OpenAI stand-ins this is a
//! mock: it records every request and answers from a script.
//!
//! What Gemini CLI 0.61.0 requests (recorded, `tests/fixtures/gemini-cli-0.61.0/README.md`):
//! `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` for a turn, answered here as the
//! real API streams (Server-Sent Events, one `data: <GenerateContentResponse>` per chunk,
//! `\r\n\r\n` between them), and non-streamed `POST /v1beta/models/<model>:generateContent`
//! for its side questions (the model router's complexity score, a session summary), answered
//! by [`side_answer`]. The API key comes in `x-goog-api-key`.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::anthropic::HoldReader;

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The path with its query, e.g. `/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse`.
    pub path: String,
    /// The `x-goog-api-key` header, when sent.
    pub api_key: Option<String>,
    pub body: Value,
}

impl Recorded {
    /// Whether this is a turn's streamed request.
    pub fn is_stream(&self) -> bool {
        self.path.contains(":streamGenerateContent")
    }
}

/// What to answer to one streamed model request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A text answer.
    Text(String),
    /// A function call: the declared function's name (an MCP tool's name as the CLI declared
    /// it, see [`declared_functions`]) and its arguments.
    Call(String, Value),
    /// Stream a first chunk, hold the connection for this long, then finish with the text.
    Hold(Duration, String),
    /// An HTTP error status with a Google API error body.
    Error(u16),
}

type Script = Box<dyn Fn(&Value) -> Reply + Send>;

/// The running stand-in.
pub struct GeminiStandIn {
    server: Arc<tiny_http::Server>,
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<Script>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Every text of a request's `contents` item, joined.
fn content_text(content: &Value) -> String {
    content["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .map(|p| {
                    if let Some(t) = p["text"].as_str() {
                        t.to_string()
                    } else if !p["functionResponse"].is_null() {
                        p["functionResponse"].to_string()
                    } else {
                        String::new()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The text of the request's last `contents` item (a user turn or a function response).
pub fn last_text(req: &Value) -> String {
    req["contents"]
        .as_array()
        .and_then(|c| c.last())
        .map(content_text)
        .unwrap_or_default()
}

/// Whether the request's last `contents` item answers a function call.
pub fn last_is_function_response(req: &Value) -> bool {
    req["contents"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|c| c["parts"].as_array())
        .is_some_and(|parts| parts.iter().any(|p| !p["functionResponse"].is_null()))
}

/// The system instruction's text.
pub fn system_text(req: &Value) -> String {
    content_text(&req["systemInstruction"])
}

/// The names of the functions the request declares (`tools[].functionDeclarations[].name`).
pub fn declared_functions(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect()
}

/// The answer to a non-streamed `:generateContent` side question: the model router asks for
/// a JSON complexity score (answered "simple"); anything else gets a short text.
pub fn side_answer(req: &Value) -> String {
    if system_text(req).contains("Complexity Score") {
        json!({"complexity_reasoning": "stand-in", "complexity_score": 10}).to_string()
    } else {
        "Stand-in summary".to_string()
    }
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("header")
}

fn usage() -> Value {
    json!({"promptTokenCount": 12, "candidatesTokenCount": 3, "totalTokenCount": 15})
}

/// One `GenerateContentResponse` chunk with these parts and, for the last, a finish reason.
fn chunk(model: &str, parts: Value, finish: bool) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    let mut c = json!({"candidates": [], "modelVersion": model});
    if finish {
        candidate["finishReason"] = json!("STOP");
        c["usageMetadata"] = usage();
    }
    c["candidates"] = json!([candidate]);
    c
}

fn sse(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

/// The model named in a path like `/v1beta/models/<model>:streamGenerateContent`.
fn model_of(path: &str) -> String {
    path.split("/models/")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or("gemini-standin")
        .to_string()
}

fn respond(rq: tiny_http::Request, path: &str, req: &Value, reply: Reply) {
    let model = model_of(path);
    if let Reply::Error(code) = reply {
        let status = match code {
            429 => "RESOURCE_EXHAUSTED",
            401 | 403 => "PERMISSION_DENIED",
            503 => "UNAVAILABLE",
            _ => "INTERNAL",
        };
        let body = json!({"error": {"code": code, "message": "stand-in error", "status": status}});
        let resp = tiny_http::Response::from_string(body.to_string())
            .with_status_code(code)
            .with_header(header("content-type", "application/json"));
        let _ = rq.respond(resp);
        return;
    }
    if !path.contains(":streamGenerateContent") {
        let body = chunk(&model, json!([{"text": side_answer(req)}]), true);
        let resp = tiny_http::Response::from_string(body.to_string())
            .with_header(header("content-type", "application/json"));
        let _ = rq.respond(resp);
        return;
    }
    let (head, tail, hold) = match reply {
        Reply::Text(t) => (
            sse(&[chunk(&model, json!([{"text": t}]), true)]),
            String::new(),
            Duration::ZERO,
        ),
        Reply::Call(name, args) => (
            sse(&[chunk(
                &model,
                json!([{"functionCall": {"name": name, "args": args}}]),
                true,
            )]),
            String::new(),
            Duration::ZERO,
        ),
        Reply::Hold(d, t) => (
            sse(&[chunk(&model, json!([{"text": "Working"}]), false)]),
            sse(&[chunk(&model, json!([{"text": format!(" {t}")}]), true)]),
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

impl GeminiStandIn {
    /// Start on 127.0.0.1 answering every turn with "ok".
    pub fn start() -> GeminiStandIn {
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
                let path = rq.url().to_string();
                let api_key = rq
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("x-goog-api-key"))
                    .map(|h| h.value.to_string());
                let rec = Recorded {
                    method: rq.method().to_string(),
                    path: path.clone(),
                    api_key,
                    body: parsed.clone(),
                };
                let modelish = rq.method() == &tiny_http::Method::Post && path.contains(":");
                let stream = rec.is_stream();
                reqs.lock().unwrap().push(rec);
                if !modelish || path.contains(":countTokens") {
                    let body = if path.contains(":countTokens") {
                        json!({"totalTokens": 12}).to_string()
                    } else {
                        "{}".to_string()
                    };
                    let _ = rq.respond(
                        tiny_http::Response::from_string(body)
                            .with_header(header("content-type", "application/json")),
                    );
                    continue;
                }
                let reply = if stream {
                    (scr.lock().unwrap())(&parsed)
                } else {
                    Reply::Text(String::new())
                };
                std::thread::spawn(move || respond(rq, &path, &parsed, reply));
            }
        });
        GeminiStandIn {
            server,
            port,
            requests,
            script,
            thread: Some(thread),
        }
    }

    /// The value for `GOOGLE_GEMINI_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Replace the script answering streamed turns.
    pub fn script(&self, f: impl Fn(&Value) -> Reply + Send + 'static) {
        *self.script.lock().unwrap() = Box::new(f);
    }

    /// Every request so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The bodies of the streamed turn requests so far.
    pub fn turns(&self) -> Vec<Value> {
        self.recorded()
            .into_iter()
            .filter(Recorded::is_stream)
            .map(|r| r.body)
            .collect()
    }

    /// Whether a streamed turn request's last content holds `needle`.
    pub fn has_turn_with(&self, needle: &str) -> bool {
        self.turns().iter().any(|r| last_text(r).contains(needle))
    }
}

impl Drop for GeminiStandIn {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
