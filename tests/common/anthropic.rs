//! A stand-in for the Anthropic Messages API on 127.0.0.1 (a random port), for end-to-end
//! tests with the real Claude Code CLI (spec 12 layer 4). The cloud API cannot run here, so
//! this is the one mock of the suite: it records every request and answers from a script the
//! test sets, streaming Server-Sent Events like the real API (`message_start`,
//! `content_block_start`, `content_block_delta`, `content_block_stop`, `message_delta`,
//! `message_stop`), or plain JSON when the request is not streamed.

#![allow(dead_code)]

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub body: Value,
}

/// What to answer to one model request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A text answer.
    Text(String),
    /// A tool call: the tool's full name (e.g. `mcp__iapeer__send_to_peer`) and its input.
    ToolUse(String, Value),
    /// Send the start of a streamed answer, then hold the connection open for at most this
    /// long (or until the client goes away) before finishing with `text`.
    Hold(Duration, String),
    /// An HTTP error status with an API error body.
    Error(u16),
    /// Answer as the inner reply, with these extra response headers (e.g. a 429's
    /// `retry-after` or `anthropic-ratelimit-*-reset`).
    Headed(Vec<(String, String)>, Box<Reply>),
}

type Script = Box<dyn Fn(&Value) -> Reply + Send>;

/// The running stand-in.
pub struct AnthropicStandIn {
    server: Arc<tiny_http::Server>,
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<Script>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The text of the last user turn of a request (all text parts, tool results included).
pub fn last_user_text(req: &Value) -> String {
    let Some(msgs) = req["messages"].as_array() else {
        return String::new();
    };
    let Some(last) = msgs.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    flatten(&last["content"])
}

/// Every string inside a JSON value, joined by newlines.
pub fn flatten(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(flatten).collect::<Vec<_>>().join("\n"),
        Value::Object(o) => o.values().map(flatten).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// Whether the last user turn carries a tool result.
pub fn has_tool_result(req: &Value) -> bool {
    req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| {
            m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
        })
}

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
        .collect()
}

fn message_start(model: &str) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_standin","type":"message","role":"assistant","model":model,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}),
    )
}

fn text_events(text: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]
}

/// Tool-use ids handed out so far (each call gets its own, as from the real API: Claude Code
/// pairs a tool result with its call by id).
static TOOL_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn tool_events(name: &str, input: &Value) -> Vec<(&'static str, Value)> {
    let n = TOOL_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let id = format!("toolu_standin_{n}");
    vec![
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":input.to_string()}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]
}

/// A response body that yields `head`, waits up to `hold` for a release (or the end of the
/// stand-in), then yields `tail`.
pub struct HoldReader {
    head: Vec<u8>,
    tail: Vec<u8>,
    until: Instant,
    pos: usize,
    held: bool,
}

impl HoldReader {
    /// Yield `head`, then wait until `hold` has passed since now, then yield `tail` (the
    /// other stand-ins' streamed answers use it too).
    pub fn new(head: Vec<u8>, tail: Vec<u8>, hold: Duration) -> HoldReader {
        HoldReader {
            head,
            tail,
            until: Instant::now() + hold,
            pos: 0,
            held: false,
        }
    }
}

impl Read for HoldReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos < self.head.len() {
            let n = buf.len().min(self.head.len() - self.pos);
            buf[..n].copy_from_slice(&self.head[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        if !self.held {
            // Time is the thing tested: the model takes this long over its answer
            // (`Reply::Hold`), a turn that runs while the test acts.
            std::thread::sleep(self.until.saturating_duration_since(Instant::now()));
            self.held = true;
        }
        let off = self.pos - self.head.len();
        if off >= self.tail.len() {
            return Ok(0);
        }
        let n = buf.len().min(self.tail.len() - off);
        buf[..n].copy_from_slice(&self.tail[off..off + n]);
        self.pos += n;
        Ok(n)
    }
}

impl AnthropicStandIn {
    /// Wait (`timeout` at most) until the last user text of a main request (one that offers
    /// tools) contains `needle`: the model has it.
    pub fn wait_user_text(&self, env: &super::TestEnv, timeout: Duration, needle: &str) {
        env.wait_until(&format!("the model has {needle:?}"), timeout, |_| {
            self.main_requests()
                .iter()
                .any(|r| last_user_text(r).contains(needle))
        });
    }

    /// Run `<claude_bin> -p hi` in `cwd` against this stand-in with `home` as its HOME, a
    /// clean environment and `extra` variables, and wait for it (90 s at most; killed then).
    pub fn run_claude_print(
        &self,
        claude_bin: &str,
        home: &std::path::Path,
        cwd: &std::path::Path,
        extra: &[(&str, &str)],
    ) {
        let mut child = std::process::Command::new(claude_bin)
            .args(["-p", "hi"])
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", home)
            .env("PWD", cwd)
            .env("ANTHROPIC_BASE_URL", self.url())
            .env("ANTHROPIC_API_KEY", "sk-ant-standin-key")
            .env("IS_SANDBOX", "1")
            .envs(extra.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        super::exit_within(&mut child, Duration::from_secs(90));
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Start on 127.0.0.1 with a script that answers every model request with "ok".
    pub fn start() -> AnthropicStandIn {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind stand-in"));
        let port = server.server_addr().to_ip().expect("ip").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Mutex<Script>> =
            Arc::new(Mutex::new(Box::new(|_| Reply::Text("ok".into()))));
        let (srv, reqs, scr) = (server.clone(), requests.clone(), script.clone());
        let thread = std::thread::spawn(move || {
            // Bounded: ends when the server is unblocked at drop.
            for mut rq in srv.incoming_requests() {
                let mut body = String::new();
                let _ = rq.as_reader().read_to_string(&mut body);
                let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let path = rq.url().to_string();
                reqs.lock().unwrap().push(Recorded {
                    method: rq.method().to_string(),
                    path: path.clone(),
                    body: parsed.clone(),
                });
                let reply = if rq.method() == &tiny_http::Method::Post
                    && path.starts_with("/v1/messages")
                    && !path.contains("count_tokens")
                {
                    (scr.lock().unwrap())(&parsed)
                } else {
                    // Side endpoints (token counting, telemetry, feature flags): a harmless answer.
                    let r = tiny_http::Response::from_string("{\"input_tokens\":12}")
                        .with_header(header("content-type", "application/json"));
                    let _ = rq.respond(r);
                    continue;
                };
                std::thread::spawn(move || respond(rq, &parsed, reply));
            }
        });
        AnthropicStandIn {
            server,
            port,
            requests,
            script,
            thread: Some(thread),
        }
    }

    /// The base URL for `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Replace the answering script.
    pub fn script(&self, f: impl Fn(&Value) -> Reply + Send + 'static) {
        *self.script.lock().unwrap() = Box::new(f);
    }

    /// Model requests (POST /v1/messages, not token counting) recorded so far.
    pub fn model_requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| {
                r.method == "POST"
                    && r.path.starts_with("/v1/messages")
                    && !r.path.contains("count_tokens")
            })
            .map(|r| r.body.clone())
            .collect()
    }

    /// Main-loop requests (those that offer tools).
    pub fn main_requests(&self) -> Vec<Value> {
        self.model_requests()
            .into_iter()
            .filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .collect()
    }

    /// Whether a main-loop request's last user turn holds `needle`.
    pub fn has_main_request_with(&self, needle: &str) -> bool {
        self.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains(needle))
    }
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("header")
}

fn respond(rq: tiny_http::Request, req: &Value, reply: Reply) {
    let model = req["model"].as_str().unwrap_or("claude-standin");
    let stream = req["stream"] == json!(true);
    let (extra, reply) = match reply {
        Reply::Headed(h, inner) => (h, *inner),
        r => (Vec::new(), r),
    };
    let extra: Vec<tiny_http::Header> = extra.iter().map(|(k, v)| header(k, v)).collect();
    if let Reply::Error(code) = reply {
        // The error types the real API sends with these statuses.
        let kind = match code {
            401 => "authentication_error",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        let body =
            json!({"type":"error","error":{"type":kind,"message":"stand-in error"}}).to_string();
        let mut resp = tiny_http::Response::from_string(body)
            .with_status_code(code)
            .with_header(header("content-type", "application/json"));
        for h in extra {
            resp.add_header(h);
        }
        let _ = rq.respond(resp);
        return;
    }
    if !stream {
        let content = match &reply {
            Reply::ToolUse(name, input) => {
                let n = TOOL_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                json!([{"type":"tool_use","id":format!("toolu_standin_{n}"),"name":name,"input":input}])
            }
            Reply::Text(t) | Reply::Hold(_, t) => json!([{"type":"text","text":t}]),
            Reply::Error(_) | Reply::Headed(..) => unreachable!(),
        };
        let stop = if matches!(reply, Reply::ToolUse(..)) {
            "tool_use"
        } else {
            "end_turn"
        };
        let body = json!({"id":"msg_standin","type":"message","role":"assistant","model":model,"content":content,"stop_reason":stop,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":7}});
        let mut resp = tiny_http::Response::from_string(body.to_string())
            .with_header(header("content-type", "application/json"));
        for h in extra {
            resp.add_header(h);
        }
        let _ = rq.respond(resp);
        return;
    }
    let mut events = vec![message_start(model)];
    let (head, tail) = match &reply {
        Reply::Text(t) => {
            events.extend(text_events(t));
            (sse(&events), String::new())
        }
        Reply::ToolUse(name, input) => {
            events.extend(tool_events(name, input));
            (sse(&events), String::new())
        }
        Reply::Hold(_, t) => (sse(&events) + ": holding\n\n", sse(&text_events(t))),
        Reply::Error(_) | Reply::Headed(..) => unreachable!(),
    };
    let hold = match reply {
        Reply::Hold(d, _) => d,
        _ => Duration::ZERO,
    };
    let reader = HoldReader::new(head.into_bytes(), tail.into_bytes(), hold);
    let mut headers = vec![
        header("content-type", "text/event-stream"),
        header("cache-control", "no-cache"),
    ];
    headers.extend(extra);
    let resp = tiny_http::Response::new(200.into(), headers, reader, None, None);
    let _ = rq.respond(resp);
}

impl Drop for AnthropicStandIn {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
