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

use std::time::Duration;

use serde_json::{json, Value};

use super::standin::{self, Server};
pub use super::standin::{Recorded, Reply};

/// Whether a recorded request is a turn's streamed request.
pub fn is_stream(r: &Recorded) -> bool {
    r.path.contains(":streamGenerateContent")
}

/// The running stand-in (its [`Server`]: `script`, `recorded`, `port`).
pub struct GeminiStandIn(Server<Reply>);

impl std::ops::Deref for GeminiStandIn {
    type Target = Server<Reply>;
    fn deref(&self) -> &Server<Reply> {
        &self.0
    }
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

/// The usage of a request: its prompt counted as the real API roughly does, a token per 4
/// bytes of the request (system prompt and tool declarations included). Gemini CLI 0.61.0
/// takes it for the conversation's size, and `/compress` keeps its summary only when the
/// summarized history counts fewer tokens (recorded in `compress.raw`: with a fixed 12 it
/// answered "Compression was not beneficial for this history size.").
fn usage(req: &Value) -> Value {
    let prompt = req.to_string().len() / 4;
    json!({"promptTokenCount": prompt, "candidatesTokenCount": 3, "totalTokenCount": prompt + 3})
}

/// One `GenerateContentResponse` chunk for `req` with these parts and, for the last, a
/// finish reason.
fn chunk(req: &Value, model: &str, parts: Value, finish: bool) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    let mut c = json!({"candidates": [], "modelVersion": model});
    if finish {
        candidate["finishReason"] = json!("STOP");
        c["usageMetadata"] = usage(req);
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

/// The API's error body for `code`.
fn error_body(code: u16) -> Value {
    let status = match code {
        429 => "RESOURCE_EXHAUSTED",
        401 | 403 => "PERMISSION_DENIED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    json!({"error": {"code": code, "message": "stand-in error", "status": status}})
}

/// Whether a request is one of `/compress`'s two non-streamed summary requests (recorded in
/// `compress-requests.json`: the last text asks for a `<state_snapshot>`). A script's
/// [`Reply::Error`] refuses it; any other reply gets [`side_answer`]'s summary.
pub fn is_compression(req: &Value) -> bool {
    last_text(req).contains("<state_snapshot>")
}

/// The model named in a path like `/v1beta/models/<model>:streamGenerateContent`.
fn model_of(path: &str) -> String {
    path.split("/models/")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or("gemini-standin")
        .to_string()
}

fn respond(rq: tiny_http::Request, rec: Recorded, reply: Reply) {
    let (path, req) = (&rec.path, &rec.body);
    if rec.method != "POST" || !path.contains(':') {
        return standin::json(rq, 200, &json!({}));
    }
    if path.contains(":countTokens") {
        return standin::json(rq, 200, &json!({"totalTokens": 12}));
    }
    let model = model_of(path);
    if !is_stream(&rec) {
        if let (true, Reply::Error(code)) = (is_compression(req), &reply) {
            return standin::json(rq, *code, &error_body(*code));
        }
        return standin::json(
            rq,
            200,
            &chunk(req, &model, json!([{"text": side_answer(req)}]), true),
        );
    }
    let (head, tail, hold) = match reply {
        Reply::Error(code) => return standin::json(rq, code, &error_body(code)),
        Reply::Text(t) => (
            sse(&[chunk(req, &model, json!([{"text": t}]), true)]),
            String::new(),
            Duration::ZERO,
        ),
        Reply::Call(name, args) => (
            sse(&[chunk(
                req,
                &model,
                json!([{"functionCall": {"name": name, "args": args}}]),
                true,
            )]),
            String::new(),
            Duration::ZERO,
        ),
        Reply::Hold(d, t) => (
            sse(&[chunk(req, &model, json!([{"text": "Working"}]), false)]),
            sse(&[chunk(req, &model, json!([{"text": format!(" {t}")}]), true)]),
            d,
        ),
    };
    standin::stream(rq, head, tail, hold);
}

/// The composer's rows of a Gemini CLI screen (between its half-block rules), trimmed.
pub fn composer_rows(screen: &str) -> Vec<String> {
    let rows: Vec<&str> = screen.lines().collect();
    let Some(top) = rows.iter().rposition(|r| r.starts_with('▄')) else {
        return Vec::new();
    };
    rows[top + 1..]
        .iter()
        .take_while(|r| !r.starts_with('▀'))
        .map(|r| r.trim().to_string())
        .collect()
}

impl GeminiStandIn {
    /// Start on 127.0.0.1 answering every turn with "ok" (side questions by [`side_answer`]).
    pub fn start() -> GeminiStandIn {
        GeminiStandIn(Server::start(|_| Reply::Text("ok".into()), respond))
    }

    /// The value for `GOOGLE_GEMINI_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bodies of the streamed turn requests so far.
    pub fn turns(&self) -> Vec<Value> {
        self.recorded()
            .into_iter()
            .filter(is_stream)
            .map(|r| r.body)
            .collect()
    }

    /// Whether a streamed turn request's last content holds `needle`.
    pub fn has_turn_with(&self, needle: &str) -> bool {
        self.turns().iter().any(|r| last_text(r).contains(needle))
    }
}
