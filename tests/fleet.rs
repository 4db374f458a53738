//! The fleet API (spec 10 §1, issue 10 item 1) against a real daemon: every endpoint and
//! every error status of the spec, over raw TCP, with echo peers and a human peer.

use crate::common;

use common::TestEnv;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// An answer: status, lowercase headers, body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// One request with `extra` header lines; the Host header is the daemon's unless `extra`
/// names one.
pub(crate) fn request(port: u16, method: &str, path: &str, extra: &[&str], body: &[u8]) -> Answer {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !extra
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for h in extra {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&raw)
}

/// An HTTP answer as it came over the wire: status line, header lines, blank line, body.
pub(crate) fn parse(raw: &[u8]) -> Answer {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

/// [`request`] as the owner's script sends it: with the fleet token read from its file.
pub(crate) fn owner_request(
    env: &TestEnv,
    method: &str,
    path: &str,
    extra: &[&str],
    body: &[u8],
) -> Answer {
    let auth = env.fleet_auth();
    let mut headers = vec![auth.as_str()];
    headers.extend_from_slice(extra);
    request(env.port(), method, path, &headers, body)
}

/// `GET path` with the fleet token.
pub(crate) fn get(env: &TestEnv, path: &str) -> Answer {
    owner_request(env, "GET", path, &[], b"")
}

/// `POST path` with a JSON body and the fleet token.
pub(crate) fn post(env: &TestEnv, path: &str, body: Value) -> Answer {
    owner_request(
        env,
        "POST",
        path,
        &["Content-Type: application/json"],
        body.to_string().as_bytes(),
    )
}

/// alice and bob on the echo stand-in, `you` on the human runtime, the daemon up.
fn team() -> TestEnv {
    team_with(&[])
}

/// [`team`] with these daemon environment variables.
pub(crate) fn team_with(env_vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in env_vars {
        env.set(k, v);
    }
    env.create_echo("alice");
    env.create_echo("bob");
    env.ok(&["create", "you", "--runtime", "human"]);
    env.start_daemon();
    env.wait_until("the human peer is up", Duration::from_secs(30), |e| {
        e.status_of("you", "human") == "live"
    });
    env
}

/// Rows without the one field that moves between two reads of a live team.
fn steady(rows: &Value) -> Value {
    let mut rows = rows.clone();
    for r in rows.as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("last_active_ms");
    }
    rows
}

/// The snapshot's `rows` without what only the daemon adds (each runtime's `actions`, which
/// every runtime has), as `list --json` prints them.
fn as_listed(rows: &Value) -> Value {
    let mut rows = steady(rows);
    for rt in rows
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .flat_map(|r| r["runtimes"].as_array_mut().unwrap())
    {
        let actions = rt.as_object_mut().unwrap().remove("actions");
        assert!(actions.is_some_and(|a| a.is_array()), "{rt}");
    }
    rows
}

/// An event-stream client: the answer head, then frames as they come.
struct Stream {
    reader: BufReader<TcpStream>,
}

/// One SSE frame: `(event, id, data)`, or a comment as `(":<text>", 0, Null)`.
type Frame = (String, u64, Value);

impl Stream {
    /// Open the stream as the owner's script does, with the fleet token.
    fn open(env: &TestEnv, query: &str, extra: &[&str]) -> Stream {
        let port = env.port();
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut head = format!(
            "GET /fleet/v1/events{query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{}\r\n",
            env.fleet_auth()
        );
        for h in extra {
            head.push_str(h);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).unwrap();
        let mut reader = BufReader::new(s);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let mut saw_type = false;
        loop {
            let mut l = String::new();
            reader.read_line(&mut l).unwrap();
            if l.to_ascii_lowercase()
                .starts_with("content-type: text/event-stream")
            {
                saw_type = true;
            }
            if l == "\r\n" {
                break;
            }
        }
        assert!(saw_type, "an event stream is text/event-stream");
        Stream { reader }
    }

    /// The next frame or comment.
    fn next(&mut self) -> Frame {
        let (mut event, mut id, mut data) = (String::new(), 0, Value::Null);
        loop {
            let mut l = String::new();
            let n = self.reader.read_line(&mut l).expect("a frame within 30 s");
            assert!(n > 0, "the stream ended");
            let l = l.trim_end_matches('\n');
            if l.is_empty() {
                return (event, id, data);
            }
            if let Some(c) = l.strip_prefix(':') {
                event = format!(":{}", c.trim());
            } else if let Some(v) = l.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = l.strip_prefix("id: ") {
                id = v.parse().unwrap();
            } else if let Some(v) = l.strip_prefix("data: ") {
                data = serde_json::from_str(v).unwrap();
            }
        }
    }

    /// Frames until `: connected` (the replay).
    fn replay(&mut self) -> Vec<Frame> {
        let mut out = Vec::new();
        loop {
            let f = self.next();
            if f.0 == ":connected" {
                return out;
            }
            out.push(f);
        }
    }

    /// Frames until one matches `want` (at most 30 s).
    fn until(&mut self, want: impl Fn(&Frame) -> bool) -> Frame {
        let start = Instant::now();
        loop {
            assert!(start.elapsed() < Duration::from_secs(30), "no such frame");
            let f = self.next();
            if want(&f) {
                return f;
            }
        }
    }
}

/// The snapshot's rows are `list --json`'s rows; its host block is this daemon; `router.json`
/// advertises the API.
#[test]
fn snapshot_rows_are_the_list_json_rows() {
    let env = team();
    let router: Value =
        serde_json::from_str(&std::fs::read_to_string(env.router_json()).unwrap()).unwrap();
    assert_eq!(router["fleet"], 1, "{router}");
    let a = get(&env, "/fleet/v1/snapshot");
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert!(a.body.ends_with(b"}\n"), "JSON bodies end with a newline");
    let snap = a.json();
    assert_eq!(snap["api"], 1);
    assert_eq!(snap["version"], env!("CARGO_PKG_VERSION"));
    assert!(snap["ts"].as_str().unwrap().ends_with('Z'));
    let host = &snap["host"];
    assert_eq!(host["pid"], env.daemon.as_ref().unwrap().id());
    assert!(host["startedAt"].as_u64().unwrap() > 0);
    assert!(host["uptimeSecs"].is_u64());
    assert!(host["memory"]["rssBytes"].as_u64().unwrap() > 0);
    assert_eq!(as_listed(&snap["peers"]), steady(&env.list()));
    let names: Vec<&str> = snap["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["personality"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice", "bob", "you"]);
    // HEAD is GET without the body.
    let h = owner_request(&env, "HEAD", "/fleet/v1/snapshot", &[], b"");
    assert_eq!((h.status, h.body.len()), (200, 0));
}

/// `send` from the only human (the default `from`) wakes alice; her row and newest events
/// follow; the event stream carries the delivery live, after its replay.
#[test]
fn send_peer_and_events() {
    let env = team();
    let mut stream = Stream::open(&env, "?replay=3", &[]);
    let replay = stream.replay();
    assert!(replay.len() <= 3, "{replay:?}");
    let a = post(
        &env,
        "/fleet/v1/send",
        json!({"personality": "alice", "message": "hello from the fleet", "topic": "t1"}),
    );
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let sent = a.json();
    assert_eq!(sent["from"], "human-you");
    assert_eq!(sent["result"]["ok"], true);
    assert_eq!(sent["result"]["delivered_to"]["personality"], "alice");
    assert_eq!(sent["result"]["woke"], true);
    let delivery = stream.until(|f| f.0 == "delivery" && f.2["to"] == "alice");
    assert_eq!(delivery.2["src"], "delivery");
    assert_eq!(delivery.2["caller"], "human-you");
    assert_eq!(delivery.2["ok"], "true");
    assert_eq!(delivery.2["id"], delivery.1);
    assert!(delivery.1 > 1_700_000_000_000, "ids are epoch ms");
    // alice echoes back to the human: its delivery comes live too, with a larger id.
    let echo = stream.until(|f| f.0 == "delivery" && f.2["to"] == "you");
    assert!(echo.1 > delivery.1);

    let p = get(&env, "/fleet/v1/peers/alice");
    assert_eq!(p.status, 200);
    let p = p.json();
    assert_eq!(p["api"], 1);
    assert_eq!(p["peer"]["personality"], "alice");
    assert_eq!(p["peer"]["runtimes"][0]["status"], "live");
    let events = p["events"].as_array().unwrap();
    assert!(events.len() <= 50);
    assert!(
        events
            .iter()
            .any(|e| e["ev"] == "wake" && e["identity"] == "echo-alice"),
        "{events:?}"
    );
    assert!(events
        .iter()
        .any(|e| e["ev"] == "delivery" && e["to"] == "alice" && e["src"] == "delivery"));
    assert!(events.iter().all(|e| e.to_string().contains("alice")));

    // A reconnect with Last-Event-ID gets what came after that id, then goes live.
    let mut again = Stream::open(&env, "", &[&format!("Last-Event-ID: {}", delivery.1)]);
    let missed = again.replay();
    assert!(
        missed.iter().any(|f| f.1 == echo.1),
        "the echo's delivery is replayed: {missed:?}"
    );
    assert!(missed.iter().all(|f| f.1 > delivery.1));
    // replay=N replays the newest N (here: more than happened, clamped to what is held).
    let mut all = Stream::open(&env, "?replay=100000", &[]);
    let held = all.replay();
    assert!(held.len() >= 4 && held.len() <= 500, "{}", held.len());
    assert!(held.windows(2).all(|w| w[0].1 < w[1].1), "ids increase");
}

/// The lifecycle verbs do what the CLI verbs do, with the control protocol's answers.
#[test]
fn verbs_act_like_the_cli() {
    let env = team();
    let verb = |v: &str, body: Value| post(&env, &format!("/fleet/v1/peers/bob/{v}"), body);
    let a = verb("wake", json!({}));
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["identity"], "echo-bob");
    assert_eq!(
        a.json()["woke"],
        true,
        "bob was asleep: this wake started it"
    );
    assert_eq!(env.status_of("bob", "echo"), "live");
    let again = verb("wake", json!({}));
    assert_eq!(again.json()["woke"], false, "already live: nothing to wake");
    // A human's inbox writer runs on pipes: no screen to show, said as such (it was 50
    // blank rows).
    let a = get(&env, "/fleet/v1/peers/you/screen");
    assert_eq!(a.status, 400, "{}", String::from_utf8_lossy(&a.body));
    assert!(a.json()["error"]
        .as_str()
        .unwrap()
        .contains("it has no screen"));
    let a = verb("interrupt", json!({"runtime": "echo"}));
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["interrupted"], true);
    // The echo stand-in cannot compact: refused as the CLI is (invalid argument, 400).
    let a = verb("compact", json!({}));
    assert_eq!(a.status, 400, "{}", String::from_utf8_lossy(&a.body));
    assert!(a.error().contains("compact"), "{}", a.error());
    let pid = |e: &TestEnv| {
        e.control(r#"{"op":"list"}"#)["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["identity"] == "echo-bob")
            .map(|s| s["pid"].as_u64().unwrap())
    };
    let before = pid(&env);
    let a = verb("new", json!({}));
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["identity"], "echo-bob");
    assert_ne!(pid(&env), before, "a fresh session");
    let a = verb("refresh", json!({"topic": "ignored"}));
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["marked"], json!(["echo-bob"]));
    let a = verb("stop", json!({}));
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["stopped"], json!(["echo-bob"]));
    assert_eq!(env.status_of("bob", "echo"), "stopped");
    // No screen, and the way out names start (a wake is refused for a stopped peer).
    let a = get(&env, "/fleet/v1/peers/bob/screen");
    assert!(
        a.json()["error"]
            .as_str()
            .unwrap()
            .contains("it is stopped: POST /fleet/v1/peers/bob/start"),
        "{}",
        String::from_utf8_lossy(&a.body)
    );
    // The operation failed: the peer is stopped (502, with the control code).
    let a = verb("wake", json!({}));
    assert_eq!(a.status, 502, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["code"], "stopped");
    assert!(a.error().contains("bob"), "{}", a.error());
    let a = verb("start", json!({}));
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["cleared"], json!(["echo-bob"]));
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    // Interrupt needs a live session: 502.
    assert_eq!(verb("interrupt", json!({})).status, 502);
}

/// Every error status of spec 10 §1 from the real daemon, each as `{"error":…}` + newline.
#[test]
fn every_error_of_the_spec() {
    let mut env = team();
    let port = env.port();
    let check = |a: &Answer, status: u16, says: &str| {
        assert_eq!(a.status, status, "{}", String::from_utf8_lossy(&a.body));
        assert_eq!(a.header("content-type"), Some("application/json"));
        assert!(
            a.body.ends_with(b"\n"),
            "{}",
            String::from_utf8_lossy(&a.body)
        );
        assert!(a.error().contains(says), "{:?} lacks {says:?}", a.error());
    };
    // 400 malformed: not JSON, wrong shape, bad replay, bad sender.
    let a = owner_request(&env, "POST", "/fleet/v1/send", &[], b"{not json");
    check(&a, 400, "bad request");
    check(
        &post(&env, "/fleet/v1/send", json!({"message": "x"})),
        400,
        "personality",
    );
    check(
        &post(&env, "/fleet/v1/peers/bob/wake", json!({"runtime": 5})),
        400,
        "bad request",
    );
    check(&get(&env, "/fleet/v1/events?replay=lots"), 400, "replay");
    check(
        &post(
            &env,
            "/fleet/v1/send",
            json!({"personality": "bob", "message": "x", "from": "no such"}),
        ),
        400,
        "from",
    );
    check(
        &post(
            &env,
            "/fleet/v1/peers/bob/refresh",
            json!({"runtime": "claude"}),
        ),
        400,
        "does not declare",
    );
    // A message the router refuses as invalid (empty): 400.
    check(
        &post(
            &env,
            "/fleet/v1/send",
            json!({"personality": "bob", "message": ""}),
        ),
        400,
        "",
    );
    // 403 host and origin.
    check(
        &request(
            port,
            "GET",
            "/fleet/v1/snapshot",
            &["Host: evil.example:80"],
            b"",
        ),
        403,
        "Host",
    );
    check(
        &request(
            port,
            "GET",
            "/fleet/v1/snapshot",
            &["Origin: http://evil.example"],
            b"",
        ),
        403,
        "cross-origin",
    );
    // 404: unknown path (listing the endpoints), unknown peer (read, verb, refresh, send).
    let a = get(&env, "/fleet/v1/nothing");
    check(&a, 404, "GET /fleet/v1/snapshot");
    assert!(a.json()["endpoints"].as_array().unwrap().len() >= 5);
    check(&get(&env, "/fleet/v1/peers/nobody"), 404, "nobody");
    check(
        &post(&env, "/fleet/v1/peers/nobody/wake", json!({})),
        404,
        "nobody",
    );
    check(
        &post(&env, "/fleet/v1/peers/nobody/refresh", json!({})),
        404,
        "nobody",
    );
    check(
        &post(
            &env,
            "/fleet/v1/send",
            json!({"personality": "nobody", "message": "x"}),
        ),
        404,
        "nobody",
    );
    // 405 wrong method, with Allow.
    let a = owner_request(&env, "POST", "/fleet/v1/snapshot", &[], b"");
    check(&a, 405, "GET only");
    assert_eq!(a.header("allow"), Some("GET"));
    check(&get(&env, "/fleet/v1/peers/bob/wake"), 405, "POST only");
    check(&get(&env, "/fleet/v1/send"), 405, "POST only");
    // 413 over 64 KiB.
    let big = json!({"personality": "bob", "message": "x".repeat(70_000)}).to_string();
    check(
        &owner_request(&env, "POST", "/fleet/v1/send", &[], big.as_bytes()),
        413,
        "too large",
    );
    // 502: the operation failed (interrupt needs a live session).
    check(
        &post(&env, "/fleet/v1/peers/alice/interrupt", json!({})),
        502,
        "alice",
    );
    // 500: the registry cannot be read.
    let registry = env.paths().registry();
    let kept = std::fs::read(&registry).unwrap();
    std::fs::write(&registry, b"{ broken").unwrap();
    check(&get(&env, "/fleet/v1/snapshot"), 500, "internal error");
    std::fs::write(&registry, kept).unwrap();
    // Two humans: `send` needs `from` (400); with it, it goes.
    env.ok(&["create", "me", "--runtime", "human"]);
    check(
        &post(
            &env,
            "/fleet/v1/send",
            json!({"personality": "bob", "message": "x"}),
        ),
        400,
        "several natural",
    );
    // 401: without the fleet token, or with a wrong one; the answer says where it is.
    let a = request(port, "GET", "/fleet/v1/snapshot", &[], b"");
    check(&a, 401, "state/iapeer/fleet.token");
    assert_eq!(a.header("www-authenticate"), Some("Bearer"));
    check(
        &request(
            port,
            "POST",
            "/fleet/v1/send",
            &["Authorization: Bearer wrong"],
            b"{}",
        ),
        401,
        "unauthorized",
    );
    // With IAPEER_BEARER_TOKEN set every request needs it, and the file's token is no use.
    let file_token = env.fleet_auth();
    env.stop_daemon();
    env.set("IAPEER_BEARER_TOKEN", "s3cret");
    env.start_daemon();
    let port = env.port();
    let a = request(port, "GET", "/fleet/v1/snapshot", &[], b"");
    check(&a, 401, "Authorization: Bearer");
    assert_eq!(a.header("www-authenticate"), Some("Bearer"));
    check(
        &request(port, "GET", "/fleet/v1/snapshot", &[&file_token], b""),
        401,
        "IAPEER_BEARER_TOKEN",
    );
    check(
        &request(
            port,
            "GET",
            "/fleet/v1/snapshot",
            &["Authorization: Bearer wrong"],
            b"",
        ),
        401,
        "unauthorized",
    );
    let a = request(
        port,
        "GET",
        "/fleet/v1/snapshot",
        &["Authorization: Bearer s3cret"],
        b"",
    );
    assert_eq!(a.status, 200);
}

/// Send `n` refused sends (to a peer that does not exist) over four pipelined control
/// connections: each writes one `delivery.log` line, so `n` bus events, quickly.
fn flood(env: &TestEnv, n: usize) {
    let per = n / 4;
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let sock = env.socket();
            std::thread::spawn(move || {
                let s = std::os::unix::net::UnixStream::connect(sock).unwrap();
                let mut w = s.try_clone().unwrap();
                let writer = std::thread::spawn(move || {
                    let line = r#"{"op":"send","from":"echo-alice","to":"nobody","message":"x"}"#;
                    for _ in 0..per {
                        w.write_all(line.as_bytes()).unwrap();
                        w.write_all(b"\n").unwrap();
                    }
                });
                let mut r = BufReader::new(s);
                for _ in 0..per {
                    let mut l = String::new();
                    assert!(r.read_line(&mut l).unwrap() > 0);
                }
                writer.join().unwrap();
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

/// A client that stops reading is dropped once its queue is full; the router is never held
/// up by it (the flood completes), and a client that reads keeps its stream.
#[test]
fn a_client_that_stops_reading_is_dropped_and_never_slows_the_router() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.start_daemon();
    let slow = Stream::open(&env, "", &[]);
    let raw = slow.reader.get_ref().try_clone().unwrap();
    nix::sys::socket::setsockopt(&raw, nix::sys::socket::sockopt::RcvBuf, &4096).unwrap();
    // The slow stream's remains are read as soon as the daemon closes it: the kernel resets a
    // closed connection whose client reads nothing after about a minute of zero-window probes
    // (`tcp_orphan_retries`), and on a loaded machine the flood takes longer than that (the
    // read after it met a reset, 2 of 2 runs at load 15-19, the flood 6 min).
    let daemon_log = env.paths().daemon_log();
    let mut s = slow.reader;
    let slow_end = std::thread::spawn(move || {
        let closed =
            common::poll_every(Duration::from_millis(50), Duration::from_secs(600), || {
                std::fs::read_to_string(&daemon_log)
                    .unwrap_or_default()
                    .contains("an event stream fell behind; closed")
            });
        // What the kernel had buffered, then the end of the stream.
        let mut rest = Vec::new();
        s.get_mut()
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        closed.then(|| s.read_to_end(&mut rest).map(|_| rest))
    });
    let mut quick = Stream::open(&env, "", &[]);
    assert_eq!(quick.next().0, ":connected");
    // The reading client takes bytes as fast as they come and counts frames afterwards.
    let mut raw_quick = quick.reader.get_ref().try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        // Frames are counted over what was read, keeping a short tail so that a frame split
        // between two reads is counted once.
        let needle = b"event: delivery";
        let mut buf = vec![0u8; 1 << 16];
        let mut window: Vec<u8> = Vec::new();
        let mut n = 0;
        while n < 20_000 {
            let k = raw_quick
                .read(&mut buf)
                .expect("the reading client's stream stays open");
            assert!(k > 0, "the reading client's stream ended after {n} frames");
            window.extend_from_slice(&buf[..k]);
            n += window.windows(needle.len()).filter(|w| w == needle).count();
            let keep = needle.len() - 1;
            window.drain(..window.len().saturating_sub(keep));
        }
        n
    });
    let start = Instant::now();
    flood(&env, 20_000);
    let took = start.elapsed();
    let seen = reader.join().unwrap();
    assert!(
        seen >= 20_000,
        "the reading client got every event ({seen})"
    );
    // The daemon closed the slow stream by itself, while its client still was not reading.
    env.wait_until(
        "the daemon closes the stream that fell behind",
        Duration::from_secs(10),
        |e| {
            e.log("daemon")
                .contains("an event stream fell behind; closed")
        },
    );
    let rest = slow_end
        .join()
        .unwrap()
        .expect("the daemon closed the slow stream (its log says so)")
        .expect("the daemon closed the slow stream");
    let frames = String::from_utf8_lossy(&rest)
        .matches("event: delivery")
        .count();
    assert!(
        frames < 20_000,
        "it was dropped before the end ({frames} frames)"
    );
    // The reading client is still served.
    post(
        &env,
        "/fleet/v1/send",
        json!({"personality": "nobody", "message": "x", "from": "echo-alice"}),
    );
    let f = quick.until(|f| f.0 == "delivery");
    assert_eq!(f.2["to"], "nobody");
    eprintln!("20000 refused sends in {took:?} with a stuck stream attached");
    env.stop_daemon();
}

/// A quiet stream gets `: hb` every 15 s (spec 10 §1), and keeps its place.
#[test]
fn a_quiet_stream_gets_heartbeats() {
    let mut env = TestEnv::new();
    env.start_daemon();
    let mut s = Stream::open(&env, "?replay=5", &[]);
    assert!(s.replay().is_empty(), "nothing happened yet");
    let start = Instant::now();
    assert_eq!(s.next().0, ":hb");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(14) && took < Duration::from_secs(25),
        "{took:?}"
    );
    env.stop_daemon();
}
