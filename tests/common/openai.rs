//! A stand-in for the OpenAI Responses API on 127.0.0.1 (a random port), for end-to-end tests
//! with the real Codex CLI. Like the Anthropic stand-in, it is the one mock these tests use
//! (the cloud API cannot run here): it records every request and answers from a script (but
//! Codex's title requests, which it answers itself: [`is_title_request`]), streaming Server-Sent Events (`response.created`, `response.output_item.added`,
//! `response.output_text.delta` / `response.function_call_arguments.*`,
//! `response.output_item.done`, `response.completed`). A reply can instead be an HTTP error
//! (status, JSON body, headers), and any reply can carry extra headers (Codex reads its rate
//! limits from `x-codex-*` response headers).

#![allow(dead_code)]

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// What to answer to one model request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A text answer.
    Text(String),
    /// A call of an MCP tool: namespace (e.g. `mcp__iapeer`), function name, arguments.
    Call(String, String, Value),
    /// A call of one of Codex's own tools (no namespace): function name, arguments.
    Function(String, Value),
    /// Stream the start, then hold the connection for at most this long.
    Hold(Duration),
    /// Refuse the request: this HTTP status, this JSON body and these extra headers (e.g.
    /// Codex's `x-codex-primary-used-percent` rate-limit headers).
    Error {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    /// Answer as the inner reply, with these extra response headers.
    Headed(Vec<(String, String)>, Box<Reply>),
}

impl Reply {
    /// A refusal with `status` and `body` and no extra headers.
    pub fn error(status: u16, body: Value) -> Reply {
        Reply::Error {
            status,
            body,
            headers: Vec::new(),
        }
    }
}

type Script = Box<dyn Fn(&Value) -> Reply + Send>;

/// The running stand-in.
pub struct OpenAiStandIn {
    server: Arc<tiny_http::Server>,
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Value>>>,
    script: Arc<Mutex<Script>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Every string of the request's `input`, joined.
pub fn input_text(req: &Value) -> String {
    super::anthropic::flatten(&req["input"])
}

/// The text of the last `input` item.
pub fn last_input_text(req: &Value) -> String {
    req["input"]
        .as_array()
        .and_then(|a| a.last())
        .map(super::anthropic::flatten)
        .unwrap_or_default()
}

/// Whether the last input item is a tool result.
pub fn last_is_tool_output(req: &Value) -> bool {
    req["input"]
        .as_array()
        .and_then(|a| a.last())
        .is_some_and(|i| i["type"] == "function_call_output")
}

/// The title the stand-in gives every title request ([`is_title_request`]).
pub const TITLE: &str = "Stand-in title";

/// Whether `req` is Codex's request for the thread's title, not a turn of the conversation:
/// Codex 0.171 makes one beside the first turn, in a thread of its own
/// (`client_metadata["x-codex-turn-metadata"]` says `"thread_source":"thread_title"`) that
/// offers no tools and asks for `{"title": …}` (`text.format`, a JSON schema). Its input
/// holds the user's message, so a script matching the message would answer it as the turn —
/// a tool call there is answered `unsupported call: mcp__iapeersend_to_peer` by Codex — so the
/// stand-in answers it itself, with [`TITLE`].
pub fn is_title_request(req: &Value) -> bool {
    req["client_metadata"]["x-codex-turn-metadata"]
        .as_str()
        .and_then(|m| serde_json::from_str::<Value>(m).ok())
        .is_some_and(|m| m["thread_source"] == "thread_title")
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("header")
}

fn events(model: &str, reply: &Reply) -> String {
    let usage = json!({"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15});
    let created = json!({"type":"response.created","response":{"id":"resp_standin","object":"response","status":"in_progress","model":model,"output":[]}});
    let mut evs: Vec<(String, Value)> = vec![("response.created".into(), created)];
    let item = match reply {
        Reply::Text(t) => {
            evs.push(("response.output_item.added".into(), json!({"type":"response.output_item.added","output_index":0,"item":{"id":"msg_standin","type":"message","status":"in_progress","role":"assistant","content":[]}})));
            evs.push(("response.output_text.delta".into(), json!({"type":"response.output_text.delta","item_id":"msg_standin","output_index":0,"content_index":0,"delta":t})));
            json!({"id":"msg_standin","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":t,"annotations":[]}]})
        }
        Reply::Call(..) | Reply::Function(..) => {
            let (ns, name, args) = match reply {
                Reply::Call(ns, name, args) => (Some(ns), name, args),
                Reply::Function(name, args) => (None, name, args),
                _ => unreachable!(),
            };
            let a = args.to_string();
            // Each call its own id: a conversation may hold several.
            static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let call_id = if n == 0 {
                "call_standin".to_string()
            } else {
                format!("call_standin_{n}")
            };
            let mut fc = json!({"type":"function_call","id":"fc_standin","call_id":call_id,"name":name,"arguments":a,"status":"completed"});
            if let Some(ns) = ns {
                fc["namespace"] = json!(ns);
            }
            let mut started = fc.clone();
            started["arguments"] = json!("");
            started["status"] = json!("in_progress");
            evs.push((
                "response.output_item.added".into(),
                json!({"type":"response.output_item.added","output_index":0,"item":started}),
            ));
            evs.push(("response.function_call_arguments.delta".into(), json!({"type":"response.function_call_arguments.delta","item_id":"fc_standin","output_index":0,"delta":a})));
            evs.push(("response.function_call_arguments.done".into(), json!({"type":"response.function_call_arguments.done","item_id":"fc_standin","output_index":0,"arguments":a})));
            fc
        }
        Reply::Error { .. } | Reply::Headed(..) => unreachable!("answered before streaming"),
        Reply::Hold(_) => {
            return evs
                .iter()
                .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
                .collect()
        }
    };
    evs.push((
        "response.output_item.done".into(),
        json!({"type":"response.output_item.done","output_index":0,"item":item}),
    ));
    evs.push(("response.completed".into(), json!({"type":"response.completed","response":{"id":"resp_standin","object":"response","status":"completed","model":model,"output":[item],"usage":usage}})));
    evs.iter()
        .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
        .collect()
}

/// A body that yields its bytes, then (for a hold) blocks for a while before ending.
struct Held {
    bytes: Vec<u8>,
    pos: usize,
    hold: Duration,
}

impl Read for Held {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos < self.bytes.len() {
            let n = buf.len().min(self.bytes.len() - self.pos);
            buf[..n].copy_from_slice(&self.bytes[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        if !self.hold.is_zero() {
            // Time is the thing tested: the model takes this long over its answer
            // (`Reply::Hold`), a turn that runs while the test acts.
            std::thread::sleep(std::mem::take(&mut self.hold));
        }
        Ok(0)
    }
}

impl OpenAiStandIn {
    /// Start on 127.0.0.1 answering every request with "ok".
    pub fn start() -> OpenAiStandIn {
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
                if rq.method() != &tiny_http::Method::Post || !rq.url().contains("/responses") {
                    let _ = rq.respond(
                        tiny_http::Response::from_string("{}")
                            .with_header(header("content-type", "application/json")),
                    );
                    continue;
                }
                reqs.lock().unwrap().push(parsed.clone());
                let reply = match is_title_request(&parsed) {
                    true => Reply::Text(json!({"title": TITLE}).to_string()),
                    false => (scr.lock().unwrap())(&parsed),
                };
                std::thread::spawn(move || {
                    let (extra, reply) = match reply {
                        Reply::Headed(h, inner) => (h, *inner),
                        r => (Vec::new(), r),
                    };
                    if let Reply::Error {
                        status,
                        body,
                        headers,
                    } = reply
                    {
                        let mut resp = tiny_http::Response::from_string(body.to_string())
                            .with_status_code(status)
                            .with_header(header("content-type", "application/json"));
                        for (k, v) in extra.iter().chain(&headers) {
                            resp.add_header(header(k, v));
                        }
                        let _ = rq.respond(resp);
                        return;
                    }
                    let model = parsed["model"]
                        .as_str()
                        .unwrap_or("gpt-standin")
                        .to_string();
                    let hold = if let Reply::Hold(d) = reply {
                        d
                    } else {
                        Duration::ZERO
                    };
                    let body = Held {
                        bytes: events(&model, &reply).into_bytes(),
                        pos: 0,
                        hold,
                    };
                    let mut headers = vec![header("content-type", "text/event-stream")];
                    headers.extend(extra.iter().map(|(k, v)| header(k, v)));
                    let resp = tiny_http::Response::new(200.into(), headers, body, None, None);
                    let _ = rq.respond(resp);
                });
            }
        });
        OpenAiStandIn {
            server,
            port,
            requests,
            script,
            thread: Some(thread),
        }
    }

    /// The `base_url` for a Codex model provider.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Write `<codex_home>/config.toml` naming this stand-in as the model provider
    /// (`standin`, model `gpt-5.1`, key from `STANDIN_API_KEY`): `top` (TOML lines) before the
    /// tables, `tables` (lines in the provider's block, or further tables) after its block.
    pub fn write_codex_config(&self, codex_home: &std::path::Path, top: &str, tables: &str) {
        std::fs::create_dir_all(codex_home).unwrap();
        std::fs::write(
            codex_home.join("config.toml"),
            format!(
                "model = \"gpt-5.1\"\nmodel_provider = \"standin\"\n{top}\n[model_providers.standin]\nname = \"Stand-in\"\nbase_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"STANDIN_API_KEY\"\n{tables}",
                self.base_url()
            ),
        )
        .unwrap();
    }

    /// Run `codex exec <prompt>` (non-interactive) in `cwd` with `home` as `HOME` and
    /// `home/.codex` as `CODEX_HOME`, whose `config.toml` names this stand-in as the model
    /// provider with `provider_extra` (TOML lines, e.g. `request_max_retries = 0`) in its
    /// block; waits for it to end (at most 90 s).
    pub fn run_codex_exec(
        &self,
        codex_bin: &str,
        home: &std::path::Path,
        cwd: &std::path::Path,
        prompt: &str,
        provider_extra: &str,
    ) {
        let codex_home = home.join(".codex");
        self.write_codex_config(&codex_home, "", &format!("{provider_extra}\n"));
        let mut child = std::process::Command::new(codex_bin)
            .args(["exec", "--skip-git-repo-check", prompt])
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", home)
            .env("CODEX_HOME", &codex_home)
            .env("STANDIN_API_KEY", "sk-standin-key")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        super::exit_within(&mut child, Duration::from_secs(90));
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Replace the answering script.
    pub fn script(&self, f: impl Fn(&Value) -> Reply + Send + 'static) {
        *self.script.lock().unwrap() = Box::new(f);
    }

    /// Requests recorded so far.
    pub fn recorded(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// Whether a recorded request's last input text holds `needle`.
    pub fn has_request_with(&self, needle: &str) -> bool {
        self.recorded()
            .iter()
            .any(|r| last_input_text(r).contains(needle))
    }
}

impl Drop for OpenAiStandIn {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
