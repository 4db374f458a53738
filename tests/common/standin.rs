//! What the Gemini and Chat Completions stand-ins share: a scripted HTTP server on 127.0.0.1
//! (a random port) that records every request and answers each on a thread of its own, and
//! the JSON and streamed (Server-Sent Events, optionally held) answers.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::anthropic::HoldReader;

/// One request as the server got it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The request's headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// When the server had read it.
    pub at: std::time::Instant,
}

impl Recorded {
    /// The value of header `name` (lower case), when sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What to answer to one model request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A text answer.
    Text(String),
    /// A call of a declared function: its name as the request declared it (an MCP tool's
    /// name as the CLI declared it) and its arguments.
    Call(String, Value),
    /// Stream a first chunk, hold the connection for this long, then finish with the text.
    Hold(Duration, String),
    /// An HTTP error status with the API's error body.
    Error(u16),
}

type Script<R> = Box<dyn Fn(&Value) -> R + Send>;

/// A scripted stand-in: `R` is its reply type.
pub struct Server<R> {
    server: Arc<tiny_http::Server>,
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<Script<R>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<R: Send + 'static> Server<R> {
    /// Start on 127.0.0.1 answering with `first` until [`Server::script`] replaces it. Each
    /// request is recorded, then `respond(request, recorded, reply)` runs on a thread of its
    /// own, with `reply` from the script.
    pub fn start(
        first: impl Fn(&Value) -> R + Send + 'static,
        respond: impl Fn(tiny_http::Request, Recorded, R) + Send + Sync + 'static,
    ) -> Server<R> {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind stand-in"));
        let port = server.server_addr().to_ip().expect("ip").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Mutex<Script<R>>> = Arc::new(Mutex::new(Box::new(first)));
        let respond = Arc::new(respond);
        let (srv, reqs, scr) = (server.clone(), requests.clone(), script.clone());
        let thread = std::thread::spawn(move || {
            for mut rq in srv.incoming_requests() {
                let mut body = String::new();
                let _ = rq.as_reader().read_to_string(&mut body);
                let rec = Recorded {
                    method: rq.method().to_string(),
                    path: rq.url().to_string(),
                    headers: rq
                        .headers()
                        .iter()
                        .map(|h| (h.field.to_string().to_lowercase(), h.value.to_string()))
                        .collect(),
                    body: serde_json::from_str(&body).unwrap_or(Value::Null),
                    at: std::time::Instant::now(),
                };
                reqs.lock().unwrap().push(rec.clone());
                let reply = (scr.lock().unwrap())(&rec.body);
                let respond = respond.clone();
                std::thread::spawn(move || respond(rq, rec, reply));
            }
        });
        Server {
            server,
            port,
            requests,
            script,
            thread: Some(thread),
        }
    }

    /// Replace the answering script.
    pub fn script(&self, f: impl Fn(&Value) -> R + Send + 'static) {
        *self.script.lock().unwrap() = Box::new(f);
    }

    /// Every request so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

impl<R> Drop for Server<R> {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("header")
}

/// Answer `status` with the JSON `body`.
pub fn json(rq: tiny_http::Request, status: u16, body: &Value) {
    let resp = tiny_http::Response::from_string(body.to_string())
        .with_status_code(status)
        .with_header(header("content-type", "application/json"));
    let _ = rq.respond(resp);
}

/// Answer with an event stream: `head`, then (after `hold`) `tail`.
pub fn stream(rq: tiny_http::Request, head: String, tail: String, hold: Duration) {
    let reader = HoldReader::new(head.into_bytes(), tail.into_bytes(), hold);
    let headers = vec![
        header("content-type", "text/event-stream"),
        header("cache-control", "no-cache"),
    ];
    let resp = tiny_http::Response::new(200.into(), headers, reader, None, None);
    let _ = rq.respond(resp);
}
