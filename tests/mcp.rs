//! MCP over loopback HTTP against the real daemon (spec 02 §3–§4, spec 12 layer 3): every
//! transport error path with raw HTTP, caller authentication through the router, the official
//! MCP Python SDK as a real client, 200 concurrent calls, and an absurd Content-Length.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::TestEnv;
use serde_json::{json, Value};

const UNAUTHORIZED: &str =
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"unauthorized"}}"#;
const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

/// Two echo peers, alice and bob, and a daemon started with `env_vars`.
fn daemon(env_vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in env_vars {
        env.set(k, v);
    }
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    env
}

pub(crate) struct Resp {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    /// The JSON body; of an event stream (a send held past `HOLD_AS_EVENTS_AFTER`), its one
    /// `event: message`'s data.
    pub(crate) fn json(&self) -> Value {
        let text = String::from_utf8_lossy(&self.body);
        let data = if self.header("content-type") == Some("text/event-stream") {
            let mut data = text.lines().filter_map(|l| l.strip_prefix("data: "));
            data.next_back()
                .unwrap_or_else(|| panic!("no event data: {text:?}"))
                .to_owned()
        } else {
            text.into_owned()
        };
        serde_json::from_str(&data)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

/// Send raw bytes on a fresh connection and read one response, framed by its Content-Length
/// (to EOF when it has none).
fn exchange(port: u16, raw: &[u8]) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(180))).unwrap();
    s.write_all(raw).expect("send request");
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).expect("header line");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').expect("header");
        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let mut body = Vec::new();
    match headers.iter().find(|(n, _)| n == "content-length") {
        Some((_, len)) => {
            body.resize(len.parse().unwrap(), 0);
            r.read_exact(&mut body).expect("body");
        }
        None => {
            r.read_to_end(&mut body).expect("body");
        }
    }
    Resp {
        status,
        headers,
        body,
    }
}

/// A request with the given headers, Content-Length when there is a body, `Connection: close`.
fn raw(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut s = format!("{method} {target} HTTP/1.1\r\n");
    for (n, v) in headers {
        s.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() {
        s.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    s.push_str("Connection: close\r\n\r\n");
    let mut out = s.into_bytes();
    out.extend_from_slice(body);
    out
}

/// POST /mcp with the usual headers plus `extra`.
pub(crate) fn post(port: u16, extra: &[(&str, &str)], body: &str) -> Resp {
    let host = format!("127.0.0.1:{port}");
    let mut headers = vec![
        ("Host", host.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    headers.extend_from_slice(extra);
    exchange(port, &raw("POST", "/mcp", &headers, body.as_bytes()))
}

/// `tools/call send_to_peer` with `extra` headers; returns the JSON-RPC `result`.
pub(crate) fn call(port: u16, extra: &[(&str, &str)], to: &str, message: &str) -> Value {
    call_args(port, extra, json!({"personality":to,"message":message}))
}

/// [`call`] with the tool's whole `arguments` object.
pub(crate) fn call_args(port: u16, extra: &[(&str, &str)], arguments: Value) -> Value {
    let body = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send_to_peer","arguments":arguments}});
    let r = post(port, extra, &body.to_string());
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v["id"], 7);
    v["result"].clone()
}

/// The text of a tool error (panics when the result is not one).
pub(crate) fn tool_error(result: &Value) -> String {
    assert_eq!(result["isError"], true, "expected a tool error: {result}");
    result["content"][0]["text"].as_str().unwrap().to_owned()
}

/// One control-socket request; returns the final line (progress lines are skipped).
fn control(env: &TestEnv, request: Value) -> Value {
    let mut s = UnixStream::connect(env.socket()).expect("control socket");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    writeln!(s, "{request}").unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "control socket closed");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v.get("ok").is_some() {
            return v;
        }
    }
}

/// Wake `echo-<p>` and return its live session token, read from the session's environment.
pub(crate) fn wake_and_token(env: &TestEnv, personality: &str) -> String {
    let v = control(env, json!({"op":"wake","personality":personality}));
    assert_eq!(
        v["ok"],
        true,
        "wake {personality}: {v}\n{}",
        env.diagnostics()
    );
    let marker = env.marker(&format!("echo-{personality}"), ".session");
    env.wait_until("the session marker", Duration::from_secs(10), |_| {
        marker.exists()
    });
    let record: Value = serde_json::from_str(&common::read(&marker)).unwrap();
    let pid = record["pid"].as_u64().expect("pid in the session marker");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("session environ");
    environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"IAPEER_TOKEN="))
        .map(|t| String::from_utf8(t.to_vec()).unwrap())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| panic!("no IAPEER_TOKEN in the environment of pid {pid}"))
}

/// The daemon still serves both the control socket and MCP.
fn assert_daemon_answers(env: &TestEnv) {
    let v = control(env, json!({"op":"ping"}));
    assert_eq!(v["ok"], true, "control ping: {v}");
    let init = json!({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}});
    let r = post(env.port(), &[], &init.to_string());
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["result"]["serverInfo"]["name"], "iapeer");
}

/// `delivery.log` lines of MCP sends from `caller` to `to` that succeeded.
fn mcp_deliveries(env: &TestEnv, caller: &str, to: &str) -> usize {
    env.events("delivery", "delivery")
        .iter()
        .filter(|d| d["path"] == "mcp" && d["caller"] == caller && d["to"] == to)
        .filter(|d| d["ok"] == "true")
        .count()
}

#[test]
fn transport_error_paths() {
    let env = daemon(&[]);
    let port = env.port();
    let host = format!("127.0.0.1:{port}");
    let (h, ct) = (
        ("Host", host.as_str()),
        ("Content-Type", "application/json"),
    );

    let r = post(port, &[], "{not json");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32700))
    );

    let batch = r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"nope"}]"#;
    let v = post(port, &[], batch).json();
    let answers = v.as_array().expect("a batch is answered with an array");
    assert_eq!(answers.len(), 2, "{v}");
    assert_eq!(
        (answers[0]["id"].clone(), answers[0]["result"].clone()),
        (json!("a"), json!({}))
    );
    assert_eq!(answers[1]["error"]["code"], -32601);

    let r = post(
        port,
        &[],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!((r.status, r.body.len()), (202, 0));

    let r = exchange(
        port,
        &raw(
            "POST",
            "/mcp",
            &[h, ("Content-Type", "text/plain")],
            PING.as_bytes(),
        ),
    );
    assert_eq!(r.status, 415);

    let r = exchange(
        port,
        &raw(
            "POST",
            "/mcp",
            &[("Host", "attacker.example:80"), ct],
            PING.as_bytes(),
        ),
    );
    assert_eq!(r.status, 403);
    let r = exchange(
        port,
        &raw(
            "POST",
            "/mcp",
            &[h, ct, ("Origin", "https://attacker.example")],
            PING.as_bytes(),
        ),
    );
    assert_eq!(r.status, 403);
    assert!(r.header("access-control-allow-origin").is_none());

    // Over the 1 MiB limit, declared (and actually sent: the daemon drains it) ...
    let big = vec![b' '; (1 << 20) + 1];
    let r = exchange(port, &raw("POST", "/mcp", &[h, ct], &big));
    assert_eq!(r.status, 413);
    // A chunked body is refused from the head (501, "send a Content-Length"): the server reads
    // bodies by their declared length only, so their size is known before any is read.
    let mut chunked = format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n", big.len()).into_bytes();
    chunked.extend_from_slice(&big);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let r = exchange(port, &chunked);
    assert_eq!(r.status, 501);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("Content-Length"),
        "{:?}",
        r.json()
    );

    for method in ["GET", "DELETE"] {
        let r = exchange(port, &raw(method, "/mcp", &[h], b""));
        assert_eq!(r.status, 405, "{method}");
    }
    let r = exchange(port, &raw("GET", "/nowhere", &[h], b""));
    assert_eq!((r.status, r.json()), (404, json!({"error":"not found"})));

    // None of that reached the router.
    assert!(env.events("delivery", "delivery").is_empty());
    assert_daemon_answers(&env);
}

#[test]
fn bearer_gate_and_session_token_in_its_own_header() {
    let env = daemon(&[("IAPEER_BEARER_TOKEN", "gate-s3cret")]);
    let port = env.port();
    for auth in [None, Some("Bearer wrong"), Some("Basic gate-s3cret")] {
        let extra: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let r = post(port, &extra, PING);
        assert_eq!(r.status, 401, "{auth:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert_eq!(String::from_utf8_lossy(&r.body), UNAUTHORIZED);
    }
    let gate = ("Authorization", "Bearer gate-s3cret");
    assert_eq!(post(port, &[gate], PING).json()["result"], json!({}));

    let token = wake_and_token(&env, "alice");
    let me = ("X-IAPeer-Identity", "echo-alice");
    // With a gate, the session token is only read from X-IAPeer-Token.
    let text = tool_error(&call(port, &[gate, me], "bob", "echo: one"));
    assert_eq!(text, "session token missing or not valid for echo-alice");
    let result = call(
        port,
        &[gate, me, ("X-IAPeer-Token", &token)],
        "bob",
        "echo: two",
    );
    assert_eq!(result["structuredContent"]["ok"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["delivered_to"]["personality"],
        "bob"
    );
    assert_eq!(mcp_deliveries(&env, "echo-alice", "bob"), 1);
}

#[test]
fn caller_authentication_through_the_router() {
    let env = daemon(&[]);
    let port = env.port();
    let alice = wake_and_token(&env, "alice");
    let bob = wake_and_token(&env, "bob");
    assert_ne!(alice, bob);
    let me = ("X-IAPeer-Identity", "echo-alice");
    let with = |t: &str| format!("Bearer {t}");

    let cases: Vec<(Vec<(&str, String)>, String)> = vec![
        (
            vec![("Authorization", with(&alice))],
            "missing or malformed x-iapeer-identity header — expected \"<runtime>-<personality>\""
                .into(),
        ),
        (
            vec![("X-IAPeer-Identity", "alice".into())],
            "missing or malformed x-iapeer-identity header — expected \"<runtime>-<personality>\""
                .into(),
        ),
        (
            vec![("X-IAPeer-Identity", "echo-zed".into())],
            "unknown caller \"zed\" — not registered".into(),
        ),
        (
            vec![
                ("X-IAPeer-Identity", "claude-alice".into()),
                ("Authorization", with(&alice)),
            ],
            "runtime \"claude\" is not declared for caller \"alice\"".into(),
        ),
        (
            vec![(me.0, me.1.into())],
            "session token missing or not valid for echo-alice".into(),
        ),
        (
            vec![
                (me.0, me.1.into()),
                ("Authorization", with("0123456789abcdef")),
            ],
            "session token missing or not valid for echo-alice".into(),
        ),
        // Another live session's token does not make its holder alice.
        (
            vec![(me.0, me.1.into()), ("Authorization", with(&bob))],
            "session token missing or not valid for echo-alice".into(),
        ),
    ];
    for (headers, expected) in &cases {
        let extra: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        assert_eq!(
            &tool_error(&call(port, &extra, "bob", "echo: refused")),
            expected,
            "{headers:?}"
        );
    }
    assert!(!env.pane("echo-bob").contains("echo: refused"));

    let result = call(
        port,
        &[me, ("Authorization", &with(&alice))],
        "bob",
        "echo: accepted",
    );
    let structured = &result["structuredContent"];
    assert_eq!(structured["ok"], true, "{result}");
    assert_eq!(
        structured["delivered_to"],
        json!({"personality":"bob","runtime":"echo"})
    );
    assert_eq!(structured["woke"], false);
    assert!(result.get("isError").is_none_or(|e| e == false));
    // The text content is the same object, pretty-printed.
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, structured);
    assert!(
        env.pane("echo-bob").contains("from alice: echo: accepted"),
        "{}",
        env.diagnostics()
    );
    assert_eq!(mcp_deliveries(&env, "echo-alice", "bob"), 1);
    // Each refusal is logged as a failed attempt (spec 03 §1 step 10).
    let failed = env
        .events("delivery", "delivery")
        .iter()
        .filter(|d| d["path"] == "mcp" && d["ok"] == "false")
        .count();
    assert_eq!(failed, cases.len(), "{}", env.log("delivery"));
}

#[test]
fn header_mode_trusts_the_identity_header() {
    let env = daemon(&[("IAPEER_MCP_AUTH", "header")]);
    let result = call(
        env.port(),
        &[("X-IAPeer-Identity", "echo-alice")],
        "bob",
        "echo: trusted",
    );
    assert_eq!(
        result["structuredContent"]["ok"],
        true,
        "{result}\n{}",
        env.diagnostics()
    );
    assert_eq!(result["structuredContent"]["woke"], true);
    assert_eq!(mcp_deliveries(&env, "echo-alice", "bob"), 1);
    // The header must still name a registered peer.
    let text = tool_error(&call(
        env.port(),
        &[("X-IAPeer-Identity", "echo-zed")],
        "bob",
        "x",
    ));
    assert_eq!(text, "unknown caller \"zed\" — not registered");
}

/// A routed send's failure reaches the MCP caller with its code, as the control socket gives
/// it (`structuredContent: {"ok":false,"code":…,"error":…}`), the text unchanged.
#[test]
fn a_send_failure_keeps_its_code() {
    let env = daemon(&[("IAPEER_MCP_AUTH", "header")]);
    let result = call(
        env.port(),
        &[("X-IAPeer-Identity", "echo-alice")],
        "carol",
        "hi",
    );
    let text = tool_error(&result);
    assert_eq!(
        text,
        "peer \"carol\" is not in the iapeer peers index; message NOT delivered"
    );
    assert_eq!(
        result["structuredContent"],
        json!({"ok": false, "code": "not-registered", "error": text}),
        "{result}\n{}",
        env.diagnostics()
    );
}

/// The lines of one answer read as they come (CRLF trimmed), each with the time since the
/// request was sent: status line, headers, blank line, then the body's lines to EOF.
fn timed_lines(port: u16, accept: &str, body: &str) -> Vec<(Duration, String)> {
    let host = format!("127.0.0.1:{port}");
    let headers = [
        ("Host", host.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", accept),
        ("X-IAPeer-Identity", "echo-alice"),
    ];
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(180))).unwrap();
    let sent = Instant::now();
    s.write_all(&raw("POST", "/mcp", &headers, body.as_bytes()))
        .expect("send request");
    let mut r = BufReader::new(s);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).expect("read the answer") == 0 {
            return lines;
        }
        let line = line.trim_end_matches(['\r', '\n']).to_owned();
        lines.push((sent.elapsed(), line));
    }
}

/// Issue 27: a `tools/call` whose send wakes a slow peer (echo with a 20 s boot) is answered,
/// for a client that takes `text/event-stream`, as an event stream whose head comes within
/// `HOLD_AS_EVENTS_AFTER` (3 s) and a margin, with a `: keep-alive` comment at once and every
/// 15 s, and the result as its one `event: message`; a client that takes JSON only waits for
/// the whole JSON answer, as before. A send to an awake peer is answered JSON at once.
#[test]
fn a_slow_send_is_answered_as_an_event_stream_with_keep_alives() {
    const HOLD: Duration = Duration::from_secs(3);
    const BOOT_MS: u64 = 20_000;
    let mut env = TestEnv::new();
    env.set("IAPEER_MCP_AUTH", "header");
    for p in ["alice", "bob", "carol"] {
        env.create_echo(p);
    }
    for p in ["bob", "carol"] {
        env.launch_env(
            p,
            "echo",
            &format!("PEER_START_ARGS=--boot-delay-ms {BOOT_MS}\n"),
        );
    }
    env.start_daemon();
    let port = env.port();
    let body = |to: &str| {
        json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"send_to_peer",
               "arguments":{"personality":to,"message":format!("slow wake of {to}")}}})
        .to_string()
    };
    let (sse_body, json_body) = (body("bob"), body("carol"));
    let sse = std::thread::spawn(move || {
        timed_lines(port, "application/json, text/event-stream", &sse_body)
    });
    let plain = std::thread::spawn(move || timed_lines(port, "application/json", &json_body));
    let (sse, plain) = (sse.join().unwrap(), plain.join().unwrap());
    let show = |l: &[(Duration, String)]| format!("{l:?}\n{}", env.diagnostics());

    // The event stream: its head early, comments, the result last.
    let (head_at, status) = &sse[0];
    assert_eq!(status, "HTTP/1.1 200 OK", "{}", show(&sse));
    assert!(
        *head_at >= HOLD && *head_at < HOLD + Duration::from_secs(3),
        "the head came at {head_at:?}: {}",
        show(&sse)
    );
    let blank = sse
        .iter()
        .position(|(_, l)| l.is_empty())
        .expect("end of head");
    let head: Vec<String> = sse[1..blank]
        .iter()
        .map(|(_, l)| l.to_ascii_lowercase())
        .collect();
    assert!(
        head.contains(&"content-type: text/event-stream".to_owned()),
        "{head:?}"
    );
    assert!(head.contains(&"connection: close".to_owned()), "{head:?}");
    assert!(
        !head.iter().any(|h| h.starts_with("content-length")),
        "{head:?}"
    );
    let stream = &sse[blank + 1..];
    let beats: Vec<Duration> = stream
        .iter()
        .filter(|(_, l)| l == ": keep-alive")
        .map(|(t, _)| *t)
        .collect();
    let (done_at, data) = stream
        .iter()
        .find_map(|(t, l)| l.strip_prefix("data: ").map(|d| (*t, d)))
        .unwrap_or_else(|| panic!("no data line: {}", show(&sse)));
    assert!(
        done_at >= Duration::from_millis(BOOT_MS),
        "answered before the boot ended ({done_at:?}): {}",
        show(&sse)
    );
    assert!(beats[0] < HOLD + Duration::from_secs(3), "{}", show(&sse));
    // One at the head, then one every 15 s until the answer.
    let expected = 1 + (done_at - beats[0]).as_secs() / 15;
    assert!(
        expected >= 2 && (expected..=expected + 1).contains(&(beats.len() as u64)),
        "{} comments in {done_at:?}: {}",
        beats.len(),
        show(&sse)
    );
    for gap in beats.windows(2).map(|w| w[1] - w[0]) {
        assert!(gap >= Duration::from_secs(14), "{gap:?}: {}", show(&sse));
    }
    let event = stream
        .iter()
        .position(|(_, l)| l == "event: message")
        .unwrap();
    assert!(stream[event + 1].1.starts_with("data: "), "{}", show(&sse));
    assert_eq!(
        stream
            .iter()
            .filter(|(_, l)| l.starts_with("data: "))
            .count(),
        1,
        "{}",
        show(&sse)
    );
    let v: Value = serde_json::from_str(data).unwrap();
    assert_eq!(v["id"], 9);
    let sc = &v["result"]["structuredContent"];
    assert_eq!(
        (sc["ok"].clone(), sc["woke"].clone()),
        (json!(true), json!(true)),
        "{v}"
    );
    assert_eq!(sc["delivered_to"]["personality"], "bob", "{v}");

    // The JSON-only client: nothing before the whole answer.
    let (status_at, status) = &plain[0];
    assert_eq!(status, "HTTP/1.1 200 OK", "{}", show(&plain));
    assert!(
        *status_at >= Duration::from_millis(BOOT_MS),
        "{status_at:?}: {}",
        show(&plain)
    );
    let blank = plain.iter().position(|(_, l)| l.is_empty()).unwrap();
    assert!(
        plain[1..blank]
            .iter()
            .any(|(_, l)| l.eq_ignore_ascii_case("content-type: application/json")),
        "{}",
        show(&plain)
    );
    let v: Value = serde_json::from_str(&plain[blank + 1].1).unwrap();
    assert_eq!(v["result"]["structuredContent"]["ok"], true, "{v}");
    assert_eq!(
        v["result"]["structuredContent"]["delivered_to"]["personality"],
        "carol"
    );

    // bob is awake now: a quick send is answered JSON at once, as always.
    let r = post(port, &[("X-IAPeer-Identity", "echo-alice")], &body("bob"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.header("content-length").is_some());
    assert_eq!(r.json()["result"]["structuredContent"]["ok"], true);
}

/// Run scripts/mcp_client.py (the official MCP Python SDK) as echo-alice against `env`'s
/// daemon, sending `message` to bob on topic "sdk" after connecting in `mode` (legacy: the
/// `initialize` handshake; auto: the `server/discover` probe first); its JSON output.
fn python_sdk_send(env: &TestEnv, token: &str, mode: &str, message: &str) -> Value {
    let python = std::env::var("IAPEER_TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "IAPEER_TEST_PYTHON is not set: this test drives the daemon with the official MCP \
             Python SDK. Run scripts/test.sh (it creates .cache/venv with the `mcp` package and \
             exports IAPEER_TEST_PYTHON), or run scripts/setup-python.sh and set \
             IAPEER_TEST_PYTHON=$PWD/.cache/venv/bin/python"
        )
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/mcp_client.py");
    let out = Command::new(&python)
        .arg(script)
        .args(["--url", &env.mcp_url(), "--identity", "echo-alice"])
        .args(["--token", token, "--mode", mode])
        .args(["--to", "bob", "--message", message, "--topic", "sdk"])
        .env_remove("IAPEER_BEARER_TOKEN")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(
        out.status.success(),
        "{}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
    serde_json::from_slice(&out.stdout).expect("the client prints JSON")
}

/// The SDK's `send_to_peer` listing and call result, as the daemon must give them in either
/// protocol era: the spec tool, and `message` delivered to bob's live session (`woke` as
/// expected), logged as an MCP delivery from echo-alice.
fn check_sdk_listing_and_delivery(env: &TestEnv, v: &Value, message: &str, woke: bool) {
    let tools = v["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{}", v["tools"]);
    assert_eq!(tools[0]["name"], "send_to_peer");
    let schema = &tools[0]["inputSchema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["required"], json!(["personality", "message"]));
    for field in ["personality", "runtime", "message", "topic", "attachments"] {
        assert!(schema["properties"][field].is_object(), "{field}: {schema}");
    }
    assert_eq!(schema["properties"]["message"]["maxLength"], 16000);

    let call = &v["call"];
    assert_ne!(call["isError"], true, "{call}");
    let sc = &call["structuredContent"];
    assert_eq!(
        (sc["ok"].clone(), sc["woke"].clone()),
        (json!(true), json!(woke)),
        "{call}"
    );
    assert_eq!(
        sc["delivered_to"],
        json!({"personality":"bob","runtime":"echo"})
    );
    assert!(
        env.pane("echo-bob")
            .contains(&format!("from alice: {message}")),
        "{}",
        env.diagnostics()
    );
    let d = env.events("delivery", "delivery");
    let line = d
        .iter()
        .rev()
        .find(|d| d["to"] == "bob")
        .expect("a delivery line");
    assert_eq!(
        (line["path"].as_str(), line["caller"].as_str()),
        ("mcp", "echo-alice")
    );
    assert_eq!(
        (line["ok"].as_str(), line["topic"].as_str()),
        ("true", "sdk")
    );
}

#[test]
fn official_python_sdk_as_a_client() {
    let env = daemon(&[]);
    let token = wake_and_token(&env, "alice");
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    let v = python_sdk_send(&env, &token, "legacy", "hello from the python sdk");
    assert_eq!(v["protocolVersion"], "2025-11-25", "{v}");
    assert_eq!(v["initialize"]["serverInfo"]["name"], "iapeer");
    assert_eq!(v["initialize"]["capabilities"]["tools"], json!({}));
    check_sdk_listing_and_delivery(&env, &v, "hello from the python sdk", true);
}

/// Issue 27: the official SDK's `send_to_peer` whose send wakes a slow peer (echo with a
/// 6 s boot) is answered as an event stream (the daemon says so in its log) and the SDK
/// reads the result from it.
#[test]
fn official_python_sdk_reads_a_slow_send_s_event_stream_answer() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.launch_env("bob", "echo", "PEER_START_ARGS=--boot-delay-ms 6000\n");
    env.start_daemon();
    let token = wake_and_token(&env, "alice");
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    let started = Instant::now();
    let v = python_sdk_send(&env, &token, "legacy", "a slow wake through the sdk");
    assert!(started.elapsed() >= Duration::from_secs(6), "{v}");
    check_sdk_listing_and_delivery(&env, &v, "a slow wake through the sdk", true);
    assert!(
        env.log("daemon")
            .contains("answer goes on as an event stream"),
        "the answer was not held as an event stream\n{}",
        env.diagnostics()
    );
}

/// MCP revision 2026-07-28 (what Claude Code 2.1.332 probes for first): the
/// official SDK's `mode="auto"` connect finds a modern server in `server/discover`, adopts
/// 2026-07-28 without the handshake, and lists and calls the tool per request; the SDK
/// validates every modern result (resultType, the listing's ttlMs and cacheScope).
#[test]
fn official_python_sdk_connects_in_the_2026_protocol() {
    let env = daemon(&[]);
    let token = wake_and_token(&env, "alice");
    let v = python_sdk_send(&env, &token, "auto", "hello in the 2026 protocol");
    // The SDK adopted the modern era from the discover result (it checks every modern
    // tools/list and tools/call result strictly: resultType, ttlMs, cacheScope).
    assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
    let discover = &v["discover"];
    assert_eq!(discover["supportedVersions"][0], "2026-07-28", "{discover}");
    assert!(
        discover["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25")),
        "{discover}"
    );
    assert_eq!(discover["capabilities"]["tools"], json!({}));
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "iapeer"
    );
    check_sdk_listing_and_delivery(&env, &v, "hello in the 2026 protocol", true);
    // A second connection in the same era reaches the now-live session without a wake.
    let again = python_sdk_send(&env, &token, "auto", "and once more");
    assert_eq!(again["protocolVersion"], "2026-07-28");
    check_sdk_listing_and_delivery(&env, &again, "and once more", false);

    // Over the real HTTP path: the discover result as sent, and the modern refusals.
    let port = env.port();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let modern = |method: &str, name: Option<&str>, params: Value| {
        let mut params = params;
        params["_meta"] = meta.clone();
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        let mut headers = vec![
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
            ("X-IAPeer-Identity", "echo-alice"),
        ];
        headers.extend(name.map(|n| ("Mcp-Name", n)));
        let bearer = format!("Bearer {token}");
        headers.push(("Authorization", &bearer));
        post(port, &headers, &body.to_string())
    };
    let r = modern("server/discover", None, json!({}));
    let d = r.json();
    assert_eq!(r.status, 200, "{d}");
    assert_eq!(
        (
            &d["result"]["resultType"],
            &d["result"]["ttlMs"],
            &d["result"]["cacheScope"]
        ),
        (&json!("complete"), &json!(0), &json!("private")),
        "{d}"
    );
    let call = json!({"name": "send_to_peer",
                      "arguments": {"personality": "bob", "message": "never sent"}});
    let r = modern("tools/call", Some("other_tool"), call);
    assert_eq!(
        (r.status, &r.json()["error"]["code"]),
        (400, &json!(-32020))
    );
    let r = modern("subscriptions/listen", None, json!({}));
    assert_eq!(
        (r.status, &r.json()["error"]["code"]),
        (404, &json!(-32601))
    );
    assert!(
        !env.pane("echo-bob").contains("never sent"),
        "a refused call was delivered"
    );
}

/// Threads of process `pid` right now.
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// Issue 13 item 3: 1 000 concurrent `tools/call` from 1 000 connections to 20 live echo
/// peers are all delivered (none refused for capacity), while the daemon's threads stay
/// within a fixed bound (no thread per connection or per send).
#[test]
fn a_thousand_concurrent_calls_to_twenty_live_peers_are_all_delivered() {
    const PEERS: usize = 20;
    const CALLS: usize = 1000;
    let mut env = TestEnv::new();
    env.create_echo("alice");
    for p in 0..PEERS {
        env.create_echo(&format!("p{p}"));
    }
    env.start_daemon();
    let port = env.port();
    let daemon = env.daemon.as_ref().unwrap().id();
    let token = wake_and_token(&env, "alice");
    for p in 0..PEERS {
        wake_and_token(&env, &format!("p{p}"));
    }
    // Launch helpers end with their launch, on their own after they report: the count at
    // rest is the one that has stood still for a second.
    let at_rest = common::settled(Duration::from_secs(20), Duration::from_secs(1), || {
        threads(daemon)
    });

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut most = 0;
            // Time is the thing tested: the thread count sampled every 20 ms until the calls
            // are answered (each worker's own wait bounds that).
            common::poll_every(Duration::from_millis(20), Duration::from_secs(600), || {
                most = most.max(threads(daemon));
                stop.load(std::sync::atomic::Ordering::Relaxed)
            });
            most
        })
    };
    let auth = format!("Bearer {token}");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(CALLS));
    let started = Instant::now();
    let workers: Vec<_> = (0..CALLS)
        .map(|i| {
            let auth = auth.clone();
            let barrier = barrier.clone();
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    // "echo: …" so that the peers do not answer each one.
                    let body = json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"send_to_peer","arguments":{"personality":format!("p{}", i % PEERS),"message":format!("echo: n{i}")}}});
                    barrier.wait();
                    let r = post(port, &[("X-IAPeer-Identity", "echo-alice"), ("Authorization", &auth)], &body.to_string());
                    (i, r.status, r.json())
                })
                .unwrap()
        })
        .collect();
    let mut delivered = Vec::new();
    for w in workers {
        let (i, status, v) = w.join().expect("a client thread failed (no answer?)");
        assert_eq!(status, 200, "call {i}: {v}");
        assert_eq!(v["id"], i);
        assert_eq!(
            v["result"]["structuredContent"]["ok"], true,
            "call {i}: {v}"
        );
        delivered.push(i);
    }
    let elapsed = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let busiest = sampler.join().unwrap();
    eprintln!(
        "{CALLS} concurrent calls to {PEERS} peers: all delivered in {elapsed:?}; daemon threads {at_rest} at rest, at most {busiest} during the burst"
    );
    // The preparation pool (4) is the only thing that may grow.
    assert!(
        busiest <= at_rest + 4,
        "threads grew with the load: {at_rest} at rest, {busiest} at most"
    );
    assert_eq!(
        mcp_deliveries(&env, "echo-alice", &format!("p{}", 0)),
        CALLS / PEERS
    );
    for p in 0..PEERS {
        let pane = env.pane(&format!("echo-p{p}"));
        for i in delivered.iter().filter(|i| *i % PEERS == p) {
            assert!(
                pane.contains(&format!("from alice: echo: n{i}\r")),
                "n{i} missing from p{p}'s pane\n{}",
                env.diagnostics()
            );
        }
    }
    assert_daemon_answers(&env);
}

#[test]
fn absurd_content_length_does_not_take_the_daemon_down() {
    let env = daemon(&[]);
    let port = env.port();
    let head = format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: 4611686018427387904\r\n\r\n{{\"jsonrpc\":\"2.0\"");
    let r = exchange(port, head.as_bytes());
    assert_eq!(r.status, 413);
    assert_eq!(
        r.json(),
        json!({"error":"request body too large (limit 1048576 bytes)"})
    );
    assert_daemon_answers(&env);
    let pid = env.daemon.as_ref().unwrap().id();
    // The client is told the connection ends with the answer.
    assert!(
        r.headers
            .iter()
            .any(|(n, v)| n == "connection" && v == "close"),
        "{:?}",
        r.headers
    );
    assert!(common::alive(pid), "{}", env.diagnostics());
}
