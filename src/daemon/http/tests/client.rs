//! Test support: a recording backend and a raw HTTP/1.1 client over `TcpStream`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use super::super::{gate, start, HttpConfig, HttpServerHandle};
use crate::daemon::mcp::{Backend, CallerCreds, SendArgs};

/// Records calls; optionally sleeps, optionally fails.
pub struct Rec {
    pub calls: Mutex<Vec<(CallerCreds, SendArgs)>>,
    pub entered: AtomicUsize,
    pub delay: Duration,
    pub fail: Option<String>,
}

impl Rec {
    pub fn new(delay_ms: u64, fail: Option<&str>) -> Arc<Rec> {
        Arc::new(Rec {
            calls: Mutex::new(Vec::new()),
            entered: AtomicUsize::new(0),
            delay: Duration::from_millis(delay_ms),
            fail: fail.map(str::to_owned),
        })
    }
    pub fn calls(&self) -> Vec<(CallerCreds, SendArgs)> {
        self.calls.lock().unwrap().clone()
    }
}

impl Backend for Rec {
    fn send_to_peer(&self, creds: CallerCreds, args: SendArgs) -> crate::daemon::mcp::SendOutcome {
        self.entered.fetch_add(1, Ordering::SeqCst);
        thread::sleep(self.delay);
        let to = args.to.clone();
        self.calls.lock().unwrap().push((creds, args));
        match &self.fail {
            Some(e) => Err(crate::protocol::Failure::new(
                crate::protocol::Code::Offline,
                e,
            )),
            None => Ok(serde_json::from_value(
                json!({"ok": true, "delivered_to": {"personality": to, "runtime": "claude"}, "woke": false, "ts": "2026-07-14T01:23:45+03:00"}),
            ).unwrap()),
        }
    }
}

/// [`Rec`] as the router behaves: [`Backend::submit`] returns at once and the outcome comes
/// later from another thread (here one per call, as the test's stand-in for the router).
struct Threaded(Arc<Rec>);

impl Backend for Threaded {
    fn send_to_peer(&self, creds: CallerCreds, args: SendArgs) -> crate::daemon::mcp::SendOutcome {
        self.0.send_to_peer(creds, args)
    }

    fn submit(
        &self,
        creds: CallerCreds,
        args: SendArgs,
        _gone: Arc<std::sync::atomic::AtomicBool>,
        done: crate::daemon::mcp::SendDone,
    ) {
        let rec = Arc::clone(&self.0);
        thread::spawn(move || done(rec.send_to_peer(creds, args)));
    }
}

/// A server on a free loopback port, answering through a recording backend: what each test
/// starts from. Dropping it shuts the server down.
pub struct Served {
    pub rec: Arc<Rec>,
    pub srv: HttpServerHandle,
    pub port: u16,
    /// `127.0.0.1:<port>`: the Host a local client sends.
    pub host: String,
}

impl Served {
    /// No bearer; a backend that answers at once.
    pub fn start() -> Served {
        Served::over(Rec::new(0, None))
    }

    /// No bearer; answering through `rec` (slow or failing).
    pub fn over(rec: Arc<Rec>) -> Served {
        Served::start_with(rec, HttpConfig::new(0, None))
    }

    /// `cfg`, answering through `rec` as the router does (the outcome from another thread).
    pub fn start_with(rec: Arc<Rec>, cfg: HttpConfig) -> Served {
        let backend: Arc<dyn Backend> = Arc::new(Threaded(Arc::clone(&rec)));
        let srv = start(cfg, backend, None).unwrap();
        let port = srv.port();
        Served {
            rec,
            srv,
            port,
            host: format!("127.0.0.1:{port}"),
        }
    }

    /// Raw bytes in, one answer out.
    pub fn send(&self, bytes: &[u8]) -> Resp {
        exchange(self.port, bytes)
    }

    /// A [`raw`] request.
    pub fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Resp {
        self.send(&raw(method, target, headers, body))
    }

    /// A bodiless request with only the Host header.
    pub fn bare(&self, method: &str, target: &str) -> Resp {
        self.request(method, target, &[("Host", &self.host)], "")
    }

    /// A normal MCP POST ([`mcp_post`]).
    pub fn post(&self, extra: &[(&str, &str)], body: &Value) -> Resp {
        mcp_post(self.port, extra, body)
    }

    /// A JSON-RPC `ping` numbered `id`.
    pub fn ping(&self, id: u64) -> Resp {
        self.post(&[], &json!({"jsonrpc":"2.0","id":id,"method":"ping"}))
    }
}

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        gate::first(&self.headers, name)
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// Send raw bytes, read one response (Content-Length framed).
pub fn exchange(port: u16, raw: &[u8]) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(raw).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let len: usize = gate::first(&headers, "content-length")
        .unwrap()
        .parse()
        .unwrap();
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    Resp {
        status,
        headers,
        body,
    }
}

/// A raw request: the given headers, plus Content-Length (when there is a body) and
/// `Connection: close`.
pub fn raw(method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut s = format!("{method} {target} HTTP/1.1\r\n");
    for (n, v) in headers {
        s.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() {
        s.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    s.push_str("Connection: close\r\n\r\n");
    s.push_str(body);
    s.into_bytes()
}

/// A normal MCP POST with extra headers.
pub fn mcp_post(port: u16, extra: &[(&str, &str)], body: &Value) -> Resp {
    let host = format!("127.0.0.1:{port}");
    let mut headers = vec![
        ("Host", host.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    headers.extend_from_slice(extra);
    exchange(port, &raw("POST", "/mcp", &headers, &body.to_string()))
}

pub fn send_call(id: u64, personality: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"send_to_peer","arguments":{"personality":personality,"message":"hello"}}})
}
